/* Unit tests: sinkq.c (the loop-to-program queue) and sink.c's queued
 * mode: what a writer (a thread, or the multi engine's coroutine)
 * records is replayed by the reader, in order, through the program's
 * callbacks; the wake fd is readable exactly while something waits; the
 * queue's cap holds the writer back (a coroutine yields); stopping the
 * reader fails the writer at once; a failing callback ends the
 * transfer. Handles are fake pointer values (never dereferenced). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/coro.h"
#include "curl/sink.h"
#include "curl/sinkq.h"

#define H(x) ((CURL *)(uintptr_t)(x))

static int readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void fifo_and_wake_fd(void **state)
{
    struct shim_sinkq *q;
    struct shim_sinkq_item *it;
    int ended = 0, result = 0;

    (void)state;
    assert_int_equal(shim_sinkq_new(1 << 20, &q), 0);
    assert_false(readable(shim_sinkq_fd(q)));
    assert_int_equal(shim_sinkq_push(q, 1, "ab", 2, "cd", 2), 0);
    assert_int_equal(shim_sinkq_push(q, 2, "e", 1, NULL, 0), 0);
    assert_true(readable(shim_sinkq_fd(q)));
    assert_true(shim_sinkq_pending(q));
    it = shim_sinkq_take(q, &ended, &result);
    assert_false(ended);
    assert_false(readable(shim_sinkq_fd(q)));
    assert_non_null(it);
    assert_int_equal(it->kind, 1);
    assert_string_equal(it->data, "abcd");
    assert_non_null(it->next);
    assert_int_equal(it->next->kind, 2);
    assert_null(it->next->next);
    free(it->next);
    free(it);
    shim_sinkq_end(q, 7);
    assert_true(readable(shim_sinkq_fd(q)));
    assert_null(shim_sinkq_take(q, &ended, &result));
    assert_true(ended);
    assert_int_equal(result, 7);
    shim_sinkq_unref(q);
}

struct writer {
    struct shim_sinkq *q;
    int pushed;
    int last;
};

static void *push_many(void *arg)
{
    struct writer *w = arg;
    char chunk[100];
    int i;

    memset(chunk, 'x', sizeof(chunk));
    for (i = 0; i < 50; i++) {
        w->last = shim_sinkq_push(w->q, 1, chunk, sizeof(chunk), NULL, 0);
        if (w->last)
            break;
        __atomic_add_fetch(&w->pushed, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* The writer waits at the cap; taking makes room; all arrive in order. */
static void cap_holds_the_writer(void **state)
{
    struct writer w = {0};
    pthread_t t;
    size_t bytes = 0;
    int ended, result, spins = 0;

    (void)state;
    assert_int_equal(shim_sinkq_new(300, &w.q), 0);
    pthread_create(&t, NULL, push_many, &w);
    while (bytes < 50 * 100 && spins++ < 100000) {
        struct pollfd p = {shim_sinkq_fd(w.q), POLLIN, 0};
        struct shim_sinkq_item *it, *next;
        size_t batch = 0;
        poll(&p, 1, 1000);
        for (it = shim_sinkq_take(w.q, &ended, &result); it; it = next) {
            next = it->next;
            batch += it->len;
            free(it);
        }
        assert_true(batch <= 300); /* never more than the cap waited */
        bytes += batch;
    }
    pthread_join(t, NULL);
    assert_int_equal(w.last, 0);
    assert_int_equal(bytes, 50 * 100);
    shim_sinkq_unref(w.q);
}

/* Stopping wakes a writer blocked at the cap and fails every later push. */
static void stop_fails_the_writer(void **state)
{
    struct writer w = {0};
    pthread_t t;

    (void)state;
    assert_int_equal(shim_sinkq_new(250, &w.q), 0);
    shim_sinkq_ref(w.q);
    pthread_create(&t, NULL, push_many, &w);
    while (__atomic_load_n(&w.pushed, __ATOMIC_SEQ_CST) < 2)
        sched_yield();
    shim_sinkq_stop(w.q);
    pthread_join(t, NULL);
    assert_int_equal(w.last, -ECANCELED);
    assert_true(shim_sinkq_stopped(w.q));
    assert_int_equal(shim_sinkq_fd(w.q), -1);
    assert_int_equal(shim_sinkq_push(w.q, 1, "a", 1, NULL, 0), -ECANCELED);
    shim_sinkq_unref(w.q);
    shim_sinkq_unref(w.q);
}

/* ---- sink.c: record on a worker, replay here ---- */

