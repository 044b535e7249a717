"""The preload library at its edges: loaded but disabled (cwrap's test of
the same name: CODESHIM_DISABLE=1 must leave every program byte-identical
to a run without the library), and libcurl called from another library's
constructor, before the program's main (libfaketime's test of that case).
Each run checks what the program printed and what the upstream received."""

import json
import re

import pytest

from conftest import LIB, REPO, run
import schema_check
from test_core_responses import (CI_TOOL, CSPROG, CURL, KEY, blocks, ci_items,
                                 logs_of, req)

CTOR_LIB = REPO / "build" / "testprogs" / "libctorcurl.so"
# A fixed answer, so both runs of a pair get the same bytes from the fake.
CANNED = {"status": 200, "headers": {"x-request-id": "req_fixed"},
          "body": {"id": "resp_fixed", "object": "response", "status": "completed",
                   "output": [], "model": "m"}}


def received(srv):
    """What the upstream got, minus what varies between runs (the port)."""
    out = []
    for r in srv.requests():
        h = {k: v for k, v in r["headers"].items() if k != "host"}
        out.append((r["method"], r["path"], r["query"], h, r["raw"]))
    return out


def pair(scripted, cmd_of, n_replies=1, env=None):
    """Runs cmd_of(url) without the library and with it disabled; returns
    both (exit code, stdout, what the upstream received)."""
    results = []
    for preload, extra in ((False, {}), (True, {"CODESHIM_DISABLE": "1"})):
        srv = scripted([CANNED] * n_replies)
        e = dict(env or {})
        e.update(extra)
        rc, out, _ = run(cmd_of(srv.url), env=e, preload=preload)
        out = out.replace(srv.url.encode(), b"URL")
        # the server's clock, not the program's bytes: the two runs may
        # fall in different seconds
        out = re.sub(rb"\r\nDate: [^\r\n]*\r\n", b"\r\nDate: (the server's)\r\n", out)
        results.append((rc, out, received(srv)))
    return results


@pytest.mark.parametrize("body", [
    req(blocks("print(1)\n")),                    # would be intercepted
    req("hello", tools=()),                       # never intercepted
    req(blocks("print(1)\n"), stream=True),
])
def test_disabled_curl_cli_is_byte_identical(scripted, body):
    def cmd(url):
        return [CURL, "-sS", "-i", "-w", "\n%{http_code} %{content_type} %{size_download}",
                "-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + KEY,
                url + "/responses", "-d", json.dumps(body)]
    plain, disabled = pair(scripted, cmd)
    assert plain[0] == 0
    assert disabled == plain
    # the native tool reached the upstream untouched: nothing was rewritten
    if body["tools"]:
        assert json.loads(disabled[2][0][4])["tools"] == [CI_TOOL]


@pytest.mark.parametrize("flags", [
    (), ("--body", "copy"), ("--repeat", "2"), ("--dup",), ("--no-writefn",),
    ("--include-header", "--errbuf"),
])
def test_disabled_c_program_is_byte_identical(scripted, tmp_path, flags):
    bf = tmp_path / "body.json"
    bf.write_text(json.dumps(req(blocks("print(1)\n"))))

    def cmd(url):
        rf = tmp_path / "result.json"
        return [CSPROG, "--url", url + "/responses", "--result", rf, "--body-file", bf,
                "--header", "Content-Type: application/json",
                "--header", "Authorization: Bearer " + KEY] + list(flags)
    n = 2 if "--repeat" in flags else 1
    plain, disabled = pair(scripted, cmd, n_replies=n)
    assert plain[0] == 0 and disabled == plain


def test_disabled_pycurl_is_byte_identical(scripted):
    script = ("import pycurl, sys, io, json\n"
              "b = io.BytesIO(); c = pycurl.Curl()\n"
              "c.setopt(pycurl.URL, sys.argv[1] + '/responses')\n"
              "c.setopt(pycurl.HTTPHEADER, ['Content-Type: application/json'])\n"
              "c.setopt(pycurl.POSTFIELDS, sys.argv[2])\n"
              "c.setopt(pycurl.WRITEDATA, b); c.perform()\n"
              "print(c.getinfo(pycurl.RESPONSE_CODE), b.getvalue().decode())\n")
    body = json.dumps(req(blocks("print(1)\n")))
    plain, disabled = pair(scripted, lambda url: ["/usr/bin/python3", "-c", script, url, body])
    assert plain[0] == 0 and disabled == plain


@pytest.mark.parametrize("order", ["codeshim-first", "ctor-first"])
def test_libcurl_from_another_librarys_constructor(tmp_path, order):
    """An intercepted request made before main (offline model) gets the
    code interpreter, whichever library the loader initialises first."""
    body = tmp_path / "body.json"
    out = tmp_path / "out.json"
    body.write_text(json.dumps(req(blocks("print(6 * 7)\n"))))
    libs = [str(LIB), str(CTOR_LIB)]
    if order == "ctor-first":
        libs.reverse()
    rc, _, err = run(["/bin/true"], preload=True,
                     env={"LD_PRELOAD": ":".join(libs), "CODESHIM_OFFLINE": "1",
                          "CTORCURL_URL": "http://127.0.0.1:9/v1/responses",
                          "CTORCURL_BODY": body, "CTORCURL_OUT": out})
    assert rc == 0 and b"ctorcurl: 0" in err, err
    r = json.loads(out.read_text())
    schema_check.validate(r, "Response")
    [ci] = ci_items(r)
    assert logs_of(ci) == "42\n"
