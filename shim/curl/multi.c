/* multi.c - see multi.h.
 *
 * One record (struct mstate) per program multi handle that has had an
 * intercepted transfer or a socket/timer callback set, in a registry under
 * one mutex; one struct xfer per intercepted easy handle in it, living
 * from add_handle to remove_handle (its CURLMsg must stay valid until
 * then). The registry mutex guards the lists only: it is never held while
 * a callback of the program or a real libcurl function runs.
 *
 * The engine. Each transfer's loop (intercept.h's answer: loop.c) runs
 * as a coroutine (coro.h) that only the program's calls driving the
 * multi handle resume, on the program's thread (serve). Where the loop
 * would block it yields, saying what it waits for (enum wait):
 *  - an HTTP call (a model call on the duplicate, a backend's own, such
 *    as e2b's execution stream): http.c's performer (set while the loop
 *    runs) adds the handle to the transfer's private multi handle (x->pm)
 *    and yields until it is done. serve drives x->pm with socket_action
 *    on its sockets that poll ready and on its timer, so libcurl runs the
 *    call, and every callback it makes (the program's connection
 *    callbacks through relay.h), inside the program's call on its stack;
 *  - a sandbox: every wait of base/frame.c to read (an execution's
 *    result, a sandbox coming up, the sandbox host's answer) goes
 *    through engine_wait (its waiter), which yields on the descriptor
 *    until it is readable or the time is over (a scripted model's delay
 *    waits there on nothing);
 *  - room in the transfer's queue (sinkq.h), which the replay empties.
 * The loop's code that libcurl calls back during a model call (its write
 * callback: a live stream relayed) runs on the program's stack inside
 * serve; what it queues may go over the queue's cap, and the call's
 * receiving is paused then until the replay took it (hold_call).
 * x->pm's sockets (by its CURLMOPT_SOCKETFUNCTION), the sandbox's
 * descriptor and the queue's wake fd stand in the program's waits: its
 * socket callback, fdset, wait/poll; their deadlines in its timeout and
 * timer callback. The program's own callbacks run only on its stack,
 * never on a coroutine's: the replay of what the loop delivered (sink.h,
 * which also pauses it) and those libcurl calls while serve drives x->pm.
 * Removal stops the queue (the loop's sinks and relay.h see it), drops
 * the model call in flight and resumes the coroutine until it is over:
 * every wait ends at once then, so the loop unwinds inside the removal,
 * its sandbox session left as after any stop. At most
 * CODESHIM_MAX_INFLIGHT loops run at once in the process; more wait
 * their turn, in order. */
#include "curl/multi.h"

#include "base/clock.h"
#include "base/frame.h"
#include "base/guard.h"
#include "base/log.h"
#include "curl/coro.h"
#include "curl/intercept.h"
#include "curl/sink.h"
#include "curl/sinkq.h"
#include "curl/xfer.h"
#include "system/http.h"
#include "system/config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes of answer waiting per transfer before its loop waits. */
#define QUEUE_CAP (1u << 20)
/* A loop's stack (mmap'd, touched pages only). */
#define STACK_SIZE (1u << 20)
/* Sockets of one transfer's private multi handle at once (libcurl uses
 * one or two a call). */
#define MAX_PFDS 8
/* How often a transfer waiting for a free slot looks again, when the
 * slot may be freed by another thread's multi handle. */
#define SLOT_TICK_MS 50

/* What a yielded loop waits for. */
enum wait { W_START, W_ROOM, W_CALL, W_FD };

struct pfd {
    curl_socket_t fd;
    int what;  /* CURL_POLL_* x->pm asks for */
    int told;  /* ...as the program's socket callback was told */
    void *socketp;
};

struct mstate;

struct xfer {
    struct xfer *next;
    struct mstate *st;
    CURL *easy;
    struct shim_sinkq *q;       /* NULL once done */
    int fd;                     /* the queue's wake fd while q is set */
    struct shim_handle_view pv; /* the program's callbacks, for replay */
    struct shim_sink out;       /* the replay into them */
    int reported;               /* fd handed to the socket callback */
    void *socketp;              /* curl_multi_assign's pointer for fd */
    int done, unread;           /* CURLMsg made / not yet read */
    int gone;                   /* easy cleaned up from a callback */
    int orphan;                 /* forked: its loop is the parent's */
    /* not decided yet: its body is read from the program's read callback
     * inside the next call that drives the multi handle (resolve); or
     * decided (ij) but its MIME post still to read there */
    int pending;
    struct shim_intercept_job *ij;
    double t0;                  /* when it was added */
    unsigned long seq;          /* completion order, for info_read */
    CURLMsg msg;
    /* the engine */
    const struct shim_curl_api *api; /* the program's libcurl */
    struct shim_intercept_job *job; /* detached: what the loop answers */
    struct shim_coro *co;       /* the loop, from its start to its end */
    unsigned long order;        /* when it was added, for its turn */
    int queued;                 /* waits for a slot */
    int stop;                   /* every wait ends at once */
    int guard;                  /* the loop's guard depth (guard.h) */
    CURLcode result;
    enum wait wait;
    CURLM *pm;                  /* private: the model calls */
    int64_t pm_at;              /* its timer (-1: none) */
    struct pfd pfds[MAX_PFDS];
    int npfds;
    CURL *call;                 /* the duplicate in pm */
    int call_held;              /* ...its receiving paused: the queue is over its cap */
    int call_done;
    CURLcode call_rc;
    int wfd;                    /* W_FD: the descriptor (-1: a plain sleep) */
    int64_t wat;                /* ...until then */
    int wready;
    int wtold;                  /* the descriptor the socket callback was told (-1) */
    void *wsocketp;
};

struct mstate {
    struct mstate *next;
    CURLM *m;
    const struct shim_curl_api *api;
    curl_socket_callback sock_cb;
    void *sock_data;
    curl_multi_timer_callback timer_cb;
    void *timer_data;
    int kick;          /* our 0 ms timeout stands in the program */
    long real_ms;      /* libcurl's last timer request (-1: none) */
    int64_t real_at;   /* ...as a deadline */
    int real_called;   /* libcurl asked during the current call */
    int64_t given_at;  /* the program's timer from us (-1: none) */
    int busy;          /* the program's callbacks run */
    struct xfer *xfers;
    unsigned long seq;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mstate *reg;
static atomic_int nreg; /* lets easy cleanup skip the lock when unused */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* loops holding a slot, in the whole process; the order transfers came */
static atomic_int g_running;
static atomic_ulong arrivals;
/* the transfer whose loop this thread runs now */
static __thread struct xfer *tls_x;

/* ---- fork ---- */

static void prepare(void) { pthread_mutex_lock(&reg_mu); }
static void parent(void) { pthread_mutex_unlock(&reg_mu); }

/* The child must not resume the parent's loops: their sockets, sandbox
 * connections and handles are the parent's. They are left alone (leaked),
 * their queues too, and told to the program as failed. */
static void child(void)
{
    struct mstate *st;
    struct xfer *x;

    for (st = reg; st; st = st->next)
        for (x = st->xfers; x; x = x->next)
            if (!x->done)
                x->orphan = 1;
    atomic_store(&g_running, 0);
    pthread_mutex_init(&reg_mu, NULL);
}

static void register_atfork(void) { pthread_atfork(prepare, parent, child); }
/* ---- registry ---- */

static struct mstate *find(CURLM *m)
{
    struct mstate *st;

