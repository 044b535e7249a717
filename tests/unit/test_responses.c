/* Unit tests: responses.c (the Responses adapter) and conv.c helpers. */
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

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static const char *S(const cJSON *o, const char *path0, const char *key)
{
    const cJSON *x = path0 ? cJSON_GetObjectItem(o, path0) : o;
    return shim_json_str(x, key);
}

static void prepare_rewrites_tools_and_choice(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"model\":\"m\",\"input\":\"hi\",\"stream\":true,"
                   "\"stream_options\":{\"include_obfuscation\":false},"
                   "\"include\":[\"code_interpreter_call.outputs\"],"
                   "\"metadata\":{\"session_id\":\"s1\"},\"codeshim_debug\":1,"
                   "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}},"
                   "{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{}},"
                   "{\"type\":\"code_interpreter\",\"container\":\"cntr_x\"}],"
                   "\"tool_choice\":{\"type\":\"code_interpreter\"}}");
    cJSON *up = shim_responses_ops.prepare(req, &cv), *tools;
    (void)state;

    assert_non_null(up);
    assert_string_equal(cv.tool_name, "python");
    assert_true(cv.stream);
    assert_true(cv.forced_choice);
    tools = cJSON_GetObjectItem(up, "tools");
    assert_int_equal(cJSON_GetArraySize(tools), 2); /* two natives -> one function */
    assert_string_equal(S(cJSON_GetArrayItem(tools, 0), NULL, "type"), "function");
    assert_string_equal(S(cJSON_GetArrayItem(tools, 0), NULL, "name"), "python");
    assert_string_equal(S(cJSON_GetArrayItem(tools, 1), NULL, "name"), "get_weather");
    assert_string_equal(S(up, "tool_choice", "type"), "function");
    assert_string_equal(S(up, "tool_choice", "name"), "python");
    assert_null(cJSON_GetObjectItem(up, "stream"));
    assert_null(cJSON_GetObjectItem(up, "stream_options"));
    assert_null(cJSON_GetObjectItem(up, "include"));
    assert_null(cJSON_GetObjectItem(up, "metadata")); /* emptied -> dropped */
    assert_null(cJSON_GetObjectItem(up, "codeshim_debug"));
    /* the program's request is untouched */
    assert_non_null(cJSON_GetObjectItem(req, "stream"));
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

static void tool_name_avoids_collisions(void **state)
{
    char name[64];
    cJSON *t = J("[{\"type\":\"function\",\"name\":\"python\"},{\"type\":\"function\",\"name\":\"codeshim_python\"}]");
    cJSON *c = J("[{\"type\":\"function\",\"function\":{\"name\":\"python\"}}]");
    (void)state;
    shim_conv_pick_tool_name(t, 0, name, sizeof(name));
    assert_string_equal(name, "codeshim_python_2");
    shim_conv_pick_tool_name(c, 1, name, sizeof(name));
    assert_string_equal(name, "codeshim_python");
    cJSON_Delete(t);
    cJSON_Delete(c);
}

static void metadata_kept_when_not_empty(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"input\":\"x\",\"metadata\":{\"session_id\":\"s\",\"team\":\"a\"},"
                   "\"tools\":[{\"type\":\"code_interpreter\"}],\"tool_choice\":\"auto\"}");
    cJSON *up = shim_responses_ops.prepare(req, &cv);
    (void)state;
    assert_string_equal(S(up, "metadata", "team"), "a");
    assert_null(S(up, "metadata", "session_id"));
    assert_false(cv.forced_choice);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

static void allowed_tools_choice(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"input\":\"x\",\"tools\":[{\"type\":\"code_interpreter\"}],"
                   "\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"required\","
                   "\"tools\":[{\"type\":\"code_interpreter\"}]}}");
    cJSON *up = shim_responses_ops.prepare(req, &cv), *tc;
    (void)state;
    tc = cJSON_GetObjectItem(up, "tool_choice");
    assert_string_equal(S(cJSON_GetArrayItem(cJSON_GetObjectItem(tc, "tools"), 0), NULL, "name"),
                        "python");
    assert_true(cv.forced_choice);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

