/* pool.c - see sessiond.h: the user's sandbox host keeps sandboxes forked
 * from its fork server ready, and lends each to one request.
 *
 * A take is answered with one byte first, b"S" carrying the sandbox's
 * control socket (SCM_RIGHTS) or b"N" carrying nothing, then a frame:
 * the library reads the byte with its descriptor, then the answer. The
 * host closes its own copy of the socket at once, so that the sandbox's
 * supervisor ends everything when the program closes the one it got (or
 * exits); the host notices that on the sandbox's life socket and closes
 * it here, which removes its cgroup.
 *
 * The pool is refilled by a thread of its own (all signals blocked: they
 * are the main loop's), so that a take is answered while a fork is under
 * way (a fork takes longer than a request that is lent a ready sandbox).
 * Only the ready list is shared, under mu; the lent ones are the main
 * thread's. The user's sandbox host forks no process of its own (no
 * session), so the thread is never copied into a fork. */
#include "base/frame.h"
#include "base/log.h"
#include "sandbox/sandbox.h"
#include "session/proto.h"
#include "sessiond.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* The refill thread: forks while the pool is short and the fork server
 * up; a fork that fails waits for the next sessiond_pool_fill. */
static void *filler(void *arg)
{
    struct sessiond_pool *p = arg;
    struct shim_sandbox *sb;

    pthread_mutex_lock(&mu);
    for (;;) {
        while (!p->stop && (p->warm != 1 || p->nready >= SESSIOND_POOL))
            pthread_cond_wait(&cv, &mu);
        if (p->stop)
            break;
        pthread_mutex_unlock(&mu);
        if (shim_sandbox_open_forked(p->cfg, &sb) < 0)
            sb = NULL;
        pthread_mutex_lock(&mu);
        if (!sb) {
            p->warm = 0; /* until the main loop looks again */
        } else if (p->nready < SESSIOND_POOL && !p->stop) {
            p->ready[p->nready++] = sb;
        } else { /* ending */
            pthread_mutex_unlock(&mu);
            shim_sandbox_close(sb);
            pthread_mutex_lock(&mu);
        }
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

void sessiond_pool_fill(struct sessiond_pool *p, int warm)
{
    sigset_t all, old;

    pthread_mutex_lock(&mu);
    p->warm = warm;
    if (warm == 1 && !p->running) {
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        p->running = pthread_create(&p->thread, NULL, filler, p) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (!p->running)
            LOG_WARN("sandbox host: no thread to refill the pool");
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

int sessiond_pool_ready(struct sessiond_pool *p)
{
    int n;

    pthread_mutex_lock(&mu);
    n = p->nready;
    pthread_mutex_unlock(&mu);
    return n;
}

int sessiond_pool_reap(struct sessiond_pool *p)
{
    int i = 0, n = 0;

    while (i < p->nlent) {
        struct pollfd pf = {.fd = shim_sandbox_life_fd(p->lent[i]), .events = POLLIN};
        if (pf.fd < 0 || poll(&pf, 1, 0) != 0) {
            shim_sandbox_close(p->lent[i]);
            p->lent[i] = p->lent[--p->nlent];
            n++;
        } else {
            i++;
        }
    }
    return n;
}

/* A ready sandbox, up: from the pool (one that died meanwhile is closed),
 * else forked now. */
static struct shim_sandbox *take(struct sessiond_pool *p, int warm, int *fd, long *pid)
{
    struct shim_sandbox *sb;

    for (;;) {
        pthread_mutex_lock(&mu);
        sb = p->nready > 0 ? p->ready[0] : NULL;
        if (sb)
            memmove(&p->ready[0], &p->ready[1], (size_t)--p->nready * sizeof(p->ready[0]));
        pthread_cond_broadcast(&cv); /* one to refill */
        pthread_mutex_unlock(&mu);
        if (!sb)
            break;
        if (shim_sandbox_lend(sb, fd, pid) == 0)
            return sb;
        shim_sandbox_close(sb);
    }
    if (warm == 1 && shim_sandbox_open_forked(p->cfg, &sb) == 0) {
        if (shim_sandbox_lend(sb, fd, pid) == 0)
            return sb;
        shim_sandbox_close(sb);
    }
    return NULL;
}

int sessiond_pool_lend(struct sessiond_pool *p, int warm, int *fd, long *pid)
{
    struct shim_sandbox *sb;

    *fd = -1;
    if (p->nlent >= SESSIOND_LENT)
        return -EUSERS;
    if (!(sb = take(p, warm, fd, pid)))
        return warm == 0 ? -EAGAIN : -ECHILD;
    p->lent[p->nlent++] = sb;
    p->lent_total++;
    return 0;
}

void sessiond_pool_take(struct sessiond_pool *p, int fd, int warm)
{
    cJSON *ans = cJSON_CreateObject();
    long pid = 0;
    int sfd = -1, rc = ans ? sessiond_pool_lend(p, warm, &sfd, &pid) : -ENOMEM;

    if (rc == 0 && shim_frame_send_byte(fd, 'S', sfd) == 0) {
        cJSON_AddTrueToObject(ans, "ok");
        cJSON_AddNumberToObject(ans, "pid", (double)pid);
    } else {
        if (rc == 0) /* never reached the program: it ends once the host's copy closes */
            rc = -EPIPE;
        if (ans) {
            cJSON_AddFalseToObject(ans, "ok");
            cJSON_AddStringToObject(ans, "error", rc == -EAGAIN ? "the fork server is starting"
                                                                : "no sandbox can be had");
        }
        shim_frame_send_byte(fd, 'N', -1);
    }
    if (sfd >= 0)
        close(sfd); /* the program's copy is the only one now */
    if (ans)
        shim_proto_send(fd, ans, 1000);
    cJSON_Delete(ans);
    close(fd);
}

void sessiond_pool_end(struct sessiond_pool *p)
{
    pthread_mutex_lock(&mu);
    p->stop = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (p->running)
        pthread_join(p->thread, NULL); /* a fork under way: bounded */
    p->running = 0;
    while (p->nready > 0)
        shim_sandbox_close(p->ready[--p->nready]);
    while (p->nlent > 0)
        shim_sandbox_close(p->lent[--p->nlent]);
}