    if (atomic_load(&nreg) == 0)
        return NULL;
    pthread_mutex_lock(&reg_mu);
    for (st = reg; st && st->m != m; st = st->next)
        ;
    pthread_mutex_unlock(&reg_mu);
    return st;
}

static struct mstate *get_state(const struct shim_curl_api *api, CURLM *m)
{
    struct mstate *st = find(m);

    if (st)
        return st;
    pthread_once(&atfork_once, register_atfork);
    st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    st->m = m;
    st->api = api;
    st->real_ms = -1;
    st->given_at = -1;
    pthread_mutex_lock(&reg_mu);
    st->next = reg;
    reg = st;
    atomic_fetch_add(&nreg, 1);
    pthread_mutex_unlock(&reg_mu);
    return st;
}

static void unregister(struct mstate *st)
{
    struct mstate **pp;

    pthread_mutex_lock(&reg_mu);
    for (pp = &reg; *pp && *pp != st; pp = &(*pp)->next)
        ;
    if (*pp) {
        *pp = st->next;
        atomic_fetch_sub(&nreg, 1);
    }
    pthread_mutex_unlock(&reg_mu);
}

static struct xfer *xfer_of(struct mstate *st, CURL *e)
{
    struct xfer *x;

    if (!st)
        return NULL;
    for (x = st->xfers; x && (x->easy != e || x->gone); x = x->next)
        ;
    return x;
}

static void link_xfer(struct mstate *st, struct xfer *x)
{
    struct xfer **pp;

    pthread_mutex_lock(&reg_mu);
    for (pp = &st->xfers; *pp; pp = &(*pp)->next) /* keep the order added */
        ;
    *pp = x;
    pthread_mutex_unlock(&reg_mu);
}

static void unlink_xfer(struct mstate *st, struct xfer *x)
{
    struct xfer **pp;

    pthread_mutex_lock(&reg_mu);
    for (pp = &st->xfers; *pp && *pp != x; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = x->next;
    pthread_mutex_unlock(&reg_mu);
}

/* ---- the engine ---- */

#define REAL(call)                                                             \
    do {                                                                       \
        shim_guard_enter();                                                    \
        rc = (call);                                                           \
        shim_guard_leave();                                                    \
    } while (0)
/* The same, its result not needed. */
#define REAL_DO(call)                                                          \
    do {                                                                       \
        shim_guard_enter();                                                    \
        (void)(call);                                                          \
        shim_guard_leave();                                                    \
    } while (0)

static int64_t later(int64_t a, int64_t b) /* the sooner deadline; -1: none */
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* The program's socket callback about one of x's descriptors. */
static void tell_fd(struct mstate *st, struct xfer *x, curl_socket_t fd, int what, void *p)
{
    if (st->sock_cb)
        st->sock_cb(x->easy, fd, what, st->sock_data, p);
}

static int pfd_index(const struct xfer *x, curl_socket_t fd)
{
    int i;

    for (i = 0; i < x->npfds; i++)
        if (x->pfds[i].fd == fd)
            return i;
    return -1;
}

/* What x->pm asks of its sockets reaches the program's socket callback
 * at once, unless a loop runs (its add_handle): then after it yields. */
static void sync_pfds(struct mstate *st, struct xfer *x)
{
    int i;

    for (i = 0; i < x->npfds; i++)
        if (x->pfds[i].told != x->pfds[i].what) {
            x->pfds[i].told = x->pfds[i].what;
            tell_fd(st, x, x->pfds[i].fd, x->pfds[i].what, x->pfds[i].socketp);
        }
}

static int pm_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct xfer *x = userp;
    int i = pfd_index(x, s);

    (void)e, (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        if (i < 0)
            return 0;
        if (x->pfds[i].told && !shim_coro_self())
            tell_fd(x->st, x, s, CURL_POLL_REMOVE, x->pfds[i].socketp);
        if ((i = pfd_index(x, s)) >= 0) /* the callback may have changed them */
            x->pfds[i] = x->pfds[--x->npfds];
        return 0;
    }
    if (i < 0) {
        if (x->npfds == MAX_PFDS) {
            LOG_ERR("a model call wants more than %d sockets at once", MAX_PFDS);
            return -1;
        }
        i = x->npfds++;
        memset(&x->pfds[i], 0, sizeof(x->pfds[i]));
        x->pfds[i].fd = s;
    }
    x->pfds[i].what = what;
    if (!shim_coro_self())
        sync_pfds(x->st, x);
    return 0;
}

static int pm_timer(CURLM *m, long ms, void *userp)
{
    struct xfer *x = userp;

    (void)m;
    x->pm_at = ms < 0 ? -1 : shim_clock_ms() + ms;
    return 0;
}

/* The descriptor a loop waits on, told to (or taken off) the program's
 * socket callback. */
static void tell_wfd(struct mstate *st, struct xfer *x)
{
    if (x->wait == W_FD && x->wfd >= 0 && x->wtold < 0 && !x->stop) {
        x->wtold = x->wfd;
        x->wsocketp = NULL;
        tell_fd(st, x, x->wfd, CURL_POLL_IN, NULL);
    }
}

static void untell_wfd(struct mstate *st, struct xfer *x)
{
    if (x->wtold >= 0)
        tell_fd(st, x, x->wtold, CURL_POLL_REMOVE, x->wsocketp);
    x->wtold = -1;
}

/* ---- inside a loop (its coroutine) ---- */

/* http.c's performer while a loop runs (a model call on a duplicate, or
 * a backend's own call): the call runs in x->pm, driven by serve. */
static CURLcode engine_perform(CURL *h)
{
    struct xfer *x = tls_x;
    CURLMcode mc;

    if (!x || !shim_coro_self()) {
        LOG_ERR("a model call outside its transfer's loop");
        return CURLE_FAILED_INIT;
    }
    if (x->stop) /* unwinding: what is still called (an e2b session's context
                   * restart, bounded by its own timeouts) is waited for here */
        return x->api->easy_perform(h);
    mc = x->api->multi_add_handle(x->pm, h);
    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
    x->call = h;
    x->call_held = 0;
    x->call_done = 0;
    x->call_rc = CURLE_OK;
    while (!x->call_done) {
        x->wait = W_CALL;
        shim_coro_yield();
    }
    x->call = NULL;
    return x->call_rc;
}

/* base/frame.h's waiter while a loop runs: fd readable (1) or ms over
 * (0); fd -1 waits for the time alone. */
static int engine_wait(int fd, int ms)
{
    struct xfer *x = tls_x;
    struct pollfd p = {.fd = fd, .events = POLLIN};

    if (!x || !shim_coro_self())
        return poll(&p, 1, ms);
    if (x->stop) /* the stop predicate says so next; a plain wait goes on */
        return fd >= 0 ? poll(&p, 1, ms) : 0;
    x->wfd = fd;
    x->wat = shim_clock_ms() + ms;
    x->wready = 0;
    while (!x->stop && !x->wready && shim_clock_ms() < x->wat) {
        x->wait = W_FD;
        shim_coro_yield();
    }
    x->wfd = -1;
    return x->wready;
}

static void body(void *arg)
{
    struct xfer *x = arg;

    x->result = x->stop ? CURLE_ABORTED_BY_CALLBACK : shim_intercept_answer(x->api, x->job);
}

/* ---- around a loop, on the program's stack ---- */

/* Runs x's loop until it yields (0) or is over (1), with this thread's
 * state as the loop left it: its guard depth, the queue its sinks record
 * into, the transfer its limits stop, the waiter its sandbox uses. */
static int resume(struct xfer *x)
{
    int guard = shim_guard_depth, over;
    struct xfer *prev = tls_x;

    tls_x = x;
    shim_guard_depth = x->guard;
    shim_sink_queue_into(x->q);
    shim_xfer_cancel_by(x->q);
    shim_frame_set_waiter(engine_wait);
    shim_http_set_performer(engine_perform);
    x->wait = W_ROOM; /* a yield that says nothing: the queue's (sinkq.c) */
    over = shim_coro_resume(x->co);
    shim_http_set_performer(NULL);
    shim_frame_set_waiter(NULL);
    shim_xfer_cancel_by(NULL);
    shim_sink_queue_into(NULL);
    x->guard = shim_guard_depth;
    shim_guard_depth = guard;
    tls_x = prev;
    return over;
}

static int runnable(struct xfer *x)
{
    if (x->stop)
        return 1;
    switch (x->wait) {
    case W_START:
        return 1;
    case W_ROOM:
        return !shim_sinkq_full(x->q);
    case W_CALL:
        return x->call_done;
    case W_FD:
        return x->wready || shim_clock_ms() >= x->wat;
    }
    return 1;
}

/* Drives x->pm: its sockets that are ready, its timer once due; a model
 * call done ends x's wait. */
static void drive_pm(struct xfer *x)
{
    struct pollfd p[MAX_PFDS];
    CURLMsg *msg;
    int i, n = x->npfds, r, left;

    for (i = 0; i < n; i++) {
        p[i].fd = x->pfds[i].fd;
        p[i].events = (short)(((x->pfds[i].what & CURL_POLL_IN) ? POLLIN : 0) |
                              ((x->pfds[i].what & CURL_POLL_OUT) ? POLLOUT : 0));
        p[i].revents = 0;
    }
    if (n && poll(p, (nfds_t)n, 0) > 0)
        for (i = 0; i < n; i++) {
            int ev = ((p[i].revents & (POLLIN | POLLHUP)) ? CURL_CSELECT_IN : 0) |
                     ((p[i].revents & POLLOUT) ? CURL_CSELECT_OUT : 0) |
                     ((p[i].revents & (POLLERR | POLLNVAL)) ? CURL_CSELECT_ERR : 0);
            if (ev)
                REAL_DO(x->api->multi_socket_action(x->pm, p[i].fd, ev, &r));
        }
    if (x->pm_at >= 0 && x->pm_at <= shim_clock_ms()) {
        x->pm_at = -1;
        REAL_DO(x->api->multi_socket_action(x->pm, CURL_SOCKET_TIMEOUT, 0, &r));
    }
    for (;;) {
        shim_guard_enter();
        msg = x->api->multi_info_read(x->pm, &left);
        shim_guard_leave();
        if (!msg)
            break;
        if (msg->msg != CURLMSG_DONE || !x->call || msg->easy_handle != x->call)
            continue;
        x->call_rc = msg->data.result;
        REAL_DO(x->api->multi_remove_handle(x->pm, x->call));
        x->call_done = 1;
    }
}

/* Back-pressure on a model call whose stream the loop relays from
 * libcurl's write callback (outside its coroutine, which cannot wait
 * there): its receiving pauses while the transfer's queue is over its
 * cap, and goes on once the replay took it. */
static void hold_call(struct xfer *x)
{
    int over;

    if (!x->call || x->call_done) {
        x->call_held = 0;
        return;
    }
    over = shim_sinkq_over(x->q);
    if (over != x->call_held) {
        REAL_DO(x->api->easy_pause(x->call, over ? CURLPAUSE_RECV : CURLPAUSE_CONT));
        x->call_held = over;
    }
}

/* The model call in flight, dropped (removal). */
static void drop_call(struct xfer *x)
{

    if (!x->call || x->call_done)
        return;
    REAL_DO(x->api->multi_remove_handle(x->pm, x->call));
    x->call_rc = CURLE_ABORTED_BY_CALLBACK;
    x->call_done = 1;
}

/* x's loop is over: its private handle closed (the program's close-socket
 * callback runs for its connections while the transfer is still the
 * program's), its handles and stack freed, its end recorded. */
static void engine_end(struct mstate *st, struct xfer *x)
{
    int i;

    shim_coro_free(x->co);
    x->co = NULL;
    atomic_fetch_sub(&g_running, 1);
    untell_wfd(st, x);
    if (x->pm) {
        drop_call(x);
        REAL_DO(x->api->multi_cleanup(x->pm));
        for (i = 0; i < x->npfds; i++)
            if (x->pfds[i].told)
                tell_fd(st, x, x->pfds[i].fd, CURL_POLL_REMOVE, x->pfds[i].socketp);
        x->npfds = 0;
        x->pm = NULL;
    }
    shim_intercept_job_free(x->job);
    x->job = NULL;
    shim_sink_queue_end(x->q, x->result);
    shim_sinkq_unref(x->q); /* the loop's reference */
}

/* A transfer that fails before its loop runs: recorded like a loop's
 * failure, so the program learns it inside its next perform. */
static void fail_now(struct shim_sinkq *q, CURL *e, const struct shim_handle_view *v,
                     CURLcode rc, const char *msg)
{
    struct shim_sink s;

    shim_sink_queue_into(q);
    shim_sink_init(&s, e, v, shim_clock_s());
    shim_sink_fail(&s, rc, msg);
    shim_sink_queue_into(NULL);
    shim_sink_queue_end(q, rc);
}

/* The engine's share of freeing x that never ran (or could not start). */
static void unqueue(struct xfer *x)
{
    x->queued = 0;
    if (x->pm)
        REAL_DO(x->api->multi_cleanup(x->pm));
    x->pm = NULL;
    shim_intercept_job_free(x->job);
    x->job = NULL;
}

/* x's turn, when a slot is free and no transfer that came before it
 * waits in st (a transfer of another multi handle takes its own turns). */
static int try_start(struct mstate *st, struct xfer *x)
{
    const struct xfer *y;

    for (y = st->xfers; y && y != x; y = y->next)
        if (y->queued && !y->gone && !y->done && y->order < x->order)
            return 0;
    if (atomic_load(&g_running) >= shim_config()->max_inflight)
        return 0;
    if (shim_coro_new(STACK_SIZE, body, x, &x->co) < 0) {
        unqueue(x);
        fail_now(x->q, x->easy, &x->pv, CURLE_OUT_OF_MEMORY,
                 "codeshim: out of memory for this transfer's loop");
        return 0;
    }
    atomic_fetch_add(&g_running, 1);
    x->queued = 0;
    x->wait = W_START;
    shim_sinkq_ref(x->q);
    return 1;
}

/* Advances x's loop as far as it can go now. */
static void engine_step(struct mstate *st, struct xfer *x)
{
    int i;

    if (x->orphan || !x->co)
        return;
    for (i = 0; i < 4 && x->co; i++) {
        drive_pm(x);
        hold_call(x);
        if (x->wait == W_FD && x->wfd >= 0 && !x->wready) {
            struct pollfd p = {.fd = x->wfd, .events = POLLIN};
            x->wready = poll(&p, 1, 0) != 0;
        }
        if (!runnable(x))
            break;
        if (x->wready || x->stop)
            untell_wfd(st, x);
        if (resume(x)) {
            engine_end(st, x);
            return;
        }
        if (x->wtold >= 0 && (x->wait != W_FD || x->wfd != x->wtold))
            untell_wfd(st, x);
    }
    sync_pfds(st, x);
    tell_wfd(st, x);
}

/* Stops x's loop: resumed until it is over, every wait ending at once
 * (its queue was stopped first: its sinks and relay.h know). */
static void engine_stop(struct mstate *st, struct xfer *x)
{
    int n;

    if (x->orphan)
        return;
    if (x->queued)
        unqueue(x);
    if (!x->co)
        return;
    x->stop = 1;
    drop_call(x);
    untell_wfd(st, x);
    for (n = 0; n < 100000; n++)
        if (resume(x)) {
            engine_end(st, x);
            return;
        }
    LOG_ERR("a stopped transfer's loop did not end; its memory is left");
}

/* When x's loop must next be resumed (now, or a deadline; -1: never by
 * itself: a descriptor or the program says). */
static int64_t engine_at(struct xfer *x, int64_t now)
{
    int64_t at = -1;

    if (x->orphan || x->done || x->gone)
        return -1;
    if (x->queued)
        return atomic_load(&g_running) < shim_config()->max_inflight ? now : now + SLOT_TICK_MS;
    if (!x->co)
        return -1;
    if (runnable(x) && !(x->wait == W_FD && !x->stop && !x->wready))
        return now;
    if (x->wait == W_FD)
        at = x->wat;
    return later(at, x->pm_at);
}

static int64_t engines_at(const struct mstate *st)
{
    int64_t now = shim_clock_ms(), at = -1;
    struct xfer *x;

    for (x = st->xfers; x; x = x->next)
        at = later(at, engine_at(x, now));
    return at;
}

/* The descriptors x's loop waits on now, for fdset and wait/poll: n at
 * most 1 + MAX_PFDS; each with POLLIN/POLLOUT. */
static int engine_fds(const struct xfer *x, struct pollfd *p)
{
    int i, n = 0;

    if (!x->co || x->orphan)
        return 0;
    for (i = 0; i < x->npfds; i++) {
        p[n].fd = x->pfds[i].fd;
        p[n].events = (short)(((x->pfds[i].what & CURL_POLL_IN) ? POLLIN : 0) |
                              ((x->pfds[i].what & CURL_POLL_OUT) ? POLLOUT : 0));
        n++;
    }
    if (x->wait == W_FD && x->wfd >= 0) {
        p[n].fd = x->wfd;
        p[n].events = POLLIN;
        n++;
    }
    return n;
}

static void start_work(const struct shim_curl_api *api, struct xfer *x,
                       struct shim_intercept_job *ij)
{
    int err = shim_intercept_detach(api, ij, x->q);
    CURLMcode rc;

