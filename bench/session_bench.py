#!/usr/bin/python3
"""session_bench.py - sessions started and resumed from new program runs,
for `make bench`.

Each program run is a new process (build/bench/bench_http, one request,
libcodeshim preloaded, the offline model, one execution), and each round
has a runtime directory of its own, so its first session also starts the
user's sandbox host (codeshim-sessiond). Printed, as medians (and
spread) over R rounds, each against a reference timed in the same round:
  * the user's very first session (the host started, the session's
    sandbox the cold way), against a bare `python3 -I -c pass`;
  * a new identity's first session once the user's sandbox host is warm
    (the request as curl times it), goal at most 1.0 x;
  * a session started once the host is warm (it has a sandbox of its pool
    ready; waited for, not timed): goal as for back to back starts, at
    most 0.5 x python;
  * a later program run resuming that session (goal: without delay);
  * a session whose first code is `import numpy, pandas,
    matplotlib.pyplot`, against a cold import of those (goal as for the
    first import in a program, at most 0.1 x);
  * a new program run without a session: its first request, with a
    sandbox lent by the user's sandbox host (goal at most 1.0 x);
  * the same request run back to back in one process (goal 0.5 x);
  * one run of the curl CLI with one intercepted request, the whole
    process (goal 1.0 x);
  * what three intercepted requests add to a process's start-up and exit:
    its wall time less its three requests' own and less the same program
    making no request (goal 0.5 x);
  * the user's sandbox host idle with its fork server and pool, as PSS of
    all their processes (goal at most 120 MB);
  * ten made-up keys with two idle sessions each: the PSS they add to the
    sandbox host's (goal at most 200 MB).
The time is the request's own (curl_easy_perform), as the program sees it,
except where a row says whole process.
Every session and host is stopped at the end of its round. Measured, never
asserted.

usage: session_bench.py LIBCODESHIM [RUNS]"""

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "tools"))
import session_host  # noqa: E402
BENCH_HTTP = REPO / "build" / "bench" / "bench_http"
URL = "http://127.0.0.1:9/v1/responses"  # never reached: the offline model


POOL = 4  # sessiond.h's SESSIOND_POOL: the pool is full
PRINT = "print('ok')"
IMPORTS = "import numpy, pandas, matplotlib.pyplot"


