"""codeshim core: how the synthetic answer reaches the program.

Mostly through build/testprogs/csprog (tests/integration/progs/csprog.c), an
ordinary libcurl program whose flags pick one delivery or handle-life-cycle
case, and the curl CLI.  Where libcurl's own behaviour is the reference, the
same program is run on a plain (pass-through) transfer and compared."""

import json

import pytest

from conftest import run
import schema_check
from test_core_responses import (
    ENV, Recorded, assert_ci, assert_clean_upstream, assert_no_internal, blocks,
    ci_items, curl_cmd, final_text, req, run_csprog)

CODE = "print(6 * 7)\n"
BODY = req(blocks(CODE))


def check_answer(text, code=CODE, logs="42\n"):
    """text: the body the program got; must be our synthetic Response."""
    r = json.loads(text)
    schema_check.validate(r, "Response")
    [ci] = ci_items(r)
    assert_ci(ci, code, logs)
    assert_no_internal(r)
    assert final_text(r) == "Done. Tool said: " + logs
    return r


def header_lines(raw):
    assert raw.endswith("\r\n\r\n"), raw
    return raw[:-4].split("\r\n")


def header(raw, name):
    for line in header_lines(raw)[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def baseline(fake, tmp_path, *flags):
    """The same program on a plain transfer (no code_interpreter tool, so
    codeshim passes it through): what real libcurl reports."""
    _, _, _, res = run_csprog(req("Hello", tools=()), *flags, url=fake.url + "/responses",
                              tmp=str(tmp_path))
    fake.clear()
    return res["results"][0]


# ----------------------------------------------------- callbacks and getinfo

def test_write_and_header_callbacks_and_getinfo(fake, tmp_path):
    base = baseline(fake, tmp_path, "--errbuf")
    _, _, _, res = run_csprog(BODY, "--errbuf", url=fake.url + "/responses",
                              tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["errbuf"] == ""
    r = check_answer(x["body"])
    # headers: status line first, blank line last, each line its own call
    lines = header_lines(x["headers"])
    assert lines[0] == "HTTP/1.1 200 OK"
    assert x["hdr_calls"] == len(lines) + 1
    assert header(x["headers"], "Content-Type") == "application/json"
    assert header(x["headers"], "Content-Length") == str(len(x["body"].encode()))
    assert header(x["headers"], "x-request-id")  # the upstream's headers pass on
    assert header(x["headers"], "Transfer-Encoding") is None
    # getinfo after the transfer
    assert x["getinfo_rc"] == 0
    assert x["code"] == 200
    assert x["ctype"] == "application/json"
    assert x["url"] == fake.url + "/responses"
    assert x["scheme"] == base["scheme"]
    assert x["http_version"] == base["http_version"]
    assert x["size_dl"] == x["size_dl_t"] == len(x["body"].encode())
    assert x["total_time"] > 0 and x["total_time_t"] > 0
    assert abs(x["total_time"] * 1e6 - x["total_time_t"]) <= 1000
    # getinfo from inside the header callback
    assert x["in_header_first_code"] == 200
    assert x["in_header_last_code"] == 200
    assert x["in_header_last_ctype"] == "application/json"
    assert x["in_header_last_url"] == fake.url + "/responses"
    assert r["id"].startswith("resp_")
    assert_clean_upstream(fake, n=2)


def test_headerdata_without_headerfunction(fake, tmp_path):
    """HEADERDATA alone: headers go through the write callback with
    HEADERDATA as its userdata, the body with WRITEDATA."""
    base = baseline(fake, tmp_path, "--no-headerfn", "--headerdata")
    assert base["hdr_calls"] > 0  # libcurl's own behaviour, as reference
    _, _, _, res = run_csprog(BODY, "--no-headerfn", "--headerdata",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0
    check_answer(x["body"])
    assert header_lines(x["headers"])[0] == "HTTP/1.1 200 OK"
    assert x["hdr_calls"] == len(header_lines(x["headers"])) + 1
    assert not x["body"].startswith("HTTP/")
    assert_clean_upstream(fake, n=2)


def test_no_header_delivery_without_headerdata(fake, tmp_path):
    """Neither HEADERFUNCTION nor HEADERDATA: headers go nowhere."""
    _, _, _, res = run_csprog(BODY, "--no-headerfn", url=fake.url + "/responses",
                              tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["hdr_calls"] == 0 and x["headers"] == ""
    check_answer(x["body"])
    assert x["code"] == 200


def test_curlopt_header_puts_headers_in_body(fake, tmp_path):
    base = baseline(fake, tmp_path, "--include-header")
    assert base["body"].startswith("HTTP/1.1 ")
    _, _, _, res = run_csprog(BODY, "--include-header", url=fake.url + "/responses",
                              tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0
    head, sep, body = x["body"].partition("\r\n\r\n")
    assert sep and head.startswith("HTTP/1.1 200 OK\r\n")
    assert head + "\r\n\r\n" == x["headers"]  # the header callback got them too
    check_answer(body)
    assert "Content-Length: %d" % len(body.encode()) in head
    assert_clean_upstream(fake, n=2)


def test_short_write_is_write_error(fake, tmp_path):
    base = baseline(fake, tmp_path, "--short-write", "--errbuf")
    assert base["rc"] == 23
    _, _, _, res = run_csprog(BODY, "--short-write", "--errbuf",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 23  # CURLE_WRITE_ERROR
    assert x["errbuf"] != ""
    assert x["write_calls"] == 1  # no more data after the refusal
    assert_clean_upstream(fake, n=2)


def test_short_header_write_is_write_error(fake, tmp_path):
    base = baseline(fake, tmp_path, "--short-header", "--errbuf")
    assert base["rc"] == 23
    _, _, _, res = run_csprog(BODY, "--short-header", "--errbuf",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 23
    assert x["errbuf"] == base["errbuf"] != ""
    assert x["hdr_calls"] == 1 and x["write_calls"] == 0 and x["body"] == ""
    assert x["headers"] == "HTTP/1.1 200 OK\r\n"  # the synthetic answer's status line
    assert_clean_upstream(fake, n=2)


@pytest.mark.parametrize("status", [503, 400])
def test_failonerror(fake, tmp_path, status):
    """FAILONERROR on an upstream error: 22, libcurl's message, no body;
    exactly what the same program gets from a plain transfer."""
    flags = ["--failonerror", "--errbuf", "--header", "X-Fake-Status: %d" % status]
    base = baseline(fake, tmp_path, *flags)
    _, _, _, res = run_csprog(BODY, *flags, url=fake.url + "/responses",
                              tmp=str(tmp_path))
    [x] = res["results"]
    assert base["rc"] == x["rc"] == 22  # CURLE_HTTP_RETURNED_ERROR
    assert x["errbuf"] == base["errbuf"] == \
        "The requested URL returned error: %d" % status
    assert x["body"] == "" and x["write_calls"] == 0
    assert x["code"] == status
    [q] = assert_clean_upstream(fake, n=1)
    assert q["headers"]["x-fake-status"] == str(status)


def test_failonerror_with_success(fake, tmp_path):
    _, _, _, res = run_csprog(BODY, "--failonerror", "--errbuf",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["errbuf"] == ""
    check_answer(x["body"])


def test_errbuf_cleared_on_success(fake, tmp_path):
    """libcurl empties ERRORBUFFER when a transfer starts; a program reusing
    a handle after a failure must not see the old message after success."""
    base = baseline(fake, tmp_path, "--errbuf", "--errbuf-prefill")
    assert base["errbuf"] == ""  # real libcurl, as reference
    _, _, _, res = run_csprog(BODY, "--errbuf", "--errbuf-prefill",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0
    check_answer(x["body"])
    assert x["errbuf"] == ""


# --------------------------------------------------------------- body options

@pytest.mark.parametrize("mode", [
    "postfields", "size-before", "size-after", "large-before", "large-after",
    "copy",
    "copy-size"])
def test_body_options(fake, tmp_path, mode):
    """The body is found whichever way it was given: POSTFIELDS with the
    size set before or after it (buffer not NUL-terminated, junk after),
    POSTFIELDSIZE_LARGE, COPYPOSTFIELDS with the source freed at once."""
    _, _, _, res = run_csprog(BODY, "--body", mode, "--errbuf",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert (x["rc"], x["errbuf"]) == (0, "")
    check_answer(x["body"])
    reqs = assert_clean_upstream(fake, n=2)
    assert reqs[0]["body"]["input"] == BODY["input"]
    assert "ZZZZ" not in reqs[0]["raw"]


def test_url_set_after_everything_else(fake, tmp_path):
    _, _, _, res = run_csprog(BODY, "--url-last", "--body", "size-after",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["url"] == fake.url + "/responses"
    check_answer(x["body"])
    assert_clean_upstream(fake, n=2)


# ------------------------------------------------------- default fwrite

def test_default_fwrite_to_writedata_file(fake, tmp_path):
    out = tmp_path / "answer.json"
    _, stdout, _, res = run_csprog(BODY, "--writedata-file", out,
                                   url=fake.url + "/responses", tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["body"] == ""
    text = out.read_text()
    check_answer(text)
    assert x["size_dl"] == len(text.encode())
    assert stdout == b""
    assert_clean_upstream(fake, n=2)


def test_default_fwrite_to_stdout(fake, tmp_path):
    _, stdout, _, res = run_csprog(BODY, "--no-writefn", url=fake.url + "/responses",
                                   tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["code"] == 200
    check_answer(stdout.decode())
    assert_clean_upstream(fake, n=2)


# ------------------------------------------------------ handle life cycle

def test_same_handle_twice(fake, tmp_path):
    """A second perform of the same handle is a new request: new sandbox."""
    body = req(blocks("n = globals().get('n', 0) + 1\nprint(n)\n"))
    _, _, _, res = run_csprog(body, "--repeat", 2, url=fake.url + "/responses",
                              tmp=str(tmp_path))
    a, b = res["results"]
    assert a["rc"] == b["rc"] == 0
    ra = check_answer(a["body"], body["input"].split("```python\n")[1][:-4], "1\n")
    rb = check_answer(b["body"], body["input"].split("```python\n")[1][:-4], "1\n")
    assert ra["id"] != rb["id"]
    assert ci_items(ra)[0]["container_id"] != ci_items(rb)[0]["container_id"]
    assert_clean_upstream(fake, n=4)


def test_reset_then_plain_get(fake, tmp_path):
    """After curl_easy_reset the handle is plain again: a GET goes out as a
    GET, and getinfo answers from that real transfer."""
    _, _, _, res = run_csprog(BODY, "--reset-get", fake.url + "/models",
                              url=fake.url + "/responses", tmp=str(tmp_path))
    first, second = res["results"]
    assert first["rc"] == 0
    check_answer(first["body"])
    assert second["rc"] == 0
    assert second["code"] == 404
    assert second["url"] == fake.url + "/models"
    assert json.loads(second["body"])["error"]["code"] == "unknown_url"
    assert second["size_dl"] == len(second["body"].encode())
    reqs = fake.requests()
    assert len(reqs) == 3
    assert_clean_upstream(Recorded(reqs[:2]), n=2)
    assert (reqs[2]["method"], reqs[2]["path"], reqs[2]["raw"]) == ("GET", "/v1/models", "")


def test_duphandle_of_prepared_handle(fake, tmp_path):
    """A copy made with curl_easy_duphandle is intercepted like the original,
    even after the original is cleaned up."""
    _, _, _, res = run_csprog(BODY, "--dup", "--errbuf", url=fake.url + "/responses",
                              tmp=str(tmp_path))
    [x] = res["results"]
    assert x["rc"] == 0 and x["code"] == 200
    check_answer(x["body"])
    assert x["in_header_last_code"] == 200
    assert_clean_upstream(fake, n=2)


@pytest.mark.parametrize("perform_first", [True, False])
def test_address_reuse_starts_clean(fake, tmp_path, perform_first):
    """A handle cleaned up and a new one at the same address: the new one
    has no recorded body, method or answer of the old one."""
    flags = ["--reuse", fake.url + "/responses"]
    if not perform_first:
        flags.append("--reuse-noperform")
    _, _, _, res = run_csprog(BODY, *flags, url=fake.url + "/responses",
                              tmp=str(tmp_path))
    if not res["same_address"]:
        pytest.skip("malloc did not hand out the same address")
    assert res["fresh_code"] == 0
    plain = res["results"][-1]
    assert plain["rc"] == 0 and plain["code"] == 404
    assert "GET /v1/responses" in json.loads(plain["body"])["error"]["message"]
    reqs = fake.requests()
    assert reqs[-1]["method"] == "GET" and reqs[-1]["raw"] == ""
    if perform_first:
        check_answer(res["results"][0]["body"])
        assert len(reqs) == 3
        assert_clean_upstream(Recorded(reqs[:2]), n=2)
    else:
        assert len(reqs) == 1


def test_threads_each_intercepted(fake, tmp_path):
    """Several threads, each with its own handle, intercepted at once."""
    n = 4
    body = req(blocks("print(@@N@@ * 1000 + 7)\n"))
    _, _, _, res = run_csprog(body, "--threads", n, url=fake.url + "/responses",
                              tmp=str(tmp_path))
    results = res["results"]
    assert [x["thread"] for x in results] == list(range(n))
    containers = set()
    for x in results:
        i = x["thread"]
        assert x["rc"] == 0 and x["code"] == 200
        r = check_answer(x["body"], "print(%d * 1000 + 7)\n" % i, "%d\n" % (i * 1000 + 7))
        containers.add(ci_items(r)[0]["container_id"])
    assert len(containers) == n
    reqs = assert_clean_upstream(fake, n=2 * n)
    sent = sorted(o for q in reqs for o in
                  [it.get("output") for it in q["body"]["input"]
                   if isinstance(q["body"]["input"], list)] if o)
    assert sent == sorted("%d\n" % (i * 1000 + 7) for i in range(n))



# ------------------------------------------------------------ curl CLI

def test_curl_cli_include_writeout_and_header_dump(fake, tmp_path):
    """The curl CLI asks getinfo from its header callback and for -w."""
    dump = tmp_path / "headers.txt"
    rc, out, err = run(curl_cmd(fake.url + "/responses", [
        "-i", "-D", str(dump), "-w",
        "\n%{http_code}|%{content_type}|%{size_download}|%{url_effective}|%{scheme}"
        "|%{http_version}|%{num_headers}"]), env=ENV, input=json.dumps(BODY))
    assert rc == 0, err.decode()
    text = out.decode()
    head, _, rest = text.partition("\r\n\r\n")
    body, _, wo = rest.rpartition("\n")
    code, ctype, size, url, scheme, ver, nh = wo.split("|")
    assert head.startswith("HTTP/1.1 200 OK\r\n")
    check_answer(body)
    assert (code, ctype, url) == ("200", "application/json", fake.url + "/responses")
    assert int(size) == len(body.encode())
    assert scheme.upper() == "HTTP" and ver == "1.1"
    assert int(nh) == len(head.split("\r\n")) - 1
    assert dump.read_bytes().decode() == head + "\r\n\r\n"
    assert_clean_upstream(fake, n=2)


def test_curl_cli_fail_flag(fake):
    """curl -f on an upstream error: exit 22 and libcurl's message, like a
    plain transfer (same server, same header)."""
    hdr = ["-H", "X-Fake-Status: 503"]
    rc0, out0, err0 = run(curl_cmd(fake.url + "/responses", ["-f"] + hdr), env=ENV,
                          input=json.dumps(req("Hi", tools=())))
    rc, out, err = run(curl_cmd(fake.url + "/responses", ["-f"] + hdr), env=ENV,
                       input=json.dumps(BODY))
    assert rc0 == rc == 22
    assert out0 == out == b""
    assert err == err0 == b"curl: (22) The requested URL returned error: 503\n"
    reqs = fake.requests()
    assert len(reqs) == 2
    assert_clean_upstream(Recorded(reqs[1:]), n=1)
