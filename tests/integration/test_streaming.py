"""Streaming. A program that asks for "stream": true gets SSE,
produced while codeshim runs the code-interpreter loop (since streaming is live the
upstream is asked to stream too and its events are relayed live: the fake
upstream streams; test_stream_live.py checks the timing and the fallback).

Programs: the curl CLI with -N (and -i, to see the status and headers) and
examples/stream.c, a libcurl program that parses the stream in its write
callback and logs a timestamp per callback call and per event.  Every test
checks the exact event order, the schema of every event or chunk, and what
the upstream received.  Offline-mode streaming is covered in
test_offline_replay_trace.py."""

import json
import re

import pytest

from conftest import REPO, run, sse_json
import fake_openai
import schema_check
from test_core_responses import (CI_ID, CI_TOOL, CNTR_ID, ENV, KEY, WEATHER_TOOL,
                                 assert_clean_upstream, blocks, code_call_reply,
                                 curl_post, outputs_sent, req)

STREAM = REPO / "build" / "examples" / "stream"
INTERNAL = "python"  # codeshim's function tool, offered upstream only

CHAT_CI = {"type": "code_interpreter"}
CHAT_WEATHER = {"type": "function",
                "function": {k: WEATHER_TOOL[k] for k in ("name", "description",
                                                          "parameters", "strict")}}

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
CI_EVENTS = ["response.output_item.added",
             "response.code_interpreter_call.in_progress",
             "response.code_interpreter_call_code.delta",
             "response.code_interpreter_call_code.done",
             "response.code_interpreter_call.interpreting",
             "response.code_interpreter_call.completed",
             "response.output_item.done"]
MSG_EVENTS = ["response.output_item.added",
              "response.content_part.added",
              "response.output_text.delta",      # one or more (see collapse)
              "response.output_text.done",
              "response.content_part.done",
              "response.output_item.done"]
FC_EVENTS = ["response.output_item.added",
             "response.function_call_arguments.delta",
             "response.function_call_arguments.done",
             "response.output_item.done"]
HEAD = ["response.created", "response.in_progress"]
DELTAS = ("response.output_text.delta", "response.code_interpreter_call_code.delta",
          "response.function_call_arguments.delta")


# ------------------------------------------------------------------ helpers

def collapse(names):
    """Event names with each run of one delta type counted once: how many
    pieces a text is cut into is not part of the order being checked (the
    pieces are checked to add up to the whole text)."""
    out = []
    for n in names:
        if not (out and n == out[-1] and n in DELTAS):
            out.append(n)
    return out


def split_http(out):
    """curl -i output -> (status, {lowercased header: value}, body bytes)."""
    head, sep, body = out.partition(b"\r\n\r\n")
    assert sep, out[:300]
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def curl_stream(url, body, env=None, headers=()):
    """POST with curl -N -i; returns (status, headers, body bytes)."""
    rc, out, err = curl_post(url, body, ["-N", "-i"], headers=headers, env=env)
    assert rc == 0, err.decode(errors="replace")
    return split_http(out)


def assert_sse_headers(status, headers):
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream"), headers
    assert "content-length" not in headers, headers


def item_text(item):
    return "".join(c.get("text", "") for c in item["content"])


