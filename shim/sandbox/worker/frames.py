# frames.py - the local sandbox's Python side (shim/sandbox/worker/, one
# source: embed.py joins frames.py, ../listing.py, supervisor.py,
# worker.py, zygote.py and main.py, in that order; main.py says how it is
# run). This part: what every part imports, and the frames they speak.
#
# Host protocol (FD): frames of a 4-byte big-endian length and a payload.
#   host -> us: b"E" + seq(4) + UTF-8 source
#   us -> host: b"H" once we are up; then one reply per request:
#     b"R" + seq(4) + kind(1) + restarted(1) + len(4) + meta JSON
#          + len(4) + worker JSON + output bytes
#     kind: D done, T timed out, X interpreter died, I invalid reply;
#     restarted: this request runs in a new interpreter, the state of an
#     earlier one was lost; meta: {"files": [...] (../listing.py, with
#     its caps), "changed": bool,
#     "exit": "..."}; worker JSON: {"status": "ok"|"error", "images":
#     [{"mime", "data"}]} (empty unless kind is D); output: the cell's
#     stdout and stderr in order, cut to head and tail around a note.
#   host -> us, while a request runs: b"K" + seq(4): interrupt it (its
#     caller is gone); answered as a timed-out request (T); one for a
#     request already answered is ignored.
#   between requests, the files of DATA_DIR (never following a symlink,
#   regular files only; NAME is relative, "/"-separated, without "." or
#   ".." parts):
#   host -> us: b"G" + seq(4) + offset(8) + max(4) + NAME
#   us -> host: b"F" + seq(4) + status(1) + size(8) + up to max bytes from
#     offset; status: O ok, N no such regular file, E an error
#   host -> us: b"P" + seq(4) + flags(1) + len(2) + NAME + bytes: appended
#     to a hidden part file (flags & 2: the first chunk, started afresh),
#     which becomes NAME (atomically) with the last chunk (flags & 1);
#     NAME has no "/"
#   us -> host: b"F" + seq(4) + status(1) + size(8) (O, N bad name, E)
#   host -> us: b"U" + seq(4) + NAME: the regular file NAME removed
#   us -> host: b"F" + seq(4) + status(1) + size(8) (O, N no such regular
#     file, E)
# Worker protocol (socketpair, fd 3 of the worker): the same framing; a
# request is b"E" + seq(4) + source, with the write end of a fresh pipe
# for the cell's output attached to its first bytes (SCM_RIGHTS); a reply
# is seq(4) + worker JSON.
import os
import sys


def _framed(payload):
    # One frame: a 4-byte big-endian length, then the payload.
    return len(payload).to_bytes(4, "big") + payload


def _next_frame(buf):
    # The first whole frame's payload, taken out of the bytearray buf, or
    # None while it is incomplete.
    if len(buf) < 4:
        return None
    n = int.from_bytes(buf[:4], "big")
    if len(buf) < 4 + n:
        return None
    payload = bytes(buf[4:4 + n])
    del buf[:4 + n]
    return payload
