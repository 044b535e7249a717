/* local_layout.c - the jail's layout, as bubblewrap's arguments: the
 * clean environment, the read-only system (/usr, the /bin and /lib links
 * or directories, the few /etc files Python reads, an environment's
 * prefix), the synthetic /etc/passwd and /etc/group, the masked /proc
 * files, the private tmpfs places (each RAM, with a size and a file
 * count), and whether the interpreter is inside what the sandbox sees.
 * The same layout, as its own arguments, for the fork server's forks.
 * See local_int.h. */
#include "sandbox/local/local_argv.h"
#include "sandbox/local/local_int.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHM_SIZE (64u << 20)
#define SHM_INODES 1024u

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

static const char *const tmpfs_dest[NTMPFS] = {"/dev/shm", "/mnt/data",
                                               "/tmp"};

unsigned long long shim_local_layout_tmpfs_size(const struct shim_local *l, int i)
{
    return i == 0 ? SHM_SIZE : l->p.disk;
}

unsigned long long shim_local_layout_tmpfs_inodes(const struct shim_local *l, int i)
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
            argf(c, "%llu", shim_local_layout_tmpfs_size(l, i));
            arg(c, "--tmpfs");
        }
        arg(c, tmpfs_dest[i]);
    }
}

/* The fork server's own arguments (worker.py's _zygote): what each
 * sandbox it forks mounts and limits. */
void shim_local_layout_zygote(struct cmd *c, const struct shim_local *l)
{
    struct pieces b;
    int i;

    arg(c, "4"); /* the seccomp filter, read at start */
    argf(c, "%s", l->p.preload);
    argf(c, "%u", 0u); /* unused: each fork names its uid */
    b = pieces_start(c);
    for (i = 0; i < NTMPFS; i++)
        piece(c, &b, "%s%s=size=%llu,nr_inodes=%llu,mode=0755", i ? "|" : "",
              tmpfs_dest[i], shim_local_layout_tmpfs_size(l, i), shim_local_layout_tmpfs_inodes(l, i));
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

/* What a sandbox and the fork server share: the environment and the
 * filesystem. */
void shim_local_layout_args(struct cmd *c, const struct shim_local *l)
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
