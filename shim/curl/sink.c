/* sink.c - see sink.h. Delivery to the program's callbacks, directly or
 * recorded into a queue (sinkq.h) and replayed on the program's thread. */
#include "curl/sink.h"

#include "base/clock.h"
#include "base/log.h"
#include "curl/sinkq.h"
#include "curl/xfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The queue this thread's new sinks record into (queued mode). */
static __thread struct shim_sinkq *tls_queue;

enum rec_kind { REC_BEGIN = 1, REC_BODY, REC_FAIL, REC_END };

struct rec_begin {
    long status, http_version;
    long long body_len;
    size_t head_len, ct_len; /* head bytes, then content type bytes */
    int has_ct;
};

/* Largest body record: the reader replays it in CURL_MAX_WRITE_SIZE
 * writes; the queue's cap bounds how many wait. */
#define REC_BODY_MAX (64 * 1024)
#define QUEUE_STOPPED "codeshim: the program stopped this transfer"

static const char *reason(long status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "";
    }
}

static int header_named(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && !strncasecmp(line, name, k) && line[k] == ':';
}

int shim_sink_head(struct shim_buf *out, long status, long http_version,
                      const char *upstream_head, size_t head_len,
                      const char *content_type, long long body_len)
{
    static const char *const drop[] = {"Content-Length", "Content-Type",
                                       "Content-Encoding", "Transfer-Encoding",
                                       "Connection", "Keep-Alive"};
    const char *p = upstream_head;
    const char *end = p ? p + head_len : NULL; /* NULL + 0 is undefined */
    int rc = 0, first = 1;

    if (content_type && strpbrk(content_type, "\r\n")) /* no header injection */
        content_type = "application/octet-stream";
    /* a block that does not open with a status line gets ours */
    if (!upstream_head || head_len < 5 || memcmp(upstream_head, "HTTP/", 5)) {
        rc |= shim_buf_addf(out, "%s %ld %s\r\n",
                            http_version >= CURL_HTTP_VERSION_2_0 ? "HTTP/2" : "HTTP/1.1",
                            status, reason(status));
        first = 0;
    }
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        size_t i, text = n;
        int skip = 0;

        while (text && (p[text - 1] == '\n' || p[text - 1] == '\r'))
            text--;
        if (!text) { /* the blank line: ours comes last */
            p += n;
            continue;
        }
        if (!first)
            for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
                skip |= header_named(p, text, drop[i]);
        if (!skip) {
            rc |= shim_buf_add(out, p, text);
            rc |= shim_buf_add(out, "\r\n", 2);
        }
        first = 0;
        p += n;
    }
    if (content_type)
        rc |= shim_buf_addf(out, "Content-Type: %s\r\n", content_type);
    if (body_len >= 0)
        rc |= shim_buf_addf(out, "Content-Length: %lld\r\n", body_len);
    rc |= shim_buf_add(out, "\r\n", 2);
    return rc ? -1 : 0;
}

void shim_sink_init(struct shim_sink *s, CURL *h, const struct shim_handle_view *v,
                    double t0)
{
    memset(s, 0, sizeof(*s));
    s->q = tls_queue;
    s->h = h;
    s->v = v;
    s->t0 = t0;
    s->x = shim_xfer_find(h);
    /* libcurl empties it at the start of every transfer; a queued sink
     * never touches the program's memory (its replay sink does this) */
    if (!s->q && v->errorbuffer)
        v->errorbuffer[0] = '\0';
}

void shim_sink_queue_into(struct shim_sinkq *q)
{
    tls_queue = q;
}

/* A queued sink whose reader stopped fails without recording more. */
static CURLcode rec_failed(struct shim_sink *s, int err)
{
    if (s->rc == CURLE_OK) {
        s->rc = err == -ENOMEM ? CURLE_OUT_OF_MEMORY : CURLE_ABORTED_BY_CALLBACK;
        snprintf(s->message, sizeof(s->message), "%s",
                 err == -ENOMEM ? "codeshim: out of memory" : QUEUE_STOPPED);
    }
    return s->rc;
}

