"""The local sandbox end to end: escape attempts, images and files, through
the Responses loop of a real program (the curl CLI under codeshim, against
the model-mode fake upstream), plus the sandbox unit suites run again as an
ordinary user (CI runs as root).

The exhaustive attacks are in tests/sandbox/test_sandbox_escape.c (they drive
the sandbox directly, which is faster); here each kind that matters to a
program is checked the way a program meets it."""

import base64
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import REPO, clean_env, run
import schema_check
from test_core_responses import (ENV, KEY, blocks, bodies, ci_items, curl_cmd,
                                 final_text, logs_of, ours, outputs_sent, req)

UNIT = [REPO / "build" / "sandbox-tests" / "test_sandbox",
        REPO / "build" / "sandbox-tests" / "test_sandbox_escape",
        REPO / "build" / "sandbox-tests" / "test_sandbox_spare",
        REPO / "build" / "sandbox-tests" / "test_sandbox_limits",
        REPO / "build" / "sandbox-tests" / "test_sandbox_fork",
        REPO / "build" / "sandbox-tests" / "test_sandbox_files"]
TEST_USER = "codeshim-test"


def host_args():
    """(pid, [arguments as bytes]) of every host process."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                yield int(pid), f.read().split(b"\0")
        except OSError:
            continue


def host_procs(argv0, arg1):
    """Host processes whose command line is argv0 (base name) then arg1."""
    return [pid for pid, args in host_args()
            if len(args) > 1 and os.path.basename(args[0]) == argv0.encode()
            and args[1] == arg1.encode()]


def one_call(fake, code, env=None):
    """Runs code through codeshim's tool; returns (response, item, logs,
    what the model was told)."""
    r = ours(fake.url + "/responses", req(blocks(code)), env=env)
    [ci] = ci_items(r)
    told = list(outputs_sent(bodies(fake)[1]).values())[0]
    return r, ci, logs_of(ci), told


def test_no_network_no_secrets_no_host_files(fake, tmp_path):
    """The program's key, its environment, its files and its upstream are
    all out of reach of the code it runs."""
    secret = tmp_path / "program-secret.txt"
    secret.write_text("SECRET-FILE")
    port = int(fake.url.split(":")[2].split("/")[0])
    code = ("import os, socket\n"
            "print('env', sorted(os.environ))\n"
            "print('KEY' if '%s' in open('/proc/self/environ').read() else "
            "'no key')\n"
            "for fam, addr in [(socket.AF_INET, ('127.0.0.1', %d)), "
            "(socket.AF_INET6, ('::1', %d)), (socket.AF_INET, "
            "('169.254.169.254', 80))]:\n"
            "    try:\n"
            "        socket.create_connection(addr, 2)\n"
            "        print('CONNECTED', addr)\n"
            "    except OSError as e:\n"
            "        print('no connection', e.errno)\n"
            "for p in ['%s', '/etc/shadow', '/root/.ssh/id_rsa']:\n"
            "    try:\n"
            "        print('READ', open(p).read()[:20])\n"
            "    except OSError:\n"
            "        print('unreadable')\n"
            % (KEY, port, port, secret))
    r, ci, logs, told = one_call(fake, code, env={"CODESHIM_LOG": "warn"})
    assert ci["status"] == "completed"
    assert "CONNECTED" not in logs and "READ" not in logs and "KEY" not in logs, logs
    assert logs.count("no connection") == 3 and logs.count("unreadable") == 3, logs
    assert "env ['HOME', 'LANG', 'MPLBACKEND', 'PATH', 'PWD', " \
           "'PYTHONDONTWRITEBYTECODE', 'TMPDIR', 'USER']" in logs, logs
    assert KEY not in logs and "SECRET-FILE" not in logs
    # the upstream saw one code call and one follow-up, nothing from the code
    assert len(fake.requests()) == 2
    assert told == logs


def test_images_and_files_end_to_end(fake):
    """A figure comes back as an image output (and the model is told); files
    the code writes are listed in the logs so the model can refer to them."""
    code = ("import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9])\n"
            "plt.savefig('plot.png')\n"
            "open('data.csv', 'w').write('x,y\\n1,1\\n')\n"
            "print('ok')\n")
    r, ci, logs, told = one_call(fake, code)
    assert ci["status"] == "completed", logs
    assert logs == ("ok\n[image produced: figure 1 (PNG)]\n"
                    "[files in /mnt/data: data.csv, plot.png]\n"), logs
    imgs = [o for o in ci["outputs"] if o["type"] == "image"]
    assert len(imgs) == 1
    png = base64.b64decode(imgs[0]["url"].split(",", 1)[1])
    assert imgs[0]["url"].startswith("data:image/png;base64,")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[files in /mnt/data: data.csv, plot.png]" in told
    assert "image produced" in told and "base64" not in told
    assert final_text(r).startswith("Done. Tool said: ok")


def test_files_persist_across_calls_of_one_request(fake):
    """Two code calls in one request share the sandbox: the second sees the
    first one's file, and the listing is only repeated when it changes."""
    r = ours(fake.url + "/responses",
             req(blocks("_ = open('a.txt', 'w').write('1')\n",
                        "print(open('a.txt').read())\n")))
    first, second = ci_items(r)
    assert logs_of(first) == "[files in /mnt/data: a.txt]\n"
    assert logs_of(second) == "1\n"
    assert first["container_id"] == second["container_id"]


