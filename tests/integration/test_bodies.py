"""Request bodies however the program gives them, URLs however it sets them,
and requests made from inside another transfer's callback.

Bodies sent through CURLOPT_READFUNCTION (the curl CLI's -T, pycurl,
Tornado's CurlAsyncHTTPClient, a C program) are read by codeshim once and
intercepted; one that is not codeshim's reaches the upstream byte for
byte, rewound with the program's seek callback or given back when it has
none.  Every test checks what the program and the fake upstream received."""

import json
import tempfile

from conftest import PYTHON, REPO, run, sse_json
import schema_check
from test_core_responses import (ENV, KEY, assert_ci, assert_clean_upstream,
                                 assert_no_internal, blocks, ci_items, req)

CURL = "/usr/bin/curl"
BODYPROG = REPO / "build" / "testprogs" / "bodyprog"


def curl_post_upload(url, body):
    """curl -X POST -T FILE (UPLOAD + INFILESIZE, POST by name) of body's
    JSON: (exit code, stdout, stderr)."""
    with tempfile.NamedTemporaryFile(prefix="codeshim-body-", suffix=".json") as f:
        f.write(json.dumps(body).encode())
        f.flush()
        return run([CURL, "-sS", "-X", "POST", "-T", f.name,
                    "-H", "Content-Type: application/json",
                    "-H", "Authorization: Bearer " + KEY, url], env=ENV)


def one_response(out):
    r = json.loads(out)
    schema_check.validate(r, "Response")
    return r


def assert_ran(r, code, logs):
    [ci] = ci_items(r)
    assert_ci(ci, code, logs)
    assert_no_internal(r)


def bodyprog(url, body, *opts, env=None):
    data = json.dumps(body).encode()
    e = dict(ENV)
    e.update(env or {})
    rc, out, err = run([str(BODYPROG), "--url", url, "--key", KEY] + list(opts), env=e,
                       input=data)
    lines = [ln for ln in err.decode(errors="replace").splitlines() if ln.startswith("rc=")]
    return rc, out, err.decode(errors="replace"), lines, data


# ------------------------------------------------------------- intercepted

def test_curl_post_upload_file_is_intercepted(fake):
    """curl -X POST -T body.json: UPLOAD + INFILESIZE, POST by name."""
    b = req(blocks("print(6 * 7)\n"))
    rc, out, err = curl_post_upload(fake.url + "/responses", b)
    assert rc == 0, err.decode()
    assert_ran(one_response(out), "print(6 * 7)\n", "42\n")
    reqs = assert_clean_upstream(fake, n=2)
    assert reqs[0]["body"]["input"] == b["input"]


PYCURL_READ = r"""
import io, json, sys, pycurl
url, key, sized = sys.argv[1], sys.argv[2], sys.argv[3] == "sized"
body = sys.argv[4].encode()
src, buf = io.BytesIO(body), io.BytesIO()
c = pycurl.Curl()
c.setopt(pycurl.URL, url)
c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json",
                             "Authorization: Bearer " + key])
c.setopt(pycurl.POST, 1)
c.setopt(pycurl.READFUNCTION, lambda n: src.read(min(n, 5)))
if sized:
    c.setopt(pycurl.POSTFIELDSIZE, len(body))
c.setopt(pycurl.WRITEFUNCTION, buf.write)
c.perform()
print(json.dumps({"code": c.getinfo(pycurl.RESPONSE_CODE), "body": buf.getvalue().decode(),
                  "left": len(src.read())}))
"""


def test_pycurl_readfunction_sized_and_chunked(fake):
    """pycurl's READFUNCTION with POSTFIELDSIZE, and without (chunked)."""
    for n, mode in enumerate(("sized", "chunked")):
        b = req(blocks("print(%d + 1)\n" % n))
        rc, out, err = run([PYTHON, "-c", PYCURL_READ, fake.url + "/responses", KEY, mode,
                            json.dumps(b)], env=ENV)
        assert rc == 0, err.decode()
        res = json.loads(out)
        assert res["code"] == 200 and res["left"] == 0, res
        assert_ran(one_response(res["body"]), "print(%d + 1)\n" % n, "%d\n" % (n + 1))
    reqs = assert_clean_upstream(fake, n=4)
    assert reqs[0]["body"]["input"] == req(blocks("print(0 + 1)\n"))["input"]
    assert reqs[2]["body"]["input"] == req(blocks("print(1 + 1)\n"))["input"]


