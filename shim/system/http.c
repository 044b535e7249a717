/* http.c - see http.h. The transfer core first (the one pair of header
 * and body callbacks codeshim sets on a libcurl handle, for this client
 * and for the model calls alike), then the client: one easy handle per
 * client, reset (which keeps its live connections) and set up again for
 * every call. */
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

/* ---- the transfer core ---- */

/* A header line: a status line starts a new answer (100-continue,
 * redirects), so only the final answer's head is kept. */
static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct shim_http_sink *s = ud;
    size_t len = sz * n;

    if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
        const char *sp = memchr(p, ' ', len);
        s->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        if (s->head)
            shim_buf_reset(s->head);
    }
    return s->head && shim_buf_add(s->head, p, len) ? 0 : len;
}

/* A passed body as lines: complete ones go out, a partial one waits. */
static int pass_lines(struct shim_http_sink *s, const char *p, size_t n)
{
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;

        if (s->line.len + take > s->max_line) {
            s->cut = SHIM_HTTP_CUT_CAP;
            return -1;
        }
        if (shim_buf_add(&s->line, p, take) < 0) {
            s->cut = SHIM_HTTP_CUT_NOMEM;
            return -1;
        }
        if (!nl)
            return 0;
        if (s->on_line(s->ud, s->line.data ? s->line.data : "", s->line.len)) {
            s->cut = SHIM_HTTP_CUT_STOPPED;
            return -1;
        }
        shim_buf_reset(&s->line);
        p += take + 1;
        n -= take + 1;
    }
    return 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct shim_http_sink *s = ud;
    size_t len = sz * n;
    int rc;

    if (!s->decided) {
        s->decided = 1;
        s->passing = s->pass && s->pass(s->ud, s->status);
    }
    if (len > s->max_body - s->total) {
        s->cut = SHIM_HTTP_CUT_CAP;
        return 0;
    }
    s->total += len;
    if (s->passing && s->on_line)
        return pass_lines(s, p, len) < 0 ? 0 : len;
    if (s->passing) {
        if (s->on_bytes(s->ud, p, len)) {
            s->cut = SHIM_HTTP_CUT_STOPPED;
            return 0;
        }
        return len;
    }
    if (s->body && (rc = shim_buf_add(s->body, p, len)) < 0) {
        s->cut = rc == -E2BIG ? SHIM_HTTP_CUT_CAP : SHIM_HTTP_CUT_NOMEM;
        return 0;
    }
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct shim_http_sink *s = ud;

    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    if (!s->halted && s->stop(s->stop_ud))
        s->halted = 1;
    return s->halted;
}

static __thread CURLcode (*tls_performer)(CURL *h);

void shim_http_set_performer(CURLcode (*fn)(CURL *h))
{
    tls_performer = fn;
}

CURLcode shim_http_perform(const struct shim_curl_api *a, CURL *h, struct shim_http_sink *s)
{
    CURLcode rc;

    shim_buf_init(&s->line, s->max_line + 1);
    if (s->stop) {
        a->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        a->easy_setopt(h, CURLOPT_XFERINFODATA, s);
        a->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    a->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    a->easy_setopt(h, CURLOPT_WRITEDATA, s);
    a->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    a->easy_setopt(h, CURLOPT_HEADERDATA, s);
    rc = tls_performer ? tls_performer(h) : a->easy_perform(h);
    /* the last line of a passed body may lack its "\n" */
    if (rc == CURLE_OK && s->passing && s->on_line && s->line.len &&
        s->on_line(s->ud, s->line.data, s->line.len))
        s->cut = SHIM_HTTP_CUT_STOPPED;
    shim_buf_free(&s->line);
    return rc;
}

/* ---- the client ---- */

/* A header of the final answer (its value trimmed) into out: 1 when the
 * head has it, 0 when not (out ""). */
static int head_value(const struct shim_buf *head, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    const char *p = head->data ? head->data : "", *e;

    out[0] = '\0';
    for (; *p; p = *e ? e + 1 : e) {
        size_t a = nl + 1, b;

        e = strchr(p, '\n');
        if (!e)
            e = p + strlen(p);
        b = (size_t)(e - p);
        if (b <= nl || p[nl] != ':' || strncasecmp(p, name, nl))
            continue;
        while (a < b && (p[a] == ' ' || p[a] == '\t'))
            a++;
        while (b > a && (p[b - 1] == '\r' || p[b - 1] == ' '))
            b--;
        if (b - a < n) {
            memcpy(out, p + a, b - a);
            out[b - a] = '\0';
        }
        return 1;
    }
    return 0;
}

/* A streaming call's 2xx body goes to its line callback. */
static int pass_2xx(void *ud, long status)
{
    (void)ud;
    return status >= 200 && status < 300;
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
static CURLcode setup(struct shim_http *c, const struct shim_http_req *rq,
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
    char errbuf[CURL_ERROR_SIZE] = "", ra_text[32];
    struct curl_slist *hl;
    struct shim_buf head, body;
    struct shim_http_sink s;
    double t0 = shim_clock_s();
    CURLcode rc;

    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
    memset(&s, 0, sizeof(s));
    shim_buf_init(&head, SHIM_HTTP_HEAD_CAP);
    shim_buf_init(&body, rq->on_line ? rq->max_line + 1 : rq->max_body + 1);
    s.head = &head;
    s.body = &body;
    s.max_body = rq->max_body;
    if (rq->on_line) {
        s.pass = pass_2xx;
        s.on_line = rq->on_line;
        s.max_line = rq->max_line;
        s.ud = rq->ud;
    }
    s.stop = rq->stop;
    s.stop_ud = rq->stop_ud;
    shim_guard_enter();
    hl = headers_of(c->api, rq);
    rc = hl ? setup(c, rq, hl, errbuf) : CURLE_OUT_OF_MEMORY;
    if (rc == CURLE_OK)
        rc = shim_http_perform(c->api, c->h, &s);
    if (head_value(&head, "Retry-After", ra_text, sizeof(ra_text))) {
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
    r->status = s.status;
    head_value(&head, "X-Next-Token", r->next_token, sizeof(r->next_token));
    shim_buf_free(&head);
    r->truncated = s.cut == SHIM_HTTP_CUT_CAP;
    r->stopped = s.cut == SHIM_HTTP_CUT_STOPPED;
    if (!s.passing) {
        r->body = shim_buf_take(&body, &r->len);
        if (!r->body)
            r->body = strdup("");
    }
    shim_buf_free(&body);
    r->seconds = shim_clock_s() - t0;
    r->timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    r->interrupted = s.halted;
    if (rc != CURLE_OK)
        snprintf(r->error, sizeof(r->error), "%s",
                 errbuf[0] ? errbuf : "the HTTP call could not be made");
    if (!r->body && !s.passing)
        return -ENOMEM;
    if (r->status) { /* an answer came, maybe cut: r->incomplete says */
        r->incomplete = rc != CURLE_OK;
        return 0;
    }
    return rc == CURLE_OK ? -EPROTO : errno_of(rc);
}
