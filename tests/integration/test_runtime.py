"""The runtime directory, session hosts and per-user caps.

1. The default runtime directory is one no other user can take
   (/run/codeshim for root, $XDG_RUNTIME_DIR/codeshim when it is the
   user's own, else ~/.cache/codeshim/run); one that is not private is
   refused, never swapped, and what needs it answers why.
2. A session host that ends removes only the files it made itself, never
   those of a successor started meanwhile.
3. `codeshim sessions` lists the user's hosts and sessions (identity
   prefix, never a key) and `codeshim sessions stop ID|--all` ends them.
4. Caps per user (per runtime directory) that no number of invented API
   keys can exceed: live sessions, session hosts, container file bytes;
   the program gets an OpenAI-shaped error answer.

Every request is a separate run of the curl CLI under codeshim, as in
test_sessions.py, whose helpers these tests reuse; each test stops the
supervisors and hosts it started."""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

import schema_check
from conftest import REPO, alive, parse_sse, run, stop_supervisors, wait_for
from test_sessions import CURL, calls, logs, rt, supervisors  # noqa: F401 (rt: fixture)

HOSTS = "hosts/*/pid"  # the user's sandbox host
UNSAFE = {"CODESHIM_UNSAFE_NO_ISOLATION": "1"}
LIGHT = {"CODESHIM_FORK_SERVER": "0"}  # no host: each session alone, cold


