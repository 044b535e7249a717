"""The multi interface as libcurl runs it: where the program's callbacks
run, what removal stops, how many transfers are in flight.

tests/integration/progs/engineprog.c sets every callback (write, header,
xferinfo, debug, sockopt, opensocket, closesocket, prereq, resolver start,
MIME read) on an intercepted transfer and counts those that ran on another
thread than the program's or outside its libcurl calls (must be none), and
those for a transfer after it was removed or cleaned up (must be none; its
callback data is freed right then, and the removal tests run it built with
AddressSanitizer, leak checking on: nothing of a stopped transfer is
kept). multiprog.c runs 16 transfers at once."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import LIB, REPO, clean_env, run, sse_json
import schema_check
from test_sessions import rt  # noqa: F401  (a runtime directory, its supervisors stopped)

ENGINEPROG = REPO / "build" / "testprogs" / "engineprog"
MULTIPROG = REPO / "build" / "testprogs" / "multiprog"
KEY = "sk-test-engine-0123456789"
ENV = {"OPENAI_API_KEY": KEY, "CODESHIM_FORK_SERVER": "0"}
CI_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
RELAYED = ("sockopt", "opensocket", "closesocket", "prereq", "resolver_start")


def code_req(tag, code, **kw):
    b = {"model": "gpt-fake", "tools": [CI_TOOL],
         "input": "Please run this. %s\n```python\n%s\n```\n" % (tag, code)}
    b.update(kw)
    return b


def tagged(fake, tag):
    return [q for q in fake.requests() if tag in json.dumps(q["body"])]


def write_json(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.fixture
def prog():
    if not ENGINEPROG.exists():
        pytest.fail("%s is missing: run `make build/testprogs/engineprog`" % ENGINEPROG)
    return ENGINEPROG


@pytest.fixture(scope="module")
def asan_prog():
    """engineprog built with AddressSanitizer, and the LD_PRELOAD it needs
    (libasan first, then codeshim)."""
    asan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                          text=True).stdout.strip()
    if not asan.startswith("/"):
        pytest.fail("gcc has no libasan.so")
    d = tempfile.mkdtemp(prefix="engineprog-asan-")
    out = d + "/engineprog"
    subprocess.run(["gcc", "-std=c11", "-D_GNU_SOURCE", "-g", "-O1", "-fsanitize=address",
                    "-fno-omit-frame-pointer", str(REPO / "tests/integration/progs/engineprog.c"),
                    "-o", out, "-lcurl", "-lcjson", "-lpthread"], check=True)
    yield out, "%s %s" % (asan, LIB)
    shutil.rmtree(d, ignore_errors=True)


def result_of(out):
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    assert lines, out
    return json.loads(lines[-1])


def assert_on_program_thread(res):
    assert res["off_thread"] == {k: 0 for k in res["calls"]}, res
    assert res["outside"] == {k: 0 for k in res["calls"]}, res
    assert res["late"] == 0, res


@pytest.mark.parametrize("loop", ["poll", "select", "socket"])
def test_every_callback_runs_on_the_program_thread_inside_its_call(fake, prog, tmp_path,
                                                                   loop):
    a = write_json(tmp_path / "a.json", code_req("CBS-" + loop, "print(6 * 7)"))
    rc, out, err = run([prog, loop, "none", "-", fake.url + "/responses", tmp_path, a],
                       env=ENV, timeout=90)
    assert rc == 0, err.decode(errors="replace")
    res = result_of(out)
    assert (res["A"], res["status_a"]) == (0, 200), res
    resp = json.loads((tmp_path / "A.body").read_text())
    schema_check.validate(resp, "Response")
    ci = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert ci and "42" in json.dumps(ci[0]["outputs"])
    # the upstream calls were made, with the program's connection callbacks
    # run for them, on its thread, in its calls
    ups = tagged(fake, "CBS-" + loop)
    assert len(ups) == 2
    assert all(t["type"] != "code_interpreter" for q in ups for t in q["body"]["tools"])
    for k in RELAYED:
        assert res["calls"][k] >= 1, (k, res)
    assert res["calls"]["write"] >= 1 and res["calls"]["header"] >= 1
    assert_on_program_thread(res)


def test_mime_post_is_read_on_the_program_thread(fake, prog, tmp_path):
    rc, out, err = run(["/usr/bin/curl", "-sS", "-H", "Authorization: Bearer " + KEY,
                        "-H", "Content-Type: application/json", "-d", '{"name":"box"}',
                        fake.url + "/containers"], env=ENV)
    assert rc == 0, err
    cid = json.loads(out)["id"]
    data = tmp_path / "data.txt"
    data.write_bytes(b"hello from a MIME read callback\n" * 100)
    url = "%s/containers/%s/files" % (fake.url, cid)
    rc, out, err = run([prog, "poll", "none", "-", url, tmp_path, "mime:%s" % data],
                       env=ENV, timeout=60)
    assert rc == 0, err.decode(errors="replace")
    res = result_of(out)
    assert (res["A"], res["status_a"]) == (0, 200), (res, (tmp_path / "A.body").read_text())
    f = json.loads((tmp_path / "A.body").read_text())
    schema_check.validate(f, "ContainerFileResource")
    assert f["bytes"] == data.stat().st_size
    assert res["calls"]["mime_read"] >= 1
    assert_on_program_thread(res)
    assert not fake.requests()  # codeshim's own container: nothing upstream


class Hold:
    """A gate for the fake upstream: requests whose body carries tag wait
    until released (the test's end), the others pass."""

    def __init__(self, tag):
        self.tag = tag
        self.cv = threading.Condition()
        self.held = 0
        self.open = False

    def __call__(self, rec):
        if self.tag not in rec["raw"]:
            return
        with self.cv:
            self.held += 1
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.open, timeout=120)

    def wait_held(self, n, timeout=60):
        with self.cv:
            return self.cv.wait_for(lambda: self.held >= n, timeout=timeout)

    def release(self):
        with self.cv:
            self.open = True
            self.cv.notify_all()


