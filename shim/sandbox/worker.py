# worker.py - the local sandbox's Python side (owned by shim/sandbox).
#
# Embedded into libcodeshim by sandbox.mk (source and bytecode, embed.py)
# and run through local_jail.c's BOOT_PY, which takes three arguments of its
# own first; one source, two processes:
#   python3 -I -S -B -c <this source> MODE FD TIMEOUT_MS KEEP MEMORY PROCS
#                                     FILE_SIZE CPU_S DATA_DIR [WFD WPID]
#       the supervisor. MODE "sandbox": PID 1 of a bubblewrap sandbox (own
#       PID, mount, network, IPC, UTS and user namespaces, seccomp);
#       "unsafe": no isolation at all (CODESHIM_UNSAFE_NO_ISOLATION=1,
#       debugging only). WFD/WPID: the first worker, already started.
#   python3 -I -B -c <this source> worker WFD MODE MEMORY PROCS FILE_SIZE CPU_S
#       the worker: the first one started together with the supervisor by
#       local_jail.c's start-up shell (their Python start-ups overlap), later
#       ones by the supervisor, after each loss.
#   python3 -I -B -c <this source> zygote ...
#       the fork server (local_zygote.c; see _zygote below): each sandbox
#       it forks becomes a supervisor as above, which forks its workers.
#
# The supervisor talks to the host over FD, starts the notebook
# interpreter, enforces the per-execution wall-clock limit, captures
# output, lists the working directory, and kills everything the code
# started when an execution times out or the interpreter dies. User code
# cannot reach it: as PID 1 it cannot be killed from inside, it is not
# dumpable (no /proc/1/mem), seccomp refuses every signal, rlimit,
# priority and scheduler call naming pid 1 (seccomp.c), and the worker
# runs in a session (so a process group and an autogroup) of its own.
# It keeps running across interpreter restarts, so the files in DATA_DIR
# (a tmpfs) survive them.
# Between executions nothing of the sandbox runs: once a cell is done,
# every process but PID 1 is stopped before the reply goes out, and
# continued when the next request comes. Code that forged the worker's
# reply, or that resumes itself while stopped (a timer, an orphaned
# process group), is caught by a check every WATCH_S and before the next
# request: every process is killed and the next output says why.
# The worker sets its rlimits (address space, tasks, file size, CPU time)
# first, then runs the cells with notebook semantics in one persistent
# __main__ namespace.
#
# Host protocol (FD): frames of a 4-byte big-endian length and a payload.
#   host -> us: b"E" + seq(4) + UTF-8 source
#   us -> host: b"H" once we are up; then one reply per request:
#     b"R" + seq(4) + kind(1) + restarted(1) + len(4) + meta JSON
#          + len(4) + worker JSON + output bytes
#     kind: D done, T timed out, X interpreter died, I invalid reply;
#     restarted: this request runs in a new interpreter, the state of an
#     earlier one was lost; meta: {"files": [...], "changed": bool,
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


