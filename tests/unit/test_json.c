/* Unit tests: json.c, the one strict reading of JSON from the program and
 * the upstream (duplicate keys, U+0000) and its helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "base/json.h"

/* shim_json_read's verdict on a NUL-terminated text; *key gets the key. */
static int verdict(const char *s, char *key, size_t keysz)
{
    struct shim_json_flaw why;
    cJSON *j = NULL;
    int rc = shim_json_read(s, strlen(s), &j, &why);

    if (rc == 0)
        assert_non_null(j);
    else
        assert_null(j);
    if (key)
        snprintf(key, keysz, "%s", why.nul ? "<nul>" : why.key);
    cJSON_Delete(j);
    return rc;
}

static void clean_texts_are_read(void **state)
{
    static const char *const ok[] = {
        "{}", "[]", "1", "\"x\"", "{\"a\":1,\"b\":{\"a\":2},\"c\":[{\"a\":3},{\"a\":4}]}",
        "{\"a\":1,\"A\":2,\"a \":3,\"\":4}", /* case and spaces make keys differ */
        "[{\"a\":1},{\"a\":1}]",             /* same key in sibling objects */
        "{\"s\":\"\\\\u0000 is text\"}",     /* an escaped backslash, then u0000 */
        "{\"s\":\"\\u0001\"}",
    };
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_int_equal(verdict(ok[i], NULL, 0), 0);
}

