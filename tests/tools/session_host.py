"""session_host.py - asks the user's sandbox hosts under a runtime
directory (codeshim-sessiond, sessiond/host.c) how they are, for tests and
benchmarks that must wait until a host has a sandbox ready to lend (its
fork server imported, its pool filled) rather than sleep.

    hosts(rt)              -> [host directory, ...] (rt/hosts/*)
    call(host_dir, msg)    -> the host's answer to one request (a dict)
    status(host_dir)       -> {"ok": True, "warm": bool, "pool": n,
                               "lent": n, "sessions": n, "pid": n, ...}
    wait_warm(rt, timeout) -> True once every host under rt has a sandbox
                              ready
    connect(dir)           -> a socket connected to dir/sock (a host's or a
                              session's), nothing sent
    send(sock, msg), recv(sock) -> one frame out (a dict), one frame in
    session_call(session_dir, msg) -> a session's answer to one request
                              (its greeting read first)
"""

import json
import os
import socket
import struct
import time
from pathlib import Path


def hosts(rt):
    return sorted(p.parent for p in Path(rt).glob("hosts/*/sock"))


def _frame(sock, payload):
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def _read(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the session host closed the connection")
        out += chunk
    return out


def connect(d, timeout=10):
    """A socket connected to d/sock."""
    # through the directory's /proc/self/fd entry: the socket's own path
    # may be longer than sun_path holds
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect("/proc/self/fd/%d/sock" % dfd)
    except OSError:
        s.close()
        raise
    finally:
        os.close(dfd)
    return s


def send(sock, msg):
    _frame(sock, json.dumps(msg).encode())


def recv(sock):
    (n,) = struct.unpack(">I", _read(sock, 4))
    return json.loads(_read(sock, n))


def call(host_dir, msg, timeout=10):
    """One request (a dict) to the host in host_dir; its answer."""
    with connect(host_dir, timeout) as s:
        send(s, msg)
        return recv(s)


def session_call(session_dir, msg, timeout=30):
    """One request to the session in session_dir; its answer."""
    with connect(session_dir, timeout) as s:
        recv(s)  # the greeting
        send(s, msg)
        return recv(s)


def status(host_dir, timeout=10):
    return call(host_dir, {"op": "status"}, timeout)


def wait_warm(rt, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = hosts(rt)
        try:
            if found and all(status(h)["pool"] >= 1 for h in found):
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return False
