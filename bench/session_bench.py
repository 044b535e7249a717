#!/usr/bin/python3
"""session_bench.py - sessions started and resumed from new program runs,
for `make bench`.

Each program run is a new process (build/bench/bench_http, one request,
libcodeshim preloaded, the offline model, one execution), and each round
has a runtime directory of its own, so its first session also starts the
identity's session host (codeshim-sessiond). Printed, as medians (and
spread) over R rounds, each against a reference timed in the same round:
  * the identity's first session (the host, its first session's sandbox
    the cold way), against a bare `python3 -I -c pass`;
  * a session started once the host is warm (it has a sandbox forked from
    its fork server ready; waited for, not timed): goal as for back to
    back starts, at most 0.5 x python;
  * a later program run resuming that session (goal: without delay);
  * a session whose first code is `import numpy, pandas,
    matplotlib.pyplot`, against a cold import of those (goal as for the
    first import in a program, at most 0.1 x);
  * for comparison, a new program run without a session (a fresh sandbox
    of its own, cold).
The time is the request's own (curl_easy_perform), as the program sees it.
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


def python_ms(code="pass"):
    t = time.monotonic()
    subprocess.run(["/usr/bin/python3", "-I", "-c", code], check=True)
    return (time.monotonic() - t) * 1000


def stop_sessions(rt):
    """SIGTERM to every session supervisor and session host under rt."""
    for pidfile in Path(rt).glob("**/pid"):
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
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
            sys.exit("session_bench: the session host never had a sandbox ready")
        b = write(os.path.join(tmp, "b.json"), body("b"))
        t["start"].append(request_ms(lib, rt, b))
        for _ in range(3):  # new program runs, each attaching
            t["resume"].append(request_ms(lib, rt, b))
        t["cold_import"].append(python_ms(IMPORTS))
        session_host.wait_warm(rt)
        t["import"].append(request_ms(lib, rt, write(os.path.join(tmp, "c.json"),
                                                     body("c", IMPORTS))))
        t["fresh"].append(request_ms(lib, rt, write(os.path.join(tmp, "n.json"), body(None))))
    finally:
        stop_sessions(rt)


def main():
    lib = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    tmp = tempfile.mkdtemp(prefix="codeshim-session-bench-")
    t = {k: [] for k in ("py", "first", "start", "resume", "cold_import", "import", "fresh")}
    try:
        for i in range(runs):
            one_round(lib, tmp, i, t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = statistics.median(t["py"])
    imp = statistics.median(t["cold_import"])
    print("session benchmarks, %d rounds (%d resumes); references: python3 -I -c pass "
          "%.3f ms, a cold `%s` %.3f ms" % (runs, len(t["resume"]), ref, IMPORTS, imp))
    row("identity's first session (host, cold)", t["first"], ref)
    row("session start, host warm", t["start"], ref, 0.5)
    row("session resume from a new program run", t["resume"], ref, 0.5)
    row("session start running the imports", t["import"], imp, 0.1, "cold import")
    row("new program run, no session (cold)", t["fresh"], ref)


if __name__ == "__main__":
    main()
