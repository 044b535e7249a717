# supervisor.py - PID 1 of a sandbox (main.py says how it is started): it
# talks to the host (frames.py), keeps one notebook interpreter (the
# worker, worker.py) fed with requests, enforces the wall clock, captures
# the output, lists the files after each execution (listing.py), serves
# the files between executions, and stops everything of the sandbox
# between executions (freeze, still_frozen, thaw). Its state is one
# _Supervisor; the worker it keeps is a _Worker, the request that runs a
# _Cell.


def _supervisor():
    # The modules it needs, imported here (not at the top of the source:
    # the worker and the zygote need not load them) as globals of the
    # whole source, for the classes below.
    global _signal, _socket, _json, _stat, select, _mono
    import _signal
    import _socket
    import _json
    import _stat
    import select
    _mono = __import__("time").monotonic
    _Supervisor(sys.argv).run()


class _Worker:
    # The current worker: its process, its socket, what goes to it and
    # what came from it.
    def __init__(self):
        self.pid = 0
        self.sock = None
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.status = None  # wait status once reaped
        self.eof = False
        self.served = False  # it was given a request


class _Cell:
    # The request that runs, and its captured output (head and tail).
    def __init__(self, seq, pipe, fd, restarted, deadline):
        self.seq = seq
        self.pipe = pipe  # read end of its output
        self.fd = fd  # the write end, until it is sent to the worker
        self.restarted = restarted
        self.deadline = deadline
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.stop = False  # b"K": interrupted


