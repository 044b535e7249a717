/* buf.h - growable byte buffer with a hard cap (curl's dynbuf idea).
 *
 * Every buffer codeshim grows from untrusted input (upstream bodies, sandbox
 * output, request bodies) has a cap, so a runaway peer cannot exhaust the
 * host program's memory. The buffer owns its memory; shim_buf_free releases
 * it. On any failure the buffer keeps its previous contents. */
#ifndef SHIM_BUF_H
#define SHIM_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct shim_buf {
    char *data;   /* NUL-terminated when non-NULL */
    size_t len;
    size_t alloc;
    size_t cap;   /* maximum len; appends beyond it fail with -E2BIG */
};

void shim_buf_init(struct shim_buf *b, size_t cap);
void shim_buf_free(struct shim_buf *b);
void shim_buf_reset(struct shim_buf *b); /* len = 0, memory kept */
/* 0, -E2BIG (cap reached: nothing appended) or -ENOMEM. */
int shim_buf_add(struct shim_buf *b, const void *p, size_t n);
int shim_buf_adds(struct shim_buf *b, const char *s);
int shim_buf_addf(struct shim_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hands the data to the caller (free() it); the buffer is empty after. */
char *shim_buf_take(struct shim_buf *b, size_t *len);

#endif
