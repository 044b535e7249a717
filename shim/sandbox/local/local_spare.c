/* local_spare.c - the warm spare: the next local sandbox, started before
 * it is asked for, so that opening it costs about one execution instead
 * of a bubblewrap and two Python start-ups.
 *
 * - When: after an open in a process that opened a sandbox before (a
 *   program that makes one request pays for no spare), with
 *   CODESHIM_WARM_SPARE=1 (the default), never in the unsafe mode (its
 *   host directory would outlive the process); once the sandbox just
 *   opened has answered its first execution (or is closed without one),
 *   so that the spare's start does not slow that sandbox's own.
 * - How: spawn.c's long-lived thread starts it as a background job
 *   (shim_sandbox_spawn_later), so the open that asked waits for nothing;
 *   it starts exactly as a sandbox of that open would (the same params),
 *   and is a child of the same thread, so it dies with the host exactly
 *   like any sandbox (bwrap --die-with-parent, and the supervisor sees its
 *   socket hang up).
 * - At most one per process: none is asked for while one is starting or
 *   waiting.
 * - Taken by the next open whose params are equal, if it is healthy: its
 *   hello (if it came) is read, and nothing else may have arrived nor the
 *   socket hung up. Else it is killed and the open starts a sandbox as
 *   without a spare. A spare never ran code: every open gets a fresh
 *   sandbox, nothing of an earlier request can be in it. An open that
 *   comes while the spare is still starting waits for it (bounded): a
 *   sandbox of its own would take as long, queued on the same thread.
 * - Fork: a child forgets the parent's spare (closes its copies of the
 *   descriptors; the processes are the parent's) and its counters; a job
 *   that was starting one runs only in the parent.
 * - Dropped (other settings, not healthy) with an orderly stop, never a
 *   SIGKILL during bubblewrap's set-up (see shim_local_stop).
 * - At exit: a spare still starting is waited for (briefly) and every
 *   spare is stopped in order, rather than left to die with the process
 *   mid set-up, where bubblewrap can leave a stuck process behind. Only
 *   trylock and bounded waits: exit never hangs on codeshim. */
#include "base/clock.h"
#include "base/log.h"
#include "sandbox/local/local_int.h"
#include "sandbox/local/local_spare.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NONE, STARTING, READY };

#define WAIT_FOR_SPARE_S 30

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t settled = PTHREAD_COND_INITIALIZER; /* state left STARTING */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int state;
static struct shim_local_params want; /* STARTING: what to start */
static struct shim_local *spare;           /* READY: the spare */
static struct shim_local_spare_stats stats;

/* A child has no spare, no job, no history. No lock is taken before the
 * fork (a thread waiting for spawn.c's thread, which may be running the
 * job, could then deadlock the fork): any thread that held mu is gone. */
static void after_fork_child(void)
{
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&settled, NULL);
    if (spare)
        shim_local_forget(spare); /* its life socket too, if forked */
    spare = NULL;
    state = NONE;
    memset(&stats, 0, sizeof(stats));
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

static int same_params(const struct shim_local_params *a,
                       const struct shim_local_params *b)
{
    return shim_local_same_params(a, b);
}

/* Ends a spare (an orderly stop, as for any sandbox: see shim_local_stop
 * on why no SIGKILL). */
static void drop(struct shim_local *l)
{
    shim_local_stop(l, NULL, 0);
    free(l);
    pthread_mutex_lock(&mu);
    stats.spares_dropped++;
    pthread_mutex_unlock(&mu);
}

/* The background job, on spawn.c's thread. */
static void start_spare(void *unused)
{
    struct shim_local *l;
    int rc = -ENOMEM;

    (void)unused;
    pthread_mutex_lock(&mu);
    l = state == STARTING ? shim_local_new(&want) : NULL;
    pthread_mutex_unlock(&mu);
    if (l)
        rc = shim_local_start(l);
    pthread_mutex_lock(&mu);
    if (rc == 0 && state == STARTING) {
        spare = l;
        state = READY;
        stats.spares_started++;
        l = NULL;
    } else if (state == STARTING) {
        state = NONE;
    }
    pthread_cond_broadcast(&settled);
    pthread_mutex_unlock(&mu);
    if (l && rc == 0) {
        drop(l);
    } else if (l) {
        LOG_DEBUG("no warm spare sandbox: %s", l->why);
        free(l);
    }
}

