/* local.c - the local sandbox backend: one isolated Python process tree
 * per sandbox, built from standard parts.
 *
 *   host (this file) --socketpair-- PID 1: supervisor (worker.py)
 *                                      '-- worker: the notebook interpreter
 *                                            '-- whatever the code starts
 *
 * Isolation (bubblewrap, run unprivileged; see README "Sandbox"):
 * - namespaces: user (the sandbox user is uid 1000 inside; outside it is a
 *   fresh unprivileged uid per sandbox when the host runs as root, else
 *   the host's own uid), PID (the supervisor is PID 1: nothing outside is
 *   visible, killing it ends them all), network (no interface but a
 *   loopback of its own), mount, IPC, UTS, cgroup; no further user
 *   namespaces (--disable-userns and seccomp);
 * - filesystem: /usr (and the /bin, /lib... links) and a short list of /etc
 *   files Python needs, read-only; a synthetic /etc/passwd and /etc/group;
 *   /mnt/data (the working directory) and /tmp as size-limited tmpfs of
 *   their own, HOME a link into /tmp, a small /dev/shm; everything else
 *   read-only and empty: no /root, /home, host /tmp or working directory;
 * - no capabilities, no_new_privs, a seccomp filter (seccomp.c), a clean
 *   environment, no descriptor of the host but the control socket;
 * - limits: address space, tasks (RLIMIT_NPROC counts per user namespace,
 *   so per sandbox), file size, CPU time (rlimits the worker sets on itself
 *   before any user code, inherited by all it starts), tmpfs sizes, output
 *   captured (head and tail), wall clock.
 *
 * Start: bwrap runs a shell that starts the first worker and becomes the
 * supervisor (both Pythons start at once); the supervisor says hello on
 * the control socket when it is up. Setup errors (bwrap's) arrive on the
 * sandbox's stderr, a pipe read only when no hello comes.
 *
 * The supervisor enforces the wall-clock limit and restarts the
 * interpreter (files in /mnt/data survive); this file keeps a backstop
 * (limit + GRACE_S) after which it ends the whole sandbox. If bubblewrap
 * cannot set the sandbox up, nothing runs: the execution fails with the
 * reason. CODESHIM_UNSAFE_NO_ISOLATION=1 runs the same supervisor without
 * any isolation (private directories under TMPDIR), for debugging only.
 *
 * Lifetime: the sandbox starts at create (so its start overlaps the
 * caller's work) and again at the next execution after it was lost. It
 * ends at destroy, and by itself when the host goes away (the supervisor
 * sees its socket hang up; bwrap --die-with-parent as a second line). */
#include "buf.h"
#include "config.h"
#include "log.h"
#include "sandbox_int.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* build/gen/worker_py.c (sandbox.mk, embed.py) */
extern const char shim_worker_py[];
extern const size_t shim_worker_py_len;
extern const char shim_worker_pyc_tag[];
extern const char shim_worker_pyc[];

#define CODE_MAX (64u << 20)
#define MAX_IMAGES 16
#define MAX_FILES 1000
#define OUT_SLACK 4096   /* read beyond output_cap so sandbox.c can cut */
#define GRACE_S 15       /* backstop beyond the supervisor's own limit */
#define START_S 30       /* the sandbox must be up within this */
#define STOP_MS 2000     /* orderly stop before SIGKILL */
#define RM_MAX_DEPTH 128
#define SANDBOX_UID "1000"
#define SHM_SIZE (64u << 20)
/* The sandbox's descriptors: 0-2 stdio (2: setup errors), 3 control,
 * 4 seccomp, 5 passwd, 6 group (read and closed by bwrap), 7 and 8 the
 * supervisor's and the first worker's ends of their socketpair. */
#define NFDS 9

#define LOST_NOTE                                                              \
    "[Note: the Python interpreter was restarted before this execution; "      \
    "its earlier state (variables, imports) was lost. Files in the working "   \
    "directory were kept.]\n"
#define LOST_ALL_NOTE                                                          \
    "[Note: the sandbox was restarted before this execution; its earlier "     \
    "state (variables, imports) and the files in /mnt/data were lost.]\n"

struct local {
    char python[SHIM_PATH_MAX];
    char python_real[PATH_MAX]; /* sandbox mode: python, links resolved */
    char bwrap[SHIM_PATH_MAX];
    char tmpdir[SHIM_PATH_MAX];
    char root[SHIM_PATH_MAX]; /* unsafe mode: our private host directory */
    int unsafe;
    int timeout_s;
    size_t output_cap;
    unsigned long long memory, file_size, disk;
    int procs, cpu_s;
    pid_t pid;    /* bwrap (unsafe: the supervisor), or -1 */
    int fd;       /* our end of the control socket, non-blocking, or -1 */
    int errfd;    /* read end of the sandbox's stderr (setup errors), or -1 */
    int up;       /* the supervisor said hello */
    uint32_t seq; /* last request number */
    int used;     /* an execution ran in this sandbox instance */
    int lost_all; /* a used sandbox was ended: say so in the next execution */
    char why[1024]; /* why the last start failed */
};

