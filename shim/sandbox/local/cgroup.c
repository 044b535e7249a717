/* cgroup.c - one cgroup per sandbox: where this machine lets us make one
 * (cgroup v2 delegated to us, else the v1 memory and pids hierarchies),
 * its limits, the descriptors the spawned child joins it through, the
 * kill of whatever is left in it when the sandbox ends, its removal, and
 * the removal of those left behind by processes that died. See cgroup.h.
 *
 * Why these settings:
 * - memory: v2 memory.max counts anonymous memory, page cache, tmpfs and
 *   memfd (shmem) and kernel memory (inodes, dentries, pipe buffers, open
 *   files); memory.swap.max = 0 keeps it out of swap. v1
 *   memory.limit_in_bytes counts the same (kernel memory too, since 5.x
 *   kernels account it there; memory.kmem.limit_in_bytes is obsolete and
 *   not written), memory.memsw.limit_in_bytes = the same value keeps swap
 *   inside it, swappiness 0 where memsw is missing. The OOM killer is
 *   left on (oom_control 0: a v1 child inherits its parent's setting), so
 *   at the limit a process of the sandbox is killed, never one outside
 *   it. use_hierarchy is not written: the sandbox makes no cgroups below
 *   its own, and kernels since 5.x ignore it.
 * - pids.max counts every task (processes and threads) of the sandbox.
 * Nothing here runs in the spawned child: it only writes "0" to the
 * descriptors opened here. */
#include "base/clock.h"
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/local/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "codeshim-"
#define CG_LINE 4096     /* longer /proc lines are skipped */
#define DESTROY_MS 1000    /* rmdir retried this long */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static struct shim_cgroup_info probed;
static int probe_rc;
static unsigned counter;    /* names; atomic */
static int told_none;       /* "no cgroup" logged; atomic */

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};

    nanosleep(&ts, NULL);
}

/* Up to outsz-1 bytes of a small file, NUL-terminated (a longer one
 * cut); length or -errno. */
static ssize_t read_small(const char *path, char *out, size_t outsz)
{
    ssize_t n = shim_fileio_read(path, 0, out, outsz);

    return n == -EFBIG ? (ssize_t)(outsz - 1) : n;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[SHIM_CG_PATH + 64];
    size_t len = strlen(text);
    ssize_t w;
    int fd, rc = 0;

    if (shim_fileio_join(path, sizeof(path), dir, name))
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    do
        w = write(fd, text, len);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len)
        rc = w < 0 ? -errno : -EIO;
    close(fd);
    return rc;
}

static int has_file(const char *dir, const char *name)
{
    char path[SHIM_CG_PATH + 64];

    return shim_fileio_join(path, sizeof(path), dir, name) == 0 &&
           access(path, F_OK) == 0;
}

/* Is word one of the sep-separated items of list? */
static int has_word(const char *list, const char *word, char sep)
{
    size_t n = strlen(word);
    const char *p = list;

    while (p && *p) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);

        while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == ' '))
            len--;
        if (len == n && !strncmp(p, word, n))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* ---- probe: where this process's cgroups are ---- */

/* This process's cgroup path in the v1 hierarchy of ctl, or in v2
 * (ctl NULL), from /proc/self/cgroup. */