def check_responses_stream(events, final_schema=True):
    """Every invariant of a Responses stream: an event: line
    equal to the type on every event, the schema of every event, gap-free
    sequence numbers from 0, created/in_progress first and exactly one
    terminal event last, one response id throughout, output_index 0, 1, 2...
    in the order of the added events with every event of an item between
    its added and done, and deltas adding up to what done events carry.
    final_schema=False leaves the terminal event's schema to the caller.
    Returns (event names, {output_index: (added item, done item, events)})."""
    assert events, "empty stream"
    names = [n for n, _ in events]
    assert "[DONE]" not in [d for _, d in events]
    assert all(n is not None for n in names), names
    schema_check.validate_sse_responses(events if final_schema else events[:-1])
    datas = [d for _, d in events]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert names[:2] == HEAD, names[:3]
    assert names[-1] in TERMINAL and not [n for n in names[:-1] if n in TERMINAL], names
    ids = {d["response"]["id"] for d in datas if "response" in d}
    assert len(ids) == 1, ids
    assert datas[0]["response"]["status"] == "in_progress"
    assert datas[0]["response"]["output"] == []
    for d in datas:  # codeshim's own tool never shows in an echoed response
        for t in (d.get("response") or {}).get("tools") or []:
            assert not (t.get("type") == "function" and t.get("name") == INTERNAL), t

    items, current = {}, None
    for n, d in events[2:-1]:
        if n == "error":
            continue
        idx = d["output_index"]
        if n == "response.output_item.added":
            assert current is None, "item %s added before item %s was done" % (idx, current)
            assert idx == len(items), (idx, len(items))
            current = idx
            items[idx] = [d["item"], None, []]
            continue
        assert idx == current, (n, idx, current)
        added = items[idx][0]
        if "item_id" in d:
            assert d["item_id"] == added["id"], (n, d["item_id"], added["id"])
        items[idx][2].append(d)
        if n == "response.output_item.done":
            assert d["item"]["id"] == added["id"]
            assert d["item"]["type"] == added["type"]
            items[idx][1] = d["item"]
            current = None
    if names[-1] != "response.failed":
        assert current is None, "item %s never done" % current

    for idx, (added, done, evs) in items.items():
        if done is None:
            continue
        by = {}
        for d in evs:
            by.setdefault(d["type"], []).append(d)

        def deltas(t):
            return "".join(d["delta"] for d in by.get(t, []))
        assert added["status"] == "in_progress", added
        if added["type"] == "code_interpreter_call":
            assert added["code"] == "" and added["outputs"] == []
            assert CI_ID.match(added["id"]) and CNTR_ID.match(added["container_id"])
            code = deltas("response.code_interpreter_call_code.delta")
            assert by["response.code_interpreter_call_code.done"][0]["code"] == code
            assert done["code"] == code
        elif added["type"] == "message":
            assert added["content"] == []
            text = deltas("response.output_text.delta")
            assert by["response.output_text.done"][0]["text"] == text
            assert by["response.content_part.done"][0]["part"]["text"] == text
            assert item_text(done) == text
        elif added["type"] == "function_call":
            assert added["arguments"] == ""
            args = deltas("response.function_call_arguments.delta")
            fdone = by["response.function_call_arguments.done"][0]
            assert fdone["arguments"] == args == done["arguments"]
            assert fdone.get("name") == done["name"] == added["name"]
            assert done["call_id"] == added["call_id"]
    final = datas[-1]["response"]
    if names[-1] != "response.failed":
        assert final["output"] == [items[i][1] for i in range(len(items))]
        schema_check.validate(final, "Response")
    return names, items


def responses_stream(url, body, env=None):
    """A streamed Responses request through curl -N: checked, returned as
    (event names, items, final response)."""
    status, headers, raw = curl_stream(url, body, env)
    assert_sse_headers(status, headers)
    events = sse_json(raw)
    names, items = check_responses_stream(events)
    return names, items, events[-1][1]["response"]


def sreq(text, tools=(CI_TOOL,), **kw):
    return req(text, tools, stream=True, **kw)


def chat_req(text, tools=(CHAT_CI,), stream=True, include_usage=None):
    b = {"model": "gpt-fake", "messages": [{"role": "user", "content": text}],
         "tools": list(tools)}
    if stream:
        b["stream"] = True
    if include_usage is not None:
        b["stream_options"] = {"include_usage": include_usage}
    return b


