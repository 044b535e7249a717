"""The program's request is read one way, and its own tool calls
are never touched.

1. JSON with a key twice (or U+0000) is read differently by cJSON (first
   key) and by the upstream or the program (Python's json: last key).  A
   program request like that gets a 400 and is never sent; an upstream
   answer like that is an error, and nothing in it is run.
2. Every call the program must act on (of any kind, or of a type codeshim
   does not know) ends the loop and reaches the program untouched; only a
   plain function_call to codeshim's own tool is run.  Hosted results the
   upstream finished itself do not end the loop.
3. "background": true gets a 400: the loop cannot outlive the transfer.

All through the curl CLI under the library, against a scripted upstream
(what it received is checked: often, that it received nothing)."""

import json

import pytest

import schema_check
from conftest import sse_json
from test_core_responses import (
    CI_TOOL, WEATHER_TOOL, assert_clean_upstream, assert_no_internal, blocks, ci_items,
    code_call_reply, curl_post, final_text, input_items, logs_of, ours, post_json, req,
    text_reply)
from test_streaming import (
    CHAT_CI, CHAT_WEATHER, assert_clean_chat_upstream, chat_code_call_reply, chat_req,
    check_responses_stream, curl_stream)

CODE = "print('ran')\n"
FORGED_TOOL = {"type": "function", "name": "python", "description": "The program's own.",
               "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                              "required": ["code"], "additionalProperties": False},
               "strict": True}


def compact(obj):
    return json.dumps(obj, separators=(",", ":"))


def with_keys(obj, *pairs):
    """obj's JSON text with (key, value) members added at the end, keys
    possibly already there: a body with a key twice."""
    text = compact(obj)
    assert text.endswith("}")
    return text[:-1] + "".join(',"%s":%s' % (k, compact(v)) for k, v in pairs) + "}"


def error_of(st, body, status):
    """The OpenAI error object of a codeshim-made error answer."""
    assert st == status, (st, body)
    assert isinstance(body, dict), body
    schema_check.validate(body, "ErrorResponse")
    return body["error"]


# ------------------------------------------------ 1. duplicate keys, request

BASE = req(blocks(CODE))
DUP_REQUESTS = {
    # the program's function "python" first: cJSON saw no code_interpreter
    # and passed the request on; the upstream reads the native tool
    "tools_program_python_first": (
        "/responses", "tools",
        with_keys({"model": "gpt-fake", "input": blocks(CODE), "tools": [FORGED_TOOL]},
                  ("tools", [CI_TOOL]))),
    # the native tool first: cJSON named its function "python" and ran the
    # model's calls of the program's own python tool
    "tools_code_interpreter_first": (
        "/responses", "tools",
        with_keys({"model": "gpt-fake", "input": blocks(CODE), "tools": [CI_TOOL]},
                  ("tools", [FORGED_TOOL]))),
    # JSON to a program that asked (last) for SSE
    "stream": ("/responses", "stream", with_keys(dict(BASE, stream=False), ("stream", True))),
    # cJSON removed the first session_id; the second went upstream
    "metadata_session_id": (
        "/responses", "session_id",
        with_keys(BASE, ("metadata", {"topic": "x"}))
        .replace('"metadata":{"topic":"x"}',
                 '"metadata":{"session_id":"s-one","topic":"x","session_id":"s-two"}')),
    # equal once the escape is decoded
    "escaped_tools": ("/responses", "tools",
                      compact(dict(BASE, tools=[FORGED_TOOL]))[:-1] + ',"tool\\u0073":'
                      + compact([CI_TOOL]) + "}"),
    # nested: a history item with "name" twice
    "input_item_name": (
        "/responses", "name",
        compact(dict(BASE, tools=[CI_TOOL, WEATHER_TOOL], input=[
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]))
        .replace('"name":"get_weather"', '"name":"get_weather","name":"python"')),
    "chat_tools": ("/chat/completions", "tools",
                   with_keys(chat_req(blocks(CODE), tools=[CHAT_WEATHER], stream=False),
                             ("tools", [CHAT_CI]))),
}


