/* Unit tests: identity.c (from headers, URL and credential options to an
 * identity) and what handles.c records for it and for duplication. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/identity.h"
#include "curl/handles.h"

#define ANON "anonymous"

/* A header list on the stack: up to 8 lines, NULL-terminated. */
struct hlist {
    struct curl_slist n[8];
};

static const struct curl_slist *hl(struct hlist *l, const char *const *lines)
{
    size_t i;

    for (i = 0; lines[i]; i++) {
        l->n[i].data = (char *)lines[i];
        l->n[i].next = lines[i + 1] ? &l->n[i + 1] : NULL;
    }
    return i ? &l->n[0] : NULL;
}

/* The identity of one request. */
static const char *id_of(char out[SHIM_IDENTITY_SIZE], const char *const *lines,
                         const char *url, const struct shim_creds *c)
{
    struct hlist l;

    shim_identity_of(lines ? hl(&l, lines) : NULL, url, c, out);
    return out;
}

static void assert_hex32(const char *id)
{
    size_t i;

    assert_int_equal(strlen(id), 32);
    for (i = 0; i < 32; i++)
        assert_non_null(strchr("0123456789abcdef", id[i]));
}

static void key_identity_is_stable(void **state)
{
    char a[SHIM_IDENTITY_SIZE];
    (void)state;

    /* SHA-256("codeshim-identity-v1\0sk-one\0"), as codeshim always named
     * it: sessions made before keep their identity */
    shim_identity_key("sk-one", a);
    assert_string_equal(a, "999c9a1518223c2fe3f926daae750fef");
    shim_identity_key(NULL, a);
    assert_string_equal(a, ANON);
    shim_identity_key("", a);
    assert_string_equal(a, ANON);
}

static void no_credential_is_anonymous(void **state)
{
    char a[SHIM_IDENTITY_SIZE];
    struct shim_creds c;
    const char *plain[] = {"Content-Type: application/json", "Accept: */*",
                           "User-Agent: app/1.0", "Idempotency-Key: 5d1e", "Expect:",
                           NULL};
    const char *emptied[] = {"Authorization:", "api-key;", "x-api-key:   ", NULL};
    (void)state;

    memset(&c, 0, sizeof(c));
    assert_string_equal(id_of(a, NULL, NULL, NULL), ANON);
    assert_string_equal(id_of(a, plain, "http://h/v1/responses?api-version=2024-10-01", &c),
                        ANON);
    /* "Name:" removes a header and "Name;" sends it empty: no key */
    assert_string_equal(id_of(a, emptied, "http://h/v1/responses", &c), ANON);
    /* nothing after '#' is sent; '@' in the path is not userinfo */
    assert_string_equal(id_of(a, NULL, "http://h/v1/responses#key=SECRET", NULL), ANON);
    assert_string_equal(id_of(a, NULL, "http://h/v1/a@b/responses?key=", NULL), ANON);
    assert_string_equal(id_of(a, NULL, "h/v1/responses?next=http://a@b", NULL), ANON);
}

static void recognised_keys_keep_their_identity(void **state)
{
    char k[SHIM_IDENTITY_SIZE], a[SHIM_IDENTITY_SIZE];
    struct shim_creds c;
    const char *bearer[] = {"Content-Type: application/json", "authorization:  Bearer  sk-one ",
                            NULL};
    const char *azure[] = {"api-key: sk-one", NULL};
    const char *anthropic[] = {"X-API-Key: sk-one", NULL};
    (void)state;

    shim_identity_key("sk-one", k);
    assert_string_equal(id_of(a, bearer, "http://h/v1/responses", NULL), k);
    assert_string_equal(id_of(a, azure, NULL, NULL), k);
    assert_string_equal(id_of(a, anthropic, NULL, NULL), k);
    memset(&c, 0, sizeof(c));
    shim_identity_option(&c, CURLOPT_XOAUTH2_BEARER, "sk-one");
    assert_string_equal(id_of(a, NULL, "http://h/v1/responses", &c), k);
    shim_identity_option(&c, CURLOPT_XOAUTH2_BEARER, NULL);
    assert_string_equal(id_of(a, NULL, NULL, &c), ANON);
}

/* Two values of one credential never share; the same value always does. */
static void separates(const char *const *la, const char *ua, const char *const *lb,
                      const char *ub)
{
    char a[SHIM_IDENTITY_SIZE], b[SHIM_IDENTITY_SIZE], a2[SHIM_IDENTITY_SIZE];

    id_of(a, la, ua, NULL);
    id_of(b, lb, ub, NULL);
    id_of(a2, la, ua, NULL);
    assert_hex32(a);
    assert_hex32(b);
    assert_string_not_equal(a, b);
    assert_string_equal(a, a2);
}

