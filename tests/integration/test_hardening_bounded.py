"""Bounded work and memory on hostile bytes. What a hostile
upstream or the code in the sandbox sends costs the program work linear in
its size and memory proportional to what codeshim may receive, through the
curl CLI under codeshim:

* a usage object of 100,000 fields in each of two upstream replies (summing
  it was quadratic: minutes of the program's CPU);
* a streamed answer of 36,000 output items (finishing the stream looked
  every item up by index: quadratic; 60,000 took 86 s of CPU; more items
  than these are past the values codeshim reads of one answer,
  test_hardening_sizes.py; tests/unit/test_stream.c counts the steps);
* code in the sandbox that forges a reply frame of a long JSON array on the
  worker's channel to the supervisor (parsed whole, 14 MB of it grew the
  program by about 600 MB of cJSON items).

No timing is asserted: the old behaviour shows as the subprocess timeout of
run(), the new one as an answer; memory is the program's peak RSS."""

import json

import pytest

from conftest import PYTHON, run, sse_json
import schema_check
from test_core_responses import (ENV, blocks, bodies, code_call_reply, curl_cmd,
                                 curl_post, outputs_sent, post_json, req, text_reply)

RSS_BOUND_KB = 200 * 1024


def fields(o):
    """Fields of a JSON object, all levels together."""
    return sum(1 + (fields(v) if isinstance(v, dict) else 0) for v in o.values())


def wide_usage(reply, n):
    """reply's own usage followed by n more numeric fields."""
    u = dict(reply["usage"])
    u.update(("x%d" % i, 1) for i in range(n))
    reply["usage"] = u
    return reply


def test_usage_of_100000_fields_in_two_calls(scripted):
    """The program gets its answer; the real token counts are summed and the
    excess fields are left out, with one warning."""
    first = wide_usage(code_call_reply("print(6 * 7)\n"), 100000)
    last = wide_usage(text_reply("The answer is 42."), 100000)
    up = scripted([{"body": first}, {"body": last}])
    rc, st, r, err = post_json(up.url + "/responses", req(blocks("print(6 * 7)\n")))
    assert (rc, st) == (0, 200), (rc, st, str(r)[:300], err[-300:])
    schema_check.validate(r, "Response")
    u = r["usage"]
    for k in ("input_tokens", "output_tokens", "total_tokens"):
        assert u[k] == first["usage"][k] + last["usage"][k], (k, u[k])
    assert fields(u) <= 256
    assert err.decode().count("usage has more than 256 fields") == 1, err[-500:]
    assert len(up.requests()) == 2


def check_stream(events, n):
    """The checks of test_streaming.check_responses_stream on every event
    (framing, sequence numbers, one id, output_index order, every item
    added then done), with the schema validated on one event of each type
    and on the final response cut to its first items (jsonschema takes
    milliseconds per event: minutes for all of them)."""
    names = [e for e, _ in events]
    datas = [d for _, d in events]
    assert [d["type"] for d in datas] == names
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    assert len({d["response"]["id"] for d in datas if "response" in d}) == 1
    done, current = [], None
    for name, d in events[2:-1]:
        if name == "response.output_item.added":
            assert current is None and d["output_index"] == len(done), d
            current = d["item"]
            assert current["status"] == "in_progress"
        elif name == "response.output_item.done":
            assert d["output_index"] == len(done) and d["item"]["id"] == current["id"]
            done.append(d["item"])
            current = None
        else:
            assert d["output_index"] == len(done), d
    assert current is None and len(done) == n
    final = datas[-1]["response"]
    assert final["output"] == done
    first_of_each = {}
    for e in events[:-1]:
        first_of_each.setdefault(e[0], e)
    schema_check.validate_sse_responses(list(first_of_each.values()))
    schema_check.validate(dict(final, output=final["output"][:3]), "Response")


def test_stream_of_36000_output_items(scripted):
    """One upstream reply of 36,000 items (252,000 JSON values) streamed to the program: every item
    in order with its events, then response.completed holding them all."""
    n = 36000
    reply = text_reply("hi")
    msg = reply["output"][0]
    reply["output"] = [dict(msg, id="msg_%06d" % i, content=[]) for i in range(n)]
    up = scripted([{"body": reply}])
    rc, out, err = curl_post(up.url + "/responses", req("hi", stream=True), ["-N"])
    assert rc == 0, err[-500:]
    events = sse_json(out)
    assert len(events) == 2 + 2 * n + 1
    check_stream(events, n)


# Model code that finds the worker's channel to the supervisor and the
# request's sequence number in the worker's frames, then sends a reply of
# SIZE bytes: {"status":"ok","images":[0,0,0,...]}, in pieces so the
# sandbox itself stays small, and waits for the supervisor to be done with
# the worker (the worker's own reply must not follow the forged one).
FORGE = r'''
import sys
f = sys._getframe()
while f is not None and f.f_code.co_name != "_worker":
    f = f.f_back
seq, sock = f.f_locals["seq"], f.f_locals["sock"]
head = b'{"status":"ok","images":['
n = (SIZE - len(seq) - len(head) - 3) // 2
sock.sendall((len(seq) + len(head) + 2 * n + 3).to_bytes(4, "big") + seq + head)
while n:
    k = min(n, 1 << 16)
    sock.sendall(b"0," * k)
    n -= k
sock.sendall(b"0]}")
sock.recv(1)
'''

# Runs a command and writes the peak RSS (KB) of its process tree to a file.
PEAK_RSS = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[2:])\n"
            "open(sys.argv[1], 'w').write(str(resource.getrusage("
            "resource.RUSAGE_CHILDREN).ru_maxrss))\n"
            "sys.exit(p.returncode)\n")


@pytest.mark.parametrize("size", [14 << 20, 10 << 20], ids=["14MB", "10MB"])
def test_forged_reply_frame_costs_no_memory(scripted, tmp_path, size):
    """14 MB: more than a reply may hold, refused from its length; 10 MB:
    within the size a reply with images may have, refused for its thousands
    of JSON values. Either way the program's peak RSS stays small, the
    model is told the sandbox sent an invalid reply, and the program gets
    its answer."""
    code = FORGE.replace("SIZE", str(size))
    up = scripted([{"body": code_call_reply(code)}, {"body": text_reply("ok")}])
    peak = tmp_path / "peak"
    env = dict(ENV, CODESHIM_EXEC_TIMEOUT="20")  # should the wait never end
    rc, out, err = run([PYTHON, "-c", PEAK_RSS, peak] + curl_cmd(up.url + "/responses"),
                       env=env, input=json.dumps(req(blocks(code))))
    assert rc == 0, err[-500:]
    r = json.loads(out)
    schema_check.validate(r, "Response")
    kb = int(peak.read_text())
    assert kb < RSS_BOUND_KB, "peak RSS %d KB" % kb
    [told] = outputs_sent(bodies(up)[1]).values()
    assert "invalid reply" in told, told
