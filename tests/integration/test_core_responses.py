"""codeshim core, Responses API: the loop as real programs see it.

Programs: the curl CLI (OpenSSL libcurl), examples/ask (a C libcurl client)
and Debian's pycurl (GnuTLS libcurl, loaded RTLD_LOCAL), all against the
model-mode fake upstream.  Every test checks what the program received
(schema-validated) and every request the upstream received.

The helpers at the top are shared with test_core_delivery.py and
test_core_errors.py (they import them from here)."""

import base64
import gzip
import json
import os
import re
import subprocess
import tempfile

from conftest import PYTHON, REPO, run
import fake_openai
import schema_check

CURL = "/usr/bin/curl"
ASK = REPO / "build" / "examples" / "ask"
CSPROG = REPO / "build" / "testprogs" / "csprog"
KEY = "sk-test-0123456789"
ENV = {"OPENAI_API_KEY": KEY}

CI_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather.",
                "parameters": {"type": "object",
                               "properties": {"city": {"type": "string"}},
                               "required": ["city"], "additionalProperties": False},
                "strict": True}
CI_ID = re.compile(r"^ci_[0-9a-zA-Z]{8,}$")
CNTR_ID = re.compile(r"^cntr_[0-9a-zA-Z]{8,}$")


# ------------------------------------------------------------------ helpers

def blocks(*codes, prefix="Please run this."):
    """User text the fake model turns into one code call per block."""
    return prefix + "\n" + "".join("```python\n%s```\n" % c for c in codes)


def req(text, tools=(CI_TOOL,), **kw):
    b = {"model": "gpt-fake", "input": text, "tools": list(tools)}
    b.update(kw)
    return b


def curl_cmd(url, extra=(), headers=()):
    cmd = [CURL, "-sS", "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer " + KEY]
    for h in headers:
        cmd += ["-H", h]
    return cmd + ["--data-binary", "@-"] + list(extra) + [url]


def curl_post(url, body, extra=(), headers=(), env=None, preload=True, timeout=60):
    """POST body (dict -> JSON, or bytes) with the curl CLI.
    Returns (exit code, stdout bytes, stderr bytes)."""
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    e = dict(ENV)
    e.update(env or {})
    return run(curl_cmd(url, extra, headers), env=e, input=data, preload=preload,
               timeout=timeout)


def post_json(url, body, extra=(), headers=(), env=None, preload=True, timeout=60):
    """curl_post, with the HTTP status appended by -w and the body parsed.
    Returns (exit code, HTTP status, parsed body or raw text, stderr)."""
    rc, out, err = curl_post(url, body, ["-w", "\n%{http_code}"] + list(extra), headers,
                             env, preload, timeout)
    text, _, code = out.decode().rpartition("\n")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return rc, int(code or 0), parsed, err


def ours(url, body, **kw):
    """An intercepted request that must succeed: returns the validated Response."""
    rc, st, r, err = post_json(url, body, **kw)
    assert (rc, st) == (0, 200), (rc, st, r, err.decode(errors="replace"))
    schema_check.validate(r, "Response")
    return r


def bodies(srv):
    """JSON bodies of every request the upstream received, in order."""
    return [q["body"] for q in srv.requests()]


def input_items(b):
    inp = b.get("input")
    return [{"role": "user", "content": inp}] if isinstance(inp, str) else inp


