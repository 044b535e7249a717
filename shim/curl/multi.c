/* multi.c - see multi.h.
 *
 * One record (struct mstate) per program multi handle that has had an
 * intercepted transfer or a socket/timer callback set, in a registry under
 * one mutex; one struct xfer per intercepted easy handle in it, living
 * from add_handle to remove_handle (its CURLMsg must stay valid until
 * then). The registry mutex guards the lists only: it is never held while
 * a callback of the program or a real libcurl function runs. The worker
 * and the program's thread share nothing but the queue (sinkq.h) and the
 * job the worker owns. The program's callbacks run only here, on its
 * thread inside the calls that drive the multi handle: the replay of
 * what the worker delivered (sink.h, which also pauses it) and the
 * connection callbacks its model calls need (relay.h, served by serve()
 * through the same queue); removal stops the queue, which stops the
 * worker's model call and execution (xfer.h) and every relayed call. */
#include "curl/multi.h"

#include "base/clock.h"
#include "base/guard.h"
#include "base/log.h"
#include "curl/intercept.h"
#include "curl/pool.h"
#include "curl/sink.h"
#include "curl/sinkq.h"
#include "curl/xfer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes of answer waiting per transfer before its worker waits. */
#define QUEUE_CAP (1u << 20)

struct xfer {
    struct xfer *next;
    CURL *easy;
    struct shim_sinkq *q;       /* NULL once done */
    int fd;                     /* the queue's wake fd while q is set */
    struct shim_handle_view pv; /* the program's callbacks, for replay */
    struct shim_sink out;       /* the replay into them */
    int reported;               /* fd handed to the socket callback */
    void *socketp;              /* curl_multi_assign's pointer for fd */
    int done, unread;           /* CURLMsg made / not yet read */
    int gone;                   /* easy cleaned up from a callback */
    int orphan;                 /* forked: its worker is the parent's */
    /* not decided yet: its body is read from the program's read callback
     * inside the next call that drives the multi handle (resolve); or
     * decided (ij) but its MIME post still to read there */
    int pending;
    struct shim_intercept_job *ij;
    double t0;                  /* when it was added */
    unsigned long seq;          /* completion order, for info_read */
    CURLMsg msg;
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
    int busy;          /* replaying: the program's callbacks run */
    struct xfer *xfers;
    unsigned long seq;
};