/* ---- small helpers ---- */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int subpath(char *out, size_t outsz, const char *root, const char *sub)
{
    int n = snprintf(out, outsz, "%s/%s", root, sub);

    return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

/* Moves fd to a number >= min (close-on-exec); closes the old one. */
static int raise_fd(int fd, int min)
{
    int n;

    if (fd < 0 || fd >= min)
        return fd;
    n = fcntl(fd, F_DUPFD_CLOEXEC, min);
    close(fd);
    return n < 0 ? -errno : n;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* ---- the unsafe mode's host directory tree ---- */

static void rm_contents(int dfd, int depth);

/* Removes name in dfd, whatever it is, never following symlinks. */
static void rm_entry(int dfd, const char *name, int depth)
{
    int sub;

    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return;
    if (errno != EISDIR && errno != EPERM)
        return;
    if (depth >= RM_MAX_DEPTH)
        return;
    sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 && errno == EACCES) {
        fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW);
        sub = openat(dfd, name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (sub < 0)
        return;
    fchmod(sub, 0700);
    rm_contents(sub, depth + 1);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Empties the directory dfd; takes ownership of dfd. */
static void rm_contents(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    struct dirent *e;

    if (!d) {
        close(dfd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rm_entry(dirfd(d), e->d_name, depth);
    }
    closedir(d);
}

static void rm_tree(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd >= 0)
        rm_contents(fd, 0);
    if (rmdir(path) != 0 && errno != ENOENT)
        LOG_WARN("could not remove sandbox directory %s: %s", path,
                 strerror(errno));
}

/* (Re)creates root/{data,home,tmp}; a root that is no longer our own
 * directory is refused. */
static int ensure_tree(const struct local *l)
{
    static const char *const subs[] = {"data", "home", "tmp"};
    char p[SHIM_PATH_MAX];
    struct stat st;
    size_t i;

    if (mkdir(l->root, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lstat(l->root, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return -EEXIST;
    chmod(l->root, 0700);
    for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (subpath(p, sizeof(p), l->root, subs[i]))
            return -ENAMETOOLONG;
        if (mkdir(p, 0700) == 0)
            chmod(p, 0700);
        else if (errno != EEXIST)
            return -errno;
    }
    return 0;
}

/* ---- the command line ---- */

#define ARGV_MAX 200
#define ARENA 4096

struct cmd {
    char *v[ARGV_MAX + 1];
    int n;
    char arena[ARENA];
    size_t used;
    int overflow;
};

static void arg(struct cmd *c, const char *s)
{
    if (c->n < ARGV_MAX)
        c->v[c->n++] = (char *)s;
    else
        c->overflow = 1;
    c->v[c->n] = NULL;
}

/* A formatted argument kept in the command's arena. */
__attribute__((format(printf, 2, 3))) static const char *
argf(struct cmd *c, const char *fmt, ...)
{
    char *p = c->arena + c->used;
    size_t room = ARENA - c->used;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(p, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        c->overflow = 1;
        return "";
    }
    c->used += (size_t)n + 1;
    arg(c, p);
    return p;
}

static void args2(struct cmd *c, const char *a, const char *b)
{
    arg(c, a);
    arg(c, b);
}

static void args3(struct cmd *c, const char *a, const char *b, const char *d)
{
    arg(c, a);
    arg(c, b);
    arg(c, d);
}

/* /bin, /lib...: a merged-/usr system links them into /usr; others are
 * real directories, mounted read-only like /usr. */
static void system_dirs(struct cmd *c)
{
    static const char *const dirs[] = {"/bin", "/sbin", "/lib", "/lib32",
                                       "/lib64", "/libx32"};
    size_t i;

    for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        struct stat st;
        char target[256];
        ssize_t n;

        if (lstat(dirs[i], &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            n = readlink(dirs[i], target, sizeof(target) - 1);
            if (n <= 0 || (size_t)n >= sizeof(target) - 1)
                continue;
            target[n] = '\0';
            arg(c, "--symlink");
            argf(c, "%s", target);
            arg(c, dirs[i]);
        } else if (S_ISDIR(st.st_mode)) {
            args3(c, "--ro-bind", dirs[i], dirs[i]);
        }
    }
}

/* The few files of /etc Python and its libraries read; none holds a
 * secret (no passwd/shadow, ssh, ssl keys, host configuration). */
static void etc_files(struct cmd *c)
{
    static const char *const files[] = {
        "/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime",
        "/etc/timezone",    "/etc/os-release",   "/etc/debian_version",
        "/etc/mime.types",  "/etc/matplotlibrc", "/etc/fonts",
        "/etc/python3",
    };
    glob_t g;
    size_t i;

    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        args3(c, "--ro-bind-try", files[i], files[i]);
    if (glob("/etc/python3.*", 0, NULL, &g) == 0) {
        for (i = 0; i < g.gl_pathc && i < 8; i++) {
            arg(c, "--ro-bind-try");
            argf(c, "%s", g.gl_pathv[i]);
            argf(c, "%s", g.gl_pathv[i]);
        }
        globfree(&g);
    }
}

static int memfd_with(const char *name, const char *text)
{
    size_t n = strlen(text);
    int fd = memfd_create(name, MFD_CLOEXEC);

    if (fd < 0)
        return -errno;
    if (write(fd, text, n) != (ssize_t)n || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -EIO;
    }
    return fd;
}

/* Python's -c program: runs worker.py from its bytecode when this
 * interpreter is the one that built it (no compiling: a few ms of every
 * start), else from its source. Its arguments: SOURCE TAG BYTECODE, then
 * worker.py's own (which then sees them as sys.argv[1:]). */
#define BOOT_PY                                                                \
    "import sys\n"                                                             \
    "a = sys.argv\n"                                                           \
    "if a[2] == sys.implementation.cache_tag:\n"                               \
    "    import binascii, marshal\n"                                           \
    "    c = marshal.loads(binascii.a2b_base64(a[3]))\n"                       \
    "else:\n"                                                                  \
    "    c = compile(a[1], '<codeshim-sandbox>', 'exec')\n"                    \
    "del a[1:4], a\n"                                                          \
    "exec(c)\n"

/* The sandbox's first program (after bwrap's "--", or alone): a shell
 * that starts the notebook interpreter (the worker, fd 8 its end of a
 * socketpair) and, in parallel, becomes the supervisor (fd 3 the host, fd
 * 7 the worker), so the two Python start-ups overlap. The supervisor runs
 * without site-packages (-S): it needs none, and starts sooner. */
#define START_SH                                                               \
    "exec 4<&- 5<&- 6<&-\n"                                                    \
    "\"$0\" -I -B -c \"$1\" \"$2\" \"$3\" \"$4\" worker 8 \"$5\" \"$6\" \"$7\" "  \
    "\"$8\" \"$9\" 3<&- 7<&- </dev/null >/dev/null 2>&1 &\n"                    \
    "exec \"$0\" -I -S -B -c \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" 3 \"${10}\" "      \
    "\"${11}\" \"$6\" \"$7\" \"$8\" \"$9\" \"${12}\" 7 \"$!\" 8<&-\n"

static void start_args(struct cmd *c, const struct local *l, const char *data)
{
    arg(c, "/bin/sh");
    arg(c, "-c");
    arg(c, START_SH);
    arg(c, l->python_real[0] ? l->python_real : l->python); /* $0 */
    arg(c, BOOT_PY);                                 /* $1 */
    arg(c, shim_worker_py);                          /* $2 */
    arg(c, shim_worker_pyc_tag);                     /* $3 */
    arg(c, shim_worker_pyc);                         /* $4 */
    arg(c, l->unsafe ? "unsafe" : "sandbox");       /* $5 */
    argf(c, "%llu", l->memory);                      /* $6 */
    argf(c, "%d", l->procs);                         /* $7 */
    argf(c, "%llu", l->file_size);                   /* $8 */
    argf(c, "%d", l->cpu_s);                         /* $9 */
    argf(c, "%lld", (long long)l->timeout_s * 1000); /* ${10} */
    argf(c, "%zu", l->output_cap + OUT_SLACK);       /* ${11} */
    argf(c, "%s", data);                             /* ${12} */
}

static void bwrap_args(struct cmd *c, const struct local *l)
{
    arg(c, l->bwrap);
    /* namespaces: all of them, the user namespace mandatory */
    arg(c, "--unshare-all");
    arg(c, "--unshare-user");
    arg(c, "--disable-userns");
    arg(c, "--uid");
    arg(c, SANDBOX_UID);
    arg(c, "--gid");
    arg(c, SANDBOX_UID);
    arg(c, "--hostname");
    arg(c, "sandbox");
    arg(c, "--die-with-parent");
    arg(c, "--new-session");
    arg(c, "--as-pid-1");
    arg(c, "--cap-drop");
    arg(c, "ALL");
    /* environment: nothing inherited */
    arg(c, "--clearenv");
    args3(c, "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin");
    args3(c, "--setenv", "HOME", "/home/sandbox");
    args3(c, "--setenv", "USER", "sandbox");
    args3(c, "--setenv", "LANG", "C.UTF-8");
    args3(c, "--setenv", "MPLBACKEND", "Agg");
    args3(c, "--setenv", "PYTHONDONTWRITEBYTECODE", "1");
    args3(c, "--setenv", "TMPDIR", "/tmp");
    /* filesystem: the system read-only, private writable places */
    args3(c, "--ro-bind", "/usr", "/usr");
    system_dirs(c);
    etc_files(c);
    args3(c, "--ro-bind-data", "5", "/etc/passwd");
    args3(c, "--ro-bind-data", "6", "/etc/group");
    args2(c, "--proc", "/proc");
    args2(c, "--dev", "/dev");
    /* each tmpfs is RAM: a size of its own; HOME is a link into /tmp */
    arg(c, "--size");
    argf(c, "%u", SHM_SIZE);
    args2(c, "--tmpfs", "/dev/shm");
    arg(c, "--size");
    argf(c, "%llu", l->disk);
    args2(c, "--tmpfs", "/mnt/data");
    arg(c, "--size");
    argf(c, "%llu", l->disk);
    args2(c, "--tmpfs", "/tmp");
    args3(c, "--symlink", "/tmp", "/home/sandbox");
    /* nothing else writable: not /dev (bwrap's tmpfs) nor the root */
    args2(c, "--remount-ro", "/dev");
    args2(c, "--remount-ro", "/");
    args2(c, "--chdir", "/mnt/data");
    args2(c, "--seccomp", "4");
    arg(c, "--");
    start_args(c, l, "/mnt/data");
}

/* A uid no account uses, different for every sandbox (root hosts only). */
static uid_t fresh_uid(void)
{
    uint32_t r = 0;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
        r = (uint32_t)now_ms() ^ (uint32_t)getpid() << 12;
    return (uid_t)(0x40000000u + (r & 0x0fffffffu));
}

/* Is the interpreter inside the part of the host the sandbox sees? Sets
 * l->python_real (a link to it outside /usr would not be seen). */
static int python_visible(struct local *l, char *why, size_t whysz)
{
    char *real = l->python_real;

    real[0] = '\0';
    if (!realpath(l->python, real)) {
        real[0] = '\0';
        snprintf(why, whysz,
                 "The sandbox could not start the Python interpreter %.400s: %.400s",
                 l->python, strerror(errno));
        return -ENOENT;
    }
    if (strncmp(real, "/usr/", 5) != 0) {
        snprintf(why, whysz,
                 "codeshim refused to run this code: CODESHIM_PYTHON=%.400s "
                 "(%.400s) is outside /usr, the only part of the host the "
                 "sandbox shows; use a Python installed under /usr",
                 l->python, real);
        real[0] = '\0';
        return -EPERM;
    }
    return 0;
}

static int start(struct local *l)
{
    char home[SHIM_PATH_MAX + 8], tmp[SHIM_PATH_MAX + 8],
        data[SHIM_PATH_MAX];
    char *bwrap_env[] = {(char *)"PATH=/usr/bin:/bin", NULL};
    char *unsafe_env[] = {
        (char *)"PATH=/usr/local/bin:/usr/bin:/bin",
        home,
        (char *)"LANG=C.UTF-8",
        (char *)"MPLBACKEND=Agg",
        (char *)"PYTHONDONTWRITEBYTECODE=1",
        tmp,
        NULL,
    };
    char passwd[160], group[64];
    struct cmd *c;
    struct shim_spawn sp;
    int fds[NFDS] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    int sv[2] = {-1, -1}, ep[2] = {-1, -1}, wv[2] = {-1, -1};
    int rc, i;
    pid_t pid;

    l->why[0] = '\0';
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    memset(&sp, 0, sizeof(sp));
    if (l->unsafe) {
        rc = ensure_tree(l);
        if (rc == 0 &&
            (snprintf(home, sizeof(home), "HOME=%s/home", l->root) >=
                 (int)sizeof(home) ||
             snprintf(tmp, sizeof(tmp), "TMPDIR=%s/tmp", l->root) >=
                 (int)sizeof(tmp) ||
             subpath(data, sizeof(data), l->root, "data")))
            rc = -ENAMETOOLONG;
        if (rc) {
            snprintf(l->why, sizeof(l->why),
                     "The sandbox directory %.400s could not be set up: %.400s",
                     l->root, strerror(-rc));
            goto out;
        }
        start_args(c, l, data);
        sp.path = "/bin/sh";
        sp.envp = unsafe_env;
        sp.cwd = data;
    } else {
        rc = python_visible(l, l->why, sizeof(l->why));
        if (rc)
            goto out;
        if (access(l->bwrap, X_OK) != 0) {
            rc = -errno;
            snprintf(l->why, sizeof(l->why),
                     "codeshim refused to run this code: bubblewrap (%.400s) is "
                     "not available (%.400s), so the sandbox's isolation cannot "
                     "be set up; install the Debian package bubblewrap",
                     l->bwrap, strerror(errno));
            goto out;
        }
        bwrap_args(c, l);
        sp.path = l->bwrap;
        sp.envp = bwrap_env;
        sp.cwd = "/";
        snprintf(passwd, sizeof(passwd),
                 "sandbox:x:%s:%s:sandbox:/home/sandbox:/bin/sh\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 SANDBOX_UID, SANDBOX_UID);
        snprintf(group, sizeof(group), "sandbox:x:%s:\nnogroup:x:65534:\n",
                 SANDBOX_UID);
        fds[4] = shim_sandbox_seccomp_fd();
        fds[5] = memfd_with("codeshim-passwd", passwd);
        fds[6] = memfd_with("codeshim-group", group);
        for (i = 4; i < 7; i++)
            if (fds[i] < 0) {
                rc = fds[i];
                snprintf(l->why, sizeof(l->why),
                         "codeshim refused to run this code: the sandbox's "
                         "seccomp filter could not be built (%.400s)",
                         strerror(-rc));
                goto out;
            }
        if (geteuid() == 0) {
            /* bwrap as root would keep the host's root in the sandbox's
             * user namespace (and RLIMIT_NPROC spares root): run it as a
             * fresh unprivileged user instead */
            sp.setid = 1;
            sp.uid = fresh_uid();
            sp.gid = (gid_t)sp.uid;
        }
    }
    if (c->overflow) {
        rc = -E2BIG;
        snprintf(l->why, sizeof(l->why), "the sandbox command is too long");
        goto out;
    }
    sp.argv = c->v;
    /* A socket, not a pipe: send(MSG_NOSIGNAL) means a dead supervisor can
     * never raise SIGPIPE in the host. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, wv) != 0 ||
        pipe2(ep, O_CLOEXEC) != 0) {
        rc = -errno;
        snprintf(l->why, sizeof(l->why), "no socket for the sandbox: %.400s",
                 strerror(-rc));
        goto out;
    }
    fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
    fds[1] = fds[0] >= 0 ? fcntl(fds[0], F_DUPFD_CLOEXEC, 0) : -1;
    fds[2] = ep[1];
    fds[3] = sv[1];
    for (i = 4; i < 7; i++) /* unsafe mode: placeholders the shell closes */
        if (fds[i] < 0 && fds[0] >= 0)
            fds[i] = fcntl(fds[0], F_DUPFD_CLOEXEC, 0);
    fds[7] = wv[0];
    fds[8] = wv[1];
    ep[1] = sv[1] = wv[0] = wv[1] = -1;
    for (i = 0; i < NFDS; i++) {
        fds[i] = raise_fd(fds[i], NFDS);
        if (fds[i] < 0) {
            rc = fds[i] < -1 ? fds[i] : -EBADF;
            snprintf(l->why, sizeof(l->why), "no descriptors left: %.400s",
                     strerror(-rc));
            goto out;
        }
    }
    sp.fds = fds;
    sp.nfds = NFDS;
    rc = shim_sandbox_spawn(&sp, &pid);
    if (rc) {
        if (l->unsafe)
            snprintf(l->why, sizeof(l->why),
                     "The sandbox could not start the Python interpreter "
                     "%.400s: %.400s",
                     l->python, strerror(-rc));
        else
            snprintf(l->why, sizeof(l->why),
                     "codeshim refused to run this code: bubblewrap (%.400s) "
                     "could not be started (%.400s)",
                     l->bwrap, strerror(-rc));
        goto out;
    }
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(ep[0], F_SETFL, O_NONBLOCK) != 0)
        LOG_WARN("sandbox: cannot make its channels non-blocking");
    l->pid = pid;
    l->fd = sv[0];
    l->errfd = ep[0];
    sv[0] = ep[0] = -1;
    l->up = 0;
    l->used = 0;
    rc = 0;
out:
    for (i = 0; i < NFDS; i++)
        close_fd(&fds[i]);
    close_fd(&wv[0]);
    close_fd(&wv[1]);
    close_fd(&sv[0]);
    close_fd(&sv[1]);
    close_fd(&ep[0]);
    close_fd(&ep[1]);
    free(c);
    return rc;
}

/* Ends the sandbox: closing the socket makes the supervisor kill every
 * process and exit (PID 1 gone, the kernel ends the namespace); bwrap then
 * exits. SIGKILL if that takes too long (--die-with-parent takes the rest
 * down). Returns bwrap's wait status, or -1. */
static void read_errors(struct local *l, char *out, size_t outsz);

static int stop(struct local *l, char *err, size_t errsz)
{
    int st = -1, i;
    pid_t r = 0;

    close_fd(&l->fd);
    if (l->pid > 0) {
        for (i = 0; i < STOP_MS; i++) {
            r = waitpid(l->pid, &st, WNOHANG);
            if (r != 0 && !(r < 0 && errno == EINTR))
                break;
            sleep_ms(1);
        }
        if (r == 0) {
            kill(l->pid, SIGKILL);
            do
                r = waitpid(l->pid, &st, 0);
            while (r < 0 && errno == EINTR);
        }
        if (r != l->pid)
            st = -1; /* the host reaped it (SIGCHLD handler or SIG_IGN) */
    }
    if (err)
        read_errors(l, err, errsz);
    close_fd(&l->errfd);
    l->pid = -1;
    l->up = 0;
    if (l->used)
        l->lost_all = 1;
    l->used = 0;
    return st;
}

/* What the sandbox wrote on its stderr before it was up: bwrap's reason. */
static void read_errors(struct local *l, char *out, size_t outsz)
{
    size_t n = 0;
    int64_t end = now_ms() + 1000;

    out[0] = '\0';
    if (l->errfd < 0)
        return;
    while (n + 1 < outsz) {
        ssize_t r = read(l->errfd, out + n, outsz - 1 - n);
        if (r > 0) {
            n += (size_t)r;
        } else if (r == 0) {
            break;
        } else if (errno == EAGAIN && now_ms() < end) {
            struct pollfd p = {.fd = l->errfd, .events = POLLIN};
            poll(&p, 1, 50);
        } else if (errno != EINTR) {
            break;
        }
    }
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x20)
            out[i] = ' ';
}

/* ---- framed I/O with a deadline ---- */

/* Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - now_ms();
        int n;

        if (left <= 0)
            return -ETIMEDOUT;
        n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 0; /* readable, writable, HUP or ERR: the I/O call says */
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int send_all(int fd, const void *buf, size_t n, int64_t deadline)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc)
                return rc;
        } else if (w < 0 && errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* 0, -ECONNRESET at end of stream, -ETIMEDOUT or -errno. */
static int recv_all(int fd, void *buf, size_t n, int64_t deadline)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0) {
            return -ECONNRESET;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc)
                return rc;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static size_t frame_max(const struct local *l)
{
    return (17u << 20) + 2 * (l->output_cap + OUT_SLACK) + 4096;
}

/* Reads one frame into b: 0, -EPROTO for an oversized frame, or a
 * recv_all error. */
static int recv_frame(struct local *l, struct shim_buf *b, int64_t deadline)
{
    unsigned char hdr[4];
    char chunk[65536];
    size_t n;
    int rc = recv_all(l->fd, hdr, sizeof(hdr), deadline);

    if (rc)
        return rc;
    n = get32(hdr);
    if (n > frame_max(l) || n == 0)
        return -EPROTO;
    shim_buf_init(b, n);
    while (n > 0) {
        size_t k = n < sizeof(chunk) ? n : sizeof(chunk);
        rc = recv_all(l->fd, chunk, k, deadline);
        if (rc == 0)
            rc = shim_buf_add(b, chunk, k);
        if (rc) {
            shim_buf_free(b);
            return rc;
        }
        n -= k;
    }
    return 0;
}

static int send_request(struct local *l, const char *code, size_t len,
                        int64_t deadline)
{
    unsigned char hdr[9];
    int rc;

    l->seq++;
    put32(hdr, (uint32_t)len + 5);
    hdr[4] = 'E';
    put32(hdr + 5, l->seq);
    rc = send_all(l->fd, hdr, sizeof(hdr), deadline);
    if (rc == 0 && len)
        rc = send_all(l->fd, code, len, deadline);
    return rc;
}

/* Waits for the supervisor's hello; on failure, l->why says why. */
static int wait_up(struct local *l)
{
    struct shim_buf b;
    char err[768];
    int python_failed;
    int rc = recv_frame(l, &b, now_ms() + START_S * 1000);

    if (rc == 0 && b.len == 1 && b.data[0] == 'H') {
        shim_buf_free(&b);
        l->up = 1;
        return 0;
    }
    if (rc == 0)
        shim_buf_free(&b);
    stop(l, err, sizeof(err)); /* bwrap is gone: all it said is here */
    l->lost_all = 0;
    /* bwrap's own messages start with "bwrap:"; others come from the shell
     * or Python inside, once the isolation was up */
    python_failed = err[0] && (strncmp(err, "bwrap:", 6) != 0 ||
                               strstr(err, "execvp") != NULL);
    if (!err[0])
        snprintf(err, sizeof(err), "%s",
                 rc == -ETIMEDOUT ? "it did not start in time"
                                  : "it stopped before it was ready");
    if (l->unsafe || python_failed)
        snprintf(l->why, sizeof(l->why),
                 "The sandbox could not start the Python interpreter %.400s "
                 "(%.400s)",
                 l->python, err);
    else
        snprintf(l->why, sizeof(l->why),
                 "codeshim refused to run this code: the sandbox's isolation "
                 "could not be set up on this machine (%.400s)",
                 err);
    return rc ? rc : -EPROTO;
}

/* ---- results ---- */

static int is_base64(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '+' || *s == '/' || *s == '='))
            return 0;
    return 1;
}