static void duplicate_keys_refused(void **state)
{
    char key[80];
    (void)state;

    assert_int_equal(verdict("{\"tools\":[],\"stream\":false,\"tools\":[1]}", key, sizeof(key)),
                     -EEXIST);
    assert_string_equal(key, "tools");
    /* nested: in an array of objects, several levels down */
    assert_int_equal(verdict("{\"input\":[{\"type\":\"message\"},{\"type\":\"function_call\","
                             "\"name\":\"python\",\"name\":\"get_weather\"}]}",
                             key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "name");
    assert_int_equal(verdict("[[[{\"m\":{\"session_id\":\"a\",\"x\":1,\"session_id\":\"b\"}}]]]",
                             key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "session_id");
    /* keys equal once their escapes are decoded */
    assert_int_equal(verdict("{\"a\":1,\"\\u0061\":2}", key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "a");
    assert_int_equal(verdict("{\"tool\\u0073\":[],\"tools\":[]}", key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "tools");
    assert_int_equal(verdict("{\"\\u00e9\":1,\"\xc3\xa9\":2}", key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "\xc3\xa9");
    assert_int_equal(verdict("{\"\\/\":1,\"/\":2}", key, sizeof(key)), -EEXIST);
    assert_int_equal(verdict("{\"\":1,\"\":2}", key, sizeof(key)), -EEXIST);
    assert_string_equal(key, "");
}

static void nul_characters_refused(void **state)
{
    struct shim_json_flaw why;
    char key[80];
    cJSON *j = NULL;
    (void)state;

    /* cJSON would read "session_id" for both, Python two different keys */
    assert_int_equal(verdict("{\"session_id\":\"a\",\"session_id\\u0000x\":\"b\"}", key,
                             sizeof(key)), -EEXIST);
    assert_string_equal(key, "<nul>");
    assert_int_equal(verdict("{\"name\":\"python\\u0000x\"}", key, sizeof(key)), -EEXIST);
    assert_int_equal(verdict("{\"s\":\"\\\\\\u0000\"}", key, sizeof(key)), -EEXIST);
    /* a raw NUL inside the value; one after it (strlen + 1 bodies) is fine */
    assert_int_equal(shim_json_read("{\"s\":\"a\0b\"}", 11, &j, &why), -EEXIST);
    assert_true(why.nul);
    assert_int_equal(shim_json_read("{\"s\":\"ab\"}\0", 11, &j, &why), 0);
    cJSON_Delete(j);
    assert_int_equal(shim_json_has_nul("\\u0000", 6), 1);
    assert_int_equal(shim_json_has_nul("\\u000", 5), 0);
    assert_int_equal(shim_json_has_nul("\\\\u0000", 7), 0);
    assert_int_equal(shim_json_has_nul("\\u00000", 7), 1);
    /* escapes in a row, a backslash last, a NUL past a backslash */
    assert_int_equal(shim_json_has_nul("a\\\\\\u0000", 9), 1);
    assert_int_equal(shim_json_has_nul("\\\\\\\\u0000", 9), 0);
    assert_int_equal(shim_json_has_nul("\\\"\\n\\", 5), 0);
    assert_int_equal(shim_json_has_nul("x\\", 2), 0);
    assert_int_equal(shim_json_has_nul("\\n\0", 3), 1);
    assert_int_equal(shim_json_has_nul("\\u0000", 5), 0); /* cut short */
}

static void not_json_and_errors(void **state)
{
    struct shim_json_flaw why;
    cJSON *j = NULL;
    char *txt;
    (void)state;

    memset(&why, 'x', sizeof(why));
    assert_int_equal(shim_json_read("{\"a\":", 5, &j, &why), -EINVAL);
    assert_null(j);
    assert_false(why.nul);
    assert_string_equal(why.key, "");
    assert_int_equal(shim_json_read(NULL, 0, &j, &why), -EINVAL);
    assert_int_equal(shim_json_read("{\"a\":1,\"a\":2}", 13, &j, NULL), -EEXIST); /* why optional */

    j = shim_json_error("bad", "invalid_request_error", NULL, NULL);
    txt = cJSON_PrintUnformatted(j);
    assert_string_equal(txt, "{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\","
                             "\"param\":null,\"code\":null}}");
    free(txt);
    cJSON_Delete(j);
    j = shim_json_error("m", "t", "background", "c");
    txt = cJSON_PrintUnformatted(j);
    assert_string_equal(txt, "{\"error\":{\"message\":\"m\",\"type\":\"t\","
                             "\"param\":\"background\",\"code\":\"c\"}}");
    free(txt);
    cJSON_Delete(j);
}

static void long_key_cut_on_utf8_boundary(void **state)
{
    struct shim_json_flaw why;
    char text[1024], msg[200];
    cJSON *j = NULL;
    size_t n = 0, i, len;
    (void)state;

    n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"x");
    for (i = 0; i < 100; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "\xc3\xa9");
    n += (size_t)snprintf(text + n, sizeof(text) - n, "\":1,\"x");
    for (i = 0; i < 100; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "\\u00e9");
    n += (size_t)snprintf(text + n, sizeof(text) - n, "\":2}");
    assert_int_equal(shim_json_read(text, n, &j, &why), -EEXIST);
    len = strlen(why.key);
    assert_true(len > 0 && len < sizeof(why.key));
    assert_int_equal(why.key[0], 'x');
    assert_int_equal((len - 1) % 2, 0); /* whole two-byte characters only */
    shim_json_flaw_text(&why, msg, sizeof(msg));
    assert_non_null(strstr(msg, "more than once"));
    why.nul = 1;
    shim_json_flaw_text(&why, msg, sizeof(msg));
    assert_non_null(strstr(msg, "U+0000"));
}

/* {"k0":0,...,"k<n-1>":n-1} with an optional repeat of key rep at the end;
 * prefix makes every key share a long start. */
static char *big_object(size_t n, long rep, const char *prefix, size_t *len)
{
    size_t cap = n * (strlen(prefix) + 32) + 64, off = 0, i;
    char *s = malloc(cap);

    assert_non_null(s);
    s[off++] = '{';
    for (i = 0; i < n; i++)
        off += (size_t)snprintf(s + off, cap - off, "%s\"%sk%zu\":%zu", i ? "," : "", prefix,
                                (n - i) * 7919 % 1000003, i);
    if (rep >= 0)
        off += (size_t)snprintf(s + off, cap - off, ",\"%sk%zu\":0", prefix,
                                (n - (size_t)rep) * 7919 % 1000003);
    s[off++] = '}';
    s[off] = '\0';
    *len = off;
    return s;
}

static void large_objects(void **state)
{
    struct shim_json_flaw why;
    char prefix[201];
    cJSON *j = NULL;
    size_t len;
    char *s;
    (void)state;

    /* 100,000 keys: a quadratic check would take billions of comparisons */
    s = big_object(100000, -1, "", &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), 0);
    assert_int_equal(cJSON_GetArraySize(j), 100000);
    cJSON_Delete(j);
    free(s);
    s = big_object(100000, 4321, "", &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), -EEXIST);
    snprintf(prefix, sizeof(prefix), "k%zu", (size_t)(100000 - 4321) * 7919 % 1000003);
    assert_string_equal(why.key, prefix);
    free(s);
    /* the same with keys sharing a 200-byte start */
    memset(prefix, 'p', 200);
    prefix[200] = '\0';
    s = big_object(20000, 19999, prefix, &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), -EEXIST);
    assert_int_equal(strncmp(why.key, prefix, 60), 0);
    free(s);
    /* many small objects, each looked at once (within the value budget) */
    {
        size_t cap = 80000 * 16 + 4, off = 0, i;
        s = malloc(cap);
        s[off++] = '[';
        for (i = 0; i < 80000; i++)
            off += (size_t)snprintf(s + off, cap - off, "%s{\"a\":1,\"b\":2}", i ? "," : "");
        s[off++] = ']';
        assert_int_equal(shim_json_read(s, off, &j, &why), 0);
        cJSON_Delete(j);
        assert_memory_equal(s + off - 7, "\"b\":2}]", 7);
        s[off - 6] = 'a'; /* the last object becomes {"a":1,"a":2} */
        assert_int_equal(shim_json_read(s, off, &j, &why), -EEXIST);
        assert_string_equal(why.key, "a");
        free(s);
    }
}

static void find_dup_on_trees(void **state)
{
    cJSON *o = cJSON_CreateObject();
    const char *key = "unset";
    char name[16];
    int i;
    (void)state;

    assert_int_equal(shim_json_find_dup(NULL, &key), 0);
    assert_int_equal(shim_json_find_dup(o, &key), 0);
    for (i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        cJSON_AddNumberToObject(o, name, i);
    }
    assert_int_equal(shim_json_find_dup(o, &key), 0);
    assert_string_equal(key, "unset"); /* written only when found */
    cJSON_AddNumberToObject(o, "n7", 0);
    assert_int_equal(shim_json_find_dup(o, &key), 1);
    assert_string_equal(key, "n7");
    cJSON_Delete(o);
}

/* "[0,0,...]" holding k zeros (k + 1 values), or k arrays nested. */
static char *zeros(size_t k, size_t *len)
{
    char *s = malloc(2 * k + 2);
    size_t i, off = 0;

    assert_non_null(s);
    s[off++] = '[';
    for (i = 0; i < k; i++) {
        if (i)
            s[off++] = ',';
        s[off++] = '0';
    }
    s[off++] = ']';
    s[off] = '\0';
    *len = off;
    return s;
}

static char *nested(size_t k, size_t *len)
{
    char *s = malloc(2 * k + 1);

    assert_non_null(s);
    memset(s, '[', k);
    memset(s + k, ']', k);
    s[2 * k] = '\0';
    *len = 2 * k;
    return s;
}

static int fits(const char *s, size_t max_values, int max_depth)
{
    return shim_json_fits(s, strlen(s), max_values, max_depth);
}

/* The budget of values and depth, counted on the text before any tree. */
static void value_budget(void **state)
{
    struct shim_json_flaw why;
    char msg[200];
    cJSON *j = NULL;
    size_t len;
    char *s;
    (void)state;

    /* the count: one value, one more per ',' '[' '{' outside strings */
    assert_true(fits("[0,0,0]", 4, 1));
    assert_false(fits("[0,0,0]", 3, 1));
    assert_true(fits("{\"a\":1,\"b\":[2]}", 4, 2));
    assert_false(fits("{\"a\":1,\"b\":[2]}", 4, 1));
    assert_true(fits("[\",,,[[{{\"]", 2, 1));       /* in a string */
    assert_true(fits("[\"\\\",,[[\"]", 2, 1));    /* after \" */
    assert_false(fits("[\"\\\\\",,[[\"]", 2, 1)); /* \\ ends it */
    assert_true(shim_json_fits("0", 1, 1, 0));
    /* the budget every read has: at it read, one past it refused with why */
    s = zeros(SHIM_JSON_MAX_VALUES - 1, &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), 0);
    assert_int_equal(cJSON_GetArraySize(j), SHIM_JSON_MAX_VALUES - 1);
    cJSON_Delete(j);
    free(s);
    s = zeros(SHIM_JSON_MAX_VALUES, &len);
    j = NULL;
    assert_int_equal(shim_json_read(s, len, &j, &why), -E2BIG);
    assert_null(j);
    assert_true(why.big);
    shim_json_flaw_text(&why, msg, sizeof(msg));
    assert_non_null(strstr(msg, "262144 JSON values"));
    assert_null(shim_json_parse(s, len));
    assert_int_equal(shim_json_read(s, len, &j, NULL), -E2BIG); /* why optional */
    free(s);
    /* so is an object of as many keys (no key compared: no tree) */
    s = big_object(SHIM_JSON_MAX_VALUES, -1, "", &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), -E2BIG);
    assert_true(why.big);
    free(s);
    /* depth: SHIM_JSON_MAX_DEPTH levels read, one more refused */
    s = nested(SHIM_JSON_MAX_DEPTH, &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), 0);
    cJSON_Delete(j);
    free(s);
    s = nested(SHIM_JSON_MAX_DEPTH + 1, &len);
    assert_int_equal(shim_json_read(s, len, &j, &why), -E2BIG);
    assert_true(why.big);
    assert_null(shim_json_parse(s, len));
    free(s);
    /* a smaller budget for a frame */
    j = shim_json_parse_within("{\"a\":[1,2]}", 11, 4, 2);
    assert_non_null(j);
    cJSON_Delete(j);
    assert_null(shim_json_parse_within("{\"a\":[1,2]}", 11, 3, 2));
    assert_null(shim_json_parse_within("{\"a\":[1,2]}", 11, 4, 1));
    /* a clean read says nothing is wrong */
    assert_int_equal(shim_json_read("[1]", 3, &j, &why), 0);
    assert_false(why.big);
    cJSON_Delete(j);
}