static CURLcode rec_push(struct shim_sink *s, int kind, const void *a, size_t an,
                         const void *b, size_t bn)
{
    int err = shim_sinkq_push(s->q, kind, a, an, b, bn);
    return err ? rec_failed(s, err) : CURLE_OK;
}

/* Once the transfer's limits tripped (xfer.h), the sink fails with their
 * code and words. */
static CURLcode limits(struct shim_sink *s)
{
    struct shim_xfer *x = s->x;

    if (s->rc == CURLE_OK && x && x->rc != CURLE_OK) {
        s->x = NULL; /* a plain failure, recorded in queued mode */
        shim_sink_fail(s, x->rc, x->message);
        s->x = x;
    }
    return s->rc;
}

int shim_sink_ok(struct shim_sink *s)
{
    if (s->rc == CURLE_OK && s->q && shim_sinkq_stopped(s->q))
        rec_failed(s, -ECANCELED);
    if (s->rc == CURLE_OK && s->x) {
        shim_xfer_check(s->x);
        limits(s);
    }
    return s->rc == CURLE_OK;
}

void shim_sink_queue_end(struct shim_sinkq *q, CURLcode rc)
{
    shim_sinkq_end(q, (int)rc);
}

static void set_error(struct shim_sink *s, const char *msg)
{
    if (s->v->errorbuffer)
        snprintf(s->v->errorbuffer, CURL_ERROR_SIZE, "%s", msg);
}

CURLcode shim_sink_fail(struct shim_sink *s, CURLcode rc, const char *message)
{
    /* an upstream call cut short by the transfer's deadline or its
     * progress callback fails the transfer as libcurl says it */
    if (s->rc == CURLE_OK && s->x &&
        (rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_ABORTED_BY_CALLBACK))
        shim_xfer_check(s->x);
    if (limits(s) != CURLE_OK)
        return s->rc;
    if (s->rc == CURLE_OK) {
        s->rc = rc;
        snprintf(s->message, sizeof(s->message), "%s", message);
        if (s->q) {
            int code = (int)rc;
            shim_sinkq_push(s->q, REC_FAIL, &code, sizeof(code), message, strlen(message));
            return s->rc;
        }
        set_error(s, message);
        LOG_INFO("transfer failed: %s", message);
    }
    return s->rc;
}

/* libcurl's default write function is fwrite to WRITEDATA (stdout). */
static size_t call_write(shim_write_fn fn, const char *p, size_t n, void *ud)
{
    if (fn)
        return fn((char *)p, 1, n, ud);
    return fwrite(p, 1, n, ud ? (FILE *)ud : stdout);
}

/* One write to a program's callback. CURL_WRITEFUNC_PAUSE pauses only a
 * replay (multi.c gives the same bytes again on resume); elsewhere
 * (nothing the program drives) it fails the transfer. What the callback
 * took. */
static size_t paused_write(struct shim_sink *s, shim_write_fn fn, const char *p, size_t n,
                           void *ud)
{
    size_t took = call_write(fn, p, n, ud);

    if (took == CURL_WRITEFUNC_PAUSE && !s->replaying)
        LOG_WARN("the program paused a transfer codeshim answers from a callback that "
                 "cannot pause here; failing it");
    return took;
}

/* One header write: 0, 1 when a replay's callback paused (the line is
 * given again on resume), -1 once it failed the transfer. */
static int header_write(struct shim_sink *s, shim_write_fn fn, const char *p, size_t n,
                        void *ud)
{
    size_t took = paused_write(s, fn, p, n, ud);

    if (took == CURL_WRITEFUNC_PAUSE && s->replaying) {
        s->paused |= CURLPAUSE_RECV;
        return 1;
    }
    if (took != n) {
        shim_sink_fail(s, CURLE_WRITE_ERROR, "Failed writing header");
        return -1;
    }
    return 0;
}

