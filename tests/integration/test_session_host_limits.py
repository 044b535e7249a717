"""Hostile sizes on the session channel. Through the session
sockets directly (tests/tools/session_host.py), next to real requests of
the curl CLI under codeshim (test_sessions' helpers):

* the chunks of one put without its last chunk are held at most
  CODESHIM_FILE_MAX bytes: past it the put is refused (EFBIG) and what it
  had sent is freed, so the session's memory does not grow with them (8
  chunks of 45 MB grew it to 467 MB before); a chunk larger than the
  library sends (16 MB) is refused (EMSGSIZE);
* connections that send nothing (or a request that never ends) hold up
  neither the session nor the host: a real request completes meanwhile."""

import base64
import errno

import session_host
from conftest import alive
from test_sessions import ask, logs, rt, supervisors  # noqa: F401 (rt: fixture)

HOSTS = "*/hosts/*/pid"
MB = 1 << 20


def status_kb(pid, field):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def session_dir(rt):
    """The one session's directory and its process (supervisors' pattern)."""
    [pidfile] = [p for p in rt.glob("*/*/pid") if p.parent.parent != rt / "hosts"]
    return pidfile.parent, int(pidfile.read_text())


def put(d, name, data, first, last):
    return session_host.session_call(d, {"op": "put", "name": name,
                                         "data": base64.b64encode(data).decode(),
                                         "first": first, "last": last})


def test_unfinished_put_past_the_cap_is_refused_and_freed(fake, rt):
    env = {"CODESHIM_FILE_MAX": "8M"}
    assert logs(ask(fake.url, "print(1)", session="a", rt=rt, env=env)) == "1\n"
    d, pid = session_dir(rt)
    base_hwm, base_rss = status_kb(pid, "VmHWM"), status_kb(pid, "VmRSS")
    chunk = b"\x01" * (4 * MB)
    answers = [put(d, "big.bin", chunk, i == 0, False) for i in range(16)]  # 64 MB, no last
    assert all(a["ok"] for a in answers), answers
    # 8 MB held (two chunks); the third is past the cap: refused, forgotten
    assert ["errno" in a for a in answers[:2]] == [False, False], answers[:2]
    assert answers[2]["errno"] == errno.EFBIG, answers[2]
    # the rest continue a put that is no more
    assert {a.get("errno") for a in answers[3:]} == {errno.EPROTO}, answers[3:]
    grown_kb = status_kb(pid, "VmHWM") - base_hwm
    # the cap and one chunk's frame, text and decoding; 64 MB before
    assert grown_kb < 40 * 1024, "the session grew by %d KB" % grown_kb
    assert status_kb(pid, "VmRSS") - base_rss < 16 * 1024  # freed
    # a chunk larger than the library's (16 MB) is refused before decoding
    assert put(d, "big.bin", b"\x02" * (17 * MB), True, True)["errno"] == errno.EMSGSIZE
    # a put within the cap, of two chunks, still lands in /mnt/data
    assert "errno" not in put(d, "ok.txt", b"hello ", True, False)
    assert "errno" not in put(d, "ok.txt", b"world", False, True)
    r = ask(fake.url, "import os\nprint(open('ok.txt').read(), os.path.exists('big.bin'))",
            session="a", rt=rt, env=env)
    assert logs(r).startswith("hello world False\n"), logs(r)
    assert supervisors(rt) == [pid]  # the same session throughout


def test_idle_connections_block_neither_session_nor_host(fake, rt):
    """Connections to the session and to the host that send nothing, and
    one that announces a frame and never sends it, opened before real
    requests: those complete. (Before, each idle connection held the
    session 10 s and the host 5 s: with these many the program's wait for
    its greeting, 33 s with CODESHIM_EXEC_TIMEOUT=1, ran out.)"""
    env = {"CODESHIM_EXEC_TIMEOUT": "1"}
    assert logs(ask(fake.url, "x = 41", session="a", rt=rt, env=env)) == ""
    d, pid = session_dir(rt)
    [hd] = session_host.hosts(rt)
    idle = [session_host.connect(d) for _ in range(4)]
    slow = session_host.connect(d)
    slow.sendall((1000).to_bytes(4, "big") + b'{"op":')  # and no more
    idle += [slow] + [session_host.connect(hd) for _ in range(16)]
    try:
        # the session answers its program, and the host opens a new session
        assert logs(ask(fake.url, "print(x + 1)", session="a", rt=rt, env=env)) == "42\n"
        assert logs(ask(fake.url, "print(2)", session="b", rt=rt, env=env)) == "2\n"
        assert alive(pid) and len(supervisors(rt)) == 2
    finally:
        for s in idle:
            s.close()