def assert_clean_upstream(srv, tool="python", n=None):
    """Every upstream request: POST to the same path, the internal function
    tool offered in place of code_interpreter, nothing codeshim-private,
    never a code_interpreter tool or item, tool history consistent."""
    reqs = srv.requests()
    if n is not None:
        assert len(reqs) == n, [json.dumps(q["body"])[:300] for q in reqs]
    for q in reqs:
        assert q["method"] == "POST" and q["path"].endswith("/responses")
        b = q["body"]
        assert isinstance(b, dict), q["raw"][:200]
        tools = b.get("tools") or []
        assert not any(t.get("type") == "code_interpreter" for t in tools), tools
        fn = [t for t in tools if t.get("type") == "function" and t.get("name") == tool]
        assert len(fn) == 1, tools
        params = fn[0]["parameters"]
        assert params["type"] == "object"
        assert params["properties"]["code"]["type"] == "string"
        assert "code" in params.get("required", [])
        # a streaming program's calls stream too; of its stream_options only
        # include_obfuscation goes along
        assert b.get("stream", True) is True
        assert set(b.get("stream_options") or {}) <= {"include_obfuscation"}
        assert not [k for k in b if k.lower().startswith("codeshim")], list(b)
        assert "session_id" not in (b.get("metadata") or {})
        assert "code_interpreter_call.outputs" not in (b.get("include") or [])
        items = input_items(b)
        seen = set()
        for it in items:
            assert it.get("type") != "code_interpreter_call", it
            if it.get("type") == "function_call":
                seen.add(it["call_id"])
            if it.get("type") == "function_call_output":
                assert it["call_id"] in seen, it
        assert q["headers"].get("authorization") == "Bearer " + KEY
        assert "expect" not in q["headers"]
    return reqs


class Recorded:
    """Stands in for a fake holding only some of its requests (for
    assert_clean_upstream when other requests are not ours)."""

    def __init__(self, reqs):
        self._reqs = list(reqs)

    def requests(self):
        return list(self._reqs)


def outputs_sent(b):
    """{call_id: output} of the function_call_output items of an upstream body."""
    return {it["call_id"]: it["output"] for it in input_items(b)
            if it.get("type") == "function_call_output"}


def calls_sent(b, name=None):
    return [it for it in input_items(b) if it.get("type") == "function_call"
            and (name is None or it["name"] == name)]


def ci_items(r):
    return [o for o in r["output"] if o["type"] == "code_interpreter_call"]


def logs_of(item):
    return "".join(o["logs"] for o in item["outputs"] if o["type"] == "logs")


def assert_ci(item, code, logs=None, status="completed"):
    assert item["type"] == "code_interpreter_call"
    assert CI_ID.match(item["id"]), item["id"]
    assert CNTR_ID.match(item["container_id"]), item["container_id"]
    assert item["status"] == status
    assert item["code"] == code
    if logs is not None:
        assert logs_of(item) == logs, item
        if logs:
            assert {"type": "logs", "logs": logs} in item["outputs"]


def assert_no_internal(r, tool="python"):
    """The internal function tool and its calls never reach the program."""
    for o in r["output"]:
        assert not (o["type"] == "function_call" and o.get("name") == tool), o
    for t in r.get("tools") or []:
        assert not (t.get("type") == "function" and t.get("name") == tool
                    and "code" in json.dumps(t.get("parameters"))), t


def final_text(r):
    msgs = [o for o in r["output"] if o["type"] == "message"]
    assert msgs, r["output"]
    return "".join(c.get("text", "") for c in msgs[-1]["content"])


def usage_expected(srv):
    """The fake's usage per request (10 per input item + 5), summed."""
    inp = sum(10 * len(input_items(b)) for b in bodies(srv))
    out = 5 * len(srv.requests())
    return inp, out


def model_reply(req_body):
    """A Response object as the fake model would answer req_body (for scripts)."""
    return fake_openai.Model().responses(req_body)


def code_call_reply(code, name="python", arguments=None):
    """A scripted upstream Response holding one function call to `name`."""
    r = model_reply({"model": "gpt-fake", "input": blocks(code),
                     "tools": [{"type": "function", "name": name,
                                "parameters": {"type": "object",
                                               "properties": {"code": {"type": "string"}}}}]})
    assert r["output"][0]["type"] == "function_call"
    if arguments is not None:
        r["output"][0]["arguments"] = arguments
    return r


def text_reply(text=None):
    r = model_reply({"model": "gpt-fake", "input": "hi"})
    if text is not None:
        r["output"][0]["content"][0]["text"] = text
    return r