static void query_string_keys(void **state)
{
    static const char *const names[] = {"api-key", "key", "access_token", "token", "sig",
                                        "code", "subscription-key", "apiKey", "X-Amz-Signature",
                                        "auth", "client_secret", "password", "session"};
    char ua[256], ub[256], x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(ua, sizeof(ua), "http://h/v1/responses?api-version=1&%s=AAA", names[i]);
        snprintf(ub, sizeof(ub), "http://h/v1/responses?api-version=1&%s=BBB", names[i]);
        separates(NULL, ua, NULL, ub);
    }
    /* order does not matter; escapes are decoded; ';' separates too */
    assert_string_equal(id_of(x, NULL, "http://h/v1/responses?key=A&sig=S", NULL),
                        id_of(y, NULL, "http://h/v1/responses?sig=S&api-version=1&key=A", NULL));
    assert_string_equal(id_of(x, NULL, "http://h/v1/responses?key=A", NULL),
                        id_of(y, NULL, "http://h/v1/responses?k%65y=%41", NULL));
    assert_string_not_equal(id_of(x, NULL, "http://h/v1/responses?v=1;key=A", NULL), ANON);
    /* a key in the query is not the same identity as the bare key */
    shim_identity_key("A", y);
    assert_string_not_equal(id_of(x, NULL, "http://h/v1/responses?key=A", NULL), y);
}

static void url_userinfo(void **state)
{
    char x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    (void)state;

    separates(NULL, "http://u:pw1@h:80/v1/responses", NULL, "http://u:pw2@h:80/v1/responses");
    separates(NULL, "http://alice@h/v1/responses", NULL, "http://bob@h/v1/responses");
    separates(NULL, "alice:pw@h/v1/responses", NULL, "bob:pw@h/v1/responses");
    assert_string_equal(id_of(x, NULL, "http://u:p%40ss@h/v1/responses", NULL),
                        id_of(y, NULL, "http://u:p%40ss@h/v1/responses?api-version=1", NULL));
}

static void gateway_headers(void **state)
{
    static const char *const names[] = {
        "Ocp-Apim-Subscription-Key", "x-goog-api-key", "x-auth-token", "Cookie",
        "X-Api-Token", "apikey", "Proxy-Authorization", "x-amz-security-token",
        "X-Session-Id", "x-signature", "private-token", "x-secret"};
    char la[128], lb[128], x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    const char *ha[] = {"Content-Type: application/json", la, NULL};
    const char *hb[] = {"Content-Type: application/json", lb, NULL};
    const char *basic_a[] = {"Authorization: Basic dTpwMQ==", NULL};
    const char *basic_b[] = {"Authorization: Basic dTpwMg==", NULL};
    const char *lower[] = {"ocp-apim-subscription-key:k1 ", NULL};
    const char *upper[] = {"OCP-APIM-SUBSCRIPTION-KEY :  k1", NULL};
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(la, sizeof(la), "%s: tenant-a", names[i]);
        snprintf(lb, sizeof(lb), "%s: tenant-b", names[i]);
        separates(ha, NULL, hb, NULL);
    }
    separates(basic_a, NULL, basic_b, NULL); /* any Authorization scheme */
    assert_string_equal(id_of(x, lower, NULL, NULL), id_of(y, upper, NULL, NULL));
}

static void all_material_together(void **state)
{
    char k[SHIM_IDENTITY_SIZE], x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    const char *both[] = {"Authorization: Bearer sk-one", "x-goog-api-key: g1", NULL};
    const char *swapped[] = {"x-goog-api-key: g1", "Authorization: Bearer sk-one", NULL};
    const char *other[] = {"Authorization: Bearer sk-one", "x-goog-api-key: g2", NULL};
    const char *key_only[] = {"Authorization: Bearer sk-one", NULL};
    (void)state;

    /* a recognised key with anything else: never the key's identity alone,
     * so a second credential cannot ride on someone's key */
    shim_identity_key("sk-one", k);
    assert_string_not_equal(id_of(x, both, NULL, NULL), k);
    assert_string_equal(id_of(x, both, NULL, NULL), id_of(y, swapped, NULL, NULL));
    assert_string_not_equal(id_of(x, both, NULL, NULL), id_of(y, other, NULL, NULL));
    assert_string_not_equal(id_of(x, key_only, "http://h/v1/responses?sig=1", NULL), k);
}

