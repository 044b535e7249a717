"""Limits that hold for a sandbox as a whole, as a program meets them: each
attack is model-written code run through the curl CLI under codeshim (the
model-mode fake upstream), with CODESHIM_MEMORY=256M. The memory each one
holds at once stays under the limit (it reports its own progress; the
code gets an error or is killed, and the model is told), the file-count
attack stops at the tmpfs inode limit, and the program gets its normal
answer. Also: the cgroup of a sandbox whose program was killed is removed
by the next start, and `codeshim --check` reports what holds.

The memory attacks need the sandbox's cgroup (root here: the cgroup v1
memory and pids controllers are writable); where `codeshim --check` says
there is none they are skipped, as that is the documented fallback (per
process limits only; tests/sandbox/test_sandbox_limits.c checks it as an
ordinary user). Each attack stops by itself at a few times the limit."""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import REPO, clean_env, run
from test_core_responses import (ENV, blocks, ci_items, curl_cmd, logs_of,
                                 ours, req)
from test_sandbox_escape import _ensure_user, one_call

LAUNCHER = REPO / "build" / "codeshim"
LIMIT_MB = 256
LIMITS = {"CODESHIM_MEMORY": "%dM" % LIMIT_MB}

_check = {}


def check(env=None):
    """`codeshim --check` with env: (exit code, stdout text)."""
    rc, out, err = run([str(LAUNCHER), "--check"], env=env, preload=False,
                       cwd="/")
    return rc, out.decode("utf-8", "replace")


def machine():
    """What --check says about this machine, once: the cgroup line and
    whether the tmpfs have file-count limits."""
    if not _check:
        rc, out = check(LIMITS)
        assert rc == 0, out
        line = re.search(r"^  cgroup +(.*)$", out, re.M).group(1)
        _check["cgroup"] = not line.startswith("none")
        _check["inodes"] = "no file-count limit" not in out
        _check["text"] = out
    return _check


def need_cgroup():
    if not machine()["cgroup"]:
        pytest.skip("no cgroup can be made here: memory is limited per process "
                    "only (the documented fallback)")


def attack(fake, code, word):
    """Runs code that prints '<word> <MB>' as it goes; returns (MB it held
    at most, the code_interpreter_call item, its logs)."""
    r, ci, logs, told = one_call(fake, code, env=LIMITS)
    assert told == logs  # the model saw what the code saw
    assert ci["status"] in ("completed", "failed"), ci
    mbs = [int(m) for m in re.findall(re.escape(word) + r" (\d+)", logs)]
    assert mbs, logs
    assert r["status"] == "completed"
    return max(mbs), ci, logs


# The forking attacks: the reporting parent is the OOM killer's last
# choice in the sandbox, its kids the first; they set flags[i] once they
# hold their share; the parent waits (bounded) until each holds it or is
# gone, then counts what the live ones hold.
OOM_ORDER = ("def oom(v):\n"
             "    open('/proc/self/oom_score_adj', 'w').write(str(v))\n"
             "oom(500)\n")
WAIT_KIDS = ("alive = set(kids)\n"
             "def reap():\n"
             "    for k in list(alive):\n"
             "        if os.waitpid(k, os.WNOHANG)[0]:\n"
             "            alive.discard(k)\n"
             "end = time.time() + 20\n"
             "while time.time() < end:\n"
             "    reap()\n"
             "    if all(flags[i] for i, k in enumerate(kids) if k in alive):\n"
             "        break\n"
             "    time.sleep(0.05)\n"
             "time.sleep(0.3)\n"
             "reap()\n")
KILL_KIDS = ("for k in alive:\n"
             "    os.kill(k, 9)\n"
             "    os.waitpid(k, 0)\n")


def test_memfd_attack(fake):
    """memfd_create: memory no address-space limit sees (it reached 2 GB)."""
    need_cgroup()
    mb, ci, logs = attack(fake,
                          "import os\n"
                          "fds, mb = [], 0\n"
                          "try:\n"
                          "    while mb < 1024:\n"
                          "        fd = os.memfd_create('x')\n"
                          "        fds.append(fd)\n"
                          "        for i in range(16):\n"
                          "            os.write(fd, b'x' * (1 << 20))\n"
                          "        mb += 16\n"
                          "        print('memfd', mb, flush=True)\n"
                          "except OSError as e:\n"
                          "    print('stopped', e.errno)\n",
                          "memfd")
    assert mb < LIMIT_MB, logs


