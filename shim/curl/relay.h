/* relay.h - the program's connection callbacks on a handle whose model
 * calls the multi engine makes (a duplicate of the program's, intercept.c).
 *
 * libcurl calls OPENSOCKETFUNCTION, SOCKOPTFUNCTION, CLOSESOCKETFUNCTION,
 * PREREQFUNCTION, RESOLVER_START_FUNCTION and SSL_CTX_FUNCTION while it
 * performs the duplicate, which the engine does on the program's thread
 * inside the program's calls that drive its multi handle (multi.c). On
 * the duplicate they are replaced by codeshim's, which call the
 * program's own at once while its transfer goes on. Once the program's
 * side stopped (removed, cleaned up, failed by its callback: the
 * transfer's queue is stopped) the program's callback is never called
 * again, since its data may be freed: each gives libcurl its failure
 * value (opensocket: CURL_SOCKET_BAD, sockopt: CURL_SOCKOPT_ERROR,
 * prereq: CURL_PREREQFUNC_ABORT, resolver start: 1, SSL context:
 * CURLE_ABORTED_BY_CALLBACK), and closesocket closes the socket itself.
 * The program's other callbacks a duplicate would keep and codeshim does
 * not need (debug, HSTS, trailer, SSH, FTP wildcard, RTSP interleave) are
 * taken off it: the duplicate is VERBOSE 0 and speaks HTTP only. */
#ifndef SHIM_RELAY_H
#define SHIM_RELAY_H

#include "curl/handles.h"
#include "system/real.h"

#include <curl/curl.h>

struct shim_sinkq;
struct shim_relay;

/* A relay for the program's handle h with the callbacks cbs, live while
 * q (a reference held) is not stopped. 0 or -ENOMEM. */
int shim_relay_new(struct shim_sinkq *q, CURL *h, const struct shim_handle_cbs *cbs,
                   struct shim_relay **out);
/* Puts codeshim's callbacks on d (guard up: nothing recorded). */
void shim_relay_install(const struct shim_curl_api *api, struct shim_relay *r, CURL *d);
/* After every handle r was installed on is cleaned up. */
void shim_relay_free(struct shim_relay *r);

#endif
