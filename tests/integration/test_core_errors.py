"""codeshim core: pass-through, failures, limits and the sandbox's edges.

Each test checks what the program received and what the upstream received.
Scripted upstream replies are built with the fake's own model so that every
Response codeshim synthesizes from them can be schema-validated."""

import json
import socket

import pytest

from conftest import run
import schema_check
from test_core_responses import (
    CI_TOOL, CURL, ENV, KEY, WEATHER_TOOL, Recorded, assert_ci, assert_clean_upstream,
    assert_no_internal, blocks, calls_sent, ci_items, code_call_reply, curl_cmd,
    curl_post, final_text, input_items, logs_of, ours, outputs_sent, post_json, req,
    run_csprog, text_reply)


def curl_lines(err):
    """stderr without codeshim's own log lines."""
    return [l for l in err.decode(errors="replace").splitlines()
            if not l.startswith("codeshim[")]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ------------------------------------------------------------ pass-through

CI_BODY = json.dumps(req(blocks("print(1)\n")))
PASS_CASES = {
    # JSON, mentions code_interpreter, but no such tool; odd spacing kept
    "no_ci_tool": ("/responses", [],
                   b'{ "model" : "m",\n  "input": "what is a code_interpreter?",'
                   b'  "tools" : [ {"type":"function","name":"f","parameters":{}} ] }'),
    # a program function tool that happens to be NAMED code_interpreter
    "function_named_ci": ("/responses", [],
                          b'{"model":"m","input":"x","tools":[{"type":"function",'
                          b'"name":"code_interpreter","parameters":{"type":"object"}}]}'),
    # not JSON at all
    "not_json": ("/responses", [], b'{"tools":[{"type":"code_interpreter"}], oops'),
    "tools_not_array": ("/responses", [], b'{"model":"m","tools":"code_interpreter"}'),
    # ours by body, but not by path or method
    "other_path": ("/embeddings", [], CI_BODY.encode()),
    "similar_path": ("/xresponses", [], CI_BODY.encode()),
    "put": ("/responses", ["-X", "PUT"], CI_BODY.encode()),
    "get_query": ("/responses", ["-G"], b"tools=code_interpreter"),
}


@pytest.mark.parametrize("case", sorted(PASS_CASES))
def test_passthrough_byte_identical(scripted, case):
    """Not ours: the upstream receives exactly what it receives without
    codeshim, and the program gets exactly the upstream's answer."""
    path, extra, body = PASS_CASES[case]
    canned = {"status": 207, "body": "canned\x00answer \xe2\x9c\x93 code_interpreter",
              "headers": {"Content-Type": "text/x-canned", "X-Canned": "yes"}}
    up = scripted([canned, canned])
    outs = []
    for preload in (True, False):
        rc, out, err = run(curl_cmd(up.url + path, ["-i", "-w", "|%{http_code}"] + extra),
                           env=ENV, input=body, preload=preload)
        assert rc == 0, err
        # the Date header may tick, the fake numbers its answers
        outs.append(b"\r\n".join(l for l in out.split(b"\r\n")
                                  if not l.startswith((b"Date:", b"x-request-id:"))))
    assert outs[0] == outs[1]
    assert outs[0].startswith(b"HTTP/1.1 207 ")
    assert outs[0].endswith(b"\r\n\r\n" + canned["body"].encode() + b"|207")
    with_shim, without = up.requests()
    assert with_shim == without
    if extra != ["-G"]:
        assert with_shim["raw"].encode() == body


def test_passthrough_with_csprog_body_options(scripted, tmp_path):
    """Not ours, body given with POSTFIELDSIZE before a non-terminated
    buffer: the same bytes reach the upstream with and without codeshim."""
    body = b'{"model":"m","input":"no code_interpreter tool","tools":[]}'
    up = scripted([{"body": {"ok": 1}}, {"body": {"ok": 1}}])
    got = []
    for preload in (True, False):
        _, _, _, res = run_csprog(body, "--body", "size-before", url=up.url + "/responses",
                                  preload=preload, tmp=str(tmp_path))
        x = res["results"][0]
        got.append((x["rc"], x["code"], x["body"]))
    assert got[0] == got[1] == (0, 200, '{"ok":1}')
    a, b = up.requests()
    assert a == b and a["raw"].encode() == body