/* Arguments of codeshim's tool are read the same way. */
static void tool_arguments_read_strictly(void **state)
{
    const char *why;
    char *c;
    (void)state;

    c = shim_conv_parse_code("{\"code\":\"print(1)\"}", &why);
    assert_string_equal(c, "print(1)");
    free(c);
    assert_null(shim_conv_parse_code("{\"code\":\"print(1)\",\"code\":\"print(2)\"}", &why));
    assert_non_null(strstr(why, "twice"));
    assert_null(shim_conv_parse_code("{\"code\":\"print(1)\\u0000import os\"}", &why));
    assert_non_null(strstr(why, "U+0000"));
    /* a string of many values inside the reply is read within the budget */
    {
        size_t len;
        char *z = zeros(SHIM_JSON_MAX_VALUES, &len), *a = malloc(len + 16);
        assert_non_null(a);
        snprintf(a, len + 16, "{\"code\":%s}", z);
        assert_null(shim_conv_parse_code(a, &why));
        assert_non_null(strstr(why, "more JSON values"));
        free(a);
        free(z);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clean_texts_are_read),
        cmocka_unit_test(duplicate_keys_refused),
        cmocka_unit_test(nul_characters_refused),
        cmocka_unit_test(not_json_and_errors),
        cmocka_unit_test(long_key_cut_on_utf8_boundary),
        cmocka_unit_test(large_objects),
        cmocka_unit_test(find_dup_on_trees),
        cmocka_unit_test(value_budget),
        cmocka_unit_test(tool_arguments_read_strictly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
