"""The e2b sandbox backend (CODESHIM_SANDBOX=e2b) against a fake
e2b on loopback (tests/fakes/fake_e2b.py): the Responses and Chat loops,
streaming and not, both host forms (shared host; per-port hosts over TLS
with the program's CA), what e2b received, every error of the issue, images,
the execution timeout, and that no key or token leaks."""

import json
import os
import re
import socket
import subprocess

import pytest

import schema_check
from conftest import REPO, sse_json, wait_for
from e2b_helpers import (KEY, ask, calls, chat_text, e2b, e2b_tls, env_for,  # noqa: F401
                         final_response, logs, of)

CODE = "x = 41\nprint('hello from e2b')\nx + 1"


def check_create(e):
    (c,) = of(e, "POST", "/sandboxes")
    b = c["body"]
    assert c["headers"]["x-api-key"] == KEY
    assert b["templateID"] == "code-interpreter-v1"
    assert b["secure"] is True and b["allow_internet_access"] is False
    assert isinstance(b["timeout"], int) and b["timeout"] > 0
    assert isinstance(b["metadata"], dict)
    return c


def check_executes(e, n):
    ex = of(e, "POST", "/execute")
    assert len(ex) == n
    (sid,) = {r["sandbox"][1] for r in ex}
    token = e.sandboxes()[sid]["token"] if sid in e.sandboxes() else None
    for r in ex:
        assert r["body"]["code"]
        assert "x-api-key" not in r["headers"]  # the key goes to the control plane only
        assert "authorization" not in r["headers"]  # nor the program's OpenAI key
        if token:
            assert r["headers"]["x-access-token"] == token
    return sid


@pytest.mark.parametrize("stream", [False, True])
def test_responses_loop_on_e2b(fake, e2b, stream):
    out, _ = ask(fake.url, CODE, env_for(e2b), stream=stream)
    if stream:
        schema_check.validate_sse_responses(sse_json(out))
    r = final_response(out, stream)
    schema_check.validate(r, "Response")
    assert r["status"] == "completed"
    (c,) = calls(r)
    assert c["status"] == "completed"
    assert logs(r) == "hello from e2b\n42\n"
    check_create(e2b)
    sid = check_executes(e2b, 1)
    (d,) = of(e2b, "DELETE", "/sandboxes/")
    assert d["path"] == "/sandboxes/" + sid  # a request's sandbox is killed at its end
    assert e2b.sandboxes() == {}
    # the upstream never hears of e2b
    for q in fake.requests():
        assert KEY not in q["raw"] and "e2b" not in json.dumps(q["headers"])


@pytest.mark.parametrize("stream", [False, True])
def test_chat_loop_on_e2b(fake, e2b, stream):
    out, _ = ask(fake.url, CODE, env_for(e2b), api="chat", stream=stream)
    if stream:
        for _, ch in sse_json(out):
            if isinstance(ch, dict):
                schema_check.validate_chat_chunk(ch)
    else:
        schema_check.validate(json.loads(out), "CreateChatCompletionResponse")
    assert "hello from e2b\n42" in chat_text(out, stream)
    check_create(e2b)
    check_executes(e2b, 1)
    assert len(of(e2b, "DELETE", "/sandboxes/")) == 1


def test_per_port_host_over_tls_with_the_programs_ca(fake, e2b_tls):
    """https://49999-<id>.<domain> with the CA file the program gave curl
    (--cacert): the program's CA applies to codeshim's own calls."""
    out, _ = ask(fake.url, CODE, env_for(e2b_tls, tls=True),
                 curl_args=("--cacert", str(e2b_tls.ca)))
    r = json.loads(out)
    assert logs(r) == "hello from e2b\n42\n", r
    (x,) = of(e2b_tls, "POST", "/execute")
    assert x["conn"].endswith("/tls")
    assert re.match(r"^49999-[A-Za-z0-9]+\.e2b\.localhost:%d$" % e2b_tls.tls_port, x["host"])