class _Supervisor:
    MAX_WORKER_FRAME = 14 << 20
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

    def __init__(self, argv):
        self.mode = argv[1]
        self.host = int(argv[2])
        self.timeout = int(argv[3]) / 1000.0
        self.keep = int(argv[4])
        self.limits = tuple(int(a) for a in argv[5:9])
        self.data_dir = argv[9]
        self.first = (int(argv[10]), int(argv[11])) \
            if len(argv) > 11 else None  # started by the shell: fd, pid
        self.sandboxed = self.mode == "sandbox"
        self.out_buf = bytearray()  # to the host
        self.host_gone = False  # the host cannot be written to
        self.hin = bytearray()  # from the host: frames accumulate here
        self.w = _Worker()
        self.lost = False  # a worker that served requests was lost
        self.prev_files = []
        # snap: {tid: (state, utime, stime, schedstat)} of the stopped
        # sandbox, None while it runs; next: when to check it again; stray:
        # tell the next execution that its processes were killed for
        # running idle
        self.snap = None
        self.next = 0.0
        self.stray_seen = False
        self.cell = None  # a _Cell while a request runs
        # Output pipes of finished cells that something the code started
        # in the background still writes to: read and dropped (up to
        # OLD_PIPE_BYTES each, then closed: the writer gets EPIPE), never
        # mixed into a later cell's output. [fd, bytes dropped]
        self.old_pipes = []
        # The worker is a fresh interpreter running this same source (a
        # fork would be cheaper in theory, but copying Python's pages on
        # write makes a forked child slower to get going than a new
        # process).
        orig = sys.orig_argv
        i = orig.index("-c")
        self.worker_argv = [sys.executable, "-I", "-B"] + orig[i:i + 5] + \
            ["worker", "3", self.mode] + [str(v) for v in self.limits]

    # ---- start and end ----

    def run(self):
        if self.sandboxed and os.getpid() != 1:
            sys.stderr.write("codeshim: the sandbox supervisor is not PID 1\n")
            os._exit(70)
        os.set_blocking(self.host, False)
        os.set_inheritable(self.host, False)
        null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        _signal.signal(_signal.SIGCHLD, lambda s, f: None)
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
        self.undumpable()
        self.frame(b"H")
        self.flush(block=True)
        if self.host_gone:
            os._exit(0)
        os.dup2(null, 1)  # bwrap's errors went to fd 2: ours need not
        os.dup2(null, 2)
        if self.first:
            self.w.pid = self.first[1]
            self.w.sock = _socket.socket(fileno=self.first[0])
            self.w.sock.setblocking(False)
        else:
            self.spawn()  # warm: the first request finds its interpreter ready
        while True:
            self.step()

    def undumpable(self):
        # Not dumpable: no /proc/1/mem, /proc/1/environ, /proc/1/fd... for
        # the code, which runs as the same user.
        if _prctl(4, 0) != 0 or _prctl(3, 0) != 0:
            sys.stderr.write("codeshim: the sandbox supervisor cannot be "
                             "made undumpable (prctl)\n")
            os._exit(71)

    def end(self, status):
        self.kill_all()
        os._exit(status)

    # ---- the host ----

    def frame(self, payload):
        self.out_buf.extend(_framed(payload))

    def flush(self, block=False):
        out = self.out_buf
        while out:
            try:
                n = os.write(self.host, out)
            except BlockingIOError:
                if not block:
                    return
                select.select([], [self.host], [])
                continue
            except OSError:
                del out[:]
                self.host_gone = True
                return
            del out[:n]

    # ---- processes ----

    def reap(self):
        w = self.w
        while True:
            try:
                pid, s = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == w.pid and w.status is None:
                w.status = s

    def kill_all(self):
        # Everything but us: the interpreter and whatever it started.
        w = self.w
        self.snap = None
        if w.pid and not self.sandboxed:
            for kill in (os.killpg, os.kill):
                try:
                    kill(w.pid, 9)
                except OSError:
                    pass
        while True:
            if self.sandboxed:
                try:
                    os.kill(-1, 9)  # PID 1: every process of the namespace
                except OSError:
                    pass
            try:
                pid, s = os.waitpid(-1 if self.sandboxed else w.pid, 0)
            except ChildProcessError:
                break
            if pid == w.pid and w.status is None:
                w.status = s
            if not self.sandboxed and pid == w.pid:
                break
        if not self.sandboxed:
            self.reap()
        self.drop_worker()

    def drop_worker(self):
        if self.w.sock is not None:
            self.w.sock.close()
        if self.w.served:
            self.lost = True
        self.w = _Worker()

    def spawn(self):
        a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        if _Z.stash is not None:
            return self.spawn_forked(a, b)
        try:
            pid = os.posix_spawn(
                sys.executable, self.worker_argv, os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, b.fileno(), 3)],
                setsigdef=(_signal.SIGCHLD, _signal.SIGINT))
        except OSError:
            a.close()
            b.close()
            return
        b.close()
        a.setblocking(False)
        self.w.pid = pid
        self.w.sock = a

    def spawn_forked(self, a, b):
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
                sys.argv = ["", "worker", "3", self.mode] + \
                    [str(v) for v in self.limits]
                _worker()
            finally:
                os._exit(70)
        b.close()
        a.setblocking(False)
        self.w.pid = pid
        self.w.sock = a

    def died_unseen(self):
        # The interpreter died, or spoke, while idle, and the request came
        # before this loop saw it (a busy machine): its socket tells.
        w = self.w
        if w.inbuf or w.eof or w.status is not None:
            return True
        p = select.poll()
        p.register(w.sock.fileno(), select.POLLIN)
        return bool(p.poll(0))

    # ---- idle: every task stopped ----

    def tasks(self):
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
                b = _read_small(d + "stat")
                if b is None:
                    continue  # gone
                f = b[b.rfind(b")") + 2:].split()
                if len(f) > 12:
                    snap[t] = (f[0], f[11], f[12],
                               _read_small(d + "schedstat"))
        return snap

    def freeze(self):
        # Stops every process but us; True once none can run.
        try:
            os.kill(-1, _signal.SIGSTOP)
        except OSError:
            pass  # none left
        end = _mono() + self.FREEZE_S
        pause = 0.0002
        while True:
            snap = self.tasks()
            if not any(v[0] in self.RUNNING for v in snap.values()):
                self.snap = snap
                self.next = _mono() + self.WATCH_S
                return True
            if _mono() >= end:
                return False
            select.select([], [], [], pause)
            pause = min(pause * 2, 0.05)

    def still_frozen(self):
        # Nothing ran since freeze(): no task runs, none is new, and none
        # seen stopped has used the CPU. A task that was in the kernel
        # (D) may have stopped since; dead ones do not matter.
        old, now = self.snap, self.tasks()
        for t, v in now.items():
            was = old.get(t)
            if v[0] in (b"Z", b"X"):
                continue
            if was is None or v[0] in self.RUNNING or \
                    (was[0] in (b"T", b"t") and v != was):
                return False
        self.snap = now
        return True

    def stray(self):
        # Something ran while idle: nothing of it may run on.
        self.kill_all()
        self.stray_seen = True
        self.spawn()

    def thaw(self):
        if self.snap is None:
            return
        if self.still_frozen():
            self.snap = None
            try:
                os.kill(-1, _signal.SIGCONT)
            except OSError:
                pass  # none left
        else:
            self.stray()

    # ---- a request ----

    def feed(self, b):
        c = self.cell
        keep = self.keep
        c.total += len(b)
        head = c.head
        if len(head) < keep:
            take = keep - len(head)
            head.extend(b[:take])
            b = b[take:]
        if b:
            tail = c.tail
            tail.extend(b)
            if len(tail) > 2 * keep:
                del tail[:len(tail) - keep]

    def output(self):
        c, keep = self.cell, self.keep
        head, tail, total = c.head, c.tail, c.total
        if total <= 2 * keep:
            return bytes(head + tail)
        return bytes(head) + self.NOTE % (total - 2 * keep) + \
            bytes(tail[-keep:])

    def list_files(self):
        snap = _cs_list_files(self.data_dir)
        changed = snap != self.prev_files
        self.prev_files = snap
        return [f[0] for f in snap], changed

    def start(self, payload):
        seq = payload[1:5]
        if self.w.pid and self.died_unseen():
            self.kill_all()  # as when seen idle: the request gets a new one
        self.thaw()
        restarted = self.lost
        self.lost = False
        if not self.w.pid:
            self.spawn()
        r, w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(r, False)
        self.cell = _Cell(seq, r, w, restarted, _mono() + self.timeout)
        if self.stray_seen:
            self.stray_seen = False
            self.feed(self.STRAY_NOTE)
        self.w.outbuf = bytearray(_framed(payload))
        self.w.served = True
        self.send_worker()

    def send_worker(self):
        c, w = self.cell, self.w
        try:
            if c.fd is not None:
                anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                        c.fd.to_bytes(4, sys.byteorder, signed=True))]
                n = w.sock.sendmsg([w.outbuf], anc)
                os.close(c.fd)
                c.fd = None
            else:
                n = w.sock.send(w.outbuf)
            del w.outbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            w.outbuf = bytearray()
            w.eof = True

    def worker_input(self):
        # -> None (nothing yet), or ("D", json) / ("I", "")
        b = self.w.inbuf
        if len(b) < 4:
            return None
        n = int.from_bytes(b[:4], "big")
        if n < 4 or n > self.MAX_WORKER_FRAME or self.cell is None:
            return ("I", b"")
        if len(b) < 4 + n:
            return None
        if len(b) > 4 + n or bytes(b[4:8]) != self.cell.seq:
            return ("I", b"")
        return ("D", bytes(b[8:4 + n]))

    def reply(self, kind, wjson=b"", exit_desc=""):
        # Ends the current request: output, files, the reply.
        c = self.cell
        if kind != "D":
            self.kill_all()
        elif self.sandboxed and not self.freeze():
            self.kill_all()  # something would not stop: it may not run on
            self.stray_seen = True
        alive = _drain(c.pipe, self.feed)
        if alive and len(self.old_pipes) < self.OLD_PIPES and kind == "D":
            self.old_pipes.append([c.pipe, 0])
        else:
            os.close(c.pipe)
        if kind != "D":
            for p in self.old_pipes:
                os.close(p[0])
            del self.old_pipes[:]
        names, changed = self.list_files()
        meta = ('{"files":[%s],"changed":%s,"exit":%s}' % (
            ",".join(names), "true" if changed else "false",
            _json.encode_basestring_ascii(exit_desc))).encode("ascii")
        body = self.output()
        self.frame(b"".join((b"R", c.seq, kind.encode(),
                             b"\x01" if c.restarted else b"\x00",
                             len(meta).to_bytes(4, "big"), meta,
                             len(wjson).to_bytes(4, "big"), wjson, body)))
        self.cell = None

    # ---- the files of data_dir, between requests ----

    def parent_under(self, rel):
        # rel inside data_dir: (a descriptor of its directory, reached
        # without following a symlink, its last part), or None
        parts = rel.split("/")
        if not rel or any(x in ("", ".", "..") for x in parts):
            return None
        d = os.open(self.data_dir,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
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

    def open_under(self, rel, flags):
        got = self.parent_under(rel)
        if got is None:
            return None
        d, last = got
        try:
            return os.open(last, flags | os.O_NOFOLLOW | os.O_CLOEXEC |
                           os.O_NONBLOCK, 0o644, dir_fd=d)
        finally:
            os.close(d)

    def file_reply(self, seq, status, size=0, data=b""):
        self.frame(b"".join((b"F", seq, status, size.to_bytes(8, "big"),
                             data)))

    def get_file(self, payload):
        seq, off = payload[1:5], int.from_bytes(payload[5:13], "big")
        want = int.from_bytes(payload[13:17], "big")
        try:
            rel = payload[17:].decode("utf-8", "surrogateescape")
            fd = self.open_under(rel, os.O_RDONLY)
        except (OSError, ValueError):
            fd = None
        if fd is None:
            return self.file_reply(seq, b"N")
        try:
            st = os.fstat(fd)
            if not _stat.S_ISREG(st.st_mode):
                return self.file_reply(seq, b"N")
            data = os.pread(fd, min(want, 4 << 20), off)
            self.file_reply(seq, b"O", st.st_size, data)
        except OSError:
            self.file_reply(seq, b"E")
        finally:
            os.close(fd)

    def put_file(self, payload):
        seq, flags = payload[1:5], payload[5]
        last, first = flags & 1, flags & 2
        n = int.from_bytes(payload[6:8], "big")
        name = payload[8:8 + n].decode("utf-8", "surrogateescape")
        part = ".codeshim-upload-" + name
        if "/" in name or name in ("", ".", "..") or len(part) > 255:
            return self.file_reply(seq, b"N")
        try:
            fd = self.open_under(part, os.O_WRONLY | os.O_CREAT |
                                 os.O_APPEND | (os.O_TRUNC if first else 0))
            try:
                data = memoryview(payload)[8 + n:]
                while data:
                    data = data[os.write(fd, data):]
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if last:
                os.replace(os.path.join(self.data_dir, part),
                           os.path.join(self.data_dir, name))
            self.file_reply(seq, b"O", size)
        except OSError:
            try:
                os.unlink(os.path.join(self.data_dir, part))
            except OSError:
                pass
            self.file_reply(seq, b"E")

    def remove_file(self, payload):
        seq = payload[1:5]
        try:
            got = self.parent_under(payload[5:].decode("utf-8",
                                                       "surrogateescape"))
        except (FileNotFoundError, NotADirectoryError):
            return self.file_reply(seq, b"N")
        except (OSError, ValueError):
            return self.file_reply(seq, b"E")
        if got is None:
            return self.file_reply(seq, b"N")
        d, last = got
        try:
            if not _stat.S_ISREG(os.stat(last, dir_fd=d,
                                         follow_symlinks=False).st_mode):
                return self.file_reply(seq, b"N")
            os.unlink(last, dir_fd=d)
            self.file_reply(seq, b"O")
        except FileNotFoundError:
            self.file_reply(seq, b"N")
        except OSError:
            self.file_reply(seq, b"E")
        finally:
            os.close(d)

    # ---- the loop ----

    def poll(self):
        w, c = self.w, self.cell
        p = select.poll()
        p.register(self.host,
                   select.POLLIN | (select.POLLOUT if self.out_buf else 0))
        p.register(self.wake_r, select.POLLIN)
        if w.sock is not None:
            ev = select.POLLIN
            if w.outbuf and c is not None:
                ev |= select.POLLOUT
            p.register(w.sock.fileno(), ev)
        if c is not None:
            p.register(c.pipe, select.POLLIN)
        for fd, _ in self.old_pipes:
            p.register(fd, select.POLLIN)
        wait = None
        if c is not None:
            wait = max(0, int((c.deadline - _mono()) * 1000) + 1)
        elif self.snap is not None:
            wait = max(0, int((self.next - _mono()) * 1000) + 1)
        return p.poll(wait)

    def on_host(self, ev):
        if ev & select.POLLOUT:
            self.flush()
            if self.host_gone:
                self.end(0)
        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
            try:
                b = os.read(self.host, 1 << 20)
            except BlockingIOError:
                b = None
            except OSError:
                b = b""
            if b == b"":
                self.end(0)  # the host is gone or closed us
            if b:
                self.hin.extend(b)

    def on_worker(self, ev):
        w = self.w
        if ev & select.POLLOUT and self.cell is not None:
            self.send_worker()
        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
            try:
                b = w.sock.recv(1 << 20)
            except BlockingIOError:
                b = None
            except OSError:
                b = b""
            if b == b"":
                w.eof = True
            elif b:
                w.inbuf.extend(b)
                if len(w.inbuf) > self.MAX_WORKER_FRAME + 8:
                    w.inbuf = w.inbuf[:self.MAX_WORKER_FRAME + 8]

    def on_old_pipe(self, fd):
        for i, p in enumerate(self.old_pipes):
            if p[0] == fd:
                def count(b, p=p):
                    p[1] += len(b)
                if not _read_into(fd, count) or p[1] > self.OLD_PIPE_BYTES:
                    os.close(fd)
                    del self.old_pipes[i]
                break

    def host_requests(self):
        # One request at a time; anything else from the host ends us.
        while True:
            payload = _next_frame(self.hin)
            if payload is None:
                return
            n, kind, c = len(payload), payload[:1], self.cell
            if c is None and n >= 17 and kind == b"G":
                self.get_file(payload)
            elif c is None and n >= 8 and kind == b"P":
                self.put_file(payload)
            elif c is None and n >= 6 and kind == b"U":
                self.remove_file(payload)
            elif n == 5 and kind == b"K":
                # interrupt the running request (an older one's is late)
                if c is not None and payload[1:5] == c.seq:
                    c.stop = True
            elif c is not None or n < 5 or kind != b"E":
                self.end(2)
            else:
                self.start(payload)

    def idle(self):
        w = self.w
        if w.pid and (w.inbuf or w.eof or w.status is not None):
            self.kill_all()  # died or spoke while idle: not to be trusted
        elif self.snap is not None and _mono() >= self.next:
            if self.still_frozen():
                self.next = _mono() + self.WATCH_S
            else:
                self.stray()

    def running(self):
        w, c = self.w, self.cell
        got = self.worker_input()
        if got is not None:
            w.inbuf = bytearray()
            self.reply(*got)
        elif w.eof or w.status is not None:
            # Died during the cell: let it finish dying for its status.
            for _ in range(50):
                self.reap()
                if w.status is not None:
                    break
                select.select([self.wake_r], [], [], 0.01)
            self.reply("X", b"", _describe(w.status))
        elif _mono() >= c.deadline or c.stop:
            self.reply("T")
        if self.cell is None and not self.w.pid:
            self.spawn()
        self.flush()
        if self.host_gone:
            self.end(0)

    def step(self):
        for fd, ev in self.poll():
            w = self.w
            if fd == self.host:
                self.on_host(ev)
            elif fd == self.wake_r:
                _drain(self.wake_r, None)
                self.reap()
            elif w.sock is not None and fd == w.sock.fileno():
                self.on_worker(ev)
            elif self.cell is not None and fd == self.cell.pipe:
                _read_into(fd, self.feed)
            else:
                self.on_old_pipe(fd)
        self.host_requests()
        if self.cell is None:
            self.idle()
        else:
            self.running()


def _describe(s):
    # A wait status as the reply's "exit" says it.
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


def _read_small(path):
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


def _read_once(fd, sink):
    # One read into sink: 1 read, 0 nothing yet (EAGAIN), -1 at the end or
    # on an error.
    try:
        b = os.read(fd, 1 << 16)
    except BlockingIOError:
        return 0
    except OSError:
        return -1
    if not b:
        return -1
    if sink is not None:
        sink(b)
    return 1


def _read_into(fd, sink):
    # One read into sink; False at the end or on an error.
    return _read_once(fd, sink) >= 0


def _drain(fd, sink, budget=0.1):
    # Everything written so far; stops at the end, at EAGAIN, or after
    # budget seconds (a background process may keep writing).
    end = _mono() + budget
    while _mono() < end:
        got = _read_once(fd, sink)
        if got <= 0:
            return got == 0
    return True
