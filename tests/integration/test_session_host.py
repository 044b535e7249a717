"""Sessions get the fast start too, from the one host of the user.

A session's supervisor is a process the user's sandbox host
(codeshim-sessiond, sessiond/host.c) starts for it, lending it a sandbox
of its pool, forked from its fork server with the data libraries
imported. The host is every identity's: there is no host per key. Every
request is a separate run of the curl CLI under codeshim, as in
test_sessions.py, whose helpers these tests reuse. Tests wait for the host
to have a sandbox ready (session_host.wait_warm) instead of sleeping."""

import os
import signal
import subprocess

import session_host
from conftest import alive, descendants, ppid, wait_for
from test_sessions import ask, logs, rt, supervisors  # noqa: F401 (rt: fixture)

HOSTS = "hosts/*/pid"  # the user's sandbox host


def running(rt):
    """Processes (not zombies) whose command line names rt."""
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines()[1:] if l.split()[1][0] != "Z" and str(rt) in l]


def test_warm_host_starts_sessions_with_the_data_libraries_imported(fake, rt):
    ask(fake.url, "x = 1", session="a", rt=rt)  # starts the host (this session: cold, alone)
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
    # b's supervisor is the host's child, its sandbox lent from the pool;
    # a's state is not in b
    sups = supervisors(rt)
    assert len(sups) == 2 and ppid(sups[0]) == host or ppid(sups[1]) == host
    assert session_host.status(session_host.hosts(rt)[0])["sessions"] >= 1
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


def test_identities_share_the_host_and_nothing_else(fake, rt):
    """Two keys, two sessions each: one host for all of them (no host per
    key), each session its own process and sandbox, each key's sessions in
    its own directory, and nothing of one key's session seen by another's."""
    assert ask(fake.url, "pass", key="sk-alice", session=None, rt=rt)  # the host started
    assert session_host.wait_warm(rt)
    for key in ("sk-alice", "sk-bob"):
        for s in ("a", "b"):
            session_host.wait_warm(rt)
            assert logs(ask(fake.url, "import os\nsecret = %r\nopen('mine.txt', 'w').write(secret)\n"
                            "print(os.getpid() > 0)" % (key + s), key=key, session=s, rt=rt)).startswith("True\n")
    [host] = supervisors(rt, HOSTS)
    assert not list(rt.glob("*/hosts"))  # no host of any identity's
    sups = supervisors(rt)
    assert len(sups) == 4 and len(set(sups)) == 4
    assert all(ppid(p) == host for p in sups)
    assert len({sd.parent for sd in rt.glob("*/*/pid") if sd.parent.parent.name != "hosts"}) == 4
    assert len({sd.parent.parent for sd in rt.glob("*/*/pid") if sd.parent.parent.name != "hosts"}) == 2
    for key in ("sk-alice", "sk-bob"):
        for s in ("a", "b"):
            out = logs(ask(fake.url, "print(secret, open('mine.txt').read())", key=key, session=s, rt=rt))
            assert out == "%s %s\n" % (key + s, key + s)
    # the sandboxes' processes are apart: no supervisor's sandbox is another's
    trees = [descendants(p) for p in sups]
    for i, a in enumerate(trees):
        for b in trees[i + 1:]:
            assert not (a & b)


def test_host_sigterm_ends_every_session(fake, rt):
    ask(fake.url, "pass", session=None, rt=rt)  # the host is started
    assert session_host.wait_warm(rt)
    for s in ("a", "b"):
        session_host.wait_warm(rt)
        ask(fake.url, "import subprocess\nsubprocess.Popen(['sleep', '300.31'])", session=s, rt=rt)
    [host] = supervisors(rt, HOSTS)
    assert len(supervisors(rt)) == 2 and all(ppid(p) == host for p in supervisors(rt))
    os.kill(host, signal.SIGTERM)
    assert wait_for(lambda: not supervisors(rt) and not alive(host))
    assert not [s for s in rt.glob("*/*/sock") if s.parent.parent != rt / "hosts"]
    assert not [d for d in rt.glob("hosts/*") if d.is_dir()]
    # a session started alone (the very first, before the host was up)
    # is no child of the host's: stopped here to see nothing else runs
    for pid in supervisors(rt):
        os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: running(rt) == [])
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
    it lent: each session says so and starts a new sandbox; a new session
    gets a new host."""
    ask(fake.url, "x = 1", session="a", rt=rt)
    assert session_host.wait_warm(rt)
    ask(fake.url, "y = 2", session="b", rt=rt)  # lent from the host's pool
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
    assert ("were lost" in out or "NameError" in out) and "2\n" not in out, out
    ask(fake.url, "print(3)", session="c", rt=rt)
    assert wait_for(lambda: len(supervisors(rt, HOSTS)) == 1)
    [new] = supervisors(rt, HOSTS)
    assert new != host
    ask(fake.url, "y = 5", session="b", rt=rt)  # b goes on in its new sandbox
    assert logs(ask(fake.url, "print(y)", session="b", rt=rt)) == "5\n"


def test_host_refuses_what_is_not_an_open_of_an_identity(fake, rt):
    ask(fake.url, "pass", session="a", rt=rt)
    [hd] = session_host.hosts(rt)
    [sd] = [p.parent for p in rt.glob("*/*/pid") if p.parent.parent.name != "hosts"]
    iddir, ident = sd.parent, sd.parent.name
    (rt / "elsewhere").mkdir()
    (rt / ("0" * 32)).mkdir()  # an identity's name, but no session in it
    for msg in ({"op": "open", "identity": ident, "name": "../elsewhere", "ttl": 60},
                {"op": "open", "identity": ident, "name": "0" * 32, "ttl": 60},  # no such directory
                {"op": "open", "identity": ident, "name": "a" * 31 + "/", "ttl": 60},
                {"op": "open", "identity": "../" + ident, "name": sd.name, "ttl": 60},
                {"op": "open", "identity": "/tmp", "name": sd.name, "ttl": 60},
                {"op": "open", "identity": "0" * 32, "name": sd.name, "ttl": 60},  # another's
                {"op": "open", "name": sd.name, "ttl": 60},  # whose?
                {"op": "open", "identity": ident, "name": sd.name},  # no idle limit
                {"op": "open", "identity": ident, "name": "0" * 32, "bind": "../x", "ttl": 60},
                {"op": "exec", "code": "print(1)"},
                {"name": "0" * 32}):
        ans = session_host.call(hd, msg)
        assert ans["ok"] is False, msg
    (iddir / ("0" * 32)).mkdir(mode=0o700)
    ans = session_host.call(hd, {"op": "open", "identity": ident, "name": "0" * 32,
                                 "bind": "cntr_x" * 20, "ttl": 60})
    assert ans["ok"] is False  # a bind too long
    assert len(supervisors(rt)) == 1  # nothing was started for any of them
    assert logs(ask(fake.url, "print(2)", session="a", rt=rt)) == "2\n"


def test_without_a_host_a_session_starts_alone_and_lasts(fake, rt):
    """With the host turned off, a session is a process of its own, started
    cold by the library, no child of the program; it keeps its state across
    program runs all the same, and no host is started."""
    env = {"CODESHIM_SANDBOX_HOST": "0"}
    assert logs(ask(fake.url, "x = 7", session="a", rt=rt, env=env)) == ""
    [sup] = supervisors(rt)
    assert ppid(sup) != os.getpid()
    assert logs(ask(fake.url, "print(x)", session="a", rt=rt, env=env)) == "7\n"
    assert not list(rt.glob("hosts/*/sock")) and not list(rt.glob("*/hosts"))


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
