"""One sandbox host per user, settings and build.

The user's sandbox host (codeshim-sessiond in <runtime>/hosts/<settings>-
<build>, sessiond/pool.c) keeps a few sandboxes forked from its fork
server ready and lends each, once, to one request of any program of the
user: a new process's very first request takes one over the host's
socket. Where none can be had (no host yet, a host that died) the request
runs isolated, started the cold way, says so at info level, and the host
is started again. Every request is a separate run of the curl CLI, as in
test_sessions.py, whose helpers these tests reuse; they wait for
conditions (the host's status), never for time."""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import session_host
from conftest import REPO, alive, descendants, ppid, stop_supervisors
from test_escape_limits import cgroup_dirs, need_cgroup
from test_hardening_sessions import wait_for
from test_runtime import user_build
from test_sandbox_escape import TEST_USER, _ensure_user
from test_sessions import ask, calls, logs, rt  # noqa: F401 (rt: fixture)

LENT = "sandbox lent by the sandbox host"
COLD = "starts the cold way"
DEBUG = {"CODESHIM_LOG": "debug"}
# what only an isolated sandbox says: the sandbox user, none of the
# host's directories (this checkout), its own empty /mnt/data, a PID
# namespace of its own (no host process seen)
PROBE = ("import os\nprint(os.getuid(), os.path.exists(%r), os.getcwd(), "
         "sorted(os.listdir('.')), len([p for p in os.listdir('/proc') if p.isdigit()]) < 20)\n"
         % str(REPO))
ISOLATED = "1000 False /mnt/data [] True\n"
POOL = 4  # sessiond.h's SESSIOND_POOL


def user_hosts(rt):
    return sorted(p.parent for p in Path(rt).glob("hosts/*/sock"))


def status(d):
    return session_host.call(d, {"op": "status"})


def lent_total(d):
    """How many sandboxes host d has lent, or None when it is gone."""
    try:
        return status(d)["lent_total"]
    except OSError:
        return None


def pool_full(d):
    try:
        return status(d).get("pool") == POOL
    except OSError:
        return False


def warm_host(url, rt, env=None):
    """The user's host started (by a first request, which runs cold) and
    its pool full: its directory."""
    r, err = ask(url, PROBE, session=None, rt=rt, env=dict(DEBUG, **(env or {})), stderr=True)
    assert logs(r) == ISOLATED
    assert wait_for(lambda: len(user_hosts(rt)) == 1)
    [d] = user_hosts(rt)
    assert wait_for(lambda: pool_full(d), timeout=60), status(d)
    return d


def private(url, rt, code=PROBE, key="sk-alice", env=None):
    """One private request of a new curl process: (its logs, codeshim's log)."""
    r, err = ask(url, code, key=key, session=None, rt=rt, env=dict(DEBUG, **(env or {})),
                 stderr=True)
    return logs(r), err, r


def test_first_request_of_a_new_process_takes_a_pooled_sandbox(fake, rt):
    d = warm_host(fake.url, rt)
    before = status(d)["lent_total"]
    out, err, _ = private(fake.url, rt)
    assert out == ISOLATED
    assert LENT in err and COLD not in err, err
    assert status(d)["lent_total"] == before + 1
    # the pool is refilled by the host, off the request's path
    assert wait_for(lambda: pool_full(d), timeout=60)


def test_a_killed_host_leaves_requests_isolated_and_comes_back(fake, rt):
    d = warm_host(fake.url, rt)
    old = status(d)["pid"]
    os.kill(old, signal.SIGKILL)
    assert wait_for(lambda: not alive(old))
    out, err, _ = private(fake.url, rt)
    assert out == ISOLATED  # isolated, started the cold way
    assert COLD in err and LENT not in err, err
    assert "info" in err.split(COLD)[0].rsplit("\n", 1)[-1]  # said at info level
    # the host was started again and lends the next request's sandbox
    assert wait_for(lambda: pool_full(d), timeout=60)
    assert status(d)["pid"] != old
    out, err, _ = private(fake.url, rt)
    assert out == ISOLATED and LENT in err, err


