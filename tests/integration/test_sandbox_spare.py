"""The warm spare sandbox end to end: one curl process makes several
requests (curl --next), each of which runs code; from the third on, the
sandbox comes from a spare started in advance (the debug log says so).
Every request still gets a fresh sandbox, and when the program ends no
sandbox process is left, the spare's included. CODESHIM_WARM_SPARE=0
turns it off. It is the fallback where the user's sandbox host
(test_sandbox_host.py) is off (CODESHIM_SANDBOX_HOST=0). The unit suite tests/sandbox/test_sandbox_spare.c covers the
rest (settings, fork, kill -9)."""

import json
import time

from conftest import run, wait_for
from test_core_responses import ENV, KEY, blocks, ci_items, logs_of, req
from test_sandbox_escape import host_args

CURL = "/usr/bin/curl"
SPARE_LOG = "opened from the warm spare"
# An odd memory limit: it is on the command line of every process of these
# sandboxes (bwrap, the supervisor, the worker) and nowhere else.
MARKER = str((1 << 30) + 7 * 4096)

FIRST = ("x = 41\nimport json\nopen('left.txt', 'w').write('A')\n"
         "open('/tmp/left', 'w').close()\nprint('set')\n")
CHECK = ("import os, sys\nprint(sorted(k for k in globals() if not "
         "k.startswith('__')), os.listdir('.'), os.path.exists('/tmp/left'), "
         "'json' in sys.modules)\n")


def marked_procs():
    """Processes with MARKER as one of their arguments."""
    return [pid for pid, args in host_args() if MARKER.encode() in args]


def several_requests(fake, tmp_path, codes, env):
    """One curl process, one request per code (each runs it once); returns
    (the logs of each request's code call, curl's stderr)."""
    cmd = [CURL, "-sS"]
    outs = []
    for i, code in enumerate(codes):
        body = tmp_path / ("body%d.json" % i)
        body.write_text(json.dumps(req(blocks(code))))
        out = tmp_path / ("out%d.json" % i)
        outs.append(out)
        if i:
            cmd.append("--next")
        cmd += ["-sS", "-H", "Content-Type: application/json",
                "-H", "Authorization: Bearer " + KEY,
                "--data-binary", "@%s" % body, "-o", str(out),
                fake.url + "/responses"]
    # the in-process spare serves only where no sandbox host does
    e = dict(ENV, CODESHIM_LOG="debug", CODESHIM_MEMORY=MARKER, CODESHIM_SANDBOX_HOST="0")
    e.update(env)
    rc, _, err = run(cmd, env=e, timeout=120)
    assert rc == 0, err.decode(errors="replace")[-3000:]
    logs = []
    for out in outs:
        [ci] = ci_items(json.loads(out.read_text()))
        assert ci["status"] == "completed", ci
        logs.append(logs_of(ci))
    return logs, err.decode(errors="replace")


def no_sandbox_left():
    wait_for(lambda: not marked_procs(), timeout=5)
    return marked_procs()


def test_spare_serves_repeat_requests_fresh(fake, tmp_path):
    assert not marked_procs()
    logs, err = several_requests(fake, tmp_path,
                                 [FIRST, CHECK, CHECK, CHECK], {})
    assert logs[0] == "set\n[files in /mnt/data: left.txt]\n", logs
    for got in logs[1:]:
        assert got == "['os', 'sys'] [] False False\n", logs
    # the first two requests start their own sandbox; later ones get the
    # spare that the one before prepared
    assert err.count(SPARE_LOG) == 2, err[-3000:]
    assert no_sandbox_left() == []


def test_spare_off(fake, tmp_path):
    logs, err = several_requests(fake, tmp_path, [FIRST, CHECK, CHECK],
                                 {"CODESHIM_WARM_SPARE": "0"})
    assert logs[1:] == ["['os', 'sys'] [] False False\n"] * 2, logs
    assert SPARE_LOG not in err
    assert "warm spare" not in err
    assert no_sandbox_left() == []
