#!/usr/bin/python3
"""A fake OpenAI-compatible upstream for codeshim's integration tests.

Listens on 127.0.0.1 only (port 0 = any free port), HTTP/1.1 keep-alive,
every answer with Content-Length, Nagle disabled.  Standard library only.

Usage as a module (pytest fixtures)::

    srv = fake_openai.start()            # model mode
    srv = fake_openai.start(script=[...])  # scripted mode
    srv.url          -> "http://127.0.0.1:PORT/v1"
    srv.requests()   -> list of recorded requests (dicts, see below)
    srv.stop()

Usage as a script (prints nothing)::

    /usr/bin/python3 fake_openai.py --port-file F --log FILE [--script S.json]

writes the port number to F (atomically) once listening; stops on SIGTERM
or SIGINT.

Recording
---------
Every request received (any method, any path) is recorded, in memory and, with
``--log``/``log=``, as one JSON line in the log file::

    {"method", "path", "query", "headers": {lowercased name: value},
     "body": <parsed JSON or null>, "raw": <body text>}

``path`` excludes the query string; ``query`` is the raw query string ("" if
none).  Repeated headers are joined with ", ".

Behaviour, checked in this order for every request
--------------------------------------------------
1. ``X-Fake-Status: NNN`` request header: answer status NNN with an OpenAI
   error body (``{"error": {message, type, param, code}}``) and an ``x-request-id`` header.
2. Scripted mode (a script was given): the next canned reply is consumed,
   whatever the request.  Each reply is
   ``{"status": 200, "headers": {...}, "body": <JSON or string>,
   "delay": 0.0, "close": false}`` (all keys optional).  A JSON body is sent
   compact; a string body is sent as is (UTF-8).  Content-Type defaults to
   application/json unless ``headers`` sets it.  ``close: true`` drops the
   connection without answering (curl: "Empty reply from server", code 52);
   ``close: "reset"`` resets it (RST; curl code 56).  When the script is
   exhausted: 500 with an OpenAI error body (code "script_exhausted").
   Model ``fake-slow`` in a JSON body adds 0.3 s here too.
3. Model mode (the default): ``POST .../responses`` and
   ``POST .../chat/completions`` (any prefix, e.g. /v1) are answered by the
   deterministic model below; any other path gets 404 (OpenAI error body).

Model mode: request checks (400 + OpenAI error body, like the real API)
----------------------------------------------------------------------
* the body is not a JSON object;
* ``stream: true`` is answered as a stream (see "Streaming" below) unless
  the request has the header ``X-Fake-No-Stream: 1``: then the fake plays a
  server that ignores ``stream`` and answers JSON;
* any tool with ``type: "code_interpreter"`` (this fake plays a
  non-OpenAI server with no hosted tool; it proves codeshim never forwards
  the native tool);  Responses only: any input item of type
  ``code_interpreter_call`` (same reason: history must be converted);
* Responses: a ``function_call_output`` with no preceding ``function_call``
  of the same ``call_id``; a ``function_call`` with no
  ``function_call_output`` for it anywhere in the input (real API: "No tool
  output found for function call ...");
* Responses: ``previous_response_id`` unknown to this server (responses
  answered by this server are remembered with their input, and a request
  with ``previous_response_id`` sees that history before its own input);
* Chat: a ``role: "tool"`` message that does not follow (with only other
  tool messages in between) an assistant message whose ``tool_calls``
  contain its ``tool_call_id``; an assistant message with ``tool_calls``
  not answered by a tool message for every id before the next non-tool
  message or the end.

Model mode: the "model" (deterministic)
---------------------------------------
* Code tool: the first function tool offered whose ``parameters`` have a
  ``code`` property of type string.  Responses tools are flat
  ``{"type":"function","name":N,"parameters":...}``; Chat tools are nested
  ``{"type":"function","function":{"name":N,"parameters":...}}``.
* User text: the text of the LAST user message (string content, or the
  concatenated ``input_text``/``text`` parts).  ``input`` given as a string
  is one user message.
* Blocks: every fenced block opened with ```python in the user text, in
  order (the text between the opening line and the closing fence).
* k = number of tool outputs for the code tool that come AFTER the last user
  message (Responses ``function_call_output`` items whose call_id belongs to
  a ``function_call`` named N; Chat ``role:"tool"`` messages answering a
  tool call named N).  For a conversation with one user message this is
  simply "outputs so far".
* If a code tool exists, ``tool_choice`` is not ``"none"`` and k < number of
  blocks: answer a function call to N with arguments ``{"code": block[k]}``.
  If the user text contains ``[parallel]`` (and ``parallel_tool_calls`` is
  not false), answer ALL remaining blocks as separate calls in one turn;
  with ``[call get_weather]`` too, the get_weather call (below) joins that
  same turn (a turn mixing code with a program tool).
* Else, if the user text contains ``[call get_weather]``, a function tool
  named ``get_weather`` is offered, ``tool_choice`` is not ``"none"`` and no
  get_weather call has been made since the last user message: call
  ``get_weather`` with ``{"city":"Paris"}`` (a program tool, to test
  hand-back to the program).
* Else answer text: ``"Done. Tool said: " + <text of the last tool output
  after the last user message>``, or ``"Hello from the fake model."`` when
  there is none.
* Responses replies are full Response objects (every field the schema
  requires; ``tools`` and ``tool_choice`` echoed as received).  Usage:
  input_tokens = 10 * number of input items (string input = 1 item),
  output_tokens = 5, total = sum, details 0.  Chat replies are
  ``chat.completion`` objects; usage prompt_tokens = 10 * number of messages,
  completion_tokens = 5.
* IDs are deterministic per server: resp_/msg_/fc_ + 48 hex, call_ + 24
  alphanumerics, chatcmpl- + 29 alphanumerics, built from a counter.
* Model ``fake-slow``: each reply is delayed by 0.3 s.

Every answer carries ``x-request-id: req_<counter>``.

Streaming (model mode, ``stream: true``)
---------------------------------------
The model's answer is sent as SSE (chunked, ``text/event-stream``), with
the event sequences OpenAI sends (Responses: typed events numbered from 0
ending in one terminal event; Chat: chunks, a usage chunk when ``stream_options.include_usage``, then
``[DONE]``). Texts and function-call arguments are cut into pieces of
1, 2, 3, 5, 1, 2, 3, 5... characters (so escapes such as ``\n`` and
``\ud83d\ude00`` in the arguments' JSON text are split), one delta each.
``X-Fake-Delay: S`` sleeps S seconds before a model-mode answer (a model
that takes S seconds to think; make bench's concurrency row).
``X-Fake-Stream-Delay: S`` sleeps S seconds before every event after the
first. Each event is logged when written: ``srv.sent_events()`` lists
``{"rid", "i", "n", "t", "type"}`` (t = time.monotonic() right after the
write, i of n events of request rid, type the event type or "chunk").
"""

