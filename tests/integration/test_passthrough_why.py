"""CODESHIM_LOG=debug: a request to a model path that codeshim does not
take goes to the upstream untouched and leaves exactly one log line saying
why; a request elsewhere leaves none.  The curl CLI under LD_PRELOAD
against the scripted fake: what the fake received is byte for byte what
curl sent, and curl prints what it prints without codeshim."""

import json

import pytest

from conftest import run

KEY = "sk-passthroughsecret0123456789"
REPLY = {"status": 200, "body": {"ok": True, "note": "from the upstream"}}
LINE = "passed through"


def curl(srv, path, args, env=None, preload=True):
    e = {"CODESHIM_LOG": "debug", "OPENAI_API_KEY": KEY}
    e.update(env or {})
    return run(["/usr/bin/curl", "-sS", "-H", "Authorization: Bearer " + KEY]
               + args + [srv.url + path], env=e, preload=preload)


def lines(err):
    return [ln for ln in err.decode("utf-8", "replace").splitlines() if LINE in ln]


BODY_CASES = [
    # (id, path, body, extra env, expected text in the line)
    ("no_tools", "/responses", {"model": "m", "input": "hello"}, {},
     'no code_interpreter tool (no "tools")'),
    ("typo", "/responses",
     {"model": "m", "input": "x",
      "tools": [{"type": "function", "name": "f"}, {"type": "code_interpeter"}]}, {},
     'no code_interpreter tool: tools[1] has type "code_interpeter"; did you mean "code_interpreter"?'),
    ("other_tools", "/chat/completions",
     {"model": "m", "messages": [], "tools": [{"type": "function"}]}, {},
     'no code_interpreter tool ("tools" has 1 entry)'),
    ("tools_object", "/responses",
     {"model": "m", "tools": {"type": "code_interpreter"}}, {},
     '"tools" is an object, not an array'),
    ("not_json", "/responses", "code_interpreter, please", {}, "the body is not JSON"),
    ("not_object", "/chat/completions", ["code_interpreter"], {},
     "the body is JSON but an array, not an object"),
    ("too_large", "/responses",
     {"model": "m", "input": "y" * 5000, "tools": [{"type": "code_interpreter"}]},
     {"CODESHIM_MAX_REQUEST": "4096"},
     "the body is over CODESHIM_MAX_REQUEST (more than 4096 bytes)"),
]


@pytest.mark.parametrize("case", BODY_CASES, ids=[c[0] for c in BODY_CASES])
def test_reason_logged_once_and_body_forwarded(scripted, lib, case):
    _, path, body, env, expect = case
    raw = body if isinstance(body, str) else json.dumps(body)
    srv = scripted([REPLY, REPLY])
    rc, out, err = curl(srv, path, ["-d", raw, "-H", "Content-Type: application/json"], env)
    assert rc == 0, err
    got = lines(err)
    assert len(got) == 1, err
    assert "POST " + srv.url + path + ": " + expect in got[0]
    reqs = srv.requests()
    assert len(reqs) == 1
    assert reqs[0]["method"] == "POST" and reqs[0]["path"] == "/v1" + path
    assert reqs[0]["raw"] == raw
    assert reqs[0]["headers"]["authorization"] == "Bearer " + KEY
    # and the program saw what it sees without codeshim
    rc0, out0, _ = curl(srv, path, ["-d", raw, "-H", "Content-Type: application/json"],
                        env, preload=False)
    assert (rc0, out0) == (rc, out)
    assert KEY not in err.decode() and "hello" not in err.decode()


def test_not_post(scripted, lib):
    srv = scripted([REPLY])
    raw = json.dumps({"tools": [{"type": "code_interpreter"}]})
    rc, out, err = curl(srv, "/responses", ["-X", "PUT", "-d", raw])
    assert rc == 0, err
    got = lines(err)
    assert len(got) == 1 and "PUT " + srv.url + "/responses: not a POST (PUT)" in got[0], err
    reqs = srv.requests()
    assert [(r["method"], r["raw"]) for r in reqs] == [("PUT", raw)]


def test_get_without_body(scripted, lib):
    srv = scripted([REPLY])
    rc, out, err = curl(srv, "/chat/completions", [])
    assert rc == 0, err
    got = lines(err)
    assert len(got) == 1 and "not a POST (GET)" in got[0], err
    assert [r["method"] for r in srv.requests()] == ["GET"]


def test_multipart_body(scripted, lib):
    srv = scripted([REPLY])
    rc, out, err = curl(srv, "/responses", ["-F", "tools=code_interpreter"])
    assert rc == 0, err
    got = lines(err)
    assert len(got) == 1 and "no body codeshim can read" in got[0], err
    reqs = srv.requests()
    assert len(reqs) == 1 and "code_interpreter" in reqs[0]["raw"]


def test_container_of_the_upstream(scripted, lib):
    srv = scripted([REPLY])
    rc, out, err = curl(srv, "/containers/cntr_upstream1?after=x", [])
    assert rc == 0, err
    got = lines(err)
    assert len(got) == 1, err
    assert got[0].endswith("GET " + srv.url + "/containers/cntr_upstream1: "
                           "container cntr_upstream1 is not one codeshim made")
    assert [(r["method"], r["path"], r["query"]) for r in srv.requests()] == \
        [("GET", "/v1/containers/cntr_upstream1", "after=x")]


def test_other_paths_and_info_level_are_quiet(scripted, lib):
    srv = scripted([REPLY, REPLY])
    rc, _, err = curl(srv, "/models", [])
    assert rc == 0 and lines(err) == [], err
    rc, _, err = curl(srv, "/responses", ["-d", "{}"], {"CODESHIM_LOG": "info"})
    assert rc == 0 and lines(err) == [], err
    assert len(srv.requests()) == 2


def test_taken_request_has_no_pass_line(fake, lib):
    raw = json.dumps({"model": "fake-model", "input": "say hi",
                      "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]})
    rc, out, err = curl(fake, "/responses", ["-d", raw, "-H", "Content-Type: application/json"],
                        {"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    assert lines(err) == [], err
    assert json.loads(out)["object"] == "response"
