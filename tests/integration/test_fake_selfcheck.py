"""Self-checks of the test infrastructure, WITHOUT codeshim.

The fake upstream is driven with the plain curl CLI (no preload) and the
schema validator is shown to accept good bodies and reject broken ones."""

import copy
import http.client
import json
import os
import subprocess
import time

import pytest

from conftest import PYTHON, REPO, parse_sse, run, sse_json
import fake_openai
import schema_check
from schema_check import SchemaError

CURL = "/usr/bin/curl"
FAKE = REPO / "tests" / "fakes" / "fake_openai.py"
CHECK = REPO / "tests" / "tools" / "schema_check.py"

CODE_TOOL = {"type": "function", "name": "run_python", "description": "Run Python.",
             "parameters": {"type": "object",
                            "properties": {"code": {"type": "string"}},
                            "required": ["code"], "additionalProperties": False},
             "strict": True}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather.",
                "parameters": {"type": "object",
                               "properties": {"city": {"type": "string"}},
                               "required": ["city"], "additionalProperties": False},
                "strict": True}
CHAT_CODE_TOOL = {"type": "function",
                  "function": {"name": "run_python", "description": "Run Python.",
                               "parameters": {"type": "object",
                                              "properties": {"code": {"type": "string"}},
                                              "required": ["code"]}}}
USER_TEXT = "Please compute.\n```python\nprint(2+2)\n```\n"


def curl(url, body=None, headers=(), raw=None, extra=()):
    """POST body (JSON) or raw bytes with plain curl (no preload).
    Returns (curl exit code, HTTP status, parsed JSON body or text)."""
    cmd = [CURL, "-sS", "-o", "-", "-w", "\n%{http_code}",
           "-H", "Content-Type: application/json"]
    for h in headers:
        cmd += ["-H", h]
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                        else None)
    if data is not None:
        cmd += ["--data-binary", "@-"]
    cmd += list(extra) + [url]
    rc, out, err = run(cmd, input=data, preload=False, timeout=30)
    text, _, code = out.decode().rpartition("\n")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return rc, int(code or 0), parsed


def resp_req(input_items, tools=(CODE_TOOL,), **kw):
    b = {"model": "gpt-fake", "input": input_items, "tools": list(tools)}
    b.update(kw)
    return b


def user(text):
    return {"role": "user", "content": text}


def history_of(resp):
    """The function_call items of a Response, as input items."""
    return [{"type": "function_call", "call_id": o["call_id"], "name": o["name"],
             "arguments": o["arguments"]}
            for o in resp["output"] if o["type"] == "function_call"]


# ------------------------------------------------------------- model mode

def test_responses_code_call_then_text(fake):
    rc, st, r = curl(fake.url + "/responses", resp_req([user(USER_TEXT)]))
    assert (rc, st) == (0, 200), r
    schema_check.validate(r, "Response")
    assert r["object"] == "response" and r["status"] == "completed"
    assert r["model"] == "gpt-fake"
    assert r["tools"] == [CODE_TOOL] and r["tool_choice"] == "auto"
    [fc] = r["output"]
    assert fc["type"] == "function_call" and fc["name"] == "run_python"
    assert fc["id"].startswith("fc_") and fc["call_id"].startswith("call_")
    assert json.loads(fc["arguments"]) == {"code": "print(2+2)\n"}
    assert r["usage"]["input_tokens"] == 10 and r["usage"]["output_tokens"] == 5
    assert r["usage"]["total_tokens"] == 15

    follow = [user(USER_TEXT)] + history_of(r) + [
        {"type": "function_call_output", "call_id": fc["call_id"], "output": "4\n"}]
    rc, st, r2 = curl(fake.url + "/responses", resp_req(follow))
    assert (rc, st) == (0, 200), r2
    schema_check.validate(r2, "Response")
    [msg] = r2["output"]
    assert msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["content"] == [{"type": "output_text", "text": "Done. Tool said: 4\n",
                               "annotations": [], "logprobs": []}]
    assert r2["usage"]["input_tokens"] == 30
    assert r2["id"] != r["id"]

    reqs = fake.requests()
    assert len(reqs) == 2
    assert reqs[0]["method"] == "POST" and reqs[0]["path"] == "/v1/responses"
    assert reqs[0]["body"] == resp_req([user(USER_TEXT)])
    assert reqs[0]["headers"]["content-type"] == "application/json"
    assert json.loads(reqs[0]["raw"]) == reqs[0]["body"]