import argparse
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

SLOW_MODEL = "fake-slow"
SLOW_DELAY = 0.3
CODE_BLOCK_RE = re.compile(r"```python[^\n]*\n(.*?)```", re.S)

_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("requests", "rate_limit_exceeded"),
}


def error_body(status, message, param=None, code=None, etype=None):
    """OpenAI error body: {"error": {message, type, param, code}}."""
    t, c = _ERROR_TYPES.get(status, ("server_error", "server_error")
                            if status >= 500 else ("invalid_request_error", None))
    return {"error": {"message": message, "type": etype or t, "param": param,
                      "code": code if code is not None else c}}


class BadRequest(Exception):
    def __init__(self, message, param=None, code="invalid_request"):
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


# ------------------------------------------------------------------ model

PIECES = (1, 2, 3, 5)


def pieces(text):
    """text cut into pieces of 1, 2, 3, 5, 1, 2... characters."""
    out, i, k = [], 0, 0
    while i < len(text):
        n = PIECES[k % len(PIECES)]
        out.append(text[i:i + n])
        i, k = i + n, k + 1
    return out


def _dump(d):
    return json.dumps(d, separators=(",", ":"))


def responses_events(resp):
    """The SSE events (framed strings, with their types) of a Response."""
    evs = []

    def ev(d):
        d = dict(d, sequence_number=len(evs))
        evs.append((d["type"], "event: %s\ndata: %s\n\n" % (d["type"], _dump(d))))

    snap = dict(resp, status="in_progress", output=[], usage=None)
    if "completed_at" in snap:
        snap["completed_at"] = None
    ev({"type": "response.created", "response": snap})
    ev({"type": "response.in_progress", "response": snap})
    for i, item in enumerate(resp.get("output") or []):
        t, iid = item.get("type"), item.get("id")
        if t == "message":
            ev({"type": "response.output_item.added", "output_index": i,
                "item": dict(item, status="in_progress", content=[])})
            for ci, part in enumerate(item.get("content") or []):
                text = part.get("text") or ""
                ev({"type": "response.content_part.added", "item_id": iid, "output_index": i,
                    "content_index": ci, "part": {"type": "output_text", "annotations": [],
                                                  "logprobs": [], "text": ""}})
                for p in pieces(text):
                    ev({"type": "response.output_text.delta", "item_id": iid,
                        "output_index": i, "content_index": ci, "delta": p, "logprobs": []})
                ev({"type": "response.output_text.done", "item_id": iid, "output_index": i,
                    "content_index": ci, "text": text, "logprobs": []})
                ev({"type": "response.content_part.done", "item_id": iid, "output_index": i,
                    "content_index": ci, "part": dict(part, logprobs=part.get("logprobs", []))})
        elif t == "function_call":
            args = item.get("arguments") or ""
            ev({"type": "response.output_item.added", "output_index": i,
                "item": dict(item, status="in_progress", arguments="")})
            for p in pieces(args):
                ev({"type": "response.function_call_arguments.delta", "item_id": iid,
                    "output_index": i, "delta": p})
            ev({"type": "response.function_call_arguments.done", "item_id": iid,
                "output_index": i, "arguments": args, "name": item.get("name")})
        else:
            ev({"type": "response.output_item.added", "output_index": i, "item": item})
        ev({"type": "response.output_item.done", "output_index": i, "item": item})
    ev({"type": "response.completed", "response": resp})
    return evs


