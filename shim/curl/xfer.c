/* xfer.c - see xfer.h. A thread-local list of the transfers this thread
 * answers: inside curl_easy_perform (a callback may perform another) and
 * the multi engine's loops (coroutines, interleaved: found by handle). */
#include "curl/xfer.h"

#include "base/clock.h"
#include "curl/sinkq.h"

#include <stdio.h>
#include <string.h>

static __thread struct shim_xfer *tls_top;
static __thread struct shim_sinkq *tls_cancel;

void shim_xfer_cancel_by(struct shim_sinkq *q)
{
    tls_cancel = q;
}

void shim_xfer_begin(struct shim_xfer *x, CURL *h, const struct shim_handle_view *v,
                     double t0)
{
    memset(x, 0, sizeof(*x));
    x->h = h;
    x->lim = v->lim;
    x->t0 = t0;
    x->ultotal = x->ulnow = (curl_off_t)v->body_len;
    x->cancel = tls_cancel;
    x->up = tls_top;
    tls_top = x;
}

void shim_xfer_end(struct shim_xfer *x)
{
    struct shim_xfer **pp;

    for (pp = &tls_top; *pp; pp = &(*pp)->up)
        if (*pp == x) {
            *pp = x->up;
            break;
        }
}

struct shim_xfer *shim_xfer_find(CURL *h)
{
    struct shim_xfer *x;

    for (x = tls_top; x; x = x->up)
        if (x->h == h)
            return x;
    return NULL;
}

static long elapsed_ms(const struct shim_xfer *x)
{
    double ms = (shim_clock_s() - x->t0) * 1000.0;
    return ms < 0 ? 0 : (long)ms;
}

long shim_xfer_left_ms(const struct shim_xfer *x)
{
    long e;

    if (!x || !x->lim.timeout_ms)
        return 0;
    e = elapsed_ms(x);
    return e >= x->lim.timeout_ms ? -1 : x->lim.timeout_ms - e;
}

static CURLcode trip(struct shim_xfer *x, CURLcode rc)
{
    long ms = elapsed_ms(x);

    x->rc = rc;
    if (rc == CURLE_ABORTED_BY_CALLBACK && x->cancel && shim_sinkq_stopped(x->cancel))
        snprintf(x->message, sizeof(x->message), "codeshim: the transfer was removed");
    else if (rc == CURLE_ABORTED_BY_CALLBACK)
        snprintf(x->message, sizeof(x->message), "Callback aborted");
    else if (x->dltotal > 0) /* libcurl's words (multi.c) */
        snprintf(x->message, sizeof(x->message),
                 "Operation timed out after %ld milliseconds with %lld out of %lld bytes "
                 "received", ms, (long long)x->dlnow, (long long)x->dltotal);
    else
        snprintf(x->message, sizeof(x->message),
                 "Operation timed out after %ld milliseconds with %lld bytes received", ms,
                 (long long)x->dlnow);
    return rc;
}

int shim_xfer_call_progress(const struct shim_handle_limits *l, curl_off_t dltotal,
                            curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    int r;

    if (l->noprogress || (!l->xferinfo && !l->progress))
        return 0;
    r = l->xferinfo ? l->xferinfo(l->progress_data, dltotal, dlnow, ultotal, ulnow)
                    : l->progress(l->progress_data, (double)dltotal, (double)dlnow,
                                  (double)ultotal, (double)ulnow);
    return r != 0 && r != CURL_PROGRESSFUNC_CONTINUE;
}

/* x's progress callback, not from inside itself; 1 when it asks to stop. */
static int call_progress(struct shim_xfer *x)
{
    int rc;

    if (x->in_cb)
        return 0;
    x->in_cb = 1;
    rc = shim_xfer_call_progress(&x->lim, x->dltotal, x->dlnow, x->ultotal, x->ulnow);
    x->in_cb = 0;
    return rc;
}

CURLcode shim_xfer_check(struct shim_xfer *x)
{
    if (!x || x->rc != CURLE_OK)
        return x ? x->rc : CURLE_OK;
    if (x->cancel && shim_sinkq_stopped(x->cancel))
        return trip(x, CURLE_ABORTED_BY_CALLBACK);
    if (shim_xfer_left_ms(x) < 0)
        return trip(x, CURLE_OPERATION_TIMEDOUT);
    if (call_progress(x))
        return trip(x, CURLE_ABORTED_BY_CALLBACK);
    return x->rc; /* the callback may have tripped it from inside (a nested check) */
}