static void history_items_become_function_calls(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"tools\":[{\"type\":\"code_interpreter\"}],\"input\":["
                   "{\"role\":\"user\",\"content\":\"a\"},"
                   "{\"id\":\"ci_1\",\"type\":\"code_interpreter_call\",\"status\":\"completed\","
                   "\"code\":\"x=1\",\"container_id\":\"cntr_1\",\"outputs\":[{\"type\":\"logs\",\"logs\":\"ok\\n\"}]},"
                   "{\"role\":\"user\",\"content\":\"b\"}]}");
    cJSON *up = shim_responses_ops.prepare(req, &cv), *in, *args;
    (void)state;
    in = cJSON_GetObjectItem(up, "input");
    assert_int_equal(cJSON_GetArraySize(in), 4);
    assert_string_equal(S(cJSON_GetArrayItem(in, 1), NULL, "type"), "function_call");
    assert_string_equal(S(cJSON_GetArrayItem(in, 1), NULL, "call_id"), "call_1");
    assert_string_equal(S(cJSON_GetArrayItem(in, 1), NULL, "name"), "python");
    args = J(S(cJSON_GetArrayItem(in, 1), NULL, "arguments"));
    assert_string_equal(S(args, NULL, "code"), "x=1");
    assert_string_equal(S(cJSON_GetArrayItem(in, 2), NULL, "type"), "function_call_output");
    assert_string_equal(S(cJSON_GetArrayItem(in, 2), NULL, "call_id"), "call_1");
    assert_string_equal(S(cJSON_GetArrayItem(in, 2), NULL, "output"), "ok\n");
    assert_string_equal(S(cJSON_GetArrayItem(in, 3), NULL, "content"), "b");
    cJSON_Delete(args);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

static const char reply1[] =
    "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
    "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
    "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"1+1\\\"}\"},"
    "{\"type\":\"function_call\",\"id\":\"fc_2\",\"call_id\":\"call_b\",\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"2+2\\\"}\"}],"
    "\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":2},\"output_tokens\":5,"
    "\"output_tokens_details\":{\"reasoning_tokens\":1},\"total_tokens\":15}}";

static const char reply2[] =
    "{\"id\":\"resp_2\",\"object\":\"response\",\"status\":\"completed\",\"tools\":[],\"tool_choice\":\"auto\","
    "\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
    "\"content\":[{\"type\":\"output_text\",\"text\":\"4\",\"annotations\":[]}]}],"
    "\"usage\":{\"input_tokens\":20,\"output_tokens\":3,\"total_tokens\":23}}";

static void fake_exec(struct shim_call *c, const char *out)
{
    const char *why;
    c->executed = 1;
    c->code = shim_conv_parse_code(c->arguments, &why);
    c->output = strdup(out);
    c->status = "completed";
    strcpy(c->ci_id, "ci_test");
    strcpy(c->container_id, "cntr_test");
}

