# zygote.py - the fork server (local_zygote.c starts it), and what a
# sandbox forked from it keeps of it (_Z, _Stash, _fresh_state):
#   python3 -I -B -c <this source> zygote FD PRELOAD JAIL TIMEOUT_MS KEEP
#                                  MEMORY PROCS FILE_SIZE CPU_S
# PID 1 of a bubblewrap jail laid out like a sandbox's (its read-only
# system, its environment), keeping the capabilities of its namespaces.
# JAIL (JSON, local_layout.c's, from the one table, local/jail.def) says
# what each fork makes its own; this file has no list of paths, flags or
# ids of its own (jail.def's head says what a fork does differently from
# bubblewrap, and why):
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
#   sandbox PID 1: JAIL's namespaces (the cgroup one once in its
#     cgroups), its hostname, fresh tmpfs and /proc (in place of the
#     server's) with its masks, loopback up, a user namespace of its own
#     (JAIL's id inside, the requested uid outside) and, for no further
#     user namespaces, a second one nested in it as bubblewrap makes, its
#     environment and working directory, every capability dropped,
#     no_new_privs, the seccomp filter; then the supervisor.
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


def _own_pid_namespace(libc, host, NEWPID, NEWNS, proc):
    # The server forks each sandbox's PID 1 in a PID namespace of its own:
    # unshare(CLONE_NEWPID) names the namespace of the next child only, and
    # is refused while the last one's is still the one ours get, so the
    # server first returns to its own (setns). That needs a capability in
    # the user namespace owning its PID namespace. Where that owner is
    # outside (a user namespace bubblewrap nested: not the server's own,
    # local_layout.c), this
    # process becomes the parent of a child that is PID 1 of a PID
    # namespace (and /proc) of ours, which is the server from here on; it
    # waits for it and ends as it does. -> an fd of the server's PID
    # namespace, which setns accepts.
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
    private = ctypes.c_ulong(16384 | (1 << 18))
    if libc.mount(None, b"/", None, private, None) or \
            libc.mount(b"proc", proc[0].encode(), b"proc",
                       ctypes.c_ulong(proc[1]), None):
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
    preload = [m for m in a[3].split(",") if m]
    before = set(sys.modules)
    import json
    jail = json.loads(a[4])
    for k in set(sys.modules) - before:  # as a cold sandbox: not imported
        del sys.modules[k]
    bpf_fd = jail["seccomp"]
    ns = jail["ns"]
    uid_in = jail["id"]
    # the id in the sandbox's first user namespace: with no further user
    # namespaces, as bubblewrap's, root of it, and uid_in of the one nested
    uid_first = 0 if jail["no_userns"] else uid_in
    sup_args = a[5:7]
    limits = a[7:11]
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
    own_pid_ns = _own_pid_namespace(libc, host, ns["pid"], ns["mnt"],
                                    jail["proc"])

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

    # JAIL's namespaces: the PID one is made at the fork, the user one
    # after the mounts, the cgroup one once in the sandbox's cgroups; all
    # the others at once, first
    CLONE_NEWPID, CLONE_NEWUSER = ns["pid"], ns["user"]
    CLONE_NEWCGROUP = ns.get("cgroup", 0)
    NS = sum(f for n, f in ns.items() if n not in ("pid", "user", "cgroup"))
    # how the mounts are made (what is mounted, and its flags: JAIL)
    MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 4096, 8192, 16384, 1 << 18
    MNT_DETACH = 2

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

    def unmount_all(dst):
        # the server's own mounts there (stacked ones too): gone in this
        # mount namespace, before the sandbox's own
        for _ in range(16):
            if libc.umount2(dst.encode(), MNT_DETACH) != 0:
                break

    def own_proc(dst, flags, spare):
        # a /proc of the sandbox's PID namespace in place of the server's:
        # mounted aside first (in a user namespace a proc may be mounted
        # only while another is fully visible), then moved there
        aside = spare + "/.codeshim-proc"
        os.mkdir(aside, 0o700)
        mount("proc", aside, "proc", flags, None)
        unmount_all(dst)
        mount(aside, dst, None, MS_MOVE, None)
        os.rmdir(aside)

    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def own_ids(pid, inner, outer):
        # inner is outer in the parent user namespace; no groups
        write("/proc/%s/setgroups" % pid, "deny")
        write("/proc/%s/uid_map" % pid, "%d %d 1\n" % (inner, outer))
        write("/proc/%s/gid_map" % pid, "%d %d 1\n" % (inner, outer))

    def no_userns():
        # as bubblewrap's --disable-userns: this user namespace may hold
        # one user namespace, and the sandbox runs in it, nested
        write("/proc/sys/user/max_user_namespaces", "1")
        # dumpable, so that our /proc/self is ours to write (the uid
        # change from root left it not; not dumpable again below)
        libc.prctl(4, 1, 0, 0, 0)
        check(libc.unshare(CLONE_NEWUSER), "unshare(user, nested)")
        own_ids("self", uid_in, uid_first)
        if libc.unshare(CLONE_NEWUSER) == 0:
            die("user namespaces are not disabled")

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
        if "hostname" in jail:
            name = jail["hostname"].encode()
            check(libc.sethostname(name, len(name)), "sethostname")
        mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        for dst, flags, opts in jail["tmpfs"]:
            unmount_all(dst)
            mount("tmpfs", dst, "tmpfs", flags,
                  "%s,uid=%d,gid=%d" % (opts, uid_out, uid_out))
        if "proc" in jail:
            own_proc(jail["proc"][0], jail["proc"][1], jail["tmpfs"][-1][0])
        for m in jail["masks"]:
            mount(jail["mask_with"], m, None, MS_BIND, None)
        if "net" in ns:
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
        if CLONE_NEWCGROUP:
            check(libc.unshare(CLONE_NEWCGROUP), "unshare(cgroup)")
        os.setresgid(uid_first, uid_first, uid_first)
        os.setresuid(uid_first, uid_first, uid_first)
        if jail["no_userns"]:
            no_userns()
        os.environ.clear()
        os.environ.update(jail["env"])
        if "cwd" in jail:
            os.chdir(jail["cwd"])
            os.environ["PWD"] = jail["cwd"]  # as bubblewrap's --chdir
        if jail["caps_none"]:
            drop_caps()
        else:
            check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
        null = os.open("/dev/null", os.O_RDWR)
        # set up: the host learns our pid (SO_PASSCRED) and stops waiting
        os.write(life, b"P")
        os.close(life)
        place([null, null, err, ctl])
        libc.prctl(4, 0, 0, 0, 0)  # not dumpable (the supervisor checks)
        seccomp()
        _Z.stash = stash
        sys.argv = ["", "sandbox", "3"] + sup_args + limits + [jail["cwd"]]
        _supervisor()
        os._exit(0)

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
                own_ids(pid, uid_first, uid_out)
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
