/* local_layout.c - the jail (jail.def, its one description) made
 * bubblewrap's arguments, for a sandbox and for the fork server, and the
 * fork server's JAIL argument, what each fork makes again (worker/
 * zygote.py applies it); the sizes and file counts of the private tmpfs
 * places; and whether the interpreter is inside what the sandbox sees.
 * See local_int.h. */
#include "sandbox/local/local_argv.h"
#include "sandbox/local/local_int.h"

#include <glob.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define SHM_SIZE (64u << 20)
#define SHM_INODES 1024u

/* The jail (jail.def), one row an element. */
enum jail_kind {
    J_PROCESS, J_NS, J_NO_USERNS, J_ID, J_HOSTNAME, J_CAPS_NONE, J_CLEARENV,
    J_ENV, J_RO_BIND, J_ENV_PREFIX, J_SYSTEM, J_ETC, J_ETC_GLOB, J_DATA,
    J_PROC, J_MASK, J_DEV, J_TMPFS, J_DIR, J_SYMLINK, J_REMOUNT_RO, J_CWD,
    J_SECCOMP, /* the last */
};

struct jail_row {
    enum jail_kind kind;
    const char *a, *b; /* a name or path; a value, target or bwrap option */
    unsigned long n;   /* a flag (MS_, CLONE_), fd, mode, id or count */
    int place;         /* a tmpfs: its index (NTMPFS of them) */
};

static const struct jail_row jail[] = {
#define JAIL_PROCESS(opt) {.kind = J_PROCESS, .b = opt},
#define JAIL_NS(name, flag, opt) {.kind = J_NS, .a = #name, .b = opt, .n = flag},
#define JAIL_NO_USERNS() {.kind = J_NO_USERNS},
#define JAIL_ID(id) {.kind = J_ID, .n = id},
#define JAIL_HOSTNAME(name) {.kind = J_HOSTNAME, .a = name},
#define JAIL_CAPS_NONE() {.kind = J_CAPS_NONE},
#define JAIL_CLEARENV() {.kind = J_CLEARENV},
#define JAIL_ENV(name, value) {.kind = J_ENV, .a = name, .b = value},
#define JAIL_RO_BIND(path) {.kind = J_RO_BIND, .a = path},
#define JAIL_ENV_PREFIX(target) {.kind = J_ENV_PREFIX, .a = target},
#define JAIL_SYSTEM(path) {.kind = J_SYSTEM, .a = path},
#define JAIL_ETC(path) {.kind = J_ETC, .a = path},
#define JAIL_ETC_GLOB(pattern, max) {.kind = J_ETC_GLOB, .a = pattern, .n = max},
#define JAIL_DATA(fd, path) {.kind = J_DATA, .a = path, .b = #fd, .n = fd},
#define JAIL_PROC(path, flags) {.kind = J_PROC, .a = path, .n = flags},
#define JAIL_MASK(path) {.kind = J_MASK, .a = path},
#define JAIL_DEV(path) {.kind = J_DEV, .a = path},
#define JAIL_TMPFS(i, path, flags) {.kind = J_TMPFS, .a = path, .n = flags, .place = i},
#define JAIL_DIR(path, mode) {.kind = J_DIR, .a = path, .b = #mode, .n = mode},
#define JAIL_SYMLINK(target, path) {.kind = J_SYMLINK, .a = path, .b = target},
#define JAIL_REMOUNT_RO(path) {.kind = J_REMOUNT_RO, .a = path},
#define JAIL_CWD(path) {.kind = J_CWD, .a = path},
#define JAIL_SECCOMP(fd) {.kind = J_SECCOMP, .b = #fd, .n = fd},
#include "sandbox/local/jail.def"
#undef JAIL_PROCESS
#undef JAIL_NS
#undef JAIL_NO_USERNS
#undef JAIL_ID
#undef JAIL_HOSTNAME
#undef JAIL_CAPS_NONE
#undef JAIL_CLEARENV
#undef JAIL_ENV
#undef JAIL_RO_BIND
#undef JAIL_ENV_PREFIX
#undef JAIL_SYSTEM
#undef JAIL_ETC
#undef JAIL_ETC_GLOB
#undef JAIL_DATA
#undef JAIL_PROC
#undef JAIL_MASK
#undef JAIL_DEV
#undef JAIL_TMPFS
#undef JAIL_DIR
#undef JAIL_SYMLINK
#undef JAIL_REMOUNT_RO
#undef JAIL_CWD
#undef JAIL_SECCOMP
};

