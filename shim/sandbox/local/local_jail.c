/* local_jail.c - what the local sandbox is: the command that starts it
 * and the layout of its jail. Isolated, bubblewrap's command line
 * (namespaces, the read-only system, the private tmpfs places, the clean
 * environment, seccomp), the synthetic /etc/passwd and /etc/group, and a
 * fresh unprivileged uid for root hosts; for both modes, the start-up
 * shell and the bootstrap that run worker/ (embedded by sandbox.mk).
 * Unsafe (CODESHIM_UNSAFE_NO_ISOLATION=1), the private host directory
 * that stands in for the jail: made, refreshed before each start, and
 * removed with everything in it. */
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/local/local_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>

/* build/gen/worker_py.c (sandbox.mk, embed.py) */
extern const char shim_worker_py[];
extern const size_t shim_worker_py_len;
extern const char shim_worker_pyc_tag[];
extern const char shim_worker_pyc[];

#define RM_MAX_DEPTH 128
#define SANDBOX_UID "1000"
#define SHM_SIZE (64u << 20)
#define SHM_INODES 1024u

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
    /* a directory the code made unreadable: made readable, opened again */
    if (sub < 0 && errno == EACCES && fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

void shim_local_rm_root(const struct shim_local *l)
{
    const char *path = l->root;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd >= 0)
        rm_contents(fd, 0);
    if (rmdir(path) != 0 && errno != ENOENT)
        LOG_WARN("could not remove sandbox directory %s: %s", path,
                 strerror(errno));
}

int shim_local_make_root(struct shim_local *l)
{
    int rc;

    if (shim_fileio_join(l->root, sizeof(l->root), l->p.tmpdir, "codeshim-XXXXXX") ||
        !mkdtemp(l->root)) {
        rc = errno ? -errno : -ENAMETOOLONG;
        LOG_ERR("cannot create a sandbox directory in %s: %s", l->p.tmpdir,
                strerror(-rc));
        return rc;
    }
    LOG_WARN("CODESHIM_UNSAFE_NO_ISOLATION is set: model-written code "
             "runs WITHOUT isolation, as this user, in %s",
             l->root);
    return 0;
}

/* (Re)creates root/{data,home,tmp}; a root that is no longer our own
 * directory is refused. */
static int ensure_tree(const struct shim_local *l)
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
        if (shim_fileio_join(p, sizeof(p), l->root, subs[i]))
            return -ENAMETOOLONG;
        if (mkdir(p, 0700) == 0)
            chmod(p, 0700);
        else if (errno != EEXIST)
            return -errno;
    }
    return 0;
}

/* ---- the command line ---- */

#define ARGV_MAX 256
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

/* One argument built in pieces at the arena's end: piece() appends to it
 * (formatted), piece_done() passes it on; too long is an overflow. */
struct pieces {
    char *p;
    size_t n;
};

static struct pieces pieces_start(struct cmd *c)
{
    struct pieces b = {c->arena + c->used, 0};

    if (c->used < ARENA)
        b.p[0] = '\0';
    else
        c->overflow = 1;
    return b;
}

__attribute__((format(printf, 3, 4))) static void
piece(struct cmd *c, struct pieces *b, const char *fmt, ...)
{
    size_t room = ARENA - c->used - b->n;
    va_list ap;
    int w;

    if (c->overflow)
        return;
    va_start(ap, fmt);
    w = vsnprintf(b->p + b->n, room, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= room)
        c->overflow = 1;
    else
        b->n += (size_t)w;
}