def test_domain_alone_gives_both_planes_as_in_the_cloud(fake, e2b_tls):
    """Only E2B_DOMAIN (and the key) set, as for e2b's cloud: the control
    plane is https://api.<domain>, the sandbox https://49999-<id>.<domain>."""
    env = env_for(e2b_tls, tls=True, E2B_API_URL=None)
    out, _ = ask(fake.url, CODE, env, curl_args=("--cacert", str(e2b_tls.ca)))
    assert logs(json.loads(out)) == "hello from e2b\n42\n"
    (c,) = of(e2b_tls, "POST", "/sandboxes")
    assert c["conn"].endswith("/tls") and c["host"] == "api." + e2b_tls.domain
    assert all(r["conn"].endswith("/tls") for r in e2b_tls.requests())


def test_shared_host_over_tls_routes_by_headers(fake, e2b_tls):
    """CODESHIM_E2B_SANDBOX_URL=https://sandbox.<domain>: the proxy routes by
    the E2b-Sandbox-Id/-Port headers there (its host.go)."""
    env = env_for(e2b_tls, tls=True, CODESHIM_E2B_SANDBOX_URL="https://sandbox." + e2b_tls.domain)
    out, _ = ask(fake.url, CODE, env, curl_args=("--cacert", str(e2b_tls.ca)))
    assert logs(json.loads(out)) == "hello from e2b\n42\n"
    (x,) = of(e2b_tls, "POST", "/execute")
    assert x["conn"].endswith("/tls") and x["host"] == "sandbox." + e2b_tls.domain
    assert x["headers"]["e2b-sandbox-port"] == "49999" and x["sandbox"][1] in x["headers"][
        "e2b-sandbox-id"]


def test_per_port_host_without_the_ca_is_a_tool_error(fake, e2b_tls):
    out, _ = ask(fake.url, CODE, env_for(e2b_tls, tls=True))
    r = json.loads(out)
    assert r["status"] == "completed"
    (c,) = calls(r)
    assert c["status"] == "failed"
    assert "e2b sandbox stopped answering" in logs(r) or "could not be reached" in logs(r)
    assert of(e2b_tls, "POST", "/execute") == []  # TLS refused: nothing reached it


def test_two_executions_share_one_connection(fake, e2b):
    out, _ = ask(fake.url, "a = 1", env_for(e2b), blocks=["a = 1", "print(a + 1)"])
    r = json.loads(out)
    assert logs(r) == "2\n"
    ex = of(e2b, "POST", "/execute")
    assert len(ex) == 2 and ex[0]["conn"] == ex[1]["conn"]
    assert len(of(e2b, "POST", "/sandboxes")) == 1


@pytest.mark.parametrize("session", [None, "s1"])
def test_no_e2b_call_when_the_model_runs_no_code(fake, e2b, session, tmp_path):
    out, _ = ask(fake.url, None, env_for(e2b, CODESHIM_RUNTIME_DIR=tmp_path / "rt"),
                 session=session)
    assert json.loads(out)["status"] == "completed"
    assert e2b.requests() == []


def test_error_traceback_and_image(fake, e2b):
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3])\nprint('plotted')")
    out, _ = ask(fake.url, code, env_for(e2b), blocks=[code, "1/0"])
    r = json.loads(out)
    c1, c2 = calls(r)
    imgs = [o for o in c1["outputs"] if o["type"] == "image"]
    assert len(imgs) == 1 and imgs[0]["url"].startswith("data:image/png;base64,iVBOR")
    assert "plotted" in c1["outputs"][0]["logs"]
    assert "[image produced: figure 1 (PNG)]" in c1["outputs"][0]["logs"]
    assert c2["status"] == "completed"  # the code raised: still a completed call
    tb = c2["outputs"][0]["logs"]
    assert "ZeroDivisionError: division by zero" in tb and "\x1b" not in tb


def test_wrong_key_is_a_clear_tool_error(fake, e2b):
    env = env_for(e2b, E2B_API_KEY="e2b_wrong_key_000000")
    out, _ = ask(fake.url, CODE, env)
    r = json.loads(out)
    assert r["status"] == "completed"
    assert "refused the API key" in logs(r) and "HTTP 401" in logs(r)
    assert "e2b_wrong_key_000000" not in out.decode()


def test_bad_access_token_is_a_tool_error(fake, e2b):
    e2b.fail("POST", r"^/execute$", 401, times=1, body={"message": "invalid access token",
                                                      "code": 401})
    r = json.loads(ask(fake.url, CODE, env_for(e2b))[0])
    assert r["status"] == "completed"
    assert "refused its access token (HTTP 401)" in logs(r)
    assert len(of(e2b, "POST", "/execute")) == 1