static void full_turn(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"model\":\"m\",\"input\":\"q\",\"metadata\":{\"session_id\":\"s\"},"
                   "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}],"
                   "\"tool_choice\":\"required\"}");
    cJSON *up = shim_responses_ops.prepare(req, &cv);
    cJSON *r1 = J(reply1), *r2 = J(reply2), *in, *fin, *out, *u;
    struct shim_call *calls;
    size_t n;
    int foreign;
    (void)state;

    assert_int_equal(shim_responses_ops.scan(r1, &cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 2);
    assert_false(foreign);
    assert_string_equal(calls[0].call_id, "call_a");
    fake_exec(&calls[0], "2\n");
    fake_exec(&calls[1], "4\n");
    assert_string_equal(calls[1].code, "2+2");
    assert_int_equal(shim_responses_ops.advance(up, r1, calls, n, &cv), 0);
    in = cJSON_GetObjectItem(up, "input");
    /* user, reasoning, call a, call b, output a, output b */
    assert_int_equal(cJSON_GetArraySize(in), 6);
    assert_string_equal(S(cJSON_GetArrayItem(in, 0), NULL, "content"), "q");
    assert_string_equal(S(cJSON_GetArrayItem(in, 1), NULL, "type"), "reasoning");
    assert_string_equal(S(cJSON_GetArrayItem(in, 4), NULL, "type"), "function_call_output");
    assert_string_equal(S(cJSON_GetArrayItem(in, 5), NULL, "output"), "4\n");
    assert_string_equal(S(up, NULL, "tool_choice"), "auto"); /* never replayed */
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);

    assert_int_equal(shim_responses_ops.scan(r2, &cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 0);
    fin = shim_responses_ops.finish(req, r2, calls, n, &cv, 0);
    out = cJSON_GetObjectItem(fin, "output");
    assert_int_equal(cJSON_GetArraySize(out), 4); /* reasoning, ci, ci, message */
    assert_string_equal(S(cJSON_GetArrayItem(out, 1), NULL, "type"), "code_interpreter_call");
    assert_string_equal(S(cJSON_GetArrayItem(out, 1), NULL, "code"), "1+1");
    assert_string_equal(S(cJSON_GetArrayItem(out, 2), NULL, "code"), "2+2");
    assert_string_equal(
        S(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "outputs"), 0), NULL, "logs"),
        "4\n");
    assert_string_equal(S(cJSON_GetArrayItem(out, 3), NULL, "type"), "message");
    assert_string_equal(S(fin, NULL, "id"), "resp_2");
    assert_string_equal(S(fin, NULL, "tool_choice"), "required");
    assert_string_equal(S(cJSON_GetArrayItem(cJSON_GetObjectItem(fin, "tools"), 0), NULL, "type"),
                        "code_interpreter");
    assert_string_equal(S(fin, "metadata", "session_id"), "s");
    u = cJSON_GetObjectItem(fin, "usage");
    assert_int_equal(shim_json_int(u, "input_tokens"), 30);
    assert_int_equal(shim_json_int(u, "output_tokens"), 8);
    assert_int_equal(shim_json_int(u, "total_tokens"), 38);
    assert_int_equal(shim_json_int(cJSON_GetObjectItem(u, "input_tokens_details"), "cached_tokens"), 2);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(u, "input_tokens_details"), "cache_write_tokens"));
    assert_int_equal(shim_json_int(cJSON_GetObjectItem(u, "output_tokens_details"), "reasoning_tokens"), 1);
    {
        char *txt = cJSON_PrintUnformatted(fin);
        assert_null(strstr(txt, "\"python\"")); /* the internal tool never shows */
        free(txt);
    }
    cJSON_Delete(fin);
    cJSON_Delete(r1);
    cJSON_Delete(r2);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

/* Which items end the loop: every call the program must act on, and any
 * item codeshim does not know; hosted results the upstream finished do
 * not. Only a plain function_call named as codeshim's tool is ours. */
