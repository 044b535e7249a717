"""The multi interface: intercepted transfers inside programs' multi handles.

Programs: the curl CLI (--parallel), pycurl's CurlMulti (GnuTLS libcurl,
loaded RTLD_LOCAL) driven by perform + select and by socket_action with
socket and timer callbacks, PHP's curl_multi_exec + curl_multi_select, and
tests/integration/progs/multiprog.c (epoll + socket_action, perform + poll,
fdset + select, removal and cleanup mid-transfer, threads, fork, exit
mid-transfer, resource hygiene). Every test checks what the program
received (schema-validated) and what the fake upstream received, and the
C program counts callbacks that ran off the thread driving the multi
handle (must be none)."""

import json
import shutil
import subprocess
import time

import pytest

from conftest import PYTHON, REPO, alive, clean_env, descendants, parse_sse, run, sse_json
import schema_check

CURL = "/usr/bin/curl"
MULTIPROG = REPO / "build" / "testprogs" / "multiprog"
PHP = shutil.which("php", path="/usr/bin")
KEY = "sk-test-multi-0123456789"
# no fork server, so no sandbox host: each sandbox starts cold in the
# program, and no long-lived helper blurs the counts of processes and
# descriptors that the hygiene tests compare
ENV = {"OPENAI_API_KEY": KEY, "CODESHIM_FORK_SERVER": "0"}
CI_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}


def code_req(tag, code, **kw):
    """A request the fake model answers by running code (tag: a marker)."""
    b = {"model": "gpt-fake", "tools": [CI_TOOL],
         "input": "Please run this. %s\n```python\n%s\n```\n" % (tag, code)}
    b.update(kw)
    return b


def plain_req(tag):
    """A request codeshim does not take: no code_interpreter tool."""
    return {"model": "gpt-fake", "input": "hello %s" % tag}


def write_bodies(tmp_path, bodies):
    paths = []
    for i, b in enumerate(bodies):
        p = tmp_path / ("body%d.json" % i)
        p.write_text(json.dumps(b))
        paths.append(str(p))
    return paths


def input_text(req):
    """The user text of an upstream request (first user message)."""
    inp = req["body"].get("input")
    if isinstance(inp, str):
        return inp
    for item in inp or []:
        if item.get("role") == "user":
            c = item.get("content")
            return c if isinstance(c, str) else json.dumps(c)
    return ""


def upstream_by_tag(fake, tag):
    return [q for q in fake.requests() if tag in input_text(q)]


def assert_clean_upstream(reqs):
    """What the upstream of an intercepted request must see: no native tool."""
    assert reqs
    for q in reqs:
        assert q["path"].endswith("/responses")
        assert all(t["type"] != "code_interpreter" for t in q["body"].get("tools", []))
        assert q["headers"].get("authorization") == "Bearer " + KEY


def check_answer(text, logs):
    """A synthetic non-streaming answer whose code printed logs."""
    resp = json.loads(text)
    schema_check.validate(resp, "Response")
    assert resp["status"] == "completed"
    ci = [o for o in resp["output"] if o["type"] == "code_interpreter_call"]
    assert ci and ci[0]["outputs"][0]["logs"] == logs
    return resp


def check_stream(text, logs):
    events = sse_json(text)
    schema_check.validate_sse_responses(events)
    final = [d for ev, d in events if ev == "response.completed"]
    assert len(final) == 1
    ci = [o for o in final[0]["response"]["output"] if o["type"] == "code_interpreter_call"]
    assert ci and ci[0]["outputs"][0]["logs"] == logs
    return events


def multiprog(mode, url, paths, extra=(), env=None, timeout=90):
    e = dict(ENV)
    e.update(env or {})
    rc, out, err = run([MULTIPROG, mode, url] + list(paths) + list(extra), env=e,
                       timeout=timeout)
    assert rc == 0, err.decode(errors="replace")[-3000:]
    lines = {}
    summaries = []
    other = []
    for line in out.decode().splitlines():
        prefix, _, rest = ("", "", line) if line.startswith("{") else line.partition(" ")
        obj = json.loads(rest)
        if "summary" in obj:
            summaries.append((prefix, obj["summary"]))
        elif "i" in obj:
            lines[(prefix, obj["i"])] = obj
        else:
            other.append(obj)
    return lines, summaries, other, err.decode(errors="replace")


@pytest.fixture
def progs():
    if not MULTIPROG.exists():
        pytest.fail("%s is missing: run `make build/testprogs/multiprog`" % MULTIPROG)


# ------------------------------------------------------------------ the curl CLI