struct reply {
    char kind;
    int restarted;
    cJSON *meta, *worker;
    const char *out;
    size_t out_len;
};

/* Splits an 'R' frame answering request l->seq; -EPROTO if malformed. */
static int split_reply(const struct local *l, const struct shim_buf *b,
                       struct reply *r)
{
    const unsigned char *p = (const unsigned char *)b->data;
    size_t n = b->len, off = 11, ml, wl;

    memset(r, 0, sizeof(*r));
    if (n < 11 || p[0] != 'R' || get32(p + 1) != l->seq ||
        !strchr("DTXI", p[5]) || !p[5] || p[6] > 1)
        return -EPROTO;
    r->kind = (char)p[5];
    r->restarted = p[6];
    ml = get32(p + 7);
    if (ml > n - off)
        return -EPROTO;
    r->meta = cJSON_ParseWithLength((const char *)p + off, ml);
    off += ml;
    if (!cJSON_IsObject(r->meta) || n - off < 4)
        goto bad;
    wl = get32(p + off);
    off += 4;
    if (wl > n - off)
        goto bad;
    if (r->kind == 'D') {
        r->worker = cJSON_ParseWithLength((const char *)p + off, wl);
        if (!cJSON_IsObject(r->worker))
            goto bad;
    }
    off += wl;
    r->out = (const char *)p + off;
    r->out_len = n - off;
    return 0;
bad:
    cJSON_Delete(r->meta);
    cJSON_Delete(r->worker);
    memset(r, 0, sizeof(*r));
    return -EPROTO;
}

