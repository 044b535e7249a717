#!/usr/bin/python3
"""Peak memory of the curl CLI under codeshim for hostile JSON shapes.

For each shape (an array of zeros, deep nesting, an object of many keys,
a usage object of many keys), about SIZE bytes, once as the program's
request and once as the upstream's reply: the curl process's peak resident
set (/usr/bin/time -v) and what curl ended with. Measured, never asserted.

    /usr/bin/python3 bench/hostile_json.py [LIB] [SIZE_MB]
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fakes"))
import fake_openai  # noqa: E402

LIB = sys.argv[1] if len(sys.argv) > 1 else str(REPO / "build" / "libcodeshim.so")
SIZE = int(float(sys.argv[2]) * (1 << 20)) if len(sys.argv) > 2 else 6 << 20
BUDGET = 262144 - 100  # SHIM_JSON_MAX_VALUES, less the rest of the body
CI = {"type": "code_interpreter", "container": {"type": "auto"}}


def zeros(n):
    return "[" + ",".join(["0"] * (n // 2)) + "]"


def deep(n, depth=100):
    seg = "[" * depth + "]" * depth
    return "[" + ",".join([seg] * (n // (len(seg) + 1))) + "]"


def keys(n):
    k = n // 13
    return "{" + ",".join('"k%07d":0' % i for i in range(k)) + "}"


SHAPES = {"zeros": zeros, "deep": deep, "deep900": lambda n: deep(n, 900), "keys": keys}


def reply_text(val, usage=False):
    r = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
         "model": "gpt-fake", "output": [{"type": "message", "id": "msg_1", "status": "completed",
                                         "role": "assistant", "content": [
                                             {"type": "output_text", "text": "hi",
                                              "annotations": []}]}],
         "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}
    text = json.dumps(r, separators=(",", ":"))
    if usage:  # usage itself is the object of many keys
        return text.replace('"usage":{', '"usage":' + val[:-1] + ',', 1)
    return text[:-1] + ',"x":' + val + "}"


def run_curl(url, body, tmp):
    bf = os.path.join(tmp, "body.json")
    with open(bf, "w") as f:
        f.write(body)
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": LIB, "OPENAI_API_KEY": "sk-test-1",
           "HOME": tmp, "CODESHIM_RUNTIME_DIR": os.path.join(tmp, "rt")}
    p = subprocess.run(["/usr/bin/time", "-v", "/usr/bin/curl", "-sS", "-o", "/dev/null",
                        "-w", "%{http_code}", "-H", "Content-Type: application/json",
                        "--data-binary", "@" + bf, url + "/responses"],
                       env=env, capture_output=True, text=True, timeout=600)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    w = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", p.stderr)
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("curl:")]
    return int(m.group(1)) // 1024, w.group(1), p.returncode, p.stdout, err[0] if err else ""


def main():
    small = json.dumps({"model": "gpt-fake", "input": "hi", "tools": [CI]})
    print("%-22s %8s %9s %4s %5s  %s" % ("case", "MB body", "peak MB", "rc", "HTTP", "curl says"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name, make in SHAPES.items():
            val = make(SIZE)
            cases.append(("request " + name, val, None))
            cases.append(("reply " + name, None, reply_text(val)))
        cases.append(("reply usage keys", None, reply_text(keys(SIZE), usage=True)))
        # the costliest bodies still read: just under the budget of values
        cases.append(("request zeros@budget", zeros(2 * BUDGET), None))
        cases.append(("reply zeros@budget", None, reply_text(zeros(2 * BUDGET))))
        cases.append(("request keys@budget", keys(13 * BUDGET), None))
        cases.append(("reply keys@budget", None, reply_text(keys(13 * BUDGET))))
        for label, val, rep in cases:
            if rep is None:
                body = small[:-1] + ',"x":' + val + "}"
                script = [{"body": reply_text('0')}]
            else:
                body = small
                script = [{"body": rep}]
            srv = fake_openai.start(script=script)
            try:
                mb, wall, rc, code, err = run_curl(srv.url, body, tmp)
            finally:
                srv.stop()
            size = len(body if rep is None else rep) / (1 << 20)
            print("%-22s %8.1f %9d %4d %5s  %s  (%s)" % (label, size, mb, rc, code, err[:70], wall))


if __name__ == "__main__":
    main()