def body(session, code=PRINT):
    b = {"model": "m", "input": "run\n```python\n%s\n```" % code,
         "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    if session:
        b["metadata"] = {"session_id": session}
    return json.dumps(b)


def request_ms(lib, rt, bodyfile):
    env = {"PATH": "/usr/bin:/bin", "HOME": rt, "LD_PRELOAD": lib,
           "CODESHIM_OFFLINE": "1", "CODESHIM_RUNTIME_DIR": rt}
    out = subprocess.run([str(BENCH_HTTP), URL, "1", bodyfile], env=env,
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("session_bench: the request failed: " + out.stderr[-500:])
    return float(out.stdout.split()[0])


def env_of(lib, rt):
    return {"PATH": "/usr/bin:/bin", "HOME": rt, "LD_PRELOAD": lib,
            "CODESHIM_OFFLINE": "1", "CODESHIM_RUNTIME_DIR": rt}


def wall_ms(cmd, env):
    t = time.monotonic()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=120)
    return (time.monotonic() - t) * 1000


def per_request(lib, rt, bodyfile, n):
    """bench_http's n requests in one process: (median, min, max) ms."""
    out = subprocess.run([str(BENCH_HTTP), URL, str(n), bodyfile], env=env_of(lib, rt),
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit("session_bench: the requests failed: " + out.stderr[-500:])
    f = [float(x) for x in out.stdout.split()]
    return f[0], f[3], f[4]


def user_host(rt):
    socks = list(Path(rt).glob("hosts/*/sock"))
    return socks[0].parent if socks else None


def pool_full(rt):
    """Waits until the user's sandbox host has its pool ready."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        d = user_host(rt)
        try:
            if d and session_host.call(d, {"op": "status"}).get("pool", 0) >= POOL:
                return d
        except OSError:
            pass
        time.sleep(0.02)
    sys.exit("session_bench: the sandbox host never had its pool ready")


def pss_mb(root):
    """PSS of root and every process below it, in MB."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    parent[int(d)] = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, grew = {root}, True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in tree and p not in tree:
                tree.add(p)
                grew = True
    kb = 0
    for p in tree:
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                kb += sum(int(l.split()[1]) for l in f if l.startswith("Pss:"))
        except OSError:
            pass
    return kb / 1024


def python_ms(code="pass"):
    t = time.monotonic()
    subprocess.run(["/usr/bin/python3", "-I", "-c", code], check=True)
    return (time.monotonic() - t) * 1000


def stop_sessions(rt):
    """SIGTERM to every session supervisor and session host under rt."""
    for d, _, files in os.walk(rt):  # skips directories removed meanwhile
        if "pid" in files:
            try:
                os.kill(int((Path(d) / "pid").read_text()), signal.SIGTERM)
            except (ValueError, OSError):
                pass


def row(name, v, ref, goal=None, against="python"):
    med = statistics.median(v)
    g = ""
    if goal is not None:
        g = "   goal <= %gx%s" % (goal, "" if med / ref <= goal else "  (not met)")
    print("%-40s %8.3f ms (%.3f-%.3f) = %.3fx %s%s"
          % (name, med, min(v), max(v), med / ref, against, g))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def one_round(lib, tmp, i, t):
    rt = os.path.join(tmp, "rt%d" % i)
    os.mkdir(rt, 0o700)
    try:
        t["py"].append(python_ms())
        t["first"].append(request_ms(lib, rt, write(os.path.join(tmp, "a.json"), body("a"))))
        if not session_host.wait_warm(rt):
            sys.exit("session_bench: the sandbox host never had a sandbox ready")
        b = write(os.path.join(tmp, "b.json"), body("b"))
        t["start"].append(request_ms(lib, rt, b))
        for _ in range(3):  # new program runs, each attaching
            t["resume"].append(request_ms(lib, rt, b))
        t["cold_import"].append(python_ms(IMPORTS))
        session_host.wait_warm(rt)
        t["import"].append(request_ms(lib, rt, write(os.path.join(tmp, "c.json"),
                                                     body("c", IMPORTS))))
        n = write(os.path.join(tmp, "n.json"), body(None))
        request_ms(lib, rt, n)  # the sandbox host is started (by the first session) by now
        pool_full(rt)
        t["fresh"].append(request_ms(lib, rt, n))
        pool_full(rt)
        med, lo, hi = per_request(lib, rt, n, 11)
        t["b2b"].append(med)
        pool_full(rt)
        t["curl"].append(wall_ms(["/usr/bin/curl", "-sS", URL, "-H", "Content-Type: "
                                  "application/json", "--data-binary", "@" + n],
                                 env_of(lib, rt)))
        pool_full(rt)
        t0 = time.monotonic()
        med, lo, hi = per_request(lib, rt, n, 3)
        whole = (time.monotonic() - t0) * 1000
        none = wall_ms([str(BENCH_HTTP), URL, "1", n], {"PATH": "/usr/bin:/bin"})
        t["three"].append(max(0.0, whole - (med + lo + hi) - none))
        pool_full(rt)
        k = write(os.path.join(tmp, "k.json"), body("k"))
        out = subprocess.run(["/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{time_total}",
                              "-H", "Content-Type: application/json", "-H",
                              "Authorization: Bearer sk-bench-%d" % i, "--data-binary", "@" + k,
                              URL], env=env_of(lib, rt), capture_output=True, text=True,
                             timeout=120)
        t["id_first"].append(float(out.stdout) * 1000)
        pool_full(rt)
    finally:
        stop_sessions(rt)


def keys_pss(lib, tmp):
    """Ten made-up keys with two idle sessions each, once the user's
    sandbox host is warm: the PSS they add (MB), every process of the
    sandbox host counted (the sessions are its children, their sandboxes
    its fork server's), less the host alone before; how many sessions
    live; and the host alone, idle with its fork server and full pool
    (MB), as measured before."""
    rt = os.path.join(tmp, "keys")
    os.mkdir(rt, 0o700)
    try:
        request_ms(lib, rt, write(os.path.join(tmp, "p.json"), body(None)))
        d = pool_full(rt)
        uh = session_host.call(d, {"op": "status"})["pid"]
        before = pss_mb(uh)
        for k in range(10):
            for s in ("a", "b"):
                subprocess.run(["/usr/bin/curl", "-sS", "-o", "/dev/null", "-H",
                                "Content-Type: application/json", "-H",
                                "Authorization: Bearer sk-key-%d" % k, "--data-binary",
                                "@" + write(os.path.join(tmp, "s.json"), body(s)), URL],
                               env=env_of(lib, rt), check=True, timeout=120)
        pool_full(rt)
        return pss_mb(uh) - before, session_host.call(d, {"op": "status"})["sessions"], before
    finally:
        stop_sessions(rt)


def main():
    lib = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    tmp = tempfile.mkdtemp(prefix="codeshim-session-bench-")
    t = {k: [] for k in ("py", "first", "start", "resume", "cold_import", "import", "fresh",
                         "b2b", "curl", "three", "id_first")}
    try:
        for i in range(runs):
            one_round(lib, tmp, i, t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp = tempfile.mkdtemp(prefix="codeshim-session-bench-")
        added, nsessions, idle = keys_pss(lib, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = statistics.median(t["py"])
    imp = statistics.median(t["cold_import"])
    print("session benchmarks, %d rounds (%d resumes); references: python3 -I -c pass "
          "%.3f ms, a cold `%s` %.3f ms" % (runs, len(t["resume"]), ref, IMPORTS, imp))
    row("user's first session ever (all cold)", t["first"], ref)
    row("an identity's first session, sandbox host", t["id_first"], ref, 1.0)
    row("session start, host warm", t["start"], ref, 0.5)
    row("session resume from a new program run", t["resume"], ref, 0.5)
    row("session start running the imports", t["import"], imp, 0.1, "cold import")
    row("new program run's first request (pooled)", t["fresh"], ref, 1.0)
    row("back-to-back print request, one process", t["b2b"], ref, 0.5)
    row("curl run, one request (whole process)", t["curl"], ref, 1.0)
    row("3 requests: added start-up + exit", t["three"], ref, 0.5)
    print("%-40s %8.1f MB PSS   goal <= 120 MB%s"
          % ("sandbox host idle (fork server, pool)", idle, "" if idle <= 120 else "  (not met)"))
    print("%-40s %8.1f MB PSS (%d sessions, one host)   goal <= 200 MB%s"
          % ("10 keys x 2 idle sessions, added", added, nsessions,
             "" if added <= 200 else "  (not met)"))


if __name__ == "__main__":
    main()
