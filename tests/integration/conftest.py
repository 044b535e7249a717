"""Fixtures and helpers for codeshim's integration tests.

    def test_x(fake):                    # model-mode fake upstream, stopped after
        rc, out, err = run(["/usr/bin/curl", "-sS", fake.url + "/responses", ...],
                           env={"OPENAI_API_KEY": "sk-test"})
        fake.requests()                  # what the upstream received

    def test_y(scripted):                # factory: scripted(list_of_replies)
        up = scripted([{"status": 200, "body": {...}}, {"close": True}])

Helpers (import them: ``from conftest import run, parse_sse, LIB, REPO``):
    run(cmd, env=None, input=None, timeout=60, preload=True, cwd=None)
        -> (returncode, stdout bytes, stderr bytes); runs cmd with
        LD_PRELOAD=LIB in a minimal clean environment (PATH=/usr/bin:/bin,
        HOME=a fresh temporary directory, plus env); nothing else is
        inherited (never the real OPENAI_API_KEY).  preload=False runs the
        same program without codeshim (baseline).
    parse_sse(data) -> [(event name or None, data string), ...]
    sse_json(data)  -> [(event name or None, parsed JSON or "[DONE]"), ...]
    ppid(pid), alive(pid) (runs, not a zombie), descendants(pid) (every
        process whose ancestry includes pid): from /proc
The fake (tests/fakes/fake_openai.py) and the validator
(tests/tools/schema_check.py) are importable as fake_openai and schema_check.
"""

import json
import contextlib
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# make tsan runs tests against another build of the library: it names it
# in CODESHIM_TEST_LIB, what must be preloaded before it (the sanitizer's
# runtime) in CODESHIM_TEST_PRELOAD, and its TSAN_OPTIONS pass through.
LIB = Path(os.environ.get("CODESHIM_TEST_LIB") or REPO / "build" / "libcodeshim.so")
PRELOAD_FIRST = os.environ.get("CODESHIM_TEST_PRELOAD", "")
PYTHON = "/usr/bin/python3"

for _d in (REPO / "tests" / "fakes", REPO / "tests" / "tools"):
    if str(_d) not in sys.path:
        sys.path.insert(0, str(_d))

import fake_openai  # noqa: E402
import schema_check  # noqa: E402

BASE_PATH = "/usr/bin:/bin"


def wait_for(cond, timeout=30.0, step=0.02):
    """Polls cond until it returns something true, and returns that; at the
    deadline, returns its last (false) value for the caller to assert. The
    one way a test waits for a condition: never a sleep of a guessed length."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)

# Sessions live in a runtime directory of this test run, never the user's
# real one, and every session supervisor a test leaves behind is stopped
# when the run ends (pytest_sessionfinish).
RUNTIME_DIR = Path(tempfile.mkdtemp(prefix="codeshim-rt-"))


def stop_supervisors(root):
    """SIGTERM every session supervisor whose pid file is under root."""
    import signal
    for d, _, files in os.walk(root):  # skips directories removed meanwhile
        if "pid" not in files:
            continue
        try:
            os.kill(int((Path(d) / "pid").read_text()), signal.SIGTERM)
        except (ValueError, OSError):
            pass


@pytest.fixture(autouse=True)
def _stop_what_the_test_started(tmp_path):
    """A test that gives codeshim a runtime directory of its own (under its
    tmp_path) leaves the user's sandbox host and session hosts there
    running for their TTL, each with a fork server and a pool: stopped as
    the test ends, so a whole run never holds hundreds of them."""
    yield
    stop_supervisors(tmp_path)


def pytest_sessionfinish(session, exitstatus):
    stop_supervisors(RUNTIME_DIR)
    shutil.rmtree(RUNTIME_DIR, ignore_errors=True)


@pytest.fixture
def fake():
    """A fake upstream in model mode on 127.0.0.1; .url ends in /v1."""
    srv = fake_openai.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def scripted():
    """Factory: scripted(list_of_replies) -> started fake; all stopped after."""
    servers = []

    def make(script):
        srv = fake_openai.start(script=script)
        servers.append(srv)
        return srv

    try:
        yield make
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def lib():
    """Path of the built library; fails the test clearly when it is missing."""
    if not LIB.exists():
        pytest.fail("%s is missing: run `make` first" % LIB)
    return LIB


def clean_env(env=None, preload=True, home=None):
    e = {"PATH": BASE_PATH}
    if home is not None:
        e["HOME"] = str(home)
    if preload:
        e["LD_PRELOAD"] = (PRELOAD_FIRST + " " + str(LIB)).strip()
        e["CODESHIM_RUNTIME_DIR"] = str(RUNTIME_DIR)
        if "TSAN_OPTIONS" in os.environ:
            e["TSAN_OPTIONS"] = os.environ["TSAN_OPTIONS"]
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = str(v)
    return e


# While a test runs its programs as an ordinary user (as_ordinary_user):
# the user, its pw entry, its copy of the library and its runtime directory.
AS_USER = {}


CGROUP_V1 = Path("/sys/fs/cgroup")


def _delegate(pw):
    """A cgroup of its own in each writable v1 memory and pids hierarchy,
    given to pw's user, as a system delegates one to a user's session:
    [cgroup dir, ...] ([] where there are none)."""
    out = []
    for ctl in ("memory", "pids"):
        root = CGROUP_V1 / ctl
        if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
            continue
        d = root / ("codeshim-test-user-%d" % os.getpid())
        d.mkdir(exist_ok=True)
        for f in [d] + [d / n for n in ("cgroup.procs", "tasks")]:
            os.chown(f, pw.pw_uid, pw.pw_gid)
        out.append(d)
    return out


def _undelegate(dirs):
    """Ends whatever of the user's still runs in dirs, then removes them,
    the sandboxes' cgroups below first."""
    for d in dirs:
        # (the host removes its sandboxes' cgroups meanwhile: a walk that
        # finds one gone goes on)
        subs = sorted([Path(top) for top, _, _ in os.walk(d, onerror=lambda e: None)],
                      key=lambda p: -len(p.parts))
        for sub in subs:
            try:  # (the host may be removing it meanwhile)
                pids = (sub / "cgroup.procs").read_text().split()
            except FileNotFoundError:
                pids = []
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for sub in subs:
            wait_for(lambda: _rmdir(sub), timeout=10)