@pytest.mark.parametrize("case", sorted(DUP_REQUESTS))
def test_request_with_a_key_twice_is_refused_and_never_sent(scripted, case):
    path, key, body = DUP_REQUESTS[case]
    json.loads(body)  # valid JSON all the same
    up = scripted([{"body": code_call_reply(CODE)}, {"body": text_reply("done")}])
    rc, out, err = curl_post(up.url + path, body.encode(), ["-i"])
    assert rc == 0, err
    head, _, text = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 400 "), head
    assert "content-type: application/json" in head.lower()
    e = error_of(400, json.loads(text), 400)
    assert e["type"] == "invalid_request_error"
    assert e["param"] is None and e["code"] is None
    assert '"%s"' % key in e["message"] and "more than once" in e["message"], e
    assert up.requests() == []


def test_request_with_nul_in_a_key_is_refused(scripted):
    """cJSON reads "session_id\\u0000x" as "session_id"; Python as another key."""
    body = with_keys(BASE, ("metadata", {"x": "y"})).replace(
        '"metadata":{"x":"y"}', '"metadata":{"session_id\\u0000x":"s"}')
    up = scripted([{"body": text_reply("done")}])
    rc, st, r, err = post_json(up.url + "/responses", body.encode())
    e = error_of(st, r, 400)
    assert e["type"] == "invalid_request_error" and "U+0000" in e["message"]
    assert up.requests() == []


def test_same_key_in_sibling_objects_is_fine(scripted):
    """Control: the same key in different objects is no duplicate."""
    up = scripted([{"body": text_reply("fine")}])
    r = ours(up.url + "/responses", req(blocks(CODE), tools=[CI_TOOL, WEATHER_TOOL],
                                        metadata={"type": "x"}))
    assert final_text(r) == "fine"
    assert_clean_upstream(up, n=1)


# ----------------------------------------------- 1. duplicate keys, upstream

def dup_in_item(reply, old, new, index=0):
    """reply's JSON text with old replaced by new inside one output item
    (chat: inside the first tool call)."""
    item = (reply["output"][index] if "output" in reply
            else reply["choices"][0]["message"]["tool_calls"][index])
    text, itext = compact(reply), compact(item)
    assert text.count(itext) == 1 and itext.count(old) == 1
    return text.replace(itext, itext.replace(old, new))


def dup_name(reply, first, second):
    """reply's JSON text with its function call named first, then second."""
    return dup_in_item(reply, '"name":"%s"' % first, '"name":"%s","name":"%s"' % (first, second))


@pytest.mark.parametrize("order", ["ours_first", "program_first"])
def test_upstream_answer_with_a_key_twice_is_an_error(scripted, order):
    """A function_call named both "python" (codeshim's tool) and
    "get_weather" (the program's): neither is acted on."""
    names = ("python", "get_weather") if order == "ours_first" else ("get_weather", "python")
    reply = code_call_reply(CODE, name=names[0])
    up = scripted([{"body": dup_name(reply, *names)}, {"body": text_reply("done")}])
    rc, out, err = curl_post(up.url + "/responses", req(blocks(CODE), tools=[CI_TOOL, WEATHER_TOOL]),
                             ["-i"])
    assert rc == 0, err
    head, _, text = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 502 "), head
    e = error_of(502, json.loads(text), 502)
    assert e["type"] == "server_error" and e["code"] == "upstream_error"
    assert '"name"' in e["message"], e
    assert_clean_upstream(up, n=1)  # nothing run: no second call


def test_upstream_answer_with_nul_in_a_name_is_an_error(scripted):
    reply = dup_in_item(code_call_reply(CODE), '"name":"python"', '"name":"python\\u0000x"')
    up = scripted([{"body": reply}, {"body": text_reply("done")}])
    rc, st, r, err = post_json(up.url + "/responses", req(blocks(CODE)))
    e = error_of(st, r, 502)
    assert "U+0000" in e["message"]
    assert_clean_upstream(up, n=1)