static void piece_done(struct cmd *c, struct pieces *b)
{
    if (c->overflow)
        return;
    c->used += b->n + 1;
    arg(c, b->p);
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

/* Host-identifying /proc files, masked as container runtimes do: the
 * host's /dev/null bound over each (reads are empty, writes vanish). Only
 * those this kernel has: bwrap cannot make a mount point in /proc. */
static const char *const proc_mask_files[] = {
    "/proc/cmdline",      "/proc/sys/kernel/random/boot_id",
    "/proc/kcore",        "/proc/keys",
    "/proc/key-users",    "/proc/timer_list",
    "/proc/timer_stats",  "/proc/sched_debug",
    "/proc/latency_stats", "/proc/config.gz",
    "/proc/iomem",        "/proc/ioports",
    "/proc/partitions",   "/proc/diskstats",
    "/proc/swaps",        NULL,
};

static void proc_masks(struct cmd *c)
{
    struct stat st;
    size_t i;

    for (i = 0; proc_mask_files[i]; i++)
        if (lstat(proc_mask_files[i], &st) == 0 && S_ISREG(st.st_mode))
            args3(c, "--dev-bind", "/dev/null", proc_mask_files[i]);
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

static void start_args(struct cmd *c, const struct shim_local *l, const char *data)
{
    arg(c, "/bin/sh");
    arg(c, "-c");
    arg(c, START_SH);
    arg(c, l->python_real[0] ? l->python_real : l->p.python);/* $0 */
    arg(c, BOOT_PY);                                 /* $1 */
    arg(c, shim_worker_py);                          /* $2 */
    arg(c, shim_worker_pyc_tag);                     /* $3 */
    arg(c, shim_worker_pyc);                         /* $4 */
    arg(c, l->p.unsafe ? "unsafe" : "sandbox");      /* $5 */
    argf(c, "%llu", l->p.memory);                    /* $6 */
    argf(c, "%d", l->p.procs);                       /* $7 */
    argf(c, "%llu", l->p.file_size);                 /* $8 */
    argf(c, "%d", l->p.cpu_s);                       /* $9 */
    argf(c, "%lld", (long long)l->p.timeout_s * 1000);/* ${10} */
    argf(c, "%zu", l->p.output_cap + OUT_SLACK);     /* ${11} */
    argf(c, "%s", data);                             /* ${12} */
}

/* ---- the writable places: tmpfs, each is RAM ---- */

static const char *const tmpfs_dest[NTMPFS] = {"/dev/shm", "/mnt/data",
                                               "/tmp"};

static unsigned long long tmpfs_size(const struct shim_local *l, int i)
{
    return i == 0 ? SHM_SIZE : l->p.disk;
}

static unsigned long long tmpfs_inodes(const struct shim_local *l, int i)
{
    return i == 0 ? SHM_INODES : l->p.inodes;
}

/* A size and a file count each when spawn.c mounts them (l->own_tmpfs:
 * it hands them over as descriptors NFDS..); bwrap's own --tmpfs can
 * only give a size. HOME is a link into /tmp. */
static void tmpfs_args(struct cmd *c, const struct shim_local *l)
{
    int i;

    for (i = 0; i < NTMPFS; i++) {
        if (l->own_tmpfs) {
            arg(c, "--bind-fd");
            argf(c, "%d", NFDS + i);
        } else {
            arg(c, "--size");
            argf(c, "%llu", tmpfs_size(l, i));
            arg(c, "--tmpfs");
        }
        arg(c, tmpfs_dest[i]);
    }
}

static void jail_args(struct cmd *c, const struct shim_local *l);

/* The fork server's own arguments (worker.py's _zygote): what each
 * sandbox it forks mounts and limits. */
static void zygote_args(struct cmd *c, const struct shim_local *l)
{
    struct pieces b;
    int i;

    arg(c, "4"); /* the seccomp filter, read at start */
    argf(c, "%s", l->p.preload);
    argf(c, "%u", 0u); /* unused: each fork names its uid */
    b = pieces_start(c);
    for (i = 0; i < NTMPFS; i++)
        piece(c, &b, "%s%s=size=%llu,nr_inodes=%llu,mode=0755", i ? "|" : "",
              tmpfs_dest[i], tmpfs_size(l, i), tmpfs_inodes(l, i));
    piece_done(c, &b);
    b = pieces_start(c);
    for (i = 0; proc_mask_files[i]; i++) {
        struct stat st;

        if (lstat(proc_mask_files[i], &st) == 0 && S_ISREG(st.st_mode))
            piece(c, &b, "%s%s", b.n ? "|" : "", proc_mask_files[i]);
    }
    piece_done(c, &b);
    argf(c, "%lld", (long long)l->p.timeout_s * 1000);
    argf(c, "%zu", l->p.output_cap + OUT_SLACK);
    argf(c, "%llu", l->p.memory);
    argf(c, "%d", l->p.procs);
    argf(c, "%llu", l->p.file_size);
    argf(c, "%d", l->p.cpu_s);
}

/* The fork server's jail: the sandbox's layout and environment, all
 * namespaces but (as root) the user one, and every capability within
 * them, which each fork drops (worker.py). No seccomp filter: each fork
 * installs it. As root the server is root (it maps a fresh uid for each
 * sandbox); else uid 1000 of a user namespace of its own. */
static void zygote_bwrap_args(struct cmd *c, const struct shim_local *l)
{
    arg(c, l->p.bwrap);
    if (geteuid() == 0) {
        arg(c, "--unshare-ipc");
        arg(c, "--unshare-pid");
        arg(c, "--unshare-net");
        arg(c, "--unshare-uts");
        arg(c, "--unshare-cgroup-try");
    } else {
        arg(c, "--unshare-all");
        arg(c, "--unshare-user");
        args2(c, "--uid", SANDBOX_UID);
        args2(c, "--gid", SANDBOX_UID);
    }
    args2(c, "--hostname", "sandbox");
    arg(c, "--die-with-parent");
    arg(c, "--new-session");
    arg(c, "--as-pid-1");
    args2(c, "--cap-add", "ALL");
    jail_args(c, l);
    arg(c, "--");
    arg(c, l->python_real[0] ? l->python_real : l->p.python);
    arg(c, "-I");
    arg(c, "-B");
    arg(c, "-c");
    arg(c, BOOT_PY);
    arg(c, shim_worker_py);
    arg(c, shim_worker_pyc_tag);
    arg(c, shim_worker_pyc);
    arg(c, "zygote");
    arg(c, "3");
    zygote_args(c, l);
}

static void bwrap_args(struct cmd *c, const struct shim_local *l)
{
    arg(c, l->p.bwrap);
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
    jail_args(c, l);
    args2(c, "--seccomp", "4");
    arg(c, "--");
    start_args(c, l, "/mnt/data");
}

/* What a sandbox and the fork server share: the environment and the
 * filesystem. */
static void jail_args(struct cmd *c, const struct shim_local *l)
{
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
    if (l->env_prefix[0]) {
        arg(c, "--ro-bind");
        argf(c, "%s", l->env_prefix);
        arg(c, SHIM_ENV_MNT);
    }
    system_dirs(c);
    etc_files(c);
    args3(c, "--ro-bind-data", "5", "/etc/passwd");
    args3(c, "--ro-bind-data", "6", "/etc/group");
    args2(c, "--proc", "/proc");
    if (!l->zygote) /* each fork masks its own /proc */
        proc_masks(c);
    args2(c, "--dev", "/dev");
    tmpfs_args(c, l);
    if (l->zygote) { /* bwrap as root would make /home 0700 */
        args2(c, "--perms", "0755");
        args2(c, "--dir", "/home");
    }
    args3(c, "--symlink", "/tmp", "/home/sandbox");
    /* nothing else writable: not /dev (bwrap's tmpfs) nor the root */
    args2(c, "--remount-ro", "/dev");
    args2(c, "--remount-ro", "/");
    args2(c, "--chdir", "/mnt/data");
}

/* A uid no account uses, different for every sandbox (root hosts only). */
uid_t shim_local_fresh_uid(void)
{
    uint32_t r = 0;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
        r = (uint32_t)shim_clock_ms() ^ (uint32_t)getpid() << 12;
    return (uid_t)(0x40000000u + (r & 0x0fffffffu));
}

static int in_usr(const char *path)
{
    return strncmp(path, "/usr", 4) == 0 && (path[4] == '/' || !path[4]);
}

/* An environment's prefix: python is PREFIX/bin/NAME, and PREFIX is a
 * virtualenv (pyvenv.cfg) or outside /usr (conda's and others' own
 * interpreters). 0 and out set, or -ENOENT. */
static int env_prefix(const char *python, char *out, size_t outsz)
{
    const char *slash = strrchr(python, '/');
    char cfg[PATH_MAX];
    struct stat st;
    size_t n;

    if (python[0] != '/' || !slash || slash - python < 5 ||
        strncmp(slash - 4, "/bin", 4) != 0)
        return -ENOENT;
    n = (size_t)(slash - 4 - python);
    if (n == 0 || n >= outsz || n + 12 >= sizeof(cfg))
        return -ENOENT;
    memcpy(out, python, n);
    out[n] = '\0';
    snprintf(cfg, sizeof(cfg), "%s/pyvenv.cfg", out);
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
        out[0] = '\0';
        return -ENOENT;
    }
    if (!in_usr(out) || access(cfg, F_OK) == 0)
        return 0;
    out[0] = '\0';
    return -ENOENT;
}

/* Is the interpreter inside the part of the host the sandbox sees? Sets
 * l->python_real, what the sandbox runs: python with its links resolved
 * (a link outside /usr would not be seen), or, for an environment (see
 * env_prefix), python as the environment names it, so that Python finds
 * the environment (pyvenv.cfg, its lib) from it: at SHIM_ENV_MNT when the
 * prefix is outside /usr (l->env_prefix, bound there read-only). */
static int python_visible(struct shim_local *l)
{
    char *real = l->python_real;

    real[0] = '\0';
    l->env_prefix[0] = '\0';
    if (!realpath(l->p.python, real)) {
        real[0] = '\0';
        shim_local_fail(l, LF_PYTHON_MISSING, strerror(errno));
        return -ENOENT;
    }
    if (env_prefix(l->p.python, l->env_prefix, sizeof(l->env_prefix)) == 0) {
        const char *name = strrchr(l->p.python, '/') + 1;

        if (in_usr(l->env_prefix)) {
            snprintf(real, PATH_MAX, "%s", l->p.python);
            l->env_prefix[0] = '\0'; /* seen where it is */
        } else {
            snprintf(real, PATH_MAX, "%s/bin/%s", SHIM_ENV_MNT, name);
        }
        return 0;
    }
    if (strncmp(real, "/usr/", 5) != 0) {
        shim_local_fail(l, LF_PYTHON_OUTSIDE, real);
        real[0] = '\0';
        return -EPERM;
    }
    return 0;
}

/* What shim_local_command's *mem holds: everything sp points to. */
struct command {
    struct cmd c;
    char home[SHIM_PATH_MAX + 8], tmp[SHIM_PATH_MAX + 8], data[SHIM_PATH_MAX];
    char passwd[160], group[64];
    char *env[8];
    struct shim_spawn_tmpfs tmpfs[NTMPFS];
    char tmpfs_dir[NTMPFS][32], tmpfs_opts[NTMPFS][96];
};

static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);

    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Where spawn.c mounts them before bwrap binds them: a directory that
 * exists, bwrap needs nothing from (it is covered in the namespace bwrap
 * starts in) and does not hold bwrap itself, by the name it is run by
 * (spawn.c's cwd is /) nor where that leads. NULL when none will do. */
static const char *tmpfs_place(const struct shim_local *l)
{
    static const char *const dirs[] = {"/tmp", "/mnt", "/media", "/srv",
                                       "/var/tmp"};
    char real[PATH_MAX], given[SHIM_PATH_MAX + 2], env_real[PATH_MAX];
    const char *env = l->env_prefix; /* bound from there too */
    size_t i;

    if (!realpath(l->p.bwrap, real))
        return NULL;
    if (!env[0] || !realpath(env, env_real))
        snprintf(env_real, sizeof(env_real), "%s", env);
    snprintf(given, sizeof(given), "%s%s", l->p.bwrap[0] == '/' ? "" : "/",
             l->p.bwrap);
    for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        struct stat st;

        if (lstat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode) &&
            !under(real, dirs[i]) && !under(given, dirs[i]) &&
            !under(env, dirs[i]) && !under(env_real, dirs[i]))
            return dirs[i];
    }
    return NULL;
}