    if (err) {
        fail_now(x->q, x->easy, &x->pv, err == -ENOTSUP ? CURLE_FAILED_INIT : CURLE_OUT_OF_MEMORY,
                 err == -ENOTSUP ? "codeshim: libcurl could not copy this handle for the "
                                   "model call; the request was not sent"
                                 : "codeshim: out of memory");
        shim_intercept_job_free(ij);
        return;
    }
    x->pm = api->multi_init ? api->multi_init() : NULL;
    if (!x->pm) {
        shim_intercept_job_free(ij);
        fail_now(x->q, x->easy, &x->pv, CURLE_OUT_OF_MEMORY,
                 "codeshim: cannot make a multi handle for this transfer's model calls");
        return;
    }
    REAL(api->multi_setopt(x->pm, CURLMOPT_SOCKETFUNCTION, pm_socket));
    REAL(api->multi_setopt(x->pm, CURLMOPT_SOCKETDATA, (void *)x));
    REAL(api->multi_setopt(x->pm, CURLMOPT_TIMERFUNCTION, pm_timer));
    REAL(api->multi_setopt(x->pm, CURLMOPT_TIMERDATA, (void *)x));
    (void)rc;
    x->api = api;
    x->job = ij;
    x->pm_at = -1;
    x->wfd = -1;
    x->wtold = -1;
    shim_sinkq_one_thread(x->q);
    x->order = atomic_fetch_add(&arrivals, 1);
    x->queued = 1;
}

/* ---- timers ----
 *
 * The program's timer (CURLMOPT_TIMERFUNCTION) is asked for the sooner
 * of libcurl's own deadline and, while an intercepted transfer wants its
 * progress callback, PROGRESS_MS from now: a program that drives its
 * multi handle by socket_action alone learns its timeouts only so, and
 * libcurl calls a transfer's progress callback about once a second when
 * nothing moves. given_at is the deadline the program holds from us. */

static int any_progress(const struct mstate *st);

/* How long a program waiting on its multi handle may go without a call
 * of a transfer's progress callback. */
#define PROGRESS_MS 1000

static int give_timer(struct mstate *st, int64_t at, int64_t now)
{
    st->given_at = at;
    return st->timer_cb(st->m, at < 0 ? -1 : at <= now ? 0 : (long)(at - now), st->timer_data);
}

/* Gives the program the timeout it should hold now, unless the one it
 * holds fires no later. The return value is its callback's (0: none). */
static int retime(struct mstate *st)
{
    int64_t now = shim_clock_ms(), want = st->real_ms >= 0 ? st->real_at : -1;

    if (!st->timer_cb || st->kick) /* the 0 ms kick stands */
        return 0;
    if (any_progress(st) && (want < 0 || want > now + PROGRESS_MS))
        want = now + PROGRESS_MS;
    want = later(want, engines_at(st));
    if (want >= 0 && st->given_at >= 0 && st->given_at <= want)
        return 0;
    if (want < 0 && st->given_at < 0)
        return 0;
    if (want < 0) { /* libcurl deleted its timer and nothing of ours waits */
        st->given_at = -1;
        return st->real_called ? st->timer_cb(st->m, -1, st->timer_data) : 0;
    }
    return give_timer(st, want, now);
}

/* libcurl's timer requests reach the program through here. */
static int trampoline(CURLM *m, long ms, void *clientp)
{
    struct mstate *st = clientp;

    (void)m;
    st->real_ms = ms;
    st->real_at = ms >= 0 ? shim_clock_ms() + ms : 0;
    st->real_called = 1;
    if (ms >= 0 && st->given_at >= 0 && st->given_at > st->real_at)
        st->given_at = -1; /* libcurl wants it sooner: given again below */
    return retime(st);
}

/* A new intercepted transfer: like libcurl's add_handle, ask the program
 * for a timeout now, whose socket_action(CURL_SOCKET_TIMEOUT) then learns
 * the transfer's socket. */
static void kick(struct mstate *st)
{
    if (!st->timer_cb || st->kick)
        return;
    st->kick = 1;
    give_timer(st, shim_clock_ms(), shim_clock_ms());
}

/* ---- delivery, on the program's thread ---- */

static void engine_stop(struct mstate *st, struct xfer *x);

static void tell_socket(struct mstate *st, struct xfer *x, int what)
{
    if (st->sock_cb)
        st->sock_cb(x->easy, x->fd, what, st->sock_data, x->socketp);
}

/* Lets go of x's queue: stopped, and dropped. An orphan's queue may be
 * locked by a thread the fork did not copy: only its descriptor is
 * closed, the rest is left alone. */
static void release(struct xfer *x)
{
    if (x->q && !x->orphan) {
        shim_sinkq_stop(x->q);
        shim_sinkq_unref(x->q);
    } else if (x->q && x->fd >= 0) {
        close(x->fd);
    }
    x->q = NULL;
    x->fd = -1;
}

static void finish(struct mstate *st, struct xfer *x, CURLcode rc)
{
    if (x->reported)
        tell_socket(st, x, CURL_POLL_REMOVE);
    x->reported = 0;
    if (x->q && !x->orphan) /* the program's side ended it: the loop stops */
        shim_sinkq_stop(x->q);
    engine_stop(st, x);
    release(x);
    x->done = 1;
    x->unread = 1;
    x->seq = ++st->seq;
    x->msg.msg = CURLMSG_DONE;
    x->msg.easy_handle = x->easy;
    x->msg.data.result = rc;
    shim_sink_drop_held(&x->out);
    shim_handle_view_free(&x->pv);
}

static int recv_paused(const struct xfer *x)
{
    return (x->out.paused & CURLPAUSE_RECV) != 0;
}

static int wants_progress(const struct xfer *x)
{
    const struct shim_handle_limits *l = &x->pv.lim;
    return !x->done && !x->gone && !l->noprogress && (l->xferinfo || l->progress);
}

/* The program's progress callback, at each drive of x as libcurl calls it,
 * told what was delivered of how much (0: unknown) and the request body
 * as sent; nonzero ends x with CURLE_ABORTED_BY_CALLBACK (its loop
 * stops, running code is interrupted). */
static void progress(struct mstate *st, struct xfer *x)
{
    const struct shim_handle_limits *l = &x->pv.lim;
    curl_off_t dn = x->out.info.size_download, ut = (curl_off_t)x->pv.body_len;
    curl_off_t dt = x->out.info.content_length > 0 ? x->out.info.content_length : 0;
    int stop;

    if (!wants_progress(x))
        return;
    stop = shim_xfer_call_progress(l, dt, dn, ut, ut);
    if (x->gone || x->done || !stop)
        return;
    shim_sink_fail(&x->out, CURLE_ABORTED_BY_CALLBACK, "Callback aborted");
    finish(st, x, CURLE_ABORTED_BY_CALLBACK);
}

/* 1 when a transfer of st wants its progress callback called. */
static int any_progress(const struct mstate *st)
{
    const struct xfer *x;

    for (x = st->xfers; x; x = x->next)
        if (wants_progress(x))
            return 1;
    return 0;
}

static void serve_one(struct mstate *st, struct xfer *x)
{
    CURLcode rc;

    if (st->sock_cb && !x->reported && x->fd >= 0 && !recv_paused(x)) {
        x->reported = 1;
        tell_socket(st, x, CURL_POLL_IN);
    }
    if (x->orphan) {
        shim_sink_fail(&x->out, CURLE_SEND_ERROR,
                       "codeshim: the process forked while this transfer ran; its loop "
                       "stayed with the parent");
        finish(st, x, CURLE_SEND_ERROR);
    } else if (x->q) {
        /* what it delivered first (unless the program paused it), else
         * its progress */
        if (!recv_paused(x) && (x->out.held || shim_sinkq_pending(x->q)) &&
            shim_sink_replay(&x->out, x->q, &rc)) {
            finish(st, x, rc);
            return;
        }
        if (x->gone)
            return;
        if (recv_paused(x) && x->reported) { /* as libcurl: no interest while paused */
            tell_socket(st, x, CURL_POLL_REMOVE);
            x->reported = 0;
        }
        if (recv_paused(x) || !shim_sinkq_pending(x->q))
            progress(st, x);
    }
}

/* x answered by codeshim: its queue, the program's callbacks to replay
 * into, and its loop (started in its turn); ij is consumed. 0 or -ENOMEM. */
static int make_ours(const struct shim_curl_api *api, struct xfer *x,
                     struct shim_intercept_job *ij)
{
    int paused = x->out.paused; /* paused before its body was read */