def run_async(cmd, env):
    home = tempfile.mkdtemp(prefix="codeshim-home-")
    p = subprocess.Popen([str(c) for c in cmd], env=clean_env(env, True, home),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    return p, home


def finish(p, home, timeout=90):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail("the program did not finish: %s" % err.decode(errors="replace")[-3000:])
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return p.returncode, out, err


def asan_env(preload, **extra):
    env = dict(ENV, LD_PRELOAD=preload, CODESHIM_MAX_INFLIGHT="1",
               ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86")
    env.update(extra)
    return env


def check_b(res, tmp_path, fake, tag):
    assert (res["B"], res["status_b"]) == (0, 200), res
    resp = json.loads((tmp_path / "B.body").read_text())
    schema_check.validate(resp, "Response")
    assert resp["status"] == "completed"
    assert len(tagged(fake, tag)) == 2


@pytest.mark.parametrize("action", ["remove", "cleanup", "multicleanup"])
def test_stop_in_the_middle_of_an_upstream_call(fake, asan_prog, tmp_path, action):
    """One slot, an upstream that never answers A: once A is stopped, its
    call is dropped, its slot is free, and B gets its answer."""
    exe, preload = asan_prog
    hold = Hold("HANG-" + action)
    fake.gate = hold
    go = tmp_path / "go"
    a = write_json(tmp_path / "a.json", code_req("HANG-" + action, "print(1)"))
    b = write_json(tmp_path / "b.json", code_req("NEXT-" + action, "print(2 + 2)"))
    p, home = run_async([exe, "poll", action, "file:%s" % go, fake.url + "/responses",
                         tmp_path, a, b], asan_env(preload))
    try:
        assert hold.wait_held(1), "A's upstream call never arrived"
        go.write_text("now")
        rc, out, err = finish(p, home)
    finally:
        hold.release()
    assert rc == 0, err.decode(errors="replace")[-4000:]
    res = result_of(out)
    assert res["A"] == -1
    check_b(res, tmp_path, fake, "NEXT-" + action)
    assert_on_program_thread(res)
    assert len(tagged(fake, "HANG-" + action)) == 1


@pytest.mark.parametrize("action", ["remove", "cleanup", "multicleanup"])
def test_stop_in_the_middle_of_an_execution(fake, asan_prog, tmp_path, action):
    """One slot, A streams and runs code that sleeps a minute: stopped once
    the program sees the code start, the execution is interrupted, A's
    loop never calls the model again, and B gets its answer."""
    exe, preload = asan_prog
    a = write_json(tmp_path / "a.json", code_req("EXEC-" + action, "import time\ntime.sleep(60)",
                                                 stream=True))
    b = write_json(tmp_path / "b.json", code_req("AFTER-" + action, "print(3 * 3)"))
    rc, out, err = run([exe, "socket", action, "text:code_interpreter_call.interpreting",
                        fake.url + "/responses", tmp_path, a, b],
                       env=asan_env(preload), timeout=50)
    assert rc == 0, err.decode(errors="replace")[-4000:]
    res = result_of(out)
    assert res["A"] == -1
    assert "code_interpreter_call.interpreting" in (tmp_path / "A.body").read_text()
    check_b(res, tmp_path, fake, "AFTER-" + action)
    assert_on_program_thread(res)
    assert len(tagged(fake, "EXEC-" + action)) == 1  # no second call with A's output


def sandbox_has(name):
    """1 when a process's /mnt/data (seen through /proc/PID/root: a sandbox
    of this machine) holds name."""
    for pid in os.listdir("/proc"):
        if pid.isdigit() and os.path.exists("/proc/%s/root/mnt/data/%s" % (pid, name)):
            return True
    return False


def when_sandbox_has(name, then, timeout=60):
    """A thread that calls then() once some sandbox's /mnt/data has name."""
    def watch():
        end = time.monotonic() + timeout
        while time.monotonic() < end and not sandbox_has(name):
            time.sleep(0.05)
        then()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("action", ["remove", "cleanup", "multicleanup"])
def test_a_stopped_execution_of_a_session_is_told_at_its_next_request(fake, prog, tmp_path,
                                                                       rt, action):
    """A session's code interrupted by the program removing (or cleaning up)
    its transfer once it runs (the program is told when the code has
    written a file): the session's next request runs in a restarted
    interpreter (A's variable is gone, the file A would have written later
    is not there), and its tool output tells the model so."""
    sess = {"metadata": {"session_id": "stop-" + action}}
    begun = "begun-%s-%d" % (action, os.getpid())
    go = tmp_path / "go"
    a = write_json(tmp_path / "a.json", code_req(
        "SEXEC-" + action, "x = 41\nopen('/mnt/data/%s', 'w').close()\nimport time\n"
        "time.sleep(30)\nopen('/mnt/data/slept', 'w').write('1')" % begun, stream=True, **sess))
    b = write_json(tmp_path / "b.json", code_req(
        "SNEXT-" + action, "import os\nprint(os.path.exists('/mnt/data/slept'), "
        "'x' in globals())", **sess))
    watcher = when_sandbox_has(begun, lambda: go.write_text("now"))
    rc, out, err = run([prog, "socket", action, "file:%s" % go,
                        fake.url + "/responses", tmp_path, a, b],
                       env=dict(ENV, CODESHIM_RUNTIME_DIR=str(rt)), timeout=90)
    watcher.join(5)
    assert rc == 0, err.decode(errors="replace")[-4000:]
    res = result_of(out)
    assert res["A"] == -1
    assert "code_interpreter_call.interpreting" in (tmp_path / "A.body").read_text()
    assert (res["B"], res["status_b"]) == (0, 200), res
    resp = json.loads((tmp_path / "B.body").read_text())
    schema_check.validate(resp, "Response")
    ci = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    logs = ci[0]["outputs"][0]["logs"]
    assert "False False" in logs, logs
    assert "restarted" in logs, logs  # the model is told its state is gone
    # what went upstream as the tool's output says it too
    sent = tagged(fake, "SNEXT-" + action)[-1]["body"]["input"]
    outs = [i["output"] for i in sent if i.get("type") == "function_call_output"]
    assert outs and "restarted" in outs[-1], outs
    assert len(tagged(fake, "SEXEC-" + action)) == 1
    assert_on_program_thread(res)


class Gather:
    """A gate that holds every request until n are held at once."""

    def __init__(self, n):
        self.n = n
        self.cv = threading.Condition()
        self.now = self.peak = 0
        self.open = False

    def __call__(self, rec):
        with self.cv:
            self.now += 1
            self.peak = max(self.peak, self.now)
            if self.now >= self.n:
                self.open = True
                self.cv.notify_all()
            if not self.cv.wait_for(lambda: self.open, timeout=30):
                self.open = True  # never all there: let the rest through
                self.cv.notify_all()
            self.now -= 1

    def release(self):
        with self.cv:
            self.open = True
            self.cv.notify_all()


class GatherThreads(Gather):
    """Gather that, once all n are held, counts the program's threads."""

    pid = None
    threads = None

    def __call__(self, rec):
        with self.cv:
            if self.now + 1 >= self.n and self.pid and self.threads is None:
                try:
                    self.threads = len(os.listdir("/proc/%d/task" % self.pid))
                except OSError:
                    pass
        Gather.__call__(self, rec)


@pytest.mark.parametrize("loop", ["poll", "epoll"])
def test_sixteen_multi_transfers_call_the_upstream_at_once(fake, tmp_path, loop):
    """The default concurrency is not two per core: 16 intercepted
    transfers in one multi handle all have their upstream call in flight
    together (the fake holds each until the 16th arrives), and the engine
    waits for them all inside the program's own calls: the
    (single-threaded) program still has one thread meanwhile."""
    if not MULTIPROG.exists():
        pytest.fail("%s is missing: run `make build/testprogs/multiprog`" % MULTIPROG)
    gate = GatherThreads(16)
    fake.gate = gate
    bodies = [write_json(tmp_path / ("b%d.json" % i), code_req("WIDE-%d" % i, "print(%d)" % i))
              for i in range(16)]
    env = dict(ENV)
    env.pop("CODESHIM_MAX_INFLIGHT", None)
    p, home = run_async([MULTIPROG, loop, fake.url + "/responses"] + bodies, env)
    gate.pid = p.pid
    try:
        rc, out, err = finish(p, home, timeout=120)
    finally:
        gate.release()
    assert rc == 0, err.decode(errors="replace")[-3000:]
    lines = [json.loads(ln) for ln in out.decode().splitlines() if ln.startswith('{"i"')]
    assert len(lines) == 16 and all(ln["result"] == 0 and ln["status"] == 200 for ln in lines)
    for ln in lines:
        resp = json.loads(ln["body"])
        schema_check.validate(resp, "Response")
        ci = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
        assert ci and ci[0]["outputs"][0]["logs"] == "%d\n" % ln["i"], ln
    assert gate.peak >= 16, gate.peak
    assert gate.threads == 1, gate.threads


@pytest.mark.parametrize("loop", ["poll", "socket"])
@pytest.mark.parametrize("action", ["pausecb", "pauseapi"])
def test_pause_holds_delivery_and_resumes_with_the_refused_chunk(fake, prog, tmp_path, action,
                                                                 loop):
    """CURL_WRITEFUNC_PAUSE from the write callback, or curl_easy_pause
    (CURLPAUSE_RECV) from the loop: nothing is written while paused, and
    after curl_easy_pause(CURLPAUSE_CONT) the stream goes on from the chunk
    that was refused, every event exactly once."""
    a = write_json(tmp_path / "a.json", code_req("PAUSE-" + action, "print(5 * 5)", stream=True))
    rc, out, err = run([prog, loop, action, "text:response.created", fake.url + "/responses",
                        tmp_path, a], env=ENV, timeout=90)
    assert rc == 0, err.decode(errors="replace")
    res = result_of(out)
    assert (res["A"], res["status_a"]) == (0, 200), res
    assert res["pauses"] == 1 and res["paused_writes"] == 0, res
    events = sse_json((tmp_path / "A.body").read_text())
    schema_check.validate_sse_responses(events)
    seqs = [d["sequence_number"] for _, d in events if isinstance(d, dict)]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    final = [d for ev, d in events if ev == "response.completed"]
    assert len(final) == 1
    ci = [o for o in final[0]["response"]["output"] if o["type"] == "code_interpreter_call"]
    assert ci and ci[0]["outputs"][0]["logs"] == "25\n"
    assert_on_program_thread(res)


@pytest.mark.parametrize("loop", ["poll", "socket"])
@pytest.mark.parametrize("stream", [False, True])
def test_header_callback_pause_holds_delivery_and_gives_the_refused_header_again(
        fake, prog, tmp_path, loop, stream):
    """A header callback that answers CURL_WRITEFUNC_PAUSE (to the
    Content-Type line) pauses the transfer as libcurl does: no header or
    body callback while paused, and after curl_easy_pause(CURLPAUSE_CONT)
    that line comes again, then the rest of the header block once and the
    whole answer."""
    a = write_json(tmp_path / "a.json", code_req("HPAUSE-%s-%s" % (loop, stream),
                                                 "print(6 * 7)", stream=stream))
    rc, out, err = run([prog, loop, "pausehdr", "header:content-type", fake.url + "/responses",
                        tmp_path, a], env=ENV, timeout=90)
    assert rc == 0, err.decode(errors="replace")
    res = result_of(out)
    assert (res["A"], res["status_a"]) == (0, 200), res
    assert res["pauses"] == 1 and res["paused_writes"] == 0, res
    head = (tmp_path / "A.head").read_bytes().decode()
    lines = head.split("\r\n")
    assert lines[0].startswith("HTTP/") and " 200" in lines[0], head
    assert head.endswith("\r\n\r\n") and head.count("\r\n\r\n") == 1, head
    ctype = [ln for ln in lines if ln.lower().startswith("content-type:")]
    want = "text/event-stream" if stream else "application/json"
    assert len(ctype) == 1 and want in ctype[0], head
    assert len(set(ln for ln in lines if ln)) == len([ln for ln in lines if ln]), head
    body = (tmp_path / "A.body").read_text()
    if stream:
        events = sse_json(body)
        schema_check.validate_sse_responses(events)
        final = [d for ev, d in events if ev == "response.completed"]
        assert len(final) == 1
        resp = final[0]["response"]
    else:
        resp = json.loads(body)
        schema_check.validate(resp, "Response")
    ci = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert ci and ci[0]["outputs"][0]["logs"] == "42\n"
    assert_on_program_thread(res)


@pytest.mark.parametrize("loop", ["socket", "timer"])
def test_timer_driven_program_gets_its_progress_callback_while_code_runs(fake, prog, tmp_path,
                                                                          loop):
    """A program that calls curl_multi_socket_action only when its timer
    (CURLMOPT_TIMERFUNCTION) or a socket says so is given timeouts while
    an intercepted transfer with a progress callback runs code, so that
    callback is called meanwhile, as libcurl calls it about once a second."""
    a = write_json(tmp_path / "a.json", code_req("TICK-" + loop, "import time\ntime.sleep(4)\n"
                                                 "print('slept')", stream=True))
    rc, out, err = run([prog, loop, "none", "-", fake.url + "/responses", tmp_path, a],
                       env=ENV, timeout=90)
    assert rc == 0, err.decode(errors="replace")
    res = result_of(out)
    assert (res["A"], res["status_a"]) == (0, 200), res
    events = sse_json((tmp_path / "A.body").read_text())
    schema_check.validate_sse_responses(events)
    assert res["progress_during_code"] >= 2, res  # ~1 a second; 1 without timeouts
    assert_on_program_thread(res)
