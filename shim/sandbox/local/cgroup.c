/* cgroup.c - one cgroup per sandbox, the front of cgroup.h: which
 * version this machine lets us use (cgroup_v2.c's delegated subtree, else
 * cgroup_v1.c's memory and pids hierarchies), the cgroup's name, its
 * limits, the descriptors the spawned child joins it through, the kill of
 * whatever is left in it when the sandbox ends, its removal, and the
 * removal of those left behind by processes that died. See cgroup.h; the
 * files of the cgroup filesystems are cgroup_fs.c's.
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
#include "sandbox/local/cgroup_int.h"

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

/* ---- probe: where this process's cgroups are ---- */

static void probe_now(void)
{
    struct shim_cgroup_info *in = &probed;

    memset(in, 0, sizeof(*in));
    shim_cgroup_v2_probe(in);
    if (!in->mem.version)
        shim_cgroup_v1_probe_memory(in);
    if (!in->pids.version)
        shim_cgroup_v1_probe(in, "pids", &in->pids);
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

    snprintf(v, sizeof(v), "%llu", memory);
    return version == 2 ? shim_cgroup_v2_set_memory(dir, v)
                        : shim_cgroup_v1_set_memory(dir, v);
}


static int set_pids(const char *dir, int tasks)
{
    char v[32];

    snprintf(v, sizeof(v), "%d", tasks);
    return shim_cgroup_fs_write(dir, "pids.max", v);
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


/* SIGKILL to pid if it is (still) in the cgroup: through a pidfd taken
 * before the check, so a pid number reused meanwhile by a process outside
 * is never signalled. */
static void kill_member(long pid, const char *rel, int version,
                        const char *ctl)
{
    long fd = syscall(SYS_pidfd_open, (pid_t)pid, 0);

    if (fd < 0 && errno != ENOSYS)
        return; /* gone */
    if (shim_cgroup_fs_member(pid, rel, version, ctl)) {
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
            if (cg->version[i] == 2)
                shim_cgroup_v2_kill(cg->dir[i]);
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
        shim_cgroup_fs_read(path, buf, sizeof(buf)) <= 0)
        return 0;
    return strtoull(buf, NULL, 10);
}