static int own_path(const char *ctl, char *out, size_t outsz)
{
    char buf[CG_LINE * 4], *line, *save = NULL;

    if (read_small("/proc/self/cgroup", buf, sizeof(buf)) < 0)
        return -ENOENT;
    for (line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

        if (!c2)
            continue;
        *c2 = '\0';
        if (ctl ? !has_word(c1 + 1, ctl, ',')
                : !(c1 == line + 1 && line[0] == '0' && c1[1] == '\0'))
            continue;
        if (snprintf(out, outsz, "%s", c2 + 1) >= (int)outsz)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

/* The mountinfo fields we use, split in place; 0 or -EINVAL. */
struct mnt {
    char *root, *point, *fstype, *opts;
};

static int split_mount(char *line, struct mnt *m)
{
    char *f[8] = {0}, *tok, *save = NULL;
    int i = 0, dash = 0;

    memset(m, 0, sizeof(*m));
    for (tok = strtok_r(line, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        if (!dash && !strcmp(tok, "-")) {
            dash = 1;
            i = 5;
            continue;
        }
        if (i < 5)
            f[i] = tok;
        else if (dash && i < 8)
            f[i] = tok;
        i++;
    }
    if (!dash || !f[3] || !f[4] || !f[5] || !f[7])
        return -EINVAL;
    /* escaped blanks (\040) in a path: not worth decoding */
    if (strchr(f[3], '\\') || strchr(f[4], '\\'))
        return -EINVAL;
    m->root = f[3];
    m->point = f[4];
    m->fstype = f[5];
    m->opts = f[7];
    return 0;
}

/* The directory of cgroup path in the mount m of its hierarchy: the
 * mount point plus path below the mount's root. */
static int dir_in_mount(const struct mnt *m, const char *path, char *out,
                        size_t outsz)
{
    size_t rl = strlen(m->root);
    const char *rest;

    if (!strcmp(m->root, "/"))
        rest = path;
    else if (!strncmp(path, m->root, rl) && (path[rl] == '/' || !path[rl]))
        rest = path + rl;
    else
        return -ENOENT;
    if (!strcmp(rest, "/"))
        rest = "";
    if (snprintf(out, outsz, "%s%s", m->point, rest) >= (int)outsz)
        return -ENAMETOOLONG;
    return 0;
}

/* The directory of this process's cgroup in the hierarchy of ctl (v1)
 * or v2 (ctl NULL); rel gets the path /proc/<pid>/cgroup shows. */
static int find_dir(const char *ctl, char *dir, char *rel, size_t sz)
{
    char line[CG_LINE];
    FILE *f;
    int rc = -ENOENT;

    if (own_path(ctl, rel, sz) != 0)
        return -ENOENT;
    f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    while (rc != 0 && fgets(line, sizeof(line), f)) {
        struct mnt m;

        if (!strchr(line, '\n')) { /* too long: skip the rest of it */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
        if (split_mount(line, &m) != 0)
            continue;
        if (ctl ? strcmp(m.fstype, "cgroup") || !has_word(m.opts, ctl, ',')
                : strcmp(m.fstype, "cgroup2") != 0)
            continue;
        rc = dir_in_mount(&m, rel, dir, sz);
    }
    fclose(f);
    return rc;
}

/* Adds "what: why" to in->why. */
static void note(struct shim_cgroup_info *in, const char *what,
                 const char *why)
{
    size_t n = strlen(in->why);

    if (n + 3 < sizeof(in->why))
        snprintf(in->why + n, sizeof(in->why) - n, "%s%s: %s", n ? "; " : "",
                 what, why);
}

/* v2: a directory whose children get memory (and pids): our own cgroup
 * when it enables them below it, else its parent when we may write it. */
static void probe_v2(struct shim_cgroup_info *in)
{
    char dir[SHIM_CG_PATH], rel[SHIM_CG_PATH], ctl[512];
    int i;

    if (find_dir(NULL, dir, rel, sizeof(dir)) != 0)
        return;
    for (i = 0; i < 2; i++) {
        char path[SHIM_CG_PATH + 32];
        char *slash;

        if (shim_fileio_join(path, sizeof(path), dir, "cgroup.subtree_control") ==
                0 &&
            read_small(path, ctl, sizeof(ctl)) >= 0 &&
            has_word(ctl, "memory", ' ') && access(dir, W_OK) == 0) {
            in->mem.version = 2;
            snprintf(in->mem.base, sizeof(in->mem.base), "%s", dir);
            snprintf(in->mem.rel, sizeof(in->mem.rel), "%s", rel);
            if (has_word(ctl, "pids", ' '))
                in->pids = in->mem;
            in->kmem = 1;
            in->kill = has_file(dir, "cgroup.kill");
            return;
        }
        /* the parent, unless we are at the top of what we see */
        slash = strrchr(rel, '/');
        if (i == 1 || !slash || slash == rel)
            break;
        *slash = '\0';
        slash = strrchr(dir, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    note(in, "cgroup v2", "no delegated subtree with memory");
}

static void probe_v1(struct shim_cgroup_info *in, const char *ctl,
                     struct shim_cg_place *pl)
{
    char dir[SHIM_CG_PATH], rel[SHIM_CG_PATH];

    if (find_dir(ctl, dir, rel, sizeof(dir)) != 0) {
        note(in, ctl, "no cgroup v1 hierarchy");
        return;
    }
    if (access(dir, W_OK) != 0) {
        note(in, ctl,
             errno == EACCES ? "not writable by this user" : strerror(errno));
        return;
    }
    pl->version = 1;
    snprintf(pl->base, sizeof(pl->base), "%s", dir);
    snprintf(pl->rel, sizeof(pl->rel), "%s", rel);
}

static int no_swap(void)
{
    char buf[256];

    /* /proc/swaps: a header line, then one line per swap area */
    return read_small("/proc/swaps", buf, sizeof(buf)) >= 0 &&
           strchr(buf, '\n') && !strchr(buf, '\n')[1];
}

static void probe_now(void)
{
    struct shim_cgroup_info *in = &probed;

    memset(in, 0, sizeof(*in));
    probe_v2(in);
    if (!in->mem.version) {
        probe_v1(in, "memory", &in->mem);
        if (in->mem.version == 1)
            in->kmem = has_file(in->mem.base, "memory.kmem.usage_in_bytes");
    }
    if (!in->pids.version)
        probe_v1(in, "pids", &in->pids);
    if (in->mem.version == 2)
        in->swap = has_file(in->mem.base, "memory.swap.max") || no_swap();
    else if (in->mem.version == 1)
        in->swap = has_file(in->mem.base, "memory.memsw.limit_in_bytes") ||
                   no_swap();
    probe_rc = in->mem.version || in->pids.version ? 0 : -ENOENT;
}

int shim_cgroup_probe(struct shim_cgroup_info *out)
{
    pthread_once(&probe_once, probe_now);
    *out = probed;
    return probe_rc;
}

/* ---- names, and the leftovers of dead processes ---- */

static unsigned long pidns_id(void)
{
    struct stat st;

    return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

void shim_cgroup_prefix(char *out, size_t outsz)
{
    snprintf(out, outsz, PREFIX "%lu-%ld-", pidns_id(), (long)getpid());
}

/* Parses "codeshim-<ns>-<pid>-<n>"; 0 or -EINVAL. */
static int parse_name(const char *name, unsigned long *ns, long *pid)
{
    char *end;

    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0)
        return -EINVAL;
    name += strlen(PREFIX);
    *ns = strtoul(name, &end, 10);
    if (end == name || *end != '-')
        return -EINVAL;
    name = end + 1;
    *pid = strtol(name, &end, 10);
    if (end == name || *end != '-' || *pid <= 0)
        return -EINVAL;
    strtoul(end + 1, &end, 10);
    return *end ? -EINVAL : 0;
}

/* Removes the cgroups in base made by processes of our PID namespace that
 * are gone (an rmdir fails harmlessly on one that still has tasks). */
static void remove_leftovers(const char *base)
{
    unsigned long ns = pidns_id(), their_ns;
    DIR *d = opendir(base);
    struct dirent *e;
    long pid;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[SHIM_CG_PATH + 300];

        if (parse_name(e->d_name, &their_ns, &pid) != 0 || their_ns != ns ||
            pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to ask) */
        if (shim_fileio_join(path, sizeof(path), base, e->d_name) == 0 &&
            rmdir(path) == 0)
            LOG_DEBUG("removed the cgroup %s of a process that is gone",
                      path);
    }
    closedir(d);
}

/* ---- create ---- */

void shim_cgroup_init(struct shim_cgroup *cg)
{
    memset(cg, 0, sizeof(*cg));
    cg->join[0] = cg->join[1] = -1;
}

static int open_join(const char *dir)
{
    char path[SHIM_CG_PATH + 32];
    int fd;

    if (shim_fileio_join(path, sizeof(path), dir, "cgroup.procs"))
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* The limits of a new cgroup; 0 or -errno (then it is removed). */
static int set_memory(const char *dir, int version,
                      unsigned long long memory)
{
    char v[32];
    int rc;

    snprintf(v, sizeof(v), "%llu", memory);
    if (version == 2) {
        rc = write_file(dir, "memory.max", v);
        if (rc == 0 && has_file(dir, "memory.swap.max"))
            write_file(dir, "memory.swap.max", "0");
        return rc;
    }
    rc = write_file(dir, "memory.limit_in_bytes", v);
    if (rc)
        return rc;
    /* mem+swap no larger than mem: no swap (after the limit: memsw may
     * never be below it) */
    if (write_file(dir, "memory.memsw.limit_in_bytes", v) != 0)
        write_file(dir, "memory.swappiness", "0");
    write_file(dir, "memory.oom_control", "0");
    return 0;
}

static int set_pids(const char *dir, int tasks)
{
    char v[32];

    snprintf(v, sizeof(v), "%d", tasks);
    return write_file(dir, "pids.max", v);
}

/* Makes one cgroup (slot i of cg) in place pl; 0 or -errno. */
static int make_one(struct shim_cgroup *cg, int i,
                    const struct shim_cg_place *pl, const char *name,
                    unsigned long long memory, int tasks, int both)
{
    char *dir = cg->dir[i];
    int rc;

    if (shim_fileio_join(dir, SHIM_CG_PATH, pl->base, name) ||
        snprintf(cg->rel[i], SHIM_CG_PATH, "%s%s%s", pl->rel,
                 strcmp(pl->rel, "/") ? "/" : "", name) >= SHIM_CG_PATH) {
        dir[0] = '\0';
        return -ENAMETOOLONG;
    }
    if (mkdir(dir, 0755) != 0) {
        rc = -errno;
        dir[0] = '\0';
        return rc;
    }
    rc = i == 0 ? set_memory(dir, pl->version, memory) : 0;
    if (rc == 0 && (i == 1 || both))
        rc = set_pids(dir, tasks);
    if (rc == 0) {
        int fd = open_join(dir);

        if (fd >= 0)
            cg->join[cg->njoin++] = fd;
        rc = fd < 0 ? fd : 0;
    }
    if (rc) {
        rmdir(dir);
        dir[0] = '\0';
        return rc;
    }
    cg->version[i] = pl->version;
    return 0;
}

int shim_cgroup_create(struct shim_cgroup *cg, unsigned long long memory,
                       int tasks)
{
    struct shim_cgroup_info in;
    char name[96];
    int rc, rc2 = 0, shared;

    shim_cgroup_init(cg);
    rc = shim_cgroup_probe(&in);
    if (rc == 0) {
        shared = in.pids.version == 2 && in.mem.version == 2;
        snprintf(name, sizeof(name), PREFIX "%lu-%ld-%u", pidns_id(),
                 (long)getpid(), __atomic_fetch_add(&counter, 1,
                                                    __ATOMIC_RELAXED));
        if (in.mem.version) {
            remove_leftovers(in.mem.base);
            rc = make_one(cg, 0, &in.mem, name, memory, tasks, shared);
            cg->memory = rc == 0;
            cg->pids = rc == 0 && shared;
        }
        if (in.pids.version && !shared) {
            remove_leftovers(in.pids.base);
            rc2 = make_one(cg, 1, &in.pids, name, memory, tasks, 0);
            cg->pids = rc2 == 0;
        }
        rc = cg->memory || cg->pids ? 0 : (rc ? rc : rc2 ? rc2 : -ENOENT);
    }
    if (rc == 0) {
        cg->owner = getpid();
        return 0;
    }
    if (!__atomic_exchange_n(&told_none, 1, __ATOMIC_RELAXED))
        LOG_INFO("sandbox: no cgroup of its own (%s): memory and tasks are "
                 "limited per process only",
                 in.why[0] ? in.why : strerror(-rc));
    return rc;
}

void shim_cgroup_joined(struct shim_cgroup *cg)
{
    int i;

    for (i = 0; i < cg->njoin; i++)
        close(cg->join[i]);
    cg->join[0] = cg->join[1] = -1;
    cg->njoin = 0;
}

/* ---- kill and remove ---- */

/* Is pid in cgroup rel (as /proc/<pid>/cgroup says)? */
static int member(long pid, const char *rel, int version, const char *ctl)
{
    char path[64], buf[CG_LINE], *line, *save = NULL;

    snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
    if (read_small(path, buf, sizeof(buf)) < 0)
        return 0;
    for (line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

        if (!c2)
            continue;
        *c2 = '\0';
        if (version == 2 ? (c1 != line + 1 || line[0] != '0')
                         : !has_word(c1 + 1, ctl, ','))
            continue;
        return !strcmp(c2 + 1, rel);
    }
    return 0;
}

/* SIGKILL to pid if it is (still) in the cgroup: through a pidfd taken
 * before the check, so a pid number reused meanwhile by a process outside
 * is never signalled. */
static void kill_member(long pid, const char *rel, int version,
                        const char *ctl)
{
    long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);

    if (fd < 0 && errno != ENOSYS)
        return; /* gone */
    if (member(pid, rel, version, ctl)) {
        if (fd >= 0)
            syscall(SYS_pidfd_send_signal, (int)fd, SIGKILL, NULL, 0);
        else
            kill((pid_t)pid, SIGKILL); /* kernel without pidfds */
    }
    if (fd >= 0)
        close((int)fd);
}

/* Kills every pid cgroup.procs lists; returns how many it listed. */
static int kill_listed(const char *dir, const char *rel, int version,
                       const char *ctl)
{
    char path[SHIM_CG_PATH + 32], buf[4096];
    long pid = 0;
    int fd, n = 0, digits = 0;
    ssize_t r, i;

    if (shim_fileio_join(path, sizeof(path), dir, "cgroup.procs"))
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    while ((r = read(fd, buf, sizeof(buf))) > 0 ||
           (r < 0 && errno == EINTR)) {
        for (i = 0; i < r; i++) {
            if (buf[i] >= '0' && buf[i] <= '9' && digits < 10) {
                pid = pid * 10 + (buf[i] - '0');
                digits++;
                continue;
            }
            if (digits) {
                kill_member(pid, rel, version, ctl);
                n++;
            }
            pid = 0;
            digits = 0;
        }
    }
    if (digits) {
        kill_member(pid, rel, version, ctl);
        n++;
    }
    close(fd);
    return n;
}

void shim_cgroup_adopt(struct shim_cgroup *cg)
{
    cg->owner = getpid();
}

void shim_cgroup_destroy(struct shim_cgroup *cg)
{
    static const char *const ctl[2] = {"memory", "pids"};
    int64_t end = shim_clock_ms() + DESTROY_MS;
    int i, left, err = 0;

    shim_cgroup_joined(cg);
    if (cg->owner != getpid()) {
        shim_cgroup_init(cg); /* a forked child: its parent's to remove */
        return;
    }
    do {
        left = 0;
        for (i = 0; i < 2; i++) {
            if (!cg->dir[i][0])
                continue;
            if (cg->version[i] == 2 && has_file(cg->dir[i], "cgroup.kill"))
                write_file(cg->dir[i], "cgroup.kill", "1");
            kill_listed(cg->dir[i], cg->rel[i], cg->version[i], ctl[i]);
            if (rmdir(cg->dir[i]) == 0 || errno == ENOENT) {
                cg->dir[i][0] = '\0';
            } else {
                err = errno;
                left++;
            }
        }
        if (left)
            nap_ms(2);
    } while (left && shim_clock_ms() < end);
    for (i = 0; i < 2; i++)
        if (cg->dir[i][0])
            LOG_WARN("could not remove the sandbox's cgroup %s: %s",
                     cg->dir[i], strerror(err));
    shim_cgroup_init(cg);
}

unsigned long long shim_cgroup_peak(const struct shim_cgroup *cg)
{
    char path[SHIM_CG_PATH + 64], buf[64];

    if (!cg->memory || !cg->dir[0][0])
        return 0;
    if (shim_fileio_join(path, sizeof(path), cg->dir[0],
                  cg->version[0] == 2 ? "memory.peak"
                                      : "memory.max_usage_in_bytes") ||
        read_small(path, buf, sizeof(buf)) <= 0)
        return 0;
    return strtoull(buf, NULL, 10);
}
