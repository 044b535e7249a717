/* multi.h - intercepted transfers inside the program's multi handles.
 *
 * An easy handle codeshim answers (intercept.h decides when it is added)
 * is never given to the real multi handle. Its loop is a coroutine of
 * codeshim's engine (multi.c) that runs only inside the program's own
 * curl_multi_perform / curl_multi_socket_action calls, on its thread; its
 * model calls are transfers in a private multi handle driven from there,
 * its executions wait on the sandbox's descriptor, and it records the
 * answer into a queue (sink.h's queued mode) replayed to the program's
 * callbacks in the same calls. Those sockets and descriptors, and the
 * queue's wake fd, stand for the transfer's sockets: reported through
 * CURLMOPT_SOCKETFUNCTION (as libcurl reports its own), added to
 * curl_multi_wait/poll and curl_multi_fdset; their deadlines (a new
 * transfer's 0 ms, the private handle's timer, an execution's tick) go
 * through CURLMOPT_TIMERFUNCTION (which codeshim wraps so libcurl's own
 * timeouts are never lost) and curl_multi_timeout, which says 0 while
 * news wait. curl_multi_info_read merges its CURLMSG_DONE messages
 * with libcurl's, and running counts include them. Removing the handle,
 * cleaning it up, or cleaning up the multi handle stops the transfer:
 * nothing is delivered afterwards and its loop unwinds inside the call.
 *
 * Every function takes the real API of the caller's libcurl build and is
 * called by preload.c only outside the guard. Per multi handle, libcurl's
 * rule holds: one thread at a time. */
#ifndef SHIM_MULTI_H
#define SHIM_MULTI_H

#include "curl/handles.h"
#include "system/real.h"

#include <sys/select.h>

CURLMcode shim_multi_add(const struct shim_curl_api *api, CURLM *m, CURL *e);
CURLMcode shim_multi_remove(const struct shim_curl_api *api, CURLM *m, CURL *e);
CURLMcode shim_multi_perform(const struct shim_curl_api *api, CURLM *m, int *running);
/* also curl_multi_socket (ev 0) */
CURLMcode shim_multi_socket_action(const struct shim_curl_api *api, CURLM *m,
                                   curl_socket_t s, int ev, int *running);
CURLMcode shim_multi_socket_all(const struct shim_curl_api *api, CURLM *m, int *running);
/* curl_multi_wait (poll 0) and curl_multi_poll (poll 1) */
CURLMcode shim_multi_wait(const struct shim_curl_api *api, CURLM *m, struct curl_waitfd *extra,
                          unsigned int n, int timeout_ms, int *ret, int poll);
CURLMcode shim_multi_fdset(const struct shim_curl_api *api, CURLM *m, fd_set *r, fd_set *w,
                           fd_set *x, int *max_fd);
CURLMcode shim_multi_timeout(const struct shim_curl_api *api, CURLM *m, long *ms);
CURLMsg *shim_multi_info_read(const struct shim_curl_api *api, CURLM *m, int *left);
/* v holds the one argument, re-packed by the option's type */
CURLMcode shim_multi_setopt(const struct shim_curl_api *api, CURLM *m, CURLMoption opt,
                            union shim_optval v);
CURLMcode shim_multi_assign(const struct shim_curl_api *api, CURLM *m, curl_socket_t s,
                            void *p);
CURLMcode shim_multi_cleanup(const struct shim_curl_api *api, CURLM *m);
/* curl_easy_perform of a transfer codeshim answers (ij, decided by
 * intercept.c at t0; owned from here): the same engine as a multi
 * transfer's, on a multi handle of its own, driven to completion here,
 * as libcurl's easy interface drives its own multi handle. The
 * transfer's result. */
struct shim_intercept_job;
CURLcode shim_multi_run_easy(const struct shim_curl_api *api, CURL *h,
                             struct shim_intercept_job *ij, double t0);
/* curl_easy_pause(e, bits) of an intercepted multi transfer: delivery
 * to its write callback holds while CURLPAUSE_RECV is set and goes on
 * from the refused chunk once cleared (sink.h). 1 when e is one, else 0
 * (libcurl's). */
int shim_multi_pause(CURL *e, int bits);
/* curl_easy_cleanup(e): stops e's intercepted transfer, if any. */
void shim_multi_forget_easy(CURL *e);
/* 1 when e is an intercepted transfer of some multi handle now. */
int shim_multi_owns(CURL *e);

#endif