static int take_images(const cJSON *worker, struct shim_exec_result *out)
{
    const cJSON *images = cJSON_GetObjectItemCaseSensitive(worker, "images");
    const cJSON *it;

    if (!cJSON_IsArray(images))
        return -EPROTO;
    out->images = calloc(MAX_IMAGES, sizeof(*out->images));
    if (!out->images)
        return -ENOMEM;
    cJSON_ArrayForEach(it, images)
    {
        const cJSON *mime = cJSON_GetObjectItemCaseSensitive(it, "mime");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(it, "data");
        struct shim_exec_image *img;

        if (out->nimages >= MAX_IMAGES)
            break;
        if (!cJSON_IsString(mime) || strcmp(mime->valuestring, "image/png") ||
            !cJSON_IsString(data) || !is_base64(data->valuestring))
            continue;
        img = &out->images[out->nimages];
        img->mime = strdup("image/png");
        img->base64 = strdup(data->valuestring);
        if (!img->mime || !img->base64) {
            free(img->mime);
            free(img->base64);
            img->mime = img->base64 = NULL;
            return -ENOMEM;
        }
        out->nimages++;
    }
    return 0;
}

static int take_files(const cJSON *meta, struct shim_exec_result *out)
{
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(meta, "files");
    const cJSON *it;

    if (!cJSON_IsArray(files))
        return -EPROTO;
    out->files_changed =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "changed"));
    out->files = calloc(MAX_FILES, sizeof(*out->files));
    if (!out->files)
        return -ENOMEM;
    cJSON_ArrayForEach(it, files)
    {
        if (out->nfiles >= MAX_FILES)
            break;
        if (!cJSON_IsString(it) || !it->valuestring[0] ||
            strlen(it->valuestring) >= SHIM_PATH_MAX)
            continue;
        out->files[out->nfiles] = strdup(it->valuestring);
        if (!out->files[out->nfiles])
            return -ENOMEM;
        out->nfiles++;
    }
    return 0;
}

