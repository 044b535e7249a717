"""Hostile sizes. A JSON body of many small values costs cJSON a
node (about 80 bytes) per value of a byte or two: a 6 MB array of zeros
grew the curl process by about 500 MB. Every JSON text codeshim reads is
measured before a tree is built, against a budget of 262,144 values nested
at most 128 deep (shim/base/json.h):

* the program's request past it gets an OpenAI 400 error and is never sent;
* an upstream answer past it fails the transfer (CURLE_FILESIZE_EXCEEDED,
  the error buffer saying why), or ends the program's stream with an error;
* a tool call's arguments past it are an error told to the model;
* a large body within it still works.

All through the curl CLI under codeshim against a scripted upstream; the
program's peak RSS is checked loosely (300 MB: the old cost was 500 MB)."""

import json

import pytest

from conftest import PYTHON, run, sse_json
import fake_openai
import schema_check
from test_core_responses import (
    CI_TOOL, ENV, assert_clean_upstream, bodies, blocks, code_call_reply, curl_cmd,
    final_text, input_items, logs_of, outputs_sent, req, text_reply)
from test_hardening_bounded import PEAK_RSS
from test_streaming import check_responses_stream, curl_stream, split_http, sreq

CODE = "print('ran')\n"
MAX_VALUES = 262144  # SHIM_JSON_MAX_VALUES
MAX_DEPTH = 128      # SHIM_JSON_MAX_DEPTH
SIZE = 6 << 20
RSS_BOUND_KB = 300 * 1024
SSE = {"Content-Type": "text/event-stream"}


