/* Unit tests: buf.c (capped buffer), config.c (parsing), log redaction,
 * ids.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ids.h"
#include "base/log.h"
#include "system/config.h"

static void buf_cap(void **state)
{
    struct shim_buf b;
    char *p;
    size_t n;
    (void)state;

    shim_buf_init(&b, 10);
    assert_int_equal(shim_buf_adds(&b, "hello"), 0);
    assert_int_equal(shim_buf_addf(&b, "%d", 12345), 0);
    assert_int_equal(b.len, 10);
    assert_int_equal(shim_buf_add(&b, "x", 1), -E2BIG);
    assert_string_equal(b.data, "hello12345");
    p = shim_buf_take(&b, &n);
    assert_int_equal(n, 10);
    assert_string_equal(p, "hello12345");
    assert_null(b.data);
    free(p);
    shim_buf_init(&b, 1 << 20);
    assert_int_equal(shim_buf_addf(&b, "%0600d", 7), 0); /* > small stack buffer */
    assert_int_equal(b.len, 600);
    shim_buf_free(&b);
}

struct env { const char *k[8]; const char *v[8]; int warned; };

static const char *lookup(const char *name, void *ctx)
{
    struct env *e = ctx;
    int i;
    for (i = 0; i < 8 && e->k[i]; i++)
        if (!strcmp(e->k[i], name))
            return e->v[i];
    return NULL;
}

static void warn(const char *msg, void *ctx)
{
    (void)msg;
    ((struct env *)ctx)->warned++;
}

static void config_defaults_and_ranges(void **state)
{
    struct shim_config c;
    struct env e = {{0}, {0}, 0};
    (void)state;

    shim_config_parse(&c, lookup, warn, &e);
    assert_int_equal(c.max_loops, 10);
    assert_int_equal(c.exec_timeout_s, 60);
    assert_int_equal(c.disabled, 0);
    assert_string_equal(c.python, "/usr/bin/python3");
    assert_int_equal(e.warned, 0);

    e = (struct env){{"CODESHIM_MAX_LOOPS", "CODESHIM_EXEC_TIMEOUT", "CODESHIM_LOG",
                      "CODESHIM_DISABLE", "CODESHIM_OUTPUT_CAP"},
                     {"3", "abc", "debug", "1", "5"}, 0};
    shim_config_parse(&c, lookup, warn, &e);
    assert_int_equal(c.max_loops, 3);
    assert_int_equal(c.exec_timeout_s, 60); /* bad value: default + warning */
    assert_int_equal(c.log_level, SHIM_LOG_DEBUG);
    assert_int_equal(c.disabled, 1);
    assert_int_equal(c.output_cap, 20000); /* out of range */
    assert_int_equal(e.warned, 2);

    e = (struct env){{"CODESHIM_MAX_LOOPS"}, {"0"}, 0};
    shim_config_parse(&c, lookup, warn, &e);
    assert_int_equal(c.max_loops, 10);
    assert_int_equal(e.warned, 1);
}

/* CODESHIM_MAX_INFLIGHT: by default one per 32 MiB of half the memory,
 * 16..256, whatever the cores; 1..1024. */
static void config_max_inflight(void **state)
{
    struct shim_config c;
    struct env e = {{0}, {0}, 0};
    long long mem = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    long long want = mem / 2 / (32LL << 20);
    (void)state;

    want = want < 16 ? 16 : want > 256 ? 256 : want;
    shim_config_parse(&c, lookup, warn, &e);
    assert_int_equal(c.max_inflight, want);
    assert_true(c.max_inflight >= 16);
    e = (struct env){{"CODESHIM_MAX_INFLIGHT"}, {"3"}, 0};
    shim_config_parse(&c, lookup, warn, &e);
    assert_int_equal(c.max_inflight, 3);
    e = (struct env){{"CODESHIM_MAX_INFLIGHT"}, {"0"}, 0};
    shim_config_parse(&c, lookup, warn, &e);
    assert_true(c.max_inflight >= 2);
    assert_int_equal(e.warned, 1);
}

static void redaction(void **state)
{
    char s[] = "Authorization: Bearer sk-proj-abc123 key=sk-live_9 task-force e2b_xyz "
               "(shim_e2b_create), X-API-Key:e2b_k2";
    (void)state;
    shim_log_redact(s);
    assert_null(strstr(s, "abc123"));
    assert_null(strstr(s, "live_9"));
    assert_null(strstr(s, "xyz"));
    assert_null(strstr(s, "k2"));
    assert_non_null(strstr(s, "task-force"));
    assert_non_null(strstr(s, "shim_e2b_create"));
}

static void ids(void **state)
{
    char a[64], b[64];
    size_t i;
    (void)state;
    shim_id_make(a, sizeof(a), "ci_", 48);
    shim_id_make(b, sizeof(b), "ci_", 48);
    assert_int_equal(strlen(a), 51);
    assert_memory_equal(a, "ci_", 3);
    for (i = 3; i < 51; i++)
        assert_non_null(strchr("0123456789abcdef", a[i]));
    assert_string_not_equal(a, b);
    shim_id_make(a, 8, "cntr_", 48); /* truncates, stays terminated */
    assert_int_equal(strlen(a), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_cap),
        cmocka_unit_test(config_defaults_and_ranges),
        cmocka_unit_test(config_max_inflight),
        cmocka_unit_test(redaction),
        cmocka_unit_test(ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