/* A hint for the model when a limit was what ended the interpreter. */
static const char *exit_hint(const char *exit_desc)
{
    if (strstr(exit_desc, "signal 24 "))
        return ": the CPU time limit (CODESHIM_CPU_TIME) was reached";
    if (strstr(exit_desc, "signal 25 "))
        return ": the file size limit (CODESHIM_FILE_SIZE) was reached";
    if (strstr(exit_desc, "signal 31 "))
        return ": the sandbox forbids that system call";
    return "";
}

/* Builds *out from a well-formed reply; logs holds the notes so far. */
static int fill_result(struct local *l, const struct reply *r,
                       struct shim_buf *logs, struct shim_exec_result *out)
{
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(r->meta, "exit");
    const char *exit_desc = cJSON_IsString(ex) ? ex->valuestring : "";
    int rc;

    if (r->kind == 'D') {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(r->worker, "status");
        if (!cJSON_IsString(s) ||
            (strcmp(s->valuestring, "ok") && strcmp(s->valuestring, "error")))
            return -EPROTO;
        out->status = strcmp(s->valuestring, "ok") ? SHIM_EXEC_ERROR
                                                   : SHIM_EXEC_OK;
        rc = take_images(r->worker, out);
        if (rc)
            return rc;
    }
    rc = take_files(r->meta, out);
    if (rc)
        return rc;
    shim_buf_add(logs, r->out, r->out_len);
    if (r->kind == 'D')
        return 0;
    if (logs->len && logs->data[logs->len - 1] != '\n')
        shim_buf_adds(logs, "\n");
    if (r->kind == 'T') {
        out->status = SHIM_EXEC_TIMEOUT;
        shim_buf_addf(logs,
                      "Execution timed out after %d s; the Python interpreter "
                      "was restarted and its state (variables, imports) was "
                      "lost.\n",
                      l->timeout_s);
    } else if (r->kind == 'X') {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(logs,
                      "The Python interpreter (%s) %.200s%s; it was restarted "
                      "and its state (variables, imports) was lost.\n",
                      l->python, exit_desc[0] ? exit_desc : "stopped",
                      exit_hint(exit_desc));
    } else {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_adds(logs, "The sandbox worker sent an invalid reply; it was "
                            "restarted and its state (variables, imports) was "
                            "lost.\n");
        LOG_WARN("sandbox worker sent an invalid reply; restarted it");
    }
    return 0;
}

