# worker.py - the local sandbox's Python worker (owned by shim/sandbox).
#
# Embedded into libcodeshim by sandbox.mk and run by local.c as
#   python3 -I -B -c <this source> <socket fd> <sandbox root>
# with cwd <root>/data. It runs cells with notebook semantics in one
# persistent __main__ namespace. Protocol on the inherited socket (never on
# stdout/stderr, which belong to the user's code): frames of a 4-byte
# big-endian length and a payload.
#   request:  b"E" + 4-byte big-endian sequence number + UTF-8 source
#   response: JSON {"seq": n, "status": "ok"|"error",
#                   "images": [{"mime", "data"}], "files": [relative names]}
# (the sequence number lets the C side reject stray or forged frames).
# The cell's stdout and stderr (and those of its subprocesses) go, in order,
# to the file <root>/run/out, which the C side reads itself (head and tail
# only), so no output flood has to cross the socket.
import os
import sys


def _worker():
    import ast
    import binascii
    import builtins
    import io
    import json
    import linecache
    import select
    import signal
    import traceback
    import types
    import _thread

    sock = os.dup(int(sys.argv[1]))  # non-inheritable copy, away from fd 3
    os.close(int(sys.argv[1]))
    root = sys.argv[2]
    data_dir = os.path.join(root, "data")
    run_dir = os.path.join(root, "run")
    out_path = os.path.join(run_dir, "out")
    null_fd = os.dup(1)  # /dev/null, to park fds 1 and 2 between cells
    my_pid = os.getpid()
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE

    MAX_IMAGES = 16
    MAX_IMAGE_BYTES = 12 << 20  # base64 total; the C side caps frames
    MAX_FILES = 1000
    MAX_SCAN = 20000
    MAX_DEPTH = 16
    MAX_NAME_BYTES = 512 << 10

    class _FdWriter(io.RawIOBase):
        # Unbuffered writes to a fixed fd number, so Python's output and a
        # subprocess's output land in the capture file in call order.
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
    main_mod = types.ModuleType("__main__")
    user_ns = main_mod.__dict__
    user_ns["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    sys.argv = [""]
    sys.path.insert(0, "")  # like a notebook: modules in the cwd import

    import warnings
    warnings.filterwarnings("ignore", message=".*non-interactive.*")

    def hang_up():
        # The host is gone without closing us (a normal close kills us
        # before it closes the socket): remove the sandbox's files and kill
        # the whole group, user code included, so nothing is left behind.
        try:
            import shutil  # only here: it costs start-up time
            shutil.rmtree(root, ignore_errors=True)
        finally:
            os.killpg(0, signal.SIGKILL)
            os._exit(1)

    def watchdog():
        # Notices the hang-up even while user code keeps the main thread.
        me = os.fstat(sock)
        p = select.poll()
        p.register(sock, select.POLLRDHUP)
        while not p.poll():
            pass
        try:
            st = os.fstat(sock)
        except OSError:
            return  # user code closed our socket: nothing left to watch
        if (st.st_dev, st.st_ino) != (me.st_dev, me.st_ino):
            return  # ... and reused its number
        hang_up()

    _thread.start_new_thread(watchdog, ())

    def recv_exact(n):
        chunks = []
        while n > 0:
            b = os.read(sock, min(n, 1 << 20))
            if not b:
                return None
            chunks.append(b)
            n -= len(b)
        return b"".join(chunks)

    def send_frame(payload):
        data = len(payload).to_bytes(4, "big") + payload
        mv = memoryview(data)
        while mv:
            mv = mv[os.write(sock, mv):]

    def format_exc(e):
        # The traceback as the user would see it: without this file's
        # frames at its head.
        if isinstance(e, SyntaxError):
            return "".join(traceback.format_exception_only(type(e), e))
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code in own_code:
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(e), e, tb))

    def run_code(src, fname):
        # -> "ok" or "error"; output goes to the capture file.
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        try:
            tree = ast.parse(src, fname, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            body = compile(tree, fname, "exec", flags=flags)
            tail = compile(last, fname, "eval", flags=flags) if last else None
        except (SyntaxError, ValueError) as e:  # ValueError: NUL in source
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
                    images.append({"mime": "image/png", "data": b64})
                    total += len(b64)
            except Exception as e:
                err.write("[figure %s could not be rendered: %r]\n" % (num, e))
            finally:
                try:
                    plt.close(num)
                except Exception:
                    pass
        return images

    def list_files():
        names = []
        name_bytes = 0
        scanned = 0
        stack = [(data_dir, "", 0)]
        while stack:
            path, rel, depth = stack.pop()
            try:
                entries = list(os.scandir(path))
            except OSError:
                continue
            for e in entries:
                scanned += 1
                if scanned > MAX_SCAN or len(names) >= MAX_FILES:
                    return sorted(names)
                try:
                    if e.is_dir(follow_symlinks=False):
                        if depth < MAX_DEPTH and e.name != "__pycache__":
                            stack.append((e.path, rel + e.name + "/",
                                          depth + 1))
                    elif e.is_file(follow_symlinks=False):
                        name = rel + e.name
                        try:
                            name.encode("utf-8")
                        except UnicodeEncodeError:
                            name = name.encode("utf-8", "surrogateescape") \
                                .decode("utf-8", "backslashreplace")
                        name_bytes += len(json.dumps(name))
                        if name_bytes > MAX_NAME_BYTES:
                            return sorted(names)
                        names.append(name)
                except OSError:
                    pass
        return sorted(names)

    def open_capture():
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
        try:
            os.unlink(out_path)
        except FileNotFoundError:
            pass
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.dup2(fd, 1)  # inheritable: subprocesses write here too
        os.dup2(fd, 2)
        os.close(fd)

    cell = 0
    while True:
        hdr = recv_exact(4)
        if hdr is None:
            break
        payload = recv_exact(int.from_bytes(hdr, "big"))
        if payload is None:
            break
        if payload[:1] != b"E" or len(payload) < 5:
            break  # not our client: stop rather than guess
        seq = int.from_bytes(payload[1:5], "big")
        cell += 1
        images = []
        files = []
        status = "error"
        try:
            open_capture()
            reset_streams()
            status = run_code(payload[5:].decode("utf-8", "replace"),
                              "<cell-%d>" % cell)
            if os.getpid() != my_pid:
                os._exit(0)  # a fork() in user code must not answer for us
            reset_streams()
            images = collect_figures()
            files = list_files()
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
        resp = {"seq": seq, "status": status, "images": images,
                "files": files}
        send_frame(json.dumps(resp).encode("ascii"))
    hang_up()


_worker()
