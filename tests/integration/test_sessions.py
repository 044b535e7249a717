"""Sessions across requests and program runs, isolated per API key.

Every request here is a separate run of the curl CLI under codeshim, so
state that survives lives in a session supervisor (codeshim-sessiond), not
in a program. Each test gets its own runtime directory and stops every
supervisor it started."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, alive, run, wait_for

CURL = "/usr/bin/curl"


@pytest.fixture
def rt(tmp_path):
    d = tmp_path / "rt"
    yield d
    # stop what the test left running: session supervisors, session hosts,
    # the sandbox host
    for pidfile in (list(d.glob("*/*/pid")) + list(d.glob("*/hosts/*/pid")) +
                    list(d.glob("hosts/*/pid"))):
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except (ValueError, OSError):  # gone meanwhile
            pass


def ask(url, code, key="sk-alice", session="s1", rt=None, env=None, api="responses",
        extra=None, stderr=False, cwd=None):
    """One curl run asking the fake model to run `code`; returns the answer
    (and, with stderr=True, also codeshim's log text)."""
    text = "```python\n%s\n```" % code if code is not None else "Just say hi."
    if api == "responses":
        body = {"model": "m", "input": text,
                "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": text}],
                "tools": [{"type": "code_interpreter"}]}
    if session is not None:
        body["metadata"] = {"session_id": session}
    body.update(extra or {})
    e = {"CODESHIM_RUNTIME_DIR": rt}
    e.update(env or {})
    cmd = [CURL, "-sS", url + "/" + ("responses" if api == "responses" else "chat/completions"),
           "-H", "Content-Type: application/json", "-d", json.dumps(body)]
    if key:
        cmd[2:2] = ["-H", "Authorization: Bearer " + key]
    rc, out, err = run(cmd, env=e, cwd=cwd)
    assert rc == 0, err
    return (json.loads(out), err.decode()) if stderr else json.loads(out)


def calls(r):
    return [o for o in r["output"] if o["type"] == "code_interpreter_call"]


def logs(r):
    return "".join(o["logs"] for c in calls(r) for o in (c["outputs"] or []) if o["type"] == "logs")


def supervisors(rt, pattern="*/*/pid"):
    """pids of live session supervisors under rt (with pattern
    "hosts/*/pid": of the user's live sandbox hosts)."""
    out = []
    for pidfile in rt.glob(pattern):
        if pattern == "*/*/pid" and pidfile.parent.parent == rt / "hosts":
            continue  # the user's sandbox host (test_sandbox_host.py), no session's
        try:
            pid = int(pidfile.read_text())
            os.kill(pid, 0)
            out.append(pid)
        except (ValueError, ProcessLookupError, FileNotFoundError):
            pass
    return out


def test_state_survives_separate_program_runs(fake, rt):
    r1 = ask(fake.url, "x = 41", rt=rt)
    r2 = ask(fake.url, "print(x + 1)", rt=rt)
    assert logs(r2) == "42\n"
    # one container for the whole session
    assert calls(r1)[0]["container_id"] == calls(r2)[0]["container_id"]
    # session_id is consumed: the upstream never saw it, nor metadata
    for q in fake.requests():
        assert "metadata" not in q["body"]
        assert "session_id" not in q["raw"]


def test_files_survive_too(fake, rt):
    ask(fake.url, "open('notes.txt', 'w').write('kept')", rt=rt)
    r = ask(fake.url, "print(open('notes.txt').read())", rt=rt)
    assert logs(r) == "kept\n"


def test_other_api_key_never_shares(fake, rt):
    ask(fake.url, "x = 41", key="sk-alice", rt=rt)
    r = ask(fake.url, "print(x + 1)", key="sk-bob", rt=rt)
    assert "NameError" in logs(r)
    r = ask(fake.url, "print(x + 1)", key=None, rt=rt)  # no key: an identity of its own
    assert "NameError" in logs(r)
    r = ask(fake.url, "print(x + 1)", key="sk-alice", rt=rt)
    assert logs(r) == "42\n"


def test_no_session_id_sees_no_session_state(fake, rt):
    ask(fake.url, "x = 41", rt=rt)
    r = ask(fake.url, "print(x + 1)", session=None, rt=rt)
    assert "NameError" in logs(r)
    # and a request without a session gets a fresh sandbox each time
    ask(fake.url, "y = 1", session=None, rt=rt)
    r = ask(fake.url, "print(y)", session=None, rt=rt)
    assert "NameError" in logs(r)


