/* http.c - see http.h. One easy handle per client, reset (which keeps
 * its live connections) and set up again for every call. */
#include "system/http.h"

#include "base/buf.h"
#include "base/clock.h"
#include "base/guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEADERS 32

struct shim_http {
    const struct shim_curl_api *api;
    CURL *h;
    char *opt[4]; /* cainfo, capath, proxy, noproxy (copies) */
    struct curl_slist *resolve; /* the program's CURLOPT_RESOLVE entries */
};

/* What one call's callbacks fill. */
struct call {
    const struct shim_http_req *rq;
    struct shim_http_resp *r;
    struct shim_buf body; /* kept body, or the partial line when streaming */
    size_t total;         /* body bytes seen */
    int stream;           /* this answer's body goes to on_line */
};

int shim_http_open(const struct shim_http_net *net, struct shim_http **out)
{
    const char *src[4] = {net->cainfo, net->capath, net->proxy, net->noproxy}, *p;
    struct shim_http *c;
    size_t i, k;

    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->api = shim_real(net->flavor);
    if (!c->api) {
        free(c);
        return -ENOENT;
    }
    for (i = 0; i < 4; i++)
        if (src[i] && !(c->opt[i] = strdup(src[i]))) {
            shim_http_close(c);
            return -ENOMEM;
        }
    shim_guard_enter();
    c->h = c->api->easy_init();
    for (p = net->resolve; c->h && p && *p; p += k + (p[k] == '\n')) {
        char one[512];
        struct curl_slist *l;

        k = strcspn(p, "\n");
        if (!k || k >= sizeof(one))
            continue;
        memcpy(one, p, k);
        one[k] = '\0';
        if (!(l = c->api->slist_append(c->resolve, one)))
            break;
        c->resolve = l;
    }
    shim_guard_leave();
    if (!c->h) {
        shim_http_close(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void shim_http_close(struct shim_http *c)
{
    size_t i;

    if (!c)
        return;
    if (c->h) {
        shim_guard_enter();
        c->api->easy_cleanup(c->h);
        shim_guard_leave();
    }
    if (c->resolve) {
        shim_guard_enter();
        c->api->slist_free_all(c->resolve);
        shim_guard_leave();
    }
    for (i = 0; i < 4; i++)
        free(c->opt[i]);
    free(c);
}

void shim_http_resp_free(struct shim_http_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

/* A header line: the status line starts a new answer (only the last one
 * counts); X-Next-Token (e2b's paging) is the header read, and whether
 * the answer has a Retry-After (its value is libcurl's to parse:
 * CURLINFO_RETRY_AFTER). */
static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct call *k = ud;
    size_t len = sz * n;

    if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
        const char *sp = memchr(p, ' ', len);
        k->r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        k->r->retry_after_s = -1;
        k->r->next_token[0] = '\0';
        k->stream = k->rq->on_line && k->r->status >= 200 && k->r->status < 300;
        return len;
    }
    if (len > 12 && !strncasecmp(p, "Retry-After:", 12))
        k->r->retry_after_s = 0; /* present: CURLINFO_RETRY_AFTER says how long */
    if (len > 13 && len - 13 < sizeof(k->r->next_token) && !strncasecmp(p, "X-Next-Token:", 13)) {
        size_t a = 13, b = len;

        while (a < b && (p[a] == ' ' || p[a] == '\t'))
            a++;
        while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' '))
            b--;
        memcpy(k->r->next_token, p + a, b - a);
        k->r->next_token[b - a] = '\0';
    }
    return len;
}

/* Streaming: complete lines go out; a partial one waits in k->body. */
static int stream_bytes(struct call *k, const char *p, size_t n)
{
    const struct shim_http_req *rq = k->rq;

    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;

        if (k->body.len + take > rq->max_line) {
            k->r->truncated = 1;
            return -1;
        }
        if (shim_buf_add(&k->body, p, take) < 0)
            return -1;
        if (!nl)
            return 0;
        if (rq->on_line(rq->ud, k->body.data ? k->body.data : "", k->body.len)) {
            k->r->stopped = 1;
            return -1;
        }
        shim_buf_reset(&k->body);
        p += take + 1;
        n -= take + 1;
    }
    return 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct call *k = ud;
    size_t len = sz * n;

    if (k->total + len > k->rq->max_body) {
        k->r->truncated = 1;
        return 0;
    }
    k->total += len;
    if (k->stream)
        return stream_bytes(k, p, len) < 0 ? 0 : len;
    return shim_buf_add(&k->body, p, len) < 0 ? 0 : len;
}

