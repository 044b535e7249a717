"""`codeshim --check` with the e2b backend checks e2b, not the local
sandbox: the key is there, the control plane answers with it, the
template makes a sandbox, code runs in it. Exit status 0 only when all of
that holds; the key never appears in what the check prints."""

import socket

import pytest

from conftest import REPO, run
from e2b_helpers import KEY, e2b, env_for  # noqa: F401

LAUNCHER = REPO / "build" / "codeshim"


def check(env, *opts):
    rc, out, err = run([LAUNCHER] + list(opts) + ["--check"], env=env, preload=False)
    out, err = out.decode(), err.decode()
    assert KEY not in out and KEY not in err
    return rc, out, err


def cp_calls(e):
    return [(r["method"], r["path"]) for r in e.requests() if r.get("sandbox") is None]


def test_all_fine(e2b):
    rc, out, err = check(env_for(e2b))
    assert rc == 0, out + err
    assert "the e2b sandbox backend" in out
    assert "bubblewrap" not in out            # not the local sandbox's report
    assert "API key           set (E2B_API_KEY)" in out
    assert "control plane     reachable at %s, the key accepted" % e2b.api_url in out
    assert "template          code-interpreter-v1: sandbox " in out
    assert "printed 42" in out and out.rstrip().endswith("result: code runs on e2b")
    calls = cp_calls(e2b)
    assert calls[0] == ("GET", "/v2/sandboxes") and ("POST", "/sandboxes") in calls
    assert all(r["headers"].get("x-api-key") == KEY for r in e2b.requests()
               if r.get("sandbox") is None)
    assert calls[-1][0] == "DELETE"
    assert e2b.sandboxes() == {}              # the check's sandbox is gone


def test_sandbox_option_selects_e2b(e2b):
    env = env_for(e2b, CODESHIM_SANDBOX=None)
    rc, out, _ = check(env, "--sandbox", "e2b")
    assert rc == 0 and "result: code runs on e2b" in out


def test_codeshim_key_is_named(e2b):
    env = env_for(e2b, E2B_API_KEY="e2b_other_wrong_key", CODESHIM_E2B_API_KEY=KEY)
    rc, out, _ = check(env)
    assert rc == 0 and "set (CODESHIM_E2B_API_KEY)" in out


def test_key_missing(e2b):
    rc, out, _ = check(env_for(e2b, E2B_API_KEY=None))
    assert rc == 1
    assert "API key           MISSING: set E2B_API_KEY (or CODESHIM_E2B_API_KEY)" in out
    assert "result: e2b cannot be used: no API key" in out
    assert e2b.requests() == []


def test_wrong_key(e2b):
    wrong = "e2b_wrong_key_0123456789"
    rc, out, err = check(env_for(e2b, E2B_API_KEY=wrong))
    assert rc == 1
    assert "control plane     FAILED: e2b refused the API key" in out and "HTTP 401" in out
    assert "result: e2b does NOT work: e2b refused the API key" in out
    assert wrong not in out + err
    assert cp_calls(e2b) == [("GET", "/v2/sandboxes")] and e2b.sandboxes() == {}


def test_unreachable_url(e2b):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))                  # a port nobody listens on
    port = s.getsockname()[1]
    try:
        rc, out, _ = check(env_for(e2b, E2B_API_URL="http://127.0.0.1:%d" % port))
    finally:
        s.close()
    assert rc == 1
    assert "control plane     FAILED: e2b could not be reached while listing sandboxes" in out
    assert "result: e2b does NOT work: e2b's API cannot be reached" in out


def test_unknown_template(e2b):
    e2b.templates = {"code-interpreter-v1"}
    rc, out, _ = check(env_for(e2b, CODESHIM_E2B_TEMPLATE="no-such-template"))
    assert rc == 1
    assert "template          FAILED: no-such-template:" in out
    assert "template 'no-such-template' not found" in out
    assert "result: e2b does NOT work: the template cannot be used" in out
    assert e2b.sandboxes() == {}


def test_create_fails_otherwise(e2b):
    e2b.fail("POST", r"^/sandboxes$", 500)
    rc, out, _ = check(env_for(e2b))
    assert rc == 1 and "HTTP 500" in out
    assert "result: e2b does NOT work: no sandbox could be created" in out


def test_code_does_not_run(e2b):
    e2b.exec_502_after_create = 100           # the sandbox's server never answers
    rc, out, _ = check(env_for(e2b))
    assert rc == 1
    assert "code              FAILED:" in out
    assert "result: e2b does NOT work: code does not run in the sandbox" in out
    assert e2b.sandboxes() == {}              # killed all the same