def _supervisor():
    import _signal
    import _socket
    import _json
    import _stat
    import select

    mode = sys.argv[1]
    host = int(sys.argv[2])
    timeout = int(sys.argv[3]) / 1000.0
    keep = int(sys.argv[4])
    limits = tuple(int(a) for a in sys.argv[5:9])
    data_dir = sys.argv[9]
    first = (int(sys.argv[10]), int(sys.argv[11])) \
        if len(sys.argv) > 11 else None  # started by the shell: fd, pid
    sandboxed = mode == "sandbox"
    if sandboxed and os.getpid() != 1:
        sys.stderr.write("codeshim: the sandbox supervisor is not PID 1\n")
        os._exit(70)

    MAX_WORKER_FRAME = 14 << 20
    MAX_FILES = 1000
    MAX_SCAN = 20000
    MAX_DEPTH = 16
    MAX_NAME_BYTES = 512 << 10
    OLD_PIPES = 16
    OLD_PIPE_BYTES = 16 << 20
    NOTE = b"\n[... %d bytes of output truncated ...]\n"
    FREEZE_S = 2.0  # for every task to stop after a cell
    WATCH_S = 1.0  # between checks that nothing runs while idle
    RUNNING = (b"R", b"S")  # what a stopped task never is
    STRAY_NOTE = (b"[Note: code of an earlier execution kept running after "
                  b"that execution had ended (a background thread or "
                  b"process that answered for the interpreter, or resumed "
                  b"itself while the sandbox was idle); every process in "
                  b"the sandbox was killed.]\n")
    mono = __import__("time").monotonic

    os.set_blocking(host, False)
    os.set_inheritable(host, False)
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, lambda s, f: None)
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)

    def undumpable():
        # Not dumpable: no /proc/1/mem, /proc/1/environ, /proc/1/fd... for
        # the code, which runs as the same user.
        if _prctl(4, 0) != 0 or _prctl(3, 0) != 0:
            sys.stderr.write("codeshim: the sandbox supervisor cannot be "
                             "made undumpable (prctl)\n")
            os._exit(71)

    out_buf = bytearray()  # to the host
    host_gone = []  # set when the host cannot be written to

    def frame(payload):
        out_buf.extend(len(payload).to_bytes(4, "big"))
        out_buf.extend(payload)

    def flush(block=False):
        while out_buf:
            try:
                n = os.write(host, out_buf)
            except BlockingIOError:
                if not block:
                    return
                select.select([], [host], [])
                continue
            except OSError:
                del out_buf[:]
                host_gone.append(True)
                return
            del out_buf[:n]

    undumpable()
    frame(b"H")
    flush(block=True)
    if host_gone:
        os._exit(0)
    os.dup2(null, 1)  # bwrap's errors went to fd 2: ours need not
    os.dup2(null, 2)

    class W:  # the current worker
        pid = 0
        sock = None
        inbuf = bytearray()
        outbuf = bytearray()
        status = None  # wait status once reaped
        eof = False
        served = False

    st = {"lost": False, "prev_files": []}
    # snap: {tid: (state, utime, stime, schedstat)} of the stopped sandbox,
    # None while it runs; next: when to check it again; stray: tell the
    # next execution that its processes were killed for running idle
    fz = {"snap": None, "next": 0.0, "stray": False}
    cell = None  # dict while a request runs
    # Output pipes of finished cells that something the code started in the
    # background still writes to: read and dropped (up to OLD_PIPE_BYTES
    # each, then closed: the writer gets EPIPE), never mixed into a later
    # cell's output. [fd, bytes dropped]
    old_pipes = []

    def describe(s):
        if s is None:
            return "stopped"
        if os.WIFEXITED(s):
            return "exited with status %d" % os.WEXITSTATUS(s)
        if os.WIFSIGNALED(s):
            n = os.WTERMSIG(s)
            try:
                d = _signal.strsignal(n) or "unknown"
            except ValueError:
                d = "unknown"
            return "was killed by signal %d (%s)" % (n, d)
        return "stopped"

    def reap():
        while True:
            try:
                pid, s = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == W.pid and W.status is None:
                W.status = s

    def read_small(path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return os.read(fd, 4096)
        except OSError:
            return None
        finally:
            os.close(fd)

    def tasks():
        # Every task (thread) of the sandbox but ours, with what changes
        # when it runs. Linear in the tasks, which RLIMIT_NPROC caps.
        snap = {}
        for p in os.listdir("/proc"):
            if not p.isdigit() or p == "1":
                continue
            try:
                tids = os.listdir("/proc/%s/task" % p)
            except OSError:
                continue
            for t in tids:
                d = "/proc/%s/task/%s/" % (p, t)
                b = read_small(d + "stat")
                if b is None:
                    continue  # gone
                f = b[b.rfind(b")") + 2:].split()
                if len(f) > 12:
                    snap[t] = (f[0], f[11], f[12], read_small(d + "schedstat"))
        return snap

    def freeze():
        # Stops every process but us; True once none can run.
        try:
            os.kill(-1, _signal.SIGSTOP)
        except OSError:
            pass  # none left
        end = mono() + FREEZE_S
        pause = 0.0002
        while True:
            snap = tasks()
            if not any(v[0] in RUNNING for v in snap.values()):
                fz["snap"] = snap
                fz["next"] = mono() + WATCH_S
                return True
            if mono() >= end:
                return False
            select.select([], [], [], pause)
            pause = min(pause * 2, 0.05)

    def still_frozen():
        # Nothing ran since freeze(): no task runs, none is new, and none
        # seen stopped has used the CPU. A task that was in the kernel
        # (D) may have stopped since; dead ones do not matter.
        old, now = fz["snap"], tasks()
        for t, v in now.items():
            was = old.get(t)
            if v[0] in (b"Z", b"X"):
                continue
            if was is None or v[0] in RUNNING or \
                    (was[0] in (b"T", b"t") and v != was):
                return False
        fz["snap"] = now
        return True

    def stray():
        # Something ran while idle: nothing of it may run on.
        kill_all()
        fz["stray"] = True
        spawn()

    def thaw():
        if fz["snap"] is None:
            return
        if still_frozen():
            fz["snap"] = None
            try:
                os.kill(-1, _signal.SIGCONT)
            except OSError:
                pass  # none left
        else:
            stray()

    def kill_all():
        # Everything but us: the interpreter and whatever it started.
        fz["snap"] = None
        if W.pid and not sandboxed:
            for kill in (os.killpg, os.kill):
                try:
                    kill(W.pid, 9)
                except OSError:
                    pass
        while True:
            if sandboxed:
                try:
                    os.kill(-1, 9)  # PID 1: every process of the namespace
                except OSError:
                    pass
            try:
                pid, s = os.waitpid(-1 if sandboxed else W.pid, 0)
            except ChildProcessError:
                break
            if pid == W.pid and W.status is None:
                W.status = s
            if not sandboxed and pid == W.pid:
                break
        if not sandboxed:
            reap()
        drop_worker()

    def drop_worker():
        if W.sock is not None:
            W.sock.close()
        if W.served:
            st["lost"] = True
        W.pid = 0
        W.sock = None
        W.inbuf = bytearray()
        W.outbuf = bytearray()
        W.status = None
        W.eof = False
        W.served = False

    # The worker is a fresh interpreter running this same source (a fork
    # would be cheaper in theory, but copying Python's pages on write
    # makes a forked child slower to get going than a new process).
    argv = sys.orig_argv
    i = argv.index("-c")
    worker_argv = [sys.executable, "-I", "-B"] + argv[i:i + 5] + \
        ["worker", "3", mode] + [str(v) for v in limits]

    def spawn():
        a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        if _Z.stash is not None:
            return spawn_forked(a, b)
        try:
            pid = os.posix_spawn(
                sys.executable, worker_argv, os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, b.fileno(), 3)],
                setsigdef=(_signal.SIGCHLD, _signal.SIGINT))
        except OSError:
            a.close()
            b.close()
            return
        b.close()
        a.setblocking(False)
        W.pid = pid
        W.sock = a

    def spawn_forked(a, b):
        # Forked from the zygote: the worker is a fork of us, with the
        # preloaded modules already in memory (we never run the code).
        try:
            pid = os.fork()
        except OSError:
            a.close()
            b.close()
            return
        if pid == 0:
            try:
                _signal.set_wakeup_fd(-1)
                for n in (_signal.SIGCHLD, _signal.SIGINT, _signal.SIGTERM):
                    _signal.signal(n, _signal.SIG_DFL)
                os.dup2(b.fileno(), 3)
                os.closerange(4, 1 << 20)
                _prctl(4, 1)  # dumpable, as a new interpreter is: its
                # /proc/self files are its own (oom_score_adj above all)
                sys.argv = ["", "worker", "3", mode] + [str(v) for v in limits]
                _worker()
            finally:
                os._exit(70)
        b.close()
        a.setblocking(False)
        W.pid = pid
        W.sock = a

    def read_into(fd, sink, limit=1 << 16):
        try:
            b = os.read(fd, limit)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not b:
            return False
        if sink is not None:
            sink(b)
        return True

    def feed(b):
        c = cell
        c["total"] += len(b)
        head = c["head"]
        if len(head) < keep:
            take = keep - len(head)
            head.extend(b[:take])
            b = b[take:]
        if b:
            tail = c["tail"]
            tail.extend(b)
            if len(tail) > 2 * keep:
                del tail[:len(tail) - keep]

    def drain(fd, sink, budget=0.1):
        # Everything written so far; stops at the end, at EAGAIN, or after
        # budget seconds (a background process may keep writing).
        end = mono() + budget
        while mono() < end:
            try:
                b = os.read(fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not b:
                return False
            if sink is not None:
                sink(b)
        return True

    def output():
        c = cell
        head, tail, total = c["head"], c["tail"], c["total"]
        if total <= 2 * keep:
            return bytes(head + tail)
        return bytes(head) + NOTE % (total - 2 * keep) + bytes(tail[-keep:])

    def list_files():
        names = []
        snap = []
        size = 0
        scanned = 0
        stack = [(data_dir, "", 0)]
        while stack and scanned <= MAX_SCAN and len(names) < MAX_FILES:
            path, rel, depth = stack.pop()
            try:
                it = os.scandir(path)
            except OSError:
                continue
            with it:
                for e in it:
                    scanned += 1
                    if scanned > MAX_SCAN or len(names) >= MAX_FILES:
                        break
                    try:
                        if e.is_dir(follow_symlinks=False):
                            if depth < MAX_DEPTH and e.name != "__pycache__":
                                stack.append((e.path, rel + e.name + "/",
                                              depth + 1))
                        elif e.is_file(follow_symlinks=False):
                            s = e.stat(follow_symlinks=False)
                            name = (rel + e.name).encode(
                                "utf-8", "surrogateescape").decode(
                                "utf-8", "backslashreplace")
                            enc = _json.encode_basestring_ascii(name)
                            size += len(enc) + 1
                            if size > MAX_NAME_BYTES:
                                break
                            names.append(enc)
                            snap.append((enc, s.st_size, s.st_mtime_ns,
                                         s.st_ino))
                    except OSError:
                        pass
        names.sort()
        snap.sort()
        changed = snap != st["prev_files"]
        st["prev_files"] = snap
        return names, changed

    def reply(kind, wjson=b"", exit_desc=""):
        # Ends the current request: output, files, the reply.
        c = cell
        if kind != "D":
            kill_all()
        elif sandboxed and not freeze():
            kill_all()  # something would not stop: it may not run on
            fz["stray"] = True
        alive = drain(c["pipe"], feed)
        if alive and len(old_pipes) < OLD_PIPES and kind == "D":
            old_pipes.append([c["pipe"], 0])
        else:
            os.close(c["pipe"])
        if kind != "D":
            for p in old_pipes:
                os.close(p[0])
            del old_pipes[:]
        names, changed = list_files()
        meta = ('{"files":[%s],"changed":%s,"exit":%s}' % (
            ",".join(names), "true" if changed else "false",
            _json.encode_basestring_ascii(exit_desc))).encode("ascii")
        body = output()
        frame(b"".join((b"R", c["seq"], kind.encode(),
                        b"\x01" if c["restarted"] else b"\x00",
                        len(meta).to_bytes(4, "big"), meta,
                        len(wjson).to_bytes(4, "big"), wjson, body)))

    def parent_under(rel):
        # rel inside data_dir: (a descriptor of its directory, reached
        # without following a symlink, its last part), or None
        parts = rel.split("/")
        if not rel or any(x in ("", ".", "..") for x in parts):
            return None
        d = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for x in parts[:-1]:
                n = os.open(x, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                            os.O_CLOEXEC, dir_fd=d)
                os.close(d)
                d = n
        except OSError:
            os.close(d)
            raise
        return d, parts[-1]

    def open_under(rel, flags):
        got = parent_under(rel)
        if got is None:
            return None
        d, last = got
        try:
            return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC |
                           os.O_NONBLOCK, 0o644, dir_fd=d)
        finally:
            os.close(d)

    def file_reply(seq, status, size=0, data=b""):
        frame(b"".join((b"F", seq, status, size.to_bytes(8, "big"), data)))

    def get_file(payload):
        seq, off = payload[1:5], int.from_bytes(payload[5:13], "big")
        want = int.from_bytes(payload[13:17], "big")
        try:
            rel = payload[17:].decode("utf-8", "surrogateescape")
            fd = open_under(rel, os.O_RDONLY)
        except (OSError, ValueError):
            fd = None
        if fd is None:
            return file_reply(seq, b"N")
        try:
            st_ = os.fstat(fd)
            if not _stat.S_ISREG(st_.st_mode):
                return file_reply(seq, b"N")
            data = os.pread(fd, min(want, 4 << 20), off)
            file_reply(seq, b"O", st_.st_size, data)
        except OSError:
            file_reply(seq, b"E")
        finally:
            os.close(fd)

    def put_file(payload):
        seq, flags = payload[1:5], payload[5]
        last, first = flags & 1, flags & 2
        n = int.from_bytes(payload[6:8], "big")
        name = payload[8:8 + n].decode("utf-8", "surrogateescape")
        part = ".codeshim-upload-" + name
        if "/" in name or name in ("", ".", "..") or len(part) > 255:
            return file_reply(seq, b"N")
        try:
            fd = open_under(part, os.O_WRONLY | os.O_CREAT | os.O_APPEND |
                            (os.O_TRUNC if first else 0))
            try:
                data = memoryview(payload)[8 + n:]
                while data:
                    data = data[os.write(fd, data):]
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if last:
                os.replace(os.path.join(data_dir, part),
                           os.path.join(data_dir, name))
            file_reply(seq, b"O", size)
        except OSError:
            try:
                os.unlink(os.path.join(data_dir, part))
            except OSError:
                pass
            file_reply(seq, b"E")

    def remove_file(payload):
        seq = payload[1:5]
        try:
            got = parent_under(payload[5:].decode("utf-8", "surrogateescape"))
        except (FileNotFoundError, NotADirectoryError):
            return file_reply(seq, b"N")
        except (OSError, ValueError):
            return file_reply(seq, b"E")
        if got is None:
            return file_reply(seq, b"N")
        d, last = got
        try:
            if not _stat.S_ISREG(os.stat(last, dir_fd=d,
                                         follow_symlinks=False).st_mode):
                return file_reply(seq, b"N")
            os.unlink(last, dir_fd=d)
            file_reply(seq, b"O")
        except FileNotFoundError:
            file_reply(seq, b"N")
        except OSError:
            file_reply(seq, b"E")
        finally:
            os.close(d)

    def died_unseen():
        # The interpreter died, or spoke, while idle, and the request came
        # before this loop saw it (a busy machine): its socket tells.
        if W.inbuf or W.eof or W.status is not None:
            return True
        p = select.poll()
        p.register(W.sock.fileno(), select.POLLIN)
        return bool(p.poll(0))

    def start(payload):
        nonlocal cell
        seq = payload[1:5]
        if W.pid and died_unseen():
            kill_all()  # as when seen idle: the request gets a new one
        thaw()
        restarted = st["lost"]
        st["lost"] = False
        if not W.pid:
            spawn()
        r, w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(r, False)
        cell = {"seq": seq, "pipe": r, "head": bytearray(),
                "tail": bytearray(), "total": 0, "restarted": restarted,
                "deadline": mono() + timeout, "fd": w}
        if fz["stray"]:
            fz["stray"] = False
            feed(STRAY_NOTE)
        req = len(payload).to_bytes(4, "big") + payload
        W.outbuf = bytearray(req)
        W.served = True
        send_worker()

    def send_worker():
        c = cell
        try:
            if c["fd"] is not None:
                anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                        c["fd"].to_bytes(4, sys.byteorder, signed=True))]
                n = W.sock.sendmsg([W.outbuf], anc)
                os.close(c["fd"])
                c["fd"] = None
            else:
                n = W.sock.send(W.outbuf)
            del W.outbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            W.outbuf = bytearray()
            W.eof = True

    def worker_input():
        # -> None (nothing yet), or ("D", json) / ("I", "")
        b = W.inbuf
        if len(b) < 4:
            return None
        n = int.from_bytes(b[:4], "big")
        if n < 4 or n > MAX_WORKER_FRAME or cell is None:
            return ("I", b"")
        if len(b) < 4 + n:
            return None
        if len(b) > 4 + n or bytes(b[4:8]) != cell["seq"]:
            return ("I", b"")
        return ("D", bytes(b[8:4 + n]))

    # Host input: frames accumulate here.
    hin = bytearray()
    poller = select.poll
    if first:
        W.pid = first[1]
        W.sock = _socket.socket(fileno=first[0])
        W.sock.setblocking(False)
    else:
        spawn()  # warm: the first request finds its interpreter ready
    while True:
        p = poller()
        p.register(host, select.POLLIN | (select.POLLOUT if out_buf else 0))
        p.register(wake_r, select.POLLIN)
        if W.sock is not None:
            ev = select.POLLIN
            if W.outbuf and cell is not None:
                ev |= select.POLLOUT
            p.register(W.sock.fileno(), ev)
        if cell is not None:
            p.register(cell["pipe"], select.POLLIN)
        for fd, _ in old_pipes:
            p.register(fd, select.POLLIN)
        wait = None
        if cell is not None:
            wait = max(0, int((cell["deadline"] - mono()) * 1000) + 1)
        elif fz["snap"] is not None:
            wait = max(0, int((fz["next"] - mono()) * 1000) + 1)
        events = p.poll(wait)
        for fd, ev in events:
            if fd == host:
                if ev & select.POLLOUT:
                    flush()
                    if host_gone:
                        kill_all()
                        os._exit(0)
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    try:
                        b = os.read(host, 1 << 20)
                    except BlockingIOError:
                        b = None
                    except OSError:
                        b = b""
                    if b == b"":
                        kill_all()  # the host is gone or closed us
                        os._exit(0)
                    if b:
                        hin.extend(b)
            elif fd == wake_r:
                drain(wake_r, None)
                reap()
            elif W.sock is not None and fd == W.sock.fileno():
                if ev & select.POLLOUT and cell is not None:
                    send_worker()
                if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    try:
                        b = W.sock.recv(1 << 20)
                    except BlockingIOError:
                        b = None
                    except OSError:
                        b = b""
                    if b == b"":
                        W.eof = True
                    elif b:
                        W.inbuf.extend(b)
                        if len(W.inbuf) > MAX_WORKER_FRAME + 8:
                            W.inbuf = W.inbuf[:MAX_WORKER_FRAME + 8]
            elif cell is not None and fd == cell["pipe"]:
                read_into(fd, feed)
            else:
                for i, p in enumerate(old_pipes):
                    if p[0] == fd:
                        def count(b, p=p):
                            p[1] += len(b)
                        if not read_into(fd, count) or \
                                p[1] > OLD_PIPE_BYTES:
                            os.close(fd)
                            del old_pipes[i]
                        break
        # One request at a time; anything else from the host ends us.
        while len(hin) >= 4:
            n = int.from_bytes(hin[:4], "big")
            if len(hin) < 4 + n:
                break
            payload = bytes(hin[4:4 + n])
            del hin[:4 + n]
            if cell is None and n >= 17 and payload[:1] == b"G":
                get_file(payload)
                continue
            if cell is None and n >= 8 and payload[:1] == b"P":
                put_file(payload)
                continue
            if cell is None and n >= 6 and payload[:1] == b"U":
                remove_file(payload)
                continue
            if n == 5 and payload[:1] == b"K":
                # interrupt the running request (an older one's is late)
                if cell is not None and payload[1:5] == cell["seq"]:
                    cell["stop"] = True
                continue
            if cell is not None or n < 5 or payload[:1] != b"E":
                kill_all()
                os._exit(2)
            start(payload)
        if cell is None:
            if W.pid and (W.inbuf or W.eof or W.status is not None):
                kill_all()  # died or spoke while idle: not to be trusted
            elif fz["snap"] is not None and mono() >= fz["next"]:
                if still_frozen():
                    fz["next"] = mono() + WATCH_S
                else:
                    stray()
            continue
        got = worker_input()
        if got is not None:
            W.inbuf = bytearray()
            reply(*got)
            cell = None
        elif W.eof or W.status is not None:
            # Died during the cell: let it finish dying for its status.
            for _ in range(50):
                reap()
                if W.status is not None:
                    break
                select.select([wake_r], [], [], 0.01)
            reply("X", b"", describe(W.status))
            cell = None
        elif mono() >= cell["deadline"] or cell.get("stop"):
            reply("T")
            cell = None
        if cell is None and not W.pid:
            spawn()
        flush()
        if host_gone:
            kill_all()
            os._exit(0)


