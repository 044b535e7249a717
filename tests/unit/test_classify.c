/* Unit tests: classify.c (which transfers codeshim takes over). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "api/classify.h"
#include "base/json.h"
#include "base/text.h"

static void url_paths(void **state)
{
    (void)state;
    assert_int_equal(shim_classify_url("https://api.openai.com/v1/responses"), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_url("http://127.0.0.1:8000/v1/chat/completions"), SHIM_API_CHAT);
    assert_int_equal(shim_classify_url("https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"),
                     SHIM_API_CHAT);
    assert_int_equal(shim_classify_url("https://h/v1/responses/"), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_url("localhost:8080/responses#frag"), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_url("https://h/v1/responses/resp_1/cancel"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url("https://h/v1/completions"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url("https://h/v1/myresponses"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url("https://h/?next=/v1/responses"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url("https://h"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url(NULL), SHIM_API_NONE);
    /* read as libcurl reads it: a "://" in the query of a URL without a
     * scheme is query, not where the host starts */
    assert_int_equal(shim_classify_url("h/v1/responses?next=http://x/y"), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_url("http://h/v1/responses?next=http://x/y"),
                     SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_url("h/v1/chat/completions#see=https://x/y"), SHIM_API_CHAT);
    assert_int_equal(shim_classify_url("h/v1/files?next=http://x/v1/responses"), SHIM_API_NONE);
    /* what libcurl refuses is not ours either */
    assert_int_equal(shim_classify_url("http://h/v1/resp onses"), SHIM_API_NONE);
    assert_int_equal(shim_classify_url(""), SHIM_API_NONE);
}

static const char body[] = "{\"tools\":[{\"type\":\"code_interpreter\"}]}";

