/* local_proc.c - the local sandbox's processes: start (its cgroup, the
 * control socket, the stderr pipe, the descriptors 0-8 the sandbox gets,
 * the spawn through spawn.c's long-lived thread), the wait for the
 * supervisor's hello (and, when none comes, what went wrong, from the
 * sandbox's stderr), and the end: an orderly stop, SIGKILL when that
 * takes too long or nothing needs ending gently, the reaping of bwrap,
 * and the kill of anything left in its cgroup, which is then removed.
 * What is started is local_jail.c's; the reasons given are local_msg.c's.
 *
 * Each start gets a cgroup of its own (cgroup.c: the memory and task
 * limits for the sandbox as a whole) and, isolated, tmpfs that spawn.c
 * mounts with a file-count limit. Where either fails at the spawn (a
 * cgroup we made but may not join; a kernel or policy that gives our own
 * user namespace no mounts), it is said once and the start is made again
 * without it, as are all later ones of the process. */
#include "base/log.h"
#include "sandbox/local/local_int.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define START_S 30       /* the sandbox must be up within this */
#define STOP_MS 2000     /* orderly stop before SIGKILL */
#define BWRAP_TASKS 2    /* the cgroup's task limit: bwrap's own, beyond the
                            sandbox's (RLIMIT_NPROC counts those) */
/* Any OOM takes a sandbox process first; the worker raises itself to
 * 1000 (worker.py), so the supervisor is the sandbox's last. */
#define OOM_SCORE_ADJ 500

static int no_join;  /* joining our cgroups fails here; atomic */
static int no_tmpfs; /* spawn.c's tmpfs cannot be had here; atomic */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
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

