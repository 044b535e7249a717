/* Unit tests: clock.h, the one home of both clocks: the wall clock agrees
 * with time(), its deadlines carry nanoseconds over, and the monotonic
 * clock never goes back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <time.h>

#include "base/clock.h"

static void wall_clock(void **state)
{
    int64_t a = (int64_t)time(NULL), s = shim_clock_wall_s(), us = shim_clock_wall_us();
    int64_t b = (int64_t)time(NULL);
    (void)state;

    assert_true(s >= a && s <= b);
    assert_true(us / 1000000 >= a && us / 1000000 <= b);
}

static void wall_deadlines(void **state)
{
    struct timespec now, dl;
    int i;
    (void)state;

    for (i = 0; i < 50; i++) {
        clock_gettime(CLOCK_REALTIME, &now);
        shim_clock_wall_deadline(&dl, 1999);
        assert_true(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000L);
        /* 1.999 s later, give or take the time between the two reads */
        assert_true((dl.tv_sec - now.tv_sec) * 1000000000LL + (dl.tv_nsec - now.tv_nsec) >=
                    1999000000LL);
        assert_true(dl.tv_sec - now.tv_sec <= 3);
    }
    shim_clock_wall_deadline(&dl, 0);
    assert_true(dl.tv_nsec >= 0 && dl.tv_nsec < 1000000000L);
}

static void monotonic(void **state)
{
    int64_t a = shim_clock_ms(), b;
    double x = shim_clock_s(), y;
    (void)state;

    b = shim_clock_ms();
    y = shim_clock_s();
    assert_true(b >= a);
    assert_true(y >= x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wall_clock),
        cmocka_unit_test(wall_deadlines),
        cmocka_unit_test(monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