/* The worker's half. */
struct work {
    struct shim_pool_job pj;
    const struct shim_curl_api *api;
    struct shim_intercept_job *ij;
    struct shim_sinkq *q;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mstate *reg;
static atomic_int nreg; /* lets easy cleanup skip the lock when unused */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* ---- fork ---- */

static void prepare(void) { pthread_mutex_lock(&reg_mu); }
static void parent(void) { pthread_mutex_unlock(&reg_mu); }

/* The child has none of the workers: what they were doing is lost there.
 * Their queues may be locked forever, so they are left alone (leaked). */
static void child(void)
{
    struct mstate *st;
    struct xfer *x;

    for (st = reg; st; st = st->next)
        for (x = st->xfers; x; x = x->next)
            if (!x->done)
                x->orphan = 1;
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

/* ---- the worker ---- */

static void work_run(struct shim_pool_job *pj)
{
    struct work *w = (struct work *)pj;
    CURLcode rc = CURLE_ABORTED_BY_CALLBACK;

    if (!shim_sinkq_stopped(w->q)) { /* removed while it waited: no call */
        shim_sink_queue_into(w->q);
        shim_xfer_cancel_by(w->q); /* removal stops its calls and executions */
        rc = shim_intercept_answer(w->api, w->ij);
        shim_xfer_cancel_by(NULL);
        shim_sink_queue_into(NULL);
    }
    /* its handles closed while the program's close-socket callback may
     * still be called through the queue, then the end */
    shim_intercept_job_free(w->ij);
    shim_sink_queue_end(w->q, rc);
    shim_sinkq_unref(w->q);
    free(w);
}

/* A transfer that fails before any worker: recorded like a worker's
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

static void start_work(const struct shim_curl_api *api, struct xfer *x,
                       struct shim_intercept_job *ij)
{
    struct work *w;
    int err = shim_intercept_detach(api, ij, x->q);

    if (err) {
        fail_now(x->q, x->easy, &x->pv, err == -ENOTSUP ? CURLE_FAILED_INIT : CURLE_OUT_OF_MEMORY,
                 err == -ENOTSUP ? "codeshim: libcurl could not copy this handle for the "
                                   "model call; the request was not sent"
                                 : "codeshim: out of memory");
        shim_intercept_job_free(ij);
        return;
    }
    w = calloc(1, sizeof(*w));
    if (w) {
        w->pj.run = work_run;
        w->api = api;
        w->ij = ij;
        w->q = x->q;
        shim_sinkq_ref(x->q);
        if (shim_pool_submit(&w->pj) == 0)
            return;
        shim_sinkq_unref(x->q);
        free(w);
    }
    shim_intercept_job_free(ij);
    fail_now(x->q, x->easy, &x->pv, CURLE_OUT_OF_MEMORY,
             "codeshim: cannot start a worker thread for this transfer");
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

static void tell_socket(struct mstate *st, struct xfer *x, int what)
{
    if (st->sock_cb)
        st->sock_cb(x->easy, x->fd, what, st->sock_data, x->socketp);
}

/* Lets go of x's queue: stopped (the worker learns it), and dropped. An
 * orphan's queue may be locked forever by a thread the fork did not copy:
 * only its descriptor is closed, the rest is left alone. */
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
 * as sent; nonzero ends x with CURLE_ABORTED_BY_CALLBACK (its worker
 * stops, running code is interrupted). */
static void progress(struct mstate *st, struct xfer *x)
{
    const struct shim_handle_limits *l = &x->pv.lim;
    curl_off_t dn = x->out.info.size_download, ut = (curl_off_t)x->pv.body_len;
    curl_off_t dt = x->out.info.content_length > 0 ? x->out.info.content_length : 0;
    int r;

    if (!wants_progress(x))
        return;
    r = l->xferinfo ? l->xferinfo(l->progress_data, dt, dn, ut, ut)
                    : l->progress(l->progress_data, (double)dt, (double)dn, (double)ut,
                                  (double)ut);
    if (x->gone || x->done || !r || r == CURL_PROGRESSFUNC_CONTINUE)
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
        /* what it delivered first (unless the program paused it), then
         * the callback its worker waits on, else its progress */
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
        if (!shim_sinkq_serve_call(x->q) && (recv_paused(x) || !shim_sinkq_pending(x->q)))
            progress(st, x);
    }
}

#define REAL(call)                                                             \
    do {                                                                       \
        shim_guard_enter();                                                    \
        rc = (call);                                                           \
        shim_guard_leave();                                                    \
    } while (0)

/* x answered by codeshim: its queue, the program's callbacks to replay
 * into, and its worker; ij is consumed. 0 or -ENOMEM. */
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

/* Replays what every transfer has waiting; reports new sockets. */
static void serve(struct mstate *st)
{
    struct xfer *x, *next;

    st->busy = 1;
    for (x = st->xfers; x; x = x->next) {
        if (x->pending && !x->gone)
            resolve(st, x);
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

/* 1 when a perform/socket_action now would deliver something. */
static int news(const struct mstate *st)
{
    const struct xfer *x;

    for (x = st->xfers; x; x = x->next) {
        if (x->done || x->gone)
            continue;
        if (x->pending || x->orphan)
            return 1;
        if (x->q && recv_paused(x) ? shim_sinkq_has_call(x->q)
                                   : (st->sock_cb && !x->reported) || x->out.held ||
                                         (x->q && shim_sinkq_pending(x->q)))
            return 1;
    }
    return 0;
}

/* Stops and frees x; notify: tell the socket callback, as libcurl's
 * remove_handle does. */
static void drop(struct mstate *st, struct xfer *x, int notify)
{
    if (x->reported && notify)
        tell_socket(st, x, CURL_POLL_REMOVE);
    if (x->q && !x->done)
        LOG_INFO("intercepted transfer stopped before its end");
    release(x);
    unlink_xfer(st, x);
    shim_sink_drop_held(&x->out);
    shim_handle_view_free(&x->pv);
    shim_intercept_job_free(x->ij);
    free(x);
}

/* ---- the wrappers' bodies ---- */


CURLMcode shim_multi_add(const struct shim_curl_api *api, CURLM *m, CURL *e)
{
    struct mstate *st = find(m);
    struct shim_intercept_job *ij = NULL;
    struct xfer *x;
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
    st = get_state(api, m);
    x = st ? calloc(1, sizeof(*x)) : NULL;
    if (!x) {
        shim_intercept_job_free(ij);
        return CURLM_OUT_OF_MEMORY;
    }
    x->easy = e;
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
    return CURLM_OK;
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

    if (!fn)
        return CURLM_INTERNAL_ERROR;
    if (!st || !active(st)) {
        REAL(fn(m, extra, n, timeout_ms, ret));
        return rc;
    }
    if (st->busy)
        return CURLM_RECURSIVE_API_CALL;
    ready = news(st);
    total = n + (unsigned int)active(st);
    all = calloc(total, sizeof(*all));
    if (!all)
        return CURLM_OUT_OF_MEMORY;
    for (k = 0; k < n; k++)
        all[k] = extra[k];
    for (x = st->xfers; x && k < total; x = x->next)
        if (!x->done && !x->gone && x->fd >= 0 && !recv_paused(x)) {
            all[k].fd = x->fd;
            all[k].events = CURL_WAIT_POLLIN;
            k++;
        }
    if (!ready && any_progress(st) && (timeout_ms < 0 || timeout_ms > PROGRESS_MS))
        timeout_ms = PROGRESS_MS;
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
    for (x = st->xfers; x; x = x->next)
        if (!x->done && !x->gone && x->fd >= 0 && x->fd < FD_SETSIZE && !recv_paused(x)) {
            FD_SET(x->fd, r);
            if (max_fd && *max_fd < x->fd)
                *max_fd = x->fd;
        }
    return rc;
}

CURLMcode shim_multi_timeout(const struct shim_curl_api *api, CURLM *m, long *ms)
{
    struct mstate *st = find(m);
    CURLMcode rc;

    REAL(api->multi_timeout(m, ms));
    if (rc == CURLM_OK && ms && st && news(st))
        *ms = 0;
    else if (rc == CURLM_OK && ms && st && any_progress(st) && (*ms < 0 || *ms > PROGRESS_MS))
        *ms = PROGRESS_MS;
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

    for (x = st ? st->xfers : NULL; x; x = x->next)
        if (!x->done && !x->gone && x->fd == s) {
            x->socketp = p;
            return CURLM_OK;
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
