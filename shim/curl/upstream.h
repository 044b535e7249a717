/* upstream.h - where codeshim's model calls go.
 *
 * The only module that performs HTTP. Calls go through the real libcurl
 * of the program's own build, on a private duplicate of the program's
 * handle, so they inherit its TLS, proxy, connect and low-speed timeouts,
 * resolve and auth settings; the program's callbacks are replaced by
 * capped buffers. Under the program's limits (xfer.h) each call gets the
 * time left of its CURLOPT_TIMEOUT(_MS) and its progress is the
 * transfer's (whose deadline or callback may stop it).
 * The same interface serves the other transports: the built-in offline
 * model (CODESHIM_OFFLINE) and recorded exchanges (CODESHIM_REPLAY);
 * CODESHIM_RECORD saves what the network answered (cassette.h). */
#ifndef SHIM_UPSTREAM_H
#define SHIM_UPSTREAM_H

#include "api/classify.h"
#include "api/reply.h"
#include "curl/handles.h"
#include "system/real.h"

struct shim_upstream;

#define SHIM_UPSTREAM_NODUP                                                    \
    "codeshim: libcurl could not copy this handle for the model call, and "   \
    "sending it without the handle's own connection and TLS settings could "  \
    "expose the API key; the request was not sent"

/* Duplicates the program's handle h (its options are never changed in a
 * way the program could see). 0, -ENOMEM, or -ENOTSUP when libcurl cannot
 * duplicate h: then no call is made, since a fresh handle would lose the
 * program's transport settings (SHIM_UPSTREAM_NODUP says so). */
int shim_upstream_open(const struct shim_curl_api *api, CURL *h,
                       const struct shim_handle_view *v, enum shim_api kind,
                       struct shim_upstream **out);
/* POSTs body to the program's URL. CURLE_OK with *r filled (any HTTP
 * status), or the transfer's CURLcode with errbuf (CURL_ERROR_SIZE bytes)
 * describing the failure. r is (re)initialised by the call. */
CURLcode shim_upstream_post(struct shim_upstream *u, const char *body, size_t len,
                            struct shim_http_reply *r, char *errbuf);
/* One event of a streamed answer (name NULL when it had no "event:"
 * line; data NUL-terminated); nonzero stops the transfer. */
typedef int (*shim_upstream_event_fn)(void *ctx, const char *name, const char *data,
                                      size_t len);
/* Whether shim_upstream_post_stream can stream on this transport (the
 * network and replays can; the offline model answers whole). */
int shim_upstream_streams(const struct shim_upstream *u);
/* As shim_upstream_post, for a request that asks for a stream: a 2xx
 * answer of type text/event-stream is parsed as it arrives (sse.h: lines
 * and events capped at CODESHIM_MAX_RESPONSE, as is the whole) and each
 * event handed to fn at once; *streamed is then 1, r has the status and
 * headers, and r->body holds the raw stream only when recording. Any
 * other answer fills r as shim_upstream_post does (*streamed 0). r's
 * status, version, content type and head are set before the first event. */
CURLcode shim_upstream_post_stream(struct shim_upstream *u, const char *body, size_t len,
                                   struct shim_http_reply *r, char *errbuf,
                                   shim_upstream_event_fn fn, void *ctx, int *streamed);
/* GETs path next to the program's API path (".../v1" + path, e.g.
 * "/files/file_1/content") with the program's credentials and transport,
 * the body capped at max bytes. Like post; offline and replay answer 404. */
CURLcode shim_upstream_get(struct shim_upstream *u, const char *path, size_t max,
                           struct shim_http_reply *r, char *errbuf);
/* What a cassette matches the next calls on (match.h): the program's
 * request and the calls of codeshim's tool made so far (code, output).
 * Nothing when no cassette is in use. */
void shim_upstream_set_match(struct shim_upstream *u, const cJSON *req, const cJSON *calls);
/* Whether set_match is heard: only then need the caller keep the calls. */
int shim_upstream_matches(const struct shim_upstream *u);
void shim_upstream_close(struct shim_upstream *u);

#endif