def test_missing_key_makes_no_call(fake, e2b):
    env = env_for(e2b, E2B_API_KEY=None)
    out, _ = ask(fake.url, CODE, env)
    assert "no e2b API key is set" in logs(json.loads(out))
    assert e2b.requests() == []


def test_rate_limit_is_waited_out(fake, e2b):
    e2b.rate_limited = 2  # the rate limiter's 429s, with Retry-After: 1
    out, _ = ask(fake.url, CODE, env_for(e2b))
    assert logs(json.loads(out)) == "hello from e2b\n42\n"
    assert len(of(e2b, "POST", "/sandboxes")) == 3


def test_rate_limit_without_end_is_a_tool_error(fake, e2b):
    # a Retry-After beyond codeshim's bound (10 s per call) is not waited for
    e2b.fail("POST", r"^/sandboxes$", 429, times=100, retry_after=11)
    out, _ = ask(fake.url, CODE, env_for(e2b))
    r = json.loads(out)
    assert r["status"] == "completed"
    assert "rate-limiting" in logs(r) and "429" in logs(r)
    assert len(of(e2b, "POST", "/sandboxes")) == 1


def test_concurrency_limit_is_said_and_not_waited_for(fake, e2b, tmp_path):
    """The concurrency limit's 429 has no Retry-After (the rate limiter's
    has): it is not retried, and the model hears which limit it was."""
    e2b.max_concurrent = 1
    ask(fake.url, "a = 1", env_for(e2b, CODESHIM_RUNTIME_DIR=tmp_path / "rt"), session="s1")
    assert len(e2b.sandboxes()) == 1
    e2b.clear()
    r = json.loads(ask(fake.url, CODE, env_for(e2b))[0])
    assert r["status"] == "completed"
    text = logs(r)
    assert "limit on this team's concurrent sandboxes" in text, text
    assert "maximum number of concurrent E2B sandboxes (1)" in text
    assert "rate-limiting" not in text
    assert len(of(e2b, "POST", "/sandboxes")) == 1


def test_server_error_is_a_tool_error(fake, e2b):
    e2b.fail("POST", r"^/sandboxes$", 503, times=5,
             body={"code": 503, "message": "no capacity", "error_code":
                   "sandbox_capacity_unavailable"})
    out, _ = ask(fake.url, CODE, env_for(e2b))
    r = json.loads(out)
    assert r["status"] == "completed"
    assert "HTTP 503" in logs(r) and "no capacity" in logs(r)


def test_unreachable_e2b_is_a_tool_error(fake, e2b):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    out, _ = ask(fake.url, CODE, env_for(e2b, E2B_API_URL="http://127.0.0.1:%d" % port))
    r = json.loads(out)
    assert r["status"] == "completed"
    assert "could not be reached" in logs(r)


def test_502_just_after_create_is_retried(fake, e2b):
    e2b.exec_502_after_create = 2
    out, _ = ask(fake.url, CODE, env_for(e2b))
    assert logs(json.loads(out)) == "hello from e2b\n42\n"
    # the first cell after create (codeshim's own, making /mnt/data) meets
    # the 502s and is retried; the model's code then runs once
    ex = of(e2b, "POST", "/execute", own=True)
    assert [r["body"]["code"].startswith("# codeshim: the working") for r in ex[:3]] == [True] * 3
    assert len(of(e2b, "POST", "/execute")) == 1
    assert len(of(e2b, "POST", "/sandboxes")) == 1


def test_truncated_stream_is_a_failed_call(fake, e2b):
    e2b.truncate_next_exec = True
    out, _ = ask(fake.url, CODE, env_for(e2b))
    r = json.loads(out)
    assert r["status"] == "completed"
    (c,) = calls(r)
    assert c["status"] == "failed"
    assert "ended before the execution did" in logs(r)
    assert len(of(e2b, "POST", "/execute")) == 1  # not sent again


