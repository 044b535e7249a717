"""The scripted model (CODESHIM_SCRIPT): a YAML file tells the model what
to answer; the loop, the sandbox and the program's answer are the real
ones. Driven through the curl CLI and pycurl under LD_PRELOAD, with no
upstream at all (every URL is a dead loopback port)."""

import json

import schema_check
from conftest import run, sse_json
from test_core_responses import WEATHER_TOOL, CI_TOOL
from test_offline_replay_trace import curl, dead_url


def script(tmp_path, text, name="script.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def body(text, tools=(CI_TOOL,), **kw):
    b = {"model": "gpt-test", "input": text, "tools": list(tools)}
    b.update(kw)
    return b


def test_a_script_drives_a_program_tool_call_then_code(tmp_path):
    s = script(tmp_path, """
turns:
  - match: "weather in [A-Z][a-z]+"
    call: {name: get_weather, arguments: {city: Paris}}
  - run: "print(20 + 1)"
  - say: "It is 21 degrees in Paris."
""")
    env = {"CODESHIM_SCRIPT": s}
    rc, out, err = curl(dead_url() + "/responses",
                        body("What is the weather in Paris?", (CI_TOOL, WEATHER_TOOL)), env)
    assert rc == 0, err
    r = json.loads(out)
    schema_check.validate(r, "Response")
    calls = [o for o in r["output"] if o["type"] == "function_call"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == \
        [("get_weather", {"city": "Paris"})]
    # the program answers its tool; the script's next turns run code, then say
    follow = body([{"role": "user", "content": "What is the weather in Paris?"},
                   {"type": "function_call", "call_id": calls[0]["call_id"],
                    "name": "get_weather", "arguments": calls[0]["arguments"]},
                   {"type": "function_call_output", "call_id": calls[0]["call_id"],
                    "output": "21C"}], (CI_TOOL, WEATHER_TOOL))
    # a new process starts the script over: its first turn matches again
    rc, out, err = curl(dead_url() + "/responses", follow, env)
    assert rc == 0, err
    again = json.loads(out)
    assert [o["name"] for o in again["output"] if o["type"] == "function_call"] == \
        ["get_weather"]


PROGRAM = r"""
import io, json, sys, pycurl
url, script_body, follow = sys.argv[1], sys.argv[2], sys.argv[3]
c = pycurl.Curl()
for b in (script_body, follow):
    out = io.BytesIO()
    c.setopt(c.URL, url)
    c.setopt(c.POSTFIELDS, b)
    c.setopt(c.HTTPHEADER, ["Content-Type: application/json"])
    c.setopt(c.WRITEFUNCTION, out.write)
    c.perform()
    print(json.dumps(json.loads(out.getvalue())))
"""


def test_one_process_follows_the_script_through_its_tool_call(tmp_path):
    s = script(tmp_path, """
- match: "weather"
  call: {name: get_weather, arguments: '{"city": "Rome"}'}
- run: "print(6 * 7)"
- say: "Done: 42."
""")
    first = body("weather in Rome?", (CI_TOOL, WEATHER_TOOL))
    follow = body([{"role": "user", "content": "weather in Rome?"},
                   {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
                  (CI_TOOL, WEATHER_TOOL))
    rc, out, err = run(["/usr/bin/python3", "-c", PROGRAM, dead_url() + "/responses",
                        json.dumps(first), json.dumps(follow)], env={"CODESHIM_SCRIPT": s})
    assert rc == 0, err
    a, b = (json.loads(l) for l in out.decode().splitlines())
    assert [o["name"] for o in a["output"] if o["type"] == "function_call"] == ["get_weather"]
    ci = [o for o in b["output"] if o["type"] == "code_interpreter_call"]
    assert ci[0]["code"] == "print(6 * 7)"
    assert ci[0]["outputs"] == [{"type": "logs", "logs": "42\n"}]  # the real sandbox ran it
    assert b["output"][-1]["content"][0]["text"] == "Done: 42."
    schema_check.validate(b, "Response")


def test_a_429_the_program_retries(tmp_path):
    s = script(tmp_path, """
- status: 429
  retry_after: 2
  error: "Rate limit reached for requests"
- run: "print('after the retry')"
- say: "ok"
""")
    trace = tmp_path / "t.jsonl"
    rc, out, err = curl(dead_url() + "/responses", body("go"),
                        {"CODESHIM_SCRIPT": s, "CODESHIM_TRACE": trace})
    assert rc == 0, err
    assert json.loads(out)["error"]["code"] == "rate_limit_exceeded"
    # the curl CLI retries a 429 with --retry, after Retry-After
    cmd_env = {"CODESHIM_SCRIPT": s, "CODESHIM_TRACE": trace}
    from conftest import run as run_cmd
    answer = tmp_path / "answer.json"  # curl starts the file again when it retries
    rc, out, err = run_cmd(["/usr/bin/curl", "--no-progress-meter", "--retry", "2", "-o", answer,
                            dead_url() + "/responses", "-H", "Content-Type: application/json",
                            "-d", json.dumps(body("go"))], env=cmd_env)
    assert rc == 0, err
    r = json.loads(answer.read_text())
    assert r["output"][-1]["content"][0]["text"] == "ok", r
    assert b"Will retry in 2 seconds" in err, err  # Retry-After, not curl's 1 s
    ups = [json.loads(l) for l in trace.read_text().splitlines()
           if json.loads(l)["event"] == "upstream"]
    assert [u["status"] for u in ups] == [429, 429, 200, 200]
    assert ups[-1]["source"] == "script %s #3" % s


def test_a_cut_stream(tmp_path):
    s = script(tmp_path, """
- run: "print('before the cut')"
- cut: true
""")
    rc, out, err = curl(dead_url() + "/responses", body("go", stream=True),
                        {"CODESHIM_SCRIPT": s}, stream=True)
    assert rc == 0, err
    names = [d["type"] for _, d in sse_json(out) if isinstance(d, dict)]
    assert "response.code_interpreter_call.completed" in names
    assert names[-2:] == ["error", "response.failed"], names
    assert "before the cut" in out.decode()


def test_a_bad_script_is_named_in_the_answer(tmp_path):
    cases = [
        ("- run: 1\n  colour: blue\n", "turn 1: unknown key \"colour\""),
        ("- say: hi\n- status: 200\n", "turn 2: status must be a whole number in 400..599"),
        ("- match: \"(\"\n  say: x\n", "turn 1: match:"),
        ("- {}\n", "turn 1: says nothing"),
        ("turns: [\n", "line "),
        ("- status: 500\n  say: also\n", "an error or a cut answers nothing else"),
    ]
    for i, (text, msg) in enumerate(cases):
        s = script(tmp_path, text, "s%d.yaml" % i)
        rc, out, err = curl(dead_url() + "/responses", body("go"), {"CODESHIM_SCRIPT": s})
        r = json.loads(out)
        assert r["error"]["code"] == "script_miss", r
        assert msg in r["error"]["message"], (msg, r)
        assert msg.encode() in err


def test_no_turn_left(tmp_path):
    s = script(tmp_path, "- match: never\n  say: x\n")
    rc, out, err = curl(dead_url() + "/responses", body("go"), {"CODESHIM_SCRIPT": s})
    msg = json.loads(out)["error"]["message"]
    assert "no turn is left for this request (1 turns" in msg and '"go"' in msg, msg
