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

#include "api/reply.h"

#include <cjson/cJSON.h>
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

/* ---- cassettes (CODESHIM_CASSETTE) ----
 *
 * One cassette per process: a JSON file {"codeshim_cassette": 1,
 * "exchanges": [...]} or a folder (a path ending in '/' or an existing
 * folder) of NNNN.json files, one exchange each; either way in the order
 * they were recorded, human-readable and editable. An exchange is
 * {"request": {method, path, match, body}, "response": {status,
 * http_version, content_type, headers, body}}: matched on method, path and
 * match (match.h), never on the body codeshim sent; a streamed answer is
 * the stream as it came over the wire. Headers are never written but the
 * response's non-credential ones. Files are 0600, written atomically,
 * under a lock on their folder (several processes may record at once). */

/* Whether the cassette was there when this process first looked. */
int shim_cassette_existed(const char *cassette);
/* The next exchange this process has not replayed whose method, path and
 * match are the request's: 0 with *r filled and *index its place (from
 * 1); -ENOENT with why naming the nearest recorded exchange and the first
 * field where it differs (both values); -EPROTO when the cassette cannot
 * be read. */
int shim_cassette_find(const char *cassette, const char *url, const cJSON *match,
                       struct shim_http_reply *r, size_t max_response, int *index, char *why,
                       size_t whysz);
/* Appends an exchange (it counts as replayed in this process). 0 with
 * *index its place, or -errno. */
int shim_cassette_add(const char *cassette, const char *url, const cJSON *match,
                      const char *body, size_t len, const struct shim_http_reply *r,
                      int *index);

#endif