static int refuse(struct local *l, struct shim_buf *logs,
                  struct shim_exec_result *out)
{
    out->status = SHIM_EXEC_FAILED;
    shim_buf_addf(logs, "%s.\n", l->why);
    if (!strncmp(l->why, "codeshim refused", 16))
        shim_buf_adds(logs,
                      "Nothing was run. (For debugging only, "
                      "CODESHIM_UNSAFE_NO_ISOLATION=1 runs code without any "
                      "isolation.)\n");
    LOG_ERR("%s", l->why);
    out->logs = shim_buf_take(logs, &out->logs_len);
    return out->logs ? 0 : -ENOMEM;
}

static int local_exec(void *state, const char *code, size_t len,
                      struct shim_exec_result *out)
{
    struct local *l = state;
    struct shim_buf logs, frame;
    struct reply r;
    int64_t deadline;
    int rc, st;

    shim_buf_init(&logs, 2 * (l->output_cap + OUT_SLACK) + 4096);
    if (len > CODE_MAX) {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(&logs, "The code is too large (%zu bytes).\n", len);
        out->logs = shim_buf_take(&logs, &out->logs_len);
        return out->logs ? 0 : -ENOMEM;
    }
    if (l->pid > 0 && l->up && l->fd >= 0) {
        /* nothing may arrive between executions */
        struct pollfd p = {.fd = l->fd, .events = POLLIN | POLLRDHUP};
        if (poll(&p, 1, 0) != 0)
            stop(l, NULL, 0);
    }
    if (l->pid <= 0 && start(l) != 0)
        return refuse(l, &logs, out);
    if (!l->up && wait_up(l) != 0)
        return refuse(l, &logs, out);
    if (l->lost_all) {
        shim_buf_adds(&logs, LOST_ALL_NOTE);
        l->lost_all = 0;
    }
    l->used = 1;
    deadline = now_ms() + ((int64_t)l->timeout_s + GRACE_S) * 1000;
    rc = send_request(l, code, len, deadline);
    if (rc == 0)
        rc = recv_frame(l, &frame, deadline);
    if (rc == 0) {
        rc = split_reply(l, &frame, &r);
        if (rc == 0) {
            if (r.restarted)
                shim_buf_adds(&logs, LOST_NOTE);
            rc = fill_result(l, &r, &logs, out);
            cJSON_Delete(r.meta);
            cJSON_Delete(r.worker);
        }
        shim_buf_free(&frame);
    }
    if (rc == -ENOMEM) {
        shim_exec_result_free(out);
        shim_buf_free(&logs);
        return -ENOMEM;
    }
    if (rc == 0) {
        out->logs = shim_buf_take(&logs, &out->logs_len);
        return out->logs ? 0 : -ENOMEM;
    }

