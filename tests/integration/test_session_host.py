"""Sessions get the fast start too.

A session's supervisor is forked by the identity's session host
(codeshim-sessiond, sessiond/host.c), which keeps a fork server with the
data libraries imported and hands each new session a sandbox forked from
it. Every request is a separate run of the curl CLI under codeshim, as in
test_sessions.py, whose helpers these tests reuse. Tests wait for a host
to be warm (session_host.wait_warm: it has a forked sandbox ready) instead
of sleeping."""

import os
import signal
import subprocess

import session_host
from conftest import alive, descendants, ppid, wait_for
from test_sessions import ask, logs, rt, supervisors  # noqa: F401 (rt: fixture)

HOSTS = "*/hosts/*/pid"


def running(rt):
    """Processes (not zombies) whose command line names rt."""
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines()[1:] if l.split()[1][0] != "Z" and str(rt) in l]


def test_warm_host_starts_sessions_with_the_data_libraries_imported(fake, rt):
    ask(fake.url, "x = 1", session="a", rt=rt)  # starts the host (this session: cold)
    [host] = supervisors(rt, HOSTS)
    assert session_host.wait_warm(rt)
    # already in memory: importing them opens no module file (a fresh
    # sandbox still shows none of them before it imports them)
    r = ask(fake.url, "import sys\nprint([m for m in ('numpy', 'pandas') if m in sys.modules])\n"
            "opened = []\nsys.addaudithook(lambda e, a: opened.append(str(a[0])) "
            "if e == 'open' else None)\nimport numpy, pandas, matplotlib.pyplot\n"
            "print([p for p in opened if p.endswith(('.py', '.pyc', '.so'))])",
            session="b", rt=rt)
    assert logs(r) == "[]\n[]\n"
    # b's supervisor is the host's child; a's state is not in b
    sups = supervisors(rt)
    assert len(sups) == 2 and all(ppid(p) == host for p in sups)
    assert "NameError" in logs(ask(fake.url, "print(x)", session="b", rt=rt))
    assert logs(ask(fake.url, "print(x)", session="a", rt=rt)) == "1\n"


def test_sessions_forked_from_one_host_share_nothing(fake, rt):
    ask(fake.url, "pass", session="a", rt=rt)
    probe = ("import os, random, numpy\n"
             "print('rand', random.random(), numpy.random.random(), os.urandom(8).hex())\n"
             "print('seen', os.path.exists('/tmp/mark'), os.path.exists('mark.txt'), "
             "any(b'sleep' in open('/proc/%s/cmdline' % p, 'rb').read() "
             "for p in os.listdir('/proc') if p.isdigit()))\n"
             "open('/tmp/mark', 'w').write('1')\nopen('mark.txt', 'w').write('1')\n"
             "import subprocess\nsubprocess.Popen(['sleep', '300.21'])\n")
    seen = {}
    for s in ("b", "c"):
        assert session_host.wait_warm(rt)
        r = ask(fake.url, probe, session=s, rt=rt)
        lines = dict(l.split(" ", 1) for l in logs(r).splitlines())
        seen[s] = lines
        assert lines["seen"] == "False False False", (s, lines)
    assert seen["b"]["rand"].split() != seen["c"]["rand"].split()
    for a, b in zip(seen["b"]["rand"].split(), seen["c"]["rand"].split()):
        assert a != b  # Python's random, numpy's and the kernel's each differ
    # supervisors and host told to end at once (as the rt fixture does):
    # nothing of either session is left
    [host] = supervisors(rt, HOSTS)
    for pid in supervisors(rt) + [host]:
        os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: not alive(host))
    ps = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    assert not [l for l in ps.splitlines() if "sleep 300.21" in l and l[0] != "Z"]


def test_identities_never_share_a_host(fake, rt):
    ask(fake.url, "pass", key="sk-alice", rt=rt)
    ask(fake.url, "pass", key="sk-bob", rt=rt)
    hosts = supervisors(rt, HOSTS)
    assert len(hosts) == 2
    assert len(session_host.hosts(rt)) == 2
    assert len({h.parent.parent for h in session_host.hosts(rt)}) == 2  # one per identity
    for sup in supervisors(rt):
        assert ppid(sup) in hosts
    pairs = {ppid(sup) for sup in supervisors(rt)}
    assert pairs == set(hosts)  # each identity's session is its own host's


def test_host_sigterm_ends_every_session(fake, rt):
    for s in ("a", "b"):
        ask(fake.url, "import subprocess\nsubprocess.Popen(['sleep', '300.31'])", session=s, rt=rt)
        session_host.wait_warm(rt)
    [host] = supervisors(rt, HOSTS)
    assert len(supervisors(rt)) == 2
    os.kill(host, signal.SIGTERM)
    assert wait_for(lambda: not supervisors(rt) and not alive(host))
    assert not [s for s in rt.glob("*/*/sock") if s.parent.parent != rt / "hosts"]
    assert not list(rt.glob("*/hosts/*"))
    # the user's sandbox host (which lent the first session's sandbox) is
    # no identity's: stopped here only to see that nothing else runs
    user = supervisors(rt, "hosts/*/pid")
    for pid in user:
        os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: not [p for p in user if alive(p)])
    assert running(rt) == []
    ps = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    assert not [l for l in ps.splitlines() if "sleep 300.31" in l and l[0] != "Z"]


