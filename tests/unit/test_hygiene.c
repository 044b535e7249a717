/* Unit tests: handling of hostile bytes found by the fuzzer (tests/fuzz/
 * crashes/): numbers out of range, header blocks without a status line,
 * header injection through a content type, ids that must not be cut
 * inside a UTF-8 character, values with nowhere to go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "api/stream.h"
#include "base/buf.h"
#include "base/json.h"
#include "curl/sink.h"

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static void numbers_clamped(void **state)
{
    cJSON *j = J("{\"a\":1e300,\"b\":-1e300,\"c\":42.9,\"d\":\"7\"}");
    (void)state;
    assert_true(shim_json_int(j, "a") == 9200000000000000000LL);
    assert_true(shim_json_int(j, "b") == -9200000000000000000LL);
    assert_int_equal(shim_json_int(j, "c"), 42);
    assert_int_equal(shim_json_int(j, "d"), 0);
    assert_int_equal(shim_json_int(j, "missing"), 0);
    cJSON_Delete(j);
}

static void set_without_object_frees(void **state)
{
    cJSON *arr = J("[1]");
    (void)state;
    shim_json_set(NULL, "k", cJSON_CreateString("leak?")); /* valgrind: no leak */
    shim_json_set(arr, "k", cJSON_CreateString("leak?"));
    assert_int_equal(cJSON_GetArraySize(arr), 1);
    cJSON_Delete(arr);
}

static void head_without_status_line(void **state)
{
    struct shim_buf b;
    const char up[] = "Content-Type: text/x\r\nX-Request-Id: r1\r\n\r\n";
    (void)state;
    shim_buf_init(&b, 1 << 16);
    assert_int_equal(shim_sink_head(&b, 200, 0, up, sizeof(up) - 1, "application/json", 5), 0);
    assert_memory_equal(b.data, "HTTP/1.1 200 OK\r\n", 17);
    assert_non_null(strstr(b.data, "X-Request-Id: r1\r\n"));
    assert_null(strstr(b.data, "text/x"));
    shim_buf_free(&b);
}

static void content_type_cannot_inject(void **state)
{
    struct shim_buf b;
    (void)state;
    shim_buf_init(&b, 1 << 16);
    assert_int_equal(shim_sink_head(&b, 200, 0, NULL, 0,
                                       "application/json\r\nSet-Cookie: x=1", 2), 0);
    assert_null(strstr(b.data, "Set-Cookie"));
    assert_non_null(strstr(b.data, "Content-Type: application/octet-stream\r\n"));
    shim_buf_free(&b);
}

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2
                : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0)
            return 0;
        for (p++; n--; p++)
            if ((*p & 0xC0) != 0x80)
                return 0;
    }
    return 1;
}

static void history_ids_never_cut(void **state)
{
    struct shim_conv cv = {0};
    char req[1024];
    cJSON *r, *up, *fc;
    (void)state;
    /* an id of 70 two-byte characters: any byte-based cut would split one */
    strcpy(req, "{\"tools\":[{\"type\":\"code_interpreter\"}],\"input\":[{\"type\":"
                "\"code_interpreter_call\",\"id\":\"ci_");
    for (int i = 0; i < 70; i++)
        strcat(req, "\xc3\xa9");
    strcat(req, "\",\"code\":\"1\",\"outputs\":[]}]}");
    r = J(req);
    up = shim_responses_ops.prepare(r, &cv);
    fc = cJSON_GetArrayItem(cJSON_GetObjectItem(up, "input"), 0);
    assert_true(valid_utf8(shim_json_str(fc, "call_id")));
    assert_int_equal(strlen(shim_json_str(fc, "call_id")), 5 + 32);
    assert_string_equal(shim_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(up, "input"), 1),
                                      "call_id"), shim_json_str(fc, "call_id"));
    cJSON_Delete(up);
    cJSON_Delete(r);
    shim_conv_free(&cv);
}

static int sink(void *ctx, const char *p, size_t n)
{
    return shim_buf_add(ctx, p, n) ? -1 : 0;
}

static void stream_id_kept_whole(void **state)
{
    struct shim_conv cv = {0};
    struct shim_stream st;
    struct shim_buf out;
    char first[2048];
    cJSON *req = J("{\"model\":\"m\",\"tools\":[]}"), *f;
    (void)state;
    strcpy(first, "{\"object\":\"response\",\"id\":\"resp_");
    for (int i = 0; i < 200; i++)
        strcat(first, "\xc3\xa9");
    strcat(first, "\",\"output\":[]}");
    f = J(first);
    strcpy(cv.tool_name, "python");
    shim_buf_init(&out, 1 << 20);
    shim_stream_init(&st, SHIM_API_RESPONSES, &cv, sink, &out);
    shim_stream_start(&st, req, f);
    assert_int_equal(strlen(st.id), strlen(shim_json_str(f, "id")));
    assert_true(valid_utf8(out.data));
    shim_stream_free(&st);
    shim_buf_free(&out);
    cJSON_Delete(f);
    cJSON_Delete(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numbers_clamped),
        cmocka_unit_test(set_without_object_frees),
        cmocka_unit_test(head_without_status_line),
        cmocka_unit_test(content_type_cannot_inject),
        cmocka_unit_test(history_ids_never_cut),
        cmocka_unit_test(stream_id_kept_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