def body_for(code, session="s1", stream=False, extra=None):
    b = {"model": "m", "input": "```python\n%s\n```" % code,
         "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
    if session is not None:
        b["metadata"] = {"session_id": session}
    if stream:
        b["stream"] = True
    b.update(extra or {})
    return b


def curl_args(url, body, key):
    return [CURL, "-sS", "-w", "\n%{http_code}", url + "/responses",
            "-H", "Authorization: Bearer " + key, "-H", "Content-Type: application/json",
            "-d", json.dumps(body)]


def split(out):
    text, _, code = out.rpartition(b"\n")
    return int(code), text


def ask(url, code, key="sk-rt", session="s1", rt=None, env=None, extra=None, stream=False):
    """(HTTP status, answer as JSON, or SSE text when stream) of one run."""
    e = {"CODESHIM_RUNTIME_DIR": rt}
    e.update(env or {})
    rc, out, err = run(curl_args(url, body_for(code, session, stream, extra), key), env=e)
    assert rc == 0, err
    status, text = split(out)
    return status, (text.decode() if stream else json.loads(text))


def failed_stream(status, text):
    """The error event of a schema-checked stream that ended in
    response.failed."""
    assert status == 200, text
    events = parse_sse(text)
    schema_check.validate_sse_responses(events)
    last = json.loads(events[-1][1])
    assert last["type"] == "response.failed", last
    [err] = [json.loads(d) for _, d in events if json.loads(d)["type"] == "error"]
    assert err["message"] == last["response"]["error"]["message"]
    return err  # its code is codeshim's (the Response's own error says server_error)


def error_of(status, body, want):
    assert status == want, (status, body)
    schema_check.validate(body, "ErrorResponse")
    return body["error"]


def other_user():
    if os.geteuid() != 0:
        pytest.skip("needs root: another user is played by codeshim-test through runuser")
    if not os.path.exists("/usr/sbin/runuser"):
        pytest.skip("runuser (util-linux) is not installed")
    from test_sandbox_escape import TEST_USER, _ensure_user
    return TEST_USER, _ensure_user()


def as_user(user, *cmd, env=None):
    """cmd run as user with exactly env (runuser itself would reset HOME)."""
    env = env or {"PATH": "/usr/bin:/bin"}
    return subprocess.run(["/usr/sbin/runuser", "-u", user, "--", "/usr/bin/env", "-i"] +
                          ["%s=%s" % kv for kv in env.items()] + [str(c) for c in cmd],
                          env=env, capture_output=True, timeout=120)


@pytest.fixture
def shared():
    """A directory like /tmp: anyone may create in it (sticky)."""
    d = Path(tempfile.mkdtemp(prefix="codeshim-shared-"))
    os.chmod(d, 0o1777)
    yield d
    stop_supervisors(d)
    shutil.rmtree(d, ignore_errors=True)


# ---- 1. the default runtime directory ----

def test_another_user_cannot_turn_roots_sessions_off(fake, shared):
    """Before: root's default was ${TMPDIR:-/tmp}/codeshim-0, else a private
    sibling .1 to .16; another user who made all of them first turned
    root's sessions off. Now root's default is /run/codeshim."""
    user, pw = other_user()
    taken = [shared / "codeshim-0"] + [shared / ("codeshim-0.%d" % i) for i in range(1, 17)]
    p = as_user(user, "/bin/mkdir", "-m", "0777", *taken)
    assert p.returncode == 0, p.stderr
    assert all(t.stat().st_uid == pw.pw_uid for t in taken)
    key = "sk-rt-" + uuid.uuid4().hex  # its own identity in the shared /run/codeshim
    env = {"CODESHIM_RUNTIME_DIR": None, "TMPDIR": shared, "XDG_RUNTIME_DIR": shared}
    run_dir = Path("/run/codeshim")
    existed = run_dir.exists()
    before = set(run_dir.iterdir()) if existed else set()
    try:
        st, r = ask(fake.url, "x = 41", key=key, env=env)
        assert st == 200
        st, r = ask(fake.url, "print(x + 1)", key=key, env=env)
        assert st == 200 and logs(r) == "42\n"  # the session survived across runs
        s = run_dir.stat()
        assert s.st_uid == 0 and s.st_mode & 0o777 == 0o700
        mine = set(run_dir.iterdir()) - before
        assert [p for d in mine for p in d.glob("*/pid")]
        assert not any(any(t.iterdir()) for t in taken)  # nothing of root's went there
    finally:
        mine = [d for d in set(run_dir.iterdir()) - before if d.name != "containers"] \
            if run_dir.exists() else []
        for d in mine:
            stop_supervisors(d)
        assert wait_for(lambda: not any(running_from(d) for d in mine))
        for d in mine:  # this test's identity: nothing of it is left in /run/codeshim
            shutil.rmtree(d, ignore_errors=True)
        if not existed:  # nor the directory, when this test made it
            shutil.rmtree(run_dir, ignore_errors=True)


def user_build(pw):
    """The library and the session host copied where codeshim-test can
    read them (the build may be private to root)."""
    d = Path(tempfile.mkdtemp(prefix="codeshim-user-"))
    os.chmod(d, 0o755)
    for f in ("libcodeshim.so", "codeshim-sessiond"):
        shutil.copy(REPO / "build" / f, d / f)
    home = d / "home"
    home.mkdir()
    os.chown(home, pw.pw_uid, pw.pw_gid)
    return d, home


def running_from(d):
    """Processes whose command line names d (the hosts of a user_build)."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and str(d).encode() in Path("/proc/%s/cmdline" % pid).read_bytes():
                out.append(int(pid))
        except OSError:
            pass
    return out


def user_ask(user, url, env, code, session="s1"):
    p = as_user(user, *curl_args(url, body_for(code, session), "sk-u"), env=env)
    assert p.returncode == 0, p.stderr
    return split(p.stdout)


def test_ordinary_users_default_is_in_its_own_cache(fake, shared):
    """Not root: $XDG_RUNTIME_DIR only when it is the user's own, 0700;
    else ~/.cache/codeshim/run, never the shared TMPDIR."""
    user, pw = other_user()
    d, home = user_build(pw)
    (shared / ("codeshim-%d" % pw.pw_uid)).mkdir(mode=0o777)  # taken by root, say
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(shared),
           "XDG_RUNTIME_DIR": str(shared), "LD_PRELOAD": str(d / "libcodeshim.so")}
    want = home / ".cache" / "codeshim" / "run"
    try:
        st, out = user_ask(user, fake.url, env, "x = 41")
        assert st == 200, out.decode()
        st, out = user_ask(user, fake.url, env, "print(x + 1)")
        assert st == 200 and logs(json.loads(out)) == "42\n"
        for p in (home / ".cache", home / ".cache" / "codeshim", want):
            assert p.stat().st_uid == pw.pw_uid and p.stat().st_mode & 0o777 == 0o700, p
        assert supervisors(want)
        assert not any((shared / ("codeshim-%d" % pw.pw_uid)).iterdir())
        # the user's own XDG_RUNTIME_DIR (0700) is used when there is one
        xdg = home / "xdg"
        assert as_user(user, "/bin/mkdir", "-m", "0700", xdg).returncode == 0
        st, out = user_ask(user, fake.url, dict(env, XDG_RUNTIME_DIR=str(xdg)), "y = 1")
        assert st == 200, out.decode()
        assert supervisors(xdg / "codeshim")
    finally:
        stop_supervisors(home)
        assert wait_for(lambda: not running_from(d))  # then nothing is removed under them
        shutil.rmtree(d, ignore_errors=True)


def test_unusable_runtime_dir_is_an_error_in_the_answer(fake, rt):
    rt.mkdir(mode=0o700)
    os.chmod(rt, 0o755)  # others could enter: not private
    st, r = ask(fake.url, "x = 1", rt=rt)
    e = error_of(st, r, 500)
    assert str(rt) in e["message"] and "CODESHIM_RUNTIME_DIR" in e["message"], e
    assert e["code"] == "codeshim_runtime_dir"
    assert supervisors(rt) == [] and supervisors(rt, HOSTS) == []
    # a container named in tools[].container cannot be looked up either
    st, r = ask(fake.url, "x = 1", rt=rt, session=None,
                extra={"tools": [{"type": "code_interpreter", "container": "cntr_" + "a" * 48}]})
    assert str(rt) in error_of(st, r, 500)["message"]
    # streaming: the stream ends with the same reason
    st, text = ask(fake.url, "x = 1", rt=rt, stream=True)
    assert str(rt) in failed_stream(st, text)["message"]
    # a continuation cannot be looked up: refused before the upstream is asked
    n = len(fake.requests())
    st, r = ask(fake.url, "print(1)", rt=rt, session=None,
                extra={"previous_response_id": "resp_" + "0" * 32})
    e = error_of(st, r, 500)
    assert e["param"] == "previous_response_id" and str(rt) in e["message"]
    assert len(fake.requests()) == n
    # the Containers API says so too
    rc, out, err = run([CURL, "-sS", "-w", "\n%{http_code}", "-H", "Authorization: Bearer sk-rt",
                        "-H", "Content-Type: application/json", "-d", '{"name": "x"}',
                        fake.url + "/containers"], env={"CODESHIM_RUNTIME_DIR": rt})
    st, text = split(out)
    e = error_of(st, json.loads(text), 500)
    assert str(rt) in e["message"], e
    # what needs no runtime directory still works
    st, r = ask(fake.url, "print(6 * 7)", rt=rt, session=None)
    assert st == 200 and logs(r) == "42\n"
    assert not any(rt.iterdir())


def test_no_home_for_the_cache_is_an_error_in_the_answer(fake):
    """Not root, no XDG_RUNTIME_DIR, and a home it cannot write: the
    session is refused, naming the directory."""
    user, pw = other_user()
    d, home = user_build(pw)
    os.chown(home, 0, 0)
    os.chmod(home, 0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LD_PRELOAD": str(d / "libcodeshim.so")}
    try:
        st, out = user_ask(user, fake.url, env, "x = 1")
        e = error_of(st, json.loads(out), 500)
        assert str(home / ".cache") in e["message"], e
        # HOME unset: the passwd entry's home (this system user's does not exist)
        if not os.path.exists(pw.pw_dir):
            del env["HOME"]
            st, out = user_ask(user, fake.url, env, "x = 1")
            e = error_of(st, json.loads(out), 500)
            assert pw.pw_dir in e["message"], e
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- 2. a host that ends leaves its successor's files alone ----

def connects(d):
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("/proc/self/fd/%d/sock" % dfd)
            return True
    except OSError:
        return False
    finally:
        os.close(dfd)


def test_host_ending_while_busy_leaves_its_successor_alone(fake, rt, tmp_path):
    """SIGTERM to a host whose session is busy: it closes its socket, then
    gives the session up to 10 s to end. A program starting a session
    meanwhile starts a successor host in the same directory; the old
    host's exit once removed the successor's socket and pid file."""
    # the sandbox sees no file of the test's: its code says it runs by a
    # process the test can see
    code = "import subprocess, time\nsubprocess.Popen(['sleep', '300.41'])\ntime.sleep(60)"
    env = dict(CODESHIM_RUNTIME_DIR=rt)  # isolated: the session is the sandbox host's
    p = subprocess.Popen(curl_args(fake.url, body_for(code, "a"), "sk-rt"),
                         env={"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(REPO / "build" /
                                                                       "libcodeshim.so"),
                              **{k: str(v) for k, v in env.items()}},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: "sleep 300.41" in subprocess.run(
            ["ps", "-eo", "args"], capture_output=True, text=True).stdout, timeout=60)
        [old] = supervisors(rt, HOSTS)
        [hostdir] = [f.parent for f in rt.glob(HOSTS)]
        os.kill(old, signal.SIGTERM)
        assert wait_for(lambda: not connects(hostdir))
        assert alive(old)  # still ending its busy session
        st, r = ask(fake.url, "print('b')", session="b", rt=rt)
        assert st == 200 and logs(r) == "b\n"
        new = int((hostdir / "pid").read_text())
        assert new != old
        assert wait_for(lambda: not alive(old), timeout=60)
        assert (hostdir / "pid").read_text() == str(new) and connects(hostdir)
        st, r = ask(fake.url, "print('c')", session="c", rt=rt)
        assert st == 200 and logs(r) == "c\n"
        assert supervisors(rt, HOSTS) == [new]  # served by the successor: no orphan
        p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- 4. caps per user, whatever the keys ----

def test_ten_invented_keys_cannot_exceed_the_user_session_cap(fake, rt):
    env = dict(LIGHT, CODESHIM_USER_SESSIONS="3")
    got = []
    for i in range(10):
        st, r = ask(fake.url, "print(%d)" % i, key="sk-invented-%d" % i, rt=rt, env=env)
        got.append(st)
        if st == 200:
            assert logs(r) == "%d\n" % i
        else:
            e = error_of(st, r, 429)
            assert "CODESHIM_USER_SESSIONS" in e["message"] and e["code"] == "rate_limit_exceeded"
            assert "sk-invented" not in e["message"]
    assert got == [200] * 3 + [429] * 7
    assert len(supervisors(rt)) == 3 and supervisors(rt, HOSTS) == []
    # a key that has a session still reaches it
    st, r = ask(fake.url, "print('again')", key="sk-invented-0", rt=rt, env=env)
    assert st == 200 and logs(r) == "again\n"


def test_keys_racing_each_other_never_pass_the_cap_together(fake, rt):
    """Eight programs with eight keys at once, three sessions allowed: the
    count is taken under the user's lock, and a session being started
    counts, so no more than three ever run (a race may refuse one more
    than needed, never admit one)."""
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(REPO / "build" / "libcodeshim.so"),
           "CODESHIM_RUNTIME_DIR": str(rt), "CODESHIM_USER_SESSIONS": "3", **LIGHT}
    procs = [subprocess.Popen(curl_args(fake.url, body_for("print(%d)" % i), "sk-race-%d" % i),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(8)]
    got = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        st, text = split(out)
        if st != 200:
            error_of(st, json.loads(text), 429)
        got.append(st)
    assert 1 <= got.count(200) <= 3 and got.count(200) + got.count(429) == 8, got
    assert len(supervisors(rt)) == got.count(200) and len(supervisors(rt)) <= 3


def test_a_refused_stream_ends_with_the_reason(fake, rt):
    env = dict(LIGHT, CODESHIM_USER_SESSIONS="1")
    assert ask(fake.url, "print(1)", key="sk-one", rt=rt, env=env)[0] == 200
    st, text = ask(fake.url, "print(2)", key="sk-two", rt=rt, env=env, stream=True)
    e = failed_stream(st, text)
    assert "CODESHIM_USER_SESSIONS" in e["message"] and e["code"] == "rate_limit_exceeded", e
    assert len(supervisors(rt)) == 1


def capi(url, args, key, rt, env):
    e = {"CODESHIM_RUNTIME_DIR": rt}
    e.update(env)
    rc, out, err = run([CURL, "-sS", "-w", "\n%{http_code}", "-H", "Authorization: Bearer " + key]
                       + args + [url], env=e)
    assert rc == 0, err
    st, text = split(out)
    return st, json.loads(text)


def test_n_keys_cannot_exceed_the_user_file_budget(fake, rt, tmp_path):
    env = {"CODESHIM_FILES_DISK": "2M", "CODESHIM_USER_FILES_DISK": "3M"}
    f = tmp_path / "one.bin"
    f.write_bytes(os.urandom(1 << 20))
    got = []
    for i in range(5):
        key = "sk-files-%d" % i
        st, c = capi(fake.url + "/containers", ["-H", "Content-Type: application/json",
                                                "-d", '{"name": "b"}'], key, rt, env)
        assert st == 200, c
        for n in range(2):
            st, r = capi("%s/containers/%s/files" % (fake.url, c["id"]),
                         ["-F", "file=@%s;filename=f%d.bin" % (f, n)], key, rt, env)
            got.append(st)
            if st == 200:
                schema_check.validate(r, "ContainerFileResource")
            else:
                e = error_of(st, r, 507)
                assert "CODESHIM_USER_FILES_DISK" in e["message"], e
    assert got == [200, 200, 200] + [507] * 7
    stored = sum(p.stat().st_size for p in (rt / "containers").glob("*/f-*"))
    assert stored == 3 << 20
    assert fake.requests() == []


# ---- 3. codeshim sessions ----

LAUNCHER = REPO / "build" / "codeshim"


def sessions_cli(rt, *args):
    p = subprocess.run([LAUNCHER, "sessions"] + list(args), capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "CODESHIM_RUNTIME_DIR": str(rt)},
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def rows(out):
    """{kind: [columns, ...]} of the listing's table."""
    got = {"host": [], "session": []}
    for line in out.splitlines()[2:]:
        cols = line.split()
        got[cols[1]].append(cols)
    return got


def test_sessions_lists_and_stops_them(fake, rt):
    env = {"CODESHIM_SESSION_TTL": "600"}  # with the user's sandbox host
    key = "sk-listed-SECRET"
    ask(fake.url, "x = 1", key=key, session="one", rt=rt, env=env)
    ask(fake.url, "x = 2", key=key, session="two", rt=rt, env=env)
    st, r = ask(fake.url, "x = 3", key="sk-other", session="one", rt=rt, env=env)
    cid = calls(r)[0]["container_id"]
    rc, out, err = sessions_cli(rt)
    assert rc == 0, err
    assert "SECRET" not in out and "sk-" not in out
    got = rows(out)
    assert len(got["host"]) == 1 and len(got["session"]) == 3, out  # one host for every key
    assert sorted(int(c[4]) for c in got["session"]) == sorted(supervisors(rt))
    assert [int(c[4]) for c in got["host"]] == supervisors(rt, HOSTS)
    assert got["host"][0][3] == "sessions:3" and got["host"][0][0] == "-"
    for c in got["session"]:
        assert c[3].startswith("cntr_") and c[-1] == "MiB" and float(c[-2]) > 0
        assert c[6].endswith("s") and c[6] != "-"  # TTL left, of the session's own 600 s
        assert int(c[6].split("m")[0]) in (9, 10)
    [mine] = [c for c in got["session"] if c[3] == cid]
    # one session, by its container id: only that one ends
    rc, out, err = sessions_cli(rt, "stop", cid)
    assert rc == 0 and "stopped session" in out, (out, err)
    assert wait_for(lambda: int(mine[4]) not in supervisors(rt))
    assert len(supervisors(rt)) == 2
    # an identity's sessions, by its IDENTITY: the host stays
    [listed] = {c[0] for c in got["session"] if c[0] != mine[0]}
    rc, out, err = sessions_cli(rt, "stop", listed)
    assert rc == 0 and out.count("stopped session") == 2, (out, err)
    assert wait_for(lambda: supervisors(rt) == [])
    assert len(supervisors(rt, HOSTS)) == 1
    # everything
    ask(fake.url, "x = 4", key="sk-other", session="again", rt=rt, env=env)
    rc, out, err = sessions_cli(rt, "stop", "--all")
    assert rc == 0 and "stopped host" in out, (out, err)
    assert supervisors(rt) == [] and supervisors(rt, HOSTS) == []
    rc, out, err = sessions_cli(rt)
    assert rc == 0 and "no sandbox hosts or sessions" in out
    # an unknown ID is an error
    rc, out, err = sessions_cli(rt, "stop", "cntr_nope")
    assert rc == 1 and "cntr_nope" in err


def test_sessions_refuses_a_runtime_dir_that_is_not_private(rt):
    rt.mkdir(mode=0o700)
    os.chmod(rt, 0o755)
    rc, out, err = sessions_cli(rt)
    assert rc == 1 and str(rt) in err
    rc, out, err = sessions_cli(rt, "stop")  # a usage error
    assert rc == 2 and "usage" in err


def test_sessions_never_signals_a_stranger_named_by_a_stale_pid_file(rt):
    """A pid file left behind whose number now names another process of
    the user: neither listed nor stopped."""
    stranger = subprocess.Popen(["sleep", "300.41"])
    try:
        for sub in ("a" * 32 + "/" + "b" * 32, "hosts/" + "c" * 32 + "-" + "d" * 16):
            d = rt / sub
            d.mkdir(mode=0o700, parents=True)
            for p in [d] + list(d.parents):
                if p == rt.parent:
                    break
                os.chmod(p, 0o700)
            (d / "pid").write_text(str(stranger.pid))
        rc, out, err = sessions_cli(rt)
        assert rc == 0 and "no sandbox hosts or sessions" in out, (out, err)
        rc, out, err = sessions_cli(rt, "stop", "--all")
        assert rc == 0, err
        assert stranger.poll() is None  # still running
    finally:
        stranger.kill()
        stranger.wait()