static int start_once(struct shim_local *l, enum shim_spawn_step *failed)
{
    struct shim_spawn sp;
    void *mem = NULL;
    int fds[NFDS] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
    int sv[2] = {-1, -1}, ep[2] = {-1, -1}, wv[2] = {-1, -1};
    int rc, i;
    pid_t pid;

    l->why[0] = '\0';
    rc = shim_local_command(l, &sp, fds, &mem);
    if (rc)
        goto out;
    /* A socket, not a pipe: send(MSG_NOSIGNAL) means a dead supervisor can
     * never raise SIGPIPE in the host. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, wv) != 0 ||
        pipe2(ep, O_CLOEXEC) != 0) {
        rc = -errno;
        shim_local_fail(l, LF_NO_SOCKET, strerror(-rc));
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
            shim_local_fail(l, LF_NO_FDS, strerror(-rc));
            goto out;
        }
    }
    sp.fds = fds;
    sp.nfds = NFDS;
    sp.join = l->cg.join;
    sp.njoin = l->cg.njoin;
    sp.oom_score_adj = OOM_SCORE_ADJ;
    sp.failed = failed;
    rc = shim_sandbox_spawn(&sp, &pid);
    if (rc) {
        shim_local_fail(l, LF_SPAWN, strerror(-rc));
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
        shim_local_close_fd(&fds[i]);
    shim_local_close_fd(&wv[0]);
    shim_local_close_fd(&wv[1]);
    shim_local_close_fd(&sv[0]);
    shim_local_close_fd(&sv[1]);
    shim_local_close_fd(&ep[0]);
    shim_local_close_fd(&ep[1]);
    free(mem);
    return rc;
}

int shim_local_same_params(const struct shim_local_params *a,
                           const struct shim_local_params *b)
{
    return !strcmp(a->python, b->python) && !strcmp(a->bwrap, b->bwrap) &&
           !strcmp(a->tmpdir, b->tmpdir) && a->unsafe == b->unsafe &&
           a->timeout_s == b->timeout_s && a->output_cap == b->output_cap &&
           a->memory == b->memory && a->file_size == b->file_size &&
           a->disk == b->disk && a->procs == b->procs && a->cpu_s == b->cpu_s &&
           a->inodes == b->inodes && a->open_files == b->open_files &&
           a->fork_server == b->fork_server &&
           !strcmp(a->preload, b->preload);
}

/* Says once that what failed at the spawn is done without from now on. */
static void give_up(int *flag, const char *what, int rc)
{
    if (!__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        LOG_WARN("sandbox: %s (%s); started without", what, strerror(-rc));
}

struct shim_local *shim_local_new(const struct shim_local_params *p)
{
    struct shim_local *l = calloc(1, sizeof(*l));

    if (!l)
        return NULL;
    l->p = *p;
    l->pid = -1;
    l->fd = -1;
    l->errfd = -1;
    l->life = -1;
    shim_cgroup_init(&l->cg);
    return l;
}

void shim_local_forget(struct shim_local *l)
{
    shim_local_close_fd(&l->fd);
    shim_local_close_fd(&l->errfd);
    shim_local_close_fd(&l->life);
    shim_cgroup_init(&l->cg);
    free(l);
}

/* This start's cgroup (none left from before, normally). */
static void make_cgroup(struct shim_local *l)
{
    shim_cgroup_destroy(&l->cg);
    if (!l->zygote && !__atomic_load_n(&no_join, __ATOMIC_RELAXED))
        shim_cgroup_create(&l->cg, l->p.memory, l->p.procs + BWRAP_TASKS);
}

int shim_local_start_forked(struct shim_local *l)
{
    int rc;

    if (!l->p.fork)
        return -ENOTSUP;
    make_cgroup(l);
    rc = l->p.fork(l);
    shim_cgroup_joined(&l->cg);
    if (rc)
        shim_cgroup_destroy(&l->cg);
    return rc;
}

int shim_local_start(struct shim_local *l)
{
    enum shim_spawn_step failed = SHIM_SPAWN_OTHER;
    int rc, tries;

    for (tries = 0; tries < 3; tries++) {
        l->own_tmpfs = !l->p.unsafe && !l->zygote &&
                       !__atomic_load_n(&no_tmpfs, __ATOMIC_RELAXED);
        failed = SHIM_SPAWN_OTHER;
        make_cgroup(l);
        /* forked from the fork server if one is up, else the cold way */
        if (tries == 0 && l->p.fork && l->p.fork(l) == 0) {
            shim_cgroup_joined(&l->cg);
            return 0;
        }
        rc = start_once(l, &failed);
        shim_cgroup_joined(&l->cg);
        if (rc == 0)
            return 0;
        shim_cgroup_destroy(&l->cg);
        if (failed == SHIM_SPAWN_JOIN)
            give_up(&no_join, "cannot join the cgroup made for it", rc);
        else if (failed == SHIM_SPAWN_TMPFS && l->own_tmpfs)
            give_up(&no_tmpfs,
                    "could not start with tmpfs of its own (mounted with a "
                    "file-count limit in a namespace of its own): /mnt/data "
                    "and /tmp get bwrap's, with a size limit only",
                    rc);
        else
            break;
    }
    return rc;
}

/* What the sandbox wrote on its stderr before it was up: bwrap's reason. */
static void read_errors(struct shim_local *l, char *out, size_t outsz)
{
    size_t n = 0;
    int64_t end = shim_clock_ms() + 1000;

    out[0] = '\0';
    if (l->errfd < 0)
        return;
    while (n + 1 < outsz) {
        ssize_t r = read(l->errfd, out + n, outsz - 1 - n);
        if (r > 0) {
            n += (size_t)r;
        } else if (r == 0) {
            break;
        } else if (errno == EAGAIN && shim_clock_ms() < end) {
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

/* Waits up to ms for the end of a forked sandbox's life socket (its PID
 * namespace is gone); 1 once it ended. */
static int ended(int fd, int ms)
{
    int64_t end = shim_clock_ms() + ms;
    char b[64];

    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int64_t left = end - shim_clock_ms();
        ssize_t r;

        if (left <= 0)
            return 0;
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        r = read(fd, b, sizeof(b));
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    }
}

/* A sandbox forked from the fork server (local_zygote.c), its control
 * socket closed: the supervisor ends everything; if that takes too long,
 * b"K" on the life socket has the server's child kill its PID 1. */
static void stop_forked(struct shim_local *l)
{
    if (!ended(l->life, STOP_MS)) {
        if (send(l->life, "K", 1, MSG_NOSIGNAL) != 1 || !ended(l->life, STOP_MS))
            LOG_WARN("sandbox (pid %ld) did not end", (long)l->pid);
    }
    shim_local_close_fd(&l->life);
}

/* Ends the sandbox: closing the socket makes the supervisor kill every
 * process and exit (PID 1 gone, the kernel ends the namespace); bwrap then
 * exits. A sandbox still starting gets there too: its supervisor's hello
 * fails, and it exits. SIGKILL only if that takes too long
 * (--die-with-parent takes the rest down): never at once, because
 * bubblewrap's namespace child arms its own parent-death signal only after
 * a hand-shake with bwrap, and a bwrap killed before it leaves that child
 * waiting forever, outside any sandbox we know of. Returns bwrap's wait
 * status, or -1. */
int shim_local_stop(struct shim_local *l, char *err, size_t errsz)
{
    int st = -1, i;
    pid_t r = 0;

    shim_local_close_fd(&l->fd);
    if (l->lent) {
        l->lent = 0; /* the host ends it, off this process's path */
    } else if (l->life >= 0) {
        stop_forked(l); /* not our child: its life socket */
    } else if (l->pid > 0) {
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
    /* bwrap is gone, and with its PID 1 every process of the sandbox; the
     * cgroup kills whatever the namespace did not take down */
    shim_cgroup_destroy(&l->cg);
    if (err)
        read_errors(l, err, errsz);
    shim_local_close_fd(&l->errfd);
    l->pid = -1;
    l->up = 0;
    if (l->used)
        l->lost_all = 1;
    l->used = 0;
    return st;
}

/* Waits for the supervisor's hello; on failure, l->why says why. */
int shim_local_wait_up(struct shim_local *l)
{
    struct shim_buf b;
    char err[768];
    int python_failed;
    int rc = shim_local_recv_frame(l, &b, shim_clock_ms() + START_S * 1000);

    if (rc == 0 && b.len == 1 && b.data[0] == 'H') {
        shim_buf_free(&b);
        l->up = 1;
        return 0;
    }
    if (rc == 0)
        shim_buf_free(&b);
    /* bwrap is gone: all it said is here */
    shim_local_stop(l, err, sizeof(err));
    l->lost_all = 0;
    /* bwrap's own messages start with "bwrap:"; others come from the shell
     * or Python inside, once the isolation was up */
    python_failed = err[0] && (strncmp(err, "bwrap:", 6) != 0 ||
                               strstr(err, "execvp") != NULL);
    if (!err[0])
        snprintf(err, sizeof(err), "%s",
                 rc == -ETIMEDOUT ? "it did not start in time"
                                  : "it stopped before it was ready");
    shim_local_fail(l, l->p.unsafe || python_failed ? LF_PYTHON_FAILED
                                                    : LF_ISOLATION,
                    err);
    return rc ? rc : -EPROTO;
}