def test_a_host_of_another_build_is_not_used(fake, rt, tmp_path):
    d = warm_host(fake.url, rt)
    other = tmp_path / "codeshim-sessiond"
    shutil.copy2(REPO / "build" / "codeshim-sessiond", other)  # another file: another build
    out, err, _ = private(fake.url, rt, env={"CODESHIM_SESSIOND": str(other)})
    assert out == ISOLATED
    assert LENT not in err, err  # not d's sandbox: d is of another build
    assert status(d)["lent_total"] == 0
    assert wait_for(lambda: len(user_hosts(rt)) == 2)  # its own host was started
    [mine] = [h for h in user_hosts(rt) if h != d]
    assert mine.name.split("-")[0] == d.name.split("-")[0]  # same settings
    assert wait_for(lambda: pool_full(mine), timeout=60)
    out, err, _ = private(fake.url, rt, env={"CODESHIM_SESSIOND": str(other)})
    assert LENT in err and status(mine)["lent_total"] == 1 and status(d)["lent_total"] == 0


def test_two_identities_never_share_a_sandbox_a_session_or_a_file(fake, rt):
    d = warm_host(fake.url, rt)
    write = "open('mine.txt', 'w').write('alice')\nx = 'alice'\n" + PROBE
    a, err_a, ra = private(fake.url, rt, code=write, key="sk-alice")
    b, err_b, rb = private(fake.url, rt, code=PROBE, key="sk-bob")
    assert LENT in err_a and LENT in err_b
    assert a.endswith("1000 False /mnt/data ['mine.txt'] True\n[files in /mnt/data: mine.txt]\n"), a
    assert b == ISOLATED  # a fresh sandbox: none of alice's files
    assert calls(ra)[0]["container_id"] != calls(rb)[0]["container_id"]
    assert status(d)["lent_total"] == 2  # each request its own, never lent twice
    # sessions: each identity's own
    ask(fake.url, "x = 'alice'", key="sk-alice", session="s", rt=rt)
    r = ask(fake.url, "print(globals().get('x'), sorted(os.listdir('.')) if 'os' in "
            "globals() else [])", key="sk-bob", session="s", rt=rt)
    assert logs(r) == "None []\n"


def several(url, rt, tmp_path, codes, env=None, hold=False):
    """One curl process, one request per code (curl --next): (curl's Popen,
    the output files). With hold it then blocks opening a FIFO (tmp_path /
    "fifo"; open it for writing to let it go) and is returned running."""
    cmd = ["/usr/bin/curl", "-sS"]
    outs = []
    for i, code in enumerate(codes):
        body = tmp_path / ("body%d.json" % i)
        body.write_text(json.dumps({"model": "m", "input": "```python\n%s\n```" % code,
                                    "tools": [{"type": "code_interpreter"}]}))
        outs.append(tmp_path / ("o%d" % i))
        cmd += ["-H", "Content-Type: application/json", "-H", "Authorization: Bearer sk-a",
                "--data-binary", "@%s" % body, "-o", str(outs[-1]), url + "/responses", "--next"]
    if hold:
        os.mkfifo(tmp_path / "fifo")
        cmd += ["file://%s" % (tmp_path / "fifo"), "-o", str(tmp_path / "held")]
    else:
        cmd.pop()  # the last --next
    from conftest import clean_env
    p = subprocess.Popen(cmd, env=clean_env(dict(DEBUG, CODESHIM_RUNTIME_DIR=str(rt), **(env or {}))),
                         stderr=subprocess.PIPE)
    return p, outs


def answers(outs):
    """The logs of each output file's one code_interpreter call."""
    got = []
    for o in outs:
        r = json.loads(o.read_text())
        assert r["status"] == "completed", r
        got.append(logs(r))
    return got


# the program's own processes and threads once its answers are written:
# with the host, nothing of codeshim's; without it (CODESHIM_SANDBOX_HOST=0,
# the fallback), spawn.c's idle thread, and still no process (no spare)
@pytest.mark.parametrize("env,threads", [({}, ["curl"]),
                                         ({"CODESHIM_SANDBOX_HOST": "0"}, ["codeshim-spawn", "curl"])],
                         ids=["host", "fallback"])
