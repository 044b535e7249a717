"""A program's transfer that stops while its code runs in e2b: the
/execute stream is dropped at once (e2b's server then interrupts the
kernel), the context is restarted, the program gets libcurl's code long
before the code's own end, and the same e2b sandbox runs the session's
next request, whose output tells the model the interpreter was
restarted. The stops: CURLOPT_TIMEOUT_MS (limitprog), a progress callback
that aborts (limitprog), the transfer removed or cleaned up mid execution
(engineprog), as test_limits.py and test_engine.py check them locally."""

import json
import subprocess
import time

import pytest

from conftest import REPO, clean_env, run, schema_check, wait_for
from e2b_helpers import e2b, env_for  # noqa: F401
import test_limits

LIMITPROG = test_limits.PROG
ENGINEPROG = REPO / "build" / "testprogs" / "engineprog"
SLEEP = "x = 41\nimport time\ntime.sleep(30)\nopen('/mnt/data/slept', 'w').write('1')"
CHECK = "import os\nprint(os.path.exists('/mnt/data/slept'), 'x' in globals())"


def body(tag, code, session=None, stream=False):
    b = {"model": "m", "input": "%s\n```python\n%s\n```" % (tag, code),
         "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    if session:
        b["metadata"] = {"session_id": session}
    if stream:
        b["stream"] = True
    return b


def limitprog(tmp_path, url, req, *flags, env):
    """test_limits' run of limitprog: (its result, the seconds it took)."""
    return test_limits.limitprog(tmp_path, url, req, *flags, env=env)[:2]


def sleeper(started):
    """Code that says it runs (the fake's kernel runs on this machine: it
    makes the file started), then sleeps 30 s."""
    return "open(%r, 'w').close()\n%s" % (str(started), SLEEP)


def assert_dropped(e2b, code, restarts=1):
    """The sleeping code's stream was closed by codeshim (the fake saw it
    go, interrupted its kernel), and its context restarted after."""
    assert wait_for(lambda: any(g["code"].strip() == code for g in e2b.gone), timeout=10), e2b.gone
    assert e2b.restarts == restarts
    if not restarts:
        return
    restart = [i for i, r in enumerate(e2b.requests()) if r["path"].endswith("/restart")]
    sleep = [i for i, r in enumerate(e2b.requests())
             if r["path"] == "/execute" and r["body"]["code"].strip() == code]
    assert len(restart) == 1 and len(sleep) == 1 and restart[0] > sleep[0]


def check_next(answer, e2b, sid, fake, tag):
    """The session's next request (its input holds tag) ran in the same e2b
    sandbox, restarted: the variable and the later file are gone, and the
    output says so, to the program and to the model."""
    schema_check.validate(answer, "Response")
    ci = [o for o in answer["output"] if o["type"] == "code_interpreter_call"]
    assert ci and ci[0]["status"] == "completed", answer
    logs = ci[0]["outputs"][0]["logs"]
    assert "False False" in logs, logs
    assert logs.startswith("[Note: the Python interpreter was restarted before this "
                           "execution"), logs
    assert list(e2b.sandboxes()) == [sid]
    sent = [q["body"]["input"] for q in fake.requests() if tag in json.dumps(q["body"])][-1]
    outs = [i["output"] for i in sent if i.get("type") == "function_call_output"]
    assert outs and outs[-1].startswith("[Note: the Python interpreter was restarted"), outs


def session_box(e2b):
    (sid,) = e2b.sandboxes()
    return sid


def test_timeout_ms_drops_the_execution_and_the_session_runs_on(fake, e2b, tmp_path):
    trace = tmp_path / "trace.jsonl"
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=tmp_path / "rt", CODESHIM_TRACE=trace)
    code = sleeper(tmp_path / "started")
    res, took = limitprog(tmp_path, fake.url, body("T1", code, session="s1"),
                          "--timeout-ms", "1000", env=env)
    assert res["rc"] == 28, res
    assert res["errbuf"].startswith("Operation timed out after "), res
    assert res["body"] == ""
    assert took < 10, took  # long before the 30 s sleep ends
    assert len(fake.requests()) == 1  # no tool output went upstream
    assert (tmp_path / "started").exists()
    assert_dropped(e2b, code)
    # the execution's result, as the trace has it: interrupted, as locally
    (ex,) = [x for x in map(json.loads, trace.read_text().splitlines()) if x["event"] == "exec"]
    assert ex["status"] == "failed"
    assert ex["output"] == ("Execution interrupted: the request that ran it was stopped (its "
                            "time limit, or its program); the Python interpreter was restarted "
                            "and its state (variables, imports) was lost.\n"), ex
    assert ex["e2b_execute_seconds"] > 0
    sid = session_box(e2b)
    res2, _ = limitprog(tmp_path, fake.url, body("T2", CHECK, session="s1"), env=env)
    assert res2["rc"] == 0, res2
    check_next(json.loads(res2["body"]), e2b, sid, fake, "T2")
    # the note is said once: a third request hears nothing of it
    res3, _ = limitprog(tmp_path, fake.url, body("T3", "print(7 * 6)", session="s1"), env=env)
    logs3 = [o for o in json.loads(res3["body"])["output"]
             if o["type"] == "code_interpreter_call"][0]["outputs"][0]["logs"]
    assert logs3 == "42\n", logs3