struct seen {
    char body[4096];
    size_t len;
    int headers;
    pthread_t thread;
    int off_thread;
    size_t refuse_after; /* take no more once len passed this (0: never) */
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct seen *s = ud;

    if (!pthread_equal(pthread_self(), s->thread))
        s->off_thread++;
    if (s->refuse_after && s->len >= s->refuse_after)
        return 0;
    memcpy(s->body + s->len, p, sz * n);
    s->len += sz * n;
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct seen *s = ud;

    (void)p;
    if (!pthread_equal(pthread_self(), s->thread))
        s->off_thread++;
    s->headers++;
    return sz * n;
}

struct worker {
    struct shim_sinkq *q;
    struct shim_handle_view v;
    CURLcode rc, last;
    int events;
};

static void *record(void *arg)
{
    struct worker *w = arg;
    struct shim_sink s;
    char ev[32];
    int i;

    shim_sink_queue_into(w->q);
    shim_sink_init(&s, H(0x5151), &w->v, 0);
    shim_sink_begin(&s, 200, CURL_HTTP_VERSION_1_1, NULL, 0, "text/event-stream", -1);
    for (i = 0; i < w->events; i++) {
        snprintf(ev, sizeof(ev), "data: %d\n\n", i);
        w->last = shim_sink_body(&s, ev, strlen(ev));
    }
    w->rc = shim_sink_end(&s);
    shim_sink_queue_into(NULL);
    shim_sink_queue_end(w->q, w->rc);
    return NULL;
}

static CURLcode replay_all(struct shim_sink *out, struct shim_sinkq *q)
{
    CURLcode rc = CURLE_OK;
    int done = 0;

    while (!done) {
        struct pollfd p = {shim_sinkq_fd(q), POLLIN, 0};
        poll(&p, 1, 1000);
        done = shim_sink_replay(out, q, &rc);
    }
    return rc;
}

static void view_for(struct shim_handle_view *v, struct seen *s)
{
    memset(v, 0, sizeof(*v));
    v->url = (char *)"http://127.0.0.1:1/v1/responses"; /* never freed here */
    v->write_cb = on_body;
    v->write_data = s;
    v->header_cb = on_header;
    v->header_data = s;
}

static void queued_answer_replays_in_order(void **state)
{
    struct seen seen;
    struct worker w;
    struct shim_sink out;
    struct shim_handle_view pv;
    long code = 0;
    pthread_t t;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    memset(&w, 0, sizeof(w));
    seen.thread = pthread_self();
    w.events = 5;
    view_for(&w.v, NULL); /* the worker's view: no callbacks at all */
    w.v.write_cb = NULL;
    w.v.header_cb = NULL;
    view_for(&pv, &seen);
    assert_int_equal(shim_sinkq_new(64, &w.q), 0); /* tiny: back-pressure */
    shim_sink_init(&out, H(0x5151), &pv, 0);
    pthread_create(&t, NULL, record, &w);
    assert_int_equal(replay_all(&out, w.q), CURLE_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, CURLE_OK);
    assert_int_equal(seen.off_thread, 0);
    assert_true(seen.headers >= 2);
    assert_int_equal(seen.len, strlen("data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n"));
    assert_memory_equal(seen.body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n",
                        seen.len);
    assert_int_equal(shim_handles_get_answer(H(0x5151), CURLINFO_RESPONSE_CODE, &code), 1);
    assert_int_equal(code, 200);
    shim_sinkq_stop(w.q);
    shim_sinkq_unref(w.q);
    shim_handles_forget(H(0x5151));
}

/* The program's write callback refuses: the transfer ends with
 * CURLE_WRITE_ERROR at once, and the worker's next record fails. */
static void refusing_callback_ends_it(void **state)
{
    struct seen seen;
    struct worker w;
    struct shim_sink out;
    struct shim_handle_view pv;
    pthread_t t;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    memset(&w, 0, sizeof(w));
    seen.thread = pthread_self();
    seen.refuse_after = 9;
    w.events = 200;
    view_for(&w.v, NULL);
    w.v.write_cb = NULL;
    w.v.header_cb = NULL;
    view_for(&pv, &seen);
    assert_int_equal(shim_sinkq_new(64, &w.q), 0);
    shim_sink_init(&out, H(0x5252), &pv, 0);
    shim_sinkq_ref(w.q);
    pthread_create(&t, NULL, record, &w);
    assert_int_equal(replay_all(&out, w.q), CURLE_WRITE_ERROR);
    shim_sinkq_stop(w.q); /* what multi.c does once it is over */
    pthread_join(t, NULL);
    assert_int_equal(w.last, CURLE_ABORTED_BY_CALLBACK);
    assert_true(seen.len <= 18);
    shim_sinkq_unref(w.q);
    shim_sinkq_unref(w.q);
    shim_handles_forget(H(0x5252));
}