def test_a_process_exits_without_waiting_on_codeshim(fake, rt, tmp_path, env, threads):
    """Three intercepted requests, then the program blocks reading a FIFO:
    by then codeshim has no child in it (a sandbox, a spare) and no thread
    with work, so nothing is waited for at exit."""
    if not env:
        warm_host(fake.url, rt)
    p, outs = several(fake.url, rt, tmp_path, ["print('ok')"] * 3, env, hold=True)
    try:
        assert wait_for(lambda: all(o.exists() and o.stat().st_size for o in outs))
        # its three answers are written; it now waits in the FIFO's open
        assert wait_for(lambda: not descendants(p.pid))
        names = sorted(Path("/proc/%d/task/%s/comm" % (p.pid, t)).read_text().strip()
                       for t in os.listdir("/proc/%d/task" % p.pid))
        assert names == threads, names
        assert not descendants(p.pid)  # still none: no spare started meanwhile
    finally:
        with open(tmp_path / "fifo", "w"):
            pass
        _, err = p.communicate(timeout=30)
    assert p.returncode == 0
    assert err.decode().count(LENT) == (0 if env else 3), err
    assert "warm spare" not in err.decode()
    assert answers(outs) == ["ok\n"] * 3


FIRST = ("x = 41\nimport json\nopen('left.txt', 'w').write('A')\n"
         "open('/tmp/left', 'w').close()\nprint('set')\n")
CHECK = ("import os, sys\nprint(sorted(k for k in globals() if not "
         "k.startswith('__')), os.listdir('.'), os.path.exists('/tmp/left'), "
         "'json' in sys.modules)\n")
FRESH = "['os', 'sys'] [] False False\n"


def test_consecutive_requests_of_one_process_each_get_a_fresh_pooled_sandbox(fake, rt, tmp_path):
    """Back to back in one process: every request is lent its own sandbox
    (never one lent before), nothing of the one before is in it (globals,
    files, /tmp, imports), and the host refills its pool."""
    d = warm_host(fake.url, rt)
    before = status(d)["lent_total"]
    p, outs = several(fake.url, rt, tmp_path, [FIRST, CHECK, CHECK, CHECK])
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    got = answers(outs)
    assert got[0] == "set\n[files in /mnt/data: left.txt]\n", got
    assert got[1:] == [FRESH] * 3, got
    err = err.decode()
    pids = re.findall(LENT + r" \(pid (\d+)\)", err)
    assert len(pids) == 4 and len(set(pids)) == 4, err  # four sandboxes, none lent twice
    assert COLD not in err
    assert status(d)["lent_total"] == before + 4
    assert wait_for(lambda: pool_full(d), timeout=60)


def test_without_the_host_each_request_starts_cold_and_fresh(fake, rt, tmp_path):
    """CODESHIM_SANDBOX_HOST=0: each request's sandbox starts the cold way
    in the program (no warm spare, no fork server of its own), still fresh
    each time, and none is left once it answered."""
    p, outs = several(fake.url, rt, tmp_path, [FIRST, CHECK, CHECK],
                      {"CODESHIM_SANDBOX_HOST": "0"}, hold=True)
    try:
        assert wait_for(lambda: all(o.exists() and o.stat().st_size for o in outs))
        assert wait_for(lambda: not descendants(p.pid))
    finally:
        with open(tmp_path / "fifo", "w"):
            pass
        _, err = p.communicate(timeout=60)
    assert answers(outs)[1:] == [FRESH] * 2
    err = err.decode()
    assert LENT not in err and "fork server" not in err and "warm spare" not in err, err
    assert not user_hosts(rt)  # no host was started either


def test_fork_server_off_means_no_sandbox_host(fake, rt, tmp_path):
    """CODESHIM_FORK_SERVER=0: every sandbox starts the cold way (bwrap)
    in the program; no sandbox host is asked or started."""
    env = {"CODESHIM_FORK_SERVER": "0"}
    for _ in range(2):
        out, err, _ = private(fake.url, rt, env=env)
        assert out == ISOLATED
        assert LENT not in err and "sandbox host" not in err, err
    assert not user_hosts(rt) and not (Path(rt) / "hosts").exists()