/* spawn.c's side of the same: where, and the mount options of each, owned
 * by the user bwrap runs as (sp's credentials set). */
static void tmpfs_specs(const struct shim_local *l, const char *at,
                        struct command *m, struct shim_spawn *sp)
{
    static const char *const name[NTMPFS] = {"shm", "data", "tmp"};
    uid_t uid = sp->setid ? sp->uid : geteuid();
    gid_t gid = sp->setid ? sp->gid : getegid();
    int i;

    if (!l->own_tmpfs)
        return;
    for (i = 0; i < NTMPFS; i++) {
        shim_fileio_join(m->tmpfs_dir[i], sizeof(m->tmpfs_dir[i]), at, name[i]);
        snprintf(m->tmpfs_opts[i], sizeof(m->tmpfs_opts[i]),
                 "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u",
                 tmpfs_size(l, i), tmpfs_inodes(l, i), (unsigned)uid,
                 (unsigned)gid);
        m->tmpfs[i].dir = m->tmpfs_dir[i];
        m->tmpfs[i].opts = m->tmpfs_opts[i];
        m->tmpfs[i].fd = NFDS + i;
    }
    sp->tmpfs_at = at;
    sp->tmpfs = m->tmpfs;
    sp->ntmpfs = NTMPFS;
}

static int unsafe_command(struct shim_local *l, struct command *m,
                          struct shim_spawn *sp)
{
    int rc = ensure_tree(l);