    if (shim_sinkq_new(QUEUE_CAP, &x->q) < 0 || shim_handles_view(x->easy, &x->pv) < 0) {
        if (x->q)
            shim_sinkq_unref(x->q);
        x->q = NULL;
        shim_intercept_job_free(ij);
        return -ENOMEM;
    }
    x->fd = shim_sinkq_fd(x->q);
    shim_sink_init(&x->out, x->easy, &x->pv, shim_clock_s());
    x->out.paused = paused;
    start_work(api, x, ij);
    LOG_INFO("intercepted a transfer added to a multi handle");
    return 0;
}

static void drop(struct mstate *st, struct xfer *x, int notify);

/* A pending transfer, inside a call that drives the multi handle: its
 * body read, and then codeshim's, or libcurl's after all (added to the
 * real multi handle, and no longer ours: dropped once serve ends). */
static void resolve(struct mstate *st, struct xfer *x)
{
    struct shim_intercept_job *ij = NULL;
    CURLMcode rc;

    x->pending = 0;
    if (x->ij) { /* decided: its MIME post is read now */
        ij = x->ij;
        x->ij = NULL;
        if (make_ours(st->api, x, ij) < 0)
            finish(st, x, CURLE_OUT_OF_MEMORY);
        return;
    }
    if (shim_intercept_decide(x->easy, x->t0, 1, &ij) == SHIM_DECIDE_OURS) {
        if (make_ours(st->api, x, ij) < 0)
            finish(st, x, CURLE_OUT_OF_MEMORY);
        return;
    }
    REAL(st->api->multi_add_handle(st->m, x->easy));
    if (rc != CURLM_OK) {
        shim_intercept_restore(x->easy);
        LOG_ERR("libcurl would not take a transfer codeshim passed on (%d)", (int)rc);
        finish(st, x, rc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT);
        return;
    }
    x->gone = 1;
}

/* Advances every transfer's loop, replays what they have waiting,
 * reports new sockets. */
static void serve(struct mstate *st)
{
    struct xfer *x, *next;

    st->busy = 1;
    for (x = st->xfers; x; x = x->next) {
        if (x->pending && !x->gone)
            resolve(st, x);
        if (x->done || x->gone)
            continue;
        if (x->queued && !x->orphan)
            try_start(st, x);
        engine_step(st, x);
        if (!x->done && !x->gone)
            serve_one(st, x);
    }
    st->busy = 0;
    for (x = st->xfers; x; x = next) { /* cleaned up from a callback */
        next = x->next;
        if (x->gone)
            drop(st, x, 0);
    }
}

static int active(const struct mstate *st)
{
    const struct xfer *x;
    int n = 0;

    for (x = st->xfers; x; x = x->next)
        n += !x->done && !x->gone;
    return n;
}

/* 1 when a loop waits to be resumed now. */
static int engine_due(const struct mstate *st)
{
    int64_t at = engines_at(st);
    return at >= 0 && at <= shim_clock_ms();
}

/* 1 when a perform/socket_action now would deliver something. */
static int news(const struct mstate *st)
{
    const struct xfer *x;

    for (x = st->xfers; x; x = x->next) {
        if (x->done || x->gone)
            continue;
        if (x->pending || x->orphan)
            return 1;
        if (!recv_paused(x) && ((st->sock_cb && !x->reported) || x->out.held ||
                                (x->q && shim_sinkq_pending(x->q))))
            return 1;
    }
    return engine_due(st);
}

/* Stops and frees x; notify: tell the socket callback, as libcurl's
 * remove_handle does. */
static void drop(struct mstate *st, struct xfer *x, int notify)
{
    if (x->reported && notify)
        tell_socket(st, x, CURL_POLL_REMOVE);
    if (x->q && !x->done)
        LOG_INFO("intercepted transfer stopped before its end");
    if (x->q && !x->orphan)
        shim_sinkq_stop(x->q);
    st->busy++;
    engine_stop(st, x);
    st->busy--;
    release(x);
    unlink_xfer(st, x);
    shim_sink_drop_held(&x->out);
    shim_handle_view_free(&x->pv);
    shim_intercept_job_free(x->ij);
    free(x);
}

/* ---- the wrappers' bodies ---- */


static CURLMcode add_ours(const struct shim_curl_api *api, CURLM *m, CURL *e, int d,
                          struct shim_intercept_job *ij, double t0);

CURLMcode shim_multi_add(const struct shim_curl_api *api, CURLM *m, CURL *e)
{
    struct mstate *st = find(m);
    struct shim_intercept_job *ij = NULL;
    CURLMcode rc;
    double t0 = shim_clock_s();
    int d;

    if (st && st->busy)
        return CURLM_RECURSIVE_API_CALL;
    if (!m)
        return CURLM_BAD_HANDLE;
    if (!e)
        return CURLM_BAD_EASY_HANDLE;
    if (shim_multi_owns(e))
        return CURLM_ADDED_ALREADY;
    d = shim_intercept_decide(e, t0, 0, &ij);
    if (d == SHIM_DECIDE_PASS) {
        REAL(api->multi_add_handle(m, e));
        return rc;
    }
    return add_ours(api, m, e, d, ij, t0);
}

/* Adds e, decided d (ours, or later) with ij, to the engine of m. */
static CURLMcode add_ours(const struct shim_curl_api *api, CURLM *m, CURL *e, int d,
                          struct shim_intercept_job *ij, double t0)
{
    struct mstate *st = get_state(api, m);
    struct xfer *x;