def test_a_lost_session_leaves_the_host_serving(fake, rt):
    ask(fake.url, "x = 1", session="a", rt=rt)
    [host] = supervisors(rt, HOSTS)
    [sup] = supervisors(rt)
    os.kill(sup, signal.SIGKILL)
    assert wait_for(lambda: supervisors(rt) == [])
    assert session_host.wait_warm(rt)
    r = ask(fake.url, "print(x)", session="a", rt=rt)  # a new sandbox, from the host
    assert "NameError" in logs(r)
    assert supervisors(rt, HOSTS) == [host]
    assert logs(ask(fake.url, "print(1)", session="b", rt=rt)) == "1\n"


def test_a_killed_host_is_replaced_and_its_sessions_say_so(fake, rt):
    """SIGKILL to the host takes its fork server, and with it the sandboxes
    it handed over: each session's supervisor says so and starts a new
    sandbox; a new session gets a new host."""
    ask(fake.url, "x = 1", session="a", rt=rt)
    assert session_host.wait_warm(rt)
    ask(fake.url, "y = 2", session="b", rt=rt)  # forked from the host's server
    [host] = supervisors(rt, HOSTS)
    server = descendants(host) - set(supervisors(rt))  # the fork server and
    for sup in supervisors(rt):                      # the sandboxes forked from it
        server -= descendants(sup)
    assert server
    os.kill(host, signal.SIGKILL)
    assert wait_for(lambda: not alive(host) and not [p for p in server if alive(p)])
    # found dead before the code was sent (run in a new sandbox: a
    # NameError) or while it was (not run): either way the model is told
    out = logs(ask(fake.url, "print(y)", session="b", rt=rt))
    assert "were lost" in out and "2\n" not in out, out
    ask(fake.url, "print(3)", session="c", rt=rt)
    [new] = supervisors(rt, HOSTS)
    assert new != host
    ask(fake.url, "y = 5", session="b", rt=rt)  # b goes on in its new sandbox
    assert logs(ask(fake.url, "print(y)", session="b", rt=rt)) == "5\n"


def test_host_refuses_what_is_not_an_open_of_its_identity(fake, rt):
    ask(fake.url, "pass", session="a", rt=rt)
    [hd] = session_host.hosts(rt)
    iddir = hd.parent.parent
    (rt / "elsewhere").mkdir()
    for msg in ({"op": "open", "name": "../elsewhere"},
                {"op": "open", "name": "0" * 32},  # no such session directory
                {"op": "open", "name": "a" * 31 + "/"},
                {"op": "open", "name": iddir.name},  # a name, but not a session here
                {"op": "open", "name": "0" * 32, "bind": "../x"},
                {"op": "exec", "code": "print(1)"},
                {"name": "0" * 32}):
        ans = session_host.call(hd, msg)
        assert ans["ok"] is False, msg
    (iddir / ("0" * 32)).mkdir(mode=0o700)
    ans = session_host.call(hd, {"op": "open", "name": "0" * 32, "bind": "cntr_x" * 20})
    assert ans["ok"] is False  # a bind too long
    assert len(supervisors(rt)) == 1  # nothing was started for any of them
    assert logs(ask(fake.url, "print(2)", session="a", rt=rt)) == "2\n"


def test_sessions_of_an_ordinary_user(fake):
    """The same fast start for a user without privileges: the host's fork
    server then sits in a user namespace of its own."""
    import json
    import shutil
    from test_sandbox_escape import TEST_USER
    from test_sandbox_host import ordinary_user
    d, urt, env, pw = ordinary_user()

    def user_ask(code, session):
        body = {"model": "m", "input": "```python\n%s\n```" % code,
                "metadata": {"session_id": session}, "tools": [{"type": "code_interpreter"}]}
        p = subprocess.run(["/usr/sbin/runuser", "-u", TEST_USER, "--", "/usr/bin/curl", "-sS",
                            fake.url + "/responses", "-H", "Authorization: Bearer sk-u",
                            "-d", json.dumps(body)], env=env, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return logs(json.loads(p.stdout))

    try:
        assert user_ask("x = 1", "a") == ""
        [host] = supervisors(urt, HOSTS)
        assert os.stat("/proc/%d" % host).st_uid == pw.pw_uid
        assert session_host.wait_warm(urt)
        out = user_ask("import os, sys\nopened = []\nsys.addaudithook(lambda e, a: "
                       "opened.append(str(a[0])) if e == 'open' else None)\n"
                       "import numpy, pandas, matplotlib.pyplot\n"
                       "print([p for p in opened if p.endswith(('.py', '.pyc', '.so'))])\n"
                       "print('x' in globals())", "b")
        assert out == "[]\nFalse\n"
        assert user_ask("print(x)", "a") == "1\n"
    finally:
        hosts = supervisors(urt, HOSTS)
        for pid in hosts:
            os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not [p for p in hosts if alive(p)])
        shutil.rmtree(d, ignore_errors=True)