def check_chat_stream(events, include_usage):
    """Every invariant of a Chat stream: no event: lines,
    every chunk a valid CreateChatCompletionStreamResponse with the same id,
    created and model, the role first, one finish_reason on the last choice
    chunk, the usage chunk (choices: []) only when asked for, [DONE] last,
    and never a call of codeshim's tool.
    Returns (chunks, text, {index: tool call}, finish_reason)."""
    assert [n for n, _ in events] == [None] * len(events)
    assert [d for _, d in events].count("[DONE]") == 1 and events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    for c in chunks:
        schema_check.validate_chat_chunk(c)
        assert c["object"] == "chat.completion.chunk"
        assert (c["id"], c["created"], c["model"]) == \
            (chunks[0]["id"], chunks[0]["created"], chunks[0]["model"])
    if include_usage:
        last = chunks.pop()
        assert last["choices"] == [], last
        u = last["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0
        assert all("usage" in c and c["usage"] is None for c in chunks), chunks
    else:
        assert all(c.get("usage") is None for c in chunks), chunks
    assert all(len(c["choices"]) == 1 and c["choices"][0]["index"] == 0 for c in chunks)
    first = chunks[0]["choices"][0]["delta"]
    assert first.get("role") == "assistant", first
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    finish = chunks[-1]["choices"][0]["finish_reason"]
    assert finish in ("stop", "length", "tool_calls", "content_filter"), finish
    assert chunks[-1]["choices"][0]["delta"] == {}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    calls = {}
    for c in chunks:
        for tc in c["choices"][0]["delta"].get("tool_calls") or []:
            call = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            if tc.get("id"):
                call["id"] = tc["id"]
            fn = tc.get("function") or {}
            if fn.get("name"):
                call["name"] = fn["name"]
            call["arguments"] += fn.get("arguments") or ""
    assert not [c for c in calls.values() if c["name"] == INTERNAL], calls
    return chunks, text, calls, finish


def chat_stream(url, body, env=None):
    status, headers, raw = curl_stream(url, body, env)
    assert_sse_headers(status, headers)
    return check_chat_stream(sse_json(raw), (body.get("stream_options") or {})
                             .get("include_usage"))


def assert_clean_chat_upstream(srv, n, stream=None):
    """Every upstream Chat request: streaming (stream=True: as a streaming
    program's are), with usage asked for (codeshim sums it) whatever the
    program's stream_options, or not streaming (stream=False), or either
    (None); codeshim's function tool in place of code_interpreter, the
    program's key."""
    reqs = srv.requests()
    assert len(reqs) == n, [q["raw"][:200] for q in reqs]
    for q in reqs:
        assert q["method"] == "POST" and q["path"].endswith("/chat/completions")
        b = q["body"]
        so = dict(b.get("stream_options") or {})
        so.pop("include_obfuscation", None)  # the program's, when it chose
        streamed = ("stream" in b, b.get("stream"), so or None)
        assert streamed in {True: [(True, True, {"include_usage": True})],
                            False: [(False, None, None)],
                            None: [(True, True, {"include_usage": True}),
                                   (False, None, None)]}[stream], b
        tools = b.get("tools") or []
        assert not [t for t in tools if t.get("type") == "code_interpreter"], tools
        fn = [t for t in tools if t.get("type") == "function"
              and t["function"]["name"] == INTERNAL]
        assert len(fn) == 1 and "code" in fn[0]["function"]["parameters"]["properties"]
        assert q["headers"].get("authorization") == "Bearer " + KEY
    return reqs


def chat_code_call_reply(code):
    """A scripted upstream chat.completion calling codeshim's tool."""
    r = fake_openai.Model().chat(chat_req(blocks(code), stream=False, tools=[
        {"type": "function", "function": {
            "name": INTERNAL, "parameters": {"type": "object",
                                             "properties": {"code": {"type": "string"}}}}}]))
    assert r["choices"][0]["message"]["tool_calls"], r
    return r


LINE = re.compile(r"^\[\+(\d+\.\d+)s\] (\S+)(.*)$")


def run_example(args, url, tmp_path, env=None):
    """Runs examples/stream under codeshim. Returns (exit code, [(t, name,
    rest)] from its event lines, stdout text, stderr text, timestamps JSON
    lines)."""
    assert STREAM.exists(), "build it: make build/examples/stream"
    ts = tmp_path / "ts.jsonl"
    e = dict(ENV, OPENAI_BASE_URL=url, OPENAI_MODEL="gpt-fake")
    e.update(env or {})
    rc, out, err = run([STREAM, "--timestamps-json", ts] + list(args), env=e)
    text = out.decode()
    lines = [(float(m.group(1)), m.group(2), m.group(3).strip())
             for m in map(LINE.match, text.splitlines()) if m]
    stamps = [json.loads(x) for x in ts.read_text().splitlines()] if ts.exists() else []
    return rc, lines, text, err.decode(errors="replace"), stamps


def stamped_events(stamps):
    return [(s["t"], s["event"]) for s in stamps if "event" in s]


def stamped_writes(stamps):
    return [(s["t"], s["bytes"]) for s in stamps if "bytes" in s]


# ------------------------------------------------------- Responses, curl -N

def test_responses_one_execution_exact_events(fake):
    """One execution then a message: the exact B.2 sequence, every event
    valid and consistent; the upstream was called non-streaming (stream and
    stream_options removed)."""
    body = sreq(blocks("print(6 * 7)\n"), stream_options={"include_obfuscation": False})
    names, items, final = responses_stream(fake.url + "/responses", body)
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
    ci, msg = items[0][1], items[1][1]
    assert ci["type"] == "code_interpreter_call" and ci["status"] == "completed"
    assert ci["code"] == "print(6 * 7)\n"
    assert ci["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert msg["type"] == "message" and msg["status"] == "completed"
    assert item_text(msg) == "Done. Tool said: 42\n"
    assert final["status"] == "completed" and final["tools"] == [CI_TOOL]
    assert final["usage"]["output_tokens"] == 10  # two upstream calls, 5 each
    reqs = assert_clean_upstream(fake, n=2)
    assert list(outputs_sent(reqs[1]["body"]).values()) == ["42\n"]


@pytest.mark.parametrize("prefix, upstream_calls", [("Please run this.", 3),
                                                   ("[parallel] Please run this.", 2)],
                         ids=["two-turns", "one-turn-parallel"])
def test_responses_two_executions(fake, prefix, upstream_calls):
    """Two executions, in two upstream turns or both in one: one item each,
    output_index 0 and 1, then the message at 2."""
    body = sreq(blocks("x = 41\n", "print(x + 1)\n", prefix=prefix))
    names, items, final = responses_stream(fake.url + "/responses", body)
    assert collapse(names) == HEAD + CI_EVENTS + CI_EVENTS + MSG_EVENTS + \
        ["response.completed"]
    assert [items[i][1]["type"] for i in range(3)] == \
        ["code_interpreter_call", "code_interpreter_call", "message"]
    assert [items[i][1]["code"] for i in range(2)] == ["x = 41\n", "print(x + 1)\n"]
    assert items[1][1]["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert items[0][1]["id"] != items[1][1]["id"]
    assert item_text(items[2][1]) == "Done. Tool said: 42\n"
    assert_clean_upstream(fake, n=upstream_calls)


def test_responses_program_tool_handed_back(fake):
    """The model calls the program's own tool after an execution: the stream
    shows the execution, then the function_call item (added, arguments
    delta, arguments done with the name, done) and completes."""
    body = sreq("[call get_weather] " + blocks("print(1)\n"), tools=(CI_TOOL, WEATHER_TOOL))
    names, items, final = responses_stream(fake.url + "/responses", body)
    assert collapse(names) == HEAD + CI_EVENTS + FC_EVENTS + ["response.completed"]
    fc = items[1][1]
    assert fc["type"] == "function_call" and fc["name"] == "get_weather"
    assert json.loads(fc["arguments"]) == {"city": "Paris"}
    assert fc["call_id"].startswith("call_")
    assert final["status"] == "completed"
    assert [o["type"] for o in final["output"]] == ["code_interpreter_call", "function_call"]
    assert_clean_upstream(fake, n=2)


def test_responses_capped_stream_ends_incomplete(fake):
    """CODESHIM_MAX_LOOPS=1 with two blocks: one execution, the second call
    is not run (and not shown), the last upstream call forbids tools, and
    the stream ends with response.incomplete."""
    body = sreq(blocks("print('one')\n", "print('two')\n"))
    names, items, final = responses_stream(fake.url + "/responses", body,
                                           env={"CODESHIM_MAX_LOOPS": "1"})
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.incomplete"]
    assert items[0][1]["outputs"] == [{"type": "logs", "logs": "one\n"}]
    assert final["status"] == "incomplete"
    reqs = assert_clean_upstream(fake, n=3)
    assert reqs[2]["body"]["tool_choice"] == "none"


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_text_deltas_never_split_utf8(fake, api):
    """A long non-ASCII answer comes in several deltas, each valid UTF-8
    (the stream decodes), adding up to the whole text."""
    code = "print('h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c ' * 4)\n"
    expected = "Done. Tool said: " + "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c " * 4 + "\n"
    if api == "responses":
        names, items, _ = responses_stream(fake.url + "/responses", sreq(blocks(code)))
        assert names.count("response.output_text.delta") > 1
        assert item_text(items[1][1]) == expected
    else:
        chunks, text, calls, finish = chat_stream(fake.url + "/chat/completions",
                                                  chat_req(blocks(code)))
        assert len([c for c in chunks if c["choices"][0]["delta"].get("content")]) > 1
        assert text == expected and finish == "stop"


# ------------------------------------------------------------ Chat, curl -N

@pytest.mark.parametrize("include_usage", [None, False, True],
                         ids=["no-stream-options", "usage-false", "usage-true"])
def test_chat_stream(fake, include_usage):
    """Role chunk, content, finish chunk, the usage chunk only when asked
    for, [DONE]; codeshim's own call never appears."""
    body = chat_req(blocks("print(6 * 7)\n"), include_usage=include_usage)
    status, headers, raw = curl_stream(fake.url + "/chat/completions", body)
    assert_sse_headers(status, headers)
    events = sse_json(raw)
    chunks, text, calls, finish = check_chat_stream(events, include_usage)
    assert text == "Done. Tool said: 42\n" and finish == "stop" and calls == {}
    if include_usage:
        assert events[-2][1]["usage"]["completion_tokens"] == 10  # 2 calls x 5
    else:
        assert not [c for _, c in events[:-1] if not c["choices"]]
    reqs = assert_clean_chat_upstream(fake, n=2, stream=True)
    assert [m["role"] for m in reqs[1]["body"]["messages"]] == ["user", "assistant", "tool"]
    assert reqs[1]["body"]["messages"][2]["content"] == "42\n"


def test_chat_stream_program_tool_call_deltas(fake):
    """The model calls the program's tool after an execution: it reaches the
    program as tool_call deltas with finish_reason tool_calls; codeshim's
    own call does not."""
    body = chat_req("[call get_weather] " + blocks("print(1)\n"),
                    tools=(CHAT_CI, CHAT_WEATHER), include_usage=True)
    chunks, text, calls, finish = chat_stream(fake.url + "/chat/completions", body)
    assert finish == "tool_calls" and text == ""
    assert list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    first = [c for c in chunks if c["choices"][0]["delta"].get("tool_calls")][0]
    tc = first["choices"][0]["delta"]["tool_calls"][0]
    assert tc["type"] == "function" and tc["id"] == calls[0]["id"]
    assert_clean_chat_upstream(fake, n=2, stream=True)


# -------------------------------------------------------- the C example

def test_example_responses_stream(fake, tmp_path):
    """examples/stream reads the stream through its write callback: its
    header callback sees text/event-stream, and it sees every event, in
    order, each in its own write-callback call."""
    rc, lines, out, err, stamps = run_example([blocks("print(6 * 7)\n")], fake.url, tmp_path)
    assert rc == 0, (out, err)
    assert lines[0][1:] == ("HTTP", "200 text/event-stream")
    names = [n for _, n, _ in lines[1:]]
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
    assert [n for _, n in stamped_events(stamps)] == names
    assert len(stamped_writes(stamps)) == len(names)  # event-sized pieces
    assert "--- answer ---\nDone. Tool said: 42\n" in out
    assert_clean_upstream(fake, n=2)


def test_example_chat_stream(fake, tmp_path):
    rc, lines, out, err, stamps = run_example(["--chat", blocks("print(6 * 7)\n")],
                                              fake.url, tmp_path)
    assert rc == 0, (out, err)
    got = [(n, rest) for _, n, rest in lines]
    # the content comes in the upstream's own pieces (relayed live)
    content = [r for n, r in got if r.startswith("content ")]
    assert "".join(json.loads(r[len("content "):]) for r in content) == "Done. Tool said: 42\n"
    assert [x for x in got if not x[1].startswith("content ")] == [
        ("HTTP", "200 text/event-stream"),
        ("chat.completion.chunk", "role"),
        ("chat.completion.chunk", "finish_reason=stop"),
        ("chat.completion.chunk", "usage total_tokens=50"),
        ("[DONE]", "")]
    assert got[2:2 + len(content)] == [("chat.completion.chunk", r) for r in content]
    assert len(stamped_writes(stamps)) == 4 + len(content)
    assert_clean_chat_upstream(fake, n=2, stream=True)  # streamed, usage asked for


def test_example_reassembles_events_split_across_callbacks(fake, tmp_path):
    """Output bigger than libcurl's 16 KiB write size: the events that carry
    it come in several write-callback calls and are still parsed whole."""
    rc, lines, out, err, stamps = run_example([blocks("print('x' * 15000)\n")], fake.url,
                                              tmp_path)
    assert rc == 0, (out[-500:], err)
    names = [n for _, n, _ in lines[1:]]
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
    writes = stamped_writes(stamps)
    assert len(writes) > len(names)
    assert max(b for _, b in writes) == 16384
    assert "--- answer ---\nDone. Tool said: " + "x" * 15000 + "\n" in out


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("api", ["responses", "chat"])
def test_upstream_error_before_stream_is_plain_http(fake, api):
    """The first upstream call fails: the program gets that status and JSON
    body, not a stream."""
    if api == "responses":
        url, body = fake.url + "/responses", sreq(blocks("print(1)\n"))
    else:
        url, body = fake.url + "/chat/completions", chat_req(blocks("print(1)\n"),
                                                            include_usage=True)
    status, headers, raw = curl_stream(url, body, headers=["X-Fake-Status: 503"])
    assert status == 503
    assert headers["content-type"] == "application/json"
    assert json.loads(raw) == fake_openai.error_body(
        503, "Fake status 503 requested by X-Fake-Status.")
    assert b"event:" not in raw and b"data:" not in raw
    if api == "responses":
        assert_clean_upstream(fake, n=1)
    else:
        assert_clean_chat_upstream(fake, n=1)


def test_example_upstream_error_before_stream(scripted, tmp_path):
    err_body = {"error": {"message": "overloaded", "type": "server_error",
                          "param": None, "code": "server_error"}}
    up = scripted([{"status": 503, "body": err_body}])
    rc, lines, out, err, stamps = run_example([blocks("print(1)\n")], up.url, tmp_path)
    assert rc == 1
    assert [(n, rest) for _, n, rest in lines] == [("HTTP", "503 application/json")]
    assert json.dumps(err_body, separators=(",", ":")) in out
    assert stamped_events(stamps) == []
    assert_clean_upstream(up, n=1)


FAILURES = {"dropped": [{"close": True}, {"close": True}],  # libcurl retries once
            "503": [{"status": 503, "body": fake_openai.error_body(503, "overloaded")}]}


def failed_stream(scripted, how):
    up = scripted([{"body": code_call_reply("print('ran')\n")}] + FAILURES[how])
    status, headers, raw = curl_stream(up.url + "/responses", sreq(blocks("print('ran')\n")))
    assert_sse_headers(status, headers)
    return up, sse_json(raw)


@pytest.mark.parametrize("how", list(FAILURES))
def test_failure_after_stream_began_ends_with_error_and_failed(scripted, how):
    """The upstream fails after an execution was streamed: the stream ends
    with an error event then response.failed (same response id, status
    failed, an error object)."""
    up, events = failed_stream(scripted, how)
    names, items = check_responses_stream(events, final_schema=False)
    assert names == HEAD + CI_EVENTS + ["error", "response.failed"]
    assert items[0][1]["outputs"] == [{"type": "logs", "logs": "ran\n"}]
    err = events[-2][1]
    assert err["message"] and "code" in err and "param" in err
    resp = events[-1][1]["response"]
    assert resp["status"] == "failed"
    assert resp["error"]["code"] and resp["error"]["message"]
    assert resp["id"] == events[0][1]["response"]["id"]
    reqs = assert_clean_upstream(up)
    assert len(reqs) >= 2


@pytest.mark.parametrize("how", list(FAILURES))
def test_failure_after_stream_began_failed_response_validates(scripted, how):
    """response.failed is a finished Response: usage so far, and the items
    already done (the code that ran), as output_item.done announced them."""
    up, events = failed_stream(scripted, how)
    schema_check.validate_sse_responses(events)
    resp = events[-1][1]["response"]
    schema_check.validate(resp, "Response")
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert resp["output"] == done and done[0]["type"] == "code_interpreter_call"
    assert resp["usage"]["input_tokens"] > 0
    assert resp["created_at"] == events[0][1]["response"]["created_at"]


def test_example_failure_after_stream_began(scripted, tmp_path):
    up = scripted([{"body": code_call_reply("print('ran')\n")}] + FAILURES["dropped"])
    rc, lines, out, err, stamps = run_example([blocks("print('ran')\n")], up.url, tmp_path)
    assert rc == 1, out
    names = [n for _, n, _ in lines[1:]]
    assert names == HEAD + CI_EVENTS + ["error", "response.failed"]


def test_chat_failure_after_stream_began_is_error_chunk(scripted, tmp_path):
    """Chat: the stream began with the role chunk; a dropped upstream then
    ends it with an {"error": {...}} data chunk (no [DONE])."""
    script = [{"body": chat_code_call_reply("print('ran')\n")}] + FAILURES["dropped"]
    up = scripted(script)
    body = chat_req(blocks("print('ran')\n"), include_usage=True)
    status, headers, raw = curl_stream(up.url + "/chat/completions", body)
    assert_sse_headers(status, headers)
    events = sse_json(raw)
    assert [n for n, _ in events] == [None, None]
    schema_check.validate_chat_chunk(events[0][1])
    assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
    err = events[1][1]["error"]
    assert err["message"] and err["type"] and "code" in err and "param" in err
    assert_clean_chat_upstream(up, n=len(up.requests()))

    up2 = scripted(list(script))
    rc, lines, out, err2, stamps = run_example(["--chat", blocks("print('ran')\n")],
                                               up2.url, tmp_path)
    assert rc == 1
    assert [n for _, n, _ in lines] == ["HTTP", "chat.completion.chunk", "error"]


# ---------------------------------------------------------------- timing

SLEEP = "import time; time.sleep(1.0)\n"


def test_events_reach_program_while_sandbox_runs(fake, tmp_path):
    """The sandbox sleeps 1 s: everything up to "interpreting" reaches the
    program's write callback well before "completed", and the closing
    events come after it."""
    rc, lines, out, err, stamps = run_example([blocks(SLEEP)], fake.url, tmp_path)
    assert rc == 0, (out, err)
    ev = stamped_events(stamps)
    names = [n for _, n in ev]
    assert collapse(names) == HEAD + CI_EVENTS + MSG_EVENTS + ["response.completed"]
    t = {n: tt for tt, n in reversed(ev)}  # first occurrence of each name
    t_interp = t["response.code_interpreter_call.interpreting"]
    t_done = t["response.code_interpreter_call.completed"]
    assert t_done - t_interp > 0.5, (t_interp, t_done)
    i = names.index("response.code_interpreter_call.interpreting")
    assert all(tt < t_done - 0.5 for tt, _ in ev[:i + 1])
    assert all(tt >= t_done for tt, _ in ev[i + 1:])
    writes = stamped_writes(stamps)
    assert len([w for w in writes if w[0] < t_done - 0.5]) == i + 1
    assert len(writes) == len(ev)


def test_chat_role_chunk_reaches_program_while_sandbox_runs(fake, tmp_path):
    rc, lines, out, err, stamps = run_example(["--chat", blocks(SLEEP)], fake.url, tmp_path)
    assert rc == 0, (out, err)
    ev = stamped_events(stamps)
    assert [n for _, n in ev] == ["chat.completion.chunk"] * (len(ev) - 1) + ["[DONE]"]
    assert len(ev) >= 5, ev
    assert ev[1][0] - ev[0][0] > 0.5, ev  # role chunk, then the rest after the sleep


def test_each_execution_streamed_before_next_upstream_call(fake, tmp_path):
    """With a slow model (0.3 s a reply), the first execution is complete
    at the program before the second upstream reply arrives."""
    rc, lines, out, err, stamps = run_example(
        [blocks("x = 1\n", "print(x)\n")], fake.url, tmp_path,
        env={"OPENAI_MODEL": fake_openai.SLOW_MODEL})
    assert rc == 0, (out, err)
    ev = stamped_events(stamps)
    assert collapse([n for _, n in ev]) == HEAD + CI_EVENTS + CI_EVENTS + MSG_EVENTS + \
        ["response.completed"]
    dones = [tt for tt, n in ev if n == "response.output_item.done"]
    addeds = [tt for tt, n in ev if n == "response.output_item.added"]
    assert addeds[1] - dones[0] > 0.15, ev
    assert addeds[2] - dones[1] > 0.15, ev


# ------------------------------------------------------------ non-streaming

@pytest.mark.parametrize("api", ["responses", "chat"])
def test_non_streaming_still_plain_json(fake, api):
    """Sanity: without stream the answer is one JSON body, as before."""
    if api == "responses":
        url, body, schema = fake.url + "/responses", req(blocks("print(6 * 7)\n")), "Response"
    else:
        url, body, schema = (fake.url + "/chat/completions",
                             chat_req(blocks("print(6 * 7)\n"), stream=False),
                             "CreateChatCompletionResponse")
    status, headers, raw = curl_stream(url, body)
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(raw)
    r = json.loads(raw)
    schema_check.validate(r, schema)
    assert b"data:" not in raw
    if api == "responses":
        assert r["output"][-1]["content"][0]["text"] == "Done. Tool said: 42\n"
        assert_clean_upstream(fake, n=2)
    else:
        assert r["choices"][0]["message"]["content"] == "Done. Tool said: 42\n"
        assert_clean_chat_upstream(fake, n=2, stream=False)
