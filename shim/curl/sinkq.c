/* sinkq.c - see sinkq.h. One mutex per queue; the wake fd is written only
 * under it and only while open, so the reader may close it at any time
 * without the writer ever writing to a reused descriptor number. */
#include "curl/sinkq.h"

#include "curl/coro.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct shim_sinkq {
    pthread_mutex_t mu;
    pthread_cond_t room; /* a writer thread waits here while the queue is full */
    size_t want; /* a coroutine writer waits for room for this many bytes */
    int one_thread; /* writer and reader share a thread: only a coroutine waits */
    struct shim_sinkq_item *head, *tail;
    size_t bytes, cap;
    int refs;
    int stopped;
    int ended, result; /* the writer's end */
    int signaled; /* the wake fd holds a count */
    int fd;
};

int shim_sinkq_new(size_t cap, struct shim_sinkq **out)
{
    struct shim_sinkq *q = calloc(1, sizeof(*q));

    if (!q)
        return -ENOMEM;
    q->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (q->fd < 0) {
        int err = -errno;
        free(q);
        return err;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->room, NULL);
    q->cap = cap;
    q->refs = 1;
    *out = q;
    return 0;
}

void shim_sinkq_ref(struct shim_sinkq *q)
{
    pthread_mutex_lock(&q->mu);
    q->refs++;
    pthread_mutex_unlock(&q->mu);
}

static void free_items(struct shim_sinkq_item *it)
{
    while (it) {
        struct shim_sinkq_item *next = it->next;
        free(it);
        it = next;
    }
}

void shim_sinkq_unref(struct shim_sinkq *q)
{
    int last;

    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (!last)
        return;
    free_items(q->head);
    if (q->fd >= 0)
        close(q->fd);
    pthread_cond_destroy(&q->room);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Called locked. */
static void wake(struct shim_sinkq *q)
{
    uint64_t one = 1;

    if (q->signaled || q->fd < 0)
        return;
    if (write(q->fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
        q->signaled = 1;
}

int shim_sinkq_push(struct shim_sinkq *q, int kind, const void *a, size_t an,
                    const void *b, size_t bn)
{
    struct shim_sinkq_item *it;
    size_t n = an + bn;

    if (n < an || n > SIZE_MAX - sizeof(*it) - 1)
        return -ENOMEM;
    it = malloc(sizeof(*it) + n + 1);
    if (!it)
        return -ENOMEM;
    it->next = NULL;
    it->kind = kind;
    it->len = n;
    if (an)
        memcpy(it->data, a, an);
    if (bn)
        memcpy(it->data + an, b, bn);
    it->data[n] = '\0';
    pthread_mutex_lock(&q->mu);
    /* an item larger than the cap still goes through an empty queue; a
     * coroutine (the multi engine's) yields until the reader took some */
    while (!q->stopped && q->bytes && q->bytes + n > q->cap) {
        if (!shim_coro_self() && q->one_thread)
            break; /* the reader's own thread: over the cap (see sinkq.h) */
        if (!shim_coro_self()) {
            pthread_cond_wait(&q->room, &q->mu);
            continue;
        }
        q->want = n;
        pthread_mutex_unlock(&q->mu);
        shim_coro_yield();
        pthread_mutex_lock(&q->mu);
        q->want = 0;
    }
    if (q->stopped) {
        pthread_mutex_unlock(&q->mu);
        free(it);
        return -ECANCELED;
    }
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->bytes += n;
    wake(q);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int shim_sinkq_stopped(struct shim_sinkq *q)
{
    int s;

    pthread_mutex_lock(&q->mu);
    s = q->stopped;
    pthread_mutex_unlock(&q->mu);
    return s;
}

/* Called locked. */
static void unsignal(struct shim_sinkq *q)
{
    uint64_t v;

    if (q->signaled && q->fd >= 0 && read(q->fd, &v, sizeof(v)) < 0) {
        /* EAGAIN: nothing to clear */
    }
    q->signaled = 0;
}

void shim_sinkq_end(struct shim_sinkq *q, int result)
{
    pthread_mutex_lock(&q->mu);
    if (!q->ended) {
        q->ended = 1;
        q->result = result;
        wake(q);
    }
    pthread_mutex_unlock(&q->mu);
}

struct shim_sinkq_item *shim_sinkq_take(struct shim_sinkq *q, int *ended, int *result)
{
    struct shim_sinkq_item *it;

    pthread_mutex_lock(&q->mu);
    *ended = q->ended;
    *result = q->result;
    it = q->head;
    q->head = q->tail = NULL;
    q->bytes = 0;
    unsignal(q);
    pthread_cond_signal(&q->room);
    pthread_mutex_unlock(&q->mu);
    return it;
}

int shim_sinkq_pending(struct shim_sinkq *q)
{
    int p;

    pthread_mutex_lock(&q->mu);
    p = q->head != NULL || q->ended;
    pthread_mutex_unlock(&q->mu);
    return p;
}

int shim_sinkq_fd(struct shim_sinkq *q)
{
    int fd;

    pthread_mutex_lock(&q->mu);
    fd = q->fd;
    pthread_mutex_unlock(&q->mu);
    return fd;
}

void shim_sinkq_stop(struct shim_sinkq *q)
{
    struct shim_sinkq_item *drop;

    pthread_mutex_lock(&q->mu);
    q->stopped = 1;
    drop = q->head;
    q->head = q->tail = NULL;
    q->bytes = 0;
    if (q->fd >= 0)
        close(q->fd);
    q->fd = -1;
    q->signaled = 0;
    pthread_cond_broadcast(&q->room);
    pthread_mutex_unlock(&q->mu);
    free_items(drop);
}

void shim_sinkq_one_thread(struct shim_sinkq *q)
{
    pthread_mutex_lock(&q->mu);
    q->one_thread = 1;
    pthread_mutex_unlock(&q->mu);
}

int shim_sinkq_over(struct shim_sinkq *q)
{
    int o;

    pthread_mutex_lock(&q->mu);
    o = !q->stopped && q->bytes >= q->cap;
    pthread_mutex_unlock(&q->mu);
    return o;
}

int shim_sinkq_full(struct shim_sinkq *q)
{
    int f;

    pthread_mutex_lock(&q->mu);
    f = !q->stopped && q->want && q->bytes && q->bytes + q->want > q->cap;
    pthread_mutex_unlock(&q->mu);
    return f;
}
