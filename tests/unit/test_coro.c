/* test_coro.c - coroutines (curl/coro.h): resume and yield hand the
 * thread back and forth, two coroutines keep their own stacks, a
 * coroutine's end is reported once, and its stack ends in a guard page
 * (an overflow faults, it writes over nothing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "curl/coro.h"

struct counter {
    int steps;
    int seen_self;
    struct shim_coro *me;
};

static void count_three(void *arg)
{
    struct counter *c = arg;
    int local = 100; /* lives on the coroutine's own stack across yields */

    for (c->steps = 1; c->steps <= 3; c->steps++) {
        c->seen_self += shim_coro_self() == c->me;
        local += c->steps;
        shim_coro_yield();
    }
    c->steps = local; /* 106 */
}

static void resume_and_yield_take_turns(void **state)
{
    struct counter a = {0}, b = {0};
    struct shim_coro *ca, *cb;
    int i;

    (void)state;
    assert_null(shim_coro_self());
    assert_int_equal(shim_coro_new(64 * 1024, count_three, &a, &ca), 0);
    assert_int_equal(shim_coro_new(64 * 1024, count_three, &b, &cb), 0);
    a.me = ca;
    b.me = cb;
    for (i = 1; i <= 3; i++) {
        assert_int_equal(shim_coro_resume(ca), 0);
        assert_int_equal(a.steps, i);
        assert_null(shim_coro_self()); /* back on the thread's own stack */
        assert_int_equal(shim_coro_resume(cb), 0);
        assert_int_equal(b.steps, i);
    }
    assert_int_equal(shim_coro_resume(ca), 1);
    assert_int_equal(shim_coro_resume(cb), 1);
    assert_int_equal(a.steps, 106);
    assert_int_equal(b.steps, 106);
    assert_int_equal(a.seen_self, 3);
    assert_int_equal(shim_coro_resume(ca), 1); /* over stays over */
    shim_coro_free(ca);
    shim_coro_free(cb);
}

static void never_started_is_freed(void **state)
{
    struct counter a = {0};
    struct shim_coro *c;

    (void)state;
    assert_int_equal(shim_coro_new(64 * 1024, count_three, &a, &c), 0);
    shim_coro_free(c);
    assert_int_equal(a.steps, 0);
}

static int deep(int n)
{
    volatile char pad[1024];

    memset((char *)pad, n, sizeof(pad));
    return n ? deep(n - 1) + pad[7] : 0;
}

static void overflow(void *arg)
{
    *(int *)arg = deep(10000); /* ~10 MB of frames on a 64 KiB stack */
}

static void an_overflow_hits_the_guard_page(void **state)
{
    pid_t pid;
    int st = 0;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct shim_coro *c;
        int out = 0;
        signal(SIGSEGV, SIG_DFL);
        if (shim_coro_new(64 * 1024, overflow, &out, &c) < 0)
            _exit(2);
        shim_coro_resume(c);
        _exit(0); /* not reached */
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    /* a fault (AddressSanitizer's build reports it and exits non-zero) */
    if (WIFSIGNALED(st))
        assert_int_equal(WTERMSIG(st), SIGSEGV);
    else
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resume_and_yield_take_turns),
        cmocka_unit_test(never_started_is_freed),
        cmocka_unit_test(an_overflow_hits_the_guard_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