    if (rc == 0 &&
        (snprintf(m->home, sizeof(m->home), "HOME=%s/home", l->root) >=
             (int)sizeof(m->home) ||
         snprintf(m->tmp, sizeof(m->tmp), "TMPDIR=%s/tmp", l->root) >=
             (int)sizeof(m->tmp) ||
         shim_fileio_join(m->data, sizeof(m->data), l->root, "data")))
        rc = -ENAMETOOLONG;
    if (rc) {
        shim_local_fail(l, LF_TREE, strerror(-rc));
        return rc;
    }
    start_args(&m->c, l, m->data);
    m->env[0] = (char *)"PATH=/usr/local/bin:/usr/bin:/bin";
    m->env[1] = m->home;
    m->env[2] = (char *)"LANG=C.UTF-8";
    m->env[3] = (char *)"MPLBACKEND=Agg";
    m->env[4] = (char *)"PYTHONDONTWRITEBYTECODE=1";
    m->env[5] = m->tmp;
    m->env[6] = NULL;
    sp->path = "/bin/sh";
    sp->envp = m->env;
    sp->cwd = m->data;
    return 0;
}

static int bwrap_command(struct shim_local *l, struct command *m,
                         struct shim_spawn *sp, int fds[NFDS])
{
    const char *at = NULL;
    int rc = python_visible(l), i;

