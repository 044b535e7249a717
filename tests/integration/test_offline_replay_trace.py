"""Offline mode, record/replay and traces, driven through real
programs (the curl CLI, the C example) under LD_PRELOAD."""

import json
import os
import socket
from pathlib import Path

import pytest

from conftest import REPO, run, sse_json, stop_supervisors
import schema_check

CURL = "/usr/bin/curl"
ASK = REPO / "build" / "examples" / "ask"
KEY = "sk-test-SECRETKEY-0123456789abcdef"

TWO_BLOCKS = "Run both:\n```python\nx = 41\nprint('set')\n```\n```python\nprint(x + 1)\n```"


def dead_url():
    """A loopback URL where nothing listens (the upstream is 'stopped')."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d/v1" % port


def curl(url, body, env, stream=False):
    cmd = [CURL, "-sS", url, "-H", "Content-Type: application/json",
           "-H", "Authorization: Bearer " + KEY, "-d", json.dumps(body)]
    if stream:
        cmd.insert(2, "-N")
    return run(cmd, env=env)


def responses_body(text, stream=False):
    b = {"model": "gpt-test", "input": text,
         "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    if stream:
        b["stream"] = True
    return b


def chat_body(text, stream=False):
    b = {"model": "gpt-test", "messages": [{"role": "user", "content": text}],
         "tools": [{"type": "code_interpreter"}]}
    if stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": True}
    return b


def logs_of(resp):
    return [o["outputs"][0]["logs"] for o in resp["output"] if o["type"] == "code_interpreter_call"]


# ---------------- offline mode ----------------

def test_offline_responses_runs_code_without_network():
    rc, out, err = curl(dead_url() + "/responses", responses_body(TWO_BLOCKS),
                        {"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    resp = json.loads(out)
    schema_check.validate(resp, "Response")
    assert logs_of(resp) == ["set\n", "42\n"]
    assert resp["output"][-1]["type"] == "message"
    assert "42" in resp["output"][-1]["content"][0]["text"]
    assert resp["usage"]["total_tokens"] > 0


def test_offline_chat_runs_code():
    rc, out, err = curl(dead_url() + "/chat/completions", chat_body(TWO_BLOCKS),
                        {"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    resp = json.loads(out)
    schema_check.validate(resp, "CreateChatCompletionResponse")
    msg = resp["choices"][0]["message"]
    assert "42" in msg["content"]
    assert "tool_calls" not in msg
    assert resp["choices"][0]["finish_reason"] == "stop"


def test_offline_calls_codeshim_tool_next_to_a_program_code_tool():
    """A program tool that also takes "code", listed first, is not the one
    the offline model calls: the blocks run in the sandbox."""
    body = responses_body(TWO_BLOCKS)
    body["tools"].insert(0, {"type": "function", "name": "eval_js", "parameters": {
        "type": "object", "properties": {"code": {"type": "string"}}}})
    rc, out, err = curl(dead_url() + "/responses", body, {"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    resp = json.loads(out)
    assert [o["type"] for o in resp["output"]] == [
        "code_interpreter_call", "code_interpreter_call", "message"]
    assert logs_of(resp) == ["set\n", "42\n"]


def test_offline_responses_stream():
    rc, out, err = curl(dead_url() + "/responses", responses_body(TWO_BLOCKS, True),
                        {"CODESHIM_OFFLINE": "1"}, stream=True)
    assert rc == 0, err
    events = sse_json(out)
    schema_check.validate_sse_responses(events)
    types = [e for e, _ in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert types.count("response.code_interpreter_call.interpreting") == 2
    final = events[-1][1]["response"]
    assert logs_of(final) == ["set\n", "42\n"]
    assert final["id"] == events[0][1]["response"]["id"]


def test_offline_chat_stream():
    rc, out, err = curl(dead_url() + "/chat/completions", chat_body(TWO_BLOCKS, True),
                        {"CODESHIM_OFFLINE": "1"}, stream=True)
    assert rc == 0, err
    events = sse_json(out)
    assert events[-1][1] == "[DONE]"
    chunks = [d for _, d in events[:-1]]
    for c in chunks:
        schema_check.validate_chat_chunk(c)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert "42" in text
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all("tool_calls" not in c["choices"][0]["delta"] for c in chunks if c["choices"])


def test_offline_refuses_other_model_requests():
    # no code_interpreter tool: a clear error, and nothing is sent
    rc, out, err = curl(dead_url() + "/responses", {"model": "m", "input": "hi"},
                        {"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    body = json.loads(out)
    assert body["error"]["code"] == "codeshim_offline"
    rc, out, err = run([CURL, "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                        dead_url() + "/chat/completions", "-d", '{"model":"m"}'],
                       env={"CODESHIM_OFFLINE": "1"})
    assert out == b"400"


def test_offline_example_program():
    rc, out, err = run([ASK, "```python\nprint(6 * 7)\n```"], env={"CODESHIM_OFFLINE": "1"})
    assert rc == 0, err
    assert b"--- output ---\n42\n" in out


# ---------------- record and replay ----------------

def test_record_then_replay_gives_identical_output(fake, tmp_path):
    rec = tmp_path / "rec"
    prompts = {False: TWO_BLOCKS, True: TWO_BLOCKS.replace("41", "99")}
    outs = {}
    for stream, text in prompts.items():
        rc, out, err = curl(fake.url + "/responses", responses_body(text, stream),
                            {"CODESHIM_RECORD": rec}, stream=stream)
        assert rc == 0, err
        outs[stream] = out
    files = sorted(rec.iterdir())
    assert len(files) == len(fake.requests()) == 6  # 3 upstream calls per request
    for f in files:
        assert oct(f.stat().st_mode & 0o777) == "0o600"
        doc = json.loads(f.read_text())
        assert doc["request"]["path"] == "/v1/responses"
        assert doc["response"]["status"] == 200
    assert oct(rec.stat().st_mode & 0o777) == "0o700"
    fake.stop()  # the upstream is gone: replay must not need it
    for stream, text in prompts.items():
        rc, out, err = curl(dead_url() + "/responses", responses_body(text, stream),
                            {"CODESHIM_REPLAY": rec}, stream=stream)
        assert rc == 0, err
        assert normalise(out) == normalise(outs[stream])
    assert b"100" in outs[True] and b"42" in outs[False]


def normalise(out):
    """Program output with codeshim's own random ids (ci_, cntr_) blanked:
    everything else, upstream ids included, must be identical on replay."""
    import re
    return re.sub(rb"(ci|cntr)_[0-9a-f]{48}", b"ID", out)


def test_replay_unmatched_request_is_a_clear_error(fake, tmp_path):
    rec = tmp_path / "rec"
    rc, out, err = curl(fake.url + "/responses", responses_body("```python\nprint(1)\n```"),
                        {"CODESHIM_RECORD": rec})
    assert rc == 0
    rc, out, err = curl(dead_url() + "/responses",
                        responses_body("```python\nprint(2)\n```"),
                        {"CODESHIM_REPLAY": rec})
    assert rc == 0
    body = json.loads(out)
    assert body["error"]["code"] == "replay_miss"
    assert "no recorded exchange" in body["error"]["message"]
    assert b"no recorded exchange" in err  # logged too


TWICE = r"""
import io, json, sys, pycurl
url, body = sys.argv[1], sys.argv[2]
c = pycurl.Curl()
for _ in range(2):
    b = io.BytesIO()
    c.setopt(c.URL, url)
    c.setopt(c.POSTFIELDS, body)
    c.setopt(c.WRITEFUNCTION, b.write)
    c.perform()
    print(json.loads(b.getvalue())["id"])
