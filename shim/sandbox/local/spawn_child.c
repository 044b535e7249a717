/* spawn_child.c - what the CLONE_VM child of spawn.c runs, from the clone
 * to execve (spawn.c's first comment says what and why). It shares the
 * host's memory and runs on a small stack, so nothing here may bind a
 * symbol lazily: this file alone is built with -fno-plt (its calls go
 * through GOT slots the loader fills at load time), and it calls only
 * system-call wrappers. Everything before the clone is spawn.c's. */
#include "sandbox/local/spawn_child.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The private tmpfs are mounted in the child's own mount namespace on
 * directories of a small tmpfs of their own (tmpfs_at): bwrap finds the
 * path of a --bind-fd descriptor and binds that path (checking it is the
 * same directory), so each needs a path of its own. */
#define TMPFS_AT_OPTS "size=16k,nr_inodes=16,mode=0755"

/* Writes all of text to path; 0 or -1 with errno set. */
static int put(const char *path, const char *text)
{
    size_t len = strlen(text);
    int fd = open(path, O_WRONLY | O_CLOEXEC), err;
    ssize_t w;

    if (fd < 0)
        return -1;
    w = write(fd, text, len);
    err = w < 0 ? errno : EIO;
    close(fd);
    if (w == (ssize_t)len)
        return 0;
    errno = err;
    return -1;
}

static int join_cgroups(const struct shim_spawn *s)
{
    int i;

    for (i = 0; i < s->njoin; i++)
        if (write(s->join[i], "0", 1) != 1)
            return -1;
    return 0;
}

static int lower_nofile(unsigned long n)
{
    struct rlimit r;

    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return -1;
    if (r.rlim_max == RLIM_INFINITY || r.rlim_max > n)
        r.rlim_max = n;
    r.rlim_cur = r.rlim_max;
    return setrlimit(RLIMIT_NOFILE, &r);
}

/* bwrap (0.8) can give a tmpfs a size but no inode limit: the child
 * mounts them itself, with every option, in a mount namespace of its own
 * (made private first: nothing propagates to the host's mounts) and hands
 * them over as descriptors; bwrap, started in that namespace, binds them
 * into the sandbox. As root this happens before the credentials change
 * (the options give the tmpfs to the sandbox's uid); otherwise in a user
 * namespace of the child's own too, its ids mapped to themselves, in
 * which bwrap's own user namespace then nests. */
static int private_tmpfs(const struct shim_spawn_child *c)
{
    const struct shim_spawn *s = c->s;
    int i, fd;

    if (c->root) {
        if (unshare(CLONE_NEWNS) != 0)
            return -1;
    } else if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 ||
               put("/proc/self/setgroups", "deny") != 0 ||
               put("/proc/self/uid_map", c->uid_map) != 0 ||
               put("/proc/self/gid_map", c->gid_map) != 0) {
        return -1;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", s->tmpfs_at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              TMPFS_AT_OPTS) != 0)
        return -1;
    for (i = 0; i < s->ntmpfs; i++) {
        const char *dir = s->tmpfs[i].dir;

        if (mkdir(dir, 0700) != 0 ||
            mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV,
                  s->tmpfs[i].opts) != 0)
            return -1;
        fd = open(dir, O_PATH | O_DIRECTORY); /* kept across exec */
        if (fd < 0)
            return -1;
        if (fd != s->tmpfs[i].fd) {
            if (dup2(fd, s->tmpfs[i].fd) < 0)
                return -1;
            close(fd);
        }
    }
    return 0;
}

int shim_spawn_child_main(void *arg)
{
    struct shim_spawn_child *c = arg;
    const struct shim_spawn *s = c->s;
    struct sigaction dfl;
    sigset_t none;
    int i;

    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (i = 1; i < NSIG; i++)
        if (i != SIGKILL && i != SIGSTOP)
            sigaction(i, &dfl, NULL); /* fails harmlessly for reserved ones */
    c->step = SHIM_SPAWN_JOIN;
    if (join_cgroups(s) != 0)
        goto fail;
    c->step = SHIM_SPAWN_OTHER;
    /* The first victim of any OOM (best effort). A vfork child's value is
     * its own: the kernel does not copy it to the host sharing its mm. */
    if (c->oom[0])
        put("/proc/self/oom_score_adj", c->oom);
    if (setsid() < 0)
        goto fail;
    for (i = 0; i < s->nfds; i++)
        if (dup2(s->fds[i], i) < 0)
            goto fail;
    if (syscall(SYS_close_range, (unsigned)s->nfds, ~0u, 0) != 0) {
        int fd;
        for (fd = s->nfds; fd < 65536; fd++)
            close(fd);
    }
    if (s->cwd && chdir(s->cwd) != 0)
        goto fail;
    c->step = SHIM_SPAWN_TMPFS;
    if (s->ntmpfs && c->root && private_tmpfs(c) != 0)
        goto fail;
    c->step = SHIM_SPAWN_OTHER;
    if (s->setid && (syscall(SYS_setgroups, 0, NULL) != 0 ||
                     syscall(SYS_setresgid, s->gid, s->gid, s->gid) != 0 ||
                     syscall(SYS_setresuid, s->uid, s->uid, s->uid) != 0))
        goto fail;
    if (s->nofile && lower_nofile(s->nofile) != 0)
        goto fail;
    c->step = SHIM_SPAWN_TMPFS;
    if (s->ntmpfs && !c->root && private_tmpfs(c) != 0)
        goto fail;
    c->step = SHIM_SPAWN_OTHER;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(s->path, s->argv, s->envp);
    if (s->ntmpfs) /* our mounts may hide it: try again without them */
        c->step = SHIM_SPAWN_TMPFS;
fail:
    c->err = errno ? errno : EINVAL;
    _exit(127);
}