def test_vanished_sandbox_mid_request_is_replaced(fake, e2b):
    e2b.vanish_after_exec = True
    code2 = "print(globals().get('a', 'gone'))"
    out, _ = ask(fake.url, "a = 5", env_for(e2b), blocks=["a = 5", code2])
    r = json.loads(out)
    c1, c2 = calls(r)
    text = c2["outputs"][0]["logs"]
    assert "had ended" in text and "variables, imports and files are gone" in text
    assert text.endswith("gone\n")
    assert len(of(e2b, "POST", "/sandboxes")) == 2
    assert len(of(e2b, "POST", "/execute")) == 3  # sent again only after the 502
    assert e2b.sandboxes() == {}  # the replacement was killed at the end too


def test_execution_timeout_interrupts_and_restarts(fake, e2b):
    e2b.keepalive_s = 0.2
    out, _ = ask(fake.url, "import time\ntime.sleep(30)", env_for(e2b, CODESHIM_EXEC_TIMEOUT=1))
    r = json.loads(out)
    (c,) = calls(r)
    assert c["status"] == "incomplete"
    assert "timed out after 1 s" in logs(r)
    assert "ended before the execution did" not in logs(r)
    assert e2b.restarts == 1
    assert wait_for(lambda: e2b.disconnects >= 1)
    assert of(e2b, "POST", "/contexts/")


def test_working_directory_is_mnt_data_again_after_a_timeout(fake, e2b):
    """e2b's context restart gives a new kernel in /home/user and runs no
    set-up (e2b-dev/code-interpreter template/server/main.py): codeshim
    makes /mnt/data the working directory again before the next code, so
    relative writes are listed and can be downloaded."""
    e2b.keepalive_s = 0.2
    slow = "import time\nfor _ in range(3000):\n    time.sleep(0.01)"
    after = "import os\nprint(os.getcwd())\nopen('rel.txt', 'w').write('x')"
    out, _ = ask(fake.url, slow, env_for(e2b, CODESHIM_EXEC_TIMEOUT=1), blocks=[slow, after])
    r = json.loads(out)
    c1, c2 = calls(r)
    assert c1["status"] == "incomplete" and e2b.restarts == 1
    text = c2["outputs"][0]["logs"]
    assert text.startswith("/mnt/data\n"), text
    assert "[files in /mnt/data: rel.txt]" in text, text


def test_output_is_capped(fake, e2b):
    code = "for i in range(20000):\n    print('line %05d' % i)"
    out, _ = ask(fake.url, code, env_for(e2b, CODESHIM_OUTPUT_CAP=2000))
    text = logs(json.loads(out))
    assert len(text) <= 2100
    assert "line 00000" in text and "line 19999" in text and "truncated" in text


def test_no_secret_in_logs_traces_recordings_or_upstream(fake, e2b, tmp_path):
    trace, rec = tmp_path / "trace.jsonl", tmp_path / "rec"
    env = env_for(e2b, CODESHIM_LOG="debug", CODESHIM_TRACE=trace, CODESHIM_RECORD=rec)
    code = "import os\nprint(sorted(k for k in os.environ if 'E2B' in k or 'CODESHIM' in k))"
    out, err = ask(fake.url, code, env, blocks=[code, "print(1)"])
    tokens = [r["headers"]["x-access-token"] for r in of(e2b, "POST", "/execute")]
    assert tokens and all(tokens)
    texts = [out.decode(), err, trace.read_text()]
    texts += [p.read_text() for p in rec.rglob("*") if p.is_file()]
    texts += [q["raw"] + json.dumps(q["headers"]) for q in fake.requests()]
    for q in e2b.requests():  # and e2b never gets the program's OpenAI key
        assert "sk-alice" not in q["raw"] + json.dumps(q["headers"])
    for t in texts:
        assert KEY not in t
        for tok in tokens:
            assert tok not in t
    ev = [json.loads(l) for l in trace.read_text().splitlines()]
    ex = [x for x in ev if x["event"] == "exec"]
    assert len(ex) == 2
    assert ex[0]["e2b_create_seconds"] > 0 and ex[1]["e2b_create_seconds"] == 0
    assert all(x["e2b_execute_seconds"] > 0 for x in ex)
    p = subprocess.run([str(REPO / "build" / "codeshim"), "trace", str(trace)],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert re.search(r"e2b +create 1 \(\d+\.\d+s\)  execute 2 \(\d+\.\d+s\)", p.stdout), p.stdout
    assert "total e2b: create 1" in p.stdout