def test_nothing_is_left_after_the_hosts_ttl(fake, rt):
    env = {"CODESHIM_SESSION_TTL": "2"}
    d = warm_host(fake.url, rt, env)
    host = status(d)["pid"]
    out, err, _ = private(fake.url, rt, env=env)
    assert LENT in err
    cg = cgroup_dirs(host) if os.geteuid() == 0 else []
    # the host ends by itself, with its pool, fork server and cgroups
    assert wait_for(lambda: not alive(host), timeout=60)
    ps = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
    assert not [l for l in ps.splitlines()[1:] if l.split()[1][0] != "Z" and str(rt) in l]
    assert not user_hosts(rt) and not d.exists()
    assert not [c for c in cg if os.path.exists(c)], cg


def test_a_killed_hosts_cgroups_are_removed(fake, rt):
    """SIGKILL of the host: its sandboxes die with its fork server, and
    their cgroups, empty once the kernel is done with their processes, are
    removed by the next sandbox start on the machine, or at the latest by
    the next host as it starts or ends: once the new host's TTL has
    passed, no cgroup of either is left."""
    need_cgroup()
    env = {"CODESHIM_SESSION_TTL": "2"}
    d = warm_host(fake.url, rt, env)
    old = status(d)["pid"]
    left = cgroup_dirs(old)
    assert left  # the fork server's and the pool's
    os.kill(old, signal.SIGKILL)
    assert wait_for(lambda: not alive(old))
    out, err, _ = private(fake.url, rt, env=env)
    assert out == ISOLATED and COLD in err, err
    assert wait_for(lambda: pool_full(d), timeout=60)  # started again
    new = status(d)["pid"]
    assert new != old
    mine = cgroup_dirs(new)
    assert mine
    assert wait_for(lambda: not alive(new), timeout=60)  # its TTL passed
    assert not [c for c in left + mine if os.path.exists(c)], left + mine
    assert not cgroup_dirs(old) and not cgroup_dirs(new)


def test_a_killed_programs_sandbox_is_ended_by_the_host(fake, rt, tmp_path):
    """kill -9 of the program mid-execution: the host sees its sandbox end
    and removes its cgroup (no later start of a program needed)."""
    need_cgroup()
    d = warm_host(fake.url, rt)
    host = status(d)["pid"]
    pooled = set(cgroup_dirs(host))  # the pool's sandboxes', one of which is lent next
    assert pooled
    # each sandbox's: one a controller (cgroup v1), or one
    per = len(pooled) // len({os.path.basename(c) for c in pooled})
    body = {"model": "m", "input": "```python\nimport time\ntime.sleep(1000.703)\n```",
            "tools": [{"type": "code_interpreter"}]}
    from conftest import clean_env
    p = subprocess.Popen(["/usr/bin/curl", "-sS", fake.url + "/responses", "-H",
                          "Authorization: Bearer sk-a", "-d", json.dumps(body)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=clean_env({"CODESHIM_RUNTIME_DIR": str(rt)}))
    try:
        assert wait_for(lambda: status(d)["lent"] == 1)
        assert wait_for(lambda: pool_full(d), timeout=60)  # refilled meanwhile
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # the lent sandbox ends with the program, and the host removes its cgroup
    assert wait_for(lambda: status(d)["lent"] == 0)
    assert wait_for(lambda: len(pooled - set(cgroup_dirs(host))) == per)
    assert len(set(cgroup_dirs(host))) == len(pooled)  # the ready ones' only


def ordinary_user(**extra):
    """For runs as TEST_USER (skipped unless root, with runuser): a copy
    of the build it can read, its runtime directory and environment (with
    extra), its pw entry: (build dir, runtime dir, env, pw); remove the
    build dir after."""
    if os.geteuid() != 0:
        pytest.skip("not root: the other tests ran as this ordinary user")
    if not os.path.exists("/usr/sbin/runuser"):
        pytest.skip("runuser (util-linux) is not installed")
    pw = _ensure_user()
    d, home = user_build(pw)
    urt = home / "rt"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home),
           "LD_PRELOAD": str(d / "libcodeshim.so"), "CODESHIM_RUNTIME_DIR": str(urt)}
    env.update(extra)
    return d, urt, env, pw