"""


def test_replay_is_per_occurrence(fake, tmp_path):
    """The same request twice in one program run is recorded as two
    occurrences (<key>.json, <key>-2.json) and replays as both answers."""
    rec = tmp_path / "rec"
    body = json.dumps(responses_body("```python\nprint(7)\n```"))
    rc, out, err = run(["/usr/bin/python3", "-c", TWICE, fake.url + "/responses", body],
                       env={"CODESHIM_RECORD": rec})
    assert rc == 0, err
    ids = out.split()
    assert len(set(ids)) == 2  # the fake answered differently each time
    names = sorted(p.name for p in rec.iterdir())
    assert sum(n.endswith("-2.json") for n in names) == 1
    fake.stop()
    rc, out2, err = run(["/usr/bin/python3", "-c", TWICE, dead_url() + "/responses", body],
                        env={"CODESHIM_REPLAY": rec})
    assert rc == 0, err
    assert out2.split() == ids


# ---------------- traces and logs ----------------

def test_trace_content_and_summary(fake, tmp_path):
    trace = tmp_path / "t.jsonl"
    rc, out, err = curl(fake.url + "/responses", responses_body(TWO_BLOCKS),
                        {"CODESHIM_TRACE": trace})
    assert rc == 0, err
    lines = [json.loads(l) for l in trace.read_text().splitlines()]
    events = [l["event"] for l in lines]
    assert events == ["request", "upstream", "exec", "upstream", "exec", "upstream", "answer"]
    assert len({l["req"] for l in lines}) == 1
    ex = [l for l in lines if l["event"] == "exec"]
    assert ex[0]["code"].startswith("x = 41") and ex[1]["output"] == "42\n"
    assert all(e["status"] == "completed" and e["seconds"] >= 0 for e in ex)
    ups = [l for l in lines if l["event"] == "upstream"]
    assert [u["turn"] for u in ups] == [1, 2, 3] and all(u["status"] == 200 for u in ups)
    assert lines[-1]["executions"] == 2 and lines[-1]["upstream_calls"] == 3
    assert lines[-1]["curl_code"] == 0
    rc, out, err = run([REPO / "build" / "codeshim", "trace", trace], preload=False)
    assert rc == 0, err
    assert b"3 upstream calls, 2 executions" in out


def test_trace_records_upstream_failure(tmp_path):
    trace = tmp_path / "t.jsonl"
    rc, out, err = curl(dead_url() + "/responses", responses_body("```python\n1\n```"),
                        {"CODESHIM_TRACE": trace})
    assert rc == 7  # connection refused, as a plain transfer
    lines = [json.loads(l) for l in trace.read_text().splitlines()]
    up = [l for l in lines if l["event"] == "upstream"][0]
    assert up["curl_code"] == 7 and up["error"]
    assert [l["event"] for l in lines][-1] == "error"


def test_no_api_key_in_any_file_written(fake, tmp_path):
    rec, trace, log = tmp_path / "rec", tmp_path / "t.jsonl", tmp_path / "log.txt"
    rc, out, err = curl(fake.url + "/responses",
                        responses_body("```python\nimport os\nprint(sorted(os.environ))\n```", True),
                        {"CODESHIM_RECORD": rec, "CODESHIM_TRACE": trace,
                         "CODESHIM_LOG": "debug", "CODESHIM_LOG_FILE": log,
                         "OPENAI_API_KEY": KEY}, stream=True)
    assert rc == 0, err
    # the upstream did receive the key: it is the program's own header
    assert fake.requests()[0]["headers"]["authorization"] == "Bearer " + KEY
    written = list(rec.iterdir()) + [trace, log]
    assert log.stat().st_size > 0
    for f in written:
        assert KEY.encode() not in f.read_bytes(), f
        assert b"SECRETKEY" not in f.read_bytes(), f
    assert KEY.encode() not in err
    assert b"OPENAI_API_KEY" not in out  # the sandbox environment is empty


def test_log_levels_and_file(tmp_path):
    log = tmp_path / "log.txt"
    rc, out, err = curl(dead_url() + "/responses", responses_body("```python\n1\n```"),
                        {"CODESHIM_OFFLINE": "1", "CODESHIM_LOG": "info",
                         "CODESHIM_LOG_FILE": log})
    assert rc == 0
    text = log.read_text()
    assert "intercepted responses request" in text
    assert all(l.startswith("codeshim[") for l in text.splitlines())
    assert err == b""  # nothing on stderr when a log file is set
    rc, out, err = curl(dead_url() + "/responses", responses_body("```python\n1\n```"),
                        {"CODESHIM_OFFLINE": "1", "CODESHIM_LOG": "bogus"})
    assert b"CODESHIM_LOG=bogus" in err  # a bad value is logged, default used


def test_no_key_from_the_url_in_any_file(fake, tmp_path):
    """Some clients put the key in the URL (Azure's ?api-key=, ?key=,
    user:password@host) or in gateway headers and cookies: logs, traces,
    recordings and the session store never hold it."""
    rec, trace, log = tmp_path / "rec", tmp_path / "t.jsonl", tmp_path / "log.txt"
    rt = tmp_path / "rt"
    url = fake.url.replace("http://", "http://user:PWSECRET@") + \
        "/responses?api-version=1&api-key=QSECRET&key=KSECRET"
    body = responses_body("```python\nprint(1)\n```")
    body["metadata"] = {"session_id": "s1"}
    try:
        rc, out, err = run([CURL, "-sS", url, "-H", "Content-Type: application/json",
                            "-H", "x-goog-api-key: GSECRET", "-b", "session=CSECRET",
                            "-d", json.dumps(body)],
                           env={"CODESHIM_RECORD": rec, "CODESHIM_TRACE": trace,
                                "CODESHIM_LOG": "debug", "CODESHIM_LOG_FILE": log,
                                "CODESHIM_RUNTIME_DIR": rt})
        assert rc == 0, err
        # the session store too (names and contents), read while it lives
        stored = [Path(d) / n for d, dirs, files in os.walk(rt) for n in dirs + files]
        assert any(p.name == "pid" for p in stored)
    finally:
        stop_supervisors(rt)
    assert "QSECRET" in fake.requests()[0]["query"]  # the upstream got it, as sent
    assert fake.requests()[0]["headers"]["x-goog-api-key"] == "GSECRET"
    for f in list(rec.iterdir()) + [trace, log] + stored:
        try:
            data = f.read_bytes() if f.is_file() else b""
        except OSError:
            data = b""
        for secret in (b"QSECRET", b"KSECRET", b"PWSECRET", b"GSECRET", b"CSECRET"):
            assert secret not in data, (f, secret)
            assert secret.decode() not in str(f.relative_to(tmp_path)), f
    assert json.loads(trace.read_text().splitlines()[0])["url"].endswith("/v1/responses")