# ----------------------------------------------------------- upstream errors

def test_upstream_error_status_first_call(fake):
    """The upstream refuses the first call: the program gets that status,
    headers and body as they were."""
    rc, out, err = curl_post(fake.url + "/responses", req(blocks("print(1)\n")),
                             ["-i"], headers=["X-Fake-Status: 503"])
    assert rc == 0, err
    head, _, body = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 503 ")
    assert "x-request-id: req_1" in head
    assert json.loads(body) == {"error": {
        "message": "Fake status 503 requested by X-Fake-Status.", "type": "server_error",
        "param": None, "code": "server_error"}}
    assert body == json.dumps(json.loads(body), separators=(",", ":"))  # untouched bytes
    assert_clean_upstream(fake, n=1)


def test_upstream_error_status_mid_loop(scripted):
    """A 429 after one execution: delivered as received, Retry-After kept."""
    err_body = '{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}'
    up = scripted([{"body": code_call_reply("print('ran')\n")},
                   {"status": 429, "body": err_body, "headers": {"Retry-After": "7"}}])
    rc, out, err = curl_post(up.url + "/responses", req(blocks("print('ran')\n")), ["-i"])
    assert rc == 0, err
    head, _, body = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 429 ")
    assert "\r\nRetry-After: 7" in head
    assert "Content-Length: %d" % len(body) in head
    assert body == err_body
    reqs = assert_clean_upstream(up, n=2)
    assert list(outputs_sent(reqs[1]["body"]).values()) == ["ran\n"]


def test_upstream_400_with_failonerror_csprog(scripted, tmp_path):
    err_body = {"error": {"message": "bad", "type": "invalid_request_error",
                          "param": "input", "code": None}}
    up = scripted([{"status": 400, "body": err_body}])
    _, _, _, res = run_csprog(req(blocks("print(1)\n")), "--errbuf",
                              url=up.url + "/responses", tmp=str(tmp_path))
    x = res["results"][0]
    assert (x["rc"], x["code"]) == (0, 400)
    assert json.loads(x["body"]) == err_body
    assert x["headers"].startswith("HTTP/1.1 400 ")
    assert_clean_upstream(up, n=1)


def test_upstream_200_not_json_handed_over(scripted):
    up = scripted([{"body": "<html>proxy says hi</html>",
                    "headers": {"Content-Type": "text/html"}}])
    rc, out, err = curl_post(up.url + "/responses", req(blocks("print(1)\n")),
                             ["-w", "|%{http_code}|%{content_type}"])
    assert rc == 0, err
    assert out == b"<html>proxy says hi</html>|200|text/html"
    assert_clean_upstream(up, n=1)


# ---------------------------------------------------------- network failures

def test_connection_refused_same_code_as_plain(tmp_path):
    url = "http://127.0.0.1:%d/v1/responses" % free_port()
    body = req(blocks("print(1)\n"))
    rc0, out0, err0 = curl_post(url, body, preload=False)
    rc, out, err = curl_post(url, body)
    assert rc0 == rc == 7  # CURLE_COULDNT_CONNECT
    assert out == out0 == b""
    prefix = "curl: (7) Failed to connect to 127.0.0.1 port %s" % url.split(":")[2].split("/")[0]
    assert curl_lines(err)[-1].startswith(prefix), err
    assert curl_lines(err0)[-1].startswith(prefix)
    # a C program: the same CURLcode, its error buffer filled
    _, _, _, res = run_csprog(body, "--errbuf", url=url, tmp=str(tmp_path))
    x = res["results"][0]
    assert x["rc"] == 7 and x["code"] == 0
    assert x["errbuf"].startswith("Failed to connect to 127.0.0.1 port"), x["errbuf"]
    assert x["body"] == "" and x["hdr_calls"] == 0


