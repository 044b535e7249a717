/* local_jail.c - what the local sandbox is started with: the command
 * that starts it (shim_local_command). Isolated, bubblewrap's command
 * line (the jail is local_layout.c's, from jail.def), its passwd and
 * group files, where spawn.c mounts the
 * private tmpfs, and a fresh unprivileged uid for root hosts; the fork
 * server's own bubblewrap command line; for both modes, the start-up
 * shell and the bootstrap that run worker/ (embedded by sandbox.mk).
 * Unsafe, the command in the host directory local_root.c keeps. */
#include "base/fileio.h"
#include "sandbox/local/local_argv.h"
#include "sandbox/local/local_int.h"

#include <fcntl.h>
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

/* bwrap's command line: the jail (local_layout.c, from jail.def), then
 * what runs in it. The fork server (l->zygote) keeps, inside its jail,
 * what each fork makes its own (its arguments say what: the JAIL one). As
 * root the server is root (it maps a fresh uid for each sandbox); else
 * the sandbox's uid of a user namespace of its own. */
static void bwrap_args(struct cmd *c, const struct shim_local *l)
{
    arg(c, l->p.bwrap);
    shim_local_layout_args(c, l);
    arg(c, "--");
    if (!l->zygote) {
        start_args(c, l, shim_local_jail_cwd());
        return;
    }
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
    shim_local_layout_zygote(c, l);
}

/* A uid no account uses, different for every sandbox (root hosts only). */
uid_t shim_local_fresh_uid(void)
{
    uint32_t r = 0;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
        r = (uint32_t)shim_clock_ms() ^ (uint32_t)getpid() << 12;
    return (uid_t)(0x40000000u + (r & 0x0fffffffu));
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
        char ids[48];

        snprintf(ids, sizeof(ids), ",uid=%u,gid=%u", (unsigned)uid,
                 (unsigned)gid);
        shim_fileio_join(m->tmpfs_dir[i], sizeof(m->tmpfs_dir[i]), at, name[i]);
        shim_local_layout_tmpfs_opts(l, i, ids, m->tmpfs_opts[i],
                                     sizeof(m->tmpfs_opts[i]));
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
    int rc = shim_local_refresh_root(l);

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
    int rc = shim_local_layout_python(l), i;

    if (rc)
        return rc;
    if (access(l->p.bwrap, X_OK) != 0) {
        rc = -errno;
        shim_local_fail(l, LF_NO_BWRAP, strerror(-rc));
        return rc;
    }
    if (l->own_tmpfs && !(at = tmpfs_place(l)))
        l->own_tmpfs = 0; /* bwrap's own tmpfs then */
    bwrap_args(&m->c, l);
    m->env[0] = (char *)"PATH=/usr/bin:/bin";
    m->env[1] = NULL;
    sp->path = l->p.bwrap;
    sp->envp = m->env;
    sp->cwd = "/";
    snprintf(m->passwd, sizeof(m->passwd),
             "sandbox:x:%u:%u:sandbox:/home/sandbox:/bin/sh\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             shim_local_jail_id(), shim_local_jail_id());
    snprintf(m->group, sizeof(m->group), "sandbox:x:%u:\nnogroup:x:65534:\n",
             shim_local_jail_id());
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