def test_ten_processes_attack(fake):
    """Ten processes of 100 MB, each under the per-process cap (4 GB in
    all before): what they hold at once stays under the sandbox's limit."""
    need_cgroup()
    mb, ci, logs = attack(fake,
                          "import mmap, os, time\n" + OOM_ORDER +
                          "flags = mmap.mmap(-1, 64)\n"
                          "kids = []\n"
                          "for i in range(10):\n"
                          "    pid = os.fork()\n"
                          "    if pid == 0:\n"
                          "        oom(1000)\n"
                          "        a = b'x' * (100 << 20)\n"
                          "        flags[i] = 1\n"
                          "        time.sleep(30)\n"
                          "        os._exit(0)\n"
                          "    kids.append(pid)\n" + WAIT_KIDS +
                          "held = sum(100 for i, k in enumerate(kids) "
                          "if k in alive and flags[i])\n"
                          "print('held', held, 'alive', len(alive), flush=True)\n"
                          + KILL_KIDS,
                          "held")
    assert mb < LIMIT_MB, logs


def test_pipe_buffer_attack(fake):
    """Pipe buffers across 128 processes (2 GB of kernel memory before):
    bounded by the sandbox's memory limit."""
    need_cgroup()
    mb, ci, logs = attack(fake,
                          "import mmap, os, struct, time\n" + OOM_ORDER +
                          "N = 128\n"
                          "flags = mmap.mmap(-1, N)\n"
                          "held = mmap.mmap(-1, 8 * N)\n"
                          "kids = []\n"
                          "for i in range(N):\n"
                          "    pid = os.fork()\n"
                          "    if pid == 0:\n"
                          "        oom(1000)\n"
                          "        fds, total = [], 0\n"
                          "        try:\n"
                          "            while len(fds) < 4000:\n"
                          "                r, w = os.pipe()\n"
                          "                fds += [r, w]\n"
                          "                os.set_blocking(w, False)\n"
                          "                try:\n"
                          "                    total += os.write(w, b'x' * 65536)\n"
                          "                except BlockingIOError:\n"
                          "                    pass\n"
                          "                held[8 * i:8 * i + 8] = struct.pack('q', total)\n"
                          "        except OSError:\n"
                          "            pass\n"
                          "        flags[i] = 1\n"
                          "        time.sleep(30)\n"
                          "        os._exit(0)\n"
                          "    kids.append(pid)\n" + WAIT_KIDS +
                          "mb = sum(struct.unpack('q', held[8 * i:8 * i + 8])[0] "
                          "for i, k in enumerate(kids) if k in alive) >> 20\n"
                          "print('pipes', mb, 'alive', len(alive), flush=True)\n"
                          + KILL_KIDS,
                          "pipes")
    assert mb < LIMIT_MB, logs


def test_empty_files_attack(fake):
    """Empty files (millions before: GBs of kernel memory) stop at the
    tmpfs's file-count limit, CODESHIM_INODES (default 65536), with
    ENOSPC; /tmp has its own."""
    if not machine()["inodes"]:
        pytest.skip("this machine refuses codeshim's own tmpfs mounts")
    mb, ci, logs = attack(fake,
                          "import errno, os\n"
                          "for d in ['/mnt/data/many', '/tmp/many']:\n"
                          "    os.makedirs(d)\n"
                          "    n = 0\n"
                          "    try:\n"
                          "        while n < 200000:\n"
                          "            os.close(os.open('%s/%d' % (d, n), "
                          "os.O_CREAT | os.O_WRONLY))\n"
                          "            n += 1\n"
                          "    except OSError as e:\n"
                          "        print(d, 'files', n, errno.errorcode[e.errno], "
                          "flush=True)\n",
                          "files")
    counts = re.findall(r"(/\S+) files (\d+) (\w+)", logs)
    assert [(d, e) for d, _, e in counts] == [("/mnt/data/many", "ENOSPC"),
                                            ("/tmp/many", "ENOSPC")], logs
    for _, n, _ in counts:
        assert 65000 < int(n) < 65536, logs


# ------------------------------------------------------ the cgroup's life