def test_chat_upstream_answer_with_a_key_twice_is_an_error(scripted):
    text = dup_name(chat_code_call_reply(CODE), "python", "get_weather")
    up = scripted([{"body": text}, {"body": text_reply("done")}])
    rc, st, r, err = post_json(up.url + "/chat/completions",
                               chat_req(blocks(CODE), tools=[CHAT_CI, CHAT_WEATHER], stream=False))
    e = error_of(st, r, 502)
    assert e["code"] == "upstream_error" and '"name"' in e["message"]
    assert_clean_chat_upstream(up, n=1)


def test_upstream_key_twice_after_the_stream_began(scripted):
    """The second answer has "output" twice: the stream ends with an error
    event and response.failed, after the first execution."""
    second = compact(text_reply("one reading"))
    second = second[:-1] + ',"output":' + compact(code_call_reply(CODE)["output"]) + "}"
    up = scripted([{"body": code_call_reply(CODE)}, {"body": second},
                   {"body": text_reply("done")}])
    status, headers, raw = curl_stream(up.url + "/responses", req(blocks(CODE), stream=True))
    assert status == 200
    events = sse_json(raw)
    names, items = check_responses_stream(events)
    assert names[-2:] == ["error", "response.failed"], names
    err = events[-2][1]
    assert err["code"] == "upstream_error" and '"output"' in err["message"], err
    final = events[-1][1]["response"]
    assert [o["type"] for o in final["output"]] == ["code_interpreter_call"]
    assert logs_of(final["output"][0]) == "ran\n"
    assert_clean_upstream(up, n=2)


# ---------------------------------------------- 2. the program's own calls

# Calls the program must act on (each valid per the schema's OutputItem).
WAITS = {
    "function_call": {"id": "fc_" + "7" * 48, "type": "function_call", "status": "completed",
                      "call_id": "call_weather0000000000001", "name": "get_weather",
                      "arguments": "{\"city\":\"Oslo\"}"},
    # the program's namespace tool crm has a function named like codeshim's
    "namespaced_python": {"id": "fc_" + "8" * 48, "type": "function_call",
                          "status": "completed", "call_id": "call_crm000000000000000001",
                          "namespace": "crm", "name": "python",
                          "arguments": "{\"code\":\"print('crm')\"}"},
    "custom_tool_call": {"id": "ctc_1", "type": "custom_tool_call", "status": "completed",
                         "call_id": "call_custom00000000000001", "name": "grammar",
                         "input": "SELECT 1"},
    "computer_call": {"type": "computer_call", "id": "cu_1",
                      "call_id": "call_cu0000000000000000001",
                      "action": {"type": "click", "button": "left", "x": 10, "y": 20},
                      "pending_safety_checks": [], "status": "completed"},
    "local_shell_call": {"type": "local_shell_call", "id": "lsh_1",
                         "call_id": "call_ls0000000000000000001",
                         "action": {"type": "exec", "command": ["ls", "-l"], "env": {}},
                         "status": "completed"},
    "shell_call": {"type": "shell_call", "id": "sh_1", "call_id": "call_sh0000000000000000001",
                   "action": {"commands": ["ls"], "timeout_ms": 1000, "max_output_length": 100},
                   "status": "completed", "environment": None},
    "apply_patch_call": {"type": "apply_patch_call", "id": "apc_1",
                         "call_id": "call_ap0000000000000000001", "status": "completed",
                         "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi\n"}},
    "mcp_approval_request": {"type": "mcp_approval_request", "id": "mcpr_1",
                             "server_label": "deepwiki", "name": "ask_question",
                             "arguments": "{\"q\":\"x\"}"},
    # a type codeshim does not know (so not schema-checked)
    "unknown_type": {"type": "hologram_call", "id": "hg_1", "call_id": "call_hg0000000000000000001",
                     "name": "python", "payload": {"x": [1, 2.5, None], "y": "\u00e9"}},
}
# Hosted tools the upstream ran itself: results, nothing to answer.
INFORMS = {
    "web_search_call": {"type": "web_search_call", "id": "ws_1", "status": "completed",
                        "action": {"type": "search", "query": "weather"}},
    "file_search_call": {"type": "file_search_call", "id": "fs_1", "status": "completed",
                         "queries": ["q"], "results": None},
    "image_generation_call": {"type": "image_generation_call", "id": "ig_1",
                              "status": "completed", "result": "iVBORw0KGgo="},
    "mcp_call": {"type": "mcp_call", "id": "mcp_1", "server_label": "deepwiki",
                 "name": "ask_question", "arguments": "{}", "output": "ok", "error": None,
                 "status": "completed"},
}
CRM_TOOL = {"type": "namespace", "name": "crm", "description": "The program's CRM.",
            "tools": [dict(FORGED_TOOL, description="The CRM's own python.")]}
