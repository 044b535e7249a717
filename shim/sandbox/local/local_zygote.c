/* local_zygote.c - the fork server (zygote) of the local backend: one
 * pre-initialised Python per set of sandbox settings, in a bubblewrap
 * jail laid out like a sandbox, with the data libraries imported
 * (CODESHIM_PRELOAD_MODULES), that forks each new sandbox instead of a
 * bubblewrap and two Python start-ups (worker.py's _zygote does the
 * fork's side: namespaces, tmpfs, uid map, capabilities, seccomp).
 *
 * - Where: one per host process and settings (shim_local_params; at most
 *   ZYG_MAX), started only by shim_local_zygote_warm, which only
 *   codeshim-sessiond's sandbox host calls (sessiond/host.c); a program
 *   never starts one of its own: its sandboxes, and its sessions', are
 *   lent by the sandbox host, or start cold. Started on spawn.c's thread like any sandbox: it dies with the
 *   host process exactly as a sandbox does (bwrap --die-with-parent; its
 *   PID namespace holds every sandbox forked from it). Never shared
 *   between processes: programs and sessions get sandboxes forked here
 *   only through the host (lent, or shim_sandbox_open_forked).
 * - Until it said hello (its imports take about a second), starts go the
 *   cold way; a server that cannot start, or whose fork fails before the
 *   sandbox is set up, is not used again by this process, said once, and
 *   the sandbox starts cold.
 * - A fork: the host sends b"F" + the host uid (a fresh one for root
 *   hosts, as for cold sandboxes) with the sandbox's control socket, its
 *   stderr, a life socket and the cgroup.procs to join; the sandbox's
 *   PID 1 writes one byte on the life socket once it is set up, just
 *   before its seccomp filter and the supervisor: the host reads its pid
 *   there (SO_PASSCRED), then waits for the supervisor's hello as for any
 *   sandbox. The life socket ends when that PID namespace is gone.
 * - Stop: as for any sandbox the control socket is closed first (the
 *   supervisor ends everything); then, if its namespace is not gone in
 *   time, b"K" on the life socket has the server kill its PID 1. The
 *   server forks each sandbox's PID 1 itself, into a PID namespace made
 *   for it; in a user namespace of its own (ordinary users) it first
 *   becomes PID 1 of a PID namespace that namespace owns, without which
 *   it could make only one (worker.py's _own_pid_namespace says why).
 * - Privilege: the server keeps the capabilities of its namespaces (each
 *   fork drops them all). As root it is root in its jail, without a user
 *   namespace of its own, so that it can give each sandbox a fresh uid as
 *   cold starts do; as an ordinary user it is root of a user namespace of
 *   its own (bubblewrap then nests none, so a fork may unmount the
 *   server's tmpfs and /proc for its own); it never runs the code, and
 *   reads only the host's requests on its socket.
 * - Fork of the host: the child forgets the parent's servers (their
 *   sandboxes belong to the parent) and starts its own when it needs one. */
#include "base/frame.h"
#include "base/log.h"
#include "sandbox/local/local_int.h"
#include "sandbox/local/local_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define ZYG_MAX 4
#define FORK_WAIT_MS 10000 /* for the forked sandbox to be set up */
#define MAX_JOIN 4

enum { EMPTY, SPAWNING, STARTING, UP, FAILED };

