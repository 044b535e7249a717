/* Unit tests: xfer.c, the program's limits on an intercepted transfer
 * (xfer.h): the deadline and its words, the progress callback and its
 * answers, the thread's stack of transfers. Handles are fake
 * pointer values: xfer.c never dereferences them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "base/clock.h"
#include "curl/sinkq.h"
#include "curl/xfer.h"

#define H(x) ((CURL *)(uintptr_t)(x))

struct seen {
    int calls, answer;
    curl_off_t dltotal, dlnow, ultotal, ulnow;
    struct shim_xfer *x; /* checked again from inside the callback */
};

static int xferinfo(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct seen *s = ud;

    s->calls++;
    s->dltotal = dt;
    s->dlnow = dn;
    s->ultotal = ut;
    s->ulnow = un;
    if (s->x) /* a nested check never calls back again */
        shim_xfer_check(s->x);
    return s->answer;
}

static int progress(void *ud, double dt, double dn, double ut, double un)
{
    return xferinfo(ud, (curl_off_t)dt, (curl_off_t)dn, (curl_off_t)ut, (curl_off_t)un);
}

static void view(struct shim_handle_view *v, long timeout_ms, struct seen *s)
{
    memset(v, 0, sizeof(*v));
    v->body_len = 123;
    v->lim.timeout_ms = timeout_ms;
    v->lim.noprogress = s == NULL;
    v->lim.xferinfo = s ? xferinfo : NULL;
    v->lim.progress_data = s;
}

static void no_limits_no_calls(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer x;

    (void)state;
    view(&v, 0, NULL);
    shim_xfer_begin(&x, H(0x10), &v, shim_clock_s());
    assert_int_equal(shim_xfer_left_ms(&x), 0);
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    assert_int_equal(shim_xfer_check(NULL), CURLE_OK);
    assert_int_equal(shim_xfer_left_ms(NULL), 0);
    shim_xfer_end(&x);
}

static void deadline_trips_in_libcurls_words(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer x;

    (void)state;
    view(&v, 1000, NULL);
    shim_xfer_begin(&x, H(0x11), &v, shim_clock_s());
    assert_true(shim_xfer_left_ms(&x) > 0 && shim_xfer_left_ms(&x) <= 1000);
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    shim_xfer_end(&x);

    shim_xfer_begin(&x, H(0x11), &v, shim_clock_s() - 2.0); /* begun 2 s ago */
    x.dlnow = 7;
    assert_int_equal(shim_xfer_left_ms(&x), -1);
    assert_int_equal(shim_xfer_check(&x), CURLE_OPERATION_TIMEDOUT);
    assert_non_null(strstr(x.message, "Operation timed out after "));
    assert_non_null(strstr(x.message, " milliseconds with 7 bytes received"));
    x.rc = CURLE_OK;
    x.dltotal = 50;
    assert_int_equal(shim_xfer_check(&x), CURLE_OPERATION_TIMEDOUT);
    assert_non_null(strstr(x.message, "with 7 out of 50 bytes received"));
    shim_xfer_end(&x);
}

static void callback_counts_and_aborts(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer x;
    struct seen s = {0};

    (void)state;
    view(&v, 0, &s);
    shim_xfer_begin(&x, H(0x12), &v, shim_clock_s());
    x.dltotal = 40;
    x.dlnow = 10;
    s.x = &x;
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    assert_int_equal(s.calls, 1); /* the nested check called nothing */
    assert_int_equal(s.dltotal, 40);
    assert_int_equal(s.dlnow, 10);
    assert_int_equal(s.ultotal, 123);
    assert_int_equal(s.ulnow, 123);
    s.answer = CURL_PROGRESSFUNC_CONTINUE; /* libcurl's "go on" */
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    s.answer = 1;
    assert_int_equal(shim_xfer_check(&x), CURLE_ABORTED_BY_CALLBACK);
    assert_string_equal(x.message, "Callback aborted");
    assert_int_equal(s.calls, 3);
    s.answer = 0; /* tripped for good: no more calls */
    assert_int_equal(shim_xfer_check(&x), CURLE_ABORTED_BY_CALLBACK);
    assert_int_equal(s.calls, 3);
    shim_xfer_end(&x);
}

static void old_progress_and_noprogress(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer x;
    struct seen s = {0};

    (void)state;
    view(&v, 0, &s);
    v.lim.xferinfo = NULL;
    v.lim.progress = progress;
    s.answer = 1;
    shim_xfer_begin(&x, H(0x13), &v, shim_clock_s());
    assert_int_equal(shim_xfer_check(&x), CURLE_ABORTED_BY_CALLBACK);
    assert_int_equal(s.calls, 1);
    shim_xfer_end(&x);
    v.lim.noprogress = 1; /* set, but not asked for */
    shim_xfer_begin(&x, H(0x13), &v, shim_clock_s());
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    assert_int_equal(s.calls, 1);
    shim_xfer_end(&x);
}

static void nested_transfers_stack(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer a, b;

    (void)state;
    view(&v, 0, NULL);
    assert_null(shim_xfer_find(H(0x20)));
    shim_xfer_begin(&a, H(0x20), &v, shim_clock_s());
    shim_xfer_begin(&b, H(0x21), &v, shim_clock_s()); /* a callback's own transfer */
    assert_ptr_equal(shim_xfer_find(H(0x20)), &a);
    assert_ptr_equal(shim_xfer_find(H(0x21)), &b);
    shim_xfer_end(&b);
    assert_null(shim_xfer_find(H(0x21)));
    assert_ptr_equal(shim_xfer_find(H(0x20)), &a);
    shim_xfer_end(&a);
    assert_null(shim_xfer_find(H(0x20)));
}

/* A multi worker's transfer stops once its queue is stopped (the program
 * removed it): CURLE_ABORTED_BY_CALLBACK, and only transfers begun while
 * the queue was set watch it. */
static void stopped_queue_cancels(void **state)
{
    struct shim_handle_view v;
    struct shim_xfer x, y;
    struct shim_sinkq *q;

    (void)state;
    assert_int_equal(shim_sinkq_new(1024, &q), 0);
    view(&v, 0, NULL);
    shim_xfer_cancel_by(q);
    shim_xfer_begin(&x, H(1), &v, shim_clock_s());
    shim_xfer_cancel_by(NULL);
    shim_xfer_begin(&y, H(2), &v, shim_clock_s());
    assert_int_equal(shim_xfer_check(&x), CURLE_OK);
    shim_sinkq_stop(q);
    assert_int_equal(shim_xfer_check(&x), CURLE_ABORTED_BY_CALLBACK);
    assert_non_null(strstr(x.message, "removed"));
    assert_int_equal(shim_xfer_check(&y), CURLE_OK);
    shim_xfer_end(&y);
    shim_xfer_end(&x);
    shim_sinkq_unref(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_limits_no_calls),
        cmocka_unit_test(deadline_trips_in_libcurls_words),
        cmocka_unit_test(callback_counts_and_aborts),
        cmocka_unit_test(old_progress_and_noprogress),
        cmocka_unit_test(nested_transfers_stack),
        cmocka_unit_test(stopped_queue_cancels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