def test_responses_string_input_and_no_tool(fake):
    rc, st, r = curl(fake.url + "/responses", {"model": "m", "input": "hi"})
    assert st == 200
    schema_check.validate(r, "Response")
    assert r["output"][0]["content"][0]["text"] == "Hello from the fake model."
    assert r["tools"] == [] and r["tool_choice"] == "auto"


def test_responses_two_blocks_sequential_and_parallel(fake):
    text = "```python\na = 1\n```\nthen\n```python\nprint(a)\n```"
    _, st, r = curl(fake.url + "/responses", resp_req([user(text)]))
    assert st == 200 and len(r["output"]) == 1
    assert json.loads(r["output"][0]["arguments"])["code"] == "a = 1\n"
    conv = [user(text)] + history_of(r) + [
        {"type": "function_call_output", "call_id": r["output"][0]["call_id"],
         "output": ""}]
    _, st, r = curl(fake.url + "/responses", resp_req(conv))
    assert st == 200 and json.loads(r["output"][0]["arguments"])["code"] == "print(a)\n"

    _, st, r = curl(fake.url + "/responses", resp_req([user("[parallel] " + text)]))
    assert st == 200
    schema_check.validate(r, "Response")
    codes = [json.loads(o["arguments"])["code"] for o in r["output"]]
    assert codes == ["a = 1\n", "print(a)\n"]
    assert len({o["call_id"] for o in r["output"]}) == 2
    # parallel_tool_calls: false -> one call per turn
    _, st, r = curl(fake.url + "/responses",
                    resp_req([user("[parallel] " + text)], parallel_tool_calls=False))
    assert len(r["output"]) == 1 and r["parallel_tool_calls"] is False
    # tool_choice none -> text
    _, st, r = curl(fake.url + "/responses", resp_req([user(text)], tool_choice="none"))
    assert r["output"][0]["type"] == "message" and r["tool_choice"] == "none"


def test_responses_get_weather_handback(fake):
    text = "[call get_weather] and\n```python\nprint(1)\n```"
    tools = (CODE_TOOL, WEATHER_TOOL)
    _, st, r = curl(fake.url + "/responses", resp_req([user(text)], tools))
    assert r["output"][0]["name"] == "run_python"
    conv = [user(text)] + history_of(r) + [
        {"type": "function_call_output", "call_id": r["output"][0]["call_id"],
         "output": "1\n"}]
    _, st, r = curl(fake.url + "/responses", resp_req(conv, tools))
    schema_check.validate(r, "Response")
    [fc] = r["output"]
    assert fc["name"] == "get_weather" and json.loads(fc["arguments"]) == {"city": "Paris"}
    conv += history_of(r) + [{"type": "function_call_output", "call_id": fc["call_id"],
                              "output": [{"type": "input_text", "text": "sunny"}]}]
    _, st, r = curl(fake.url + "/responses", resp_req(conv, tools))
    assert st == 200
    assert r["output"][0]["content"][0]["text"] == "Done. Tool said: sunny"
    # without the get_weather tool offered the marker is ignored
    _, st, r = curl(fake.url + "/responses", resp_req([user("[call get_weather]")]))
    assert r["output"][0]["type"] == "message"


