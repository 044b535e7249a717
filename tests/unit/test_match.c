/* Unit tests: match.c, what a cassette matches an upstream call on, and
 * the first difference a near miss reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/match.h"

static cJSON *parse(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    return j;
}

static char *doc_text(const char *req, const char *calls, const char *ignore)
{
    cJSON *r = parse(req), *c = calls ? parse(calls) : NULL;
    cJSON *d = shim_match_doc(r, c, ignore);
    char *t;

    assert_non_null(d);
    t = cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    cJSON_Delete(r);
    cJSON_Delete(c);
    return t;
}

static void the_doc_is_the_request_and_the_calls(void **state)
{
    char *t = doc_text("{\"model\":\"m\",\"input\":\"hi\"}", "[{\"code\":\"1\",\"logs\":\"1\\n\"}]",
                       NULL);
    (void)state;
    assert_string_equal(t, "{\"request\":{\"model\":\"m\",\"input\":\"hi\"},"
                           "\"calls\":[{\"code\":\"1\",\"logs\":\"1\\n\"}]}");
    free(t);
    t = doc_text("{\"a\":1}", NULL, "");
    assert_string_equal(t, "{\"request\":{\"a\":1},\"calls\":[]}");
    free(t);
}

static void codeshim_ids_and_continuations_are_neutral(void **state)
{
    char *t = doc_text("{\"previous_response_id\":\"resp_0123456789abcdef0123456789abcdef\","
                       "\"input\":[{\"type\":\"code_interpreter_call\",\"id\":"
                       "\"ci_0123456789abcdef0123456789abcdef0123456789abcdef\","
                       "\"container_id\":\"cntr_aaaaaaaaaaaaaaaaaaaaaaaaaaaa\"},"
                       "{\"id\":\"msg_short12\"},{\"id\":\"Ab_0123456789abcdef0123456789\"}]}",
                       NULL, NULL);
    (void)state;
    assert_non_null(strstr(t, "\"previous_response_id\":\"<continued>\""));
    assert_non_null(strstr(t, "\"id\":\"<id>\",\"container_id\":\"<id>\""));
    assert_non_null(strstr(t, "msg_short12"));                    /* too short: the model's */
    assert_non_null(strstr(t, "Ab_0123456789abcdef0123456789")); /* not a codeshim prefix */
    free(t);
}

static void ignored_paths_are_left_out(void **state)
{
    char *t = doc_text("{\"user\":\"u1\",\"metadata\":{\"request_id\":\"r\",\"team\":\"a\"},"
                       "\"model\":\"m\"}",
                       NULL, "user, metadata.request_id,nothing.here,,metadata.team.deeper");
    (void)state;
    assert_string_equal(t, "{\"request\":{\"metadata\":{\"team\":\"a\"},\"model\":\"m\"},"
                           "\"calls\":[]}");
    free(t);
}

static long diff(const char *a, const char *b, char *path, char *was, char *is)
{
    cJSON *x = parse(a), *y = parse(b);
    long n = shim_match_diff(x, y, path, 256, was, is, 64);

    cJSON_Delete(x);
    cJSON_Delete(y);
    return n;
}

static void the_first_difference_is_named(void **state)
{
    char path[256], was[64], is[64];
    (void)state;

    assert_int_equal(diff("{\"a\":[1,{\"b\":\"x\"}]}", "{\"a\":[1,{\"b\":\"x\"}]}", path, was, is),
                     -1);
    assert_int_equal(diff("{\"a\":[1,{\"b\":\"x\"}],\"c\":2}", "{\"a\":[1,{\"b\":\"y\"}],\"c\":3}",
                          path, was, is), 1);
    assert_string_equal(path, "a[1].b");
    assert_string_equal(was, "\"x\"");
    assert_string_equal(is, "\"y\"");
    assert_int_equal(diff("{\"a\":1}", "{\"a\":1,\"z\":[true]}", path, was, is), 1);
    assert_string_equal(path, "z");
    assert_string_equal(was, "(absent)");
    assert_string_equal(is, "[true]");
    assert_int_equal(diff("{\"a\":[1,2]}", "{\"a\":[1]}", path, was, is), 1);
    assert_string_equal(path, "a[1]");
    assert_string_equal(is, "(absent)");
    assert_int_equal(diff("{\"a\":1}", "{\"a\":\"1\"}", path, was, is), 0);
    assert_string_equal(was, "1");
}

static void long_values_are_cut_to_one_line(void **state)
{
    char path[256], was[16], is[16];
    cJSON *x = parse("{\"t\":\"line one\\nline two and a lot more\"}");
    cJSON *y = parse("{\"t\":\"z\"}");
    (void)state;

    assert_int_equal(shim_match_diff(x, y, path, sizeof(path), was, is, sizeof(was)), 0);
    assert_int_equal(strlen(was), sizeof(was) - 1);
    assert_null(strchr(was, '\n'));
    assert_memory_equal(was + sizeof(was) - 4, "...", 3);
    cJSON_Delete(x);
    cJSON_Delete(y);
}

/* A tree deeper than the walk goes compares as one value: no recursion
 * without bound on a hostile cassette. */
static void deep_trees_are_bounded(void **state)
{
    char *a = malloc(4000), *b = malloc(4000), path[256], was[64], is[64];
    cJSON *x, *y;
    int i, n = 0;
    (void)state;

    for (i = 0; i < 900; i++)
        a[n++] = '[';
    a[n++] = '1';
    for (i = 0; i < 900; i++)
        a[n++] = ']';
    a[n] = '\0';
    memcpy(b, a, (size_t)n + 1);
    b[900] = '2';
    x = cJSON_ParseWithOpts(a, NULL, 0);
    y = cJSON_ParseWithOpts(b, NULL, 0);
    if (x && y) /* cJSON's own nesting limit may refuse them first */
        assert_true(shim_match_diff(x, y, path, sizeof(path), was, is, sizeof(was)) >= 0);
    cJSON_Delete(x);
    cJSON_Delete(y);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_doc_is_the_request_and_the_calls),
        cmocka_unit_test(codeshim_ids_and_continuations_are_neutral),
        cmocka_unit_test(ignored_paths_are_left_out),
        cmocka_unit_test(the_first_difference_is_named),
        cmocka_unit_test(long_values_are_cut_to_one_line),
        cmocka_unit_test(deep_trees_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