#define NROWS (sizeof(jail) / sizeof(jail[0]))
/* What a JAIL_MASK row's file is hidden under (bound over it): reads are
 * empty, writes vanish. */
#define MASK_WITH "/dev/null"

static const struct jail_row *row_of(enum jail_kind kind)
{
    size_t i;

    for (i = 0; i < NROWS; i++)
        if (jail[i].kind == kind)
            return &jail[i];
    return NULL;
}

unsigned shim_local_jail_id(void)
{
    const struct jail_row *r = row_of(J_ID);

    return r ? (unsigned)r->n : 65534u; /* no row: nobody */
}

const char *shim_local_jail_cwd(void)
{
    const struct jail_row *r = row_of(J_CWD);

    return r ? r->a : "/";
}

/* A system directory: a merged-/usr system links /bin, /lib... into
 * /usr; others have real directories, mounted read-only like /usr. */
static void system_dir(struct cmd *c, const char *dir)
{
    struct stat st;
    char target[256];
    ssize_t n;

    if (lstat(dir, &st) != 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        n = readlink(dir, target, sizeof(target) - 1);
        if (n <= 0 || (size_t)n >= sizeof(target) - 1)
            return;
        target[n] = '\0';
        arg(c, "--symlink");
        argf(c, "%s", target);
        arg(c, dir);
    } else if (S_ISDIR(st.st_mode)) {
        args3(c, "--ro-bind", dir, dir);
    }
}

static void etc_glob(struct cmd *c, const char *pattern, size_t max)
{
    glob_t g;
    size_t i;

    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (i = 0; i < g.gl_pathc && i < max; i++) {
        arg(c, "--ro-bind-try");
        argf(c, "%s", g.gl_pathv[i]);
        argf(c, "%s", g.gl_pathv[i]);
    }
    globfree(&g);
}

/* Only the /proc files this kernel has are masked: bwrap cannot make a
 * mount point in /proc. */
