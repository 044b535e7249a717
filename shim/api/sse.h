/* sse.h - an incremental parser for server-sent events (the upstream's
 * "stream": true answers): pure, no I/O.
 *
 * Bytes are fed as they arrive, split anywhere; each complete event is
 * handed to a callback with its "event:" name (NULL when it had none) and
 * its data ("data:" lines joined with "\n"). Lines end with LF, CR or
 * CRLF (a CRLF split across two feeds is one end); ":" lines are comments;
 * "id:" and "retry:" are ignored, as codeshim never reconnects. Memory is
 * bounded: a line longer than max_line or an event whose data exceeds
 * max_event fails the stream with -E2BIG. Each byte is looked at a bounded
 * number of times: linear in the input. */
#ifndef SHIM_SSE_H
#define SHIM_SSE_H

#include "base/buf.h"

#include <stddef.h>

#define SHIM_SSE_NAME_MAX 128 /* longer event names fail the stream */

/* One event; data is NUL-terminated (len bytes). Nonzero stops the parse
 * and is what shim_sse_feed returns. */
typedef int (*shim_sse_event_fn)(void *ctx, const char *name, const char *data, size_t len);

struct shim_sse {
    struct shim_buf line; /* the line being read */
    struct shim_buf data; /* the event's data so far, each line + "\n" */
    char name[SHIM_SSE_NAME_MAX];
    int has_name;
    int cr;      /* the last byte was CR: an LF right after belongs to it */
    int lines;   /* lines completed (the first may open with a BOM) */
    int err;     /* sticky: the first failure */
    shim_sse_event_fn fn;
    void *ctx;
};

void shim_sse_init(struct shim_sse *p, size_t max_line, size_t max_event,
                   shim_sse_event_fn fn, void *ctx);
void shim_sse_free(struct shim_sse *p);
/* 0, -E2BIG, -ENOMEM, -EINVAL (a name too long) or the callback's value;
 * after a failure every call returns it again. */
int shim_sse_feed(struct shim_sse *p, const char *buf, size_t n);
/* The stream ended: an event whose data lines are complete but which had
 * no closing blank line is still handed over (some servers close right
 * after the last line); a partial last line is dropped. */
int shim_sse_end(struct shim_sse *p);

#endif