def cgroup_dirs(pid):
    """Sandbox cgroups of the process pid: next to or below the cgroups of
    this test (pid is its child, in the same ones)."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a, _, b = line.partition(" - ")
            if b.split()[0] in ("cgroup", "cgroup2"):
                mounts.append(a.split()[4])
    found = set()
    with open("/proc/self/cgroup") as f:
        paths = [line.rstrip("\n").split(":", 2)[2] for line in f]
    for m in mounts:
        for p in paths:
            d = (m + p).rstrip("/")
            for base in (d, os.path.dirname(d)):
                found.update(glob.glob("%s/codeshim-*-%d-*" % (base, pid)))
    return sorted(found)


def procs_in(d):
    """The pids in cgroup d; none once it is gone (any codeshim process on
    the machine that starts a sandbox may remove a dead program's cgroup)."""
    try:
        with open(d + "/cgroup.procs") as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def test_cgroup_of_a_killed_program_is_removed_by_the_next(fake, tmp_path):
    """kill -9 of the program mid-execution: its sandbox dies with it and
    leaves an empty cgroup directory (nothing is left to remove it); the
    next program's sandbox start removes it. (Sandboxes the program starts
    itself: a sandbox host's are the host's, test_sandbox_host.py.)"""
    need_cgroup()
    cold = dict(LIMITS, CODESHIM_SANDBOX_HOST="0")
    p = subprocess.Popen(curl_cmd(fake.url + "/responses"), stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=clean_env(dict(ENV, **cold), True, tmp_path))
    p.stdin.write(json.dumps(req(blocks("import time\nprint('up', flush=True)\n"
                                        "time.sleep(1000.701)\n"))).encode())
    p.stdin.close()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not cgroup_dirs(p.pid):
            time.sleep(0.05)
        dirs = cgroup_dirs(p.pid)
        assert dirs
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(procs_in(d) for d in dirs):
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # the sandbox goes with the program; its cgroup stays behind, empty
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(procs_in(d) for d in dirs):
        time.sleep(0.05)
    assert not any(procs_in(d) for d in dirs)
    # the next start removes it
    [ci] = ci_items(ours(fake.url + "/responses", req(blocks("print('next')\n")),
                         env=cold))
    assert logs_of(ci) == "next\n"
    assert not any(os.path.exists(d) for d in dirs), dirs


# ---------------------------------------------------------- codeshim --check

def test_check_reports_the_isolation():
    """The sandbox runs isolated; the cgroup mechanism and the limits that
    hold per sandbox and per process are named."""
    m = machine()
    out = m["text"]
    assert "result: code runs isolated" in out, out
    assert re.search(r"^  bubblewrap +found: /usr/bin/bwrap", out, re.M), out
    assert re.search(r"^  seccomp +filter in force", out, re.M), out
    assert re.search(r"^  sandbox +code ran isolated", out, re.M), out
    per_sandbox, per_process = out.split("limits per process:")
    if m["cgroup"]:
        assert re.search(r"^  cgroup +v[12], memory", out, re.M), out
        assert re.search(r"^  memory +256 MiB \(cgroup", per_sandbox, re.M), out
        assert re.search(r"^  tasks +258 \(cgroup pids.max", per_sandbox, re.M), out
    else:
        assert re.search(r"^  memory +none", per_sandbox, re.M), out
    assert re.search(r"^  /mnt/data +1 GiB and 65536 files", per_sandbox, re.M), out
    assert re.search(r"^  address space +256 MiB$", per_process, re.M), out
    assert re.search(r"^  open files +1024$", per_process, re.M), out


def test_check_fails_without_isolation():
    """No bubblewrap, or the unsafe mode: exit 1 and said so."""
    rc, out = check({"CODESHIM_BWRAP": "/nonexistent/bwrap"})
    assert rc == 1 and "MISSING: /nonexistent/bwrap" in out, out
    assert "result: code does NOT run isolated" in out
    rc, out = check({"CODESHIM_UNSAFE_NO_ISOLATION": "1"})
    assert rc == 1 and "NONE" in out, out
    rc, out, err = run([str(LAUNCHER), "--python", "/nonexistent/python3",
                        "--check"], preload=False)
    assert rc == 1 and b"FAILED" in out, out
    rc, out, err = run([str(LAUNCHER), "--check", "/usr/bin/true"], preload=False)
    assert rc == 2 and b"--check runs no PROGRAM" in err


def test_check_as_an_ordinary_user():
    """An ordinary user gets no cgroup here: still isolated, memory per
    process only, and said so."""
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    if os.geteuid() != 0 or not os.path.exists(runuser):
        pytest.skip("needs root and runuser to switch to an ordinary user")
    pw = _ensure_user()
    d = tempfile.mkdtemp(prefix="codeshim-check-")
    try:
        os.chmod(d, 0o755)  # the repository may be private to root: copy
        exe = os.path.join(d, "codeshim")
        shutil.copy(LAUNCHER, exe)
        p = subprocess.run([runuser, "-u", pw.pw_name, "--", exe, "--check"],
                           env={"PATH": "/usr/bin:/bin", "HOME": d}, cwd=d,
                           capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "result: code runs isolated" in p.stdout
    if "cgroup            none" in p.stdout:
        assert re.search(r"^  memory +none", p.stdout, re.M), p.stdout