def test_progress_abort_drops_the_execution(fake, e2b, tmp_path):
    """A private sandbox: the program's progress callback says stop 1.5 s
    in, while the code runs; code 42, the stream dropped, the sandbox
    killed at the request's end (not restarted first)."""
    code = sleeper(tmp_path / "started")
    res, took = limitprog(tmp_path, fake.url, body("P1", code), "--progress",
                          "--abort-after-ms", "1500", env=env_for(e2b))
    assert res["rc"] == 42, res
    assert res["errbuf"] == "Callback aborted"
    assert res["body"] == ""
    assert took < 10, took
    assert len(fake.requests()) == 1
    assert (tmp_path / "started").exists()
    assert_dropped(e2b, code, restarts=0)
    assert e2b.sandboxes() == {}
    assert [r for r in e2b.requests() if r["method"] == "DELETE"]


@pytest.mark.parametrize("action", ["remove", "cleanup", "multicleanup"])
def test_a_transfer_stopped_mid_execution_drops_it(fake, e2b, tmp_path, action):
    """engineprog stops transfer A (removed from its multi, or cleaned up)
    once its code runs; B, in the same session, then runs in the same
    sandbox, after A's restart."""
    sess = "stop-" + action
    started = tmp_path / "started"
    code = sleeper(started)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(body("SEXEC-" + action, code, session=sess, stream=True)))
    b.write_text(json.dumps(body("SNEXT-" + action, CHECK, session=sess)))
    t0 = time.monotonic()
    rc, out, err = run([ENGINEPROG, "socket", action, "file:%s" % started,
                        fake.url + "/responses", tmp_path, a, b],
                       env=env_for(e2b, CODESHIM_RUNTIME_DIR=tmp_path / "rt",
                                   OPENAI_API_KEY="sk-test-engine-0123456789"), timeout=90)
    assert rc == 0, err.decode(errors="replace")[-4000:]
    res = json.loads([ln for ln in out.decode().splitlines() if ln.startswith("{")][-1])
    assert res["A"] == -1
    assert (res["B"], res["status_b"]) == (0, 200), res
    assert time.monotonic() - t0 < 10
    assert_dropped(e2b, code)
    check_next(json.loads((tmp_path / "B.body").read_text()), e2b, session_box(e2b), fake,
               "SNEXT-" + action)
    assert len([q for q in fake.requests() if "SEXEC-" in json.dumps(q["body"])]) == 1


def test_a_request_waiting_for_its_sessions_sandbox_is_stopped_too(fake, e2b, tmp_path):
    """A of the session runs its code (30 s); B of the same session, with
    CURLOPT_TIMEOUT_MS=1000, waits for the sandbox while A's code runs, and
    ends at its deadline, its code never sent, A's never disturbed."""
    rt = tmp_path / "rt"
    started = tmp_path / "started"
    code = sleeper(started)
    fa = tmp_path / "a.json"
    fa.write_text(json.dumps(body("W1", code, session="s1")))
    a = subprocess.Popen([str(LIMITPROG), "--url", fake.url + "/responses", "--body-file",
                          str(fa)], env=clean_env(env_for(e2b, CODESHIM_RUNTIME_DIR=rt)),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        assert wait_for(started.exists, timeout=30)
        (bdir := tmp_path / "b").mkdir()
        res, took = limitprog(bdir, fake.url, body("W2", CHECK, session="s1"),
                              "--timeout-ms", "1000",
                              env=env_for(e2b, CODESHIM_RUNTIME_DIR=rt))
        assert res["rc"] == 28, res
        assert took < 10, took  # not after A's 30 s
        assert not [r for r in e2b.requests() if r["path"] == "/execute"
                    and r["body"]["code"].strip() == CHECK]
        assert a.poll() is None and e2b.gone == [] and e2b.restarts == 0
    finally:
        a.kill()
        a.wait()


def test_a_timeout_in_a_session_is_told_once(fake, e2b, tmp_path):
    """CODESHIM_EXEC_TIMEOUT's text tells the model the state is lost; the
    session's next request says nothing more of it (its interpreter was
    set up right after the restart)."""
    env = env_for(e2b, CODESHIM_RUNTIME_DIR=tmp_path / "rt", CODESHIM_EXEC_TIMEOUT=1)
    e2b.keepalive_s = 0.2
    res, _ = limitprog(tmp_path, fake.url, body("O1", SLEEP, session="s1"), env=env)
    ci = [o for o in json.loads(res["body"])["output"] if o["type"] == "code_interpreter_call"]
    assert ci[0]["status"] == "incomplete"
    assert "timed out after 1 s" in ci[0]["outputs"][0]["logs"]
    res2, _ = limitprog(tmp_path, fake.url, body("O2", "print(7 * 6)", session="s1"), env=env)
    ci = [o for o in json.loads(res2["body"])["output"] if o["type"] == "code_interpreter_call"]
    assert ci[0]["outputs"][0]["logs"] == "42\n", ci
    assert e2b.restarts == 1