struct zyg {
    int state;
    struct shim_local_params p;
    struct shim_local *l; /* the server: bwrap, its control socket */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static struct zyg zs[ZYG_MAX];
static int said; /* the first fallback was logged; atomic */
static struct shim_local_zygote_stats stats; /* under mu */

static void after_fork_child(void)
{
    int i;

    pthread_mutex_init(&mu, NULL);
    memset(&stats, 0, sizeof(stats));
    for (i = 0; i < ZYG_MAX; i++) {
        if (zs[i].l)
            shim_local_forget(zs[i].l);
        memset(&zs[i], 0, sizeof(zs[i]));
    }
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

static void fallback(const char *why)
{
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        LOG_WARN("sandbox: no fork server (%s); sandboxes start the cold "
                 "way", why);
    else
        LOG_DEBUG("sandbox: no fork server (%s)", why);
}

static void fail(struct zyg *z, const char *why)
{
    fallback(why);
    if (z->l) {
        shim_local_stop(z->l, NULL, 0);
        free(z->l);
    }
    z->l = NULL;
    z->state = FAILED;
    stats.failed++;
}

/* Starts the server for p in a free slot. Called with mu held, which it
 * drops during the spawn (it takes as long as a sandbox's start). The
 * slot is SPAWNING meanwhile. */
static void start_server(const struct shim_local_params *p)
{
    struct shim_local *l;
    struct zyg *z = NULL;
    int i, rc;

    for (i = 0; i < ZYG_MAX && !z; i++)
        if (zs[i].state == EMPTY)
            z = &zs[i];
    if (!z || !(l = shim_local_new(p)))
        return; /* as many settings as we keep servers for */
    l->zygote = 1;
    z->p = *p;
    z->l = NULL;
    z->state = SPAWNING;
    stats.servers_started++;
    pthread_mutex_unlock(&mu);
    rc = shim_local_start(l);
    pthread_mutex_lock(&mu);
    z->l = l;
    z->state = STARTING;
    if (rc != 0)
        fail(z, l->why);
}

/* The slot of p's server (there is at most one: a server is started
 * only when none is found, and one that failed stays), or NULL. Called
 * with mu held. */
static struct zyg *slot_of(const struct shim_local_params *p)
{
    int i;

    for (i = 0; i < ZYG_MAX; i++)
        if (zs[i].state != EMPTY && shim_local_same_params(&zs[i].p, p))
            return &zs[i];
    return NULL;
}

/* The server for p when it is up; else NULL (and, with start, it is
 * started if there is none). Called with mu held; it may drop it
 * meanwhile. */
static struct shim_local *server(const struct shim_local_params *p, int start)
{
    struct zyg *z = slot_of(p);
    struct pollfd pf;

    if (!z) {
        if (start)
            start_server(p);
        return NULL;
    }
    if (z->state == FAILED || z->state == SPAWNING)
        return NULL;
    pf.fd = z->l->fd;
    pf.events = POLLIN | POLLRDHUP;
    pf.revents = 0;
    if (z->state == STARTING) {
        if (poll(&pf, 1, 0) == 0)
            return NULL; /* still importing */
        if (shim_local_wait_up(z->l) != 0) {
            fail(z, z->l->why);
            return NULL;
        }
        z->state = UP;
        LOG_DEBUG("sandbox fork server up (bwrap pid %ld)", (long)z->l->pid);
        return z->l;
    }
    if (poll(&pf, 1, 0) != 0) { /* it says nothing after hello: gone */
        shim_local_stop(z->l, NULL, 0);
        free(z->l);
        z->l = NULL;
        z->state = EMPTY; /* started again at the next start */
        return NULL;
    }
    return z->l;
}

static int send_fork(int fd, uid_t uid, const int *fds, int nfds)
{
    char msg[32];
    union {
        char buf[CMSG_SPACE(sizeof(int) * (3 + MAX_JOIN))];
        struct cmsghdr align;
    } u;
    struct iovec iov;
    struct msghdr mh;
    struct cmsghdr *cm;
    int n = snprintf(msg + 4, sizeof(msg) - 4, "F%u", (unsigned)uid);
    int64_t end = shim_clock_ms() + 1000;

    msg[0] = msg[1] = msg[2] = 0;
    msg[3] = (char)n;
    iov.iov_base = msg;
    iov.iov_len = (size_t)n + 4;
    memset(&mh, 0, sizeof(mh));
    memset(&u, 0, sizeof(u));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        struct pollfd pf = {.fd = fd, .events = POLLOUT};

        if (w == (ssize_t)iov.iov_len)
            return 0;
        if (w >= 0)
            return -EPROTO; /* a part of it: the server is not to be trusted */
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        if (shim_clock_ms() >= end)
            return -ETIMEDOUT;
        poll(&pf, 1, 10);
    }
}

/* The set-up byte of the sandbox's PID 1 and, from its credentials, its
 * pid here. 0, -ECONNRESET (it failed: its reason is on its stderr) or
 * -ETIMEDOUT. */
static int recv_ready(int fd, pid_t *pid)
{
    int fds[1], n = 0, who = 0, rc;
    char b = 0;

    rc = shim_frame_recv_byte(fd, &b, fds, 1, &n, &who, FORK_WAIT_MS);
    if (n == 1)
        close(fds[0]); /* none is sent here */
    if (rc < 0)
        return rc == -ETIMEDOUT ? rc : -ECONNRESET;
    *pid = (pid_t)who;
    return b == 'P' && *pid > 0 ? 0 : -EPROTO;
}

/* What the forked sandbox said on its stderr before it failed. */
static void read_reason(int fd, char *out, size_t outsz)
{
    ssize_t n = read(fd, out, outsz - 1);
    size_t i;

    out[n > 0 ? n : 0] = '\0';
    for (i = 0; out[i]; i++)
        if ((unsigned char)out[i] < 0x20)
            out[i] = ' ';
}

int shim_local_zygote_fork(struct shim_local *l)
{
    struct shim_local *z;
    struct zyg *slot;
    int sv[2] = {-1, -1}, ep[2] = {-1, -1}, lv[2] = {-1, -1};
    int fds[3 + MAX_JOIN], nfds = 3, one = 1, rc, i;
    /* as an ordinary user: 0 of the server's user namespace, this user */
    uid_t uid = geteuid() == 0 ? shim_local_fresh_uid() : 0;
    pid_t pid = -1;
    char why[512];

    if (!l->p.fork_server || l->p.unsafe || l->zygote ||
        l->cg.njoin > MAX_JOIN)
        return -ENOTSUP;
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    z = server(&l->p, 0); /* none of a program's own: warm starts it */
    pthread_mutex_unlock(&mu);
    if (!z)
        return -EAGAIN;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, lv) != 0 ||
        pipe2(ep, O_CLOEXEC | O_NONBLOCK) != 0 ||
        setsockopt(lv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
        rc = -errno;
        goto out;
    }
    fds[0] = sv[1];
    fds[1] = ep[1];
    fds[2] = lv[1];
    for (i = 0; i < l->cg.njoin; i++)
        fds[nfds++] = l->cg.join[i];
    pthread_mutex_lock(&mu);
    z = server(&l->p, 0);
    rc = z ? send_fork(z->fd, uid, fds, nfds) : -EAGAIN;
    pthread_mutex_unlock(&mu);
    if (rc)
        goto out;
    shim_local_close_fd(&sv[1]);
    shim_local_close_fd(&ep[1]);
    shim_local_close_fd(&lv[1]);
    rc = recv_ready(lv[0], &pid);
    if (rc) {
        read_reason(ep[0], why, sizeof(why));
        pthread_mutex_lock(&mu);
        if ((slot = slot_of(&l->p)) != NULL && slot->state == UP)
            fail(slot, why[0] ? why : "a fork did not start");
        pthread_mutex_unlock(&mu);
        goto out;
    }
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0)
        LOG_WARN("sandbox: cannot make its channels non-blocking");
    l->fd = sv[0];
    l->errfd = ep[0];
    l->life = lv[0];
    l->pid = pid;
    l->up = 0;
    l->used = 0;
    sv[0] = ep[0] = lv[0] = -1;
    pthread_mutex_lock(&mu);
    stats.forks++;
    pthread_mutex_unlock(&mu);
    LOG_DEBUG("sandbox forked from the fork server (pid %ld)", (long)pid);