TOOLS = [CI_TOOL, WEATHER_TOOL, CRM_TOOL]


def turn_with(item, internal=True):
    """An upstream turn: codeshim's call (when internal), then item."""
    r = code_call_reply(CODE)
    r["output"] = (r["output"] if internal else []) + [item]
    return r


def check_answer(r, kind):
    if kind != "unknown_type":
        schema_check.validate(r, "Response")
    # a call inside the program's namespace may bear codeshim's tool name
    assert_no_internal(dict(r, output=[o for o in r["output"] if not o.get("namespace")]))


@pytest.mark.parametrize("kind", sorted(WAITS))
def test_program_call_next_to_ours_ends_the_loop_untouched(scripted, kind):
    item = WAITS[kind]
    up = scripted([{"body": turn_with(item)}, {"body": text_reply("too far")}])
    rc, st, r, err = post_json(up.url + "/responses", req(blocks(CODE), tools=TOOLS))
    assert (rc, st) == (0, 200), (r, err.decode(errors="replace"))
    check_answer(r, kind)
    assert [o["type"] for o in r["output"]] == ["code_interpreter_call", item["type"]]
    assert r["output"][1] == item  # as the upstream sent it
    [ci] = ci_items(r)
    assert ci["code"] == CODE and logs_of(ci) == "ran\n"  # ours did run
    assert r["tools"] == TOOLS
    assert_clean_upstream(up, n=1)  # and the loop stopped there


@pytest.mark.parametrize("kind", sorted(WAITS))
def test_program_call_alone_reaches_the_program_untouched(scripted, kind):
    item = WAITS[kind]
    up = scripted([{"body": turn_with(item, internal=False)}, {"body": text_reply("too far")}])
    rc, st, r, err = post_json(up.url + "/responses", req(blocks(CODE), tools=TOOLS))
    assert (rc, st) == (0, 200), (r, err.decode(errors="replace"))
    check_answer(r, kind)
    assert r["output"] == [item]
    assert_clean_upstream(up, n=1)


@pytest.mark.parametrize("kind", sorted(INFORMS))
def test_hosted_result_next_to_ours_does_not_end_the_loop(scripted, kind):
    """The upstream finished these itself: the loop goes on, and the item
    reaches the program untouched (and the upstream, as history)."""
    item = INFORMS[kind]
    up = scripted([{"body": turn_with(item)}, {"body": text_reply("all done")}])
    r = ours(up.url + "/responses", req(blocks(CODE), tools=TOOLS))
    assert [o["type"] for o in r["output"]] == ["code_interpreter_call", item["type"], "message"]
    assert r["output"][1] == item
    assert logs_of(r["output"][0]) == "ran\n"
    assert final_text(r) == "all done"
    assert_no_internal(r)
    reqs = assert_clean_upstream(up, n=2)
    assert item in input_items(reqs[1]["body"])


