"""The program's own limits on an intercepted easy transfer.

CURLOPT_TIMEOUT(_MS) bounds the whole transfer, executions included (the
running code is interrupted); the progress callback is called while it
runs and stops it; CURL_WRITEFUNC_PAUSE and curl_easy_pause pause
delivery and resume it with the same bytes. Each test checks what the
program got and what the fake upstream received. Bounds on time are
generous (the deadline plus seconds), never tight."""

import json
import time

import pytest

from conftest import REPO, parse_sse, run, schema_check, wait_for
from test_sessions import rt  # noqa: F401  (a runtime directory, its supervisors stopped)

PROG = REPO / "build" / "testprogs" / "limitprog"
CURL = "/usr/bin/curl"


def body(code, stream=False, session=None):
    b = {"model": "m", "input": "```python\n%s\n```" % code,
         "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    if stream:
        b["stream"] = True
    if session:
        b["metadata"] = {"session_id": session}
    return b


def limitprog(tmp_path, url, req, *flags, env=None):
    f = tmp_path / "body.json"
    f.write_text(json.dumps(req))
    t0 = time.monotonic()
    rc, out, err = run([PROG, "--url", url + "/responses", "--body-file", f] + list(flags),
                       env=env)
    assert rc == 0, err
    return json.loads(out), time.monotonic() - t0, err.decode()


def test_timeout_ms_interrupts_the_execution_of_a_session(fake, tmp_path, rt):
    """TIMEOUT_MS=1000 on code that sleeps 4 s: code 28 in libcurl's words,
    long before the sleep ends; the model was never asked again; the
    session's code was interrupted (its state is gone, the file it would
    have written afterwards is not there) and the next request says so."""
    env = {"CODESHIM_RUNTIME_DIR": str(rt)}
    code = "x = 41\nimport time\ntime.sleep(4)\nopen('/mnt/data/slept', 'w').write('1')"
    res, took, _ = limitprog(tmp_path, fake.url, body(code, session="s1"),
                             "--timeout-ms", "1000", env=env)
    assert res["rc"] == 28, res
    assert res["errbuf"].startswith("Operation timed out after "), res
    assert "milliseconds" in res["errbuf"]
    assert res["body"] == ""
    assert took < 3.5, took  # the 4 s sleep did not run to its end
    assert len(fake.requests()) == 1  # no tool output went upstream
    # the same session: executions are serialised, so an uninterrupted
    # sleep would have written its file before this runs
    check = "import os\nprint(os.path.exists('/mnt/data/slept'), 'x' in globals())"
    res2, _, _ = limitprog(tmp_path, fake.url, body(check, session="s1"), env=env)
    assert res2["rc"] == 0, res2
    answer = json.loads(res2["body"])
    schema_check.validate(answer, "Response")
    out = [o for o in answer["output"] if o["type"] == "code_interpreter_call"]
    logs = out[0]["outputs"][0]["logs"]
    assert "False False" in logs, logs
    assert "restarted" in logs, logs  # the model is told its state is gone


def test_timeout_ms_private_sandbox(fake, tmp_path):
    res, took, _ = limitprog(tmp_path, fake.url,
                             body("import time\ntime.sleep(6)\nprint('woke')"),
                             "--timeout-ms", "1000")
    assert res["rc"] == 28, res
    assert res["errbuf"].startswith("Operation timed out after ")
    assert took < 4, took
    assert len(fake.requests()) == 1


def test_timeout_bounds_the_upstream_calls_together(fake, tmp_path):
    """Each upstream call gets only the time left: three calls of 0.3 s
    each (model fake-slow), each within 700 ms, are together past it."""
    req = body("print(1)\n```\n```python\nprint(2)")
    req["model"] = "fake-slow"
    res, took, _ = limitprog(tmp_path, fake.url, req, "--timeout-ms", "700")
    assert res["rc"] == 28, res
    assert res["errbuf"].startswith("Operation timed out after ")
    assert res["body"] == ""
    assert 1 <= len(fake.requests()) <= 3  # the last may be cut mid-call


def test_curl_max_time(fake, tmp_path):
    req = body("import time\ntime.sleep(8)\nprint('woke')")
    t0 = time.monotonic()
    rc, out, err = run([CURL, "-sS", "--max-time", "2", fake.url + "/responses",
                        "-H", "Content-Type: application/json",
                        "-H", "Authorization: Bearer sk-test", "-d", json.dumps(req)])
    took = time.monotonic() - t0
    assert rc == 28, (rc, out, err)
    assert b"Operation timed out after" in err, err
    assert out == b""
    assert took < 5, took
    assert len(fake.requests()) == 1


def test_xferinfo_aborts_on_its_nth_call(fake, tmp_path):
    """Its nonzero answer on the 5th call ends the transfer with code 42,
    and it is called no more; every call on the program's thread inside
    curl_easy_perform."""
    res, _, _ = limitprog(tmp_path, fake.url,
                          body("import time\ntime.sleep(5)\nprint('woke')"),
                          "--progress", "--abort-at", "5")
    assert res["rc"] == 42, res
    assert res["errbuf"] == "Callback aborted"
    assert res["progress_calls"] == 5
    assert res["progress_off_thread"] == 0
    assert res["body"] == ""
    assert len(fake.requests()) <= 1


def test_xferinfo_called_while_code_runs_stops_it(fake, tmp_path):
    """The model answers at once and the code sleeps 5 s: a call 1.5 s in
    is made while the code runs; its nonzero answer stops the code (the
    transfer ends long before the sleep would) with code 42, and the
    model never gets the output."""
    res, took, _ = limitprog(tmp_path, fake.url,
                             body("import time\ntime.sleep(5)\nprint('woke')"),
                             "--progress", "--abort-after-ms", "1500")
    assert res["rc"] == 42, res
    assert res["errbuf"] == "Callback aborted"
    assert res["progress_off_thread"] == 0
    assert res["body"] == ""
    assert took < 4.5, took
    assert len(fake.requests()) == 1


@pytest.mark.parametrize("flag", ["--progress", "--old-progress"])
def test_progress_called_during_a_whole_transfer(fake, tmp_path, flag):
    res, _, _ = limitprog(tmp_path, fake.url,
                          body("import time\ntime.sleep(1)\nprint('woke')"), flag)
    assert res["rc"] == 0, res
    assert res["progress_calls"] >= 3, res
    assert res["progress_off_thread"] == 0
    answer = json.loads(res["body"])
    schema_check.validate(answer, "Response")
    assert "woke" in json.dumps(answer)
    assert len(fake.requests()) == 2


def _complete_stream(res):
    events = parse_sse(res["body"].encode())
    types = [json.loads(d)["type"] for _, d in events]
    assert types[0] == "response.created", types
    assert types[-1] == "response.completed", types
    seqs = [json.loads(d)["sequence_number"] for _, d in events]
    assert seqs == list(range(len(seqs))), seqs  # every byte, in order
    schema_check.validate_sse_responses(events)
    return json.loads(events[-1][1])["response"]


@pytest.mark.parametrize("flag", ["--pause-write", "--pause-api", "--pause-header"])
def test_pause_and_resume_delivery(fake, tmp_path, flag):
    """Paused on the first write (CURL_WRITEFUNC_PAUSE) or from the header
    callback (curl_easy_pause RECV), resumed from the progress callback:
    nothing is written while paused, and the answer arrives whole and in
    order."""
    res, _, _ = limitprog(tmp_path, fake.url, body("print(6 * 7)", stream=True), flag)
    assert res["rc"] == 0, res
    assert res["pauses"] == (2 if flag == "--pause-write" else 1), res
    assert res["writes_while_paused"] == 0, res
    assert res["progress_off_thread"] == 0
    # the header block whole, its status line once
    assert res["headers"].startswith("HTTP/1.1 200"), res["headers"]
    assert res["headers"].count("HTTP/") == 1
    assert res["headers"].endswith("\r\n\r\n")
    final = _complete_stream(res)
    assert "42" in json.dumps(final)
    assert len(fake.requests()) == 2


def test_pause_whole_answer(fake, tmp_path):
    res, _, _ = limitprog(tmp_path, fake.url, body("print(6 * 7)"), "--pause-write")
    assert res["rc"] == 0, res
    assert res["writes_while_paused"] == 0
    answer = json.loads(res["body"])
    schema_check.validate(answer, "Response")
    assert "42" in json.dumps(answer)


MULTIPROG = REPO / "build" / "testprogs" / "multiprog"


def multiprog(tmp_path, mode, url, bodies, *flags):
    paths = []
    for i, b in enumerate(bodies):
        p = tmp_path / ("b%d.json" % i)
        p.write_text(json.dumps(b))
        paths.append(str(p))
    t0 = time.monotonic()
    rc, out, err = run([MULTIPROG, mode, url + "/responses"] + paths + list(flags),
                       env={"OPENAI_API_KEY": "sk-test"})
    assert rc == 0, err
    lines = [json.loads(l) for l in out.decode().splitlines() if l.startswith('{"i"')]
    summary = [json.loads(l) for l in out.decode().splitlines() if l.startswith('{"summ')]
    return lines, summary[0]["summary"], time.monotonic() - t0


@pytest.mark.parametrize("mode", ["poll", "fdset"])
def test_xferinfo_multi(fake, tmp_path, mode):
    """The multi interface: a transfer's progress callback is called on the
    program's thread inside its own calls, about once a second while code
    runs; its nonzero answer (2nd call) ends that transfer with code 42 and
    interrupts its code; the other transfer is untouched."""
    lines, summary, took = multiprog(
        tmp_path, mode, fake.url,
        [body("import time\ntime.sleep(8)\nprint('woke')"), body("print(6 * 7)")],
        "--abort-at", "2")
    assert lines[0]["result"] == 42, lines[0]
    assert lines[0]["progress"] == 2
    assert lines[0]["errbuf"] == "Callback aborted"
    assert lines[0]["body"] == ""
    assert lines[1]["result"] == 0, lines[1]
    assert "42" in lines[1]["body"]
    assert summary["off_thread"] == 0
    assert took < 6.5, took  # not the 8 s sleep
    assert len(fake.requests()) == 3  # the stopped one's output never went up


@pytest.mark.parametrize("mode", ["poll", "epoll"])
def test_timeout_ms_multi(fake, tmp_path, mode):
    """The multi interface: TIMEOUT_MS counts from curl_multi_add_handle
    and ends the transfer in its code (interrupted) with code 28; a
    transfer within its time is untouched."""
    lines, _, took = multiprog(
        tmp_path, mode, fake.url,
        [body("import time\ntime.sleep(6)\nprint('woke')"), body("print(6 * 7)")],
        "--timeout-ms", "1500")
    assert lines[0]["result"] == 28, lines[0]
    assert lines[0]["errbuf"].startswith("Operation timed out after "), lines[0]
    assert lines[0]["body"] == ""
    assert lines[1]["result"] == 0, lines[1]
    assert "42" in lines[1]["body"]
    assert took < 5, took  # the 6 s sleep was interrupted
    # the slow one's tool output never went upstream: 2 + 1 requests
    assert len(fake.requests()) == 3


def test_timeout_ms_mid_stream(fake, tmp_path):
    """Past the deadline in a stream that has begun: the events so far,
    then code 28 as libcurl ends a transfer mid-body (no failure event,
    no completion)."""
    res, took, _ = limitprog(tmp_path, fake.url,
                             body("import time\ntime.sleep(4)\nprint('woke')", stream=True),
                             "--timeout-ms", "1000")
    assert res["rc"] == 28, res
    assert "bytes received" in res["errbuf"]
    events = parse_sse(res["body"].encode())
    types = [json.loads(d)["type"] for _, d in events]
    assert types[0] == "response.created"
    assert "response.code_interpreter_call.interpreting" in types
    assert not [t for t in types if t in ("response.completed", "response.failed", "error")]
    schema_check.validate_sse_responses(events)
    assert took < 3.5, took
    assert len(fake.requests()) == 1


def test_timeout_ms_while_the_session_is_busy(fake, tmp_path, rt):
    """The session's sandbox runs another request's code for 6 s: a request
    of the same session with 1.5 s left waits for its turn no longer than
    that (code 28), whichever of the two got the sandbox first."""
    import subprocess
    from conftest import clean_env
    env = {"CODESHIM_RUNTIME_DIR": str(rt)}
    first = tmp_path / "first.json"
    first.write_text(json.dumps(body("import time\ntime.sleep(6)\nprint('one')",
                                     session="busy")))
    p = subprocess.Popen([str(PROG), "--url", fake.url + "/responses", "--body-file",
                          str(first)], env=clean_env(env, True, str(tmp_path)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for(fake.requests)  # the first reached the model
        res, took, _ = limitprog(tmp_path, fake.url,
                                 body("import time\ntime.sleep(6)\nprint('two')",
                                      session="busy"),
                                 "--timeout-ms", "1500", env=env)
        assert res["rc"] == 28, res
        assert res["errbuf"].startswith("Operation timed out after ")
        assert took < 4.5, took
    finally:
        out, _ = p.communicate(timeout=60)
    assert json.loads(out)["rc"] == 0  # the other request is untouched
