/* sinkq.h - a bounded queue of opaque items from one writer thread to one
 * reader thread, with a wake-up file descriptor.
 *
 * It carries what an intercepted transfer's loop produces (sink.c's
 * recorded deliveries) to the replay into the program's callbacks. The
 * writer is a coroutine of the multi engine (multi.c: the same thread as
 * the reader) or a thread. The queue holds at most cap bytes: the writer
 * waits while it is full (back-pressure: a program that reads slowly
 * slows the loop down, memory stays bounded), a coroutine by yielding, a
 * thread on a condition variable. The wake fd (an eventfd) is readable
 * exactly while items wait, so the program's event loop can sleep on it.
 *
 * Either side may stop: the reader when it wants nothing more (the
 * transfer was removed, or the program's callback failed), which closes
 * the wake fd and makes every later push fail at once; the writer ends
 * with its last push. The queue is reference counted; each side drops its
 * reference when done with it, in any order. */
#ifndef SHIM_SINKQ_H
#define SHIM_SINKQ_H

#include <stddef.h>

struct shim_sinkq;

struct shim_sinkq_item {
    struct shim_sinkq_item *next;
    int kind; /* the writer's tag */
    size_t len;
    char data[]; /* len bytes, then a NUL */
};

/* A queue holding one reference: 0, -ENOMEM or -errno of eventfd. */
int shim_sinkq_new(size_t cap, struct shim_sinkq **out);
void shim_sinkq_ref(struct shim_sinkq *q);
void shim_sinkq_unref(struct shim_sinkq *q); /* the last one frees it */

/* Writer: appends an item made of a (an bytes) then b (bn bytes); waits
 * while the queue is over its cap (a coroutine yields). 0, -ECANCELED once the reader has
 * stopped, -ENOMEM. */
int shim_sinkq_push(struct shim_sinkq *q, int kind, const void *a, size_t an,
                    const void *b, size_t bn);
/* Writer: 1 once the reader has stopped. */
int shim_sinkq_stopped(struct shim_sinkq *q);
/* Writer: the end, with the writer's result; nothing is pushed after it.
 * Never fails (it allocates nothing), so the reader always learns it. */
void shim_sinkq_end(struct shim_sinkq *q, int result);

/* Reader: every waiting item, oldest first (the caller frees each with
 * free()); NULL when none. Empties the wake fd and unblocks the writer.
 * *ended is set to 1 (and *result to the writer's) when the writer has
 * ended and these are its last items, else 0. */
struct shim_sinkq_item *shim_sinkq_take(struct shim_sinkq *q, int *ended, int *result);
/* Reader: 1 while items or the end wait to be taken. */
int shim_sinkq_pending(struct shim_sinkq *q);
/* Reader: the wake fd (-1 once stopped). Owned by the queue. */
int shim_sinkq_fd(struct shim_sinkq *q);
/* Reader: wants nothing more. Drops waiting items, closes the wake fd,
 * wakes a blocked writer. */
void shim_sinkq_stop(struct shim_sinkq *q);

/* The writer runs on the reader's thread (the multi engine): as a
 * coroutine it yields while the queue is full; outside one (a libcurl
 * callback the reader's drive runs) it never waits but goes over the cap,
 * and the reader holds back the source (shim_sinkq_over). */
void shim_sinkq_one_thread(struct shim_sinkq *q);
/* Reader: 1 while the queue holds its cap or more. */
int shim_sinkq_over(struct shim_sinkq *q);
/* Reader: 1 while a coroutine writer waits for room (it is resumed once
 * the reader took enough). */
int shim_sinkq_full(struct shim_sinkq *q);

#endif