/* ---- a coroutine writer (the multi engine's) ---- */

struct cwriter {
    struct shim_sinkq *q;
    int pushed, rc;
};

static void coro_push(void *arg)
{
    struct cwriter *w = arg;
    static const char chunk[40] = {0};

    w->rc = shim_sinkq_push(w->q, 1, chunk, sizeof(chunk), NULL, 0);
    w->pushed++;
    w->rc |= shim_sinkq_push(w->q, 1, chunk, sizeof(chunk), NULL, 0); /* over the cap */
    w->pushed++;
}

static void coroutine_writer_yields_while_full(void **state)
{
    struct cwriter w = {0};
    struct shim_coro *c;
    struct shim_sinkq_item *it;
    int ended, result;

    (void)state;
    assert_int_equal(shim_sinkq_new(64, &w.q), 0);
    assert_false(shim_sinkq_full(w.q));
    assert_int_equal(shim_coro_new(64 * 1024, coro_push, &w, &c), 0);
    /* the second push does not fit: the coroutine yields, nothing blocks */
    assert_int_equal(shim_coro_resume(c), 0);
    assert_int_equal(w.pushed, 1);
    assert_true(shim_sinkq_full(w.q));
    assert_int_equal(shim_coro_resume(c), 0); /* still full: yields again */
    assert_int_equal(w.pushed, 1);
    it = shim_sinkq_take(w.q, &ended, &result);
    assert_non_null(it);
    free(it);
    assert_false(shim_sinkq_full(w.q));
    assert_int_equal(shim_coro_resume(c), 1); /* room: the push goes through */
    assert_int_equal(w.pushed, 2);
    assert_int_equal(w.rc, 0);
    assert_true(shim_sinkq_pending(w.q));
    shim_coro_free(c);
    shim_sinkq_unref(w.q);
}

/* The engine's queues: a writer on the reader's thread outside a
 * coroutine (libcurl's write callback) never waits, it goes over the
 * cap, which the reader sees to hold the source back. */
static void one_thread_writer_goes_over_the_cap(void **state)
{
    static const char chunk[40] = {0};
    struct shim_sinkq *q;
    struct shim_sinkq_item *it;
    int ended, result;

    (void)state;
    assert_int_equal(shim_sinkq_new(64, &q), 0);
    shim_sinkq_one_thread(q);
    assert_int_equal(shim_sinkq_push(q, 1, chunk, sizeof(chunk), NULL, 0), 0);
    assert_false(shim_sinkq_over(q));
    assert_int_equal(shim_sinkq_push(q, 1, chunk, sizeof(chunk), NULL, 0), 0); /* no wait */
    assert_true(shim_sinkq_over(q));
    it = shim_sinkq_take(q, &ended, &result);
    assert_non_null(it);
    assert_non_null(it->next);
    free(it->next);
    free(it);
    assert_false(shim_sinkq_over(q));
    shim_sinkq_unref(q);
}

static void coroutine_writer_stopped_while_full(void **state)
{
    struct cwriter w = {0};
    struct shim_coro *c;

    (void)state;
    assert_int_equal(shim_sinkq_new(64, &w.q), 0);
    assert_int_equal(shim_coro_new(64 * 1024, coro_push, &w, &c), 0);
    assert_int_equal(shim_coro_resume(c), 0);
    shim_sinkq_stop(w.q); /* the reader stops: the waiting push fails */
    assert_false(shim_sinkq_full(w.q));
    assert_int_equal(shim_coro_resume(c), 1);
    assert_int_equal(w.rc, -ECANCELED);
    shim_coro_free(c);
    shim_sinkq_unref(w.q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifo_and_wake_fd),
        cmocka_unit_test(cap_holds_the_writer),
        cmocka_unit_test(stop_fails_the_writer),
        cmocka_unit_test(queued_answer_replays_in_order),
        cmocka_unit_test(refusing_callback_ends_it),
        cmocka_unit_test(coroutine_writer_yields_while_full),
        cmocka_unit_test(coroutine_writer_stopped_while_full),
        cmocka_unit_test(one_thread_writer_goes_over_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
