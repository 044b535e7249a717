/* Unit tests: url.c (the one URL parser, libcurl's curl_url), and the
 * modules that read URLs through it, on the cases where their own
 * splitters used to disagree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/capi.h"
#include "api/classify.h"
#include "api/identity.h"
#include "system/url.h"

static void parts(void **state)
{
    struct shim_url u;
    (void)state;

    assert_int_equal(shim_url_parse("https://us%3Aer:p%40ss@api.example:8443/v1/responses?"
                                    "api-version=2&key=K#frag",
                                    SHIM_URL_DECODE, &u),
                     0);
    assert_string_equal(u.scheme, "https");
    assert_string_equal(u.user, "us:er");
    assert_string_equal(u.password, "p@ss");
    assert_string_equal(u.host, "api.example");
    assert_string_equal(u.port, "8443");
    assert_string_equal(u.path, "/v1/responses");
    assert_string_equal(u.query, "api-version=2&key=K");
    assert_string_equal(u.fragment, "frag");
    shim_url_free(&u);
    /* an escaped control byte: libcurl will not decode it, and it is kept
     * as sent rather than lost (libcurl sends it as a credential) */
    assert_int_equal(shim_url_parse("http://u%0A:p%00@h/", SHIM_URL_DECODE, &u), 0);
    assert_string_equal(u.user, "u%0A");
    assert_string_equal(u.password, "p%00");
    shim_url_free(&u);
    /* without SHIM_URL_DECODE the userinfo stays as sent */
    assert_int_equal(shim_url_parse("http://us%3Aer@h/", 0, &u), 0);
    assert_string_equal(u.user, "us%3Aer");
    assert_null(u.password);
    assert_null(u.query);
    shim_url_free(&u);
    /* no scheme: libcurl guesses one, and the query is only query */
    assert_int_equal(shim_url_parse("h/v1/responses?next=http://x/y", 0, &u), 0);
    assert_string_equal(u.scheme, "http");
    assert_string_equal(u.host, "h");
    assert_string_equal(u.path, "/v1/responses");
    assert_string_equal(u.query, "next=http://x/y");
    shim_url_free(&u);
    assert_int_equal(shim_url_parse("http://h", 0, &u), 0);
    assert_string_equal(u.path, "/");
    shim_url_free(&u);
    /* what libcurl refuses */
    assert_int_equal(shim_url_parse("http://h/a b", 0, &u), -EINVAL);
    assert_null(u.host);
    assert_int_equal(shim_url_parse("", 0, &u), -EINVAL);
    assert_int_equal(shim_url_parse(NULL, 0, &u), -EINVAL);
    shim_url_free(&u); /* harmless after a failure */
}

static void redacted_for_logs(void **state)
{
    char out[256];
    (void)state;

    shim_url_redact("https://user:sk-secret@api.example.com/v1/responses?api-key=SECRET#x", out,
                    sizeof(out));
    assert_string_equal(out, "https://api.example.com/v1/responses");
    shim_url_redact("http://h:8080/openai/deployments/d/chat/completions?api-version=1&key=K",
                    out, sizeof(out));
    assert_string_equal(out, "http://h:8080/openai/deployments/d/chat/completions");
    shim_url_redact("localhost/v1/responses", out, sizeof(out));
    assert_string_equal(out, "http://localhost/v1/responses");
    /* the regression: a URL without a scheme whose query holds another
     * URL kept ?...&key= in the log line */
    shim_url_redact("h/v1/responses?next=http://x/y&key=SECRET", out, sizeof(out));
    assert_string_equal(out, "http://h/v1/responses");
    shim_url_redact("u:SECRET@h/v1/responses", out, sizeof(out));
    assert_string_equal(out, "http://h/v1/responses");
    shim_url_redact("https://h/p", out, 5); /* truncates, stays terminated */
    assert_int_equal(strlen(out), 4);
    shim_url_redact("http://h/a b?key=SECRET", out, sizeof(out));
    assert_string_equal(out, "(unreadable URL)");
    shim_url_redact(NULL, out, sizeof(out));
    assert_string_equal(out, "");
}

