/* sink.c - see sink.h. */
#include "sink.h"

#include "clock.h"
#include "log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

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
    s->h = h;
    s->v = v;
    s->t0 = t0;
    if (v->errorbuffer) /* libcurl empties it at the start of every transfer */
        v->errorbuffer[0] = '\0';
}

static void set_error(struct shim_sink *s, const char *msg)
{
    if (s->v->errorbuffer)
        snprintf(s->v->errorbuffer, CURL_ERROR_SIZE, "%s", msg);
}

CURLcode shim_sink_fail(struct shim_sink *s, CURLcode rc, const char *message)
{
    if (s->rc == CURLE_OK) {
        s->rc = rc;
        snprintf(s->message, sizeof(s->message), "%s", message);
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

static CURLcode header_line(struct shim_sink *s, const char *p, size_t n)
{
    const struct shim_handle_view *v = s->v;

    if (v->header_cb) {
        if (v->header_cb((char *)p, 1, n, v->header_data) != n)
            return shim_sink_fail(s, CURLE_WRITE_ERROR, "Failed writing header");
    } else if (v->header_data) {
        if (call_write(v->write_cb, p, n, v->header_data) != n)
            return shim_sink_fail(s, CURLE_WRITE_ERROR, "Failed writing header");
    }
    if (v->include_header && call_write(v->write_cb, p, n, v->write_data) != n)
        return shim_sink_fail(s, CURLE_WRITE_ERROR, "Failed writing header");
    return CURLE_OK;
}

static void publish(struct shim_sink *s)
{
    shim_handles_set_answer(s->h, &s->info);
}

CURLcode shim_sink_begin(struct shim_sink *s, long status, long http_version,
                         const char *upstream_head, size_t head_len,
                         const char *content_type, long long body_len)
{
    const char *url = s->v->url ? s->v->url : "";
    struct shim_buf block;
    const char *p, *end;

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
    s->info.total_time = shim_clock_s() - s->t0;
    publish(s); /* before the first callback: the program may ask getinfo */
    while (p < end && s->rc == CURLE_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
        header_line(s, p, n);
        p += n;
    }
    if (s->rc == CURLE_OK && s->v->failonerror && status >= 400) {
        char msg[96];
        snprintf(msg, sizeof(msg), "The requested URL returned error: %ld", status);
        shim_sink_fail(s, CURLE_HTTP_RETURNED_ERROR, msg);
    }
    shim_buf_free(&block);
    return s->rc;
}

CURLcode shim_sink_body(struct shim_sink *s, const char *p, size_t n)
{
    while (n && s->rc == CURLE_OK) {
        size_t chunk = n > CURL_MAX_WRITE_SIZE ? CURL_MAX_WRITE_SIZE : n;
        size_t took = call_write(s->v->write_cb, p, chunk, s->v->write_data);
        if (took != chunk) {
            if (took == CURL_WRITEFUNC_PAUSE)
                LOG_WARN("the program paused a synthetic transfer; "
                         "codeshim cannot pause, failing it");
            return shim_sink_fail(s, CURLE_WRITE_ERROR,
                                  "Failure writing output to destination");
        }
        s->info.size_download += (curl_off_t)chunk;
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
    s->info.total_time = shim_clock_s() - s->t0;
    publish(s);
    if (s->rc == CURLE_OK && s->v->write_cb == NULL)
        fflush(s->v->write_data ? (FILE *)s->v->write_data : stdout);
    return s->rc;
}
