/* buf.c - capped growable buffer; see buf.h. */
#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shim_buf_init(struct shim_buf *b, size_t cap)
{
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    b->cap = cap;
}

void shim_buf_free(struct shim_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
}

void shim_buf_reset(struct shim_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static int grow(struct shim_buf *b, size_t need)
{
    size_t n = b->alloc ? b->alloc : 256;
    char *p;

    while (n < need + 1) {
        if (n > ((size_t)-1) / 2)
            return -ENOMEM;
        n *= 2;
    }
    if (n > b->cap + 1)
        n = b->cap + 1;
    p = realloc(b->data, n);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->alloc = n;
    return 0;
}

int shim_buf_add(struct shim_buf *b, const void *p, size_t n)
{
    if (n > b->cap || b->len > b->cap - n)
        return -E2BIG;
    if (b->len + n + 1 > b->alloc) {
        int rc = grow(b, b->len + n);
        if (rc)
            return rc;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int shim_buf_adds(struct shim_buf *b, const char *s)
{
    return shim_buf_add(b, s, strlen(s));
}

int shim_buf_addf(struct shim_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof(small))
        return shim_buf_add(b, small, (size_t)n);
    {
        char *big = malloc((size_t)n + 1);
        int rc;
        if (!big)
            return -ENOMEM;
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        rc = shim_buf_add(b, big, (size_t)n);
        free(big);
        return rc;
    }
}

char *shim_buf_take(struct shim_buf *b, size_t *len)
{
    char *p = b->data;

    if (!p) {
        p = calloc(1, 1);
        if (!p)
            return NULL;
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    return p;
}
