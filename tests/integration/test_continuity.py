"""Continuing codeshim's answers by id (previous_response_id), as OpenAI
SDK conversations do. The fake upstream remembers its responses and, like
OpenAI, refuses a continuation that leaves a function call without output
or names an id it never issued."""

import json

from conftest import run, sse_json

CURL = "/usr/bin/curl"
CI = {"type": "code_interpreter", "container": {"type": "auto"}}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}


def post(url, body, rt, stream=False):
    cmd = [CURL, "-sS", url + "/responses", "-H", "Authorization: Bearer sk-cont",
           "-H", "Content-Type: application/json", "-d", json.dumps(body)]
    if stream:
        cmd.insert(2, "-N")
    rc, out, err = run(cmd, env={"CODESHIM_RUNTIME_DIR": rt})
    assert rc == 0, err
    return sse_json(out)[-1][1]["response"] if stream else json.loads(out)


def test_continue_a_streamed_answer(fake, tmp_path):
    rt = tmp_path / "rt"
    r = post(fake.url, {"model": "m", "stream": True, "tools": [CI],
                        "input": "```python\nprint(6 * 7)\n```"}, rt, stream=True)
    first_upstream, last_upstream = [q for q in fake.requests()], None
    assert r["status"] == "completed"
    # the stream's id is the first upstream response's; the stored
    # conversation upstream ends at the last one
    r2 = post(fake.url, {"model": "m", "tools": [CI], "previous_response_id": r["id"],
                         "input": "thanks"}, rt)
    assert r2["status"] == "completed", r2
    sent = fake.requests()[-1]["body"]
    assert sent["previous_response_id"] != r["id"]
    assert sent["previous_response_id"].startswith("resp_")
    assert r2.get("error") is None


def test_continue_after_a_mixed_turn(fake, tmp_path):
    """The model ran code and called the program's get_weather in one turn:
    the program answers get_weather only; codeshim supplies the output of
    its own call, which the upstream never received."""
    rt = tmp_path / "rt"
    r = post(fake.url, {"model": "m", "tools": [CI, WEATHER],
                        "input": "[parallel] [call get_weather]\n```python\nprint('t')\n```"}, rt)
    types = [o["type"] for o in r["output"]]
    assert types == ["code_interpreter_call", "function_call"], types
    fc = r["output"][1]
    r2 = post(fake.url, {"model": "m", "tools": [CI, WEATHER], "previous_response_id": r["id"],
                         "input": [{"type": "function_call_output", "call_id": fc["call_id"],
                                    "output": "sunny"}]}, rt)
    assert r2.get("error") is None and "object" in r2, r2
    assert r2["status"] == "completed"
    sent = fake.requests()[-1]["body"]
    outs = [i for i in sent["input"] if i.get("type") == "function_call_output"]
    assert outs[0]["output"] == "t\n" and outs[1]["output"] == "sunny"


def test_plain_continuation_untouched(fake, tmp_path):
    rt = tmp_path / "rt"
    r = post(fake.url, {"model": "m", "tools": [CI], "input": "```python\nprint(1)\n```"}, rt)
    post(fake.url, {"model": "m", "tools": [CI], "previous_response_id": r["id"],
                    "input": "thanks"}, rt)
    sent = fake.requests()[-1]["body"]
    assert sent["previous_response_id"] == r["id"]  # nothing to fix: as sent
    assert sent["input"] == "thanks"
    assert not list(rt.glob("*/r-*"))  # nothing remembered when not needed