def run_csprog(body, *flags, url, env=None, preload=True, tmp=None):
    """Runs build/testprogs/csprog; returns (exit code, stdout, stderr, result)."""
    if not CSPROG.exists():
        r = subprocess.run(["make", "-C", str(REPO), "build/testprogs/csprog"],
                           capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
    d = tmp or tempfile.mkdtemp(prefix="csprog-")
    bf, rf = os.path.join(d, "body.json"), os.path.join(d, "result.json")
    if os.path.exists(rf):
        os.unlink(rf)
    cmd = [CSPROG, "--url", url, "--result", rf,
           "--header", "Content-Type: application/json",
           "--header", "Authorization: Bearer " + KEY]
    if body is not None:
        with open(bf, "wb") as f:
            f.write(body if isinstance(body, bytes) else json.dumps(body).encode())
        cmd += ["--body-file", bf]
    e = dict(ENV)
    e.update(env or {})
    rc, out, err = run(cmd + [str(a) for a in flags], env=e, preload=preload)
    res = None
    if os.path.exists(rf):
        with open(rf) as f:
            res = json.load(f)
    assert rc == 0, (rc, err.decode(errors="replace"))
    return rc, out, err, res


# -------------------------------------------------------------- the loop

def test_two_sequential_executions_curl(fake):
    """Two blocks: two executions in one worker (state kept), three upstream
    calls, one answer with every turn's items in order."""
    body = req(blocks("x = 41\n", "print(x + 1)\nx * 2\n"), instructions="be terse")
    r = ours(fake.url + "/responses", body, headers=["X-Trace: t-17"])

    # what the program received
    assert r["object"] == "response" and r["status"] == "completed"
    assert [o["type"] for o in r["output"]] == [
        "code_interpreter_call", "code_interpreter_call", "message"]
    a, b = ci_items(r)
    assert_ci(a, "x = 41\n")
    assert_ci(b, "print(x + 1)\nx * 2\n", "42\n82\n")
    assert a["id"] != b["id"]
    assert a["container_id"] == b["container_id"]
    assert final_text(r) == "Done. Tool said: 42\n82\n"
    assert r["tools"] == [CI_TOOL]
    assert r["tool_choice"] == "auto"
    assert r["instructions"] == "be terse"
    assert_no_internal(r)
    inp, out = usage_expected(fake)
    assert (inp, out) == (90, 15)
    assert r["usage"]["input_tokens"] == inp
    assert r["usage"]["output_tokens"] == out
    assert r["usage"]["total_tokens"] == inp + out

    # what the upstream received
    reqs = assert_clean_upstream(fake, n=3)
    for q in reqs:
        assert q["path"] == "/v1/responses" and q["query"] == ""
        assert q["headers"]["x-trace"] == "t-17"
        assert q["headers"]["user-agent"].startswith("curl/")  # the program's handle options
        assert q["body"]["model"] == "gpt-fake"
        assert q["body"]["instructions"] == "be terse"
        assert int(q["headers"]["content-length"]) == len(q["raw"].encode())
    b0, b1, b2 = bodies(fake)
    assert b0["input"] == body["input"]
    assert [t["name"] for t in b0["tools"]] == ["python"]
    assert b1["tools"] == b0["tools"] == b2["tools"]
    fc1 = calls_sent(b1, "python")
    assert len(fc1) == 1 and json.loads(fc1[0]["arguments"]) == {"code": "x = 41\n"}
    assert outputs_sent(b1) == {fc1[0]["call_id"]: ""}
    assert input_items(b1)[0] == {"role": "user", "content": body["input"]}
    fc2 = calls_sent(b2, "python")
    assert [json.loads(c["arguments"])["code"] for c in fc2] == ["x = 41\n",
                                                                 "print(x + 1)\nx * 2\n"]
    assert outputs_sent(b2) == {fc2[0]["call_id"]: "", fc2[1]["call_id"]: "42\n82\n"}
    # order: call, its output, next call, its output
    assert [it.get("type") for it in input_items(b2)[1:]] == [
        "function_call", "function_call_output", "function_call", "function_call_output"]


def test_parallel_calls_one_turn(fake):
    """Several calls in one upstream turn: all run, in order, one follow-up."""
    body = req(blocks("a = 6\nprint('first')\n", "print(a * 7)\n",
                      prefix="[parallel] run both"))
    r = ours(fake.url + "/responses", body)
    a, b = ci_items(r)
    assert_ci(a, "a = 6\nprint('first')\n", "first\n")
    assert_ci(b, "print(a * 7)\n", "42\n")
    assert [o["type"] for o in r["output"]] == [
        "code_interpreter_call", "code_interpreter_call", "message"]
    assert final_text(r) == "Done. Tool said: 42\n"
    assert_no_internal(r)

    reqs = assert_clean_upstream(fake, n=2)
    items = input_items(reqs[1]["body"])
    assert [it.get("type") for it in items[1:]] == [
        "function_call", "function_call", "function_call_output", "function_call_output"]
    assert [it["call_id"] for it in items[1:3]] == [it["call_id"] for it in items[3:5]]
    assert [it["output"] for it in items[3:5]] == ["first\n", "42\n"]
    assert r["usage"]["input_tokens"] == usage_expected(fake)[0] == 10 + 50


def test_no_code_call_costs_one_upstream_call(fake):
    """The model answers in text at once: one upstream call, its message."""
    r = ours(fake.url + "/responses", req("Just say hello."))
    assert [o["type"] for o in r["output"]] == ["message"]
    assert final_text(r) == "Hello from the fake model."
    assert r["tools"] == [CI_TOOL]
    assert_clean_upstream(fake, n=1)
    assert r["usage"]["input_tokens"] == 10 and r["usage"]["total_tokens"] == 15


def test_ask_example_program(fake):
    """examples/ask, an ordinary libcurl C client, gets a working interpreter."""
    env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "gpt-fake"}
    q = blocks("import math\nprint(math.factorial(10))\n", prefix="Compute 10!")
    rc, out, err = run([ASK, q], env=env)
    assert rc == 0, err.decode()
    text = out.decode()
    assert re.search(r"--- code \(cntr_[0-9a-zA-Z]+\) ---\nimport math\n", text), text
    assert "--- output ---\n3628800\n" in text
    assert "--- answer ---\nDone. Tool said: 3628800\n" in text
    assert_clean_upstream(fake, n=2)

    fake.clear()
    rc, out, err = run([ASK, "--raw", q], env=env)
    assert rc == 0, err.decode()
    r = json.loads(out)
    schema_check.validate(r, "Response")
    [ci] = ci_items(r)
    assert_ci(ci, "import math\nprint(math.factorial(10))\n", "3628800\n")
    assert_no_internal(r)
    assert r["model"] == "gpt-fake"
    reqs = assert_clean_upstream(fake, n=2)
    assert all(q["body"]["model"] == "gpt-fake" for q in reqs)