def test_chat_completions_sessions(fake, rt):
    ask(fake.url, "z = 'chat'", rt=rt, api="chat")
    r = ask(fake.url, "print(z)", rt=rt, api="chat")
    assert "chat" in r["choices"][0]["message"]["content"]
    for q in fake.requests():
        assert "metadata" not in q["body"]  # emptied metadata is dropped


def test_other_metadata_forwarded(fake, rt):
    ask(fake.url, "1", rt=rt, extra={"metadata": {"session_id": "s1", "team": "blue"}})
    for q in fake.requests():
        assert q["body"]["metadata"] == {"team": "blue"}


def test_no_sandbox_until_code_runs(fake, rt):
    r = ask(fake.url, None, rt=rt)
    assert calls(r) == []
    assert not list(rt.glob("*/*/pid")) and supervisors(rt) == []


def test_cap_evicts_least_recently_used(fake, rt):
    env = {"CODESHIM_SESSION_CAP": "2"}
    for s in ("a", "b"):
        ask(fake.url, "v = %r" % s, session=s, rt=rt, env=env)
    # b's last use is the newest so far; make the order explicit in the
    # session dirs' times (what the LRU reads), whatever the clock's grain
    dirs = sorted(rt.glob("*/*/pid"), key=lambda p: p.parent.stat().st_mtime_ns)
    for i, d in enumerate(dirs):
        os.utime(d.parent, ns=(10**18 + i, 10**18 + i))
    ask(fake.url, "print(v)", session="a", rt=rt, env=env)  # a is now more recent than b
    ask(fake.url, "v = 'c'", session="c", rt=rt, env=env)   # evicts b
    assert len(supervisors(rt)) == 2
    assert logs(ask(fake.url, "print(v)", session="a", rt=rt, env=env)) == "a\n"
    assert logs(ask(fake.url, "print(v)", session="c", rt=rt, env=env)) == "c\n"
    # b was closed: asking it again starts afresh (and evicts the LRU again)
    assert "NameError" in logs(ask(fake.url, "print(v)", session="b", rt=rt, env=env))
    assert len(supervisors(rt)) == 2


def test_idle_session_closes_and_leaves_nothing(fake, rt):
    env = {"CODESHIM_SESSION_TTL": "2"}
    r = ask(fake.url, "import subprocess\np = subprocess.Popen(['sleep', '300.11'])\nprint(p.pid)",
            rt=rt, env=env)
    [pid] = supervisors(rt)
    [host] = supervisors(rt, "hosts/*/pid")
    assert wait_for(lambda: supervisors(rt) == [], timeout=10)
    assert not [s for s in rt.glob("*/*/sock") if s.parent.parent != rt / "hosts"]
    # the sandbox host, with no session and nothing lent left, ends as idle too
    assert wait_for(lambda: not alive(host), timeout=20)
    assert not [d for d in rt.glob("hosts/*") if d.is_dir()]
    # nothing of the session keeps running: no supervisor, no host, no
    # sandbox process (exited ones may linger as zombies where PID 1 does
    # not reap)
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    running = "\n".join(l for l in ps.splitlines()[1:] if l.split()[1][0] != "Z")
    assert str(rt) not in running
    assert not re.search(r"^\s*%d\s" % pid, running, re.M)
    assert "sleep 300.11" not in running
    # a later request in the same session starts fresh
    assert "NameError" in logs(ask(fake.url, "print(p)", rt=rt, env=env))