out:
    shim_local_close_fd(&sv[0]);
    shim_local_close_fd(&sv[1]);
    shim_local_close_fd(&ep[0]);
    shim_local_close_fd(&ep[1]);
    shim_local_close_fd(&lv[0]);
    shim_local_close_fd(&lv[1]);
    return rc;
}

int shim_local_zygote_warm(const struct shim_local_params *p)
{
    struct zyg *z;
    int rc;

    if (!p->fork_server || p->unsafe)
        return -ENOTSUP;
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    rc = server(p, 1) ? 1 : 0;
    if (!rc && (z = slot_of(p)) != NULL && z->state == FAILED)
        rc = -ENOTSUP;
    pthread_mutex_unlock(&mu);
    return rc;
}

void shim_local_zygote_stats(struct shim_local_zygote_stats *out)
{
    int i;

    pthread_mutex_lock(&mu);
    *out = stats;
    out->up = 0;
    out->server_pid = 0;
    for (i = 0; i < ZYG_MAX; i++) {
        if (zs[i].state == STARTING || zs[i].state == UP)
            server(&zs[i].p, 0); /* a hello that came is read now */
        if (zs[i].state == UP) {
            out->up++;
            if (!out->server_pid)
                out->server_pid = (long)zs[i].l->pid;
        }
    }
    pthread_mutex_unlock(&mu);
}

/* At exit: each server is stopped in order (it is not left to die with
 * the process mid set-up; see shim_local_stop). Only a trylock. */
__attribute__((destructor)) static void stop_servers_at_exit(void)
{
    int i;

    if (pthread_mutex_trylock(&mu) != 0)
        return;
    for (i = 0; i < ZYG_MAX; i++)
        if (zs[i].l) {
            shim_local_stop(zs[i].l, NULL, 0);
            free(zs[i].l);
            zs[i].l = NULL;
            zs[i].state = EMPTY;
        }
    pthread_mutex_unlock(&mu);
}