def test_namespaced_python_streamed_untouched(scripted):
    """The stream tells codeshim's call from the program's the same way."""
    item = WAITS["namespaced_python"]
    up = scripted([{"body": turn_with(item)}, {"body": text_reply("too far")}])
    status, headers, raw = curl_stream(up.url + "/responses", req(blocks(CODE), tools=TOOLS,
                                                                  stream=True))
    assert status == 200
    events = sse_json(raw)
    names, items = check_responses_stream(events)
    final = events[-1][1]["response"]
    assert [o["type"] for o in final["output"]] == ["code_interpreter_call", "function_call"]
    assert final["output"][1] == item
    assert items[1][1] == item
    assert_clean_upstream(up, n=1)


def chat_turn(extra_calls=(), **message_fields):
    r = chat_code_call_reply(CODE)
    msg = r["choices"][0]["message"]
    msg["tool_calls"] += list(extra_calls)
    msg.update(message_fields)
    return r


CHAT_CUSTOM = {"id": "call_custom00000000000001", "type": "custom",
               "custom": {"name": "grammar", "input": "SELECT 1"}}
CHAT_FUNC = {"id": "call_weather0000000000001", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}
LEGACY = {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}


@pytest.mark.parametrize("case", ["custom", "function", "legacy_function_call"])
def test_chat_program_call_next_to_ours_ends_the_loop_untouched(scripted, case):
    if case == "legacy_function_call":
        turn = chat_turn(function_call=LEGACY)
    else:
        turn = chat_turn([CHAT_CUSTOM if case == "custom" else CHAT_FUNC])
    up = scripted([{"body": turn}, {"body": text_reply("too far")}])
    rc, st, r, err = post_json(up.url + "/chat/completions",
                               chat_req(blocks(CODE), tools=[CHAT_CI, CHAT_WEATHER], stream=False))
    assert (rc, st) == (0, 200), (r, err.decode(errors="replace"))
    if case != "legacy_function_call":  # the schema has no function_call next to tool_calls
        schema_check.validate(r, "CreateChatCompletionResponse")
    msg = r["choices"][0]["message"]
    if case == "legacy_function_call":
        assert msg["function_call"] == LEGACY and "tool_calls" not in msg
    else:
        assert msg["tool_calls"] == [CHAT_CUSTOM if case == "custom" else CHAT_FUNC]
        assert r["choices"][0]["finish_reason"] == "tool_calls"
    assert "python" not in json.dumps(msg)
    assert_clean_chat_upstream(up, n=1)


def test_chat_stream_custom_call_next_to_ours_untouched(scripted):
    """Streamed, the program's custom call arrives as it came (with its
    index), not turned into an empty function call."""
    up = scripted([{"body": chat_turn([CHAT_CUSTOM])}, {"body": text_reply("too far")}])
    status, headers, raw = curl_stream(up.url + "/chat/completions",
                                       chat_req(blocks(CODE), tools=[CHAT_CI, CHAT_WEATHER]))
    assert status == 200
    events = sse_json(raw)
    assert events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    calls = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert calls == [dict(CHAT_CUSTOM, index=0)]
    for c in chunks:  # the schema knows function deltas only
        if not c["choices"][0]["delta"].get("tool_calls"):
            schema_check.validate_chat_chunk(c)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert_clean_chat_upstream(up, n=1)


# ------------------------------------------------------------ 3. background

def test_background_request_is_refused_and_never_sent(scripted):
    up = scripted([{"body": code_call_reply(CODE)}, {"body": text_reply("done")}])
    rc, out, err = curl_post(up.url + "/responses", req(blocks(CODE), background=True), ["-i"])
    assert rc == 0, err
    head, _, text = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 400 "), head
    e = error_of(400, json.loads(text), 400)
    assert e["type"] == "invalid_request_error" and e["param"] == "background"
    assert "background" in e["message"]
    assert up.requests() == []


def test_background_false_runs_as_usual(scripted):
    up = scripted([{"body": code_call_reply(CODE)}, {"body": text_reply("done")}])
    r = ours(up.url + "/responses", req(blocks(CODE), background=False))
    [ci] = ci_items(r)
    assert logs_of(ci) == "ran\n" and final_text(r) == "done"
    reqs = assert_clean_upstream(up, n=2)
    assert reqs[0]["body"]["background"] is False
