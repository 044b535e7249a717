"""The sandbox's kernel surface, attacked the way a program meets
it: model-written code run by codeshim inside the curl CLI (against the
model-mode fake upstream), across separate curl runs where the attack needs
the sandbox to sit idle between executions (a session).

- PID 1 (the supervisor) is out of the code's reach: signals, rlimits,
  priorities and schedulers aimed at it fail, and it goes on serving;
- system calls newer than the seccomp filter fail with ENOSYS;
- host-identifying /proc files read empty;
- nothing of the code runs between executions, even after it forged the
  interpreter's reply, and code that resumes itself is killed and the
  model told.

The exhaustive attacks are in tests/sandbox/test_sandbox_escape.c."""

import time

from conftest import wait_for
from test_core_responses import blocks, ci_items, logs_of, ours, req
from test_sandbox_escape import host_procs
from test_sessions import ask, logs, rt  # noqa: F401 (rt is a fixture)

PID1 = """\
import errno, os, resource, signal
def deny(what, f):
    try:
        f()
        print(what, 'REACHED PID 1')
    except OSError as e:
        print(what, errno.errorcode[e.errno])
deny('kill SIGINT', lambda: os.kill(1, signal.SIGINT))
deny('kill SIGTERM', lambda: os.kill(1, signal.SIGTERM))
deny('sched idle', lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)))
deny('nice', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
deny('nice user', lambda: os.setpriority(os.PRIO_USER, 0, 19))
deny('pidfd', lambda: signal.pidfd_send_signal(os.open('/proc/1', os.O_RDONLY), signal.SIGINT))
deny('prlimit', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3)))
print('pid1 policy', os.sched_getscheduler(1), 'nice', os.getpriority(os.PRIO_PROCESS, 1))
"""

SYSCALLS = """\
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for nr in (467, 500, 1000):
    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(-100), b'/', ctypes.c_long(0))
    print('syscall', nr, 'RETURNED %d' % rc if rc >= 0 else errno.errorcode[ctypes.get_errno()])
"""

MASKED = ["/proc/cmdline", "/proc/sys/kernel/random/boot_id", "/proc/config.gz",
          "/proc/partitions", "/proc/iomem", "/proc/timer_list", "/proc/keys",
          "/proc/kcore", "/proc/sched_debug", "/proc/swaps"]

# A thread answers for the interpreter, then for every later execution (it
# runs them itself); a child stamps the time into a file every 5 ms.
FORGE = """\
import os, socket, sys, threading, time
f = sys._getframe()
while 'sock' not in f.f_locals:
    f = f.f_back
sock, seq = f.f_locals['sock'], f.f_locals['seq']
def send(b):
    sock.sendall(len(b).to_bytes(4, 'big') + b)
def recv(n):
    b = b''
    while len(b) < n:
        b += sock.recv(n - len(b))
    return b
def impostor():
    import contextlib, io
    while True:
        hdr, anc, _, _ = sock.recvmsg(4, socket.CMSG_SPACE(16))
        out = int.from_bytes(anc[0][2][:4], sys.byteorder)
        p = recv(int.from_bytes(hdr, 'big'))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(p[5:].decode(), {})
        os.write(out, buf.getvalue().encode())
        os.close(out)
        send(p[1:5] + b'{"status":"ok","images":[]}')
if os.fork() == 0:
    while True:
        with open('/mnt/data/stamps', 'a') as s:
            s.write('%.6f\\n' % time.monotonic())
        time.sleep(0.005)
threading.Thread(target=impostor, daemon=True).start()
print('forged', flush=True)
send(seq + b'{"status":"ok","images":[]}')
time.sleep(1000)
"""

# A child arms a POSIX timer that sends it SIGCONT in 0.3 s (a way out of
# being stopped), then starts a marker the host can see.
RESUME = """\
import ctypes, os, struct, time
r, w = os.pipe()
if os.fork() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    t = ctypes.c_void_p()
    ev = bytes(8) + struct.pack('ii', 18, 0) + bytes(48)
    libc.timer_create(1, ev, ctypes.byref(t))
    libc.timer_settime(t, 0, struct.pack('4q', 0, 0, 0, 300000000), None)
    os.write(w, b'armed')
    time.sleep(0.3)
    os.execvp('sleep', ['sleep', '1000.951'])
print(os.read(r, 5).decode())
"""




