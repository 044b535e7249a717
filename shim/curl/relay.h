/* relay.h - the program's connection callbacks on a handle that a multi
 * worker performs (a duplicate of the program's, intercept.c).
 *
 * libcurl calls OPENSOCKETFUNCTION, SOCKOPTFUNCTION, CLOSESOCKETFUNCTION,
 * PREREQFUNCTION, RESOLVER_START_FUNCTION and SSL_CTX_FUNCTION on the
 * thread that performs the handle. On the duplicate they are replaced by
 * codeshim's, which post the call to the transfer's queue (sinkq.h) and
 * wait until the program's thread has run the program's callback inside
 * its next call that drives the multi handle (multi.c), at most until the
 * transfer's deadline. Once the program's side stopped (removed, cleaned
 * up) or the worker ended, the program's callback is never called: each
 * gives libcurl its failure value (opensocket: CURL_SOCKET_BAD, sockopt:
 * CURL_SOCKOPT_ERROR, prereq: CURL_PREREQFUNC_ABORT, resolver start: 1,
 * SSL context: CURLE_ABORTED_BY_CALLBACK), and closesocket closes the
 * socket itself. The relay also knows every socket the model calls open
 * (its open and close callbacks stand on the duplicate even when the
 * program set none: then it opens them as libcurl does, close-on-exec)
 * and shuts them down the moment the program's side stops, so a call
 * waiting on the network ends at once. The program's other callbacks a duplicate would keep
 * and codeshim does not need (debug, HSTS, trailer, SSH, FTP wildcard,
 * RTSP interleave) are taken off it: the duplicate is VERBOSE 0 and
 * speaks HTTP only. */
#ifndef SHIM_RELAY_H
#define SHIM_RELAY_H

#include "curl/handles.h"
#include "system/real.h"

#include <curl/curl.h>

struct shim_sinkq;
struct shim_relay;

/* A relay into q (holding a reference) for the program's handle h with
 * the callbacks cbs, bounded by timeout_ms (0: none) from t0 (seconds,
 * shim_clock_s). 0 or -ENOMEM. */
int shim_relay_new(struct shim_sinkq *q, CURL *h, const struct shim_handle_cbs *cbs,
                   double t0, long timeout_ms, struct shim_relay **out);
/* Puts codeshim's callbacks on d (guard up: nothing recorded). */
void shim_relay_install(const struct shim_curl_api *api, struct shim_relay *r, CURL *d);
/* After every handle r was installed on is cleaned up. */
void shim_relay_free(struct shim_relay *r);

#endif
