# zygote.py - the fork server (local_zygote.c starts it), and what a
# sandbox forked from it keeps of it (_Z, _Stash, _fresh_state):
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
        data = _framed(payload)
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
    buf = bytearray()
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
        while True:
            msg = _next_frame(buf)
            if msg is None:
                break
            mine, fds = fds, []
            if msg[:1] == b"F" and len(mine) >= 3:
                spawn_sandbox(int(msg[1:]), mine)
            for f in mine:
                os.close(f)
