/* Unit tests: chat.c, which tool calls of a chat.completion are codeshim's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "base/json.h"

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static const char ours[] =
    "{\"id\":\"c0\",\"type\":\"function\",\"function\":{\"name\":\"python\",\"arguments\":\"{}\"}}";

/* A reply whose message holds our call, then extra tool calls and message
 * fields. */
static cJSON *reply(const char *calls, const char *fields)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
             "\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":{"
             "\"role\":\"assistant\",\"content\":null,\"tool_calls\":[%s%s%s]%s}}]}",
             ours, calls[0] ? "," : "", calls, fields);
    return J(text);
}

static void scan(cJSON *r, size_t want_calls, int want_foreign)
{
    struct shim_conv cv = {0};
    struct shim_call *calls;
    size_t n;
    int foreign = -1;

    strcpy(cv.tool_name, "python");
    assert_int_equal(shim_chat_ops.scan(r, &cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, want_calls);
    assert_int_equal(foreign, want_foreign);
    assert_string_equal(calls[0].call_id, "c0");
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
    shim_conv_free(&cv);
}

static void program_calls_end_the_loop(void **state)
{
    static const char custom[] =
        "{\"id\":\"c1\",\"type\":\"custom\",\"custom\":{\"name\":\"python\",\"input\":\"x\"},"
        "\"function\":{\"name\":\"python\",\"arguments\":\"{}\"}}";
    cJSON *r;
    (void)state;

    r = reply("", "");
    scan(r, 1, 0);
    cJSON_Delete(r);
    /* another function of the program's */
    r = reply("{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}", "");
    scan(r, 1, 1);
    cJSON_Delete(r);
    /* a custom call is the program's, whatever else it carries */
    r = reply(custom, "");
    scan(r, 1, 1);
    cJSON_Delete(r);
    /* a type codeshim does not know */
    r = reply("{\"id\":\"c1\",\"type\":\"hologram\",\"function\":{\"name\":\"python\"}}", "");
    scan(r, 1, 1);
    cJSON_Delete(r);
    /* no type at all: a function call, as older servers send them */
    r = reply("{\"id\":\"c1\",\"function\":{\"name\":\"python\",\"arguments\":\"{}\"}}", "");
    scan(r, 2, 0);
    cJSON_Delete(r);
    /* a legacy function_call next to ours */
    r = reply("", ",\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}");
    scan(r, 1, 1);
    cJSON_Delete(r);
    r = reply("", ",\"function_call\":null");
    scan(r, 1, 0);
    cJSON_Delete(r);
}

/* The answer keeps the program's calls exactly, and only drops ours. */
static void finish_keeps_program_calls(void **state)
{
    static const char custom[] =
        "{\"id\":\"c1\",\"type\":\"custom\",\"custom\":{\"name\":\"python\",\"input\":\"x\"}}";
    struct shim_conv cv = {0};
    cJSON *r = reply(custom, ""), *fin, *tcs, *want = J(custom);
    (void)state;

    strcpy(cv.tool_name, "python");
    fin = shim_chat_ops.finish(NULL, r, NULL, 0, &cv, 0);
    tcs = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(fin, "choices"), 0), "message"),
        "tool_calls");
    assert_int_equal(cJSON_GetArraySize(tcs), 1);
    assert_true(cJSON_Compare(cJSON_GetArrayItem(tcs, 0), want, 1));
    cJSON_Delete(want);
    cJSON_Delete(fin);
    cJSON_Delete(r);
    shim_conv_free(&cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(program_calls_end_the_loop),
        cmocka_unit_test(finish_keeps_program_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