@pytest.mark.parametrize("close,code,msg", [
    (True, 52, "Empty reply from server"),
    ("reset", 56, "Recv failure: Connection reset by peer")])
def test_connection_dropped_same_code_as_plain(scripted, tmp_path, close, code, msg):
    body = req(blocks("print(1)\n"))
    up = scripted([{"close": close}, {"close": close}])
    rc0, _, err0 = curl_post(up.url + "/responses", body, preload=False)
    rc, out, err = curl_post(up.url + "/responses", body)
    assert rc0 == rc == code
    assert out == b""
    assert curl_lines(err) == curl_lines(err0) == ["curl: (%d) %s" % (code, msg)]
    assert len(up.requests()) == 2
    assert_clean_upstream(Recorded(up.requests()[1:]), n=1)


def test_connection_dropped_mid_loop(scripted, tmp_path):
    """The upstream hangs up on the follow-up call (libcurl retries a dead
    kept-alive connection once, as for any program): 52, error buffer set."""
    up = scripted([{"body": code_call_reply("print(1)\n")}, {"close": True}, {"close": True}])
    _, _, _, res = run_csprog(req(blocks("print(1)\n")), "--errbuf",
                              url=up.url + "/responses", tmp=str(tmp_path))
    x = res["results"][0]
    assert x["rc"] == 52
    assert x["errbuf"] == "Empty reply from server"
    assert x["body"] == "" and x["hdr_calls"] == 0
    reqs = assert_clean_upstream(up, n=3)
    assert reqs[1]["body"] == reqs[2]["body"]
    assert list(outputs_sent(reqs[1]["body"]).values()) == ["1\n"]



# --------------------------------------------------------------------- cap

THREE = blocks("print('one')\n", "print('two')\n", "print('three')\n")


NOT_RUN = "Not run: this request reached its limit of %d code executions."


def assert_final_call(body, outputs, cap):
    """The call after the cap: every call answered (those over the cap with
    a "not run" note), and no tool may be called."""
    assert body["tool_choice"] == "none"
    sent = list(outputs_sent(body).values())
    assert sent[:len(outputs)] == outputs
    assert all(o.startswith(NOT_RUN % cap) for o in sent[len(outputs):])
    assert len(sent) > len(outputs)


def test_cap_reached_gives_incomplete(fake):
    """Cap 2, three blocks: two run; the third call is answered "not run"
    and a last upstream call (tool_choice none) gets the model's answer, so
    the stored conversation stays consistent. Status: incomplete."""
    r = ours(fake.url + "/responses", req(THREE), env={"CODESHIM_MAX_LOOPS": "2"})
    assert r["status"] == "incomplete"
    assert [o["type"] for o in r["output"]] == ["code_interpreter_call"] * 2 + ["message"]
    assert [logs_of(c) for c in ci_items(r)] == ["one\n", "two\n"]
    assert_no_internal(r)
    assert r["tools"] == [CI_TOOL]
    reqs = assert_clean_upstream(fake, n=4)
    assert list(outputs_sent(reqs[2]["body"]).values()) == ["one\n", "two\n"]
    assert_final_call(reqs[3]["body"], ["one\n", "two\n"], 2)
    assert r["usage"]["input_tokens"] == 10 + 30 + 50 + 70


def test_cap_exactly_reached_is_complete(fake):
    r = ours(fake.url + "/responses", req(blocks("print('one')\n", "print('two')\n")),
             env={"CODESHIM_MAX_LOOPS": "2"})
    assert r["status"] == "completed"
    assert final_text(r) == "Done. Tool said: two\n"
    assert_clean_upstream(fake, n=3)