def test_responses_previous_response_id(fake):
    _, st, r = curl(fake.url + "/responses", resp_req([user(USER_TEXT)]))
    fc = r["output"][0]
    _, st, r2 = curl(fake.url + "/responses", resp_req(
        [{"type": "function_call_output", "call_id": fc["call_id"], "output": "4"}],
        previous_response_id=r["id"]))
    assert st == 200, r2
    assert r2["previous_response_id"] == r["id"]
    assert r2["output"][0]["content"][0]["text"] == "Done. Tool said: 4"
    _, st, e = curl(fake.url + "/responses", resp_req([user("x")],
                                                      previous_response_id="resp_nope"))
    assert st == 400 and e["error"]["param"] == "previous_response_id"


def _assert_error(st, body, status, param=None):
    assert st == status, body
    schema_check.validate(body, "ErrorResponse")
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


def test_responses_validation_400(fake):
    url = fake.url + "/responses"
    # function_call_output with no preceding function_call
    _, st, e = curl(url, resp_req([user("x"), {"type": "function_call_output",
                                               "call_id": "call_orphan", "output": "1"}]))
    err = _assert_error(st, e, 400)
    assert "call_orphan" in err["message"] and err["type"] == "invalid_request_error"
    # output BEFORE its call is an orphan too
    _, st, e = curl(url, resp_req([
        user("x"),
        {"type": "function_call_output", "call_id": "call_a", "output": "1"},
        {"type": "function_call", "call_id": "call_a", "name": "run_python",
         "arguments": "{}"}]))
    _assert_error(st, e, 400)
    # function_call never answered
    _, st, e = curl(url, resp_req([user("x"), {"type": "function_call",
                                               "call_id": "call_b", "name": "run_python",
                                               "arguments": "{}"}]))
    assert "call_b" in _assert_error(st, e, 400)["message"]
    # the hosted tool is refused (non-OpenAI server)
    _, st, e = curl(url, resp_req([user(USER_TEXT)], tools=(
        CODE_TOOL, {"type": "code_interpreter", "container": {"type": "auto"}})))
    assert "code_interpreter" in _assert_error(st, e, 400, "tools[1].type")["message"]
    # ... and so are code_interpreter_call history items
    _, st, e = curl(url, resp_req([user("x"), {
        "type": "code_interpreter_call", "id": "ci_1", "status": "completed",
        "code": "1", "container_id": "cntr_1", "outputs": []}]))
    _assert_error(st, e, 400)
    # body not JSON
    _, st, e = curl(url, raw=b"{not json")
    _assert_error(st, e, 400)
    _, st, e = curl(url, raw=b"[1, 2]")
    _assert_error(st, e, 400)
    # stream: true is answered as a valid stream (live streaming), or as JSON when
    # the request asks the fake to play a server that does not stream
    _, st, e = curl(url, resp_req([user("x")], stream=True))
    assert st == 200, e
    events = sse_json(e.encode())
    schema_check.validate_sse_responses(events)
    assert [n for n, _ in events][-1] == "response.completed"
    _, st, e = curl(url, resp_req([user("x")], stream=True), headers=["X-Fake-No-Stream: 1"])
    assert st == 200 and e["object"] == "response"
    assert len(fake.requests()) == 9


def test_chat_tool_loop(fake):
    url = fake.url + "/chat/completions"
    msgs = [{"role": "system", "content": "be brief"}, user(USER_TEXT)]
    rc, st, c = curl(url, {"model": "gpt-fake", "messages": msgs,
                           "tools": [CHAT_CODE_TOOL]})
    assert (rc, st) == (0, 200), c
    schema_check.validate(c, "CreateChatCompletionResponse")
    ch = c["choices"][0]
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] is None
    [tc] = ch["message"]["tool_calls"]
    assert tc["function"]["name"] == "run_python"
    assert json.loads(tc["function"]["arguments"]) == {"code": "print(2+2)\n"}
    assert c["usage"] == {**c["usage"], "prompt_tokens": 20, "completion_tokens": 5,
                          "total_tokens": 25}
    msgs += [ch["message"], {"role": "tool", "tool_call_id": tc["id"], "content": "4\n"}]
    _, st, c2 = curl(url, {"model": "gpt-fake", "messages": msgs,
                           "tools": [CHAT_CODE_TOOL]})
    assert st == 200, c2
    schema_check.validate(c2, "CreateChatCompletionResponse")
    assert c2["choices"][0]["finish_reason"] == "stop"
    assert c2["choices"][0]["message"]["content"] == "Done. Tool said: 4\n"
    assert "tool_calls" not in c2["choices"][0]["message"]
    # parallel
    text = "[parallel]\n```python\n1\n```\n```python\n2\n```"
    _, st, c3 = curl(url, {"model": "m", "messages": [user(text)],
                           "tools": [CHAT_CODE_TOOL]})
    assert [json.loads(t["function"]["arguments"])["code"]
            for t in c3["choices"][0]["message"]["tool_calls"]] == ["1\n", "2\n"]