/* One header line to the header callback (or the write callback with
 * HEADERDATA), then into the body with CURLOPT_HEADER; s->head_part
 * keeps which took it when one paused. As header_write. */
static int header_line(struct shim_sink *s, const char *p, size_t n)
{
    const struct shim_handle_view *v = s->v;
    int r = 0;

    if (s->head_part == 0 && (v->header_cb || v->header_data))
        r = header_write(s, v->header_cb ? v->header_cb : v->write_cb, p, n, v->header_data);
    if (r)
        return r;
    s->head_part = 1;
    if (v->include_header && (r = header_write(s, v->write_cb, p, n, v->write_data)) != 0)
        return r;
    s->head_part = 0;
    return 0;
}

static void publish(struct shim_sink *s)
{
    shim_handles_set_answer(s->h, &s->info);
}

static CURLcode rec_begin(struct shim_sink *s, long status, long http_version,
                          const char *head, size_t head_len, const char *content_type,
                          long long body_len)
{
    struct rec_begin b;
    struct shim_buf rec;
    CURLcode rc;

    if (s->rc != CURLE_OK)
        return s->rc;
    memset(&b, 0, sizeof(b));
    b.status = status;
    b.http_version = http_version;
    b.body_len = body_len;
    b.head_len = head ? head_len : 0;
    b.has_ct = content_type != NULL;
    b.ct_len = content_type ? strlen(content_type) : 0;
    shim_buf_init(&rec, (size_t)64 << 20); /* heads are capped far below */
    if (shim_buf_add(&rec, &b, sizeof(b)) < 0 || shim_buf_add(&rec, head, b.head_len) < 0 ||
        shim_buf_add(&rec, content_type, b.ct_len) < 0) {
        shim_buf_free(&rec);
        return rec_failed(s, -ENOMEM);
    }
    s->info.response_code = status;
    s->info.http_version = http_version ? http_version : CURL_HTTP_VERSION_1_1;
    rc = rec_push(s, REC_BEGIN, rec.data, rec.len, NULL, 0);
    shim_buf_free(&rec);
    return rc;
}

/* The seconds of a "Retry-After: N" line of head (0 for none, or for the
 * HTTP-date form), as CURLINFO_RETRY_AFTER gives them. */
static curl_off_t retry_after(const char *p, const char *end)
{
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        if (header_named(p, n, "Retry-After")) {
            const char *v = p + 12;
            curl_off_t x = 0;
            while (v < p + n && (*v == ' ' || *v == '\t'))
                v++;
            for (; v < p + n && *v >= '0' && *v <= '9' && x < 1000000000; v++)
                x = x * 10 + (*v - '0');
            return x;
        }
        p += n;
    }
    return 0;
}