def _rmdir(d):
    try:
        d.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


@contextlib.contextmanager
def as_ordinary_user(user, pw, lib, runtime):
    """Every program run() starts meanwhile runs as user (runuser), with
    lib preloaded and runtime as its runtime directory, in cgroups
    delegated to it: the same checks, an unprivileged user's sandboxes."""
    cgroups = _delegate(pw)
    AS_USER.update(user=user, pw=pw, lib=str(lib), runtime=str(runtime), cgroups=cgroups)
    try:
        yield
    finally:
        AS_USER.clear()
        _undelegate(cgroups)


def _as_user(cmd, e, home):
    e["LD_PRELOAD"] = AS_USER["lib"]
    e["CODESHIM_RUNTIME_DIR"] = AS_USER["runtime"]
    os.chown(home, AS_USER["pw"].pw_uid, AS_USER["pw"].pw_gid)
    join = "".join("echo $$ > %s/cgroup.procs; " % d for d in AS_USER["cgroups"])
    return (["/bin/sh", "-c", join + 'exec "$@"', "sh",
             "/usr/sbin/runuser", "-u", AS_USER["user"], "--", "/usr/bin/env", "-i"] +
            ["%s=%s" % kv for kv in e.items()] + cmd)


def run(cmd, env=None, input=None, timeout=60, preload=True, cwd=None):
    """Run cmd under LD_PRELOAD=LIB with a minimal clean environment.

    env: extra variables (a value of None removes a default one).
    input: bytes or str for stdin.  Returns (returncode, stdout, stderr)."""
    if preload and not LIB.exists():
        raise FileNotFoundError("%s is missing: run `make` first" % LIB)
    if isinstance(input, str):
        input = input.encode("utf-8")
    home = tempfile.mkdtemp(prefix="codeshim-home-")
    try:
        e = clean_env(env, preload, home)
        cmd = [str(c) for c in cmd]
        if AS_USER and preload:
            cmd = _as_user(cmd, e, home)
        p = subprocess.run(cmd, env=e,
                           input=input, stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout, p.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)


def parse_sse(data):
    """Split an SSE byte stream into [(event name or None, data string)].

    Follows the HTML event-stream rules: CRLF/LF/CR line ends, lines starting
    with ':' are comments, "field: value" loses one leading space, several
    data lines are joined with '\\n', an event is dispatched on a blank line
    only when it has data (an unterminated last event is dropped, as clients
    do)."""
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data).decode("utf-8")
    if data.startswith("\ufeff"):
        data = data[1:]
    out = []
    event, buf = None, []
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for line in lines[:-1]:     # the part after the last line end is incomplete
        if line == "":
            if buf:
                out.append((event, "\n".join(buf)))
            event, buf = None, []
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            buf.append(value)
    return out


def sse_json(data):
    """parse_sse, with each data parsed as JSON ("[DONE]" kept as a string)."""
    return [(ev, d if d.strip() == "[DONE]" else json.loads(d))
            for ev, d in parse_sse(data)]


def _stat_fields(pid):
    """/proc/<pid>/stat after the command name: state, ppid, ..."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rpartition(")")[2].split()


def ppid(pid):
    return int(_stat_fields(pid)[1])


def alive(pid):
    """pid runs (and is not a zombie)."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except OSError:
        return False


def descendants(pid):
    """Every process whose ancestry includes pid (pids)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = ppid(int(d))
            except (OSError, IndexError, ValueError):
                continue
    out = set()
    for p in parent:
        q = p
        while q in parent and q > 1:
            q = parent[q]
            if q == pid:
                out.add(p)
                break
    return out