def test_cap_in_a_parallel_turn(fake):
    """Three calls in one turn, cap 2: two run, the third is never shown."""
    r = ours(fake.url + "/responses", req("[parallel]\n" + THREE),
             env={"CODESHIM_MAX_LOOPS": "2"})
    assert r["status"] == "incomplete"
    assert [logs_of(c) for c in ci_items(r)] == ["one\n", "two\n"]
    assert [o["type"] for o in r["output"]] == ["code_interpreter_call"] * 2 + ["message"]
    assert_no_internal(r)
    reqs = assert_clean_upstream(fake, n=2)
    assert_final_call(reqs[1]["body"], ["one\n", "two\n"], 2)


def test_max_tool_calls_lowers_cap(fake):
    r = ours(fake.url + "/responses", req(THREE, max_tool_calls=1))
    assert r["status"] == "incomplete"
    assert [logs_of(c) for c in ci_items(r)] == ["one\n"]
    assert_no_internal(r)
    reqs = assert_clean_upstream(fake, n=3)
    assert_final_call(reqs[2]["body"], ["one\n"], 1)


def test_max_tool_calls_cannot_raise_cap(fake):
    """Neither max_tool_calls nor codeshim-looking request keys raise the
    environment's cap (and those keys are not forwarded)."""
    r = ours(fake.url + "/responses",
             req(THREE, max_tool_calls=50, codeshim_max_loops=50,
                 metadata={"codeshim_max_loops": "50"}),
             env={"CODESHIM_MAX_LOOPS": "1"})
    assert r["status"] == "incomplete"
    assert [logs_of(c) for c in ci_items(r)] == ["one\n"]
    reqs = assert_clean_upstream(fake, n=3)
    assert_final_call(reqs[2]["body"], ["one\n"], 1)


def test_continue_after_cap_with_previous_response_id(fake):
    """A program continues an incomplete answer by its id, as OpenAI SDK
    conversations do; the upstream must not meet a call it never got an
    output for."""
    r = ours(fake.url + "/responses", req(THREE), env={"CODESHIM_MAX_LOOPS": "2"})
    assert r["status"] == "incomplete"
    fake.clear()
    rc, st, r2, err = post_json(fake.url + "/responses",
                                req("Thanks, summarize.", previous_response_id=r["id"]))
    assert (rc, st) == (0, 200), r2
    schema_check.validate(r2, "Response")
    assert_no_internal(r2)


# ------------------------------------------------------- program's own tools

def test_foreign_tool_call_handed_back_and_continued(fake):
    """The model calls the program's get_weather: the loop ends, the call is
    handed back untouched with the executions so far; the program answers it
    and replays the history, which codeshim converts for the upstream."""
    text = blocks("t = 21\nprint(t)\n", prefix="[call get_weather] then")
    tools = [CI_TOOL, WEATHER_TOOL]
    r = ours(fake.url + "/responses", req(text, tools=tools))
    assert r["status"] == "completed"
    assert [o["type"] for o in r["output"]] == ["code_interpreter_call", "function_call"]
    ci, fc = r["output"]
    assert_ci(ci, "t = 21\nprint(t)\n", "21\n")
    assert fc["name"] == "get_weather"
    assert json.loads(fc["arguments"]) == {"city": "Paris"}
    assert fc["call_id"].startswith("call_") and fc["id"].startswith("fc_")
    assert r["tools"] == tools
    assert_no_internal(r)
    reqs = assert_clean_upstream(fake, n=2)
    assert [t["name"] for t in reqs[0]["body"]["tools"]] == ["python", "get_weather"]

    # the program answers its tool and sends the conversation back
    fake.clear()
    follow = [{"role": "user", "content": text}] + r["output"] + [
        {"type": "function_call_output", "call_id": fc["call_id"], "output": "sunny"}]
    r2 = ours(fake.url + "/responses", req(follow, tools=tools))
    assert final_text(r2) == "Done. Tool said: sunny"
    assert ci_items(r2) == []
    [q] = assert_clean_upstream(fake, n=1)
    items = input_items(q["body"])
    [pc] = calls_sent(q["body"], "python")
    assert json.loads(pc["arguments"]) == {"code": "t = 21\nprint(t)\n"}
    assert outputs_sent(q["body"])[pc["call_id"]] == "21\n"
    assert outputs_sent(q["body"])[fc["call_id"]] == "sunny"
    assert [it for it in items if it.get("name") == "get_weather"][0]["call_id"] == fc["call_id"]