static int is_file(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

unsigned long long shim_local_layout_tmpfs_size(const struct shim_local *l, int i)
{
    return i == 0 ? SHM_SIZE : l->p.disk;
}

unsigned long long shim_local_layout_tmpfs_inodes(const struct shim_local *l, int i)
{
    return i == 0 ? SHM_INODES : l->p.inodes;
}

/* Tmpfs place i's mount options (mode, size, file count), then extra. */
int shim_local_layout_tmpfs_opts(const struct shim_local *l, int i,
                                 const char *extra, char *out, size_t outsz)
{
    int n = snprintf(out, outsz, "size=%llu,nr_inodes=%llu,mode=0755%s",
                     shim_local_layout_tmpfs_size(l, i),
                     shim_local_layout_tmpfs_inodes(l, i), extra);

    return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

/* A size and a file count each when spawn.c mounts them (l->own_tmpfs:
 * it hands them over as descriptors NFDS..); bwrap's own --tmpfs can
 * only give a size. */
static void tmpfs_arg(struct cmd *c, const struct shim_local *l, int i,
                      const char *dest)
{
    if (l->own_tmpfs) {
        arg(c, "--bind-fd");
        argf(c, "%d", NFDS + i);
    } else {
        arg(c, "--size");
        argf(c, "%llu", shim_local_layout_tmpfs_size(l, i));
        arg(c, "--tmpfs");
    }
    arg(c, dest);
}

/* The rows that are one bubblewrap option and a path, the same for the
 * fork server; and those bound read-only where they are. */
static const char *const path_opt[J_SECCOMP + 1] = {
    [J_HOSTNAME] = "--hostname", [J_PROC] = "--proc", [J_DEV] = "--dev",
    [J_REMOUNT_RO] = "--remount-ro", [J_CWD] = "--chdir",
};
static const char *const bind_opt[J_SECCOMP + 1] = {
    [J_RO_BIND] = "--ro-bind", [J_ETC] = "--ro-bind-try",
};

/* The rows as bubblewrap's arguments: a sandbox's, or (l->zygote) the
 * fork server's, which keeps what its forks make their own (jail.def's
 * head says what, and why). */
void shim_local_layout_args(struct cmd *c, const struct shim_local *l)
{
    int server = l->zygote, as_root = geteuid() == 0;
    size_t i;

    for (i = 0; i < NROWS; i++) {
        const struct jail_row *r = &jail[i];

        switch (r->kind) {
        case J_PROCESS:
            arg(c, r->b);
            break;
        case J_NS: /* as root the server maps each fork's ids itself */
            if (r->b && !(server && as_root && r->n == CLONE_NEWUSER))
                arg(c, r->b);
            break;
        case J_NO_USERNS:
            if (!server)
                arg(c, "--disable-userns");
            break;
        case J_ID: /* the server: root of its own, if any (forks map) */
            if (!(server && as_root)) {
                arg(c, "--uid");
                argf(c, "%lu", server ? 0ul : r->n);
                arg(c, "--gid");
                argf(c, "%lu", server ? 0ul : r->n);
            }
            break;
        case J_CAPS_NONE:
            args2(c, server ? "--cap-add" : "--cap-drop", "ALL");
            break;
        case J_CLEARENV:
            arg(c, "--clearenv");
            break;
        case J_ENV:
            args3(c, "--setenv", r->a, r->b);
            break;
        case J_ENV_PREFIX:
            if (l->env_prefix[0]) {
                arg(c, "--ro-bind");
                argf(c, "%s", l->env_prefix);
                arg(c, r->a);
            }
            break;
        case J_SYSTEM:
            system_dir(c, r->a);
            break;
        case J_ETC_GLOB:
            etc_glob(c, r->a, r->n);
            break;
        case J_DATA:
            args3(c, "--ro-bind-data", r->b, r->a);
            break;
        case J_MASK: /* each fork masks its own /proc */
            if (!server && is_file(r->a))
                args3(c, "--dev-bind", MASK_WITH, r->a);
            break;
        case J_TMPFS:
            tmpfs_arg(c, l, r->place, r->a);
            break;
        case J_DIR:
            args2(c, "--perms", r->b);
            args2(c, "--dir", r->a);
            break;
        case J_SYMLINK:
            args3(c, "--symlink", r->b, r->a);
            break;
        case J_SECCOMP: /* each fork installs it */
            if (!server)
                args2(c, "--seccomp", r->b);
            break;
        default:
            if (path_opt[r->kind])
                args2(c, path_opt[r->kind], r->a);
            else if (bind_opt[r->kind]) /* bound where it is */
                args3(c, bind_opt[r->kind], r->a, r->a);
            break;
        }
    }
}

/* A JSON string of the table's: its texts are paths and plain values,
 * anything that would need escaping is refused (an overflow). */
static void jstr(struct cmd *c, struct pieces *b, const char *s)
{
    const char *p;

    for (p = s; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
            c->overflow = 1;
    piece(c, b, "\"%s\"", s);
}

/* What a fork makes its own, as the fork server's JAIL argument (one
 * JSON object, worker/zygote.py reads it):
 *   {"ns": {name: CLONE_ flag...}, "id": uid, "hostname": name,
 *    "env": [[name, value]...], "proc": [path, MS_ flags],
 *    "masks": [path...], "mask_with": path,
 *    "tmpfs": [[path, MS_ flags, options]...],
 *    "cwd": path, "no_userns": 0|1, "caps_none": 0|1, "seccomp": fd} */
static void fork_jail(struct cmd *c, const struct shim_local *l)
{
    static const char *const lists[] = {"ns", "env", "masks", "tmpfs"};
    static const enum jail_kind list_kind[] = {J_NS, J_ENV, J_MASK, J_TMPFS};
    struct pieces b = pieces_start(c);
    size_t i, k;
    int no_userns = 0, caps_none = 0;

    piece(c, &b, "{");
    for (k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
        int n = 0;

        piece(c, &b, "%s\"%s\": %s", k ? ", " : "", lists[k],
              list_kind[k] == J_NS ? "{" : "[");
        for (i = 0; i < NROWS; i++) {
            const struct jail_row *r = &jail[i];

            if (r->kind != list_kind[k] || (r->kind == J_MASK && !is_file(r->a)))
                continue;
            piece(c, &b, "%s", n++ ? ", " : "");
            if (r->kind == J_NS) {
                jstr(c, &b, r->a);
                piece(c, &b, ": %lu", r->n);
            } else if (r->kind == J_ENV) {
                piece(c, &b, "[");
                jstr(c, &b, r->a);
                piece(c, &b, ", ");
                jstr(c, &b, r->b);
                piece(c, &b, "]");
            } else if (r->kind == J_MASK) {
                jstr(c, &b, r->a);
            } else {
                char opts[96];

                if (shim_local_layout_tmpfs_opts(l, r->place, "", opts,
                                                 sizeof(opts)))
                    c->overflow = 1;
                piece(c, &b, "[");
                jstr(c, &b, r->a);
                piece(c, &b, ", %lu, ", r->n);
                jstr(c, &b, opts);
                piece(c, &b, "]");
            }
        }
        piece(c, &b, list_kind[k] == J_NS ? "}" : "]");
    }
    for (i = 0; i < NROWS; i++) {
        const struct jail_row *r = &jail[i];

        switch (r->kind) {
        case J_ID:
            piece(c, &b, ", \"id\": %lu", r->n);
            break;
        case J_HOSTNAME:
        case J_CWD:
            piece(c, &b, ", \"%s\": ", r->kind == J_CWD ? "cwd" : "hostname");
            jstr(c, &b, r->a);
            break;
        case J_PROC:
            piece(c, &b, ", \"proc\": [");
            jstr(c, &b, r->a);
            piece(c, &b, ", %lu]", r->n);
            break;
        case J_SECCOMP:
            piece(c, &b, ", \"seccomp\": %lu", r->n);
            break;
        case J_NO_USERNS:
            no_userns = 1;
            break;
        case J_CAPS_NONE:
            caps_none = 1;
            break;
        default:
            break;
        }
    }
    piece(c, &b, ", \"mask_with\": ");
    jstr(c, &b, MASK_WITH);
    piece(c, &b, ", \"no_userns\": %d, \"caps_none\": %d}", no_userns,
          caps_none);
    piece_done(c, &b);
}

/* The fork server's own arguments (worker/zygote.py's _zygote): what
 * each sandbox it forks makes its own, and its limits. */
void shim_local_layout_zygote(struct cmd *c, const struct shim_local *l)
{
    argf(c, "%s", l->p.preload);
    fork_jail(c, l);
    argf(c, "%lld", (long long)l->p.timeout_s * 1000);
    argf(c, "%zu", l->p.output_cap + OUT_SLACK);
    argf(c, "%llu", l->p.memory);
    argf(c, "%d", l->p.procs);
    argf(c, "%llu", l->p.file_size);
    argf(c, "%d", l->p.cpu_s);
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
int shim_local_layout_python(struct shim_local *l)
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