/* Is the spare up (its hello read now if it came) or still starting, and
 * nothing else? */
static int healthy(struct shim_local *l)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN | POLLRDHUP};

    if (l->pid <= 0 || l->fd < 0)
        return 0;
    if (poll(&p, 1, 0) == 0)
        return 1; /* starting, or up and said so already */
    if (l->up || shim_local_wait_up(l) != 0)
        return 0;
    p.revents = 0;
    return poll(&p, 1, 0) == 0;
}

struct shim_local *shim_local_spare_take(const struct shim_local_params *p)
{
    struct shim_local *l = NULL;

    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    if (state == STARTING && same_params(&want, p)) {
        struct timespec dl;
        shim_clock_wall_deadline(&dl, WAIT_FOR_SPARE_S * 1000LL);
        while (state == STARTING && pthread_cond_timedwait(&settled, &mu, &dl) == 0)
            ;
    }
    if (state == READY) {
        l = spare;
        spare = NULL;
        state = NONE;
    }
    pthread_mutex_unlock(&mu);
    if (!l)
        return NULL;
    if (!same_params(&l->p, p) || !healthy(l)) {
        LOG_DEBUG("warm spare sandbox not used: %s",
                  same_params(&l->p, p) ? "it is not healthy"
                                        : "the settings changed");
        drop(l);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    stats.spares_taken++;
    pthread_mutex_unlock(&mu);
    LOG_DEBUG("sandbox opened from the warm spare (bwrap pid %ld)",
              (long)l->pid);
    return l;
}

int shim_local_spare_opened(const struct shim_local_params *p, int enabled)
{
    int due;

    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    stats.opened++;
    due = enabled && !p->unsafe && stats.opened >= 2;
    pthread_mutex_unlock(&mu);
    return due;
}

void shim_local_spare_prepare(const struct shim_local_params *p)
{
    int go = 0;

    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    if (state == NONE) {
        want = *p;
        state = STARTING;
        go = 1;
    }
    pthread_mutex_unlock(&mu);
    if (go && shim_sandbox_spawn_later(start_spare, NULL) != 0) {
        pthread_mutex_lock(&mu);
        if (state == STARTING)
            state = NONE;
        pthread_cond_broadcast(&settled);
        pthread_mutex_unlock(&mu);
    }
}

int shim_local_spare_forked(const struct shim_local_params *p)
{
    int ready;

    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mu);
    ready = state == READY && same_params(&spare->p, p) && spare->life >= 0;
    pthread_mutex_unlock(&mu);
    if (!ready)
        shim_local_spare_prepare(p);
    return ready;
}

void shim_local_spare_stats(struct shim_local_spare_stats *out)
{
    pthread_mutex_lock(&mu);
    *out = stats;
    out->spare_pid = state == READY && spare ? (long)spare->pid : 0;
    out->spare_starting = state == STARTING;
    pthread_mutex_unlock(&mu);
}

/* See "At exit" above. Runs at exit() and when main returns. */
__attribute__((destructor)) static void stop_spare_at_exit(void)
{
    struct shim_local *l = NULL;
    struct timespec dl;
    int i;

    for (i = 0; i < 100 && pthread_mutex_trylock(&mu) != 0; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL); /* another thread may hold it a moment */
    }
    if (i == 100)
        return;
    shim_clock_wall_deadline(&dl, 2000);
    while (state == STARTING && pthread_cond_timedwait(&settled, &mu, &dl) == 0)
        ;
    if (state == READY) {
        l = spare;
        spare = NULL;
        state = NONE;
    }
    pthread_mutex_unlock(&mu);
    if (l) {
        shim_local_stop(l, NULL, 0);
        free(l);
    }
}