    /* The supervisor did not answer as it must: end the whole sandbox. */
    shim_exec_result_free(out);
    st = stop(l, NULL, 0);
    l->lost_all = 0; /* said right here */
    if (logs.len && logs.data[logs.len - 1] != '\n')
        shim_buf_adds(&logs, "\n");
    if (rc == -ETIMEDOUT) {
        out->status = SHIM_EXEC_TIMEOUT;
        shim_buf_addf(&logs,
                      "Execution timed out after %d s and the sandbox did not "
                      "stop it; the sandbox was restarted: its state "
                      "(variables, imports) and the files in /mnt/data were "
                      "lost.\n",
                      l->timeout_s);
        LOG_WARN("sandbox did not answer within %d s; ended it",
                 l->timeout_s + GRACE_S);
    } else {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(&logs,
                      "The sandbox %s (%s); it was restarted: its state "
                      "(variables, imports) and the files in /mnt/data were "
                      "lost.\n",
                      rc == -EPROTO ? "sent an invalid reply"
                                    : "stopped unexpectedly",
                      st != -1 && WIFSIGNALED(st) ? strsignal(WTERMSIG(st))
                                                  : strerror(-rc));
        LOG_WARN("sandbox failed (%s); ended it", strerror(-rc));
    }
    out->logs = shim_buf_take(&logs, &out->logs_len);
    return out->logs ? 0 : -ENOMEM;
}

