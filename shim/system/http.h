/* http.h - codeshim's own HTTP client, for sandbox backends that live
 * behind an HTTP API (e2b). Not the upstream path: nothing of the
 * program's request (its credentials least of all) is ever sent here.
 *
 * It runs on the program's own libcurl build (shim_real(flavor)), with the
 * guard up, so codeshim's wrappers neither intercept nor record it. A
 * struct shim_http is one fresh easy handle (never a duplicate of the
 * program's, which would carry its OpenAI credentials) that is reused
 * call after call, so the connection stays alive (HTTP/1.1). Of the
 * program's transport settings, only the CA file, CA path, proxy and
 * no-proxy list apply (struct shim_http_net). Every call has a connect
 * and a total timeout and a capped response; a streaming call hands each
 * complete line of a 2xx body (capped length) to a callback instead.
 *
 * Ownership: shim_http_open copies what net points to; the caller closes
 * the client. A response's body belongs to the response
 * (shim_http_resp_free). One call at a time per client. */
#ifndef SHIM_HTTP_H
#define SHIM_HTTP_H

#include "base/buf.h"
#include "system/real.h"

#include <stddef.h>
#include <time.h>

/* The program's transport settings that codeshim's own calls honour (its
 * curl_easy_setopt values; NULL: not set, libcurl's default applies). */
struct shim_http_net {
    enum shim_flavor flavor;
    const char *cainfo;  /* CURLOPT_CAINFO */
    const char *capath;  /* CURLOPT_CAPATH */
    const char *proxy;   /* CURLOPT_PROXY */
    const char *noproxy; /* CURLOPT_NOPROXY */
    const char *resolve; /* CURLOPT_RESOLVE, its entries joined by '\n' */
};

struct shim_http;

/* Returns 1 to stop the transfer (the call then reports stopped). */
typedef int (*shim_http_line_fn)(void *ud, const char *line, size_t len);
/* Asked all along a transfer (libcurl's progress callback: as data moves,
 * and about once a second while it waits): nonzero ends it at once, its
 * connection closed (CURLE_ABORTED_BY_CALLBACK). */
typedef int (*shim_http_stop_fn)(void *ud);

struct shim_http_req {
    const char *method;         /* "GET", "POST", "DELETE" */
    const char *url;
    const char *const *headers; /* "Name: value", NULL-terminated, or NULL */
    const char *body;           /* POST body, or NULL */
    size_t body_len;
    long connect_ms, total_ms;  /* both required (> 0) */
    size_t max_body;            /* bytes kept (or streamed) at most */
    /* streaming: a 2xx body goes to on_line line by line (the "\n"
     * removed, the last line even without one), each at most max_line
     * bytes; other statuses are kept in body as usual */
    shim_http_line_fn on_line;
    void *ud;
    size_t max_line;
    shim_http_stop_fn stop;     /* NULL: the call runs to its end */
    void *stop_ud;
};

struct shim_http_resp {
    long status;        /* 0 when no answer came */
    char *body;         /* NUL-terminated (possibly ""); owned */
    size_t len;
    long retry_after_s; /* Retry-After, in seconds from now; -1: none */
    char next_token[256]; /* X-Next-Token (a paged list's next page), or "" */
    int truncated;      /* past max_body or max_line: the transfer was cut */
    int stopped;        /* on_line asked to stop */
    int timed_out;      /* the total timeout hit (the connection is closed) */
    int interrupted;    /* rq->stop said so (the connection is closed) */
    int incomplete;     /* the answer did not end as it should (any cut
                           above, or the peer closed mid-body) */
    double seconds;
    char error[256];    /* why no answer came ("" when one did) */
};

/* ---- The transfer core: one libcurl transfer on a handle the caller
 * set up (URL, method, headers, timeouts), both for this client's fresh
 * handle and for the model calls' duplicate of the program's (upstream.c).
 * It owns the handle's header and body callbacks: the status and head of
 * the final answer, the body under a cap, kept or handed on as bytes or
 * as lines, and a stop when a callback asks. The guard must be up. ---- */

#define SHIM_HTTP_HEAD_CAP (256 * 1024)

/* Why a transfer's body was cut short (the transfer then fails with
 * CURLE_WRITE_ERROR). */
enum shim_http_cut { SHIM_HTTP_CUT_NONE, SHIM_HTTP_CUT_CAP, SHIM_HTTP_CUT_STOPPED,
                     SHIM_HTTP_CUT_NOMEM };

/* At the first body byte of the transfer: nonzero hands the body to
 * on_bytes (or on_line) instead of keeping it. */
typedef int (*shim_http_pass_fn)(void *ud, long status);
/* Body bytes handed on; nonzero stops the transfer. */
typedef int (*shim_http_bytes_fn)(void *ud, const char *p, size_t n);

struct shim_http_sink {
    /* set by the caller (the rest zeroed) */
    struct shim_buf *head;  /* the final answer's status line and headers
                               (a new status line empties it), or NULL */
    struct shim_buf *body;  /* the kept body (its cap cuts too), or NULL */
    size_t max_body;        /* body bytes taken at most, kept or handed on */
    shim_http_pass_fn pass; /* NULL: the body is kept */
    shim_http_bytes_fn on_bytes; /* a passed body as bytes, or (NULL) */
    shim_http_line_fn on_line; /* or as lines: the "\n" removed, the
                               last even without one */
    size_t max_line;        /* a line's bytes at most */
    void *ud;
    shim_http_stop_fn stop; /* NULL, or asked all along the transfer (it
                               replaces the handle's progress callback) */
    void *stop_ud;
    /* filled by shim_http_perform */
    long status;            /* the last status line's; 0: none came */
    int decided, passing;   /* the body went to on_bytes/on_line */
    int cut;                /* enum shim_http_cut */
    int halted;             /* stop ended the transfer */
    size_t total;           /* body bytes taken */
    struct shim_buf line;   /* a passed line not yet complete */
};

/* This thread's performer of every transfer shim_http_perform makes
 * (NULL: the api table's easy_perform, blocking): the multi engine sets
 * one while a transfer's loop runs (curl/multi.c), so that a model call
 * and a backend's own calls (e2b's execution stream) alike yield to the
 * program instead of blocking its call. */
void shim_http_set_performer(CURLcode (*fn)(CURL *h));

/* Sets h's header and body callbacks to s, performs, and hands on the
 * last line of a passed body. libcurl's result. */
CURLcode shim_http_perform(const struct shim_curl_api *a, CURL *h, struct shim_http_sink *s);

/* ---- The client ---- */

/* 0 or -errno (-ENOMEM, -ENOENT: that libcurl is not in the process). */
int shim_http_open(const struct shim_http_net *net, struct shim_http **out);
void shim_http_close(struct shim_http *h);
/* Makes one call. 0 when an answer came (any status: r->status), also
 * when it was cut after its status line (r->incomplete, r->error);
 * -errno when none did (-ETIMEDOUT, -ECONNREFUSED, -EHOSTUNREACH, -EIO),
 * with r->error saying why. r is always filled; free it either way. */
int shim_http_do(struct shim_http *h, const struct shim_http_req *rq, struct shim_http_resp *r);
void shim_http_resp_free(struct shim_http_resp *r);

#endif