def chat_events(comp, include_usage):
    """The SSE chunks (framed strings) of a chat.completion, then [DONE]."""
    base = {k: comp[k] for k in ("id", "created", "model", "system_fingerprint") if k in comp}
    base["object"] = "chat.completion.chunk"
    evs = []

    def chunk(delta, finish=None):
        c = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish}])
        if include_usage:
            c["usage"] = None
        evs.append(("chunk", "data: %s\n\n" % _dump(c)))

    ch = comp["choices"][0]
    msg = ch["message"]
    content = msg.get("content")
    chunk({"role": "assistant", "content": "" if content is not None else None,
           "refusal": None})
    for p in pieces(content or ""):
        chunk({"content": p})
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc["function"]
        chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                               "function": {"name": fn["name"], "arguments": ""}}]})
        for p in pieces(fn.get("arguments") or ""):
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
    chunk({}, ch["finish_reason"])
    if include_usage:
        evs.append(("chunk", "data: %s\n\n" % _dump(dict(base, choices=[],
                                                          usage=comp.get("usage")))))
    evs.append(("[DONE]", "data: [DONE]\n\n"))
    return evs


def _parts_text(content, kinds=("input_text", "output_text", "text")):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and p.get("type") in kinds and \
                    isinstance(p.get("text"), str):
                out.append(p["text"])
        return "".join(out)
    return ""


def _has_code_param(params):
    if not isinstance(params, dict):
        return False
    props = params.get("properties")
    return isinstance(props, dict) and isinstance(props.get("code"), dict) and \
        props["code"].get("type") == "string"


def _check_no_hosted_tool(tools):
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise BadRequest("Invalid type for 'tools': expected an array.", "tools",
                         "invalid_type")
    for i, t in enumerate(tools):
        if isinstance(t, dict) and t.get("type") == "code_interpreter":
            raise BadRequest("Hosted tool 'code_interpreter' is not supported by "
                             "this server.", "tools[%d].type" % i,
                             "unsupported_tool")
    return tools


def _decide(blocks, k, user_text, code_tool, tools_by_name, weather_called,
            tool_choice, parallel_ok, last_output):
    """Returns ("calls", [(name, args_dict), ...]) or ("text", str)."""
    can_call = tool_choice != "none"
    if code_tool and can_call and k < len(blocks):
        rest = blocks[k:]
        if "[parallel]" not in user_text or not parallel_ok:
            rest = rest[:1]
        calls = [(code_tool, {"code": b}) for b in rest]
        if "[parallel]" in user_text and parallel_ok and "[call get_weather]" in user_text \
                and "get_weather" in tools_by_name and not weather_called:
            calls.append(("get_weather", {"city": "Paris"}))  # a mixed turn
        return "calls", calls
    if "[call get_weather]" in user_text and "get_weather" in tools_by_name and \
            can_call and not weather_called:
        return "calls", [("get_weather", {"city": "Paris"})]
    if last_output is not None:
        return "text", "Done. Tool said: " + last_output
    return "text", "Hello from the fake model."