static void which_items_wait_for_the_program(void **state)
{
    static const char *const waits[] = {
        "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"}",
        "{\"type\":\"function_call\",\"call_id\":\"c\",\"namespace\":\"crm\",\"name\":\"python\","
        "\"arguments\":\"{}\"}",
        "{\"type\":\"custom_tool_call\",\"call_id\":\"c\",\"name\":\"python\",\"input\":\"x\"}",
        "{\"type\":\"computer_call\",\"id\":\"cu\",\"call_id\":\"c\"}",
        "{\"type\":\"local_shell_call\",\"id\":\"ls\",\"call_id\":\"c\"}",
        "{\"type\":\"shell_call\",\"id\":\"sh\",\"call_id\":\"c\"}",
        "{\"type\":\"apply_patch_call\",\"id\":\"ap\",\"call_id\":\"c\"}",
        "{\"type\":\"mcp_approval_request\",\"id\":\"mr\",\"name\":\"python\"}",
        "{\"type\":\"tool_search_call\",\"id\":\"ts\",\"execution\":\"client\"}",
        "{\"type\":\"code_interpreter_call\",\"id\":\"ci\"}", /* never forwarded upstream */
        "{\"type\":\"program\",\"id\":\"p\",\"call_id\":\"c\"}",
        "{\"type\":\"hologram_call\",\"id\":\"h\",\"name\":\"python\"}", /* unknown */
        "{\"name\":\"python\",\"call_id\":\"c\"}",                      /* no type */
        "\"a string\"",
    };
    static const char *const informs[] = {
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}",
        "{\"type\":\"reasoning\",\"id\":\"rs\",\"summary\":[]}",
        "{\"type\":\"web_search_call\",\"id\":\"ws\",\"status\":\"completed\"}",
        "{\"type\":\"file_search_call\",\"id\":\"fs\",\"status\":\"completed\"}",
        "{\"type\":\"image_generation_call\",\"id\":\"ig\",\"status\":\"completed\"}",
        "{\"type\":\"mcp_call\",\"id\":\"mc\",\"name\":\"python\"}",
        "{\"type\":\"mcp_list_tools\",\"id\":\"ml\"}",
        "{\"type\":\"tool_search_call\",\"id\":\"ts\",\"execution\":\"server\"}",
        "{\"type\":\"function_call\",\"call_id\":\"c9\",\"namespace\":null,\"name\":\"python\","
        "\"arguments\":\"{}\"}", /* ours: a null namespace is none */
    };
    static const char ours[] =
        "{\"type\":\"function_call\",\"call_id\":\"c0\",\"name\":\"python\",\"arguments\":\"{}\"}";
    char text[1024];
    size_t i, k;
    (void)state;

    for (k = 0; k < 2; k++) {
        const char *const *set = k ? informs : waits;
        size_t count = k ? sizeof(informs) / sizeof(informs[0]) : sizeof(waits) / sizeof(waits[0]);
        for (i = 0; i < count; i++) {
            struct shim_conv cv = {0};
            struct shim_call *calls;
            size_t n, want = 1 + (k && strstr(set[i], "\"c9\""));
            int foreign = -1;
            cJSON *r;

            strcpy(cv.tool_name, "python");
            snprintf(text, sizeof(text), "{\"output\":[%s,%s]}", ours, set[i]);
            r = J(text);
            assert_int_equal(shim_responses_ops.scan(r, &cv, &calls, &n, &foreign), 0);
            if (foreign != !k || n != want)
                fail_msg("%s: foreign %d, %zu calls", set[i], foreign, n);
            assert_string_equal(calls[0].call_id, "c0");
            while (n)
                shim_call_free(&calls[--n]);
            free(calls);
            cJSON_Delete(r);
            shim_conv_free(&cv);
        }
    }
}