static void transfer_checks(void **state)
{
    const char *u = "https://h/v1/responses";
    (void)state;
    assert_int_equal(shim_classify_transfer(1, NULL, u, body, strlen(body), 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_transfer(1, "post", u, body, strlen(body), 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(shim_classify_transfer(0, NULL, u, body, strlen(body), 1 << 20), SHIM_API_NONE);
    assert_int_equal(shim_classify_transfer(1, "PUT", u, body, strlen(body), 1 << 20), SHIM_API_NONE);
    assert_int_equal(shim_classify_transfer(1, NULL, u, body, strlen(body), 8), SHIM_API_NONE);
    assert_int_equal(shim_classify_transfer(1, NULL, u, NULL, 0, 1 << 20), SHIM_API_NONE);
    assert_int_equal(shim_classify_transfer(1, NULL, u, "{\"tools\":[]}", 12, 1 << 20), SHIM_API_NONE);
    /* the needle past the given length does not count */
    assert_int_equal(shim_classify_transfer(1, NULL, u, body, 10, 1 << 20), SHIM_API_NONE);
}

static enum shim_api scan(const char *b, size_t n)
{
    return shim_classify_transfer(1, NULL, "https://h/v1/responses", b, n, 1 << 20);
}

/* The substring scan (memchr to each candidate '_'): the needle
 * anywhere, after near misses that share its first bytes, exactly at the
 * end, or one byte cut off. */
static void needle_scan(void **state)
{
    static const char n[] = "code_interpreter";
    char big[4096];
    (void)state;
    assert_int_equal(scan(n, 16), SHIM_API_RESPONSES);
    assert_int_equal(scan(n, 15), SHIM_API_NONE);
    assert_int_equal(scan("ccode_interpreter", 17), SHIM_API_RESPONSES);
    assert_int_equal(scan("code_interprete code_interpreter", 32), SHIM_API_RESPONSES);
    assert_int_equal(scan("code_interprete", 15), SHIM_API_NONE);
    assert_int_equal(scan("c", 1), SHIM_API_NONE);
    assert_int_equal(scan("xcode_interpreteR", 17), SHIM_API_NONE);
    /* a body of first bytes only, then the needle at its very end */
    memset(big, 'c', sizeof(big));
    assert_int_equal(scan(big, sizeof(big)), SHIM_API_NONE);
    memcpy(big + sizeof(big) - 16, n, 16);
    assert_int_equal(scan(big, sizeof(big)), SHIM_API_RESPONSES);
    assert_int_equal(scan(big, sizeof(big) - 1), SHIM_API_NONE);
    memset(big, '_', sizeof(big)); /* the byte the scan looks for, everywhere */
    assert_int_equal(scan(big, sizeof(big)), SHIM_API_NONE);
    memcpy(big + 1, n, 16);
    assert_int_equal(scan(big, sizeof(big)), SHIM_API_RESPONSES);
    assert_int_equal(scan(big, 16), SHIM_API_NONE);
    assert_int_equal(scan(big, 17), SHIM_API_RESPONSES);
}

static enum shim_api scan_str(const char *b, size_t max)
{
    return shim_classify_transfer(1, NULL, "https://h/v1/responses", b, SHIM_BODY_STRING, max);
}

/* A body given as a C string (POSTFIELDS without a size): the same scan up
 * to its NUL, the size limit applied to its length once the needle is in. */
static void needle_scan_string(void **state)
{
    static const char n[] = "code_interpreter";
    char big[4096];
    (void)state;
    assert_int_equal(scan_str(n, 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(scan_str(body, 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(scan_str(body, 8), SHIM_API_NONE);
    assert_int_equal(scan_str("", 1 << 20), SHIM_API_NONE);
    assert_int_equal(scan_str("cod", 1 << 20), SHIM_API_NONE); /* shorter than the pivot */
    assert_int_equal(scan_str("code_interprete", 1 << 20), SHIM_API_NONE);
    assert_int_equal(scan_str("code_interprete code_interpreter", 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(scan_str("{\"tools\":[]}", 1 << 20), SHIM_API_NONE);
    memset(big, '_', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(scan_str(big, 1 << 20), SHIM_API_NONE);
    memcpy(big + sizeof(big) - 17, n, 16); /* right before the NUL */
    assert_int_equal(scan_str(big, 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(scan_str(big, sizeof(big) - 2), SHIM_API_NONE); /* one byte too long */
    assert_int_equal(shim_classify_transfer(1, "PUT", "https://h/v1/responses", n,
                                            SHIM_BODY_STRING, 1 << 20),
                     SHIM_API_NONE);
}

static int body_is_ours(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    int r = shim_classify_body(j);
    cJSON_Delete(j);
    return r;
}

static void body_checks(void **state)
{
    (void)state;
    assert_true(body_is_ours(body));
    assert_true(body_is_ours("{\"tools\":[{\"type\":\"function\",\"name\":\"f\"},{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}]}"));
    assert_false(body_is_ours("{\"tools\":[{\"type\":\"function\",\"name\":\"code_interpreter\"}]}"));
    assert_false(body_is_ours("{\"input\":\"code_interpreter\"}"));
    assert_false(body_is_ours("[{\"type\":\"code_interpreter\"}]"));
    assert_false(body_is_ours("{\"tools\":{\"type\":\"code_interpreter\"}}"));
    assert_false(body_is_ours("not json code_interpreter"));
}

static const char *unsupported(const char *s, enum shim_api kind, const char **why)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    const char *p;

    assert_non_null(j);
    *why = NULL;
    p = shim_classify_unsupported(j, kind, why);
    cJSON_Delete(j);
    return p;
}

/* background: true cannot run: the loop lives inside the transfer. */
static void unsupported_requests(void **state)
{
    const char *why;
    (void)state;
    assert_string_equal(unsupported("{\"background\":true}", SHIM_API_RESPONSES, &why),
                        "background");
    assert_non_null(strstr(why, "background"));
    assert_null(unsupported("{\"background\":false}", SHIM_API_RESPONSES, &why));
    assert_null(unsupported("{\"background\":null}", SHIM_API_RESPONSES, &why));
    assert_null(unsupported("{\"model\":\"m\"}", SHIM_API_RESPONSES, &why));
    assert_null(unsupported("{\"background\":true}", SHIM_API_CHAT, &why)); /* no such field */
}

/* Each reason a model-path transfer passes through has its own code and
 * a line that says it; nothing of the body but a near-miss type. */
static void pass_reasons(void **state)
{
    static const struct {
        const char *method, *body;
        size_t max;
        enum shim_pass code;
        const char *has, *lacks;
    } cases[] = {
        {"PUT", "{}", 4096, SHIM_PASS_NOT_POST, "PUT", NULL},
        {"POST", NULL, 4096, SHIM_PASS_NO_BODY, "CURLOPT_POSTFIELDS", NULL},
        {"POST", "", 4096, SHIM_PASS_EMPTY_BODY, "empty", NULL},
        {"POST", "{\"tools\":[]}", 5, SHIM_PASS_TOO_LARGE, "CODESHIM_MAX_REQUEST", NULL},
        {"POST", "code_interpreter?", 4096, SHIM_PASS_NOT_JSON, "not JSON", NULL},
        {"POST", "[1]", 4096, SHIM_PASS_NOT_OBJECT, "an array", NULL},
        {"POST", "{\"input\":\"secret words\"}", 4096, SHIM_PASS_NO_TOOLS, "no \"tools\"",
         "secret"},
        {"POST", "{\"tools\":\"code_interpreter\"}", 4096, SHIM_PASS_TOOLS_NOT_ARRAY,
         "a string", NULL},
        {"POST", "{\"tools\":[{\"type\":\"function\"}]}", 4096, SHIM_PASS_NO_CODE_INTERPRETER,
         "(\"tools\" has 1 entry)", "did you mean"},
        {"POST", "{\"tools\":[{\"type\":\"function\"},{\"type\":\"code_interpeter\"}]}", 4096,
         SHIM_PASS_NO_CODE_INTERPRETER, "tools[1] has type \"code_interpeter\"; did you mean",
         NULL},
        {"POST", "{\"tools\":[{\"type\":\"Code-Interpreter\"}]}", 4096,
         SHIM_PASS_NO_CODE_INTERPRETER, "did you mean", NULL},
        /* a quote or control character in the near miss is not echoed */
        {"POST", "{\"tools\":[{\"type\":\"code_interpret\\n\"}]}", 4096,
         SHIM_PASS_NO_CODE_INTERPRETER, "did you mean", "\n"},
        /* spelt with an escape: the tool is there, the quick scan misses it */
        {"POST", "{\"tools\":[{\"type\":\"code\\u005finterpreter\"}]}", 4096, SHIM_PASS_OURS,
         NULL, NULL},
    };
    struct shim_pass_why w;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *b = cases[i].body;
        assert_int_equal(shim_classify_explain(1, cases[i].method, b, b ? strlen(b) : 0,
                                               cases[i].max, &w),
                         cases[i].code);
        assert_int_equal(w.code, cases[i].code);
        if (cases[i].has)
            assert_non_null(strstr(w.text, cases[i].has));
        if (cases[i].lacks)
            assert_null(strstr(w.text, cases[i].lacks));
    }
    assert_int_equal(shim_classify_explain(0, "GET", NULL, 0, 4096, &w), SHIM_PASS_NOT_POST);
    assert_non_null(strstr(w.text, "GET"));
    assert_int_equal(shim_classify_explain(1, "post", "{\"tools\":[]}", SHIM_BODY_STRING, 5, &w),
                     SHIM_PASS_TOO_LARGE);
}

static void distances(void **state)
{
    (void)state;
    assert_int_equal(shim_text_distance("code_interpreter", "code_interpreter", 3), 0);
    assert_int_equal(shim_text_distance("code_interpeter", "code_interpreter", 3), 1);
    assert_int_equal(shim_text_distance("code_interpretr", "code_interpreter", 3), 1);
    assert_int_equal(shim_text_distance("cdoe_interpreter", "code_interpreter", 3), 2);
    assert_int_equal(shim_text_distance("kitten", "sitting", 3), 3);
    assert_int_equal(shim_text_distance("function", "code_interpreter", 3), 4);
    assert_int_equal(shim_text_distance("", "abc", 5), 3);
    char longer[80];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[79] = '\0';
    assert_int_equal(shim_text_distance(longer, longer, 3), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(url_paths),
        cmocka_unit_test(transfer_checks),
        cmocka_unit_test(needle_scan),
        cmocka_unit_test(needle_scan_string),
        cmocka_unit_test(body_checks),
        cmocka_unit_test(unsupported_requests),
        cmocka_unit_test(pass_reasons),
        cmocka_unit_test(distances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