def test_curl_parallel_mixed(fake, tmp_path):
    """curl --parallel: three intercepted transfers (one streaming) and a
    plain one, all in one multi handle; the plain one passes untouched."""
    bodies = [code_req("P0", "print(6*7)"), code_req("P1", "print('one')"),
              code_req("P2", "print(2+3)", stream=True), plain_req("P3")]
    paths = write_bodies(tmp_path, bodies)
    cmd = [CURL, "-sS", "--parallel", "--parallel-max", "4"]
    outs = []
    for i, p in enumerate(paths):
        o = tmp_path / ("out%d" % i)
        outs.append(o)
        if i:
            cmd.append("--next")
        cmd += ["-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + KEY,
                "--data-binary", "@" + p, fake.url + "/responses", "-o", str(o)]
    rc, out, err = run(cmd, env=ENV)
    assert rc == 0, err
    check_answer(outs[0].read_text(), "42\n")
    check_answer(outs[1].read_text(), "one\n")
    check_stream(outs[2].read_text(), "5\n")
    plain = json.loads(outs[3].read_text())
    assert plain["object"] == "response" and "code_interpreter_call" not in outs[3].read_text()
    for tag in ("P0", "P1", "P2"):
        reqs = upstream_by_tag(fake, tag)
        assert len(reqs) == 2  # the code call, then the answer after its output
        assert_clean_upstream(reqs)
    p3 = upstream_by_tag(fake, "P3")
    assert len(p3) == 1 and p3[0]["body"] == bodies[3]


# ------------------------------------------------------------------ pycurl

PYCURL_SCRIPT = r"""
import io, json, select, sys, threading, time
import pycurl

mode, url, key = sys.argv[1:4]
bodies = [open(p).read() for p in sys.argv[4:]]
main = threading.get_ident()
off = [0]
m = pycurl.CurlMulti()
handles = []
for i, b in enumerate(bodies):
    c = pycurl.Curl()
    c.buf = io.BytesIO()
    c.idx = i
    def write(data, c=c):
        if threading.get_ident() != main:
            off[0] += 1
        c.buf.write(data)
    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.POSTFIELDS, b)
    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json",
                                 "Authorization: Bearer " + key])
    c.setopt(pycurl.WRITEFUNCTION, write)
    handles.append(c)
results = {}

def reap():
    while True:
        nq, ok, err = m.info_read()
        for c in ok:
            results[c.idx] = 0
        for c, code, msg in err:
            results[c.idx] = code
        if nq == 0:
            return

if mode == "select":
    for c in handles:
        m.add_handle(c)
    num = len(handles)
    while True:
        ret, num = m.perform()
        if ret != pycurl.E_CALL_MULTI_PERFORM:
            break
    while num:
        m.select(1.0)
        while True:
            ret, num = m.perform()
            if ret != pycurl.E_CALL_MULTI_PERFORM:
                break
        reap()
    reap()
else:
    socks, deadline = {}, [None]
    def on_socket(what, fd, multi, data):
        if threading.get_ident() != main:
            off[0] += 1
        if what == pycurl.POLL_REMOVE:
            socks.pop(fd, None)
        else:
            socks[fd] = what
    def on_timer(ms):
        if threading.get_ident() != main:
            off[0] += 1
        deadline[0] = None if ms < 0 else time.monotonic() + ms / 1000.0
    m.setopt(pycurl.M_SOCKETFUNCTION, on_socket)
    m.setopt(pycurl.M_TIMERFUNCTION, on_timer)
    for c in handles:
        m.add_handle(c)
    while len(results) < len(handles):
        p = select.poll()
        for fd, what in socks.items():
            ev = (select.POLLIN if what & pycurl.POLL_IN else 0) | \
                 (select.POLLOUT if what & pycurl.POLL_OUT else 0)
            p.register(fd, ev)
        t = None if deadline[0] is None else max(0, (deadline[0] - time.monotonic()) * 1000)
        evs = p.poll(t)
        if not evs:
            deadline[0] = None
            m.socket_action(pycurl.SOCKET_TIMEOUT, 0)
        for fd, ev in evs:
            flags = (pycurl.CSELECT_IN if ev & select.POLLIN else 0) | \
                    (pycurl.CSELECT_OUT if ev & select.POLLOUT else 0) | \
                    (pycurl.CSELECT_ERR if ev & (select.POLLERR | select.POLLHUP) else 0)
            m.socket_action(fd, flags)
        reap()
for c in handles:
    print(json.dumps({"i": c.idx, "result": results.get(c.idx, -1),
                      "status": c.getinfo(pycurl.RESPONSE_CODE),
                      "body": c.buf.getvalue().decode()}))
print(json.dumps({"off_thread": off[0]}))
"""


