/* reply.h - an upstream HTTP reply, the value every transport fills
 * (upstream.c: network, offline model, replay; cassette.c reads and writes
 * it). Owns its two capped buffers. */
#ifndef SHIM_REPLY_H
#define SHIM_REPLY_H

#include "base/buf.h"

struct shim_http_reply {
    long status;
    long http_version;    /* CURL_HTTP_VERSION_* */
    char content_type[256]; /* "" when the upstream sent none */
    struct shim_buf head; /* final response's status line + headers + CRLF */
    struct shim_buf body; /* decoded body */
    double seconds;
    char source[160]; /* where it came from, for logs and traces: "network",
                         "offline", "replay", "cassette PATH #N" */
};

/* Empties r: head capped at head_cap bytes, body at body_cap. */
void shim_http_reply_init(struct shim_http_reply *r, size_t head_cap, size_t body_cap);
void shim_http_reply_free(struct shim_http_reply *r);
/* Fills r with an HTTP/1.1 JSON answer codeshim makes itself (offline
 * answers, replay misses): status, content type, head and body. */
void shim_http_reply_local(struct shim_http_reply *r, long status, const char *json);
/* Adds one header line ("Retry-After: 2") to the head of a reply
 * codeshim made. */
void shim_http_reply_header(struct shim_http_reply *r, const char *line);

#endif