    if (rc)
        return rc;
    if (access(l->p.bwrap, X_OK) != 0) {
        rc = -errno;
        shim_local_fail(l, LF_NO_BWRAP, strerror(-rc));
        return rc;
    }
    if (l->own_tmpfs && !(at = tmpfs_place(l)))
        l->own_tmpfs = 0; /* bwrap's own tmpfs then */
    if (l->zygote)
        zygote_bwrap_args(&m->c, l);
    else
        bwrap_args(&m->c, l);
    m->env[0] = (char *)"PATH=/usr/bin:/bin";
    m->env[1] = NULL;
    sp->path = l->p.bwrap;
    sp->envp = m->env;
    sp->cwd = "/";
    snprintf(m->passwd, sizeof(m->passwd),
             "sandbox:x:%s:%s:sandbox:/home/sandbox:/bin/sh\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             SANDBOX_UID, SANDBOX_UID);
    snprintf(m->group, sizeof(m->group), "sandbox:x:%s:\nnogroup:x:65534:\n",
             SANDBOX_UID);
    fds[4] = shim_sandbox_seccomp_fd();
    fds[5] = memfd_with("codeshim-passwd", m->passwd);
    fds[6] = memfd_with("codeshim-group", m->group);
    for (i = 4; i < 7; i++)
        if (fds[i] < 0) {
            rc = fds[i];
            shim_local_fail(l, LF_SECCOMP, strerror(-rc));
            return rc;
        }
    if (geteuid() == 0 && !l->zygote) {
        /* bwrap as root would keep the host's root in the sandbox's
         * user namespace (and RLIMIT_NPROC spares root): run it as a
         * fresh unprivileged user instead */
        sp->setid = 1;
        sp->uid = shim_local_fresh_uid();
        sp->gid = (gid_t)sp->uid;
    }
    tmpfs_specs(l, at, m, sp);
    return 0;
}

int shim_local_command(struct shim_local *l, struct shim_spawn *sp, int fds[NFDS],
                       void **mem)
{
    struct command *m = calloc(1, sizeof(*m));
    int rc;

    *mem = m;
    if (!m)
        return -ENOMEM;
    memset(sp, 0, sizeof(*sp));
    rc = l->p.unsafe ? unsafe_command(l, m, sp) : bwrap_command(l, m, sp, fds);
    if (rc)
        return rc;
    if (m->c.overflow) {
        shim_local_fail(l, LF_TOO_LONG, NULL);
        return -E2BIG;
    }
    sp->argv = m->c.v;
    /* per process; per sandbox, their kernel memory counts in its cgroup,
     * else at most this times the task limit */
    sp->nofile = (unsigned long)l->p.open_files;
    return 0;
}
