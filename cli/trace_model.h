/* trace_model.h - the aggregate `codeshim trace` builds: what
 * trace_load.c fills in and trace_print.c (and tests/unit/test_trace.c)
 * read. Private to the trace subcommand; trace.h is its interface.
 *
 * Lists are capped buffers (buf.h) holding pointers or records; the
 * accessors below give them their types. */
#ifndef CLI_TRACE_MODEL_H
#define CLI_TRACE_MODEL_H

#include "trace.h"

#include "base/buf.h"

#include <limits.h>
#include <stddef.h>

#define CLI_TRACE_ID_MAX 128     /* bytes kept of a request or call id */
#define CLI_TRACE_TEXT_MAX 512   /* bytes kept of a URL, model or message */
#define CLI_TRACE_CODE_MAX 72    /* bytes shown of the first line of code */
#define CLI_TRACE_NOTES_MAX 64   /* error notes kept per request */

struct cli_trace_exec {
    char *call;
    char *status;
    char *code;          /* first line of the code, clipped */
    double seconds;
};

struct cli_trace_req {
    char *id;            /* clipped; also the table's key */
    size_t order;        /* first appearance in the file: tie-breaker */
    double first_ts, last_ts;
    long long pid;
    char *api, *model, *url;
    int stream;          /* -1 unknown, 0, 1 */
    long long upstream_calls, upstream_bytes;
    double model_s, sandbox_s;
    long long tok_in, tok_out;
    int has_tok_in, has_tok_out;
    struct shim_buf execs;   /* struct cli_trace_exec records */
    long long execs_failed;
    /* e2b: sandboxes created (exec events with e2b_create_seconds > 0)
     * and execute calls, and their seconds */
    long long e2b_creates, e2b_execs;
    double e2b_create_s, e2b_exec_s;
    int answered;
    int has_status, has_curl, has_total;
    long long status, curl_code;
    long long answer_execs, answer_upstream;
    double answer_s;
    struct shim_buf notes;   /* char *: upstream failures and error events */
    size_t notes_dropped;
};

struct cli_trace {
    void *index;             /* tsearch(3) tree of requests, by id */
    struct shim_buf reqs;    /* struct cli_trace_req *, in order of first line */
    struct shim_buf orphans; /* char *: error events with no request id */
    size_t orphans_dropped;
    size_t lines, malformed;
};

static inline size_t cli_trace_nreqs(const struct cli_trace *t)
{
    return t->reqs.len / sizeof(struct cli_trace_req *);
}

static inline struct cli_trace_req *cli_trace_req_at(const struct cli_trace *t, size_t i)
{
    return ((struct cli_trace_req **)(void *)t->reqs.data)[i];
}

static inline size_t cli_trace_nexecs(const struct cli_trace_req *r)
{
    return r->execs.len / sizeof(struct cli_trace_exec);
}

static inline const struct cli_trace_exec *cli_trace_exec_at(const struct cli_trace_req *r,
                                                             size_t i)
{
    return &((const struct cli_trace_exec *)(const void *)r->execs.data)[i];
}

/* Number of strings in a list of char * (notes, orphans). */
static inline size_t cli_trace_nstrs(const struct shim_buf *list)
{
    return list->len / sizeof(char *);
}

static inline char **cli_trace_strs(const struct shim_buf *list)
{
    return (char **)(void *)list->data;
}

/* Sums saturate: a hostile file of huge counts must not overflow. */
static inline void cli_trace_add_sat(long long *acc, long long v)
{
    if (v > 0 && *acc > LLONG_MAX - v)
        *acc = LLONG_MAX;
    else if (v < 0 && *acc < LLONG_MIN - v)
        *acc = LLONG_MIN;
    else
        *acc += v;
}

#endif