def test_supervisor_out_of_reach(fake):
    """Every signal, priority, scheduler and rlimit call aimed at PID 1
    fails; the same supervisor and interpreter run the next call."""
    r = ours(fake.url + "/responses",
             req(blocks(PID1, "print('alive')\n")), timeout=120)
    first, second = ci_items(r)
    out = logs_of(first)
    assert "REACHED" not in out, out
    for what in ("kill SIGINT", "kill SIGTERM", "sched idle", "nice", "nice user",
                 "pidfd", "prlimit"):
        assert "%s EPERM\n" % what in out, out
    assert "pid1 policy 0 nice 0\n" in out, out
    assert second["status"] == "completed"
    assert logs_of(second) == "alive\n"  # no restart note


def test_new_system_calls_fail_enosys(fake):
    r = ours(fake.url + "/responses", req(blocks(SYSCALLS)), timeout=120)
    [ci] = ci_items(r)
    assert logs_of(ci) == ("syscall 467 ENOSYS\nsyscall 500 ENOSYS\n"
                           "syscall 1000 ENOSYS\n"), logs_of(ci)


def test_host_proc_files_masked(fake):
    """What identifies the host in /proc reads empty inside; the host
    itself reads it."""
    for p in ("/proc/cmdline", "/proc/sys/kernel/random/boot_id"):
        with open(p, "rb") as f:
            assert f.read()
    code = ("for p in %r:\n"
            "    try:\n"
            "        n = len(open(p, 'rb').read())\n"
            "    except OSError:\n"
            "        n = 0\n"
            "    print('masked' if n == 0 else 'UNMASKED', p)\n" % (MASKED,))
    r = ours(fake.url + "/responses", req(blocks(code)), timeout=120)
    [ci] = ci_items(r)
    assert logs_of(ci) == "".join("masked %s\n" % p for p in MASKED), logs_of(ci)


def test_forged_reply_runs_nothing_while_idle(fake, rt):  # noqa: F811
    """The code forges the interpreter's reply and keeps a child writing
    time stamps: none of them falls in a time the session sat idle."""
    env = {"CODESHIM_EXEC_TIMEOUT": "5"}
    assert "forged" in logs(ask(fake.url, FORGE, rt=rt, env=env))
    assert "serving" in logs(ask(fake.url, "print('serving')", rt=rt, env=env))
    idle_from = time.monotonic()
    time.sleep(0.4)  # the idle time the attack is after
    idle_to = time.monotonic()
    count = ("s = open('/mnt/data/stamps').read().split()\n"
             "print('idle stamps', sum(%.6f < float(x) < %.6f for x in s))"
             % (idle_from, idle_to))
    out = logs(ask(fake.url, count, rt=rt, env=env))
    if "timed out" in out:
        # the impostor and the real interpreter both read the request: when
        # they split it, neither answers and the interpreter is restarted;
        # the stamps (in /mnt/data) are still there to count
        out = logs(ask(fake.url, count, rt=rt, env=env))
    assert "idle stamps 0\n" in out, out


def test_code_that_resumes_itself_is_killed(fake, rt):  # noqa: F811
    """A child that resumes itself while the session is idle is caught
    within about a second: every process is killed, the model is told."""
    assert "armed" in logs(ask(fake.url, RESUME, rt=rt))
    assert wait_for(lambda: host_procs("sleep", "1000.951"))  # it ran...
    assert wait_for(lambda: not host_procs("sleep", "1000.951"))  # ...and died
    out = logs(ask(fake.url, "import os\nprint(sorted(int(p) for p in "
                   "os.listdir('/proc') if p.isdigit())[0])", rt=rt))
    assert "kept running after that execution had ended" in out, out
    assert out.endswith("\n1\n"), out
