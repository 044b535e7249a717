#!/usr/bin/python3
"""bench_stream.py - live streaming latency, for `make bench`.

A paced fake upstream (in this process, tests/fakes/fake_openai.py) streams
a Responses answer, one text delta every 20 ms, and logs when it wrote each
event (time.monotonic()). The program is curl -N, read through a pipe with
the arrival time of each event. Printed, as medians over R runs:
  * the program's first text delta after the upstream wrote its first one,
    with codeshim and without it (curl straight to the fake: what the
    measuring chain itself costs); goal: within 2 ms of the upstream;
  * the spread of the deltas: their arrival span at the program over the
    upstream's own generation span (1.0 = as spread as generated; one
    burst at the end = 0).
Measured, never asserted.

usage: bench_stream.py LIBCODESHIM [RUNS]"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fakes"))
import fake_openai  # noqa: E402

CURL = "/usr/bin/curl"
DELAY = "0.02"
TEXT_DELTA = "response.output_text.delta"


def run(url, body, lib):
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-bench"}
    home = tempfile.mkdtemp(prefix="codeshim-bench-")
    env["HOME"] = home
    if lib:
        env["LD_PRELOAD"] = lib
        env["CODESHIM_RUNTIME_DIR"] = os.path.join(home, "rt")
    cmd = [CURL, "-sS", "-N", "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer sk-bench", "-H", "X-Fake-Stream-Delay: " + DELAY,
           "--data-binary", json.dumps(body), url]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    buf, arrivals = b"", []
    while True:
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        t = time.monotonic()
        buf += chunk
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            if b"event: " + TEXT_DELTA.encode() + b"\n" in frame:
                arrivals.append(t)
    p.wait()
    p.stdout.close()
    return arrivals


def measure(srv, url, body, lib, runs):
    first, spread = [], []
    for _ in range(runs):
        before = len(srv.sent_events())
        got = run(url, body, lib)
        up = [e["t"] for e in srv.sent_events()[before:] if e["type"] == TEXT_DELTA]
        if not got or len(up) < 2:
            continue
        first.append((got[0] - up[0]) * 1e3)
        spread.append((got[-1] - got[0]) / (up[-1] - up[0]))
    return first, spread


def main():
    lib = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    srv = fake_openai.start()
    try:
        direct = {"model": "m", "input": "Say hello.", "stream": True,
                  "tools": [{"type": "function", "name": "f", "parameters": {}}]}
        shimmed = dict(direct, tools=[{"type": "code_interpreter",
                                       "container": {"type": "auto"}}])
        rows = [("no codeshim (curl straight to the upstream)", direct, None),
                ("codeshim preloaded", shimmed, lib)]
        for name, body, l in rows:
            first, spread = measure(srv, srv.url + "/responses", body, l, runs)
            if not first:
                print("%-60sno deltas received" % ("streaming, " + name))
                continue
            print("%-60sfirst text delta +%.2f ms after the upstream's (median of %d, "
                  "max %.2f); spread %.2f of the upstream's (goal: within 2 ms, ~1.0)"
                  % ("streaming, " + name, statistics.median(first), len(first), max(first),
                     statistics.median(spread)))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
