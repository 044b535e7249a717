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
    int incomplete;     /* the answer did not end as it should (any cut
                           above, or the peer closed mid-body) */
    double seconds;
    char error[256];    /* why no answer came ("" when one did) */
};

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