    x = st ? calloc(1, sizeof(*x)) : NULL;
    if (!x) {
        shim_intercept_job_free(ij);
        return CURLM_OUT_OF_MEMORY;
    }
    x->easy = e;
    x->st = st;
    x->fd = -1;
    x->t0 = t0;
    if (d == SHIM_DECIDE_LATER) {
        x->pending = 1;
    } else if (shim_intercept_reads_program(ij)) {
        x->pending = 1;
        x->ij = ij;
    } else if (make_ours(api, x, ij) < 0) {
        free(x);
        return CURLM_OUT_OF_MEMORY;
    }
    link_xfer(st, x);
    kick(st);
    return CURLM_OK;
}

CURLMcode shim_multi_remove(const struct shim_curl_api *api, CURLM *m, CURL *e)
{
    struct mstate *st = find(m);
    struct xfer *x = xfer_of(st, e);
    CURLMcode rc;

    if (!x) {
        REAL(api->multi_remove_handle(m, e));
        if (rc == CURLM_OK) /* a body codeshim read and gave back */
            shim_intercept_restore(e);
        return rc;
    }
    if (st->busy)
        return CURLM_RECURSIVE_API_CALL;
    drop(st, x, 1);
    retime(st); /* a transfer waiting for its turn may start now */
    return CURLM_OK;
}

CURLcode shim_multi_run_easy(const struct shim_curl_api *api, CURL *h,
                             struct shim_intercept_job *ij, double t0)
{
    CURLM *m = api->multi_init ? api->multi_init() : NULL;
    CURLcode rc = CURLE_OK;
    CURLMsg *msg;
    int running = 1, done = 0;