def test_timeout_and_limits_reach_the_model(fake):
    """An endless loop ends at CODESHIM_EXEC_TIMEOUT with a note; the next
    call runs in a fresh interpreter and says so; the program gets a normal
    answer."""
    r = ours(fake.url + "/responses",
             req(blocks("x = 1\nwhile True:\n    pass\n", "print('x' in globals())\n")),
             env={"CODESHIM_EXEC_TIMEOUT": "1"}, timeout=60)
    first, second = ci_items(r)
    assert first["status"] == "incomplete"
    assert "timed out after 1 s" in logs_of(first)
    assert second["status"] == "completed"
    assert logs_of(second).startswith("[Note: the Python interpreter was restarted")
    assert logs_of(second).endswith("False\n")
    assert r["status"] == "completed"


def test_memory_and_disk_limits(fake):
    code = ("import errno\n"
            "try:\n"
            "    b = bytearray(3 << 30)\n"
            "except MemoryError:\n"
            "    print('MemoryError')\n"
            "try:\n"
            "    with open('fill', 'wb') as f:\n"
            "        for i in range(64):\n"
            "            f.write(b'x' * (1 << 20))\n"
            "except OSError as e:\n"
            "    print(errno.errorcode[e.errno])\n")
    _, ci, logs, _ = one_call(fake, code, env={"CODESHIM_MEMORY": "512M",
                                               "CODESHIM_DISK": "8M"})
    assert logs.startswith("MemoryError\nENOSPC\n"), logs


def test_refuses_to_run_without_isolation(fake):
    """Where the sandbox cannot be set up, the code is not run, the model
    and the log are told why, and the program still gets an answer."""
    rc, out, err = run(curl_cmd(fake.url + "/responses"),
                       env=dict(ENV, CODESHIM_BWRAP="/nonexistent/bwrap"),
                       input=json.dumps(req(blocks("print('RAN')\n"))))
    assert rc == 0, err
    r = json.loads(out)
    schema_check.validate(r, "Response")
    [ci] = ci_items(r)
    assert ci["status"] == "failed"
    logs = logs_of(ci)
    assert "RAN" not in logs and "refused" in logs and "bubblewrap" in logs, logs
    assert b"refused" in err  # the log (stderr by default)
    told = list(outputs_sent(bodies(fake)[1]).values())[0]
    assert "refused" in told


def test_killing_the_program_ends_the_sandbox(fake, tmp_path):
    """kill -9 of the program mid-execution: every sandbox process goes,
    daemons in sessions of their own included."""
    code = ("import os, subprocess, time\n"
            "subprocess.Popen(['sleep', '1000.601'])\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.execvp('sleep', ['sleep', '1000.602'])\n"
            "    os._exit(0)\n"
            "while True:\n"
            "    time.sleep(1)\n")
    p = subprocess.Popen(curl_cmd(fake.url + "/responses"), stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=clean_env(ENV, True, tmp_path))
    p.stdin.write(json.dumps(req(blocks(code))).encode())
    p.stdin.close()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                host_procs("sleep", "1000.601") and host_procs("sleep", "1000.602")):
            time.sleep(0.05)
        assert host_procs("sleep", "1000.601") and host_procs("sleep", "1000.602")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
            host_procs("sleep", "1000.601") or host_procs("sleep", "1000.602")):
        time.sleep(0.05)
    assert not host_procs("sleep", "1000.601")
    assert not host_procs("sleep", "1000.602")


def _ensure_user():
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    subprocess.run([useradd, "--system", "--no-create-home", "--shell",
                    "/usr/sbin/nologin", TEST_USER], check=True,
                   capture_output=True)
    return pwd.getpwnam(TEST_USER)


@pytest.mark.parametrize("binary", UNIT, ids=lambda p: p.name)
def test_unit_suites_as_ordinary_user(binary):
    """The sandbox unit suites, again as an unprivileged user: bubblewrap
    then runs with the user's own uid (no root to drop)."""
    if os.geteuid() != 0:
        pytest.skip("not root: `make unit` already ran these as an ordinary user")
    if not binary.exists():
        pytest.fail("%s is missing: run `make unit` first" % binary)
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    if not os.path.exists(runuser):
        pytest.skip("runuser (util-linux) is not installed")
    pw = _ensure_user()
    d = tempfile.mkdtemp(prefix="codeshim-user-")
    try:
        os.chmod(d, 0o755)  # the repository may be private to root: copy
        exe = os.path.join(d, binary.name)
        shutil.copy(binary, exe)
        tmp = os.path.join(d, "tmp")
        os.mkdir(tmp)
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
        p = subprocess.run([runuser, "-u", TEST_USER, "--", exe],
                           env={"PATH": "/usr/bin:/bin", "TMPDIR": tmp, "HOME": tmp},
                           cwd=tmp, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
        assert "FAILED" not in p.stdout, p.stdout[-4000:]
    finally:
        shutil.rmtree(d, ignore_errors=True)