static int local_create(const struct shim_config *cfg, void **state)
{
    struct local *l = calloc(1, sizeof(*l));
    const char *tmpdir = cfg->tmpdir[0] ? cfg->tmpdir : "/tmp";

    if (!l)
        return -ENOMEM;
    if (strlen(cfg->python) >= sizeof(l->python) ||
        strlen(cfg->bwrap) >= sizeof(l->bwrap) ||
        strlen(tmpdir) >= sizeof(l->tmpdir)) {
        free(l);
        return -ENAMETOOLONG;
    }
    snprintf(l->python, sizeof(l->python), "%s", cfg->python);
    snprintf(l->bwrap, sizeof(l->bwrap), "%s",
             cfg->bwrap[0] ? cfg->bwrap : "/usr/bin/bwrap");
    snprintf(l->tmpdir, sizeof(l->tmpdir), "%s", tmpdir);
    l->unsafe = cfg->unsafe_no_isolation;
    l->timeout_s = cfg->exec_timeout_s > 0 ? cfg->exec_timeout_s : 60;
    l->output_cap = cfg->output_cap ? cfg->output_cap : 20000;
    l->memory = cfg->memory_limit ? cfg->memory_limit : 1ULL << 30;
    l->file_size = cfg->file_size_limit ? cfg->file_size_limit : 512ULL << 20;
    l->disk = cfg->disk_limit ? cfg->disk_limit : 1ULL << 30;
    l->procs = cfg->procs_limit > 0 ? cfg->procs_limit : 256;
    l->cpu_s = cfg->cpu_time_s > 0 ? cfg->cpu_time_s : 3600;
    l->pid = -1;
    l->fd = -1;
    l->errfd = -1;
    if (l->unsafe) {
        if (subpath(l->root, sizeof(l->root), l->tmpdir, "codeshim-XXXXXX") ||
            !mkdtemp(l->root)) {
            int rc = errno ? -errno : -ENAMETOOLONG;
            LOG_ERR("cannot create a sandbox directory in %s: %s", l->tmpdir,
                    strerror(-rc));
            free(l);
            return rc;
        }
        LOG_WARN("CODESHIM_UNSAFE_NO_ISOLATION is set: model-written code "
                 "runs WITHOUT isolation, as this user, in %s",
                 l->root);
    }
    if (start(l) != 0)
        LOG_DEBUG("sandbox not started: %s (retried on first execution)",
                  l->why);
    *state = l;
    return 0;
}

static void local_destroy(void *state)
{
    struct local *l = state;

    if (!l)
        return;
    if (l->pid > 0 && !l->up)
        kill(l->pid, SIGKILL); /* still starting: nothing to end gently */
    stop(l, NULL, 0);
    if (l->unsafe && l->root[0])
        rm_tree(l->root);
    free(l);
}

const struct shim_sandbox_ops shim_sandbox_local = {
    .name = "local",
    .create = local_create,
    .exec = local_exec,
    .destroy = local_destroy,
};