    if (!m || add_ours(api, m, h, SHIM_DECIDE_OURS, ij, t0) != CURLM_OK) {
        if (m)
            api->multi_cleanup(m);
        return CURLE_OUT_OF_MEMORY; /* (add_ours freed ij) */
    }
    while (!done) {
        long ms = 1000;
        if (shim_multi_perform(api, m, &running) != CURLM_OK) {
            rc = CURLE_FAILED_INIT;
            break;
        }
        while ((msg = shim_multi_info_read(api, m, NULL)) != NULL)
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) {
                rc = msg->data.result;
                done = 1;
            }
        if (done || !running)
            break;
        if (shim_multi_timeout(api, m, &ms) == CURLM_OK && ms == 0)
            continue;
        shim_multi_wait(api, m, NULL, 0, ms < 0 || ms > 1000 ? 1000 : (int)ms, NULL, 1);
    }
    if (!done && rc == CURLE_OK)
        rc = CURLE_FAILED_INIT;
    shim_multi_remove(api, m, h);
    shim_multi_cleanup(api, m);
    return rc;
}

CURLMcode shim_multi_perform(const struct shim_curl_api *api, CURLM *m, int *running)
{
    struct mstate *st = find(m);
    CURLMcode rc;
    int r = 0;

    if (st && st->busy)
        return CURLM_RECURSIVE_API_CALL;
    if (st)
        serve(st);
    REAL(api->multi_perform(m, &r));
    if (running)
        *running = r + (st ? active(st) : 0);
    return rc;
}