PYCURL_PROG = r"""
import io, json, sys, pycurl
url, bodies = sys.argv[1], json.loads(sys.argv[2])
c = pycurl.Curl()
res = []
for body in bodies:
    buf, hdr = io.BytesIO(), []
    c.setopt(pycurl.URL, url)
    c.setopt(pycurl.HTTPHEADER, ["Content-Type: application/json",
                                 "Authorization: Bearer %s" % sys.argv[3]])
    c.setopt(pycurl.POSTFIELDS, json.dumps(body))
    c.setopt(pycurl.WRITEFUNCTION, buf.write)
    c.setopt(pycurl.HEADERFUNCTION, lambda h: hdr.append(h.decode("latin-1")))
    c.perform()
    res.append({"code": c.getinfo(pycurl.RESPONSE_CODE),
                "ctype": c.getinfo(pycurl.CONTENT_TYPE),
                "size": c.getinfo(pycurl.SIZE_DOWNLOAD),
                "headers": hdr, "body": buf.getvalue().decode()})
c.close()
print(json.dumps(res))
"""


def test_pycurl_gnutls_two_requests_one_handle(fake):
    """Debian's pycurl (GnuTLS libcurl, dlopen'ed RTLD_LOCAL): two requests
    on one handle, each its own sandbox (state does not carry over)."""
    b1 = req(blocks("secret = 'kept'\nprint(secret)\n"))
    b2 = req(blocks("print(secret)\n"))
    rc, out, err = run([PYTHON, "-c", PYCURL_PROG, fake.url + "/responses",
                        json.dumps([b1, b2]), KEY], env=ENV)
    assert rc == 0, err.decode()
    r1, r2 = json.loads(out)
    for x in (r1, r2):
        assert x["code"] == 200 and x["ctype"] == "application/json"
        assert x["size"] == len(x["body"].encode())
        assert x["headers"][0].startswith("HTTP/1.1 200")
        assert x["headers"][-1] == "\r\n"
        schema_check.validate(json.loads(x["body"]), "Response")
    a, b = json.loads(r1["body"]), json.loads(r2["body"])
    [ca] = ci_items(a)
    [cb] = ci_items(b)
    assert_ci(ca, "secret = 'kept'\nprint(secret)\n", "kept\n")
    assert "NameError" in logs_of(cb) and "secret" in logs_of(cb)
    assert ca["container_id"] != cb["container_id"]
    assert_no_internal(a)
    assert_no_internal(b)
    reqs = assert_clean_upstream(fake, n=4)
    assert reqs[2]["body"]["input"] == b2["input"]


