/* e2b_int.h - what the files of the e2b backend share; nothing else
 * includes it (the dispatcher sees only shim_sandbox_e2b, sandbox_int.h).
 *
 * The backend, one concern a file (the protocol: e2b's published API, see
 * README "e2b"):
 *   e2b.c         the ops table: create, exec, destroy; finding a session's
 *                 sandbox again by metadata; the overview
 *   e2b_api.c     the control plane (create, get, list by metadata,
 *                 timeout, kill) and the data plane (execute, restart the
 *                 context), each answer mapped to 0 / -errno plus a text
 *   e2b_ndjson.c  pure: /execute's NDJSON lines -> struct shim_exec_result
 *
 * The e2b key goes only into X-API-Key to the control plane, a sandbox's
 * access tokens only into X-Access-Token / E2B-Traffic-Access-Token to its
 * own host; neither is ever logged, traced or put into a text. */
#ifndef SHIM_E2B_INT_H
#define SHIM_E2B_INT_H

#include "sandbox/e2b/e2b_ndjson.h"
#include "sandbox/sandbox_int.h"
#include "system/http.h"

#include <stddef.h>
#include <time.h>

struct shim_config;
struct shim_http;

/* ---- e2b_api.c ---- */

/* A sandbox as e2b described it. Tokens are secrets. */
struct shim_e2b_box {
    char id[128];
    char envd_token[512];
    char traffic_token[512];
    char domain[256];   /* "" = the configured domain */
    char nonce[40];     /* metadata codeshim_nonce, "" if none */
    char envd_version[32]; /* envdVersion, "" if e2b did not say */
    double end_at;      /* listed sandboxes: when e2b ends it (Unix s) */
};

/* One client: the control plane's and one sandbox's connections, and the
 * text of the last failure (for the model; never holds a secret). */
struct shim_e2b_api {
    const struct shim_config *cfg;
    struct shim_http *cp, *dp;
    long status;        /* the last call's HTTP status, 0 if none */
    char why[512];
    double retry_cap_s; /* total waiting allowed on 429 per call */
    int max_timeout_s;  /* a create's 400 said the team's maximum, else 0 */
};

int shim_e2b_api_init(struct shim_e2b_api *a, const struct shim_config *cfg,
                      const struct shim_http_net *net);
void shim_e2b_api_free(struct shim_e2b_api *a);

/* metadata: "k":"v" pairs, NULL-terminated (k1, v1, k2, v2, ..., NULL).
 * A timeout over the team's maximum is refused (400 "Timeout cannot be
 * greater than N hours"): -EINVAL, a->max_timeout_s = N h. */
int shim_e2b_create(struct shim_e2b_api *a, const char *const *metadata, int timeout_s,
                    struct shim_e2b_box *out);
int shim_e2b_get(struct shim_e2b_api *a, const char *id, struct shim_e2b_box *out);
/* Running sandboxes whose metadata has key=value; *n of at most max. */
int shim_e2b_list(struct shim_e2b_api *a, const char *key, const char *value,
                  struct shim_e2b_box *out, size_t max, size_t *n);
int shim_e2b_set_timeout(struct shim_e2b_api *a, const char *id, int timeout_s);
int shim_e2b_kill(struct shim_e2b_api *a, const char *id);

/* What one execute call gave. */
enum shim_e2b_exec_end {
    SHIM_E2B_RAN,      /* the stream came (out filled; maybe cut short) */
    SHIM_E2B_GONE,     /* 502/404: the sandbox is not there (not run) */
    SHIM_E2B_REFUSED,  /* another status: not run (a->why) */
    SHIM_E2B_TIMEOUT,  /* the time limit hit (out holds what came) */
    SHIM_E2B_NOREPLY,  /* no answer (a->why; maybe run) */
    SHIM_E2B_STOPPED,  /* stop said so: the connection was dropped (e2b's
                          server then interrupts the kernel); out empty */
};
/* Runs code on the default Python context, stop asked all along the
 * stream (NULL: never). 0 (with *end) or -ENOMEM. */
int shim_e2b_execute(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *code,
                     size_t len, const struct shim_exec_stop *stop,
                     struct shim_exec_result *out, enum shim_e2b_exec_end *end,
                     double *seconds);
/* envd's file API: a file of the sandbox (an absolute path) into a new
 * buffer of at most max bytes (-EFBIG beyond, -ENOENT when it is not
 * there), and a file written whole (parents made, -ENOSPC when the disk
 * is full), in the form the sandbox's envd takes: a raw body from envd
 * 0.5.7, multipart/form-data before (or when e2b did not say which envd).
 * 0 or -errno, a->why saying why. */
int shim_e2b_file_get(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *abs,
                      size_t max, char **out, size_t *len);
int shim_e2b_file_put(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *abs,
                      const void *data, size_t len);
/* Restarts the Python contexts (after a timeout): their state is gone. */
int shim_e2b_restart(struct shim_e2b_api *a, const struct shim_e2b_box *b);

#endif
