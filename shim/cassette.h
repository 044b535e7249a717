/* cassette.h - record and replay of upstream exchanges as files.
 *
 * CODESHIM_RECORD=DIR saves every upstream exchange codeshim makes;
 * CODESHIM_REPLAY=DIR answers from those files with no network. A file is
 * DIR/<key>.json, or <key>-<n>.json for the n-th identical request in one
 * run (n >= 2), where key = hex SHA-256 of "POST <url path>\n<request
 * body>". The host is left out, so a recording replays against any server
 * address; the body is the exact JSON codeshim sent upstream, so a replay
 * matches when the program and its code behave the same. Files hold the
 * request body and the response (status, headers, body); request headers,
 * where API keys live, are never written, and response headers whose
 * name looks like a credential (identity.h's rule: *cookie*, *token*,
 * *key*, *auth*, *secret*...) are dropped. Files are 0600 in a 0700 directory, written atomically. */
#ifndef SHIM_CASSETTE_H
#define SHIM_CASSETTE_H

#include "reply.h"

#include <stddef.h>

/* Computes the key and takes the next occurrence number for it in this
 * process (1 for the first time). */
void shim_cassette_key(const char *url, const char *body, size_t len, char key[65],
                       int *occurrence);
int shim_cassette_save(const char *dir, const char *key, int occurrence, const char *url,
                       const char *body, size_t len, const struct shim_http_reply *r);
/* 0 with *r filled, -ENOENT when nothing was recorded for it, -EPROTO. */
int shim_cassette_load(const char *dir, const char *key, int occurrence,
                       struct shim_http_reply *r, size_t max_response);

#endif