def test_mixed_turn_text_code_and_program_tool(scripted):
    """One upstream turn with text, a code call and a program tool call:
    the program gets its call untouched, after the text, and never the
    internal call."""
    turn = code_call_reply("print(1)\n")
    internal = turn["output"][0]
    msg = text_reply("Let me check.")["output"][0]
    weather = dict(internal, id="fc_" + "7" * 48, call_id="call_weather000000000000001",
                   name="get_weather", arguments='{"city":"Oslo"}')
    turn["output"] = [msg, internal, weather]
    up = scripted([{"body": turn}])
    r = ours(up.url + "/responses", req(blocks("print(1)\n"), tools=[CI_TOOL, WEATHER_TOOL]))
    assert r["output"][0] == msg
    assert r["output"][-1] == weather
    assert_no_internal(r)
    for c in ci_items(r):
        assert_ci(c, "print(1)\n", "1\n")
    assert_clean_upstream(up, n=1)


FORGED_TOOL = {"type": "function", "name": "python", "description": "The program's own.",
               "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                              "required": ["code"], "additionalProperties": False},
               "strict": True}


def test_program_tool_named_python_is_never_executed(fake, tmp_path):
    """The program has its own function tool `python` and asks for
    code_interpreter: codeshim's tool becomes codeshim_python, and a call to
    the program's `python` is handed back, never run (no execution item, no
    output ever sent upstream); the control shows the same code does run
    through codeshim's own tool."""
    code = "open('executed', 'w').write('x')\nimport os\nprint('ran', os.path.exists('executed'))\n"
    tools = [FORGED_TOOL, CI_TOOL]
    r = ours(fake.url + "/responses", req(blocks(code), tools=tools))
    [fc] = r["output"]
    assert fc["type"] == "function_call" and fc["name"] == "python"
    assert json.loads(fc["arguments"]) == {"code": code}
    assert ci_items(r) == []
    assert r["tools"] == tools
    assert_no_internal(r, tool="codeshim_python")
    [q] = assert_clean_upstream(fake, tool="codeshim_python", n=1)
    assert [t["name"] for t in q["body"]["tools"]] == ["python", "codeshim_python"]
    assert q["body"]["tools"][0] == FORGED_TOOL

    # control: the same code through codeshim's own tool does run
    fake.clear()
    r = ours(fake.url + "/responses", req(blocks(code), tools=[CI_TOOL, FORGED_TOOL]))
    [ci] = ci_items(r)
    assert logs_of(ci).startswith("ran True\n")
    assert_no_internal(r, tool="codeshim_python")
    assert_clean_upstream(fake, tool="codeshim_python", n=2)


@pytest.mark.parametrize("arguments,why", [
    ("not json", "not a JSON object"),
    ('{"source": "print(1)"}', '"code"')])
def test_unparseable_arguments_become_tool_output(scripted, arguments, why):
    up = scripted([{"body": code_call_reply("print(1)\n", arguments=arguments)},
                   {"body": text_reply("I will try again later.")}])
    r = ours(up.url + "/responses", req(blocks("print(1)\n")))
    assert r["status"] == "completed"
    assert final_text(r) == "I will try again later."
    assert {o["type"] for o in r["output"]} <= {"code_interpreter_call", "message"}
    assert_no_internal(r)
    reqs = assert_clean_upstream(up, n=2)
    [fc] = calls_sent(reqs[1]["body"], "python")
    assert fc["arguments"] == arguments
    out = outputs_sent(reqs[1]["body"])[fc["call_id"]]
    assert "Error" in out and why in out, out
    assert r["usage"]["input_tokens"] == 2 * 10 and r["usage"]["output_tokens"] == 10