static int errno_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

/* Sets up the handle for rq (guard up). */
static CURLcode setup(struct shim_http *c, const struct shim_http_req *rq, struct call *k,
                      struct curl_slist *hl, char *errbuf)
{
    static const CURLoption opts[4] = {CURLOPT_CAINFO, CURLOPT_CAPATH, CURLOPT_PROXY,
                                       CURLOPT_NOPROXY};
    const struct shim_curl_api *a = c->api;
    CURL *h = c->h;
    CURLcode rc = CURLE_OK;
    size_t i;

    a->easy_reset(h); /* keeps live connections */
    for (i = 0; i < 4 && rc == CURLE_OK; i++)
        if (c->opt[i])
            rc = a->easy_setopt(h, opts[i], c->opt[i]);
    if (rc == CURLE_OK && c->resolve)
        rc = a->easy_setopt(h, CURLOPT_RESOLVE, c->resolve);
    if (rc == CURLE_OK)
        rc = a->easy_setopt(h, CURLOPT_URL, rq->url);
    if (rc != CURLE_OK)
        return rc;
    a->easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    a->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    a->easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    a->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    a->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_ms);
    a->easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->total_ms);
    a->easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    a->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    a->easy_setopt(h, CURLOPT_WRITEDATA, k);
    a->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    a->easy_setopt(h, CURLOPT_HEADERDATA, k);
    if (!strcmp(rq->method, "POST")) {
        a->easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
        a->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                       (curl_off_t)(rq->body ? rq->body_len : 0));
    } else if (strcmp(rq->method, "GET")) {
        a->easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    }
    return CURLE_OK;
}

static struct curl_slist *headers_of(const struct shim_curl_api *a,
                                     const struct shim_http_req *rq)
{
    struct curl_slist *l = NULL, *t;
    size_t i;

    for (i = 0; rq->headers && rq->headers[i] && i < MAX_HEADERS; i++) {
        if (!(t = a->slist_append(l, rq->headers[i])))
            goto nomem;
        l = t;
    }
    if ((t = a->slist_append(l, "Expect:")) != NULL)
        return t;
nomem:
    a->slist_free_all(l);
    return NULL;
}

int shim_http_do(struct shim_http *c, const struct shim_http_req *rq, struct shim_http_resp *r)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hl;
    struct call k;
    double t0 = shim_clock_s();
    CURLcode rc;

    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    memset(&k, 0, sizeof(k));
    k.rq = rq;
    k.r = r;
    shim_buf_init(&k.body, rq->on_line ? rq->max_line + 1 : rq->max_body + 1);
    shim_guard_enter();
    hl = headers_of(c->api, rq);
    rc = hl ? setup(c, rq, &k, hl, errbuf) : CURLE_OUT_OF_MEMORY;
    if (rc == CURLE_OK)
        rc = c->api->easy_perform(c->h);
    if (r->retry_after_s >= 0) {
        /* delay-seconds or an HTTP-date, as seconds from now */
        curl_off_t ra = 0;
        if (c->api->easy_getinfo(c->h, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK || ra < 0)
            ra = 0;
        r->retry_after_s = ra > 100000000 ? 100000000 : (long)ra;
    }
    c->api->easy_setopt(c->h, CURLOPT_ERRORBUFFER, (char *)NULL);
    c->api->easy_setopt(c->h, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
    if (hl)
        c->api->slist_free_all(hl);
    shim_guard_leave();
    /* the last line of a stream may lack its "\n" */
    if (rc == CURLE_OK && k.stream && k.body.len &&
        rq->on_line(rq->ud, k.body.data, k.body.len))
        r->stopped = 1;
    if (!k.stream) {
        r->body = shim_buf_take(&k.body, &r->len);
        if (!r->body)
            r->body = strdup("");
    }
    shim_buf_free(&k.body);
    r->seconds = shim_clock_s() - t0;
    r->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    if (rc != CURLE_OK)
        snprintf(r->error, sizeof(r->error), "%s",
                 errbuf[0] ? errbuf : "the HTTP call could not be made");
    if (!r->body && !k.stream)
        return -ENOMEM;
    if (r->status) { /* an answer came, maybe cut: r->incomplete says */
        r->incomplete = rc != CURLE_OK;
        return 0;
    }
    return rc == CURLE_OK ? -EPROTO : errno_of(rc);
}
