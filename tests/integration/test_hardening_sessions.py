"""Sessions and identity, part 1: session hardening.

Every request is a separate run of the curl CLI (or of a small pycurl
program) under codeshim, as in test_sessions.py, whose helpers these tests
reuse. Each test gets its own runtime directory and stops every supervisor
it started."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import LIB, REPO, clean_env, run, wait_for
from test_sessions import CURL, ask, calls, logs, rt, supervisors  # noqa: F401 (rt: fixture)

UNSAFE = {"CODESHIM_UNSAFE_NO_ISOLATION": "1"}
HOST_INIT = Path("/proc/1/cmdline").read_bytes()[:64]
# What the code sees of its surroundings: hostname, uid, the start of PID
# 1's command line (the host's init, or the sandbox's supervisor).
PROBE = ("import os, socket\n"
         "print('probe', socket.gethostname(), os.getuid(), "
         "open('/proc/1/cmdline', 'rb').read()[:64] == %r)\n" % HOST_INIT)


def probe(r):
    """(hostname, uid, sees the host's init) from PROBE's line in r."""
    for line in logs(r).splitlines():
        if line.startswith("probe "):
            _, host, uid, init = line.split()
            return host, int(uid), init == "True"
    raise AssertionError("no probe line in %r" % logs(r))


def isolated(r):
    host, uid, host_init = probe(r)
    return host == "sandbox" and not host_init


# ---- 1. a session is reused only under the settings it was made with ----

def test_unisolated_session_never_serves_an_isolated_run(fake, rt, tmp_path):
    marker = tmp_path / "marker"
    r1 = ask(fake.url, PROBE + "x = 1\nopen(%r, 'w').write('host')" % str(marker),
             session="s", rt=rt, env=UNSAFE)
    assert marker.read_text() == "host" and not isolated(r1)  # run 1 ran on the host
    r2 = ask(fake.url, PROBE + "print(os.path.exists(%r))\nprint(x)" % str(marker),
             session="s", rt=rt)
    assert isolated(r2), logs(r2)
    assert "False\n" in logs(r2) and "NameError" in logs(r2)
    assert calls(r2)[0]["container_id"] != calls(r1)[0]["container_id"]
    # both sessions live on, each with its own state
    assert logs(ask(fake.url, "print(x)", session="s", rt=rt, env=UNSAFE)) == "1\n"
    assert len(supervisors(rt)) == 2


def test_other_memory_limit_gets_a_session_of_its_own(fake, rt):
    ask(fake.url, "x = 1", session="s", rt=rt, env={"CODESHIM_MEMORY": "512M"})
    r = ask(fake.url, "print(x)", session="s", rt=rt, env={"CODESHIM_MEMORY": "768M"})
    assert "NameError" in logs(r)
    r = ask(fake.url, "print(x)", session="s", rt=rt, env={"CODESHIM_MEMORY": "512M"})
    assert logs(r) == "1\n"


def test_container_made_under_other_settings_is_not_attached(fake, rt):
    r1 = ask(fake.url, "x = 1", session="s", rt=rt, env=UNSAFE)
    item = calls(r1)[0]
    cid = item["container_id"]
    # the explicit form: tools[].container naming the container id gets
    # that container (its files), in a sandbox of these settings, told so
    r2 = ask(fake.url, PROBE + "print(x)", session=None, rt=rt,
             extra={"tools": [{"type": "code_interpreter", "container": cid}]})
    assert isolated(r2) and "NameError" in logs(r2)
    assert "started with other sandbox settings" in logs(r2)
    # the auto form: an earlier code_interpreter_call replayed in the input
    history = [{"role": "user", "content": "```python\nx = 1\n```"}, item,
               {"role": "user", "content": "```python\n%s\nprint(x)\n```" % PROBE}]
    r3 = ask(fake.url, None, session=None, rt=rt, extra={"input": history})
    assert isolated(r3) and "NameError" in logs(r3)
    # it finds the sandbox r2 started for the container under these settings
    assert calls(r3)[0]["container_id"] == cid


# ---- 2. a session's execution never runs twice ----

@pytest.fixture(scope="module")
def small_frame_sessiond(tmp_path_factory):
    """codeshim-sessiond built with a 1 MiB frame limit (SHIM_PROTO_MAX), so
    that a result larger than a frame is cheap to produce."""
    out = tmp_path_factory.mktemp("sessiond") / "codeshim-sessiond"
    core = REPO / "build" / "libcodeshim_core.a"
    if not core.exists():
        pytest.fail("%s is missing: run `make` first" % core)
    libs = subprocess.run(["make", "-s", "--no-print-directory", "print-libs"], cwd=REPO,
                          check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-Ishim",
                    "-DSHIM_PROTO_MAX=(1u<<20)"] + sorted(str(p) for p in (REPO / "sessiond").glob("*.c")) +
                   ["shim/session/proto.c", str(core)] + libs + ["-o", str(out)],
                   cwd=REPO, check=True)
    return out


BIG = ("with open('runs.txt', 'a') as f:\n    f.write('run\\n')\n"
       "import matplotlib\nmatplotlib.use('Agg')\n"
       "import matplotlib.pyplot as plt, numpy as np\n"
       "plt.imshow(np.random.default_rng(1).random((500, 500, 3)))\n"
       "print('y' * 3000000)\nprint('the end')")


def test_result_over_the_frame_limit_is_truncated_and_runs_once(fake, rt, small_frame_sessiond):
    env = {"CODESHIM_SESSIOND": small_frame_sessiond, "CODESHIM_OUTPUT_CAP": "4000000"}
    r = ask(fake.url, BIG, rt=rt, env=env)
    [c] = calls(r)
    out = logs(r)
    assert "too large for the session channel" in out, out[-2000:]
    assert out.startswith("y" * 1000) and "the end" in out  # head and tail kept
    assert "1 of 1 image" in out  # the figure was left out, and the model is told
    assert [o["type"] for o in c["outputs"]] == ["logs"]
    assert c["status"] == "completed"
    r = ask(fake.url, "print(len(open('runs.txt').read().splitlines()))", rt=rt, env=env)
    assert logs(r) == "1\n"  # the code ran exactly once




def test_supervisor_lost_during_execution_is_not_run_again(fake, rt, tmp_path):
    """Only a failure to reach the supervisor is retried: once the code is
    sent, a lost supervisor is reported, never answered by a second run."""
    runs = tmp_path / "runs"  # on the host: the sandbox is unisolated here
    code = "open(%r, 'a').write('run\\n')\nimport time\ntime.sleep(8)\nprint('done')" % str(runs)
    body = {"model": "m", "input": "```python\n%s\n```" % code, "metadata": {"session_id": "k"},
            "tools": [{"type": "code_interpreter"}]}
    env = clean_env(dict(UNSAFE, CODESHIM_RUNTIME_DIR=rt))
    p = subprocess.Popen([CURL, "-sS", fake.url + "/responses", "-H", "Authorization: Bearer sk-k",
                          "-d", json.dumps(body)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: runs.exists() and runs.read_text() == "run\n")
        [pid] = supervisors(rt)
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    r = json.loads(out)
    text = logs(r) + json.dumps([o for o in r["output"] if o["type"] == "message"])
    assert runs.read_text() == "run\n"  # never a second run
    assert calls(r)[0]["status"] == "failed"
    assert "was not run again" in json.dumps(fake.requests()[-1]["body"]["input"])
    assert "done" not in text
    assert set(supervisors(rt)) <= {pid}  # no new session for it (a zombie may linger)


# ---- 4. a runtime directory taken by someone else ----
# (the defaults no other user can take, and a refusal the program
# sees instead of a private sibling: test_runtime.py)


# ---- 5. codeshim-sessiond is found from the library's real path ----

CHDIR_PROG = r"""
import io, json, os, sys, pycurl
url, where = sys.argv[1], sys.argv[2]
os.chdir(where)  # after start-up, before the first session request
def ask(code):
    b = io.BytesIO()
    c = pycurl.Curl()
    c.setopt(c.URL, url + "/responses")
    c.setopt(c.HTTPHEADER, ["Authorization: Bearer sk-cd", "Content-Type: application/json"])
    c.setopt(c.POSTFIELDS, json.dumps({"model": "m", "metadata": {"session_id": "cd"},
        "input": "```python\n%s\n```" % code, "tools": [{"type": "code_interpreter"}]}))
    c.setopt(c.WRITEFUNCTION, b.write)
    c.perform()
    r = json.loads(b.getvalue())
    return "".join(o["logs"] for i in r["output"] if i["type"] == "code_interpreter_call"
                   for o in i["outputs"])
ask("x = 41")
print(ask("print(x + 1)"), end="")
"""


@pytest.mark.parametrize("sessiond", [None, "build/codeshim-sessiond"])
def test_sessiond_never_found_relative_to_the_current_directory(fake, rt, tmp_path, sessiond):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "build").mkdir(parents=True)
    marker = tmp_path / "fake-sessiond-ran"
    fake_sd = elsewhere / "build" / "codeshim-sessiond"
    fake_sd.write_text("#!/bin/sh\necho ran > %s\nexit 1\n" % marker)
    fake_sd.chmod(0o755)
    rel = os.path.relpath(LIB, REPO)
    assert not os.path.isabs(rel)
    env = {"LD_PRELOAD": rel, "CODESHIM_RUNTIME_DIR": rt, "CODESHIM_SESSIOND": sessiond}
    rc, out, err = run(["/usr/bin/python3", "-c", CHDIR_PROG, fake.url, elsewhere],
                       env=env, cwd=REPO)
    assert rc == 0, err
    assert not marker.exists()
    assert out.decode() == "42\n", err
    if sessiond:  # a relative CODESHIM_SESSIOND is refused, and the log says why
        assert "CODESHIM_SESSIOND" in err.decode()


def test_supervisor_refuses_other_settings(tmp_path):
    """codeshim-sessiond starts only under the settings its session is
    named after (here: a fingerprint no configuration has)."""
    d = tmp_path / "sess"
    d.mkdir(mode=0o700)
    for args in ([d, "0" * 32, "0" * 16],  # the sandbox host
                 ["--session", d, "0" * 32, "60", "-", "0"],  # a session's supervisor
                 ["--session-alone", d, "0" * 32, "60", "-", "0"]):
        p = subprocess.run([REPO / "build" / "codeshim-sessiond"] + args,
                           env=clean_env(preload=False), capture_output=True, timeout=30)
        assert p.returncode == 1, args
        assert b"settings" in p.stderr, p.stderr
        assert not (d / "sock").exists() and not (d / "pid").exists()