# --------------------------------------------------------- request rewriting

def test_request_rewrite_private_keys_metadata_include(fake):
    """session_id and codeshim* keys never go upstream; include's
    code_interpreter outputs is taken out; the program's own tools stay in
    place; the answer echoes tools, tool_choice and metadata as sent."""
    body = req(blocks("print(sum(range(5)))\n"),
               tools=(WEATHER_TOOL, CI_TOOL),
               metadata={"session_id": "sess-1", "team": "blue"},
               include=["code_interpreter_call.outputs", "message.output_text.logprobs"],
               codeshim_sandbox="local", codeshimExtra={"a": 1}, temperature=0.5)
    r = ours(fake.url + "/responses", body)
    [ci] = ci_items(r)
    assert_ci(ci, "print(sum(range(5)))\n", "10\n")
    assert r["metadata"] == {"session_id": "sess-1", "team": "blue"}
    assert r["tools"] == [WEATHER_TOOL, CI_TOOL]
    assert r["tool_choice"] == "auto"
    assert "codeshim_sandbox" not in r and "codeshimExtra" not in r
    assert_no_internal(r)

    reqs = assert_clean_upstream(fake, n=2)
    for b in bodies(fake):
        assert b["metadata"] == {"team": "blue"}
        assert b["include"] == ["message.output_text.logprobs"]
        assert "codeshim_sandbox" not in b and "codeshimExtra" not in b
        assert [t.get("name") for t in b["tools"]] == ["get_weather", "python"]
        assert b["tools"][0] == WEATHER_TOOL
        assert b["temperature"] == 0.5
    assert len(reqs) == 2


def test_emptied_metadata_and_include_are_dropped(fake):
    body = req(blocks("print(1)\n"), metadata={"session_id": "only-this"},
               include=["code_interpreter_call.outputs"])
    r = ours(fake.url + "/responses", body)
    assert r["metadata"] == {"session_id": "only-this"}
    assert_clean_upstream(fake, n=2)
    for b in bodies(fake):
        assert "metadata" not in b
        assert "include" not in b


def test_forced_tool_choice_only_first_call(fake):
    """tool_choice code_interpreter forces the function on the first call
    only; follow-ups get "auto"; the program sees its own tool_choice."""
    body = req(blocks("print('one')\n", "print('two')\n"),
               tools=(CI_TOOL, WEATHER_TOOL), tool_choice={"type": "code_interpreter"})
    r = ours(fake.url + "/responses", body)
    assert r["tool_choice"] == {"type": "code_interpreter"}
    assert [logs_of(c) for c in ci_items(r)] == ["one\n", "two\n"]
    assert_no_internal(r)
    b0, b1, b2 = bodies(fake)
    assert b0["tool_choice"] == {"type": "function", "name": "python"}
    assert b1["tool_choice"] == "auto"
    assert b2["tool_choice"] == "auto"
    assert_clean_upstream(fake, n=3)


def test_allowed_tools_choice_rewritten(fake):
    """allowed_tools naming code_interpreter names the function instead;
    mode "required" only on the first call."""
    choice = {"type": "allowed_tools", "mode": "required",
              "tools": [{"type": "code_interpreter"}]}
    body = req(blocks("print('a')\n"), tools=(CI_TOOL, WEATHER_TOOL), tool_choice=choice)
    r = ours(fake.url + "/responses", body)
    assert r["tool_choice"] == choice
    assert [logs_of(c) for c in ci_items(r)] == ["a\n"]
    b0, b1 = bodies(fake)
    assert b0["tool_choice"]["tools"] == [{"type": "function", "name": "python"}]
    assert b0["tool_choice"]["mode"] == "required"
    assert b1["tool_choice"] in ("auto", dict(b0["tool_choice"], mode="auto"))
    assert_clean_upstream(fake, n=2)