@pytest.mark.parametrize("mode", ["select", "socket"])
def test_pycurl_multi(fake, tmp_path, mode):
    """pycurl's CurlMulti (Debian's GnuTLS libcurl) with perform + select,
    and with socket_action and socket/timer callbacks; a plain transfer
    runs alongside."""
    bodies = [code_req("Y0" + mode, "print(6*7)"),
              code_req("Y1" + mode, "print('x')", stream=True), plain_req("Y2" + mode)]
    paths = write_bodies(tmp_path, bodies)
    rc, out, err = run([PYTHON, "-c", PYCURL_SCRIPT, mode, fake.url + "/responses", KEY] + paths,
                       env=ENV)
    assert rc == 0, err.decode()[-3000:]
    lines = [json.loads(l) for l in out.decode().splitlines()]
    assert lines[-1] == {"off_thread": 0}
    res = {l["i"]: l for l in lines[:-1]}
    assert all(res[i]["result"] == 0 and res[i]["status"] == 200 for i in range(3))
    check_answer(res[0]["body"], "42\n")
    check_stream(res[1]["body"], "x\n")
    assert json.loads(res[2]["body"])["object"] == "response"
    for tag in ("Y0", "Y1"):
        reqs = upstream_by_tag(fake, tag + mode)
        assert len(reqs) == 2
        assert_clean_upstream(reqs)
    assert upstream_by_tag(fake, "Y2" + mode)[0]["body"] == bodies[2]


# ------------------------------------------------------------------ PHP

PHP_SCRIPT = r"""
$url = $argv[1]; $key = $argv[2]; $files = array_slice($argv, 3);
$mh = curl_multi_init(); $hs = [];
foreach ($files as $f) {
    $ch = curl_init($url);
    curl_setopt_array($ch, [CURLOPT_POST => true, CURLOPT_POSTFIELDS => file_get_contents($f),
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HTTPHEADER => ["Content-Type: application/json", "Authorization: Bearer $key"]]);
    curl_multi_add_handle($mh, $ch);
    $hs[] = $ch;
}
$results = [];
do {
    $st = curl_multi_exec($mh, $active);
    if ($active) curl_multi_select($mh, 5.0);
    while ($info = curl_multi_info_read($mh))
        $results[array_search($info['handle'], $hs, true)] = $info['result'];
} while ($active && $st == CURLM_OK);
while ($info = curl_multi_info_read($mh))
    $results[array_search($info['handle'], $hs, true)] = $info['result'];
foreach ($hs as $i => $ch) {
    echo json_encode(["i" => $i, "result" => $results[$i] ?? -1,
        "status" => curl_getinfo($ch, CURLINFO_HTTP_CODE),
        "type" => curl_getinfo($ch, CURLINFO_CONTENT_TYPE),
        "body" => curl_multi_getcontent($ch)]), "\n";
    curl_multi_remove_handle($mh, $ch);
}
"""


@pytest.mark.skipif(PHP is None, reason="php-cli and php-curl are not installed")
def test_php_curl_multi_exec(fake, tmp_path):
    bodies = [code_req("H0", "print(6*7)"), code_req("H1", "print(7)", stream=True),
              plain_req("H2")]
    paths = write_bodies(tmp_path, bodies)
    rc, out, err = run([PHP, "-r", PHP_SCRIPT, fake.url + "/responses", KEY] + paths, env=ENV)
    assert rc == 0, err
    res = {l["i"]: l for l in map(json.loads, out.decode().splitlines())}
    assert all(res[i]["result"] == 0 and res[i]["status"] == 200 for i in range(3))
    assert res[0]["type"] == "application/json"
    check_answer(res[0]["body"], "42\n")
    assert res[1]["type"].startswith("text/event-stream")
    check_stream(res[1]["body"], "7\n")
    assert json.loads(res[2]["body"])["object"] == "response"
    for tag in ("H0", "H1"):
        assert len(upstream_by_tag(fake, tag)) == 2
        assert_clean_upstream(upstream_by_tag(fake, tag))
    assert upstream_by_tag(fake, "H2")[0]["body"] == bodies[2]


# ------------------------------------------------------------------ C programs

def three_and_plain(tmp_path, tag, slow=None):
    bodies = [code_req(tag + "0", slow or "print(6*7)"), code_req(tag + "1", "print('b')"),
              code_req(tag + "2", "print(3)", stream=True)]
    paths = write_bodies(tmp_path, bodies + [plain_req(tag + "3")])
    return paths[:3] + ["--plain", paths[3]]


