#!/usr/bin/python3
"""session_bench.py - a session resumed from a new program run, for
`make bench` (issue 15).

Each program run is a new process (build/bench/bench_http, one request,
libcodeshim preloaded, the offline model, one execution of print('ok')),
and all carry the same metadata.session_id, so every run after the first
finds the session's sandbox in its codeshim-sessiond and attaches to it.
Printed, as medians (and spread) over R runs, each against a bare
`python3 -I -c pass` timed in the same run, interleaved:
  * the request that starts the session (sessiond and its sandbox, cold);
  * the request of a later program run that resumes it (goal: without
    delay: a small fraction of a Python start);
  * for comparison, the same request in a new program run without a
    session (a fresh sandbox of its own).
The time is the request's own (curl_easy_perform), as the program sees it.
The session's supervisor is stopped at the end. Measured, never asserted.

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
BENCH_HTTP = REPO / "build" / "bench" / "bench_http"
URL = "http://127.0.0.1:9/v1/responses"  # never reached: the offline model


def body(session):
    b = {"model": "m", "input": "run\n```python\nprint('ok')\n```",
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


def python_ms():
    t = time.monotonic()
    subprocess.run(["/usr/bin/python3", "-I", "-c", "pass"], check=True)
    return (time.monotonic() - t) * 1000


def stop_sessions(rt):
    for pidfile in Path(rt).glob("*/*/pid"):
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except (ValueError, OSError):
            pass


def row(name, v, ref, goal=None):
    med = statistics.median(v)
    g = ""
    if goal is not None:
        g = "   goal <= %gx%s" % (goal, "" if med / ref <= goal else "  (not met)")
    print("%-44s %8.3f ms (%.3f-%.3f) = %.3fx python%s"
          % (name, med, min(v), max(v), med / ref, g))


def main():
    lib = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    tmp = tempfile.mkdtemp(prefix="codeshim-session-bench-")
    rt = os.path.join(tmp, "rt")
    os.mkdir(rt, 0o700)
    files = {}
    for name in ("none", "one"):
        files[name] = os.path.join(tmp, name + ".json")
    with open(files["none"], "w") as f:
        f.write(body(None))
    py, start, resume, fresh = [], [], [], []
    try:
        for i in range(runs):
            with open(files["one"], "w") as f:  # a new session, started cold
                f.write(body("bench-%d" % i))
            py.append(python_ms())
            start.append(request_ms(lib, rt, files["one"]))
            for _ in range(3):  # new program runs, each attaching
                resume.append(request_ms(lib, rt, files["one"]))
            fresh.append(request_ms(lib, rt, files["none"]))
    finally:
        stop_sessions(rt)
        shutil.rmtree(tmp, ignore_errors=True)
    ref = statistics.median(py)
    print("session benchmarks, %d rounds (%d resumes); reference: python3 -I -c pass "
          "%.3f ms" % (runs, len(resume), ref))
    row("session start (sessiond + sandbox, cold)", start, ref)
    row("session resume from a new program run", resume, ref, 0.5)
    row("new program run, no session (fresh sandbox)", fresh, ref)


if __name__ == "__main__":
    main()
