/* Unit tests: intercept.c's decision (shim_intercept_decide), ours or
 * libcurl's, on handles recorded as the program set them (fake pointer
 * values: nothing here reaches libcurl). Ours: a POST to a model path
 * whose body carries the code_interpreter tool, also when the body cannot
 * be read as JSON within its limits (codeshim answers 400 rather than
 * send it on). libcurl's: another URL, another tool, no body. A body from
 * the program's read callback waits for a call that may read it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl/intercept.h"
#include "handles_rec.h"

#define CI_BODY "{\"model\":\"m\",\"input\":\"hi\",\"tools\":[{\"type\":\"code_interpreter\"," \
                "\"container\":{\"type\":\"auto\"}}]}"

/* The decision for a POST of body to url (body NULL: none set). */
static int decide(CURL *h, const char *url, const char *body)
{
    struct shim_intercept_job *j = NULL;
    int rc;

    rec_p(h, CURLOPT_URL, url);
    if (body)
        rec_p(h, CURLOPT_POSTFIELDS, body);
    rc = shim_intercept_decide(h, -1, 1, &j);
    assert_true(rc == SHIM_DECIDE_OURS ? j != NULL : j == NULL);
    shim_intercept_job_free(j);
    shim_handles_forget(h);
    return rc;
}

static void a_code_interpreter_request_is_ours(void **state)
{
    (void)state;
    assert_int_equal(decide(H(0x100), "https://api.example.com/v1/responses", CI_BODY),
                     SHIM_DECIDE_OURS);
    assert_int_equal(decide(H(0x101), "http://127.0.0.1:9/v1/chat/completions",
                            "{\"model\":\"m\",\"messages\":[],\"tools\":[{\"type\":"
                            "\"code_interpreter\"}]}"),
                     SHIM_DECIDE_OURS);
}

static void everything_else_is_libcurls(void **state)
{
    (void)state;
    /* another path, another tool, no tools, no body, not JSON */
    assert_int_equal(decide(H(0x200), "https://api.example.com/v1/embeddings", CI_BODY),
                     SHIM_DECIDE_PASS);
    assert_int_equal(decide(H(0x201), "https://api.example.com/v1/responses",
                            "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}"),
                     SHIM_DECIDE_PASS);
    assert_int_equal(decide(H(0x202), "https://api.example.com/v1/responses",
                            "{\"model\":\"m\",\"input\":\"code_interpreter\"}"),
                     SHIM_DECIDE_PASS);
    assert_int_equal(decide(H(0x203), "https://api.example.com/v1/responses", NULL),
                     SHIM_DECIDE_PASS);
    assert_int_equal(decide(H(0x204), "https://api.example.com/v1/responses",
                            "code_interpreter, but not JSON"),
                     SHIM_DECIDE_PASS);
    /* a handle nothing was recorded for */
    {
        struct shim_intercept_job *j = NULL;
        assert_int_equal(shim_intercept_decide(H(0x205), -1, 1, &j), SHIM_DECIDE_PASS);
        assert_null(j);
    }
}

/* Nested past the JSON reader's depth: codeshim's to refuse, not sent. */
static void a_body_too_deep_to_read_is_still_ours(void **state)
{
    size_t depth = 2000, i, n = 0;
    char *b = malloc(depth * 2 + 256);
    (void)state;

    assert_non_null(b);
    n += (size_t)sprintf(b, "{\"tools\":[{\"type\":\"code_interpreter\"}],\"input\":");
    for (i = 0; i < depth; i++)
        b[n++] = '[';
    for (i = 0; i < depth; i++)
        b[n++] = ']';
    b[n++] = '}';
    b[n] = '\0';
    assert_int_equal(decide(H(0x300), "https://api.example.com/v1/responses", b),
                     SHIM_DECIDE_OURS);
    free(b);
}

/* A body the program's read callback gives is read only where libcurl
 * would read it: asked outside such a call, the answer is later. */
static void a_read_callback_body_waits(void **state)
{
    struct shim_intercept_job *j = NULL;
    CURL *h = H(0x400);
    (void)state;

    rec_p(h, CURLOPT_URL, "https://api.example.com/v1/responses");
    rec_l(h, CURLOPT_POST, 1);
    rec_l(h, CURLOPT_POSTFIELDSIZE, (long)strlen(CI_BODY));
    assert_int_equal(shim_intercept_decide(h, -1, 0, &j), SHIM_DECIDE_LATER);
    assert_null(j);
    shim_handles_forget(h);
}

int main(void)
{
    /* the library's defaults, whatever the environment running the suite */
    static const char *const vars[] = {"CODESHIM_DISABLE", "CODESHIM_OFFLINE", "CODESHIM_REPLAY",
                                       "CODESHIM_MAX_REQUEST", "CODESHIM_CONFIG"};
    size_t i;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_code_interpreter_request_is_ours),
        cmocka_unit_test(everything_else_is_libcurls),
        cmocka_unit_test(a_body_too_deep_to_read_is_still_ours),
        cmocka_unit_test(a_read_callback_body_waits),
    };

    for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