def zeros(n_bytes):
    return "[" + ",".join(["0"] * (n_bytes // 2)) + "]"


def keys(n_keys):
    return "{" + ",".join('"k%07d":0' % i for i in range(n_keys)) + "}"


def nested(depth):
    return "[" * depth + "]" * depth


def segments(n_bytes, depth=100):
    """n_bytes of arrays nested depth deep (within the depth budget)."""
    seg = nested(depth)
    return "[" + ",".join([seg] * (n_bytes // (len(seg) + 1))) + "]"


HOSTILE = {
    "zeros": lambda: zeros(SIZE),
    "keys": lambda: keys(SIZE // 13),
    "deep": lambda: nested(MAX_DEPTH + 1),
    "deep_6MB": lambda: segments(SIZE),
}


def with_member(obj, text):
    """obj's JSON text with a member "x" whose value is the JSON text given."""
    s = json.dumps(obj, separators=(",", ":"))
    return s[:-1] + ',"x":' + text + "}"


def measured(url, body, extra, tmp_path):
    """POSTs body with the curl CLI under codeshim. Returns (exit code,
    stdout, stderr, peak RSS in KB)."""
    peak = tmp_path / "peak"
    rc, out, err = run([PYTHON, "-c", PEAK_RSS, peak] + curl_cmd(url, extra),
                       env=ENV, input=body)
    return rc, out, err, int(peak.read_text())


def assert_budget_named(message):
    assert "more than %d JSON values" % MAX_VALUES in message, message
    assert "%d levels" % MAX_DEPTH in message, message


# --------------------------------------------------- the program's request

@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_request_past_the_budget_gets_400_and_is_never_sent(scripted, tmp_path, shape):
    body = with_member(req(blocks(CODE)), HOSTILE[shape]())
    up = scripted([{"body": text_reply("never")}])
    rc, out, err, kb = measured(up.url + "/responses", body, ["-i"], tmp_path)
    assert rc == 0, err[-500:]
    status, headers, text = split_http(out)
    assert status == 400, out[:300]
    assert headers["content-type"].startswith("application/json")
    r = json.loads(text)
    schema_check.validate(r, "ErrorResponse")
    e = r["error"]
    assert e["type"] == "invalid_request_error" and e["param"] is None, e
    assert_budget_named(e["message"])
    assert "neither run nor forwarded" in e["message"], e
    assert up.requests() == []
    assert kb < RSS_BOUND_KB, "peak RSS %d KB" % kb


# ------------------------------------------------------ the upstream's reply

REPLIES = dict(HOSTILE)
# usage summing reads a bounded number of fields; the reading comes first
REPLIES["usage_1M_keys"] = None


def hostile_reply(shape):
    if shape == "usage_1M_keys":
        r = json.dumps(text_reply("never"), separators=(",", ":"))
        assert r.count('"usage":{') == 1
        return r.replace('"usage":{', '"usage":' + keys(1000000)[:-1] + ",")
    return with_member(text_reply("never"), HOSTILE[shape]())


@pytest.mark.parametrize("shape", sorted(REPLIES))
def test_reply_past_the_budget_fails_the_transfer(scripted, tmp_path, shape):
    up = scripted([{"body": hostile_reply(shape)}, {"body": text_reply("done")}])
    rc, out, err, kb = measured(up.url + "/responses", json.dumps(req(blocks(CODE))), [],
                                tmp_path)
    assert rc == 63, (rc, err[-500:])  # CURLE_FILESIZE_EXCEEDED
    msg = err.decode()
    assert "curl: (63) codeshim: the model server's answer was not read" in msg, msg
    assert_budget_named(msg)
    assert out == b""  # nothing of it reached the program
    assert_clean_upstream(up, n=1)  # nothing run: no second call
    assert kb < RSS_BOUND_KB, "peak RSS %d KB" % kb


def test_reply_past_the_budget_after_the_stream_began(scripted):
    """The second answer is past the budget: the program's stream ends with
    error + response.failed, after the first execution."""
    up = scripted([{"body": code_call_reply(CODE)},
                   {"body": with_member(text_reply("never"), zeros(SIZE))},
                   {"body": text_reply("done")}])
    status, headers, raw = curl_stream(up.url + "/responses", sreq(blocks(CODE)))
    assert status == 200
    events = sse_json(raw)
    names, items = check_responses_stream(events)
    assert names[-2:] == ["error", "response.failed"], names
    err = events[-2][1]
    assert err["code"] == "upstream_error", err
    assert_budget_named(err["message"])
    final = events[-1][1]["response"]
    assert [o["type"] for o in final["output"]] == ["code_interpreter_call"]
    assert logs_of(final["output"][0]) == "ran\n"
    assert_clean_upstream(up, n=2)


def test_streamed_event_past_the_budget_ends_the_stream(scripted):
    """An event of the upstream's own stream past the budget: the events
    before it are relayed, then the program's stream fails."""
    whole = fake_openai.responses_events(fake_openai.Model().responses(
        {"model": "m", "input": "hi"}))
    big = with_member({"type": "response.in_progress", "sequence_number": 2}, zeros(SIZE))
    text = ("".join(t for _, t in whole[:2]) + "event: response.in_progress\ndata: " + big
            + "\n\n" + "".join(t for _, t in whole[2:]))
    up = scripted([{"headers": SSE, "body": text}])
    status, headers, raw = curl_stream(up.url + "/responses", sreq("hi"))
    assert status == 200
    events = sse_json(raw)
    names = [n for n, _ in events]
    assert names[:2] == [t for t, _ in whole[:2]], names
    assert names[-2:] == ["error", "response.failed"], names
    assert_budget_named(events[-2][1]["message"])
    check_responses_stream(events)


def test_tool_arguments_past_the_budget_are_told_to_the_model(scripted):
    """A call of codeshim's tool whose arguments (a string inside a reply
    within the budget) hold more values than the budget: not run, and the
    model is told why."""
    args = '{"code":"print(1)","x":%s}' % zeros(2 * MAX_VALUES + 10)
    up = scripted([{"body": code_call_reply(CODE, arguments=args)},
                   {"body": text_reply("done")}])
    rc, out, err = run(curl_cmd(up.url + "/responses"), env=ENV,
                       input=json.dumps(req(blocks(CODE))))
    assert rc == 0, err[-500:]
    r = json.loads(out)
    schema_check.validate(r, "Response")
    assert final_text(r) == "done"
    [told] = outputs_sent(bodies(up)[1]).values()
    assert "more JSON values or levels than codeshim reads" in told, told
    assert_clean_upstream(up, n=2)


# --------------------------------------------------- large but sane bodies

def test_large_bodies_within_the_budget_work(scripted, tmp_path):
    """A request of 30,000 history messages (about 90,000 values) and
    answers of 200,000 values each: the loop runs as for small ones."""
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": "message %d" % i} for i in range(30000)]
    body = req(history + [{"role": "user", "content": blocks(CODE)}],
               metadata={"topic": "large"})
    first = with_member(code_call_reply(CODE), zeros(2 * 200000))
    second = with_member(text_reply("done"), keys(100000))
    up = scripted([{"body": first}, {"body": second}])
    rc, out, err, kb = measured(up.url + "/responses", json.dumps(body), [], tmp_path)
    assert rc == 0, err[-500:]
    r = json.loads(out)
    schema_check.validate(r, "Response")
    assert final_text(r) == "done"
    assert [o["type"] for o in r["output"]][0] == "code_interpreter_call"
    assert logs_of(r["output"][0]) == "ran\n"
    assert_clean_upstream(up, n=2)
    sent = input_items(bodies(up)[0])
    assert len(sent) == 30001 and sent[12345]["content"] == "message 12345"
    assert kb < RSS_BOUND_KB, "peak RSS %d KB" % kb