def _worker():
    import resource

    sandboxed = sys.argv[3] == "sandbox"
    memory, procs, file_size, cpu = (int(a) for a in sys.argv[4:8])

    def lower(res, value, slack=0):
        soft, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY and hard < value + slack:
            value, slack = min(value, hard), hard - min(value, hard)
        resource.setrlimit(res, (value, value + slack))

    # A session of its own: neither PID 1's process group (kill(0) from
    # the code must not reach it) nor its autogroup (whose nice value the
    # code could raise through /proc/self/autogroup).
    os.setsid()
    # At the sandbox's memory limit its OOM kill takes the interpreter (or
    # what it started) before the supervisor (local_proc.c sets 500).
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    lower(resource.RLIMIT_AS, memory)
    lower(resource.RLIMIT_FSIZE, file_size)
    # SIGXCPU at the limit (the process learns why), SIGKILL 1 s later
    lower(resource.RLIMIT_CPU, cpu, 1)
    lower(resource.RLIMIT_CORE, 0)
    lower(resource.RLIMIT_NOFILE, 4096)
    if sandboxed:
        # Counted per user namespace: this sandbox's tasks only.
        lower(resource.RLIMIT_NPROC, procs)

    import builtins
    import binascii
    import io
    import _ast
    import _socket

    if _Z.stash is not None:
        _fresh_state()

    sock = _socket.socket(fileno=os.dup(int(sys.argv[2])))  # away from 3
    os.close(int(sys.argv[2]))
    null_fd = os.open("/dev/null", os.O_WRONLY | os.O_CLOEXEC)
    sys.dont_write_bytecode = True
    my_pid = os.getpid()

    MAX_IMAGES = 16
    MAX_IMAGE_BYTES = 12 << 20  # base64 total; the supervisor caps frames

    class _FdWriter(io.RawIOBase):
        # Unbuffered writes to a fixed fd number, so Python's output and a
        # subprocess's output land in the capture pipe in call order.
        def __init__(self, fd):
            self._fd = fd

        def writable(self):
            return True

        def fileno(self):  # subprocess, faulthandler, isatty() want it
            return self._fd

        def write(self, b):
            mv = memoryview(b)
            n = 0
            while n < len(mv):
                n += os.write(self._fd, mv[n:])
            return n

    def _stream(fd):
        return io.TextIOWrapper(_FdWriter(fd), encoding="utf-8",
                                errors="backslashreplace",
                                line_buffering=True, write_through=True)

    out = _stream(1)
    err = _stream(2)

    def reset_streams():
        sys.stdout = sys.__stdout__ = out
        sys.stderr = sys.__stderr__ = err

    reset_streams()

    # The user's namespace is a real __main__ module (pickle and friends
    # look classes up there); this file's own names stay out of it.
    main_mod = type(sys)("__main__")
    user_ns = main_mod.__dict__
    user_ns["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    sys.argv = [""]
    sys.path.insert(0, "")  # like a notebook: modules in the cwd import
    sources = {}

    def register_sources():
        lc = sys.modules.get("linecache")
        if lc is not None:
            for name, src in sources.items():
                lc.cache[name] = (len(src), None, src.splitlines(True), name)

    def recv_exact(n, fds):
        chunks = []
        while n > 0:
            if fds is not None and not fds:
                b, anc, _flags, _addr = sock.recvmsg(
                    n, _socket.CMSG_SPACE(16))
                for level, kind, data in anc:
                    if level == _socket.SOL_SOCKET and \
                            kind == _socket.SCM_RIGHTS:
                        for i in range(0, len(data) - 3, 4):
                            fds.append(int.from_bytes(
                                data[i:i + 4], sys.byteorder, signed=True))
            else:
                b = sock.recv(min(n, 1 << 20))
            if not b:
                return None
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def send_frame(payload):
        sock.sendall(len(payload).to_bytes(4, "big") + payload)

    def format_exc(e):
        # The traceback as the user would see it: without this file's
        # frames at its head.
        import linecache  # noqa: F401 (register_sources fills its cache)
        import traceback
        register_sources()
        if isinstance(e, SyntaxError):
            return "".join(traceback.format_exception_only(type(e), e))
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code in own_code:
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(e), e, tb))

    def run_code(src, fname):
        # -> "ok" or "error"; output goes to the capture pipe.
        sources[fname] = src
        register_sources()
        try:
            tree = compile(src, fname, "exec", _ast.PyCF_ONLY_AST)
            last = None
            if tree.body and isinstance(tree.body[-1], _ast.Expr):
                last = _ast.Expression(tree.body.pop().value)
            flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            body = compile(tree, fname, "exec", flags=flags)
            tail = compile(last, fname, "eval", flags=flags) if last else None
        except (SyntaxError, ValueError) as e:  # ValueError: NUL in source
            import traceback
            err.write("".join(traceback.format_exception_only(type(e), e)))
            return "error"
        try:
            value = run_one(body)
            if tail is not None:
                value = run_one(tail)
                if value is not None:
                    out.write(repr(value) + "\n")
        except SystemExit as e:
            if e.code is None or e.code == 0:
                err.write("SystemExit: %r (ignored: the interpreter keeps "
                          "running)\n" % (e.code,))
                return "ok"
            err.write(format_exc(e))
            err.write("(SystemExit does not stop the interpreter; its state "
                      "is kept)\n")
            return "error"
        except BaseException as e:
            err.write(format_exc(e))
            return "error"
        return "ok"

    def run_one(code):
        if code.co_flags & 0x80:  # CO_COROUTINE: a cell with top-level await
            import asyncio
            return asyncio.run(eval(code, user_ns))
        return eval(code, user_ns)

    own_code = (run_code.__code__, run_one.__code__)

    def collect_figures():
        plt = sys.modules.get("matplotlib.pyplot")
        images = []
        if plt is None:
            return images
        total = 0
        try:
            nums = list(plt.get_fignums())
        except Exception:
            return images
        for num in nums:
            try:
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                b64 = binascii.b2a_base64(buf.getvalue(),
                                          newline=False).decode("ascii")
                if len(images) >= MAX_IMAGES or \
                        total + len(b64) > MAX_IMAGE_BYTES:
                    err.write("[figure %s not returned: image limit "
                              "reached]\n" % num)
                else:
                    images.append(b64)
                    total += len(b64)
            except Exception as e:
                err.write("[figure %s could not be rendered: %r]\n" % (num, e))
            finally:
                try:
                    plt.close(num)
                except Exception:
                    pass
        return images

    cell = 0
    while True:
        fds = []
        hdr = recv_exact(4, fds)
        if hdr is None:
            break
        payload = recv_exact(int.from_bytes(hdr, "big"), None)
        for fd in fds[1:]:
            os.close(fd)
        if payload is None or payload[:1] != b"E" or len(payload) < 5 \
                or not fds:
            break  # not our supervisor: stop rather than guess
        seq = payload[1:5]
        cell += 1
        images = []
        status = "error"
        try:
            os.dup2(fds[0], 1)  # inheritable: subprocesses write here too
            os.dup2(fds[0], 2)
            os.close(fds[0])
            reset_streams()
            status = run_code(payload[5:].decode("utf-8", "replace"),
                              "<cell-%d>" % cell)
            if os.getpid() != my_pid:
                os._exit(0)  # a fork() in user code must not answer for us
            reset_streams()
            images = collect_figures()
        except BaseException as e:  # a fault of the worker itself
            if os.getpid() != my_pid:
                os._exit(0)
            try:
                err.write("[sandbox worker error: %r]\n" % (e,))
            except Exception:
                pass
            status = "error"
        finally:
            os.dup2(null_fd, 1)
            os.dup2(null_fd, 2)
        resp = '{"status":"%s","images":[%s]}' % (status, ",".join(
            '{"mime":"image/png","data":"%s"}' % b for b in images))
        send_frame(seq + resp.encode("ascii"))
    os._exit(0)