def check_three(lines, prefix="", first_logs="42\n"):
    got = {i: lines[(prefix, i)] for i in range(4)}
    for i in range(4):
        assert got[i]["result"] == 0 and got[i]["status"] == 200, got[i]
    check_answer(got[0]["body"], first_logs)
    check_answer(got[1]["body"], "b\n")
    assert got[2]["content_type"] == "text/event-stream"
    events = check_stream(got[2]["body"], "3\n")
    # streamed: the events reached the write callback in several writes
    assert got[2]["writes"] > 3 and len(events) > 3
    assert json.loads(got[3]["body"])["object"] == "response"
    for i in range(4):  # every header line through the header callback
        assert got[i]["headers"] >= 2


@pytest.mark.parametrize("mode", ["epoll", "poll", "fdset"])
def test_c_program_event_loops(fake, tmp_path, progs, mode):
    """curl_multi_socket_action with an epoll loop (socket and timer
    callbacks, curl_multi_assign), curl_multi_perform + curl_multi_poll,
    and curl_multi_fdset + select + curl_multi_timeout."""
    tag = "C" + mode
    lines, summaries, _, err = multiprog(mode, fake.url + "/responses",
                                         three_and_plain(tmp_path, tag))
    assert summaries == [("", {"off_thread": 0})]
    check_three(lines)
    for i in range(3):
        reqs = upstream_by_tag(fake, tag + str(i))
        assert len(reqs) == 2
        assert_clean_upstream(reqs)
    assert len(upstream_by_tag(fake, tag + "3")) == 1


def test_remove_mid_transfer(fake, tmp_path, progs):
    """The first transfer (code that sleeps) is removed while its loop runs:
    nothing reaches its callbacks afterwards, the others complete, and its
    loop stops at the next step: no model call follows the removal."""
    tag = "R"
    lines, summaries, _, _ = multiprog(
        "remove", fake.url + "/responses",
        three_and_plain(tmp_path, tag, slow="import time; time.sleep(2); print('late')"))
    assert summaries == [("", {"off_thread": 0})]
    first = lines[("", 0)]
    assert first["removed"] and first["late"] == 0 and first["writes"] == 0
    assert first["result"] == -1  # no CURLMSG_DONE for it
    for i in (1, 2, 3):
        assert lines[("", i)]["result"] == 0
    check_answer(lines[("", 1)]["body"], "b\n")
    assert len(upstream_by_tag(fake, tag + "0")) <= 1


@pytest.mark.parametrize("mode", ["cleanup-multi", "cleanup-easy"])
def test_cleanup_mid_transfer(fake, tmp_path, progs, mode):
    """curl_multi_cleanup, or curl_easy_cleanup of the handle, while an
    intercepted transfer's code runs: the process ends up with the threads,
    children and descriptors it had after a warm-up transfer (the worker
    ended, the sandbox closed), and nothing was delivered."""
    tag = "K" + mode[8]
    lines, summaries, snaps, _ = multiprog(
        mode, fake.url + "/responses",
        three_and_plain(tmp_path, tag, slow="import time; time.sleep(2); print('late')"))
    assert summaries == [("", {"off_thread": 0})]
    assert lines[("", 0)]["late"] == 0 and lines[("", 0)]["writes"] == 0
    for i in (1, 2, 3):
        assert lines[("", i)]["result"] == 0
    before, after = [s for s in snaps if "snap" in s]
    # nothing left behind (an idle pool thread of the baseline may have
    # ended since: fewer is fine, more is a leak)
    assert after["threads"] <= before["threads"], (before, after)
    assert after["children"] == before["children"] == 0
    assert after["fds"] <= before["fds"], (before, after)
    assert len(upstream_by_tag(fake, tag + "0")) <= 1


def test_threads_each_with_own_multi(fake, tmp_path, progs):
    tag = "T"
    lines, summaries, _, _ = multiprog("threads", fake.url + "/responses",
                                       three_and_plain(tmp_path, tag), ["--n", "3"])
    assert sorted(summaries) == [("t%d" % k, {"off_thread": 0}) for k in range(3)]
    for k in range(3):
        check_three(lines, "t%d" % k)
    for i in range(3):
        assert len(upstream_by_tag(fake, tag + str(i))) == 2 * 3


def test_fork_after_use(fake, tmp_path, progs):
    tag = "F"
    lines, summaries, other, _ = multiprog("fork", fake.url + "/responses",
                                           three_and_plain(tmp_path, tag))
    assert {"child_status": 0} in other
    assert sorted(summaries) == [("child", {"off_thread": 0}), ("parent", {"off_thread": 0})]
    check_three(lines, "parent")
    check_three(lines, "child")
    for i in range(3):
        assert len(upstream_by_tag(fake, tag + str(i))) == 4


