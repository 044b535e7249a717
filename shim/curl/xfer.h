/* xfer.h - the program's own limits on an intercepted easy transfer, as
 * libcurl keeps them: CURLOPT_TIMEOUT(_MS) over the whole transfer (every
 * upstream call and every execution together), the progress callback
 * (XFERINFOFUNCTION, else PROGRESSFUNCTION, when NOPROGRESS is 0) called
 * while it runs, and curl_easy_pause's receive pause.
 *
 * One struct shim_xfer lives on the stack of the call that answers the
 * transfer (shim_intercept_answer, in the transfer's loop: a coroutine of
 * multi.c on the program's thread, for curl_easy_perform as for a multi
 * handle);
 * everything below it finds it by the handle the answer uses
 * (shim_xfer_find; the thread's list holds the coroutines' too, each
 * under its own handle): the sink (delivery, pausing),
 * the upstream calls (their CURLOPT_TIMEOUT_MS is the time left, their
 * progress is this one), the executions (interrupted when it trips).
 * The loop's view of the transfer has no callback of the program's (the
 * deadline holds there, counted from curl_multi_add_handle or the start
 * of curl_easy_perform): multi.c calls the progress callback itself, and
 * pauses the replay (sink.h) on curl_easy_pause. shim_xfer_check calls a
 * progress callback only for a view that keeps one.
 *
 * Once tripped (the deadline passed, or the callback returned nonzero),
 * a transfer stays failed: rc and message are what the program gets, in
 * libcurl's words. */
#ifndef SHIM_XFER_H
#define SHIM_XFER_H

#include "curl/handles.h"

#include <curl/curl.h>

struct shim_sinkq;

struct shim_xfer {
    struct shim_xfer *up; /* the thread's enclosing transfer (nested perform) */
    CURL *h;
    struct shim_handle_limits lim;
    double t0;
    int in_cb;  /* the program's progress callback is running */
    /* what the program is told: bytes delivered of how many (0:
     * unknown), the request body read of its length */
    curl_off_t dltotal, dlnow, ultotal, ulnow;
    /* a multi loop's: the transfer's queue, stopped once the program
     * removed or cleaned it up, which stops the transfer at its next
     * check (an upstream call's progress, an execution's poll) */
    struct shim_sinkq *cancel;
    CURLcode rc;
    char message[CURL_ERROR_SIZE];
};

/* The multi engine, around each run of a loop: the transfers begun from
 * now on stop once q is stopped (NULL: none). */
void shim_xfer_cancel_by(struct shim_sinkq *q);

/* Starts watching h's transfer, begun at t0 (seconds, shim_clock_s), on
 * this thread, with the options v recorded. end must follow on the same
 * thread. */
void shim_xfer_begin(struct shim_xfer *x, CURL *h, const struct shim_handle_view *v,
                     double t0);
void shim_xfer_end(struct shim_xfer *x);
/* This thread's watched transfer of h, or NULL. */
struct shim_xfer *shim_xfer_find(CURL *h);
/* Milliseconds left before the deadline (at least 1), 0 when there is
 * none, -1 once it has passed. */
long shim_xfer_left_ms(const struct shim_xfer *x);
/* The check made at every step, and at least every ~100 ms while the
 * transfer waits (an upstream call, an execution, a pause): trips the
 * transfer past its deadline (CURLE_OPERATION_TIMEDOUT), else calls the
 * program's progress callback (not from inside itself), whose nonzero
 * answer trips it (CURLE_ABORTED_BY_CALLBACK). Returns x->rc. */
CURLcode shim_xfer_check(struct shim_xfer *x);
/* The program's progress callback of l (XFERINFOFUNCTION, else
 * PROGRESSFUNCTION; none with NOPROGRESS) told these numbers: 1 when it
 * asks to stop (nonzero, and not CURL_PROGRESSFUNC_CONTINUE), else 0. */
int shim_xfer_call_progress(const struct shim_handle_limits *l, curl_off_t dltotal,
                            curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);

#endif
