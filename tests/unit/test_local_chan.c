/* test_local_chan.c - the local sandbox's reply frames (local_chan.c
 * shim_local_split_reply) as the host checks them before any part becomes
 * a cJSON tree: what worker.py sends at its limits is taken; a part larger,
 * with more JSON values or deeper than worker.py can send is refused. The
 * model's code can write such frames (it runs in the worker process), so
 * each refusal stands for memory the host program does not spend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/frame.h"
#include "sandbox/local/local_int.h"

#include <cjson/cJSON.h>

#define SEQ 7

static struct shim_local *new_local(void)
{
    struct shim_local *l = calloc(1, sizeof(*l));

    assert_non_null(l);
    l->seq = SEQ;
    l->p.output_cap = 20000;
    return l;
}

static void put32(struct shim_buf *b, size_t v)
{
    unsigned char p[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    assert_int_equal(shim_buf_add(b, p, 4), 0);
}

/* An 'R' frame as worker.py builds it. */
static void frame(struct shim_buf *b, char kind, const struct shim_buf *meta,
                  const struct shim_buf *worker, size_t out_len)
{
    shim_buf_init(b, (size_t)64 << 20);
    shim_buf_adds(b, "R");
    put32(b, SEQ);
    shim_buf_add(b, &kind, 1);
    shim_buf_add(b, "\0", 1);
    put32(b, meta->len);
    shim_buf_add(b, meta->data, meta->len);
    put32(b, worker->len);
    if (worker->len)
        shim_buf_add(b, worker->data, worker->len);
    while (out_len--)
        shim_buf_add(b, "o", 1);
}

/* meta naming nfiles files of name_len bytes each (commas in them). */
static void meta_of(struct shim_buf *m, int nfiles, size_t name_len)
{
    int i;
    size_t k;

    shim_buf_init(m, (size_t)64 << 20);
    shim_buf_adds(m, "{\"files\":[");
    for (i = 0; i < nfiles; i++) {
        shim_buf_adds(m, i ? ",\"" : "\"");
        for (k = 0; k < name_len; k++)
            shim_buf_add(m, k % 4 ? "f" : ",", 1);
        shim_buf_adds(m, "\"");
    }
    shim_buf_adds(m, "],\"changed\":true,\"exit\":\"\"}");
}

/* worker JSON with nimages images of data_len base64 bytes each. */
static void worker_of(struct shim_buf *w, int nimages, size_t data_len)
{
    int i;
    size_t k;

    shim_buf_init(w, (size_t)64 << 20);
    shim_buf_adds(w, "{\"status\":\"ok\",\"images\":[");
    for (i = 0; i < nimages; i++) {
        shim_buf_adds(w, i ? ",{\"mime\":\"image/png\",\"data\":\""
                           : "{\"mime\":\"image/png\",\"data\":\"");
        for (k = 0; k < data_len; k++)
            shim_buf_add(w, "A", 1);
        shim_buf_adds(w, "\"}");
    }
    shim_buf_adds(w, "]}");
}

static void text(struct shim_buf *b, const char *s)
{
    shim_buf_init(b, (size_t)64 << 20);
    shim_buf_adds(b, s);
}

static int split(const struct shim_local *l, char kind, struct shim_buf *meta,
                 struct shim_buf *worker, size_t out_len, struct shim_local_reply *r)
{
    struct shim_buf f;
    int rc;

    frame(&f, kind, meta, worker, out_len);
    rc = shim_local_split_reply(l, &f, r);
    if (rc == 0) {
        assert_int_equal(r->out_len, out_len);
        shim_local_reply_free(r);
    }
    shim_buf_free(&f);
    shim_buf_free(meta);
    shim_buf_free(worker);
    return rc;
}

/* Everything worker.py may send at once: 1000 file names of 512 KB in all,
 * 16 images of 12 MB in all, output at the cap. */
static void replies_at_the_limits_are_taken(void **state)
{
    struct shim_local *l = new_local();
    struct shim_local_reply r;
    struct shim_buf m, w;
    (void)state;

    meta_of(&m, 1000, 500);
    worker_of(&w, 16, (12u << 20) / 16);
    assert_int_equal(split(l, 'D', &m, &w, 2 * (20000 + OUT_SLACK) + 40, &r), 0);
    meta_of(&m, 0, 0);
    text(&w, "");
    assert_int_equal(split(l, 'T', &m, &w, 5, &r), 0);
    free(l);
}

/* A hostile worker's attack: a long array where the images go. 10 MB of
 * "0," would be 5 million cJSON items (over 300 MB). */
static void many_values_are_refused(void **state)
{
    struct shim_local *l = new_local();
    struct shim_local_reply r;
    struct shim_buf m, w;
    size_t i;
    (void)state;

    meta_of(&m, 1, 4);
    shim_buf_init(&w, (size_t)64 << 20);
    shim_buf_adds(&w, "{\"status\":\"ok\",\"images\":[");
    for (i = 0; i < (5u << 20); i++)
        shim_buf_add(&w, "0,", 2);
    shim_buf_adds(&w, "0]}");
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);

    /* 17 images: one more object than worker.py sends is still fine, 100 not */
    meta_of(&m, 1, 4);
    worker_of(&w, 17, 8);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), 0);
    meta_of(&m, 1, 4);
    worker_of(&w, 100, 8);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);

    /* meta: 2000 names */
    meta_of(&m, 2000, 4);
    worker_of(&w, 0, 0);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);
    free(l);
}

static void deep_or_large_parts_are_refused(void **state)
{
    struct shim_local *l = new_local();
    struct shim_local_reply r;
    struct shim_buf m, w;
    (void)state;

    meta_of(&m, 1, 4);
    text(&w, "{\"status\":\"ok\",\"images\":[{\"data\":[[[]]]}]}");
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);
    text(&m, "{\"files\":[[]],\"changed\":false}");
    worker_of(&w, 0, 0);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);
    /* images over 12 MB in all */
    meta_of(&m, 1, 4);
    worker_of(&w, 2, (6u << 20) + 4096);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);
    /* names over 512 KB in all */
    meta_of(&m, 100, 6000);
    worker_of(&w, 0, 0);
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), -EPROTO);
    /* output over the head, tail and note the supervisor keeps */
    meta_of(&m, 1, 4);
    worker_of(&w, 0, 0);
    assert_int_equal(split(l, 'D', &m, &w, 2 * (20000 + OUT_SLACK) + 65, &r), -EPROTO);
    /* a worker part in a reply that has none */
    meta_of(&m, 1, 4);
    worker_of(&w, 0, 0);
    assert_int_equal(split(l, 'X', &m, &w, 0, &r), -EPROTO);
    /* quotes and brackets inside strings are text, not structure */
    meta_of(&m, 1, 4);
    text(&w, "{\"status\":\"ok\",\"images\":[],\"x\":\"[[[[,,,,\\\"{{{{\"}");
    assert_int_equal(split(l, 'D', &m, &w, 0, &r), 0);
    free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replies_at_the_limits_are_taken),
        cmocka_unit_test(many_values_are_refused),
        cmocka_unit_test(deep_or_large_parts_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