def test_stream_options_only_obfuscation_forwarded(fake):
    """The upstream is asked to stream when the program is (live streaming); of
    the program's stream_options only include_obfuscation, the program's
    own choice of padding, goes along."""
    body = req(blocks("print(2 ** 10)\n"), stream=True,
               stream_options={"include_obfuscation": False, "other": 1})
    rc, out, err = curl_post(fake.url + "/responses", body, ["-w", "\n%{http_code}"])
    assert rc == 0, err.decode()
    assert out.decode().rsplit("\n", 1)[1] == "200"
    assert b"1024" in out
    reqs = assert_clean_upstream(fake, n=2)
    for q in reqs:
        assert q["body"]["stream"] is True
        assert q["body"]["stream_options"] == {"include_obfuscation": False}


def test_url_with_query_string(fake):
    """An Azure-style ?api-version= URL is still ours, and the upstream gets
    the same path and query."""
    r = ours(fake.url + "/responses?api-version=2025-04-01-preview",
             req(blocks("print('q')\n")))
    assert logs_of(ci_items(r)[0]) == "q\n"
    for q in assert_clean_upstream(fake, n=2):
        assert q["path"] == "/v1/responses"
        assert q["query"] == "api-version=2025-04-01-preview"


def test_program_handle_options_inherited_compression(scripted):
    """The upstream calls inherit the program's handle options: with
    curl --compressed, gzip answers are decoded; the program gets plain
    JSON without a stale Content-Encoding."""
    gz = {"Content-Encoding": "gzip"}
    up = scripted([
        {"body": gzip.compress(json.dumps(code_call_reply("print(5)\n")).encode()),
         "headers": gz},
        {"body": gzip.compress(json.dumps(text_reply("five")).encode()), "headers": gz}])
    rc, out, err = curl_post(up.url + "/responses", req(blocks("print(5)\n")),
                             ["--compressed", "-i"])
    assert rc == 0, err
    head, _, body = out.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 OK")
    assert "content-encoding" not in head.lower()
    assert "Content-Length: %d" % len(body) in head
    r = json.loads(body)
    schema_check.validate(r, "Response")
    assert_ci(ci_items(r)[0], "print(5)\n", "5\n")
    assert final_text(r) == "five"
    for q in assert_clean_upstream(up, n=2):
        assert "gzip" in q["headers"]["accept-encoding"]


def test_own_tool_named_codeshim_python_too(fake):
    """Name picking skips every name the program uses."""
    own = [dict(WEATHER_TOOL, name="python", description="mine"),
           dict(WEATHER_TOOL, name="codeshim_python", description="mine too")]
    body = req("Hello", tools=own + [CI_TOOL])
    r = ours(fake.url + "/responses", body)
    assert r["tools"] == own + [CI_TOOL]
    assert_clean_upstream(fake, tool="codeshim_python_2", n=1)
    assert [t["name"] for t in bodies(fake)[0]["tools"]] == [
        "python", "codeshim_python", "codeshim_python_2"]


# ------------------------------------------------------------------- logs

def test_logs_stdout_stderr_order_and_trailing_value(fake):
    code = ("import sys\nprint('out 1')\nprint('err 1', file=sys.stderr)\n"
            "sys.stdout.write('out 2\\n')\n{'k': [1, 2]}\n")
    r = ours(fake.url + "/responses", req(blocks(code)))
    [ci] = ci_items(r)
    expect = "out 1\nerr 1\nout 2\n{'k': [1, 2]}\n"
    assert_ci(ci, code, expect)
    [b1] = bodies(fake)[1:]
    assert list(outputs_sent(b1).values()) == [expect]