def test_c_readfunction_chunked_and_curlu(fake):
    """A C program's READFUNCTION in 7-byte pieces, chunked, its URL set
    with CURLOPT_CURLU."""
    b = req(blocks("print('via curlu')\n"))
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", b, "--chunked", "--curlu")
    assert rc == 0, err
    assert lines == ["rc=0 code=200 reads=%d seeks=0" % (-(-len(json.dumps(b)) // 7) + 1)], lines
    assert_ran(one_response(out), "print('via curlu')\n", "via curlu\n")
    assert_clean_upstream(fake, n=2)


def test_curlu_url_sized_body_is_intercepted(fake):
    """CURLOPT_CURLU, a sized body with a seek callback: read once, never
    rewound."""
    b = req(blocks("print('u')\n"))
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", b, "--curlu", "--seek")
    assert rc == 0, err
    assert lines == ["rc=0 code=200 reads=%d seeks=0" % -(-len(json.dumps(b)) // 7)], lines
    assert_ran(one_response(out), "print('u')\n", "u\n")
    assert_clean_upstream(fake, n=2)


def test_readfunc_abort_gives_42_and_sends_nothing(fake):
    b = req(blocks("print(1)\n"))
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", b, "--abort-at", "14")
    assert rc == 42, (rc, err)
    assert lines == ["rc=42 code=0 reads=3 seeks=0"], lines
    assert out == b""
    assert fake.requests() == []


# ------------------------------------------------------------ pass-through

NOT_OURS = {"model": "gpt-fake", "input": "Say hello, \u00e9l\u00e8ve.", "tools": [],
            "metadata": {"k": "v" * 40}}


def test_readfunction_not_ours_passes_through_byte_identical(fake):
    """Not ours: with a SEEKFUNCTION the program's own rewinds the body;
    without one codeshim gives back what it read. Twice on one handle:
    the program's read callback is its own again after each perform."""
    for opts in ((), ("--seek",), ("--chunked",), ("--chunked", "--seek")):
        fake.clear()
        rc, out, err, lines, data = bodyprog(fake.url + "/responses", NOT_OURS,
                                             "--repeat", "2", *opts)
        assert rc == 0, (opts, err)
        assert len(lines) == 2 and all(ln.startswith("rc=0 code=200 ") for ln in lines), lines
        if "--seek" in opts:  # codeshim's one rewind, through the program's callback
            assert all(ln.endswith("seeks=1") for ln in lines), lines
        reqs = fake.requests()
        assert [q["raw"].encode() for q in reqs] == [data, data], (opts, reqs)
        assert all(q["method"] == "POST" for q in reqs)
        if "--chunked" in opts:
            assert all("chunked" in q["headers"].get("transfer-encoding", "") for q in reqs)
        else:
            assert all(q["headers"]["content-length"] == str(len(data)) for q in reqs)
        for part in out.decode().replace("}{", "}\n{").splitlines():
            schema_check.validate(json.loads(part), "Response")


def test_readfunc_pause_is_libcurls_and_the_body_arrives_whole(fake):
    """A read callback that pauses before the end of its body: the request
    goes to libcurl (codeshim reads bodies whole), which pauses it as it
    would; the program resumes it from its progress callback and the
    upstream receives every byte, once."""
    rc, out, err, lines, data = bodyprog(fake.url + "/responses", NOT_OURS, "--pause-at",
                                         "21", "--chunked", env={"CODESHIM_LOG": "debug"})
    assert rc == 0, err
    assert lines[0].startswith("rc=0 code=200 "), lines
    assert "pauses=1 resumes=1" in err, err
    assert "its read callback paused before the end of the body" in err, err
    [q] = fake.requests()
    assert q["raw"].encode() == data
    schema_check.validate(json.loads(out), "Response")


def test_over_cap_readfunction_body_passes_through_byte_identical(fake):
    """Larger than CODESHIM_MAX_REQUEST: libcurl's, the same bytes; chunked
    (codeshim read past the cap and gives it back) and sized (never read)."""
    b = req(blocks("print(1)\n"), metadata={"pad": "x" * 500})
    b["input"] += "y" * 6000
    why = {"--chunked": "the body its read callback sends is over CODESHIM_MAX_REQUEST",
           "": "the body its read callback sends is over CODESHIM_MAX_REQUEST (%d bytes, "
               "more than 4096); codeshim did not read it" % len(json.dumps(b))}
    for opts in (("--chunked",), ()):
        fake.clear()
        rc, out, err, lines, data = bodyprog(fake.url + "/responses", b, *opts,
                                             env={"CODESHIM_MAX_REQUEST": "4096",
                                                  "CODESHIM_LOG": "debug"})
        assert rc == 0, err
        assert "passed through POST http://127.0.0.1:%d/v1/responses: %s" % (
            fake.port, why["".join(opts)]) in err, err
        [q] = fake.requests()
        assert q["raw"].encode() == data
        assert len(data) > 4096
        # the fake refuses a hosted tool: the program got the upstream's own answer
        assert lines == [lines[0]] and " code=400 " in lines[0], lines
        assert json.loads(out)["error"]["type"] == "invalid_request_error"


# --------------------------------------------------------------- Tornado

TORNADO = r"""
import asyncio, json, sys
from tornado.curl_httpclient import CurlAsyncHTTPClient
from tornado.httpclient import HTTPRequest
url, key, bodies = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

async def main():
    client = CurlAsyncHTTPClient(max_clients=10)
    chunks = {}
    def fetch(i, b):
        kw = {}
        if b.get("stream"):
            chunks[i] = []
            kw["streaming_callback"] = chunks[i].append
        return client.fetch(HTTPRequest(url, method="POST", body=json.dumps(b),
                                        headers={"Content-Type": "application/json",
                                                 "Authorization": "Bearer " + key},
                                        request_timeout=60, **kw), raise_error=False)
    rs = await asyncio.gather(*[fetch(i, b) for i, b in enumerate(bodies)])
    out = []
    for i, r in enumerate(rs):
        body = b"".join(chunks[i]) if i in chunks else (r.body or b"")
        out.append({"code": r.code, "ctype": r.headers.get("Content-Type"),
                    "body": body.decode(), "error": str(r.error) if r.error else None})
    client.close()
    print(json.dumps(out))

asyncio.run(main())
"""


def test_tornado_curl_async_three_concurrent_one_streamed(fake):
    """Tornado's CurlAsyncHTTPClient: READFUNCTION + IOCTLFUNCTION +
    POSTFIELDSIZE on a multi handle driven by socket_action and timers.
    Three intercepted at once, and beside them one that is not codeshim's,
    rewound through Tornado's IOCTLFUNCTION and sent as it was."""
    bs = [req(blocks("print(%d * 11)\n" % k)) for k in (1, 2)]
    bs.append(req(blocks("print('streamed')\n"), stream=True))
    rc, out, err = run([PYTHON, "-c", TORNADO, fake.url + "/responses", KEY,
                        json.dumps(bs + [NOT_OURS])], env=ENV, timeout=90)
    assert rc == 0, err.decode()
    res = json.loads(out)
    plain = res.pop()
    assert plain["code"] == 200 and plain["error"] is None, plain
    schema_check.validate(json.loads(plain["body"]), "Response")
    raw = json.dumps(NOT_OURS)
    assert [q["raw"] for q in fake.requests() if q["body"].get("input") == NOT_OURS["input"]
            ] == [raw]

    class Ours:  # the upstream's requests but the one passed through
        def requests(self):
            return [q for q in fake.requests() if q["raw"] != raw]
    for k, r in enumerate(res[:2]):
        assert r["code"] == 200 and r["error"] is None, r
        assert r["ctype"].startswith("application/json")
        assert_ran(one_response(r["body"]), "print(%d * 11)\n" % (k + 1), "%d\n" % (11 * (k + 1)))
    s = res[2]
    assert s["code"] == 200 and s["ctype"].startswith("text/event-stream"), s
    events = sse_json(s["body"].encode())
    schema_check.validate_sse_responses(events)
    final = events[-1][1]
    assert final["type"] == "response.completed"
    schema_check.validate(final["response"], "Response")
    assert_ran(final["response"], "print('streamed')\n", "streamed\n")
    reqs = assert_clean_upstream(Ours(), n=6)
    assert sorted(json.dumps(q["body"]["input"]) for q in reqs if isinstance(
        q["body"]["input"], str)) == sorted(json.dumps(b["input"]) for b in bs)


# ------------------------------------------------- inside another's callback

def test_request_inside_a_write_callback_is_intercepted(fake):
    """A handle made, set up and performed inside the write callback of a
    transfer libcurl is running is the program's, and intercepted."""
    b = req(blocks("print('inner')\n"))
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", b, "--inside",
                                      fake.url + "/models")
    assert rc == 0, err
    assert "outer rc=0 inner=1" in err
    assert_ran(one_response(out), "print('inner')\n", "inner\n")
    reqs = fake.requests()
    assert [q["path"] for q in reqs] == ["/v1/models", "/v1/responses", "/v1/responses"]
    assert not any(t.get("type") == "code_interpreter"
                   for q in reqs[1:] for t in q["body"].get("tools") or [])


def test_request_inside_a_write_callback_offline_reaches_no_network(fake):
    """CODESHIM_OFFLINE=1: the inner request is answered offline, and one
    that is not codeshim's is refused; only the outer GET is sent."""
    b = req(blocks("print('offline inner')\n"))
    env = {"CODESHIM_OFFLINE": "1"}
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", b, "--inside",
                                      fake.url + "/models", env=env)
    assert rc == 0, err
    assert_ran(one_response(out), "print('offline inner')\n", "offline inner\n")
    rc, out, err, lines, _ = bodyprog(fake.url + "/responses", NOT_OURS, "--inside",
                                      fake.url + "/models", env=env)
    assert rc == 0, err
    assert len(lines) == 1 and lines[0].startswith("rc=0 code=400 "), lines
    assert json.loads(out)["error"]["code"] == "codeshim_offline"
    assert [q["path"] for q in fake.requests()] == ["/v1/models", "/v1/models"]


# ------------------------------------------------------------ multi, pycurl

PYCURL_MULTI = r"""
import io, json, sys, pycurl
url, key, bodies = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
m = pycurl.CurlMulti()
c = pycurl.Curl()
out = []
for spec in bodies:
    data = spec["body"].encode()
    src, buf = io.BytesIO(data), io.BytesIO()
    def rd(n, src=src):
        if spec.get("abort") and src.tell() >= 10:
            return pycurl.READFUNC_ABORT
        return src.read(min(n, 9))
    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json",
                                 "Authorization: Bearer " + key])
    c.setopt(pycurl.POST, 1)
    c.setopt(pycurl.READFUNCTION, rd)
    c.setopt(pycurl.POSTFIELDSIZE, len(data) if spec.get("sized") else -1)
    c.setopt(pycurl.WRITEFUNCTION, buf.write)
    m.add_handle(c)
    result = None
    while result is None:
        while m.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        n, ok, bad = m.info_read()
        if ok:
            result = 0
        elif bad:
            result = bad[0][1]
        else:
            m.select(1.0)
    m.remove_handle(c)
    out.append({"rc": result, "code": c.getinfo(pycurl.RESPONSE_CODE),
                "body": buf.getvalue().decode(), "left": len(src.read())})
print(json.dumps(out))
"""


def test_pycurl_multi_readfunction_bodies(fake):
    """On a multi handle the body is read inside the program's
    curl_multi_perform: ours is intercepted; one that is not (no seek or
    ioctl callback) reaches the upstream whole, twice on one handle (the
    program's callback its own again after remove_handle); an abort is 42."""
    ours = json.dumps(req(blocks("print('multi')\n")))
    plain = json.dumps(NOT_OURS)
    specs = [{"body": ours}, {"body": plain, "sized": True}, {"body": plain},
             {"body": ours, "abort": True}]
    rc, out, err = run([PYTHON, "-c", PYCURL_MULTI, fake.url + "/responses", KEY,
                        json.dumps(specs)], env=ENV)
    assert rc == 0, err.decode()
    res = json.loads(out)
    assert [r["rc"] for r in res] == [0, 0, 0, 42], res
    assert res[0]["code"] == 200 and res[0]["left"] == 0
    assert_ran(one_response(res[0]["body"]), "print('multi')\n", "multi\n")
    for r in res[1:3]:
        assert r["code"] == 200 and r["left"] == 0, r
        schema_check.validate(json.loads(r["body"]), "Response")
    reqs = fake.requests()
    assert len(reqs) == 4, [q["raw"][:80] for q in reqs]
    assert [q["raw"] for q in reqs[2:]] == [plain, plain]
    assert "chunked" not in reqs[2]["headers"].get("transfer-encoding", "")
    assert "chunked" in reqs[3]["headers"].get("transfer-encoding", "")


def test_containers_create_body_from_a_read_callback(fake):
    """curl -X POST -T to /containers: codeshim's own Containers API reads
    the body from the read callback too; nothing reaches the upstream."""
    rc, out, err = curl_post_upload(fake.url + "/containers", {"name": "from -T"})
    assert rc == 0, err.decode()
    c = json.loads(out)
    schema_check.validate(c, "ContainerResource")
    assert c["name"] == "from -T" and c["id"].startswith("cntr_")
    assert fake.requests() == []