CURLMcode shim_multi_socket_all(const struct shim_curl_api *api, CURLM *m, int *running)
{
    struct mstate *st = find(m);
    CURLMcode rc;
    int r = 0;

    if (!api->multi_socket_all)
        return CURLM_INTERNAL_ERROR;
    if (st && st->busy)
        return CURLM_RECURSIVE_API_CALL;
    if (st)
        serve(st);
    REAL(api->multi_socket_all(m, &r));
    if (running)
        *running = r + (st ? active(st) : 0);
    return rc;
}

CURLMcode shim_multi_socket_action(const struct shim_curl_api *api, CURLM *m,
                                   curl_socket_t s, int ev, int *running)
{
    struct mstate *st = find(m);
    CURLMcode rc;
    int r = 0;

    if (!st) {
        REAL(api->multi_socket_action(m, s, ev, running));
        return rc;
    }
    if (st->busy)
        return CURLM_RECURSIVE_API_CALL;
    if (s == CURL_SOCKET_TIMEOUT && (st->kick || (st->given_at >= 0 &&
                                                  st->given_at <= shim_clock_ms() + 1))) {
        st->kick = 0; /* the program's timer fired */
        st->given_at = -1;
    }
    serve(st);
    /* libcurl ignores a socket it does not know (one of ours) and only
     * runs its expired timers: the call is what gives its running count */
    st->real_called = 0;
    REAL(api->multi_socket_action(m, s, ev, &r));
    retime(st);
    if (running)
        *running = r + active(st);
    return rc;
}

CURLMcode shim_multi_wait(const struct shim_curl_api *api, CURLM *m, struct curl_waitfd *extra,
                          unsigned int n, int timeout_ms, int *ret, int poll)
{
    CURLMcode (*fn)(CURLM *, struct curl_waitfd *, unsigned int, int, int *) =
        poll ? api->multi_poll : api->multi_wait;
    struct mstate *st = find(m);
    struct curl_waitfd *all;
    struct xfer *x;
    unsigned int k, total;
    CURLMcode rc;
    int ready, got = 0;
    int64_t at;

    if (!fn)
        return CURLM_INTERNAL_ERROR;
    if (!st || !active(st)) {
        REAL(fn(m, extra, n, timeout_ms, ret));
        return rc;
    }
    if (st->busy)
        return CURLM_RECURSIVE_API_CALL;
    ready = news(st);
    total = n + (unsigned int)active(st) * (2 + MAX_PFDS);
    all = calloc(total, sizeof(*all));
    if (!all)
        return CURLM_OUT_OF_MEMORY;
    for (k = 0; k < n; k++)
        all[k] = extra[k];
    for (x = st->xfers; x && k < total; x = x->next) {
        struct pollfd p[1 + MAX_PFDS];
        int i, np;

        if (x->done || x->gone)
            continue;
        if (x->fd >= 0 && !recv_paused(x)) {
            all[k].fd = x->fd;
            all[k].events = CURL_WAIT_POLLIN;
            k++;
        }
        np = engine_fds(x, p);
        for (i = 0; i < np && k < total; i++, k++) {
            all[k].fd = p[i].fd;
            all[k].events = (short)(((p[i].events & POLLIN) ? CURL_WAIT_POLLIN : 0) |
                                    ((p[i].events & POLLOUT) ? CURL_WAIT_POLLOUT : 0));
        }
    }
    if (!ready && any_progress(st) && (timeout_ms < 0 || timeout_ms > PROGRESS_MS))
        timeout_ms = PROGRESS_MS;
    if (!ready && (at = engines_at(st)) >= 0) {
        int64_t left = at - shim_clock_ms();
        if (left < 0)
            left = 0;
        if (timeout_ms < 0 || left < timeout_ms)
            timeout_ms = (int)left;
    }
    REAL(fn(m, all, k, ready ? 0 : timeout_ms, &got));
    for (k = 0; k < n; k++)
        extra[k].revents = all[k].revents;
    free(all);
    if (ret)
        *ret = ready && got == 0 ? 1 : got;
    return rc;
}

CURLMcode shim_multi_fdset(const struct shim_curl_api *api, CURLM *m, fd_set *r, fd_set *w,
                           fd_set *xs, int *max_fd)
{
    struct mstate *st = find(m);
    struct xfer *x;
    CURLMcode rc;

    REAL(api->multi_fdset(m, r, w, xs, max_fd));
    if (rc != CURLM_OK || !st || !r)
        return rc;
    for (x = st->xfers; x; x = x->next) {
        struct pollfd p[1 + MAX_PFDS];
        int i, np;

        if (x->done || x->gone)
            continue;
        if (x->fd >= 0 && x->fd < FD_SETSIZE && !recv_paused(x)) {
            FD_SET(x->fd, r);
            if (max_fd && *max_fd < x->fd)
                *max_fd = x->fd;
        }
        np = engine_fds(x, p);
        for (i = 0; i < np; i++) {
            if (p[i].fd < 0 || p[i].fd >= FD_SETSIZE)
                continue;
            if (p[i].events & POLLIN)
                FD_SET(p[i].fd, r);
            if ((p[i].events & POLLOUT) && w)
                FD_SET(p[i].fd, w);
            if (max_fd && *max_fd < p[i].fd)
                *max_fd = p[i].fd;
        }
    }
    return rc;
}