def test_concurrent_use_from_two_processes_loses_nothing(fake, rt):
    code = ("try:\n    L\nexcept NameError:\n    L = []\n"
            "import time\nn = len(L)\ntime.sleep(0.05)\nL.append((%r, n))\nprint(len(L))")
    ask(fake.url, "L = []", rt=rt)
    procs = []
    env = dict(os.environ, CODESHIM_RUNTIME_DIR=str(rt), LD_PRELOAD=str(REPO / "build/libcodeshim.so"))
    env.pop("OPENAI_API_KEY", None)
    for who in ("p", "q"):
        script = "; ".join(
            ["set -e"] + ["%s -sS %s/responses -H 'Authorization: Bearer sk-alice' -d %s >/dev/null" % (
                CURL, fake.url, shq(json.dumps({"model": "m", "metadata": {"session_id": "s1"},
                                                "input": "```python\n%s\n```" % (code % (who + str(i))),
                                                "tools": [{"type": "code_interpreter"}]})))
             for i in range(5)])
        procs.append(subprocess.Popen(["/bin/sh", "-c", script], env=env))
    assert [p.wait(60) for p in procs] == [0, 0]
    r = ask(fake.url, "print(sorted(t for t, n in L))\nprint(sorted(n for t, n in L))", rt=rt)
    tags, counts = logs(r).splitlines()
    assert eval(tags) == sorted(["p%d" % i for i in range(5)] + ["q%d" % i for i in range(5)])
    # serialised: every execution saw the list the previous one left
    assert eval(counts) == list(range(10))


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def test_container_reuse_and_expiry(fake, rt):
    """A client that replays an earlier code_interpreter_call (auto mode)
    gets that container back while it lives; once it has expired, a fresh
    sandbox is used and the model is told, instead of a broken conversation."""
    env = {"CODESHIM_SESSION_TTL": "2"}
    r1 = ask(fake.url, "w = 'still here'", rt=rt, env=env)
    item = calls(r1)[0]
    history = [{"role": "user", "content": "```python\nw = 'still here'\n```"}, item,
               {"role": "user", "content": "```python\nprint(w)\n```"}]
    r2 = ask(fake.url, None, session=None, rt=rt, env=env, extra={"input": history})
    assert logs(r2) == "still here\n"
    assert calls(r2)[0]["container_id"] == item["container_id"]
    # the upstream saw the history converted to function_call + output
    sent = fake.requests()[-2]["body"]["input"]
    assert [i.get("type") for i in sent[:3]] == [None, "function_call", "function_call_output"]
    assert wait_for(lambda: supervisors(rt) == [])  # the session expires (TTL 2 s)
    r3 = ask(fake.url, None, session=None, rt=rt, env=env, extra={"input": history})
    assert "has expired" in logs(r3) and "NameError" in logs(r3)
    assert calls(r3)[0]["container_id"] != item["container_id"]
    # the explicit form: tools[].container naming the container id
    r4 = ask(fake.url, "print(1)", session=None, rt=rt, env=env,
             extra={"tools": [{"type": "code_interpreter", "container": item["container_id"]}]})
    assert "has expired" in logs(r4)


def test_runtime_dir_is_private_and_reveals_nothing(fake, rt):
    ask(fake.url, "1", key="sk-VERYSECRET", session="my-session-name", rt=rt)
    assert oct(rt.stat().st_mode & 0o777) == "0o700"
    for p in rt.rglob("*"):
        assert "VERYSECRET" not in str(p) and "my-session-name" not in str(p)
        if p.is_file():
            assert b"VERYSECRET" not in p.read_bytes()
            assert b"my-session-name" not in p.read_bytes()
        if p.is_dir():
            assert p.stat().st_mode & 0o077 == 0


def test_unsafe_runtime_dir_refused(fake, rt):
    rt.mkdir(mode=0o755)
    os.chmod(rt, 0o755)  # others could enter: sessions must not be used
    r = ask(fake.url, "x = 1", rt=rt)  # and the program is told (test_runtime.py)
    assert r["error"]["code"] == "codeshim_runtime_dir" and str(rt) in r["error"]["message"]
    assert supervisors(rt) == []


XOAUTH = r"""
import io, json, sys, pycurl
url, key, code = sys.argv[1], sys.argv[2], sys.argv[3]
b = io.BytesIO()
c = pycurl.Curl()
c.setopt(c.URL, url + "/responses")
c.setopt(c.HTTPAUTH, 1 << 6)  # CURLAUTH_BEARER (no pycurl constant in 7.45)
c.setopt(c.XOAUTH2_BEARER, key)
c.setopt(c.POSTFIELDS, json.dumps({"model": "m", "metadata": {"session_id": "s1"},
    "input": "```python\n%s\n```" % code, "tools": [{"type": "code_interpreter"}]}))
c.setopt(c.WRITEFUNCTION, b.write)
c.perform()
r = json.loads(b.getvalue())
print("".join(o["logs"] for i in r["output"] if i["type"] == "code_interpreter_call"
              for o in i["outputs"]), end="")
"""


def test_identity_from_xoauth2_bearer(fake, rt):
    """A key given with CURLOPT_XOAUTH2_BEARER (not a header) separates
    sessions too; the same key sent as a header reaches the same session."""
    def via_option(key, code):
        rc, out, err = run(["/usr/bin/python3", "-c", XOAUTH, fake.url, key, code],
                           env={"CODESHIM_RUNTIME_DIR": rt})
        assert rc == 0, err
        return out.decode()
    via_option("sk-carol", "x = 41")
    assert via_option("sk-carol", "print(x + 1)") == "42\n"
    assert "NameError" in via_option("sk-dave", "print(x + 1)")
    assert logs(ask(fake.url, "print(x + 1)", key="sk-carol", rt=rt)) == "42\n"
    assert fake.requests()[0]["headers"]["authorization"] == "Bearer sk-carol"