def test_an_ordinary_users_first_request_takes_a_pooled_sandbox(fake):
    d, urt, env, pw = ordinary_user(CODESHIM_LOG="debug")

    def user_ask(code):
        body = {"model": "m", "input": "```python\n%s\n```" % code,
                "tools": [{"type": "code_interpreter"}]}
        p = subprocess.run(["/usr/sbin/runuser", "-u", TEST_USER, "--", "/usr/bin/curl", "-sS",
                            fake.url + "/responses", "-H", "Authorization: Bearer sk-u",
                            "-d", json.dumps(body)], env=env, capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return logs(json.loads(p.stdout)), p.stderr.decode()

    host = None
    try:
        out, err = user_ask(PROBE)
        assert out == ISOLATED and COLD in err, err
        assert wait_for(lambda: len(user_hosts(urt)) == 1)
        [h] = user_hosts(urt)
        assert wait_for(lambda: pool_full(h), timeout=60)
        host = status(h)["pid"]
        assert os.stat("/proc/%d" % host).st_uid == pw.pw_uid
        out, err = user_ask(PROBE)
        assert out == ISOLATED and LENT in err, err
        assert status(h)["lent_total"] == 1
    finally:
        if host:
            os.kill(host, signal.SIGTERM)
            wait_for(lambda: not alive(host))
        shutil.rmtree(d, ignore_errors=True)


# The escape and limit checks, each run once the sandbox host of its
# settings has its pool ready: every sandbox they use is then a pooled one
# (the host's lent count says so), and they must hold exactly as for a
# sandbox started the cold way. (module, test, the module's settings that
# the test runs with, if any)
POOLED = [
    ("test_sandbox_escape", "test_no_network_no_secrets_no_host_files", None),
    ("test_sandbox_escape", "test_images_and_files_end_to_end", None),
    ("test_sandbox_escape", "test_files_persist_across_calls_of_one_request", None),
    ("test_escape_kernel", "test_supervisor_out_of_reach", None),
    ("test_escape_kernel", "test_new_system_calls_fail_enosys", None),
    ("test_escape_kernel", "test_host_proc_files_masked", None),
    ("test_escape_limits", "test_memfd_attack", "LIMITS"),
    ("test_escape_limits", "test_ten_processes_attack", "LIMITS"),
    ("test_escape_limits", "test_pipe_buffer_attack", "LIMITS"),
    ("test_escape_limits", "test_empty_files_attack", "LIMITS"),
    ("test_limits", "test_timeout_ms_private_sandbox", None),
]


@pytest.mark.parametrize("mod,name,settings", POOLED, ids=[n for _, n, _ in POOLED])
def test_escape_and_limit_checks_hold_in_pooled_sandboxes(tmp_path, mod, name, settings):
    import importlib
    import inspect
    import fake_openai
    from conftest import RUNTIME_DIR
    m = importlib.import_module(mod)
    env = dict(getattr(m, settings)) if settings else {}
    warm = fake_openai.start()
    try:
        # the host of these settings: new (its first request ran cold), or
        # one an earlier test started, which lent this request a sandbox;
        # the run's other hosts (other settings) are not waited for
        before = {h: lent_total(h) for h in user_hosts(RUNTIME_DIR)}
        ask(warm.url, PROBE, session=None, rt=RUNTIME_DIR, env=env)
        new = [h for h in user_hosts(RUNTIME_DIR) if h not in before]
        hosts = new + [h for h, n in before.items()
                       if n is not None and (lent_total(h) or 0) > n]
        assert hosts, before
        assert wait_for(lambda: all(pool_full(h) for h in hosts), timeout=60)
        counts = {h: status(h)["lent_total"] for h in hosts}
    finally:
        warm.stop()
    srv = fake_openai.start()
    try:
        args = {"fake": srv, "tmp_path": tmp_path}
        f = getattr(m, name)
        f(**{a: args[a] for a in inspect.signature(f).parameters})
    finally:
        srv.stop()
    lent = sum(status(h)["lent_total"] - counts[h] for h in hosts)
    assert lent >= 1, (new, counts)  # its sandboxes were the hosts' pooled ones


# The same as an ordinary user, but for checks whose program is built in
# the repository (which that user may not be able to read).
POOLED_USER = [p for p in POOLED if p[0] != "test_limits"]


@pytest.mark.parametrize("mod,name,settings", POOLED_USER, ids=[n for _, n, _ in POOLED_USER])
def test_escape_and_limit_checks_hold_in_an_ordinary_users_pooled_sandboxes(
        tmp_path, mod, name, settings):
    """The same checks with every program run as the ordinary user
    codeshim-test, against its own sandbox host's pooled sandboxes (the
    fork server then sits in a user namespace of its own)."""
    import importlib
    import inspect
    import fake_openai
    from conftest import as_ordinary_user
    m = importlib.import_module(mod)
    env = dict(getattr(m, settings)) if settings else {}
    d, urt, _, pw = ordinary_user()
    warm = fake_openai.start()
    try:
        with as_ordinary_user(TEST_USER, pw, d / "libcodeshim.so", urt):
            ask(warm.url, PROBE, session=None, rt=urt, env=env)
            assert wait_for(lambda: len(user_hosts(urt)) == 1)
            [h] = user_hosts(urt)
            assert os.stat(h / "pid").st_uid == pw.pw_uid
            assert wait_for(lambda: pool_full(h), timeout=60)
            before = status(h)["lent_total"]
            srv = fake_openai.start()
            try:
                os.chmod(tmp_path, 0o777)  # what the check writes for its programs to read
                args = {"fake": srv, "tmp_path": tmp_path}
                f = getattr(m, name)
                f(**{a: args[a] for a in inspect.signature(f).parameters})
            finally:
                srv.stop()
            assert status(h)["lent_total"] > before  # its sandboxes were pooled ones
    finally:
        warm.stop()
        stop_supervisors(d)  # (and what still runs ends with the user's cgroups)
        shutil.rmtree(d, ignore_errors=True)


def test_a_host_idle_longer_than_a_connections_wait_still_answers(fake, rt):
    """A connection that arrives after the host waited more than
    SESSIOND_IDLE_MS (10 s) for one is read, not dropped as if it had
    waited that long itself."""
    d = warm_host(fake.url, rt)
    s = status(d)
    t = time.monotonic()
    while time.monotonic() - t < 11:  # the host sits in one long poll meanwhile
        time.sleep(0.5)
    assert status(d)["pid"] == s["pid"]
    out, err, _ = private(fake.url, rt)
    assert out == ISOLATED and LENT in err, err


def test_an_identitys_first_session_takes_a_pooled_sandbox(fake, rt):
    """A new identity's first session takes a sandbox of the user's host's
    pool (no host, no fork server of its own), and keeps its state across
    program runs like any session's."""
    d = warm_host(fake.url, rt)
    ask(fake.url, "x = 41", key="sk-carol", session="s", rt=rt)
    assert status(d)["lent_total"] == 1 and status(d)["lent"] == 1
    r = ask(fake.url, "import os\nprint(x + 1, os.getuid())", key="sk-carol", session="s",
            rt=rt)
    assert logs(r) == "42 1000\n"
    # another identity's first session: a sandbox of its own, none of carol's
    r = ask(fake.url, "print(globals().get('x'))", key="sk-dave", session="s", rt=rt)
    assert logs(r) == "None\n"
    assert status(d)["lent_total"] == 2


def test_no_key_has_a_host_or_fork_server_of_its_own(fake, rt):
    """Sessions of any number of keys live in the one host: each session is
    a process the host started, holding a sandbox lent from its pool (so no
    bubblewrap, no fork server importing the data libraries for each key),
    and there is no host per key."""
    from test_sessions import supervisors
    d = warm_host(fake.url, rt)
    [host] = supervisors(rt, "hosts/*/pid")
    for key in ("sk-erin", "sk-frank"):
        for s in ("a", "b"):
            assert wait_for(lambda: pool_full(d), timeout=60)
            assert logs(ask(fake.url, "print(1)", key=key, session=s, rt=rt)) == "1\n"
    assert not list(rt.glob("*/hosts"))
    sessions = set(supervisors(rt))
    assert len(sessions) == 4
    for p in sessions:
        assert ppid(p) == host
        assert descendants(p) == set()  # its sandbox is the host's fork server's child
    assert status(d)["lent"] == 4 and status(d)["sessions"] == 4
