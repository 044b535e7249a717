# worker.py - the notebook interpreter of a sandbox (main.py says how it is
# started; the supervisor, supervisor.py, starts it and feeds it): it sets
# its limits, then runs each request's cell in one persistent __main__,
# its output into the pipe that came with the request, and answers with
# the cell's status and the figures it left.


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
        sock.sendall(_framed(payload))

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