static void credential_options(void **state)
{
    char x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    struct shim_creds a, b;
    struct curl_blob blob = {(void *)"cert\0bytes", 10, 0};
    size_t i;
    (void)state;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    /* USERPWD is USERNAME + PASSWORD, split at the first ':' */
    shim_identity_option(&a, CURLOPT_USERPWD, "alice:pw:1");
    shim_identity_option(&b, CURLOPT_USERNAME, "alice");
    shim_identity_option(&b, CURLOPT_PASSWORD, "pw:1");
    assert_string_equal(id_of(x, NULL, NULL, &a), id_of(y, NULL, NULL, &b));
    assert_hex32(x);
    shim_identity_option(&b, CURLOPT_PASSWORD, "pw:2");
    assert_string_not_equal(id_of(x, NULL, NULL, &a), id_of(y, NULL, NULL, &b));
    /* the digests hold no part of the secret */
    for (i = 0; i < SHIM_CRED_NSLOTS; i++)
        assert_null(strstr(a.d[i], "alice"));
    shim_identity_option(&a, CURLOPT_USERPWD, NULL);
    assert_string_equal(id_of(x, NULL, NULL, &a), ANON);
    shim_identity_option(&a, CURLOPT_COOKIE, "sid=1");
    assert_hex32(id_of(x, NULL, NULL, &a));
    memset(&a, 0, sizeof(a));
    shim_identity_option(&a, CURLOPT_SSLCERT_BLOB, &blob);
    assert_hex32(id_of(x, NULL, NULL, &a));
    assert_true(shim_identity_is_option(CURLOPT_USERPWD));
    assert_true(shim_identity_is_option(CURLOPT_PROXYPASSWORD));
    assert_false(shim_identity_is_option(CURLOPT_URL));
}

static void credential_names(void **state)
{
    (void)state;
    assert_true(shim_identity_credential_name("Authorization", 13));
    assert_true(shim_identity_credential_name("X-GOOG-API-KEY", 14));
    assert_true(shim_identity_credential_name("sig", 3));
    assert_false(shim_identity_credential_name("Content-Type", 12));
    assert_false(shim_identity_credential_name("api-version", 11));
    assert_false(shim_identity_credential_name("Idempotency-Key", 15));
    assert_false(shim_identity_credential_name("keyX", 0));
    assert_true(shim_identity_credential_name("\0key", 4)); /* from "%00key" */
    char longname[400];
    memset(longname, 'a', sizeof(longname));
    assert_true(shim_identity_credential_name(longname, sizeof(longname)));
}

/* Many credentials: still deterministic, order-free up to the sort cap,
 * and never the same as a subset. */
static void many_entries(void **state)
{
    static char url[16384], url2[16384];
    char x[SHIM_IDENTITY_SIZE], y[SHIM_IDENTITY_SIZE];
    size_t n = 0, i;
    (void)state;

    n += (size_t)snprintf(url + n, sizeof(url) - n, "http://h/v1/responses?");
    for (i = 0; i < 200; i++)
        n += (size_t)snprintf(url + n, sizeof(url) - n, "key%zu=%zu&", i, i);
    memcpy(url2, url, n + 1);
    url2[n - 2] = '8'; /* the last value differs */
    assert_hex32(id_of(x, NULL, url, NULL));
    assert_string_equal(x, id_of(y, NULL, url, NULL));
    assert_string_not_equal(x, id_of(y, NULL, url2, NULL));
}

/* handles.c keeps credential options only as digests, and says when the
 * body is an unsized COPYPOSTFIELDS copy (which libcurl 7.88 cannot
 * duplicate), mirroring when libcurl drops that copy. */
static void handles_record_for_identity(void **state)
{
    CURL *h = (CURL *)(uintptr_t)0x5eed0;
    struct shim_handle_view v;
    union shim_optval o;
    char x[SHIM_IDENTITY_SIZE];
    (void)state;

    o.p = (void *)"http://h/v1/responses";
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_URL, o, 1);
    o.p = (void *)"alice:s3cret";
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_USERPWD, o, 1);
    o.p = (void *)"{\"a\":1}";
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_COPYPOSTFIELDS, o, 1);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_true(v.body_copied_unsized);
    assert_int_equal(v.body_len, 7);
    assert_null(memmem(&v.creds, sizeof(v.creds), "s3cret", 6));
    shim_identity_of(v.headers, v.url, &v.creds, x);
    assert_hex32(x);
    shim_handle_view_free(&v);
    /* any size after an unsized copy: libcurl drops the copy */
    o.l = 3;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_POSTFIELDSIZE, o, 1);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_null(v.body);
    assert_false(v.body_copied_unsized);
    shim_handle_view_free(&v);
    /* a sized copy duplicates fine */
    o.p = (void *)"{\"a\":1}";
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_COPYPOSTFIELDS, o, 1);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_int_equal(v.body_len, 3);
    assert_false(v.body_copied_unsized);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_identity_is_stable),
        cmocka_unit_test(no_credential_is_anonymous),
        cmocka_unit_test(recognised_keys_keep_their_identity),
        cmocka_unit_test(query_string_keys),
        cmocka_unit_test(url_userinfo),
        cmocka_unit_test(gateway_headers),
        cmocka_unit_test(all_material_together),
        cmocka_unit_test(credential_options),
        cmocka_unit_test(credential_names),
        cmocka_unit_test(many_entries),
        cmocka_unit_test(handles_record_for_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