# ---- the fork server (zygote): see local_zygote.c ----
#   python3 -I -B -c <this source> zygote FD SECCOMP_FD PRELOAD UID TMPFS
#                                  MASKS TIMEOUT_MS KEEP MEMORY PROCS
#                                  FILE_SIZE CPU_S
# PID 1 of a bubblewrap jail laid out like a sandbox's (its read-only
# system, its environment), keeping the capabilities of its namespaces:
# it imports PRELOAD ("a,b.c", missing ones skipped) and then forks one
# sandbox per request from the host on FD: b"F" + the host uid the
# sandbox runs as, with descriptors attached (SCM_RIGHTS): the sandbox's
# control socket, its stderr, a life socket, the cgroup.procs to join.
# It never runs the code: each fork makes its namespaces, limits and
# filter, then becomes that sandbox's supervisor (PID 1 of its own PID
# namespace) and forks the worker from there.
#   zygote child C (in the zygote's PID namespace): unshares the PID
#     namespace, forks the sandbox's PID 1, moves it into its cgroups
#     (while it sets itself up), writes its uid and gid maps, waits for it
#     to end (reaped: the whole namespace is gone) and exits, which the
#     host sees as the end of the life socket; b"K" on it kills the
#     sandbox.
#   sandbox PID 1: mount, IPC, network and UTS namespaces (and, once in
#     its cgroups, a cgroup namespace), fresh tmpfs on /dev/shm, /mnt/data
#     and /tmp, a /proc of its PID namespace (masked like bwrap's),
#     loopback up, a user
#     namespace of its own (uid 1000 inside, the requested uid outside,
#     no further user namespaces), every capability dropped, no_new_privs,
#     the seccomp filter; then the supervisor.
# Fresh state: the preloaded modules are out of sys.modules (a fresh
# sandbox looks like a cold one) until the code imports one of them, when
# they all come back as they were (_Stash); the worker reseeds random,
# numpy's global RandomState and multiprocessing's authkey. The hash seed
# is fixed when an interpreter starts: the sandboxes of one zygote share
# it.
class _Z:
    stash = None  # name -> module: what the zygote imported (forked only)