def test_logs_unicode_control_and_invalid_bytes(fake):
    """Output is text for JSON: UTF-8 kept, control characters escaped,
    bytes that are not UTF-8 (and NULs) replaced, the JSON still valid."""
    code = ("import os, sys\nprint('h\\u00e9llo \\u2713 \\U0001F600')\n"
            "print('ctl:\\x01\\x1b[31mred')\nsys.stdout.flush()\n"
            "_ = os.write(1, b'bad:\\xff\\xfe|nul:\\x00|\\n')\n")
    r = ours(fake.url + "/responses", req(blocks(code)))
    [ci] = ci_items(r)
    assert ci["code"] == code
    logs = logs_of(ci)
    assert logs.startswith("h\u00e9llo \u2713 \U0001F600\nctl:\x01\x1b[31mred\nbad:")
    tail = logs.split("bad:", 1)[1]
    assert tail.endswith("|\n") and "|nul:" in tail
    assert "\x00" not in logs
    assert list(outputs_sent(bodies(fake)[1]).values()) == [logs]


def test_logs_traceback_on_exception(fake):
    code = "print('before')\ndef f():\n    return 1 / 0\nf()\n"
    r = ours(fake.url + "/responses", req(blocks(code)))
    [ci] = ci_items(r)
    logs = logs_of(ci)
    assert logs.startswith("before\nTraceback (most recent call last):\n"), logs
    assert "return 1 / 0" in logs
    assert logs.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "worker" not in logs  # the sandbox's own frames are not shown
    assert list(outputs_sent(bodies(fake)[1]).values()) == [logs]
    assert r["status"] == "completed" and final_text(r).startswith("Done. Tool said: before")


def test_logs_capped_with_visible_note(fake):
    code = "print('A' * 3000)\nprint('B' * 3000)\n"
    r = ours(fake.url + "/responses", req(blocks(code)), env={"CODESHIM_OUTPUT_CAP": "1000"})
    [ci] = ci_items(r)
    logs = logs_of(ci)
    assert len(logs.encode()) <= 1000, len(logs.encode())
    assert re.search(r"\[\.\.\. \d+ bytes of output truncated \.\.\.\]", logs), logs
    assert logs.startswith("AAAA") and logs.rstrip().endswith("BBBB")
    assert list(outputs_sent(bodies(fake)[1]).values()) == [logs]
    # default cap (20000): 6002 bytes fit
    fake.clear()
    r = ours(fake.url + "/responses", req(blocks(code)))
    assert logs_of(ci_items(r)[0]) == "A" * 3000 + "\n" + "B" * 3000 + "\n"


def test_figure_becomes_image_output(fake):
    code = ("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\n"
            "print('plotted')\n")
    r = ours(fake.url + "/responses", req(blocks(code)))
    [ci] = ci_items(r)
    assert ci["outputs"][0] == {"type": "logs", "logs": ci["outputs"][0]["logs"]}
    assert ci["outputs"][0]["logs"].startswith("plotted\n")
    imgs = [o for o in ci["outputs"] if o["type"] == "image"]
    assert len(imgs) == 1
    url = imgs[0]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    sent = list(outputs_sent(bodies(fake)[1]).values())[0]
    assert sent.startswith("plotted\n") and "image" in sent  # the model is told
    assert "base64" not in sent


def test_working_directory_is_private_and_per_request(fake, tmp_path):
    """Each request's worker has its own working directory (not the
    program's), and files written there do not survive the request."""
    write = "import os\nprint(os.getcwd())\nopen('mark.txt', 'w').write('m')\n"
    look = "import os\nprint(sorted(os.listdir('.')))\n"
    rc, out, err = run(curl_cmd(fake.url + "/responses"), env=ENV, cwd=tmp_path,
                       input=json.dumps(req(blocks(write))))
    assert rc == 0, err
    r1 = json.loads(out)
    schema_check.validate(r1, "Response")
    cwd = logs_of(ci_items(r1)[0]).strip()
    assert cwd and os.path.realpath(cwd) != os.path.realpath(tmp_path)
    assert not (tmp_path / "mark.txt").exists()
    rc, out, err = run(curl_cmd(fake.url + "/responses"), env=ENV, cwd=tmp_path,
                       input=json.dumps(req(blocks(look))))
    assert rc == 0, err
    r2 = json.loads(out)
    schema_check.validate(r2, "Response")
    assert logs_of(ci_items(r2)[0]) == "[]\n"
    assert_clean_upstream(fake, n=4)
