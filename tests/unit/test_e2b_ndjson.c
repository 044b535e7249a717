/* test_e2b_ndjson.c - shim/sandbox/e2b/e2b_ndjson.c: e2b's /execute NDJSON
 * lines made a result like the local backend's. (Retry-After is
 * libcurl's to parse: shim/system/http.c reads CURLINFO_RETRY_AFTER.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/e2b/e2b_ndjson.h"

static void feed(struct shim_e2b_ndjson *p, const char *const *lines)
{
    for (; *lines; lines++)
        assert_int_equal(shim_e2b_ndjson_line(p, *lines, strlen(*lines)), 0);
}

static void run(const char *const *lines, size_t keep, struct shim_exec_result *out)
{
    struct shim_e2b_ndjson p;

    assert_int_equal(shim_e2b_ndjson_init(&p, keep), 0);
    feed(&p, lines);
    assert_int_equal(shim_e2b_ndjson_finish(&p, out), 0);
}

static void streams_in_order_with_main_result(void **state)
{
    static const char *const lines[] = {
        "{\"type\": \"number_of_executions\", \"execution_count\": 3}",
        "{\"type\": \"stdout\", \"text\": \"hel\", \"timestamp\": \"2026-01-01T00:00:00Z\"}",
        "{\"type\": \"stderr\", \"text\": \"warn\\n\"}",
        "{\"type\": \"stdout\", \"text\": \"lo\\n\"}",
        "{\"type\": \"keepalive\"}",
        "{\"type\": \"result\", \"text\": \"4\", \"extra\": {}, \"is_main_result\": true}",
        "{\"type\": \"end_of_execution\"}",
        NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_string_equal(r.logs, "helwarn\nlo\n4\n");
    assert_int_equal(r.logs_len, strlen(r.logs));
    assert_int_equal(r.nimages, 0);
    shim_exec_result_free(&r);
}

static void error_traceback_loses_ansi_codes(void **state)
{
    static const char *const lines[] = {
        "{\"type\": \"stdout\", \"text\": \"before\\n\"}",
        "{\"type\": \"error\", \"name\": \"ZeroDivisionError\", \"value\": \"division by zero\", "
        "\"traceback\": \"\\u001b[0;31m---------\\u001b[0m\\n\\u001b[1;31mZeroDivisionError"
        "\\u001b[0m: division by zero\"}",
        "{\"type\": \"error\", \"name\": \"Second\", \"value\": \"ignored\", \"traceback\": \"x\"}",
        "{\"type\": \"end_of_execution\"}",
        NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_string_equal(r.logs, "before\n---------\nZeroDivisionError: division by zero\n");
    assert_null(strchr(r.logs, '\x1b'));
    shim_exec_result_free(&r);
}

static void error_without_traceback_names_it(void **state)
{
    static const char *const lines[] = {
        "{\"type\": \"error\", \"name\": \"ContextRestarting\", \"value\": \"Context was "
        "restarted\"}",
        "{\"type\": \"end_of_execution\"}", NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_string_equal(r.logs, "ContextRestarting: Context was restarted\n");
    shim_exec_result_free(&r);
}

static void images_png_and_jpeg_display_text_not_shown(void **state)
{
    static const char *const lines[] = {
        "{\"type\": \"result\", \"png\": \"iVBORw0KGgo=\", \"text\": \"<Figure size 640x480>\", "
        "\"is_main_result\": false, \"extra\": {}}",
        "{\"type\": \"result\", \"jpeg\": \"/9j/4AAQ\", \"is_main_result\": false}",
        "{\"type\": \"result\", \"png\": \"not base64 !\", \"is_main_result\": false}",
        "{\"type\": \"end_of_execution\"}", NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_string_equal(r.logs, "");
    assert_int_equal(r.nimages, 2);
    assert_string_equal(r.images[0].mime, "image/png");
    assert_string_equal(r.images[0].base64, "iVBORw0KGgo=");
    assert_string_equal(r.images[1].mime, "image/jpeg");
    shim_exec_result_free(&r);
}

static void junk_and_unknown_lines_are_ignored(void **state)
{
    static const char *const lines[] = {
        "", "   ", "not json", "[1,2]", "{\"type\": 5}", "{\"no\": \"type\"}",
        "{\"type\": \"future_kind\", \"text\": \"x\"}",
        "{\"type\": \"stdout\", \"text\": \"ok\\n\"}\r",
        "{\"type\": \"end_of_execution\"}", NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_string_equal(r.logs, "ok\n");
    shim_exec_result_free(&r);
}

static void stream_without_end_is_a_failure_that_says_so(void **state)
{
    static const char *const lines[] = {"{\"type\": \"stdout\", \"text\": \"partial\"}", NULL};
    struct shim_exec_result r;
    (void)state;

    run(lines, 1000, &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "partial\n"));
    assert_non_null(strstr(r.logs, "ended before the execution did"));
    shim_exec_result_free(&r);
}

static void output_keeps_head_and_tail_within_bound(void **state)
{
    struct shim_e2b_ndjson p;
    struct shim_exec_result r;
    char line[128];
    int i;
    (void)state;

    assert_int_equal(shim_e2b_ndjson_init(&p, 100), 0);
    for (i = 0; i < 10000; i++) {
        snprintf(line, sizeof(line), "{\"type\": \"stdout\", \"text\": \"%05d\\n\"}", i);
        assert_int_equal(shim_e2b_ndjson_line(&p, line, strlen(line)), 0);
    }
    shim_e2b_ndjson_line(&p, "{\"type\":\"end_of_execution\"}", 27);
    assert_int_equal(shim_e2b_ndjson_finish(&p, &r), 0);
    assert_true(r.logs_len < 300);
    assert_memory_equal(r.logs, "00000\n", 6);
    assert_non_null(strstr(r.logs, "09999\n"));
    assert_non_null(strstr(r.logs, "[... 59800 bytes of output truncated ...]"));
    shim_exec_result_free(&r);
}

static void cut_stream_says_where(void **state)
{
    struct shim_e2b_ndjson p;
    struct shim_exec_result r;
    (void)state;

    assert_int_equal(shim_e2b_ndjson_init(&p, 100), 0);
    shim_e2b_ndjson_line(&p, "{\"type\":\"stdout\",\"text\":\"x\"}", 28);
    p.cut_at = 4096;
    assert_int_equal(shim_e2b_ndjson_finish(&p, &r), 0);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "passed 4096 bytes"));
    shim_exec_result_free(&r);
}

static void strip_ansi_forms(void **state)
{
    char s[] = "\x1b[0;31mred\x1b[0m \x1b[38;5;1mx\x1b[K\x1b" "cend\x1b";
    (void)state;

    s[shim_e2b_strip_ansi(s, strlen(s))] = '\0';
    assert_string_equal(s, "red xend");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(streams_in_order_with_main_result),
        cmocka_unit_test(error_traceback_loses_ansi_codes),
        cmocka_unit_test(error_without_traceback_names_it),
        cmocka_unit_test(images_png_and_jpeg_display_text_not_shown),
        cmocka_unit_test(junk_and_unknown_lines_are_ignored),
        cmocka_unit_test(stream_without_end_is_a_failure_that_says_so),
        cmocka_unit_test(output_keeps_head_and_tail_within_bound),
        cmocka_unit_test(cut_stream_says_where),
        cmocka_unit_test(strip_ansi_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