# ------------------------------------------------------------------ sandbox

def test_timeout_kills_and_next_execution_starts_fresh(fake):
    text = blocks("x = 5\n", "while True: pass\n", "print(x)\n")
    r = ours(fake.url + "/responses", req(text), env={"CODESHIM_EXEC_TIMEOUT": "1"})
    a, b, c = ci_items(r)
    assert_ci(a, "x = 5\n", "")
    assert "timed out" in logs_of(b) and "1 s" in logs_of(b)
    assert b["status"] != "completed"
    assert "NameError" in logs_of(c)
    assert r["status"] == "completed"
    reqs = assert_clean_upstream(fake, n=4)
    sent = list(outputs_sent(reqs[3]["body"]).values())
    assert "timed out" in sent[1] and "NameError" in sent[2]


def test_worker_death_reported_and_loop_goes_on(fake):
    text = blocks("y = 1\n", "import os\nos._exit(3)\n", "print('alive')\n")
    r = ours(fake.url + "/responses", req(text))
    a, b, c = ci_items(r)
    assert "exited with status 3" in logs_of(b)
    assert logs_of(c).endswith("alive\n")
    assert final_text(r).endswith("alive\n")
    reqs = assert_clean_upstream(fake, n=4)
    assert "exited with status 3" in list(outputs_sent(reqs[2]["body"]).values())[1]


def test_sandbox_environment_has_no_secrets(fake):
    code = "import os, json\nprint(json.dumps(dict(os.environ)))\n"
    env = {"OPENAI_API_KEY": "sk-live-SECRET-4242", "MY_DB_PASSWORD": "hunter2",
           "CODESHIM_LOG": "warn", "CODESHIM_OUTPUT_CAP": "30000"}
    r = ours(fake.url + "/responses", req(blocks(code)), env=env)
    [ci] = ci_items(r)
    seen = json.loads(logs_of(ci))
    assert "OPENAI_API_KEY" not in seen
    assert "LD_PRELOAD" not in seen
    assert "MY_DB_PASSWORD" not in seen
    assert not [k for k in seen if k.startswith("CODESHIM")]
    assert "SECRET-4242" not in logs_of(ci) and "hunter2" not in logs_of(ci)
    assert_clean_upstream(fake, n=2)


def test_state_persists_in_request_and_is_gone_in_next(fake, tmp_path):
    """One program (curl, two transfers in one process): the state of the
    first request's executions does not reach the second request."""
    f1, f2 = tmp_path / "b1.json", tmp_path / "b2.json"
    f1.write_text(json.dumps(req(blocks("x = 41\n", "print(x + 1)\n"))))
    f2.write_text(json.dumps(req(blocks("print(x)\n"))))
    hdr = ["-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + KEY]
    cmd = [CURL, "-sS"] + hdr + ["--data-binary", "@%s" % f1, "-w", "\n",
                                 fake.url + "/responses", "--next"] + hdr + [
        "--data-binary", "@%s" % f2, "-w", "\n", fake.url + "/responses"]
    rc, out, err = run(cmd, env=ENV)
    assert rc == 0, err
    r1, r2 = [json.loads(l) for l in out.decode().splitlines()]
    for r in (r1, r2):
        schema_check.validate(r, "Response")
        assert_no_internal(r)
    a, b = ci_items(r1)
    assert logs_of(b) == "42\n"
    [c] = ci_items(r2)
    assert "NameError" in logs_of(c) and "'x'" in logs_of(c)
    assert c["container_id"] != a["container_id"]
    reqs = assert_clean_upstream(fake, n=5)
    assert list(outputs_sent(reqs[2]["body"]).values()) == ["", "42\n"]
    assert "NameError" in list(outputs_sent(reqs[4]["body"]).values())[0]