static void capped_and_foreign(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"input\":\"q\",\"tools\":[{\"type\":\"code_interpreter\"},{\"type\":\"function\",\"name\":\"f\"}]}");
    cJSON *up = shim_responses_ops.prepare(req, &cv);
    cJSON *r = J("{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"python\",\"arguments\":\"{}\"},"
                 "{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"python\",\"arguments\":\"{}\"},"
                 "{\"type\":\"function_call\",\"call_id\":\"c3\",\"name\":\"f\",\"arguments\":\"{}\"}]}");
    cJSON *fin, *out;
    struct shim_call *calls;
    size_t n;
    int foreign;
    char *txt;
    (void)state;

    assert_int_equal(shim_responses_ops.scan(r, &cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 2);
    assert_true(foreign);
    fake_exec(&calls[0], "x"); /* the second one is over the cap */
    fin = shim_responses_ops.finish(req, r, calls, n, &cv, 1);
    out = cJSON_GetObjectItem(fin, "output");
    assert_int_equal(cJSON_GetArraySize(out), 2); /* ci + the program's call */
    assert_string_equal(S(cJSON_GetArrayItem(out, 0), NULL, "type"), "code_interpreter_call");
    assert_string_equal(S(cJSON_GetArrayItem(out, 1), NULL, "name"), "f");
    assert_string_equal(S(fin, NULL, "status"), "incomplete");
    txt = cJSON_PrintUnformatted(fin);
    assert_null(strstr(txt, "\"python\"")); /* no internal tool anywhere */
    free(txt);
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
    cJSON_Delete(fin);
    cJSON_Delete(r);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

static void scan_rejects_bad_shapes(void **state)
{
    struct shim_conv cv = {0};
    struct shim_call *calls;
    size_t n;
    int foreign;
    cJSON *a = J("{\"error\":{\"message\":\"x\"}}"), *b = J("[1]");
    (void)state;
    strcpy(cv.tool_name, "python");
    assert_int_equal(shim_responses_ops.scan(a, &cv, &calls, &n, &foreign), -EPROTO);
    assert_int_equal(shim_responses_ops.scan(b, &cv, &calls, &n, &foreign), -EPROTO);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

static void parse_code_errors(void **state)
{
    const char *why;
    char *c;
    (void)state;
    c = shim_conv_parse_code("{\"code\":\"print(1)\"}", &why);
    assert_string_equal(c, "print(1)");
    free(c);
    assert_null(shim_conv_parse_code("not json", &why));
    assert_non_null(why);
    assert_null(shim_conv_parse_code("[1]", &why));
    assert_null(shim_conv_parse_code("{\"code\":1}", &why));
    assert_null(shim_conv_parse_code(NULL, &why));
}

/* Calls are matched to the reply's items by position, not by call_id: a
 * reply that repeats an id still gets each call's own arguments and output
 * (and matching stays linear in the number of items). */
static void calls_matched_by_position(void **state)
{
    struct shim_conv cv = {0};
    cJSON *req = J("{\"model\":\"m\",\"input\":\"q\","
                   "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}]}");
    cJSON *up = shim_responses_ops.prepare(req, &cv), *in;
    char text[600];
    cJSON *r;
    struct shim_call *calls;
    size_t n;
    int foreign;
    (void)state;

    snprintf(text, sizeof(text),
             "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
             "{\"type\":\"function_call\",\"call_id\":\"same\",\"name\":\"%s\",\"arguments\":\"{\\\"code\\\":\\\"1\\\"}\"},"
             "{\"type\":\"function_call\",\"call_id\":\"same\",\"name\":\"%s\",\"arguments\":\"{\\\"code\\\":\\\"2\\\"}\"}]}",
             cv.tool_name, cv.tool_name);
    r = J(text);
    assert_int_equal(shim_responses_ops.scan(r, &cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 2);
    fake_exec(&calls[0], "one");
    fake_exec(&calls[1], "two");
    assert_int_equal(shim_responses_ops.advance(up, r, calls, n, &cv), 0);
    in = cJSON_GetObjectItem(up, "input");
    /* user, call 1, call 2, output 1, output 2 */
    assert_int_equal(cJSON_GetArraySize(in), 5);
    assert_string_equal(S(cJSON_GetArrayItem(in, 1), NULL, "arguments"), "{\"code\":\"1\"}");
    assert_string_equal(S(cJSON_GetArrayItem(in, 2), NULL, "arguments"), "{\"code\":\"2\"}");
    assert_string_equal(S(cJSON_GetArrayItem(in, 4), NULL, "output"), "two");
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
    cJSON_Delete(r);
    cJSON_Delete(up);
    cJSON_Delete(req);
    shim_conv_free(&cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prepare_rewrites_tools_and_choice),
        cmocka_unit_test(tool_name_avoids_collisions),
        cmocka_unit_test(metadata_kept_when_not_empty),
        cmocka_unit_test(allowed_tools_choice),
        cmocka_unit_test(history_items_become_function_calls),
        cmocka_unit_test(full_turn),
        cmocka_unit_test(capped_and_foreign),
        cmocka_unit_test(which_items_wait_for_the_program),
        cmocka_unit_test(scan_rejects_bad_shapes),
        cmocka_unit_test(parse_code_errors),
        cmocka_unit_test(calls_matched_by_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
