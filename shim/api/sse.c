/* sse.c - see sse.h. */
#include "api/sse.h"

#include <errno.h>
#include <string.h>

void shim_sse_init(struct shim_sse *p, size_t max_line, size_t max_event,
                   shim_sse_event_fn fn, void *ctx)
{
    memset(p, 0, sizeof(*p));
    shim_buf_init(&p->line, max_line);
    shim_buf_init(&p->data, max_event);
    p->fn = fn;
    p->ctx = ctx;
}

void shim_sse_free(struct shim_sse *p)
{
    shim_buf_free(&p->line);
    shim_buf_free(&p->data);
}

/* A blank line: the event is complete. No data line, no event. */
static int dispatch(struct shim_sse *p)
{
    int rc = 0;

    if (p->data.len) {
        p->data.data[--p->data.len] = '\0'; /* the last line's "\n" */
        rc = p->fn(p->ctx, p->has_name ? p->name : NULL, p->data.data, p->data.len);
    }
    shim_buf_reset(&p->data);
    p->has_name = 0;
    return rc;
}

static int field(struct shim_sse *p, const char *f, size_t flen, const char *v, size_t vlen)
{
    int rc;

    if (flen == 4 && !memcmp(f, "data", 4)) {
        if (vlen + 1 > p->data.cap - p->data.len)
            return -E2BIG;
        rc = shim_buf_add(&p->data, v, vlen);
        return rc ? rc : shim_buf_add(&p->data, "\n", 1);
    }
    if (flen == 5 && !memcmp(f, "event", 5)) {
        if (vlen >= sizeof(p->name))
            return -EINVAL;
        memcpy(p->name, v, vlen);
        p->name[vlen] = '\0';
        p->has_name = 1;
    }
    return 0; /* id, retry and unknown fields: nothing codeshim uses */
}

static int line_done(struct shim_sse *p)
{
    const char *s = p->line.data ? p->line.data : "";
    size_t n = p->line.len;
    const char *colon;
    int rc;

    if (p->lines++ == 0 && n >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) {
        s += 3;
        n -= 3;
    }
    if (n == 0)
        rc = dispatch(p);
    else if (s[0] == ':')
        rc = 0; /* a comment: keep-alives */
    else if (!(colon = memchr(s, ':', n)))
        rc = field(p, s, n, "", 0);
    else {
        size_t f = (size_t)(colon - s), v = f + 1;
        if (v < n && s[v] == ' ')
            v++;
        rc = field(p, s, f, s + v, n - v);
    }
    shim_buf_reset(&p->line);
    return rc;
}

int shim_sse_feed(struct shim_sse *p, const char *buf, size_t n)
{
    size_t k;

    while (n && !p->err) {
        if (p->cr) {
            p->cr = 0;
            if (*buf == '\n') {
                buf++;
                n--;
                continue;
            }
        }
        for (k = 0; k < n && buf[k] != '\n' && buf[k] != '\r'; k++)
            ;
        if (k > p->line.cap - p->line.len) {
            p->err = -E2BIG;
            break;
        }
        if (k && (p->err = shim_buf_add(&p->line, buf, k)))
            break;
        if (k == n)
            break;
        p->cr = buf[k] == '\r';
        buf += k + 1;
        n -= k + 1;
        p->err = line_done(p);
    }
    return p->err;
}

int shim_sse_end(struct shim_sse *p)
{
    if (p->err)
        return p->err;
    shim_buf_reset(&p->line);
    return p->err = dispatch(p);
}
