"""Live streaming. A program that asks for "stream": true gets the
upstream's own stream relayed as it arrives: text deltas at once, the code
of codeshim's call while the model is still writing it, the program's own
calls; codeshim's calls withheld (Chat) or shown as code_interpreter_call
items (Responses); one response across upstream calls.

The fake upstream streams paced (X-Fake-Stream-Delay) and logs when it wrote
each event; the program is the curl CLI (-N) read through a pipe with the
arrival time of every event. Timing is checked by order only: an event
reached the program before the upstream had written a later one. Every
event is checked against the schema (test_streaming's checkers)."""

import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import clean_env, sse_json
import fake_openai
import schema_check
from test_core_responses import (CURL, KEY, WEATHER_TOOL, assert_clean_upstream, blocks,
                                 curl_post)
from test_offline_replay_trace import dead_url
from test_streaming import (CHAT_CI, CHAT_WEATHER, HEAD, CI_EVENTS, MSG_EVENTS,
                            assert_clean_chat_upstream, chat_req, check_chat_stream,
                            check_responses_stream, collapse, sreq)

PACE = "X-Fake-Stream-Delay: 0.03"
# code whose JSON text has escapes to split: \n, \", \u00e9, a surrogate pair
AWKWARD = 'print("caf\u00e9 \\"q\\"", "\U0001F600")\n'