CURLcode shim_sink_begin(struct shim_sink *s, long status, long http_version,
                         const char *upstream_head, size_t head_len,
                         const char *content_type, long long body_len)
{
    const char *url = s->v->url ? s->v->url : "";
    struct shim_buf block;
    const char *p, *end;

    if (limits(s) != CURLE_OK)
        return s->rc;
    if (s->q)
        return rec_begin(s, status, http_version, upstream_head, head_len, content_type,
                         body_len);
    if (s->x)
        s->x->dltotal = body_len >= 0 ? (curl_off_t)body_len : 0;
    shim_buf_init(&block, 1 << 20);
    if (shim_sink_head(&block, status, http_version, upstream_head, head_len,
                          content_type, body_len) < 0) {
        shim_buf_free(&block);
        return shim_sink_fail(s, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    }
    p = block.data;
    end = block.data + block.len;
    s->info.response_code = status;
    s->info.http_version = http_version ? http_version : CURL_HTTP_VERSION_1_1;
    s->info.content_type = content_type;
    s->info.effective_url = url;
    s->info.scheme = !strncasecmp(url, "https:", 6) ? "HTTPS" : "HTTP";
    s->info.size_upload = (curl_off_t)s->v->body_len;
    s->info.size_download = 0;
    s->info.header_size = (long)block.len;
    s->info.retry_after = retry_after(p, end);
    s->info.content_length = body_len >= 0 ? (curl_off_t)body_len : -1;
    snprintf(s->info.method, sizeof(s->info.method), "%s", shim_handle_view_method(s->v));
    s->info.total_time = shim_clock_s() - s->t0;
    publish(s); /* before the first callback: the program may ask getinfo */
    if (s->head_held && s->head_off <= block.len) /* resumed: from the line refused */
        p += s->head_off;
    s->head_held = 0;
    while (p < end && s->rc == CURLE_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        if (header_line(s, p, n) > 0) { /* paused: the replay gives it again */
            s->head_held = 1;
            s->head_off = (size_t)(p - block.data);
            shim_buf_free(&block);
            return s->rc;
        }
        p += n;
        if (s->replaying && (s->paused & CURLPAUSE_RECV) && p < end) {
            /* curl_easy_pause from that callback: the next line waits */
            s->head_held = 1;
            s->head_off = (size_t)(p - block.data);
            shim_buf_free(&block);
            return s->rc;
        }
    }
    if (s->rc == CURLE_OK && s->v->failonerror && status >= 400) {
        char msg[96];
        snprintf(msg, sizeof(msg), "The requested URL returned error: %ld", status);
        shim_sink_fail(s, CURLE_HTTP_RETURNED_ERROR, msg);
    }
    shim_buf_free(&block);
    return s->rc;
}

static CURLcode rec_body(struct shim_sink *s, const char *p, size_t n)
{
    while (n && shim_sink_ok(s)) {
        size_t chunk = n > REC_BODY_MAX ? REC_BODY_MAX : n;
        if (rec_push(s, REC_BODY, p, chunk, NULL, 0) != CURLE_OK)
            break;
        s->info.size_download += (curl_off_t)chunk;
        p += chunk;
        n -= chunk;
    }
    return s->rc;
}

CURLcode shim_sink_body(struct shim_sink *s, const char *p, size_t n)
{
    if (s->q)
        return rec_body(s, p, n);
    while (n && limits(s) == CURLE_OK) {
        size_t chunk = n > CURL_MAX_WRITE_SIZE ? CURL_MAX_WRITE_SIZE : n;

        if (paused_write(s, s->v->write_cb, p, chunk, s->v->write_data) != chunk)
            return shim_sink_fail(s, CURLE_WRITE_ERROR,
                                  "Failure writing output to destination");
        s->info.size_download += (curl_off_t)chunk;
        if (s->x)
            s->x->dlnow += (curl_off_t)chunk;
        p += chunk;
        n -= chunk;
    }
    return s->rc;
}

CURLcode shim_sink_whole(struct shim_sink *s, long status, long http_version,
                         const char *upstream_head, size_t head_len,
                         const char *content_type, const char *body, size_t body_len)
{
    if (shim_sink_begin(s, status, http_version, upstream_head, head_len, content_type,
                        (long long)body_len) == CURLE_OK)
        shim_sink_body(s, body, body_len);
    return shim_sink_end(s);
}

CURLcode shim_sink_end(struct shim_sink *s)
{
    limits(s);
    if (s->q) {
        if (s->rc == CURLE_OK)
            rec_push(s, REC_END, NULL, 0, NULL, 0);
        else
            shim_sinkq_push(s->q, REC_END, NULL, 0, NULL, 0);
        return s->rc;
    }
    s->info.total_time = shim_clock_s() - s->t0;
    publish(s);
    if (s->rc == CURLE_OK && s->v->write_cb == NULL)
        fflush(s->v->write_data ? (FILE *)s->v->write_data : stdout);
    return s->rc;
}

/* ---- replay, on the program's thread ---- */

static void replay_begin(struct shim_sink *s, const struct shim_sinkq_item *it)
{
    struct rec_begin b;
    const char *head;

    if (it->len < sizeof(b))
        return;
    memcpy(&b, it->data, sizeof(b));
    if (b.head_len > it->len - sizeof(b) || b.ct_len > it->len - sizeof(b) - b.head_len)
        return;
    head = it->data + sizeof(b);
    /* the answer's content type must outlive this record (publish) */
    snprintf(s->ct, sizeof(s->ct), "%.*s", (int)b.ct_len, head + b.head_len);
    shim_sink_begin(s, b.status, b.http_version, b.head_len ? head : NULL, b.head_len,
                    b.has_ct ? s->ct : NULL, b.body_len);
}

static void replay_one(struct shim_sink *s, const struct shim_sinkq_item *it)
{
    int code;

    switch (it->kind) {
    case REC_BEGIN:
        replay_begin(s, it);
        break;
    case REC_BODY:
        shim_sink_body(s, it->data, it->len);
        break;
    case REC_FAIL:
        if (it->len >= sizeof(code)) {
            memcpy(&code, it->data, sizeof(code));
            shim_sink_fail(s, (CURLcode)code, it->data + sizeof(code));
        }
        break;
    case REC_END:
        shim_sink_end(s);
        break;
    default:
        break;
    }
}

/* A body record written from s->held_off as libcurl writes it: 1 when
 * all of it went (or the callback failed the transfer), 0 when the
 * program paused (the refused chunk is written again on resume). */
static int replay_body(struct shim_sink *s, const struct shim_sinkq_item *it)
{
    while (s->held_off < it->len && limits(s) == CURLE_OK) {
        size_t n = it->len - s->held_off, took;

        if (n > CURL_MAX_WRITE_SIZE)
            n = CURL_MAX_WRITE_SIZE;
        if (s->paused & CURLPAUSE_RECV)
            return 0;
        took = call_write(s->v->write_cb, it->data + s->held_off, n, s->v->write_data);
        if (took == CURL_WRITEFUNC_PAUSE) {
            s->paused |= CURLPAUSE_RECV;
            return 0;
        }
        if (took != n) {
            shim_sink_fail(s, CURLE_WRITE_ERROR, "Failure writing output to destination");
            break;
        }
        s->info.size_download += (curl_off_t)n;
        s->held_off += n;
    }
    s->held_off = 0;
    return 1;
}

int shim_sink_replay(struct shim_sink *s, struct shim_sinkq *q, CURLcode *rc)
{
    struct shim_sinkq_item *it, **tail;
    int ended, result, failed = 0;

    s->replaying = 1;
    if (!(s->paused & CURLPAUSE_RECV) && !s->held_end) { /* paused: the queue fills */
        it = shim_sinkq_take(q, &ended, &result);
        for (tail = &s->held; *tail; tail = &(*tail)->next)
            ;
        *tail = it;
        if (ended) {
            s->held_end = 1;
            s->held_result = result;
        }
    }
    while ((it = s->held) != NULL) {
        /* after the program's callback failed, libcurl would call no
         * more callbacks: only a failure record may still fill in */
        if (!failed && it->kind == REC_BODY) {
            if (!replay_body(s, it))
                return 0;
        } else if (!failed || it->kind == REC_FAIL) {
            if (!failed && (s->paused & CURLPAUSE_RECV))
                return 0;
            replay_one(s, it);
            if (s->head_held) /* its header callback paused: the record stays */
                return 0;
        }
        if (s->rc != CURLE_OK && !failed && it->kind != REC_FAIL && it->kind != REC_END)
            failed = 1;
        s->held = it->next;
        free(it);
    }
    if (failed) { /* the program stopped it: over now */
        shim_sink_end(s);
        *rc = s->rc;
        return 1;
    }
    if (!s->held_end)
        return 0;
    *rc = s->rc != CURLE_OK ? s->rc : (CURLcode)s->held_result;
    return 1;
}

void shim_sink_drop_held(struct shim_sink *s)
{
    struct shim_sinkq_item *it, *next;

    for (it = s->held; it; it = next) {
        next = it->next;
        free(it);
    }
    s->held = NULL;
}