class Model:
    """The deterministic model; one per server (holds counters, stored responses)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._n = 0
        self._stored = {}      # resp id -> list of items (input + output)

    def _next(self):
        with self._lock:
            self._n += 1
            return self._n

    def _hex(self, prefix):
        return "%s%048x" % (prefix, self._next())

    def _alnum(self, prefix, width):
        return "%s%s" % (prefix, ("%0" + str(width) + "d") % self._next())

    # ----------------------------------------------------------- Responses
    def responses(self, req):
        if req.get("stream") is True:
            raise BadRequest("This server does not support stream=true.", "stream",
                             "unsupported_value")
        tools = _check_no_hosted_tool(req.get("tools"))
        inp = req.get("input")
        if isinstance(inp, str):
            items = [{"type": "message", "role": "user", "content": inp}]
        elif isinstance(inp, list):
            items = inp
        elif inp is None:
            items = []
        else:
            raise BadRequest("Invalid type for 'input'.", "input", "invalid_type")
        n_input = len(items)
        prev = req.get("previous_response_id")
        history = []
        if prev is not None:
            with self._lock:
                history = self._stored.get(prev)
            if history is None:
                raise BadRequest("Previous response with id '%s' not found." % prev,
                                 "previous_response_id", "previous_response_not_found")
        conv = list(history) + list(items)

        # validation of the tool history
        calls = {}           # call_id -> name
        outputs = set()
        for i, it in enumerate(conv):
            if not isinstance(it, dict):
                raise BadRequest("Invalid input item.", "input[%d]" % i, "invalid_type")
            t = it.get("type")
            if t == "code_interpreter_call":
                raise BadRequest("Item type 'code_interpreter_call' is not supported "
                                 "by this server.", "input[%d].type" % i,
                                 "unsupported_item")
            if t == "function_call":
                calls[it.get("call_id")] = it.get("name")
            elif t == "function_call_output":
                cid = it.get("call_id")
                if cid not in calls:
                    raise BadRequest("No tool call found for function call output "
                                     "with call_id %s." % cid, "input")
                outputs.add(cid)
        for cid in calls:
            if cid not in outputs:
                raise BadRequest("No tool output found for function call %s." % cid,
                                 "input")

        offered = {}
        code_tool = None
        for t in tools:
            if isinstance(t, dict) and t.get("type") == "function" and \
                    isinstance(t.get("name"), str):
                offered[t["name"]] = t
                if code_tool is None and _has_code_param(t.get("parameters")):
                    code_tool = t["name"]

        last_user = -1
        for i, it in enumerate(conv):
            if it.get("role") == "user" and it.get("type", "message") == "message":
                last_user = i
        user_text = _parts_text(conv[last_user].get("content")) if last_user >= 0 else ""
        k = 0
        weather_called = False
        last_output = None
        for it in conv[last_user + 1:]:
            t = it.get("type")
            if t == "function_call" and it.get("name") == "get_weather":
                weather_called = True
            if t == "function_call_output":
                if code_tool is not None and calls.get(it.get("call_id")) == code_tool:
                    k += 1
                last_output = _parts_text(it.get("output"))
        kind, what = _decide(CODE_BLOCK_RE.findall(user_text), k, user_text,
                             code_tool, offered, weather_called,
                             req.get("tool_choice"),
                             req.get("parallel_tool_calls") is not False, last_output)
        output = []
        if kind == "calls":
            for name, args in what:
                output.append({"id": self._hex("fc_"), "type": "function_call",
                               "status": "completed",
                               "call_id": self._alnum("call_", 24), "name": name,
                               "arguments": json.dumps(args)})
        else:
            output.append({"id": self._hex("msg_"), "type": "message",
                           "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": what,
                                        "annotations": [], "logprobs": []}]})
        now = int(time.time())
        in_tok = 10 * n_input
        out_tok = 5
        g = req.get
        resp = {
            "id": self._hex("resp_"),
            "object": "response",
            "created_at": now,
            "status": "completed",
            "completed_at": now,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": g("instructions"),
            "max_output_tokens": g("max_output_tokens"),
            "max_tool_calls": g("max_tool_calls"),
            "model": g("model") if isinstance(g("model"), str) else "fake-model",
            "output": output,
            "parallel_tool_calls": g("parallel_tool_calls") is not False,
            "previous_response_id": prev,
            "reasoning": None,
            "service_tier": "default",
            "store": g("store") is not False,
            "temperature": g("temperature") if g("temperature") is not None else 1.0,
            "text": g("text") or {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": g("tool_choice") if g("tool_choice") is not None else "auto",
            "tools": tools,
            "top_logprobs": g("top_logprobs") or 0,
            "top_p": g("top_p") if g("top_p") is not None else 1.0,
            "truncation": g("truncation") or "disabled",
            "usage": {"input_tokens": in_tok,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": out_tok,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": in_tok + out_tok},
            "metadata": g("metadata") if isinstance(g("metadata"), dict) else {},
            "safety_identifier": g("safety_identifier"),
            "prompt_cache_key": g("prompt_cache_key"),
        }
        if isinstance(g("user"), str):
            resp["user"] = g("user")
        with self._lock:
            self._stored[resp["id"]] = conv + output
        return resp

    # ---------------------------------------------------------------- Chat
    def chat(self, req):
        if req.get("stream") is True:
            raise BadRequest("This server does not support stream=true.", "stream",
                             "unsupported_value")
        tools = _check_no_hosted_tool(req.get("tools"))
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' must be a non-empty array.", "messages",
                             "invalid_type")
        call_names = {}            # tool_call_id -> function name
        pending = None             # ids of the last assistant tool_calls
        pending_idx = None
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise BadRequest("Invalid message.", "messages[%d]" % i, "invalid_type")
            role = m.get("role")
            if role == "tool":
                tid = m.get("tool_call_id")
                if pending is None or tid not in pending:
                    raise BadRequest(
                        "Invalid parameter: messages with role 'tool' must be a "
                        "response to a preceeding message with 'tool_calls'.",
                        "messages.[%d].role" % i)
                pending.discard(tid)
                continue
            if pending:
                raise BadRequest(
                    "An assistant message with 'tool_calls' must be followed by tool "
                    "messages responding to each 'tool_call_id'. The following "
                    "tool_call_ids did not have response messages: %s"
                    % ", ".join(sorted(pending)), "messages.[%d].role" % pending_idx,
                    "invalid_request")
            pending = None
            if role == "assistant" and m.get("tool_calls"):
                pending = set()
                pending_idx = i
                for tc in m["tool_calls"]:
                    if isinstance(tc, dict):
                        tid = tc.get("id")
                        pending.add(tid)
                        fn = tc.get("function") or {}
                        call_names[tid] = fn.get("name")
        if pending:
            raise BadRequest(
                "An assistant message with 'tool_calls' must be followed by tool "
                "messages responding to each 'tool_call_id'. The following "
                "tool_call_ids did not have response messages: %s"
                % ", ".join(sorted(pending)), "messages.[%d].role" % pending_idx,
                "invalid_request")

        offered = {}
        code_tool = None
        for t in tools:
            fn = t.get("function") if isinstance(t, dict) else None
            if t.get("type") == "function" and isinstance(fn, dict) and \
                    isinstance(fn.get("name"), str):
                offered[fn["name"]] = t
                if code_tool is None and _has_code_param(fn.get("parameters")):
                    code_tool = fn["name"]
        last_user = -1
        for i, m in enumerate(msgs):
            if m.get("role") == "user":
                last_user = i
        user_text = _parts_text(msgs[last_user].get("content")) if last_user >= 0 else ""
        k = 0
        weather_called = False
        last_output = None
        for m in msgs[last_user + 1:]:
            if m.get("role") == "assistant":
                for tc in m.get("tool_calls") or []:
                    if isinstance(tc, dict) and \
                            (tc.get("function") or {}).get("name") == "get_weather":
                        weather_called = True
            if m.get("role") == "tool":
                if code_tool is not None and call_names.get(m.get("tool_call_id")) == code_tool:
                    k += 1
                last_output = _parts_text(m.get("content"))
        kind, what = _decide(CODE_BLOCK_RE.findall(user_text), k, user_text,
                             code_tool, offered, weather_called,
                             req.get("tool_choice"),
                             req.get("parallel_tool_calls") is not False, last_output)
        message = {"role": "assistant", "content": None, "refusal": None,
                   "annotations": []}
        if kind == "calls":
            message["tool_calls"] = [
                {"id": self._alnum("call_", 24), "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for name, args in what]
            finish = "tool_calls"
        else:
            message["content"] = what
            finish = "stop"
        p_tok, c_tok = 10 * len(msgs), 5
        return {
            "id": self._alnum("chatcmpl-", 29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model") if isinstance(req.get("model"), str) else "fake-model",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok,
                      "total_tokens": p_tok + c_tok,
                      "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0,
                                                    "audio_tokens": 0,
                                                    "accepted_prediction_tokens": 0,
                                                    "rejected_prediction_tokens": 0}},
            "service_tier": "default",
            "system_fingerprint": "fp_fake0000",
        }


# ----------------------------------------------------------------- server

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "fake-openai/1.0"
    sys_version = ""
    timeout = 300

    def log_message(self, fmt, *args):   # keep quiet
        pass

    def setup(self):
        super().setup()
        self.server.fake._conn_opened(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.fake._conn_closed(self.connection)

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _handle(self):
        fake = self.server.fake
        raw = self._read_body()
        path, _, query = self.path.partition("?")
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + ", " + v if k in headers else v
        text = raw.decode("utf-8", "replace")
        try:
            body = json.loads(text) if raw else None
        except ValueError:
            body = None
        rec = {"method": self.command, "path": path, "query": query,
               "headers": headers, "body": body, "raw": text}
        fake._record(rec)
        if fake.gate is not None:   # a test's hold on this request (see FakeServer)
            fake.gate(rec)
        rid = fake._request_id()
        slow = isinstance(body, dict) and body.get("model") == SLOW_MODEL

        fs = headers.get("x-fake-status")
        if fs:
            try:
                st = int(fs)
            except ValueError:
                st = 500
            return self._send(st, error_body(st, "Fake status %d requested by "
                                             "X-Fake-Status." % st), rid=rid)
        if fake.scripted:
            step = fake._next_step()
            if step is None:
                return self._send(500, error_body(500, "Fake script exhausted.",
                                                  code="script_exhausted"), rid=rid)
            delay = float(step.get("delay") or 0) + (SLOW_DELAY if slow else 0)
            if delay > 0:
                time.sleep(delay)
            close = step.get("close")
            if close:
                if close == "reset":
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.close_connection = True
                try:
                    if close == "reset":
                        self.connection.close()   # fd really closes in finish()
                    else:
                        self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            return self._send(int(step.get("status", 200)), step.get("body", {}),
                              headers=step.get("headers") or {}, rid=rid)

        is_resp = self.command == "POST" and path.endswith("/responses")
        is_chat = self.command == "POST" and path.endswith("/chat/completions")
        if not (is_resp or is_chat):
            return self._send(404, error_body(404, "Unknown request URL: %s %s."
                                              % (self.command, path),
                                              code="unknown_url"), rid=rid)
        if not isinstance(body, dict):
            return self._send(400, error_body(
                400, "We could not parse the JSON body of your request. (HINT: This "
                "likely means you aren't using your HTTP library correctly. The "
                "OpenAI API expects a JSON payload.)", code="invalid_json"), rid=rid)
        stream = body.get("stream") is True and not headers.get("x-fake-no-stream")
        mbody = body
        if stream or headers.get("x-fake-no-stream"):
            mbody = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        try:
            out = fake.model.responses(mbody) if is_resp else fake.model.chat(mbody)
        except BadRequest as e:
            return self._send(400, error_body(400, e.message, e.param, e.code), rid=rid)
        if slow:
            time.sleep(SLOW_DELAY)
        think = headers.get("x-fake-delay")
        if think:
            try:
                time.sleep(min(max(float(think), 0.0), 60.0))
            except ValueError:
                pass
        if stream:
            usage = ((body.get("stream_options") or {}).get("include_usage") is True)
            evs = responses_events(out) if is_resp else chat_events(out, usage)
            return self._send_sse(evs, headers, rid)
        return self._send(200, out, rid=rid)

    def _send_sse(self, evs, headers, rid):
        """Events as a chunked text/event-stream, paced, each logged once written."""
        fake = self.server.fake
        delay = float(headers.get("x-fake-stream-delay") or 0)
        head = ["HTTP/1.1 200 OK", "Date: " + self.date_time_string(),
                "Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache",
                "x-request-id: " + rid, "Transfer-Encoding: chunked"]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        self.wfile.flush()
        for i, (etype, text) in enumerate(evs):
            if i and delay > 0:
                time.sleep(delay)
            data = text.encode("utf-8")
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()
            fake._sent({"rid": rid, "i": i, "n": len(evs), "t": time.monotonic(),
                        "type": etype})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send(self, status, body, headers=None, rid=None):
        headers = dict(headers or {})
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        lower = {k.lower() for k in headers}
        if "content-type" not in lower:
            headers["Content-Type"] = "application/json"
        if rid and "x-request-id" not in lower:
            headers["x-request-id"] = rid
        headers.pop("Content-Length", None)
        headers.pop("content-length", None)
        reason = self.responses.get(status, ("Unknown",))[0]
        head = ["HTTP/1.1 %d %s" % (status, reason)]
        head.append("Date: " + self.date_time_string())
        for k, v in headers.items():
            head.append("%s: %s" % (k, v))
        head.append("Content-Length: %d" % len(data))
        if self.close_connection:
            head.append("Connection: close")
        # one write: headers and body together
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
        self.wfile.flush()

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _handle


class _TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    request_queue_size = 128  # many clients at once (make bench's concurrency row)

    def handle_error(self, request, client_address):
        # A client that hangs up mid-answer (timeouts, aborted transfers) is
        # normal in these tests: stay quiet, the script mode promises no output.
        pass


class FakeServer:
    """A running fake upstream (background thread)."""

    def __init__(self, script=None, log=None, port=0):
        if isinstance(script, (str, os.PathLike)):
            with open(script) as f:
                script = json.load(f)
        if script is not None and not isinstance(script, list):
            raise ValueError("script must be a JSON list of replies")
        self.scripted = script is not None
        self._script = list(script or [])
        self._lock = threading.Lock()
        self._requests = []
        self._sent_events = []
        self._conns = set()
        self._rid = 0
        self._log = open(log, "a", encoding="utf-8") if log else None
        self.model = Model()
        # gate(rec): called for each request once recorded, before it is
        # answered, on that request's thread: a test may hold it there
        self.gate = None
        self._httpd = _TCPServer(("127.0.0.1", port), _Handler)
        self._httpd.fake = self
        self.port = self._httpd.server_address[1]
        self.base = "http://127.0.0.1:%d" % self.port
        self.url = self.base + "/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()

    # -- recording
    def _record(self, rec):
        with self._lock:
            self._requests.append(rec)
            if self._log:
                self._log.write(json.dumps(rec, ensure_ascii=False) + "\n")
                self._log.flush()

    def _sent(self, rec):
        with self._lock:
            self._sent_events.append(rec)

    def sent_events(self):
        """Streamed events written so far (a copy, oldest first)."""
        with self._lock:
            return list(self._sent_events)

    def requests(self):
        """Recorded requests so far (a copy, oldest first)."""
        with self._lock:
            return list(self._requests)

    def clear(self):
        with self._lock:
            self._requests.clear()

    def _request_id(self):
        with self._lock:
            self._rid += 1
            return "req_%d" % self._rid

    # -- script
    def _next_step(self):
        with self._lock:
            return self._script.pop(0) if self._script else None

    def remaining(self):
        """Number of scripted replies not consumed yet."""
        with self._lock:
            return len(self._script)

    # -- connections
    def _conn_opened(self, c):
        with self._lock:
            self._conns.add(c)

    def _conn_closed(self, c):
        with self._lock:
            self._conns.discard(c)

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)
        with self._lock:
            if self._log:
                self._log.close()
                self._log = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(script=None, log=None):
    """Start a fake upstream on 127.0.0.1 (free port) in a background thread.

    script: None (model mode), a list of canned replies, or a path to a JSON
    file holding one.  log: optional path of a JSON-lines request log."""
    return FakeServer(script=script, log=log)


def main(argv=None):
    ap = argparse.ArgumentParser(description="fake OpenAI upstream (127.0.0.1)")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--script")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    srv = FakeServer(script=a.script, log=a.log, port=a.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.port)
    os.replace(tmp, a.port_file)
    while not stop.wait(0.5):
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