def test_chat_validation_400(fake):
    url = fake.url + "/chat/completions"
    call = {"id": "call_1", "type": "function",
            "function": {"name": "run_python", "arguments": "{}"}}
    # tool message without a preceding assistant tool_calls
    _, st, e = curl(url, {"model": "m", "messages": [
        user("x"), {"role": "tool", "tool_call_id": "call_1", "content": "1"}]})
    _assert_error(st, e, 400)
    # tool message answering an id the assistant did not issue
    _, st, e = curl(url, {"model": "m", "messages": [
        user("x"), {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_2", "content": "1"}]})
    _assert_error(st, e, 400)
    # tool message separated from its assistant message by a user message
    _, st, e = curl(url, {"model": "m", "messages": [
        user("x"), {"role": "assistant", "content": None, "tool_calls": [call]},
        user("y"), {"role": "tool", "tool_call_id": "call_1", "content": "1"}]})
    _assert_error(st, e, 400)
    # unanswered tool call
    _, st, e = curl(url, {"model": "m", "messages": [
        user("x"), {"role": "assistant", "content": None, "tool_calls": [call]}]})
    assert "call_1" in _assert_error(st, e, 400)["message"]
    # hosted tool, stream, not JSON
    _, st, e = curl(url, {"model": "m", "messages": [user("x")],
                          "tools": [{"type": "code_interpreter"}]})
    _assert_error(st, e, 400)
    _, st, e = curl(url, {"model": "m", "messages": [user("x")], "stream": True,
                          "stream_options": {"include_usage": True}})
    assert st == 200, e
    chunks = sse_json(e.encode())
    assert chunks[-1][1] == "[DONE]"
    for _, c in chunks[:-1]:
        schema_check.validate_chat_chunk(c)
    assert chunks[-2][1]["choices"] == [] and chunks[-2][1]["usage"]["total_tokens"] > 0
    _, st, e = curl(url, raw=b"model=x")
    _assert_error(st, e, 400)
    # the valid form passes
    _, st, c = curl(url, {"model": "m", "messages": [
        user("x"), {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"}]})
    assert st == 200 and c["choices"][0]["message"]["content"] == "Done. Tool said: one"


def test_special_status_slow_and_404(fake):
    _, st, e = curl(fake.url + "/responses", resp_req([user("x")]),
                    headers=["X-Fake-Status: 503"])
    err = _assert_error(st, e, 503)
    assert err["type"] == "server_error"
    _, st, e = curl(fake.url + "/chat/completions", {"model": "m", "messages": []},
                    headers=["X-Fake-Status: 429"])
    _assert_error(st, e, 429)
    _, st, e = curl(fake.url + "/models", extra=["-X", "GET"])
    _assert_error(st, e, 404)
    t = time.monotonic()
    _, st, r = curl(fake.url + "/responses", {"model": "fake-slow", "input": "hi"})
    assert st == 200 and time.monotonic() - t >= 0.3


def test_keepalive_and_headers(fake):
    body = json.dumps({"model": "m", "input": "hi"})
    rc, out, err = run([CURL, "-sv", "-H", "Content-Type: application/json",
                        "-d", body, fake.url + "/responses",
                        "-d", body, fake.url + "/responses?x=1"],
                       preload=False, timeout=30)
    assert rc == 0, err
    assert b"Re-using existing connection" in err or b"Reusing existing" in err, err
    assert b"content-length:" in err.lower() and b"x-request-id: req_" in err.lower()
    reqs = fake.requests()
    assert [r["query"] for r in reqs] == ["", "x=1"]
    assert reqs[1]["path"] == "/v1/responses"
    # kept-alive requests do not stall (Nagle off, one write per answer)
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    t = time.monotonic()
    for _ in range(20):
        conn.request("POST", "/v1/responses", body=body,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Length")
        r.read()
    conn.close()
    assert time.monotonic() - t < 0.7


# ------------------------------------------------------------ scripted mode

def test_scripted_replies(scripted):
    srv = scripted([
        {"status": 201, "headers": {"X-Test": "one"}, "body": {"a": 1}},
        {"body": "data: x\n\n", "headers": {"Content-Type": "text/event-stream"},
         "delay": 0.2},
        {"close": True},
        {"close": "reset"},
        {"status": 429, "body": fake_openai.error_body(429, "slow down")},
    ])
    rc, out, err = run([CURL, "-sS", "-i", "-d", "{}", srv.url + "/responses"],
                       preload=False)
    assert rc == 0 and out.startswith(b"HTTP/1.1 201")
    assert b"X-Test: one" in out and out.endswith(b'{"a":1}')
    t = time.monotonic()
    rc, out, err = run([CURL, "-sS", "-i", srv.url + "/anything"], preload=False)
    assert rc == 0 and time.monotonic() - t >= 0.2
    assert b"Content-Type: text/event-stream" in out and out.endswith(b"data: x\n\n")
    rc, out, err = run([CURL, "-sS", "-d", "{}", srv.url + "/responses"], preload=False)
    assert rc == 52, (rc, err)          # empty reply from server
    rc, out, err = run([CURL, "-sS", "-d", "{}", srv.url + "/responses"], preload=False)
    assert rc == 56, (rc, err)          # connection reset by peer
    _, st, e = curl(srv.url + "/responses", {})
    _assert_error(st, e, 429)
    assert srv.remaining() == 0
    _, st, e = curl(srv.url + "/responses", {})
    assert _assert_error(st, e, 500)["code"] == "script_exhausted"
    assert len(srv.requests()) == 6


def test_cli_with_script_and_log(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"body": {"ok": True}}]))
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    p = subprocess.Popen([PYTHON, str(FAKE), "--port-file", str(port_file),
                          "--log", str(log), "--script", str(script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={"PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        port = int(port_file.read_text())
        url = "http://127.0.0.1:%d/v1/responses" % port
        _, st, b = curl(url, {"model": "m"}, headers=["Authorization: Bearer sk-x"])
        assert st == 200 and b == {"ok": True}
        _, st, b = curl(url, {"model": "m"})
        assert st == 500
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert p.returncode == 0 and out == b"" and err == b""
    recs = [json.loads(l) for l in log.read_text().splitlines()]
    assert len(recs) == 2
    assert set(recs[0]) == {"method", "path", "query", "headers", "body", "raw"}
    assert recs[0]["headers"]["authorization"] == "Bearer sk-x"
    assert recs[0]["body"] == {"model": "m"} and recs[0]["raw"] == '{"model": "m"}'


def test_cli_model_mode(tmp_path):
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    p = subprocess.Popen([PYTHON, str(FAKE), "--port-file", str(port_file),
                          "--log", str(log)], env={"PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        port = int(port_file.read_text())
        _, st, r = curl("http://127.0.0.1:%d/v1/responses" % port,
                        resp_req([user(USER_TEXT)]))
        assert st == 200 and r["output"][0]["type"] == "function_call"
    finally:
        p.terminate()
        p.wait(timeout=10)
    assert json.loads(log.read_text())["path"] == "/v1/responses"


# --------------------------------------------------------------- validator

GOOD_RESPONSE = {
    "id": "resp_abc", "object": "response", "created_at": 1757603567,
    "status": "completed", "error": None, "incomplete_details": None,
    "instructions": None, "model": "gpt-5-nano", "parallel_tool_calls": True,
    "previous_response_id": None, "store": True, "temperature": 1, "top_p": 1,
    "tool_choice": "auto",
    "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
    "metadata": {},
    "output": [
        {"id": "ci_1", "type": "code_interpreter_call", "status": "completed",
         "code": "print(2+2)\n", "container_id": "cntr_1",
         "outputs": [{"type": "logs", "logs": "4\n"}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "The answer is 4.",
                      "annotations": [], "logprobs": []}]}],
    "usage": {"input_tokens": 50,
              "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
              "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
              "total_tokens": 70}}


def broken(mutate):
    r = copy.deepcopy(GOOD_RESPONSE)
    mutate(r)
    return r


def test_validator_accepts_reference_example():
    schema_check.validate(GOOD_RESPONSE, "Response")


@pytest.mark.parametrize("mutate,needle", [
    (lambda r: r.pop("output"), "'output' is a required property"),
    (lambda r: r["usage"].pop("total_tokens"), "'total_tokens' is a required property"),
    (lambda r: r["usage"]["input_tokens_details"].pop("cache_write_tokens"),
     "cache_write_tokens"),
    (lambda r: r.pop("tool_choice"), "'tool_choice' is a required property"),
    (lambda r: r.__setitem__("usage", None), "usage"),       # null only while in progress
    (lambda r: r["output"][1]["content"][0].pop("annotations"), "annotations"),
    (lambda r: r["output"][0].pop("outputs"), "outputs"),
    (lambda r: r["output"][0].__setitem__("type", "code_interpreter"),
     "code_interpreter"),
    (lambda r: r["output"][0]["outputs"][0].__setitem__("logs", 4), "logs"),
    (lambda r: r.__setitem__("status", "done"), "status"),
    (lambda r: r.__setitem__("object", "chat.completion"), "object"),
])
def test_validator_rejects_broken_response(mutate, needle):
    with pytest.raises(SchemaError) as ei:
        schema_check.validate(broken(mutate), "Response")
    assert needle in str(ei.value)


def test_validator_null_usage_only_in_progress():
    r = broken(lambda r: r.update(status="in_progress", usage=None, output=[]))
    schema_check.validate(r, "Response")
    schema_check.validate({"type": "response.created", "sequence_number": 0,
                           "response": r}, "ResponseStreamEvent")
    with pytest.raises(SchemaError):
        schema_check.validate(dict(r, status="completed"), "Response")


def test_validator_nullable_conversion():
    # CreateChatCompletionStreamResponse.usage is OpenAPI "nullable: true"
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
             "model": "m", "usage": None,
             "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                          "logprobs": None, "finish_reason": None}]}
    schema_check.validate_chat_chunk(chunk)
    schema_check.validate_chat_chunk(json.dumps(chunk))
    with pytest.raises(SchemaError):
        schema_check.validate_chat_chunk(dict(chunk, usage={"prompt_tokens": 1}))
    with pytest.raises(SchemaError):
        bad = copy.deepcopy(chunk)
        bad["choices"][0]["finish_reason"] = "done"
        schema_check.validate_chat_chunk(bad)
    with pytest.raises(SchemaError):
        schema_check.validate_chat_chunk({k: v for k, v in chunk.items() if k != "id"})


def _stream():
    rid = "resp_1"
    base = broken(lambda r: r.update(id=rid, status="in_progress", usage=None, output=[]))
    ci = {"id": "ci_1", "type": "code_interpreter_call", "status": "in_progress",
          "code": "", "container_id": "cntr_1", "outputs": []}
    done = dict(ci, status="completed", code="print(1)",
                outputs=[{"type": "logs", "logs": "1\n"}])
    evs = [
        {"type": "response.created", "response": base},
        {"type": "response.in_progress", "response": base},
        {"type": "response.output_item.added", "output_index": 0, "item": ci},
        {"type": "response.code_interpreter_call.in_progress", "output_index": 0,
         "item_id": "ci_1"},
        {"type": "response.code_interpreter_call_code.delta", "output_index": 0,
         "item_id": "ci_1", "delta": "print(1)"},
        {"type": "response.code_interpreter_call_code.done", "output_index": 0,
         "item_id": "ci_1", "code": "print(1)"},
        {"type": "response.code_interpreter_call.interpreting", "output_index": 0,
         "item_id": "ci_1"},
        {"type": "response.code_interpreter_call.completed", "output_index": 0,
         "item_id": "ci_1"},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
         "content_index": 0, "delta": "hi", "logprobs": []},
        {"type": "response.completed",
         "response": dict(GOOD_RESPONSE, id=rid, output=[done])},
    ]
    for i, e in enumerate(evs):
        e["sequence_number"] = i
    return evs


def test_validate_sse_responses():
    evs = _stream()
    assert schema_check.validate_sse_responses(evs) == len(evs)
    sse = "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e)) for e in evs)
    pairs = parse_sse(sse.encode())
    assert [p[0] for p in pairs] == [e["type"] for e in evs]
    assert schema_check.validate_sse_responses(pairs) == len(evs)

    bad = _stream()
    del bad[9]["logprobs"]                       # text delta without logprobs
    with pytest.raises(SchemaError, match="event 9"):
        schema_check.validate_sse_responses(bad)
    bad = _stream()
    del bad[8]["item"]["outputs"]
    with pytest.raises(SchemaError, match="event 8"):
        schema_check.validate_sse_responses(bad)
    bad = _stream()
    bad[3]["type"] = "response.code_interpreter_call.running"
    with pytest.raises(SchemaError, match="event 3"):
        schema_check.validate_sse_responses(bad)
    bad = _stream()
    bad[10]["response"] = dict(bad[10]["response"], usage=None)  # null usage at the end
    with pytest.raises(SchemaError, match="event 10"):
        schema_check.validate_sse_responses(bad)
    # event name must equal the JSON type
    with pytest.raises(SchemaError, match="differs"):
        schema_check.validate_sse_responses([("response.done", json.dumps(evs[0]))])
    # spec-shape error event passes; a non-JSON data line does not
    schema_check.validate_sse_responses([{"type": "error", "code": None, "message": "x",
                                          "param": None, "sequence_number": 3}])
    with pytest.raises(SchemaError):
        schema_check.validate_sse_responses(["{oops"])


def test_schema_check_cli(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(GOOD_RESPONSE))
    bad.write_text(json.dumps(broken(lambda r: r.pop("output"))))
    p = subprocess.run([PYTHON, str(CHECK), "Response", str(good)], capture_output=True)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([PYTHON, str(CHECK), "Response", str(bad)], capture_output=True)
    assert p.returncode == 1 and b"'output' is a required property" in p.stderr
    p = subprocess.run([PYTHON, str(CHECK), "NoSuchComponent", str(good)],
                       capture_output=True)
    assert p.returncode == 2


def test_schema_loads_fast():
    code = ("import sys, time; t = time.monotonic(); sys.path.insert(0, %r); "
            "import schema_check as s; s.validate(%r, 'Response'); "
            "print(time.monotonic() - t)" % (str(CHECK.parent), GOOD_RESPONSE))
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, check=True)
    assert float(p.stdout) < 2.0


def test_parse_sse_framing():
    data = (b": keep-alive\r\n\r\nevent: a\r\ndata: {\"x\":1}\r\n\r\n"
            b"data: line1\ndata:line2\n\nevent: b\n\n"   # b has no data: not dispatched
            b"data: [DONE]\n\ndata: unterminated")
    assert parse_sse(data) == [("a", '{"x":1}'), (None, "line1\nline2"),
                               (None, "[DONE]")]
    assert sse_json(b"data: {\"y\": 2}\n\ndata: [DONE]\n\n") == [
        (None, {"y": 2}), (None, "[DONE]")]