def test_exit_mid_transfer_leaves_no_process(fake, tmp_path, progs):
    """A program that exits while its intercepted transfer's code runs in
    the sandbox leaves no process behind."""
    paths = write_bodies(tmp_path, [code_req("X0", "import time; time.sleep(30)")])
    p = subprocess.Popen([str(MULTIPROG), "exit", fake.url + "/responses"] + paths,
                         env=clean_env(ENV, True, tmp_path), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        kids = set()
        for _ in range(3000):  # the sandbox is up and the code was sent
            kids |= descendants(p.pid)
            if kids and upstream_by_tag(fake, "X0"):
                break
            time.sleep(0.01)
        assert kids, "no sandbox process appeared"
        time.sleep(0.2)
        kids |= descendants(p.pid)
        p.stdin.write(b"exit now\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert b'"exiting":true' in out
        for _ in range(3000):
            left = [k for k in kids if alive(k)]
            if not left:
                break
            time.sleep(0.01)
        assert not left, left
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert len(upstream_by_tag(fake, "X0")) == 1


def test_resource_hygiene_1000(tmp_path, progs):
    """1,000 intercepted requests with the offline model, through the easy
    interface and then a multi handle with 8 in flight (a few run code in a
    sandbox): descriptors, threads, children and memory after all equal
    those after the first 10."""
    paths = write_bodies(tmp_path, [
        {"model": "m", "input": "Say hello.", "tools": [CI_TOOL]},
        code_req("hyg", "print(1)")])
    _, _, other, _ = multiprog("hygiene", "http://127.0.0.1:9/v1/responses", paths,
                               ["--n", "1000"], env={"CODESHIM_OFFLINE": "1"}, timeout=120)
    snaps = {o["snap"]: o for o in other if "snap" in o}
    assert {"failures": 0, "off_thread": 0} in other
    for first, last in (("easy10", "easy"), ("multi10", "multi")):
        a, b = snaps[first], snaps[last]
        assert b["fds"] == a["fds"] and b["threads"] == a["threads"], (a, b)
        assert b["children"] == a["children"] == 0
        assert abs(b["rss_kb"] - a["rss_kb"]) < 4096, (a, b)
    # the multi phase adds only the multi handle's own wake-up pair
    assert snaps["multi"]["threads"] == snaps["easy"]["threads"]
    assert snaps["multi"]["fds"] <= snaps["easy"]["fds"] + 2


def test_inflight_bound(fake, tmp_path, progs):
    """CODESHIM_MAX_INFLIGHT=1: four intercepted transfers in one multi
    handle all complete, their loops one at a time: the process never has
    more than its own thread, one worker and the sandbox's spawner."""
    bodies = [code_req("I%d" % i, "print(%d)" % i) for i in range(4)]
    lines, summaries, other, _ = multiprog("poll", fake.url + "/responses",
                                           write_bodies(tmp_path, bodies),
                                           env={"CODESHIM_MAX_INFLIGHT": "1"})
    assert summaries == [("", {"off_thread": 0})]
    for i in range(4):
        assert lines[("", i)]["result"] == 0
        check_answer(lines[("", i)]["body"], "%d\n" % i)
        assert len(upstream_by_tag(fake, "I%d" % i)) == 2
    peak = [o["max_threads"] for o in other if "max_threads" in o]
    assert peak and peak[0] <= 3, peak


def test_fork_mid_transfer(fake, tmp_path, progs):
    """fork while intercepted transfers run: the child's copies end with
    CURLE_SEND_ERROR (their loops stayed with the parent) instead of
    hanging, the child then runs them again itself, and the parent's
    complete normally."""
    tag = "M"
    paths = three_and_plain(tmp_path, tag)[:3]  # a plain socket would be shared too
    lines, summaries, other, _ = multiprog("fork-mid", fake.url + "/responses", paths)
    assert {"child_status": 0} in other
    assert all(s == {"off_thread": 0} for _, s in summaries) and len(summaries) == 3
    for i in range(3):
        assert lines[("orphan", i)]["result"] == 55  # CURLE_SEND_ERROR
        assert lines[("orphan", i)]["writes"] == 0
        for who in ("parent", "child"):
            assert lines[(who, i)]["result"] == 0
    check_answer(lines[("parent", 0)]["body"], "42\n")
    check_answer(lines[("child", 0)]["body"], "42\n")
    check_stream(lines[("child", 2)]["body"], "3\n")
    for i in range(3):
        assert len(upstream_by_tag(fake, tag + str(i))) == 4
