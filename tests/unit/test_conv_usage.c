/* Unit tests: summing usage over upstream calls (conv.c
 * shim_conv_sum_usage) and the Responses usage built from the sum
 * (responses.c shim_responses_usage): the sums, and the caps that keep a
 * hostile usage object from costing more than a normal one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "api/responses.h"
#include "base/buf.h"
#include "base/json.h"

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static void sum(struct shim_conv *cv, const char *usage)
{
    cJSON *u = J(usage);
    shim_conv_sum_usage(cv, u);
    cJSON_Delete(u);
}

static double num(const cJSON *o, const char *sub, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        sub ? cJSON_GetObjectItemCaseSensitive(o, sub) : o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* Fields of o, all levels together. */
static int fields(const cJSON *o)
{
    const cJSON *it;
    int n = 0;

    cJSON_ArrayForEach(it, o)
        n += 1 + (cJSON_IsObject(it) ? fields(it) : 0);
    return n;
}

/* Names that appear more than once in one object, anywhere in o. */
static int duplicate_keys(const cJSON *o)
{
    const cJSON *a, *b;
    int n = 0;

    for (a = o ? o->child : NULL; a; a = a->next) {
        for (b = a->next; b; b = b->next)
            n += a->string && b->string && !strcmp(a->string, b->string);
        if (cJSON_IsObject(a))
            n += duplicate_keys(a);
    }
    return n;
}

static void sums_nested_usage(void **state)
{
    struct shim_conv cv = {0};
    (void)state;

    sum(&cv, "{\"input_tokens\":10,\"output_tokens\":5,\"total_tokens\":15,"
             "\"input_tokens_details\":{\"cached_tokens\":2},"
             "\"output_tokens_details\":{\"reasoning_tokens\":1},"
             "\"note\":\"text is not summed\",\"flag\":true}");
    sum(&cv, "{\"input_tokens\":20,\"output_tokens\":7,\"total_tokens\":27,"
             "\"input_tokens_details\":{\"cached_tokens\":3,\"cache_write_tokens\":4},"
             "\"output_tokens_details\":{\"reasoning_tokens\":2},"
             "\"cost_details\":{\"upstream\":{\"usd\":0.5}}}");
    sum(&cv, "[1,2]"); /* not an object: ignored */
    assert_int_equal((int)num(cv.usage, NULL, "input_tokens"), 30);
    assert_int_equal((int)num(cv.usage, NULL, "output_tokens"), 12);
    assert_int_equal((int)num(cv.usage, NULL, "total_tokens"), 42);
    assert_int_equal((int)num(cv.usage, "input_tokens_details", "cached_tokens"), 5);
    assert_int_equal((int)num(cv.usage, "input_tokens_details", "cache_write_tokens"), 4);
    assert_int_equal((int)num(cv.usage, "output_tokens_details", "reasoning_tokens"), 3);
    assert_true(num(cJSON_GetObjectItemCaseSensitive(cv.usage, "cost_details"),
                    "upstream", "usd") == 0.5);
    assert_null(cJSON_GetObjectItemCaseSensitive(cv.usage, "note"));
    assert_null(cJSON_GetObjectItemCaseSensitive(cv.usage, "flag"));
    shim_conv_free(&cv);
}

static void conflicting_types_keep_the_sum(void **state)
{
    struct shim_conv cv = {0};
    (void)state;

    sum(&cv, "{\"a\":1,\"b\":{\"x\":1}}");
    sum(&cv, "{\"a\":{\"y\":2},\"b\":3}");
    sum(&cv, "{\"a\":4,\"b\":{\"x\":5}}");
    assert_int_equal((int)num(cv.usage, NULL, "a"), 5);
    assert_int_equal((int)num(cv.usage, "b", "x"), 6);
    assert_int_equal(fields(cv.usage), 3);
    shim_conv_free(&cv);
}

/* A usage object of n fields "k0".."k<n-1>" after the real ones. */
static char *wide_usage(int n, int value)
{
    struct shim_buf b;
    int i;

    shim_buf_init(&b, (size_t)64 << 20);
    shim_buf_addf(&b, "{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":%d}",
                  value, value);
    for (i = 0; i < n; i++)
        shim_buf_addf(&b, ",\"k%d\":%d", i, value);
    shim_buf_adds(&b, "}");
    return shim_buf_take(&b, NULL);
}

/* 100,000 fields in each of two replies: the sum stops at the cap, the
 * fields before it are summed right, and the work is that of the cap
 * (quadratic in the fields, this took minutes). */