def _prctl(option, arg):
    # prctl through _ctypes (the ctypes package costs ms of every start)
    import _ctypes

    class Int(_ctypes._SimpleCData):
        _type_ = "i"

    class Long(_ctypes._SimpleCData):
        _type_ = "l"

    class Fn(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL
        _restype_ = Int

    class Libc:
        _handle = _ctypes.dlopen(None, 0)

    return Fn(("prctl", Libc()))(Int(option), Long(arg), Long(0), Long(0),
                                  Long(0))


PRELOAD_MIN_MEMORY = 512 << 20  # below this the imports would use up RLIMIT_AS


class _Stash:
    # Puts the preloaded modules back when the code imports one of them:
    # all of them, so that they keep referring to one another.
    def __init__(self, mods):
        self.mods = mods
        self.spec = None

    def find_spec(self, name, path=None, target=None):
        mods = self.mods
        if name not in mods:
            return None
        sys.meta_path.remove(self)
        m = mods.pop(name)
        for k, v in mods.items():
            sys.modules.setdefault(k, v)
        mods.clear()
        import importlib.machinery
        spec = importlib.machinery.ModuleSpec(name, self, is_package=hasattr(
            m, "__path__"))
        self.held = (m, getattr(m, "__spec__", None))
        return spec

    def create_module(self, spec):
        return self.held[0]

    def exec_module(self, module):
        module.__spec__ = self.held[1]  # as it was imported
        self.held = None


def _fresh_state():
    # In a new worker: what a fork copied that must differ per sandbox.
    stash = _Z.stash
    for name in ("random", "numpy", "multiprocessing"):
        m = stash.get(name) or sys.modules.get(name)
        try:
            if name == "random" and m is not None:
                m.seed()
            elif name == "numpy" and m is not None:
                m.random.seed()
            elif name == "multiprocessing" and m is not None:
                m.process.current_process().authkey = os.urandom(32)
        except Exception:
            pass
    if stash:
        sys.meta_path.insert(0, _Stash(stash))


def _own_pid_namespace(libc, host):
    # The server forks each sandbox's PID 1 in a PID namespace of its own:
    # unshare(CLONE_NEWPID) names the namespace of the next child only, and
    # is refused while the last one's is still the one ours get, so the
    # server first returns to its own (setns). That needs a capability in
    # the user namespace owning its PID namespace. Where that owner is
    # outside (bwrap's nested user namespace, for ordinary users), this
    # process becomes the parent of a child that is PID 1 of a PID
    # namespace (and /proc) of ours, which is the server from here on; it
    # waits for it and ends as it does. -> an fd of the server's PID
    # namespace, which setns accepts.
    NEWPID, NEWNS = 0x20000000, 0x00020000
    ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    if libc.setns(ns, NEWPID) == 0:
        return ns
    os.close(ns)
    if libc.unshare(NEWPID | NEWNS) != 0:
        os.write(2, b"codeshim fork server: no PID namespace of its own\n")
        os._exit(72)
    pid = os.fork()
    if pid > 0:
        os.close(host)  # the host talks to the child only
        while True:
            try:
                _, st = os.waitpid(pid, 0)
                break
            except InterruptedError:
                pass
        os._exit(os.waitstatus_to_exitcode(st) & 0xFF)
    import ctypes
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: dies with it
    private, proc = ctypes.c_ulong(16384 | (1 << 18)), ctypes.c_ulong(2 | 4 | 8)
    if libc.mount(None, b"/", None, private, None) or \
            libc.mount(b"proc", b"/proc", b"proc", proc, None):
        os.write(2, b"codeshim fork server: no /proc of its own\n")
        os._exit(72)
    ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    if libc.setns(ns, NEWPID) != 0:
        os.write(2, b"codeshim fork server: cannot make PID namespaces\n")
        os._exit(72)
    return ns


def _zygote():
    import _signal
    import _socket
    import _json  # noqa: F401 (the supervisor's and worker's imports:
    import select  # never stashed)
    import resource  # noqa: F401
    import binascii  # noqa: F401
    import io  # noqa: F401
    import _ast  # noqa: F401
    import _ctypes  # noqa: F401
    import time  # noqa: F401

    a = sys.argv
    host = int(a[2])
    bpf_fd = int(a[3])
    preload = [m for m in a[4].split(",") if m]
    uid_in = 1000
    tmpfs = [t.split("=", 1) for t in a[6].split("|") if t]
    masks = [m for m in a[7].split("|") if m]
    sup_args = a[8:10]
    limits = a[10:14]
    memory = int(limits[0])
    baseline = set(sys.modules)

    import ctypes
    import fcntl
    import struct
    import gc

    libc = ctypes.CDLL(None, use_errno=True)
    bpf = b""
    while True:
        b = os.read(bpf_fd, 1 << 16)
        if not b:
            break
        bpf += b
    os.close(bpf_fd)
    own_pid_ns = _own_pid_namespace(libc, host)

    if memory >= PRELOAD_MIN_MEMORY:
        for name in preload:
            try:
                __import__(name)
            except BaseException:
                pass  # missing or broken: skipped
    stash = {k: sys.modules.pop(k) for k in set(sys.modules) - baseline}
    gc.collect()
    gc.freeze()  # the collector then leaves the shared pages alone

    def frame(payload):
        data = len(payload).to_bytes(4, "big") + payload
        while data:
            data = data[os.write(host, data):]

    def die(msg):
        try:
            os.write(2, ("codeshim fork server: %s\n" % msg).encode())
        finally:
            os._exit(72)

    def check(rc, what):
        if rc != 0:
            e = ctypes.get_errno()
            die("%s: %s" % (what, os.strerror(e)))

    NS = 0x00020000 | 0x08000000 | 0x40000000 | 0x04000000  # mnt ipc net uts
    CLONE_NEWCGROUP = 0x02000000
    CLONE_NEWPID = 0x20000000
    CLONE_NEWUSER = 0x10000000
    MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 2, 4, 8, 4096
    MS_REC, MS_PRIVATE = 16384, 1 << 18

    def mount(src, dst, fs, flags, data):
        check(libc.mount(src and src.encode(), dst.encode(),
                         fs and fs.encode(), ctypes.c_ulong(flags),
                         data and data.encode()), "mount " + dst)

    def lo_up():
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            r = fcntl.ioctl(s, 0x8913, struct.pack("16sh22x", b"lo", 0))
            flags = struct.unpack("16sh22x", r)[1]
            fcntl.ioctl(s, 0x8914, struct.pack("16sh22x", b"lo", flags | 1))
        finally:
            s.close()

    def drop_caps():
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
        for c in range(last + 1):
            check(libc.prctl(24, c, 0, 0, 0), "PR_CAPBSET_DROP")
        libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
        hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        check(libc.capset(hdr, data), "capset")
        check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")

    def seccomp():
        class Fprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
        buf = ctypes.create_string_buffer(bpf, len(bpf))
        prog = Fprog(len(bpf) // 8, ctypes.addressof(buf))
        check(libc.prctl(22, 2, ctypes.byref(prog), 0, 0), "seccomp")

    def place(fds):
        # fds[i] becomes i; nothing else stays open
        high = [os.dup(f) for f in fds]
        for i, f in enumerate(high):
            os.dup2(f, 100 + i)
        for i in range(len(fds)):
            os.dup2(100 + i, i)
        os.closerange(len(fds), 1 << 20)

    def sandbox_init(uid_out, ctl, err, life, r_go, w_ready):
        # PID 1 of the new namespaces (forked from the server, or from C);
        # the zygote-only steps, then the supervisor. Errors go to err
        # (the host's pipe).
        os.dup2(err, 2)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: dies with its parent
        os.setsid()
        check(libc.unshare(NS), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        for dst, opts in tmpfs:
            mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV,
                  "%s,uid=%d,gid=%d" % (opts, uid_out, uid_out))
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        for m in masks:
            mount("/dev/null", m, None, MS_BIND, None)
        lo_up()
        try:
            os.setgroups([])
        except OSError:
            pass  # not root: no groups but our own to begin with
        check(libc.unshare(CLONE_NEWUSER), "unshare(user)")
        os.write(w_ready, b"u")
        if os.read(r_go, 1) != b"g":
            die("no uid map")
        os.close(w_ready)
        os.close(r_go)
        # in its cgroups now (our parent moved us): their namespace
        # starts there
        check(libc.unshare(CLONE_NEWCGROUP), "unshare(cgroup)")
        os.setresgid(uid_in, uid_in, uid_in)
        os.setresuid(uid_in, uid_in, uid_in)
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
        os.chdir("/mnt/data")
        drop_caps()
        null = os.open("/dev/null", os.O_RDWR)
        # set up: the host learns our pid (SO_PASSCRED) and stops waiting
        os.write(life, b"P")
        os.close(life)
        place([null, null, err, ctl])
        libc.prctl(4, 0, 0, 0, 0)  # not dumpable (the supervisor checks)
        seccomp()
        _Z.stash = stash
        sys.argv = ["", "sandbox", "3"] + sup_args + limits + ["/mnt/data"]
        _supervisor()
        os._exit(0)

    def map_uid(pid, uid_out):
        # the sandbox's uid_in is uid_out here; its groups: none
        for f, t in (("setgroups", "deny"),
                     ("uid_map", "%d %d 1\n" % (uid_in, uid_out)),
                     ("gid_map", "%d %d 1\n" % (uid_in, uid_out))):
            with open("/proc/%d/%s" % (pid, f), "w") as fh:
                fh.write(t)

    # What the server keeps of each sandbox it forked, by descriptor:
    #   handshake[r_ready] = (pid, pidfd, w_go, uid_out): until its uid
    #   map is in;
    #   pidfds[pidfd] = (pid, life): until its PID 1 has ended;
    #   lives[life] = pidfd: the host's end is open (b"K": kill it).
    # The life socket is closed once PID 1 is gone, which the host reads
    # as "that PID namespace is gone".
    handshake, pidfds, lives = {}, {}, {}

    def close_quietly(f):
        try:
            os.close(f)
        except OSError:
            pass

    def spawn_sandbox(uid_out, fds):
        # PID 1 of a new PID namespace, forked from here: unshare first
        # (it applies to the next child only), then fork.
        ctl, err, life = fds[:3]
        r_ready, w_ready = os.pipe()
        r_go, w_go = os.pipe()
        pid = -1
        # The namespace of the last one stays ours to give children until
        # we say otherwise, and unshare refuses a second: back to our own
        # first (setns), then a new one.
        if libc.setns(own_pid_ns, CLONE_NEWPID) == 0 and \
                libc.unshare(CLONE_NEWPID) == 0:
            try:
                pid = os.fork()
            except OSError:
                pid = -1
        else:
            os.write(2, ("codeshim fork server: a new PID namespace: %s\n"
                         % os.strerror(ctypes.get_errno())).encode())
        if pid == 0:
            try:
                sock.detach()
                for f in [host, own_pid_ns, r_ready, w_go] + list(handshake) + \
                        [h[2] for h in handshake.values()] + \
                        list(pidfds) + list(lives) + fds[3:]:
                    close_quietly(f)
                sandbox_init(uid_out, ctl, err, life, r_go, w_ready)
            except BaseException as e:
                import traceback
                die("%r %s" % (e, traceback.format_exc().replace("\n", " ")[-300:]))
            os._exit(73)
        for f in (w_ready, r_go):
            os.close(f)
        if pid < 0:  # the host reads the life socket's end: cold start
            for f in (r_ready, w_go):
                os.close(f)
            return
        # Its cgroups, while it sets itself up (the migration is slow on
        # cgroup v1): it runs nothing of its own before b"g".
        try:
            for j in fds[3:]:
                os.write(j, b"%d" % pid)
            pidfd = os.pidfd_open(pid)
        except OSError:
            os.kill(pid, 9)  # not reaped yet: the pid is still its own
            os.waitpid(pid, 0)
            for f in (r_ready, w_go):
                os.close(f)
            return
        handshake[r_ready] = (pid, pidfd, w_go, uid_out)
        pidfds[pidfd] = (pid, os.dup(life))
        lives[pidfds[pidfd][1]] = pidfd

    def kill(pidfd):
        # by pidfd: the pid itself may be reaped (the loop's waitpid) and
        # taken by another process already
        try:
            _signal.pidfd_send_signal(pidfd, 9)
        except OSError:
            pass  # gone

    def map_ids(r_ready):
        pid, pidfd, w_go, uid_out = handshake.pop(r_ready)
        try:
            if os.read(r_ready, 1) == b"u":
                map_uid(pid, uid_out)
                os.write(w_go, b"g")
        except OSError as e:
            os.write(2, ("codeshim fork server: %r\n" % (e,)).encode())
            kill(pidfd)
        os.close(w_go)
        os.close(r_ready)

    def on_life(life):
        try:
            b = os.read(life, 16)
        except OSError:
            b = b""
        if b"K" in b:
            kill(lives[life])
        if not b:
            del lives[life]  # the host closed: its supervisor ends it

    def ended(pidfd):
        # reaped here only, so no pid of ours is ever another's meanwhile
        pid, life = pidfds.pop(pidfd)
        for r in [r for r, h in handshake.items() if h[1] == pidfd]:
            os.close(handshake.pop(r)[2])
            os.close(r)
        lives.pop(life, None)
        try:
            os.waitpid(pid, 0)  # first: the host's "gone" means gone
        except ChildProcessError:
            pass
        os.close(life)
        os.close(pidfd)

    _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 1)
    frame(b"H")
    sock = _socket.socket(fileno=host)
    buf = b""
    fds = []
    while True:
        p = select.poll()  # not select(): any number of descriptors
        for f in [host] + list(handshake) + list(lives) + list(pidfds):
            p.register(f, select.POLLIN)
        r = [f for f, _ in p.poll()]
        for f in r:
            if f in handshake:
                map_ids(f)
            elif f in lives:
                on_life(f)
            elif f in pidfds:
                ended(f)
        if host not in r:
            continue
        try:
            b, anc, _f, _a = sock.recvmsg(1 << 12, _socket.CMSG_SPACE(64))
        except OSError:
            b = b""
        if not b:
            os._exit(0)  # the host is gone or closed us: so are its sandboxes
        for level, kind, data in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds += [int.from_bytes(data[i:i + 4], sys.byteorder)
                        for i in range(0, len(data) - 3, 4)]
        buf += b
        while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
            n = int.from_bytes(buf[:4], "big")
            msg, buf = buf[4:4 + n], buf[4 + n:]
            mine, fds = fds, []
            if msg[:1] == b"F" and len(mine) >= 3:
                spawn_sandbox(int(msg[1:]), mine)
            for f in mine:
                os.close(f)


if sys.argv[1] == "worker":
    _worker()
elif sys.argv[1] == "zygote":
    _zygote()
else:
    _supervisor()