static void sibling_paths(void **state)
{
    char out[256];
    (void)state;

    assert_int_equal(shim_url_with_path("https://u:p@h:1/v1/responses?key=K#f", "/v1/files/x",
                                        out, sizeof(out)),
                     0);
    assert_string_equal(out, "https://u:p@h:1/v1/files/x");
    assert_int_equal(shim_url_with_path("h/v1/x?next=http://a/b", "/v1/files?limit=2", out,
                                        sizeof(out)),
                     0);
    assert_string_equal(out, "http://h/v1/files?limit=2");
    assert_int_equal(shim_url_with_path("http://h/", "/a", out, 8), -ENAMETOOLONG);
    assert_int_equal(shim_url_with_path("http://h/a b", "/a", out, sizeof(out)), -EINVAL);
}

static void escapes(void **state)
{
    char out[64];
    size_t n;
    char *d;
    (void)state;

    assert_int_equal(shim_url_escape("/mnt/data/a b&c=d~e.f", out, sizeof(out)), 0);
    assert_string_equal(out, "%2Fmnt%2Fdata%2Fa%20b%26c%3Dd~e.f");
    assert_int_equal(shim_url_escape("abcdef", out, 4), -ENAMETOOLONG);
    d = shim_url_unescape("a%2Bb+c%00d%zz", 14, 0, &n);
    assert_non_null(d);
    assert_int_equal(n, 10);
    assert_memory_equal(d, "a+b+c\0d%zz", 10);
    free(d);
    d = shim_url_unescape("a%2Bb+c", 7, 1, &n); /* a form: '+' is a space, %2B a '+' */
    assert_non_null(d);
    assert_string_equal(d, "a+b c");
    free(d);
}

/* The modules that read URLs, where their own splitters disagreed. */
static void readers_agree(void **state)
{
    struct shim_capi_route r;
    char a[SHIM_IDENTITY_SIZE], b[SHIM_IDENTITY_SIZE], anon[SHIM_IDENTITY_SIZE];
    (void)state;

    assert_int_equal(shim_classify_url("h/v1/responses?next=http://x/y"), SHIM_API_RESPONSES);
    assert_int_equal(shim_capi_route("GET", "h/v1/containers?next=http://x/y&limit=3", &r),
                     SHIM_CAPI_LIST);
    assert_int_equal(r.limit, 3);
    assert_int_equal(shim_capi_route("GET", "h/v1/files?next=http://x/v1/containers", &r),
                     SHIM_CAPI_NONE);
    assert_int_equal(shim_capi_route("GET", "http://h/v1/containers?name=a+b%2Bc", &r),
                     SHIM_CAPI_LIST);
    assert_string_equal(r.name, "a b+c");
    /* identity: userinfo decoded as libcurl sends it, parameters of a
     * scheme-less URL read past a URL in the query */
    shim_identity_of(NULL, "http://h/v1/responses", NULL, anon);
    assert_string_equal(anon, "anonymous");
    shim_identity_of(NULL, "h/v1/responses?next=http://x/y&key=K1", NULL, a);
    shim_identity_of(NULL, "h/v1/responses?next=http://x/y&key=K2", NULL, b);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, anon);
    shim_identity_of(NULL, "http://u:p%41@h/v1/responses", NULL, a);
    shim_identity_of(NULL, "http://u:pA@h/v1/responses", NULL, b);
    assert_string_equal(a, b);
    assert_string_not_equal(a, anon);
    shim_identity_of(NULL, "http://sk%0A@h/v1/responses", NULL, a);
    assert_string_not_equal(a, anon);
    shim_identity_of(NULL, "http://h/v1/responses?k%65y=K1", NULL, a);
    shim_identity_of(NULL, "http://h/v1/responses?key=K1", NULL, b);
    assert_string_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parts),         cmocka_unit_test(redacted_for_logs),
        cmocka_unit_test(sibling_paths), cmocka_unit_test(escapes),
        cmocka_unit_test(readers_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