static void wide_usage_is_capped(void **state)
{
    struct shim_conv cv = {0};
    char *u = wide_usage(100000, 1);
    (void)state;

    sum(&cv, u);
    free(u);
    u = wide_usage(100000, 2);
    sum(&cv, u);
    free(u);
    assert_int_equal(fields(cv.usage), SHIM_USAGE_MAX_FIELDS);
    assert_int_equal((int)num(cv.usage, NULL, "input_tokens"), 3);
    assert_int_equal((int)num(cv.usage, "input_tokens_details", "cached_tokens"), 3);
    /* 3 real fields, then k0..k252 */
    assert_int_equal((int)num(cv.usage, NULL, "k0"), 3);
    assert_int_equal((int)num(cv.usage, NULL, "k252"), 3);
    assert_null(cJSON_GetObjectItemCaseSensitive(cv.usage, "k253"));
    assert_true(cv.usage_warned);
    shim_conv_free(&cv);
}

/* Many replies each with new field names: the sum never outgrows the cap. */
static void sum_never_outgrows_the_cap(void **state)
{
    struct shim_conv cv = {0};
    char u[64];
    int i;
    (void)state;

    for (i = 0; i < 1000; i++) {
        snprintf(u, sizeof(u), "{\"output_tokens\":1,\"f%d\":1}", i);
        sum(&cv, u);
    }
    assert_int_equal(fields(cv.usage), SHIM_USAGE_MAX_FIELDS);
    assert_int_equal((int)num(cv.usage, NULL, "output_tokens"), 1000);
    shim_conv_free(&cv);
}

/* Nesting beyond the cap is not summed; the levels above it are. */
static void deep_usage_is_cut(void **state)
{
    static const char *const names[] = {"a", "b", "c", "d", "e", "f"};
    struct shim_conv cv = {0};
    const cJSON *o, *next;
    int depth = 1; /* the usage object itself */
    (void)state;

    sum(&cv, "{\"a\":{\"n\":1,\"b\":{\"n\":1,\"c\":{\"n\":1,\"d\":{\"n\":1,"
             "\"e\":{\"n\":1,\"f\":{\"n\":1}}}}}},\"t\":1}");
    for (o = cv.usage; depth <= 6; o = next, depth++)
        if (!cJSON_IsObject(next = cJSON_GetObjectItemCaseSensitive(o, names[depth - 1])))
            break;
    assert_int_equal(depth, SHIM_USAGE_MAX_DEPTH);
    assert_int_equal((int)num(o, NULL, "n"), 1);
    assert_int_equal((int)num(cv.usage, NULL, "t"), 1);
    shim_conv_free(&cv);
}

/* Every field the Response schema wants, of the type it wants, once. */
static void responses_usage_has_required_fields(void **state)
{
    struct shim_conv cv = {0};
    cJSON *u;
    (void)state;

    u = shim_responses_usage(&cv); /* no reply had usage */
    assert_int_equal((int)num(u, NULL, "input_tokens"), 0);
    assert_int_equal((int)num(u, NULL, "output_tokens"), 0);
    assert_int_equal((int)num(u, NULL, "total_tokens"), 0);
    assert_int_equal((int)num(u, "input_tokens_details", "cached_tokens"), 0);
    assert_int_equal((int)num(u, "input_tokens_details", "cache_write_tokens"), 0);
    assert_int_equal((int)num(u, "output_tokens_details", "reasoning_tokens"), 0);
    cJSON_Delete(u);

    /* an upstream that got the types wrong */
    sum(&cv, "{\"input_tokens\":{\"x\":1},\"output_tokens\":3,"
             "\"input_tokens_details\":7,\"output_tokens_details\":{\"reasoning_tokens\":{}}}");
    u = shim_responses_usage(&cv);
    assert_int_equal(duplicate_keys(u), 0);
    assert_int_equal((int)num(u, NULL, "input_tokens"), 0);
    assert_int_equal((int)num(u, NULL, "output_tokens"), 3);
    assert_int_equal((int)num(u, "input_tokens_details", "cached_tokens"), 0);
    assert_int_equal((int)num(u, "output_tokens_details", "reasoning_tokens"), 0);
    cJSON_Delete(u);
    shim_conv_free(&cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sums_nested_usage),
        cmocka_unit_test(conflicting_types_keep_the_sum),
        cmocka_unit_test(wide_usage_is_capped),
        cmocka_unit_test(sum_never_outgrows_the_cap),
        cmocka_unit_test(deep_usage_is_cut),
        cmocka_unit_test(responses_usage_has_required_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
