/* intercept.h - what happens when the program calls curl_easy_perform.
 * Decides ours or real (classify), and runs the loop for ours.
 *
 * The multi interface uses the two halves apart: the decision when a
 * handle is added, the answer in the transfer's loop (multi.c's engine,
 * a coroutine on the program's thread). */
#ifndef SHIM_INTERCEPT_H
#define SHIM_INTERCEPT_H

#include "curl/handles.h"
#include "system/real.h"

struct shim_sinkq;

struct shim_intercept_job;

/* curl_easy_perform(h): libcurl's when the transfer is not ours, else
 * run(api, h, job, t0), which owns the job (multi.c's engine, driven to
 * completion). */
typedef CURLcode (*shim_intercept_run_fn)(const struct shim_curl_api *api, CURL *h,
                                           struct shim_intercept_job *j, double t0);
CURLcode shim_intercept_perform(const struct shim_curl_api *api, CURL *h,
                                shim_intercept_run_fn run);

struct shim_intercept_job;

/* The program's thread, at the start of h's transfer (t0: when it
 * began, or < 0: now, read only once the transfer is known to be ours):
 * SHIM_DECIDE_OURS when codeshim answers it, *out holding what that takes
 * (shim_intercept_job_free); SHIM_DECIDE_PASS when it is not ours and
 * goes to libcurl. A body that must be read from the program's read
 * callback first is read only with may_read (inside a call that drives
 * the transfer, where libcurl would read it); without, the answer is
 * SHIM_DECIDE_LATER: ask again from such a call. */
#define SHIM_DECIDE_PASS 0
#define SHIM_DECIDE_OURS 1
#define SHIM_DECIDE_LATER 2
int shim_intercept_decide(CURL *h, double t0, int may_read, struct shim_intercept_job **out);
/* After a transfer decided SHIM_DECIDE_PASS has ended (the multi
 * interface: removed): the program's read callback set back on h when
 * codeshim's stood in for it. */
void shim_intercept_restore(CURL *h);
/* curl_easy_duphandle of a handle on which codeshim's read callback
 * stands: the duplicate gets the program's. */
void shim_intercept_duphandle(const struct shim_curl_api *api, CURL *from, CURL *to);
/* The program's thread: makes j independent of the program's memory and
 * handle, so its loop may answer it while the program goes on. The body
 * and header list are copied, the model calls will use a private
 * duplicate of h (its CURLOPT_SHARE dropped: a share without lock
 * callbacks must not be used from two threads), and the view keeps no
 * callbacks or error buffer (queued delivery needs none). With q, the
 * program's connection callbacks on the duplicate are called through q,
 * on the program's thread (relay.h); a MIME post is read now. 0, -ENOMEM, or
 * -ENOTSUP when libcurl cannot duplicate h. */
int shim_intercept_detach(const struct shim_curl_api *api, struct shim_intercept_job *j,
                          struct shim_sinkq *q);
/* 1 when detaching j reads the program's callbacks (a MIME post's parts,
 * which libcurl reads inside a call that drives the transfer): detach it
 * there. */
int shim_intercept_reads_program(const struct shim_intercept_job *j);
/* Answers j through sinks made on the calling thread: the loop, or
 * codeshim's own refusal, under the program's limits (xfer.h: its
 * deadline, and its progress callback unless detached). Returns the
 * transfer's CURLcode. */
CURLcode shim_intercept_answer(const struct shim_curl_api *api, struct shim_intercept_job *j);
void shim_intercept_job_free(struct shim_intercept_job *j);

#endif