CURLMcode shim_multi_timeout(const struct shim_curl_api *api, CURLM *m, long *ms)
{
    struct mstate *st = find(m);
    CURLMcode rc;
    int64_t at;

    REAL(api->multi_timeout(m, ms));
    if (rc != CURLM_OK || !ms || !st)
        return rc;
    if (news(st)) {
        *ms = 0;
        return rc;
    }
    if (any_progress(st) && (*ms < 0 || *ms > PROGRESS_MS))
        *ms = PROGRESS_MS;
    if ((at = engines_at(st)) >= 0) {
        int64_t left = at - shim_clock_ms();
        if (left < 0)
            left = 0;
        if (*ms < 0 || left < *ms)
            *ms = (long)left;
    }
    return rc;
}

CURLMsg *shim_multi_info_read(const struct shim_curl_api *api, CURLM *m, int *left)
{
    struct mstate *st = find(m);
    struct xfer *x, *best = NULL;
    CURLMsg *msg;
    int q = 0, ours = 0;

    shim_guard_enter();
    msg = api->multi_info_read(m, &q);
    shim_guard_leave();
    if (!st) {
        if (left)
            *left = q;
        return msg;
    }
    for (x = st->xfers; x; x = x->next)
        if (x->unread && !x->gone) {
            ours++;
            if (!best || x->seq < best->seq)
                best = x;
        }
    if (!msg && best) {
        best->unread = 0;
        msg = &best->msg;
        ours--;
    }
    if (left)
        *left = q + ours;
    return msg;
}

CURLMcode shim_multi_setopt(const struct shim_curl_api *api, CURLM *m, CURLMoption opt,
                            union shim_optval v)
{
    struct mstate *st = NULL;
    CURLMcode rc;

    if (opt == CURLMOPT_SOCKETFUNCTION || opt == CURLMOPT_SOCKETDATA ||
        opt == CURLMOPT_TIMERFUNCTION || opt == CURLMOPT_TIMERDATA) {
        st = get_state(api, m);
        if (!st)
            return CURLM_OUT_OF_MEMORY;
    }
    switch (opt) {
    case CURLMOPT_SOCKETFUNCTION:
        st->sock_cb = (curl_socket_callback)v.fn;
        break;
    case CURLMOPT_SOCKETDATA:
        st->sock_data = v.p;
        break;
    case CURLMOPT_TIMERFUNCTION:
        st->timer_cb = (curl_multi_timer_callback)v.fn;
        REAL(api->multi_setopt(m, CURLMOPT_TIMERDATA, (void *)st));
        if (rc == CURLM_OK)
            REAL(api->multi_setopt(m, CURLMOPT_TIMERFUNCTION,
                                   st->timer_cb ? trampoline : (curl_multi_timer_callback)NULL));
        return rc;
    case CURLMOPT_TIMERDATA:
        st->timer_data = v.p;
        REAL(api->multi_setopt(m, CURLMOPT_TIMERDATA, (void *)st));
        return rc;
    default:
        break;
    }
    if (opt < CURLOPTTYPE_OBJECTPOINT)
        REAL(api->multi_setopt(m, opt, v.l));
    else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
        REAL(api->multi_setopt(m, opt, v.p));
    else if (opt < CURLOPTTYPE_OFF_T)
        REAL(api->multi_setopt(m, opt, v.fn));
    else
        REAL(api->multi_setopt(m, opt, v.off));
    return rc;
}

CURLMcode shim_multi_assign(const struct shim_curl_api *api, CURLM *m, curl_socket_t s,
                            void *p)
{
    struct mstate *st = find(m);
    struct xfer *x;
    CURLMcode rc;

    for (x = st ? st->xfers : NULL; x; x = x->next) {
        int i;

        if (x->done || x->gone)
            continue;
        if (x->fd == s) {
            x->socketp = p;
            return CURLM_OK;
        }
        if (x->wtold >= 0 && x->wtold == s) {
            x->wsocketp = p;
            return CURLM_OK;
        }
        if ((i = pfd_index(x, s)) >= 0) {
            x->pfds[i].socketp = p;
            return CURLM_OK;
        }
    }
    REAL(api->multi_assign(m, s, p));
    return rc;
}

CURLMcode shim_multi_cleanup(const struct shim_curl_api *api, CURLM *m)
{
    struct mstate *st = find(m);
    CURLMcode rc;

    if (st) {
        if (st->busy)
            return CURLM_RECURSIVE_API_CALL;
        while (st->xfers)
            drop(st, st->xfers, 0);
        unregister(st);
        /* libcurl must not call the trampoline with a freed record */
        if (st->timer_cb)
            REAL(api->multi_setopt(m, CURLMOPT_TIMERFUNCTION, (curl_multi_timer_callback)NULL));
        free(st);
    }
    REAL(api->multi_cleanup(m));
    return rc;
}

/* The multi state and transfer of e, looked up under the lock. */
static struct xfer *owner(CURL *e, struct mstate **stp)
{
    struct mstate *st;
    struct xfer *x = NULL;

    if (atomic_load(&nreg) == 0)
        return NULL;
    pthread_mutex_lock(&reg_mu);
    for (st = reg; st; st = st->next) {
        for (x = st->xfers; x && (x->easy != e || x->gone); x = x->next)
            ;
        if (x)
            break;
    }
    pthread_mutex_unlock(&reg_mu);
    *stp = st;
    return x;
}

int shim_multi_owns(CURL *e)
{
    struct mstate *st;

    return owner(e, &st) != NULL;
}

int shim_multi_pause(CURL *e, int bits)
{
    struct mstate *st;
    struct xfer *x = owner(e, &st);
    int was;

    if (!x)
        return 0;
    if (x->done)
        return 1;
    was = recv_paused(x);
    x->out.paused = bits & (CURLPAUSE_RECV | CURLPAUSE_SEND);
    if (!was && recv_paused(x) && x->reported) {
        tell_socket(st, x, CURL_POLL_REMOVE);
        x->reported = 0;
    } else if (was && !recv_paused(x)) {
        kick(st); /* delivery goes on at the next drive */
    }
    return 1;
}

void shim_multi_forget_easy(CURL *e)
{
    struct mstate *st;
    struct xfer *x = owner(e, &st);

    if (!x)
        return;
    if (st->busy) { /* from inside a callback: freed once serve ends */
        if (x->q && !x->orphan)
            shim_sinkq_stop(x->q);
        x->gone = 1;
        return;
    }
    drop(st, x, 1);
}
