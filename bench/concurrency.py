"""make bench, row 6: concurrency. N intercepted requests at once (1, 4,
16, 64) through one pycurl CurlMulti (the multi interface, driven with
perform + select as event-loop programs do), against a fake model that
takes 500 ms to answer each call (X-Fake-Delay): every request is one code
call (run in the local sandbox) then the final answer, so one request
takes at least 1 s. Reports the wall time of each N as a ratio to one
request's time measured in the same run (three runs each, median), with
CODESHIM_MAX_INFLIGHT at its default. Every answer is checked: HTTP 200,
a completed code_interpreter_call whose logs are the code's output. The
runs share one fresh runtime directory (its sandbox host warmed by the
first), so what other programs left in the machine's does not count.
Measured, never asserted.

usage: concurrency.py URL LIB [RUNS]"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

PROG = r'''
import json, sys, time
import pycurl
url, n = sys.argv[1], int(sys.argv[2])
body = json.dumps({"model": "m", "input": "run\n```python\nprint(6 * 7)\n```",
                   "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]})
m = pycurl.CurlMulti()
out = []
for i in range(n):
    c = pycurl.Curl()
    buf = []
    c.setopt(pycurl.URL, url + "/responses")
    c.setopt(pycurl.POSTFIELDS, body)
    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json",
                                 "Authorization: Bearer sk-bench", "X-Fake-Delay: 0.5"])
    c.setopt(pycurl.WRITEFUNCTION, buf.append)
    m.add_handle(c)
    out.append((c, buf))
t0 = time.monotonic()
active = n
while active:
    ret, active = m.perform()
    if ret == pycurl.E_CALL_MULTI_PERFORM:
        continue
    if active:
        m.select(1.0)
took = time.monotonic() - t0
ok = 0
for c, buf in out:
    try:
        r = json.loads(b"".join(buf))
        calls = [o for o in r["output"] if o.get("type") == "code_interpreter_call"]
        ok += (c.getinfo(pycurl.RESPONSE_CODE) == 200 and calls and
               calls[0].get("status") == "completed" and
               calls[0]["outputs"][0]["logs"] == "42\n")
    except (ValueError, KeyError, IndexError):
        pass
    m.remove_handle(c)
    c.close()
print(took, ok)
'''


def run(url, lib, n, rt):
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": lib, "OPENAI_API_KEY": "sk-bench",
           "HOME": tempfile.mkdtemp(prefix="codeshim-bench-"), "CODESHIM_RUNTIME_DIR": rt}
    p = subprocess.run(["/usr/bin/python3", "-c", PROG, url, str(n)], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("concurrency: N=%d failed: %s" % (n, p.stderr[-2000:]))
    took, ok = p.stdout.split()
    return float(took), int(ok)


def main():
    url, lib = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    inflight = os.environ.get("CODESHIM_MAX_INFLIGHT", "default")
    res = {}
    rt = tempfile.mkdtemp(prefix="codeshim-bench-rt-")  # mode 0700: private
    try:
        measure(url, lib, runs, inflight, rt, res)
    finally:
        for pidfile in glob.glob(rt + "/**/pid", recursive=True):
            try:
                os.kill(int(open(pidfile).read()), signal.SIGTERM)
            except (ValueError, OSError):
                pass
        shutil.rmtree(rt, ignore_errors=True)
    print("%-60s16 at once: %.2f x one request (goal: about 1)"
          % ("6. concurrency goal", res[16] / res[1]))


def measure(url, lib, runs, inflight, rt, res):
    run(url, lib, 1, rt)  # warms the runtime directory's sandbox host
    for n in (1, 4, 16, 64):
        times, oks = [], []
        for _ in range(runs):
            t, ok = run(url, lib, n, rt)
            times.append(t)
            oks.append(ok)
        times.sort()
        res[n] = times[len(times) // 2]
        print("%-60s%7.2f s (%.2f-%.2f) = %5.2f x one request; %d/%d answers right"
              % ("6. %d concurrent intercepted requests, 500 ms model (MAX_INFLIGHT %s)"
                 % (n, inflight), res[n], times[0], times[-1], res[n] / res[1],
                 min(oks), n))


if __name__ == "__main__":
    main()