def timed_stream(url, body, headers=(PACE,), env=None, timeout=60):
    """POSTs body through curl -N under codeshim, reading its stdout as it
    comes. Returns [(arrival time, event name, data)] (time.monotonic(),
    the clock the fake logs with) and curl's exit code."""
    cmd = [CURL, "-sS", "-N", "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer " + KEY]
    for h in headers:
        cmd += ["-H", h]
    cmd += ["--data-binary", json.dumps(body), url]
    e = {"OPENAI_API_KEY": KEY}
    e.update(env or {})
    home = tempfile.mkdtemp(prefix="codeshim-home-")
    p = subprocess.Popen(cmd, env=clean_env(e, True, home), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    buf, out, deadline = b"", [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        t = time.monotonic()
        buf += chunk
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            for name, data in sse_json(frame + b"\n\n"):
                out.append((t, name, data))
    rc = p.wait(timeout=max(1, deadline - time.monotonic()))
    p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    return out, rc


def sent(fake, rid=None):
    """The fake's write log for one upstream request (default: the first)."""
    evs = fake.sent_events()
    rid = rid or evs[0]["rid"]
    return [e for e in evs if e["rid"] == rid]


def responses_events(timed):
    return [(n, d) for _, n, d in timed]


# ------------------------------------------------------------ Responses

def test_responses_text_deltas_arrive_while_upstream_generates(fake):
    """No code: the program's text deltas are the upstream's, each relayed
    while the upstream is still generating (the first arrived before the
    upstream wrote its last delta), all valid, one response."""
    timed, rc = timed_stream(fake.url + "/responses", sreq("Say hello."))
    assert rc == 0
    names, items = check_responses_stream(responses_events(timed))
    assert collapse(names) == HEAD + MSG_EVENTS + ["response.completed"]
    up = sent(fake)
    up_deltas = [e["t"] for e in up if e["type"] == "response.output_text.delta"]
    got = [t for t, n, _ in timed if n == "response.output_text.delta"]
    assert len(got) == len(up_deltas) > 5  # the upstream's own pieces
    assert got[0] < up_deltas[-1]          # not one burst at the end
    assert got[0] < up[-1]["t"]
    # each delta reached the program before the upstream wrote the next but one
    for k in range(len(got) - 2):
        assert got[k] < up_deltas[k + 2], (k, got[k], up_deltas[k + 2])
    assert items[0][1]["content"][0]["text"] == "Hello from the fake model."
    assert_clean_upstream(fake, n=1)
    assert fake.requests()[0]["body"]["stream"] is True


def test_responses_code_streams_while_model_writes_it(fake):
    """The model's call of codeshim's tool becomes a code_interpreter_call
    announced as the call starts, its code decoded out of the argument
    deltas (escapes and a surrogate pair split across them) and sent
    before the upstream has finished writing the arguments; then the
    execution, then the next upstream stream in the same response."""
    timed, rc = timed_stream(fake.url + "/responses", sreq(blocks(AWKWARD)))
    assert rc == 0
    names, items = check_responses_stream(responses_events(timed))
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
    ci = items[0][1]
    assert ci["code"] == AWKWARD
    assert ci["outputs"][0]["logs"] == 'caf\u00e9 "q" \U0001F600\n'
    up = sent(fake)
    args_done = [e["t"] for e in up if e["type"] == "response.function_call_arguments.done"][0]
    code = [(t, d["delta"]) for t, n, d in timed
            if n == "response.code_interpreter_call_code.delta"]
    assert len(code) > 5
    assert code[0][0] < args_done  # the code was on its way while being written
    assert "".join(d for _, d in code) == AWKWARD
    added = [t for t, n, d in timed if n == "response.output_item.added"
             and d["item"]["type"] == "code_interpreter_call"][0]
    assert added < args_done
    # the second upstream call's text came live too
    up2 = sent(fake, fake.sent_events()[-1]["rid"])
    text = [t for t, n, _ in timed if n == "response.output_text.delta"]
    assert text[0] < up2[-1]["t"]
    assert_clean_upstream(fake, n=2)


def test_responses_program_tool_forwarded_live(fake):
    """The program's own function call is relayed as it comes: its
    argument deltas reach the program before the upstream is done."""
    timed, rc = timed_stream(fake.url + "/responses",
                             sreq("[call get_weather] please",
                                  tools=({"type": "code_interpreter",
                                          "container": {"type": "auto"}}, WEATHER_TOOL)))
    assert rc == 0
    names, items = check_responses_stream(responses_events(timed))
    fc = items[0][1]
    assert fc["type"] == "function_call" and fc["name"] == "get_weather"
    assert json.loads(fc["arguments"]) == {"city": "Paris"}
    up = sent(fake)
    got = [t for t, n, _ in timed if n == "response.function_call_arguments.delta"]
    assert len(got) > 2 and got[0] < up[-1]["t"]


def test_responses_parallel_calls_and_renumbering(fake):
    """Two calls in one upstream turn, then the answer: the first call's
    code is live, the second follows once the first ran; output_index runs
    0, 1, 2 and sequence_number is gap-free across both upstream streams
    (checked by check_responses_stream)."""
    timed, rc = timed_stream(fake.url + "/responses",
                             sreq(blocks("x = 6\n", "print(x * 7)\n",
                                         prefix="[parallel] Please run this.")))
    assert rc == 0
    names, items = check_responses_stream(responses_events(timed))
    assert collapse(names) == HEAD + CI_EVENTS * 2 + MSG_EVENTS + ["response.completed"]
    assert [items[i][1]["type"] for i in range(3)] == ["code_interpreter_call"] * 2 + ["message"]
    assert items[1][1]["outputs"][0]["logs"] == "42\n"
    assert len({d["response"]["id"] for _, _, d in timed if "response" in d}) == 1


# ----------------------------------------------------------------- Chat

def test_chat_content_live_codeshims_call_withheld(fake):
    """Chat: codeshim's tool-call deltas never reach the program; the text
    of the answer does, live, with one id and created across both upstream
    calls, and usage summed."""
    body = chat_req(blocks(AWKWARD), include_usage=True)
    timed, rc = timed_stream(fake.url + "/chat/completions", body)
    assert rc == 0
    chunks, text, calls, finish = check_chat_stream(responses_events(timed), True)
    assert calls == {} and finish == "stop"
    assert text == 'Done. Tool said: caf\u00e9 "q" \U0001F600\n'
    up2 = sent(fake, fake.sent_events()[-1]["rid"])
    content = [t for t, _, d in timed if d != "[DONE]" and d["choices"]
               and d["choices"][0]["delta"].get("content")]
    assert len(content) > 5 and content[0] < up2[-1]["t"]
    assert timed[-2][2]["usage"]["completion_tokens"] == 10  # two upstream calls
    assert_clean_chat_upstream(fake, n=2, stream=True)


def test_chat_program_tool_call_forwarded_live(fake):
    body = chat_req("[call get_weather] please", tools=(CHAT_CI, CHAT_WEATHER))
    timed, rc = timed_stream(fake.url + "/chat/completions", body)
    assert rc == 0
    chunks, text, calls, finish = check_chat_stream(responses_events(timed), None)
    assert finish == "tool_calls"
    assert list(calls) == [0] and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    got = [t for t, _, d in timed if d != "[DONE]" and d["choices"]
           and d["choices"][0]["delta"].get("tool_calls")]
    assert len(got) > 2 and got[0] < sent(fake)[-1]["t"]


# ------------------------------------------------------------- fallback

@pytest.mark.parametrize("api", ["responses", "chat"])
def test_upstream_that_does_not_stream_falls_back(fake, api):
    """An upstream that answers JSON to a streaming request: the stream is
    synthesised from each answer, as before streaming was live."""
    hdr = ("X-Fake-No-Stream: 1",)
    if api == "responses":
        timed, rc = timed_stream(fake.url + "/responses", sreq(blocks("print(6 * 7)\n")), hdr)
        names, items = check_responses_stream(responses_events(timed))
        assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
        assert items[0][1]["outputs"][0]["logs"] == "42\n"
    else:
        timed, rc = timed_stream(fake.url + "/chat/completions",
                                 chat_req(blocks("print(6 * 7)\n")), hdr)
        _, text, calls, _ = check_chat_stream(responses_events(timed), None)
        assert text == "Done. Tool said: 42\n" and calls == {}
    assert rc == 0
    assert fake.sent_events() == []  # nothing was streamed upstream


SSE = {"Content-Type": "text/event-stream"}


def test_stream_that_ends_early_fails_cleanly(scripted):
    """An upstream stream that stops before its terminal event: the
    program's stream ends with error + response.failed."""
    whole = fake_openai.responses_events(fake_openai.Model().responses(
        {"model": "m", "input": "hi"}))
    up = scripted([{"headers": SSE, "body": "".join(text for _, text in whole[:-1])}])
    timed, rc = timed_stream(up.url + "/responses", sreq("hi"), headers=())
    names = [n for _, n, _ in timed]
    assert names[:-2] == [t for t, _ in whole[:-1]]  # all relayed, then the failure
    assert names[-2:] == ["error", "response.failed"]
    assert "ended before" in timed[-2][2]["message"]
    check_responses_stream(responses_events(timed))


def test_stream_over_the_cap_fails_cleanly(fake):
    """Bounded memory: a stream larger than CODESHIM_MAX_RESPONSE ends the
    program's stream with a failure naming the cap."""
    timed, rc = timed_stream(fake.url + "/responses", sreq(blocks("print(1)\n")),
                             env={"CODESHIM_MAX_RESPONSE": "4096"})
    names = [n for _, n, _ in timed]
    assert names[-2:] == ["error", "response.failed"], names
    assert "CODESHIM_MAX_RESPONSE" in timed[-2][2]["message"]
    schema_check.validate_sse_responses(responses_events(timed)[:-1])


def test_recorded_stream_replays(fake, tmp_path):
    """CODESHIM_RECORD keeps the upstream's stream as it came; a replay
    relays it again with no network."""
    rec = tmp_path / "rec"
    body = sreq(blocks("print(6 * 7)\n"))
    first, rc = timed_stream(fake.url + "/responses", body, env={"CODESHIM_RECORD": rec})
    assert rc == 0
    docs = [json.loads(f.read_text()) for f in sorted(rec.iterdir())]
    assert len(docs) == 2
    assert all(d["response"]["content_type"].startswith("text/event-stream") for d in docs)
    fake.stop()
    again, rc = timed_stream(dead_url() + "/responses", body, headers=(),
                             env={"CODESHIM_REPLAY": rec})
    assert rc == 0
    assert [n for _, n, _ in again] == [n for _, n, _ in first]
    check_responses_stream(responses_events(again))


def test_program_that_stops_reading_stops_the_upstream_stream(fake):
    """The program hangs up after the first text delta: codeshim stops
    reading the upstream at once (the transfer ends long before the
    upstream would have finished) and the program's transfer fails."""
    body = sreq("Say hello.")
    cmd = [CURL, "-sS", "-N", "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer " + KEY, "-H", "X-Fake-Stream-Delay: 0.1",
           "--data-binary", json.dumps(body), fake.url + "/responses"]
    home = tempfile.mkdtemp(prefix="codeshim-home-")
    p = subprocess.Popen(cmd, env=clean_env({"OPENAI_API_KEY": KEY}, True, home),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    buf = b""
    while b"response.output_text.delta" not in buf:
        chunk = os.read(p.stdout.fileno(), 65536)
        assert chunk, buf
        buf += chunk
    p.stdout.close()  # hang up
    rc = p.wait(timeout=30)
    written = sent(fake)
    assert rc == 23, p.stderr.read()  # curl: write error
    p.stderr.close()
    assert len(written) < written[0]["n"], written  # the upstream was not read to its end
