/* Unit tests: handles.c, the per-CURL* table (handles.h). Handles are
 * fake pointer values chosen by the test: the table never dereferences
 * them, so address reuse is driven directly instead of hoping malloc hands
 * the same address back. Every test forgets what it recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl/handles.h"
#include "handles_rec.h"

static size_t dummy_write(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

static size_t dummy_header(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

static void view(CURL *h, struct shim_handle_view *v)
{
    assert_int_equal(shim_handles_view(h, v), 0);
}

static int method_of(CURL *h)
{
    struct shim_handle_view v;
    int m;

    view(h, &v);
    m = v.method;
    shim_handle_view_free(&v);
    return m;
}

static void assert_no_creds(const struct shim_handle_view *v)
{
    int i;

    for (i = 0; i < SHIM_CRED_NSLOTS; i++)
        assert_string_equal(v->creds.d[i], "");
}

/* Everything a view shows for a handle with nothing but a URL recorded. */
static void assert_clean(const struct shim_handle_view *v, const char *url)
{
    if (url)
        assert_string_equal(v->url, url);
    else
        assert_null(v->url);
    assert_null(v->custom_request);
    assert_int_equal(v->method, SHIM_METHOD_GET);
    assert_null(v->body);
    assert_int_equal(v->body_len, 0);
    assert_false(v->body_copied_unsized);
    assert_null(v->headers);
    assert_null(v->write_cb);
    assert_ptr_equal(v->write_data, stdout);
    assert_null(v->header_cb);
    assert_null(v->header_data);
    assert_int_equal(v->failonerror, 0);
    assert_int_equal(v->include_header, 0);
    assert_null(v->errorbuffer);
    assert_no_creds(v);
}

static const struct shim_answer_info answer_201 = {
    .response_code = 201,
    .http_version = CURL_HTTP_VERSION_1_1,
    .content_type = "application/json",
    .effective_url = "https://api.example/v1/responses",
    .scheme = "HTTPS",
    .method = "POST",
    .content_length = 1234,
    .total_time = 1.5,
    .size_download = 1234,
    .size_upload = 56,
    .header_size = 78,
};

/* Records one of everything on h, with a program-owned header list and
 * error buffer, plus a synthetic answer. */
static void record_everything(CURL *h, struct curl_slist *hdr, char *errbuf)
{
    rec_p(h, CURLOPT_URL, "http://h/v1/responses");
    rec_p(h, CURLOPT_CUSTOMREQUEST, "PATCH");
    rec_p(h, CURLOPT_POSTFIELDS, "{\"a\":1}");
    rec_l(h, CURLOPT_POSTFIELDSIZE, 7);
    rec_p(h, CURLOPT_HTTPHEADER, hdr);
    rec_fn(h, CURLOPT_WRITEFUNCTION, dummy_write);
    rec_p(h, CURLOPT_WRITEDATA, errbuf);
    rec_fn(h, CURLOPT_HEADERFUNCTION, dummy_header);
    rec_p(h, CURLOPT_HEADERDATA, hdr);
    rec_l(h, CURLOPT_FAILONERROR, 1);
    rec_l(h, CURLOPT_HEADER, 1);
    rec_p(h, CURLOPT_ERRORBUFFER, errbuf);
    rec_p(h, CURLOPT_USERPWD, "alice:s3cret");
    rec_p(h, CURLOPT_XOAUTH2_BEARER, "sk-bearer");
    assert_int_equal(shim_handles_set_answer(h, &answer_201), 0);
}

/* ---- recording ---- */

static void unknown_handles_have_nothing(void **state)
{
    struct shim_handle_view v;
    union shim_optval o;
    size_t base = shim_handles_count();
    long code = -1;
    (void)state;

    assert_int_equal(shim_handles_view(H(0x1000), &v), -ENOENT);
    assert_null(v.url);
    /* create=0 (the guard is up) records only for a known handle */
    o.p = (void *)"http://h/v1/responses";
    shim_handles_record(H(0x1000), SHIM_FLAVOR_OPENSSL, CURLOPT_URL, o, 0);
    assert_int_equal(shim_handles_view(H(0x1000), &v), -ENOENT);
    /* an option codeshim does not need makes no entry, the second time
     * (answered from the learnt bits) neither; nor does NULL, nor an
     * option number beyond any libcurl's */
    rec_l(H(0x1000), CURLOPT_VERBOSE, 1);
    rec_l(H(0x1000), CURLOPT_VERBOSE, 0);
    rec_p(H(0x1000), CURLOPT_USERAGENT, "ua");
    rec_p(H(0x1000), CURLOPT_USERAGENT, "ua");
    rec_l(H(0x1000), (CURLoption)(CURLOPTTYPE_LONG + 9999), 1);
    rec_l(H(0x1000), (CURLoption)-1, 1);
    rec_p(NULL, CURLOPT_URL, "http://h/v1/responses");
    assert_int_equal(shim_handles_count(), base);
    /* a credential option is one, the first time and every time after */
    rec_p(H(0x1000), CURLOPT_PASSWORD, "pw");
    assert_int_equal(shim_handles_count(), base + 1);
    shim_handles_forget(H(0x1000));
    rec_p(H(0x1000), CURLOPT_PASSWORD, "pw");
    assert_int_equal(shim_handles_count(), base + 1);
    shim_handles_forget(H(0x1000));
    assert_int_equal(shim_handles_get_answer(H(0x1000), CURLINFO_RESPONSE_CODE, &code), 0);
    assert_int_equal(code, -1);
    /* reset and clear of an unknown handle create nothing */
    shim_handles_reset(H(0x1000));
    shim_handles_clear_answer(H(0x1000));
    shim_handles_forget(H(0x1000));
    assert_int_equal(shim_handles_count(), base);
}

static void view_shows_recorded_options(void **state)
{
    CURL *h = H(0x2000);
    struct curl_slist hdr = {(char *)"Content-Type: application/json", NULL};
    char errbuf[CURL_ERROR_SIZE], custom[16] = "PATCH";
    struct shim_handle_view v;
    union shim_optval o;
    size_t base = shim_handles_count();
    (void)state;

    o.p = (void *)"http://h/v1/responses";
    shim_handles_record(h, SHIM_FLAVOR_GNUTLS, CURLOPT_URL, o, 1);
    assert_int_equal(shim_handles_count(), base + 1);
    view(h, &v);
    assert_int_equal(v.flavor, SHIM_FLAVOR_GNUTLS);
    assert_clean(&v, "http://h/v1/responses");
    shim_handle_view_free(&v);

    rec_p(h, CURLOPT_CUSTOMREQUEST, custom);
    rec_p(h, CURLOPT_HTTPHEADER, &hdr);
    rec_fn(h, CURLOPT_WRITEFUNCTION, dummy_write);
    rec_p(h, CURLOPT_WRITEDATA, errbuf);
    rec_fn(h, CURLOPT_HEADERFUNCTION, dummy_header);
    rec_p(h, CURLOPT_HEADERDATA, &hdr);
    rec_l(h, CURLOPT_FAILONERROR, 1);
    rec_l(h, CURLOPT_HEADER, 1);
    rec_p(h, CURLOPT_ERRORBUFFER, errbuf);
    memcpy(custom, "BOGUS", 6); /* CUSTOMREQUEST is copied, as libcurl does */
    view(h, &v);
    assert_int_equal(v.flavor, SHIM_FLAVOR_GNUTLS);
    assert_string_equal(v.custom_request, "PATCH");
    assert_ptr_equal(v.headers, &hdr); /* borrowed */
    assert_ptr_equal(v.write_cb, dummy_write);
    assert_ptr_equal(v.write_data, errbuf);
    assert_ptr_equal(v.header_cb, dummy_header);
    assert_ptr_equal(v.header_data, &hdr);
    assert_int_equal(v.failonerror, 1);
    assert_int_equal(v.include_header, 1);
    assert_ptr_equal(v.errorbuffer, errbuf);
    shim_handle_view_free(&v);
    assert_null(v.url);
    assert_null(v.custom_request);

    /* an explicit WRITEDATA of NULL is NULL, not the stdout default;
     * NULL options clear */
    rec_p(h, CURLOPT_WRITEDATA, NULL);
    rec_p(h, CURLOPT_URL, NULL);
    rec_p(h, CURLOPT_CUSTOMREQUEST, NULL);
    view(h, &v);
    assert_null(v.write_data);
    assert_null(v.url);
    assert_null(v.custom_request);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_count(), base);
    assert_int_equal(shim_handles_view(h, &v), -ENOENT);
}

static void views_own_their_strings(void **state)
{
    CURL *h = H(0x2100);
    struct shim_handle_view a, b;
    char url[64] = "http://h/one/responses";
    (void)state;

    rec_p(h, CURLOPT_URL, url);
    memcpy(url, "http://h/XXX", 13); /* the URL was copied when set */
    view(h, &a);
    rec_p(h, CURLOPT_URL, "http://h/two/responses");
    rec_p(h, CURLOPT_CUSTOMREQUEST, "PUT");
    view(h, &b);
    assert_string_equal(a.url, "http://h/one/responses"); /* a copy, still valid */
    assert_null(a.custom_request);
    assert_string_equal(b.url, "http://h/two/responses");
    assert_string_equal(b.custom_request, "PUT");
    assert_ptr_not_equal(a.url, b.url);
    shim_handles_forget(h);
    /* views outlive the entry: they own url and custom_request */
    assert_string_equal(a.url, "http://h/one/responses");
    assert_string_equal(b.custom_request, "PUT");
    shim_handle_view_free(&a);
    shim_handle_view_free(&b);
    shim_handle_view_free(&b); /* idempotent: pointers were cleared */
}

/* ---- body and size ordering (handles.h, DESIGN: POSTFIELDS is read at
 * perform time, its size may come before or after it) ---- */

static void postfields_are_borrowed_and_sized_in_any_order(void **state)
{
    CURL *a = H(0x3000), *b = H(0x3100), *c = H(0x3200);
    char body[32] = "{\"k\":\"v\"}";
    struct shim_handle_view v;
    (void)state;

    /* size after the body */
    rec_p(a, CURLOPT_POSTFIELDS, body);
    rec_l(a, CURLOPT_POSTFIELDSIZE, 4);
    view(a, &v);
    assert_ptr_equal(v.body, body);
    assert_int_equal(v.body_len, 4);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    assert_false(v.body_copied_unsized);
    shim_handle_view_free(&v);

    /* size before the body, the _LARGE flavour */
    rec_off(b, CURLOPT_POSTFIELDSIZE_LARGE, 5);
    rec_p(b, CURLOPT_POSTFIELDS, body);
    view(b, &v);
    assert_ptr_equal(v.body, body);
    assert_int_equal(v.body_len, 5);
    shim_handle_view_free(&v);

    /* no size: strlen at perform (view) time, not at setopt time */
    rec_p(c, CURLOPT_POSTFIELDS, body);
    strcpy(body, "{\"longer\":\"body\"}");
    view(c, &v);
    assert_ptr_equal(v.body, body);
    assert_int_equal(v.body_len, strlen(body));
    assert_false(v.body_copied_unsized);
    shim_handle_view_free(&v);

    /* POSTFIELDS NULL: no body in memory, still a POST */
    rec_p(c, CURLOPT_POSTFIELDS, NULL);
    view(c, &v);
    assert_null(v.body);
    assert_int_equal(v.body_len, 0);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    shim_handle_view_free(&v);

    shim_handles_forget(a);
    shim_handles_forget(b);
    shim_handles_forget(c);
}

static void copypostfields_are_copied_as_libcurl_does(void **state)
{
    CURL *h = H(0x3300);
    char src[16];
    struct shim_handle_view v;
    (void)state;

    /* sized copy: exactly size bytes, NUL bytes included; the program may
     * reuse its buffer at once */
    memcpy(src, "ab\0cdefgh", 10);
    rec_l(h, CURLOPT_POSTFIELDSIZE, 5);
    rec_p(h, CURLOPT_COPYPOSTFIELDS, src);
    memset(src, 'Z', sizeof(src));
    view(h, &v);
    assert_non_null(v.body);
    assert_ptr_not_equal(v.body, src);
    assert_int_equal(v.body_len, 5);
    assert_memory_equal(v.body, "ab\0cd", 5);
    assert_false(v.body_copied_unsized);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    shim_handle_view_free(&v);

    /* a smaller size keeps the copy, a larger one drops it (libcurl:
     * the copy is no longer valid) */
    rec_l(h, CURLOPT_POSTFIELDSIZE, 3);
    view(h, &v);
    assert_int_equal(v.body_len, 3);
    assert_memory_equal(v.body, "ab\0", 3);
    shim_handle_view_free(&v);
    rec_off(h, CURLOPT_POSTFIELDSIZE_LARGE, 4);
    view(h, &v);
    assert_null(v.body);
    shim_handle_view_free(&v);

    /* unsized copy: strlen of the string, flagged for upstream.c */
    strcpy(src, "{\"x\":2}");
    rec_l(h, CURLOPT_POSTFIELDSIZE, -1);
    rec_p(h, CURLOPT_COPYPOSTFIELDS, src);
    src[0] = 'Q';
    view(h, &v);
    assert_int_equal(v.body_len, 7);
    assert_memory_equal(v.body, "{\"x\":2}", 7);
    assert_true(v.body_copied_unsized);
    shim_handle_view_free(&v);

    /* a later POSTFIELDS replaces the copy with the borrowed pointer */
    rec_p(h, CURLOPT_POSTFIELDS, src);
    view(h, &v);
    assert_ptr_equal(v.body, src);
    assert_int_equal(v.body_len, strlen(src));
    assert_false(v.body_copied_unsized);
    shim_handle_view_free(&v);

    /* COPYPOSTFIELDS NULL: no body, a POST */
    rec_p(h, CURLOPT_COPYPOSTFIELDS, NULL);
    view(h, &v);
    assert_null(v.body);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

static void method_follows_libcurl(void **state)
{
    CURL *h = H(0x3400);
    (void)state;

    rec_p(h, CURLOPT_URL, "http://h/");
    assert_int_equal(method_of(h), SHIM_METHOD_GET);
    rec_p(h, CURLOPT_POSTFIELDS, "x");
    assert_int_equal(method_of(h), SHIM_METHOD_POST);
    rec_l(h, CURLOPT_NOBODY, 0); /* only undoes a HEAD */
    assert_int_equal(method_of(h), SHIM_METHOD_POST);
    rec_l(h, CURLOPT_NOBODY, 1);
    assert_int_equal(method_of(h), SHIM_METHOD_HEAD);
    rec_l(h, CURLOPT_NOBODY, 0);
    assert_int_equal(method_of(h), SHIM_METHOD_GET);
    rec_l(h, CURLOPT_POST, 1);
    assert_int_equal(method_of(h), SHIM_METHOD_POST);
    rec_l(h, CURLOPT_HTTPGET, 0); /* 0 does nothing */
    assert_int_equal(method_of(h), SHIM_METHOD_POST);
    rec_l(h, CURLOPT_POST, 0);
    assert_int_equal(method_of(h), SHIM_METHOD_GET);
    rec_l(h, CURLOPT_UPLOAD, 1);
    assert_int_equal(method_of(h), SHIM_METHOD_PUT);
    rec_l(h, CURLOPT_UPLOAD, 0);
    assert_int_equal(method_of(h), SHIM_METHOD_GET);
    rec_p(h, CURLOPT_HTTPPOST, (void *)&h);
    assert_int_equal(method_of(h), SHIM_METHOD_POST_FORM);
    rec_p(h, CURLOPT_MIMEPOST, (void *)&h);
    assert_int_equal(method_of(h), SHIM_METHOD_POST_MIME);
    rec_l(h, CURLOPT_HTTPGET, 1);
    assert_int_equal(method_of(h), SHIM_METHOD_GET);
    shim_handles_forget(h);
}

static void credentials_kept_as_digests(void **state)
{
    CURL *h = H(0x3500);
    struct shim_handle_view v;
    (void)state;

    rec_p(h, CURLOPT_USERPWD, "alice:s3cret");
    rec_p(h, CURLOPT_XOAUTH2_BEARER, "sk-bearer-value");
    view(h, &v);
    assert_string_not_equal(v.creds.d[SHIM_CRED_USER], "");
    assert_string_not_equal(v.creds.d[SHIM_CRED_PASSWORD], "");
    assert_string_not_equal(v.creds.d[SHIM_CRED_XOAUTH2], "");
    assert_null(memmem(&v.creds, sizeof(v.creds), "s3cret", 6));
    assert_null(memmem(&v.creds, sizeof(v.creds), "sk-bearer", 9));
    shim_handle_view_free(&v);
    rec_p(h, CURLOPT_XOAUTH2_BEARER, NULL);
    view(h, &v);
    assert_string_equal(v.creds.d[SHIM_CRED_XOAUTH2], "");
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

/* ---- the lifecycle: cleanup + reused address, reset, dup ---- */

/* curl_easy_cleanup then curl_easy_init at the same address: preload.c
 * forgets the address on both; what the new handle records starts from
 * libcurl's defaults, with no answer from the old transfer. */
static void reused_address_starts_clean(void **state)
{
    CURL *h = H(0x4000);
    struct curl_slist hdr = {(char *)"Authorization: Bearer sk-old", NULL};
    char errbuf[CURL_ERROR_SIZE];
    struct shim_handle_view v;
    size_t base = shim_handles_count();
    long code = 0;
    const char *ct = NULL;
    (void)state;

    record_everything(h, &hdr, errbuf);
    assert_int_equal(shim_handles_count(), base + 1);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_count(), base);
    assert_int_equal(shim_handles_view(h, &v), -ENOENT);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &code), 0);

    /* the new handle at the same address records only a URL */
    shim_handles_forget(h); /* the fresh init: forgetting twice is harmless */
    rec_p(h, CURLOPT_URL, "http://h/v2/chat/completions");
    assert_int_equal(shim_handles_count(), base + 1);
    view(h, &v);
    assert_clean(&v, "http://h/v2/chat/completions");
    shim_handle_view_free(&v);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &code), 0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_TYPE, &ct), 0);
    assert_null(ct);

    /* and an answer set on the reused address is only the new one */
    shim_handles_forget(h);
    {
        struct shim_answer_info a = {.response_code = 500};
        assert_int_equal(shim_handles_set_answer(h, &a), 0);
    }
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_TYPE, &ct), 1);
    assert_null(ct);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &code), 1);
    assert_int_equal(code, 500);
    view(h, &v);
    assert_clean(&v, NULL);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_count(), base);
}

/* curl_easy_duphandle can return an address whose old handle was never
 * forgotten (state left by a missed cleanup): the copy replaces it. */
static void dup_onto_stale_address_replaces_it(void **state)
{
    CURL *from = H(0x4100), *to = H(0x4200), *none = H(0x4300);
    struct curl_slist hdr = {(char *)"x-api-key: sk-stale", NULL};
    char errbuf[CURL_ERROR_SIZE];
    struct shim_handle_view v;
    size_t base = shim_handles_count();
    long code = 0;
    (void)state;

    record_everything(to, &hdr, errbuf);
    rec_p(from, CURLOPT_URL, "http://h/v1/responses");
    shim_handles_dup(from, to);
    assert_int_equal(shim_handles_count(), base + 2);
    view(to, &v);
    assert_clean(&v, "http://h/v1/responses");
    shim_handle_view_free(&v);
    assert_int_equal(shim_handles_get_answer(to, CURLINFO_RESPONSE_CODE, &code), 0);

    /* duplicating an unrecorded handle leaves nothing at the target */
    record_everything(to, &hdr, errbuf);
    shim_handles_dup(none, to);
    assert_int_equal(shim_handles_view(to, &v), -ENOENT);
    assert_int_equal(shim_handles_get_answer(to, CURLINFO_RESPONSE_CODE, &code), 0);
    assert_int_equal(shim_handles_count(), base + 1);
    shim_handles_forget(from);
    assert_int_equal(shim_handles_count(), base);
}

static void reset_restores_defaults_keeps_flavor(void **state)
{
    CURL *h = H(0x4400);
    struct curl_slist hdr = {(char *)"Accept: */*", NULL};
    char errbuf[CURL_ERROR_SIZE];
    struct shim_handle_view v;
    union shim_optval o;
    size_t base = shim_handles_count();
    long code = 0;
    (void)state;

    o.p = (void *)"http://h/";
    shim_handles_record(h, SHIM_FLAVOR_GNUTLS, CURLOPT_URL, o, 1);
    record_everything(h, &hdr, errbuf);
    rec_l(h, CURLOPT_POSTFIELDSIZE, 3);
    rec_p(h, CURLOPT_COPYPOSTFIELDS, "abc");
    shim_handles_reset(h);
    assert_int_equal(shim_handles_count(), base + 1);
    view(h, &v);
    assert_int_equal(v.flavor, SHIM_FLAVOR_GNUTLS);
    assert_clean(&v, NULL);
    shim_handle_view_free(&v);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &code), 0);

    /* after reset the size is unknown again: an unsized copy */
    rec_p(h, CURLOPT_COPYPOSTFIELDS, "{\"z\":1}");
    view(h, &v);
    assert_int_equal(v.body_len, 7);
    assert_true(v.body_copied_unsized);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_count(), base);
}

static void dup_copies_options_not_the_answer(void **state)
{
    CURL *a = H(0x4500), *b = H(0x4600), *c = H(0x4700);
    struct curl_slist hdr = {(char *)"Content-Type: application/json", NULL};
    char errbuf[CURL_ERROR_SIZE];
    const char *borrowed = "{\"borrowed\":true}";
    struct shim_handle_view va, vb;
    union shim_optval o;
    long code = 0;
    (void)state;

    o.p = (void *)"http://h/";
    shim_handles_record(a, SHIM_FLAVOR_GNUTLS, CURLOPT_URL, o, 1);
    record_everything(a, &hdr, errbuf);
    rec_l(a, CURLOPT_POSTFIELDSIZE, 5);
    rec_p(a, CURLOPT_COPYPOSTFIELDS, "hello world");
    shim_handles_dup(a, b);
    view(a, &va);
    view(b, &vb);
    assert_int_equal(vb.flavor, SHIM_FLAVOR_GNUTLS);
    assert_string_equal(vb.url, va.url);
    assert_ptr_not_equal(vb.url, va.url);
    assert_string_equal(vb.custom_request, "PATCH");
    assert_int_equal(vb.method, va.method);
    /* the copied body is the duplicate's own copy, like libcurl's */
    assert_int_equal(vb.body_len, 5);
    assert_memory_equal(vb.body, "hello", 5);
    assert_ptr_not_equal(vb.body, va.body);
    assert_ptr_equal(vb.headers, &hdr);
    assert_ptr_equal(vb.write_cb, dummy_write);
    assert_ptr_equal(vb.write_data, errbuf);
    assert_ptr_equal(vb.header_cb, dummy_header);
    assert_ptr_equal(vb.header_data, &hdr);
    assert_int_equal(vb.failonerror, 1);
    assert_int_equal(vb.include_header, 1);
    assert_ptr_equal(vb.errorbuffer, errbuf);
    assert_memory_equal(&vb.creds, &va.creds, sizeof(va.creds));
    assert_string_not_equal(vb.creds.d[SHIM_CRED_PASSWORD], "");
    shim_handle_view_free(&va);
    shim_handle_view_free(&vb);
    /* the answer belongs to a's transfer */
    assert_int_equal(shim_handles_get_answer(a, CURLINFO_RESPONSE_CODE, &code), 1);
    assert_int_equal(shim_handles_get_answer(b, CURLINFO_RESPONSE_CODE, &code), 0);

    /* the two then live apart: changing or freeing a leaves b intact */
    rec_p(a, CURLOPT_URL, "http://other/");
    shim_handles_forget(a);
    view(b, &vb);
    assert_string_equal(vb.url, "http://h/v1/responses");
    assert_memory_equal(vb.body, "hello", 5);
    shim_handle_view_free(&vb);

    /* a borrowed body stays the program's pointer; an unsized copy stays
     * flagged as one */
    rec_p(b, CURLOPT_POSTFIELDS, borrowed);
    shim_handles_dup(b, c);
    view(c, &vb);
    assert_ptr_equal(vb.body, borrowed);
    assert_int_equal(vb.body_len, 5); /* the size in force */
    shim_handle_view_free(&vb);
    shim_handles_reset(b);
    rec_p(b, CURLOPT_COPYPOSTFIELDS, borrowed);
    shim_handles_dup(b, c);
    view(c, &vb);
    assert_true(vb.body_copied_unsized);
    assert_int_equal(vb.body_len, strlen(borrowed));
    assert_string_equal(vb.body, borrowed);
    assert_ptr_not_equal(vb.body, borrowed);
    shim_handle_view_free(&vb);
    shim_handles_forget(b);
    shim_handles_forget(c);
}

/* The CA and proxy settings codeshim's own calls to a sandbox backend
 * honour (http.h): copied (the program may free its strings after
 * setopt), replaced, cleared by NULL, reset, and duplicated. */
static void transport_options_are_copied(void **state)
{
    CURL *a = H(0x4800), *b = H(0x4900);
    char ca[] = "/etc/ssl/ca.pem";
    struct shim_handle_view v;
    (void)state;

    rec_p(a, CURLOPT_CAINFO, ca);
    rec_p(a, CURLOPT_CAPATH, "/etc/ssl/certs");
    rec_p(a, CURLOPT_PROXY, "http://proxy:3128");
    rec_p(a, CURLOPT_NOPROXY, "localhost");
    ca[0] = 'X'; /* the program's buffer changes: the record does not */
    view(a, &v);
    assert_string_equal(v.net[0], "/etc/ssl/ca.pem");
    assert_string_equal(v.net[1], "/etc/ssl/certs");
    assert_string_equal(v.net[2], "http://proxy:3128");
    assert_string_equal(v.net[3], "localhost");
    shim_handle_view_free(&v);
    assert_null(v.net[0]);
    rec_p(a, CURLOPT_PROXY, NULL);
    rec_p(a, CURLOPT_CAINFO, "/other.pem");
    shim_handles_dup(a, b);
    view(b, &v);
    assert_null(v.net[2]);
    assert_string_equal(v.net[0], "/other.pem");
    shim_handle_view_free(&v);
    shim_handles_reset(a);
    rec_p(a, CURLOPT_URL, "http://h/");
    view(a, &v);
    assert_null(v.net[0]);
    assert_null(v.net[3]);
    shim_handle_view_free(&v);
    shim_handles_forget(a);
    shim_handles_forget(b);
}

/* CURLOPT_RESOLVE: the program's list, joined by '\n' into a copy (the
 * program may free its list), replaced by the next list, cleared by
 * NULL and by reset, duplicated; an entry holding '\n' is left out. */
static void resolve_list_is_copied_joined(void **state)
{
    CURL *a = H(0x4a00), *b = H(0x4b00);
    struct curl_slist n3 = {(char *)"bad\nentry", NULL};
    struct curl_slist n2 = {(char *)"*:443:127.0.0.1", &n3};
    struct curl_slist n1 = {(char *)"api.e2b.test:443:10.0.0.1", &n2};
    struct curl_slist m1 = {(char *)"x:80:127.0.0.2", NULL};
    struct shim_handle_view v;
    (void)state;

    rec_p(a, CURLOPT_RESOLVE, &n1);
    n1.data = (char *)"changed"; /* the program's list changes: the record does not */
    view(a, &v);
    assert_string_equal(v.net[4], "api.e2b.test:443:10.0.0.1\n*:443:127.0.0.1");
    shim_handle_view_free(&v);
    assert_null(v.net[4]);
    shim_handles_dup(a, b);
    view(b, &v);
    assert_string_equal(v.net[4], "api.e2b.test:443:10.0.0.1\n*:443:127.0.0.1");
    shim_handle_view_free(&v);
    rec_p(b, CURLOPT_RESOLVE, &m1);
    view(b, &v);
    assert_string_equal(v.net[4], "x:80:127.0.0.2");
    shim_handle_view_free(&v);
    rec_p(b, CURLOPT_RESOLVE, NULL);
    view(b, &v);
    assert_null(v.net[4]);
    shim_handle_view_free(&v);
    shim_handles_reset(a);
    rec_p(a, CURLOPT_URL, "http://h/");
    view(a, &v);
    assert_null(v.net[4]);
    shim_handle_view_free(&v);
    shim_handles_forget(a);
    shim_handles_forget(b);
}

/* ---- synthetic answers for curl_easy_getinfo ---- */

static void answers_every_info_it_claims(void **state)
{
    CURL *h = H(0x5000);
    char ct[32] = "application/json", url[64] = "https://api.example/v1/responses",
         scheme[8] = "HTTPS";
    struct shim_answer_info a = answer_201;
    struct shim_handle_view v;
    long l = 0;
    double d = 0;
    curl_off_t off = 0;
    const char *s = NULL;
    (void)state;

    rec_p(h, CURLOPT_URL, "http://h/v1/responses");
    a.content_type = ct;
    a.effective_url = url;
    a.scheme = scheme;
    assert_int_equal(shim_handles_set_answer(h, &a), 0);
    /* strings were copied in */
    memset(ct, 'x', sizeof(ct) - 1);
    memset(url, 'y', sizeof(url) - 1);
    memset(scheme, 0, sizeof(scheme));

    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &l), 1);
    assert_int_equal(l, 201);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_HTTP_VERSION, &l), 1);
    assert_int_equal(l, CURL_HTTP_VERSION_1_1);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_TYPE, &s), 1);
    assert_string_equal(s, "application/json");
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_EFFECTIVE_URL, &s), 1);
    assert_string_equal(s, "https://api.example/v1/responses");
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_SCHEME, &s), 1);
    assert_string_equal(s, "HTTPS");
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_EFFECTIVE_METHOD, &s), 1);
    assert_string_equal(s, "POST");
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_PROTOCOL, &l), 1);
    assert_int_equal(l, CURLPROTO_HTTPS);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_TOTAL_TIME, &d), 1);
    assert_true(d == 1.5);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_TOTAL_TIME_T, &off), 1);
    assert_int_equal(off, 1500000);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_SIZE_DOWNLOAD, &d), 1);
    assert_true(d == 1234.0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_SIZE_DOWNLOAD_T, &off), 1);
    assert_int_equal(off, 1234);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD, &d), 1);
    assert_true(d == 1234.0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &off), 1);
    assert_int_equal(off, 1234);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_SIZE_UPLOAD, &d), 1);
    assert_true(d == 56.0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_SIZE_UPLOAD_T, &off), 1);
    assert_int_equal(off, 56);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_HEADER_SIZE, &l), 1);
    assert_int_equal(l, 78);
    {   /* a DELETE answered, and an SSE answer with no length (libcurl: -1) */
        struct shim_answer_info b = answer_201;
        snprintf(b.method, sizeof(b.method), "DELETE");
        b.content_length = -1;
        assert_int_equal(shim_handles_set_answer(h, &b), 0);
        assert_int_equal(shim_handles_get_answer(h, CURLINFO_EFFECTIVE_METHOD, &s), 1);
        assert_string_equal(s, "DELETE");
        assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &off), 1);
        assert_int_equal(off, -1);
        assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD, &d), 1);
        assert_true(d == -1.0);
    }
    l = -1;
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_REDIRECT_COUNT, &l), 1);
    assert_int_equal(l, 0);
    /* what codeshim does not answer goes to real libcurl; no out, no answer */
    s = "untouched";
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_PRIMARY_IP, &s), 0);
    assert_string_equal(s, "untouched");
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, NULL), 0);

    /* the answer does not disturb the recorded options */
    view(h, &v);
    assert_clean(&v, "http://h/v1/responses");
    shim_handle_view_free(&v);

    /* a second answer replaces the first; HTTP scheme, no strings */
    a = (struct shim_answer_info){.response_code = 404, .scheme = "HTTP"};
    assert_int_equal(shim_handles_set_answer(h, &a), 0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &l), 1);
    assert_int_equal(l, 404);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_PROTOCOL, &l), 1);
    assert_int_equal(l, CURLPROTO_HTTP);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_CONTENT_TYPE, &s), 1);
    assert_null(s);

    /* every new perform clears it */
    shim_handles_clear_answer(h);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &l), 0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_EFFECTIVE_METHOD, &s), 0);
    shim_handles_clear_answer(h); /* twice is harmless */
    view(h, &v); /* the options stay */
    assert_string_equal(v.url, "http://h/v1/responses");
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

/* shim_handles_begin without what it tells of read-callback bodies */
static enum shim_api begin(CURL *h, size_t max)
{
    void *stale;
    int read;
    enum shim_api k = shim_handles_begin(h, max, &read, &stale);

    assert_int_equal(read, 0);
    assert_null(stale);
    return k;
}

static size_t a_read_cb(char *p, size_t sz, size_t n, void *ud)
{
    (void)p, (void)sz, (void)n, (void)ud;
    return 0;
}

/* A POST (or an UPLOAD named POST) without POSTFIELDS may be ours until
 * its read callback's body is read; a known size over the cap or zero is
 * libcurl's unread. The view says where the body comes from. */
static void begin_read_callback_bodies(void **state)
{
    struct shim_handle_view v;
    CURL *h = H(0x7300);
    void *stale, *gb;
    int read;
    int data;
    (void)state;

    rec_p(h, CURLOPT_URL, "http://h/v1/responses");
    rec_l(h, CURLOPT_POST, 1);
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_RESPONSES);
    assert_int_equal(read, 1); /* chunked: read to know */
    rec_off(h, CURLOPT_POSTFIELDSIZE_LARGE, 100);
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_RESPONSES);
    assert_int_equal(read, 1);
    assert_int_equal(shim_handles_begin(h, 99, &read, &stale), SHIM_API_NONE);
    assert_int_equal(read, 0);
    rec_off(h, CURLOPT_POSTFIELDSIZE_LARGE, 0);
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_NONE);
    assert_int_equal(read, 0);

    rec_l(h, CURLOPT_UPLOAD, 1); /* a PUT: not ours */
    rec_off(h, CURLOPT_INFILESIZE_LARGE, 50);
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_NONE);
    rec_p(h, CURLOPT_CUSTOMREQUEST, "POST"); /* curl -X POST -T */
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_RESPONSES);
    assert_int_equal(read, 1);

    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_READFUNCTION,
                        (union shim_optval){.fn = (void (*)(void))a_read_cb}, 1);
    rec_p(h, CURLOPT_READDATA, &data);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_int_equal(v.body_from_cb, 1);
    assert_null(v.body);
    assert_ptr_equal(v.src.read_cb, a_read_cb);
    assert_ptr_equal(v.src.read_data, &data);
    assert_int_equal(v.src.size, 50);
    shim_handle_view_free(&v);

    /* a give-back left on the handle comes back with the next begin */
    gb = malloc(8);
    assert_null(shim_handles_set_giveback(h, gb));
    assert_int_equal(shim_handles_begin(h, 1 << 20, &read, &stale), SHIM_API_RESPONSES);
    assert_ptr_equal(stale, gb);
    assert_null(shim_handles_set_giveback(h, NULL));
    free(gb);
    assert_null(shim_handles_set_giveback(h, malloc(8))); /* freed with the handle */
    shim_handles_forget(h);
    gb = malloc(8);
    assert_ptr_equal(shim_handles_set_giveback(h, gb), gb); /* unknown handle */
    free(gb);
}

/* shim_handles_begin, the pass-through's one look: the pre-check on the
 * recorded options, and every perform drops the last synthetic answer. */
static void begin_checks_and_clears(void **state)
{
    static const char ours[] = "{\"tools\":[{\"type\":\"code_interpreter\"}]}";
    struct shim_answer_info a = {.response_code = 200};
    CURL *h = H(0x7100);
    long l;
    (void)state;

    assert_int_equal(begin(H(0x7200), 1 << 20), SHIM_API_NONE); /* unknown */
    rec_p(h, CURLOPT_URL, "http://h/v1/responses");
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE); /* no body */
    rec_p(h, CURLOPT_POSTFIELDS, "{\"tools\":[]}");
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE); /* no needle */
    rec_p(h, CURLOPT_POSTFIELDS, ours);
    assert_int_equal(begin(h, 1 << 20), SHIM_API_RESPONSES);
    assert_int_equal(begin(h, 8), SHIM_API_NONE); /* too big */
    rec_off(h, CURLOPT_POSTFIELDSIZE_LARGE, 10); /* the needle past the size */
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE);
    rec_off(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(ours));
    rec_p(h, CURLOPT_CUSTOMREQUEST, "PUT");
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE);
    rec_p(h, CURLOPT_CUSTOMREQUEST, NULL);
    rec_p(h, CURLOPT_URL, "http://h/v1/chat/completions");
    assert_int_equal(begin(h, 1 << 20), SHIM_API_CHAT);
    rec_l(h, CURLOPT_HTTPGET, 1);
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE);

    assert_int_equal(shim_handles_set_answer(h, &a), 0);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &l), 1);
    assert_int_equal(begin(h, 1 << 20), SHIM_API_NONE);
    assert_int_equal(shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &l), 0);
    shim_handles_forget(h);
}

/* ---- scale and threads ---- */

static void many_handles_survive_growth(void **state)
{
    enum { N = 5000 };
    char url[64];
    struct shim_handle_view v;
    size_t base = shim_handles_count(), i;
    (void)state;

    for (i = 0; i < N; i++) {
        snprintf(url, sizeof(url), "http://h/%zu", i);
        /* addresses 16 apart, as malloc hands them out */
        rec_p(H(0x100000 + 16 * i), CURLOPT_URL, url);
    }
    assert_int_equal(shim_handles_count(), base + N);
    for (i = 0; i < N; i++) {
        snprintf(url, sizeof(url), "http://h/%zu", i);
        view(H(0x100000 + 16 * i), &v);
        assert_string_equal(v.url, url);
        shim_handle_view_free(&v);
    }
    for (i = 0; i < N; i += 2)
        shim_handles_forget(H(0x100000 + 16 * i));
    assert_int_equal(shim_handles_count(), base + N / 2);
    for (i = 0; i < N; i++) {
        assert_int_equal(shim_handles_view(H(0x100000 + 16 * i), &v), i % 2 ? 0 : -ENOENT);
        shim_handle_view_free(&v);
    }
    for (i = 1; i < N; i += 2)
        shim_handles_forget(H(0x100000 + 16 * i));
    assert_int_equal(shim_handles_count(), base);
}

enum { THREADS = 8, ROUNDS = 300, LIVE = 40 };

struct worker {
    pthread_t t;
    int id;
    int failures;
};

/* One thread's handle k: distinct from every other thread's. */
static CURL *worker_handle(int id, int k)
{
    return H(0x10000000u + (uintptr_t)id * 0x1000000u + (uintptr_t)k * 32u);
}

/* Records, views and answers on its own handles while the others do the
 * same (the table grows and shrinks meanwhile); counts any view that shows
 * another handle's state. cmocka asserts are not thread-safe. */
static void *worker_run(void *arg)
{
    struct worker *w = arg;
    char url[64], body[64];
    int r, k;

    for (r = 0; r < ROUNDS; r++) {
        for (k = 0; k < LIVE; k++) {
            CURL *h = worker_handle(w->id, k);
            struct shim_answer_info a = {.response_code = 1000 * w->id + k};
            union shim_optval v;
            snprintf(url, sizeof(url), "http://h/%d/%d/%d", w->id, r, k);
            v.p = url;
            shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_URL, v, 1);
            v.p = body;
            shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_POSTFIELDS, v, 1);
            v.l = k;
            shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_POSTFIELDSIZE, v, 1);
            if (shim_handles_set_answer(h, &a) != 0)
                w->failures++;
        }
        for (k = 0; k < LIVE; k++) {
            CURL *h = worker_handle(w->id, k);
            struct shim_handle_view v;
            long code = 0;
            snprintf(url, sizeof(url), "http://h/%d/%d/%d", w->id, r, k);
            if (shim_handles_view(h, &v) != 0 || !v.url || strcmp(v.url, url) ||
                v.body != body || v.body_len != (size_t)k)
                w->failures++;
            shim_handle_view_free(&v);
            if (!shim_handles_get_answer(h, CURLINFO_RESPONSE_CODE, &code) ||
                code != 1000 * w->id + k)
                w->failures++;
            if (k % 2)
                shim_handles_forget(h);
            else
                shim_handles_reset(h);
        }
        for (k = 0; k < LIVE; k += 2)
            shim_handles_forget(worker_handle(w->id, k));
    }
    return NULL;
}

static void concurrent_handles_stay_apart(void **state)
{
    struct worker w[THREADS];
    size_t base = shim_handles_count();
    int i;
    (void)state;

    for (i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].failures = 0;
        assert_int_equal(pthread_create(&w[i].t, NULL, worker_run, &w[i]), 0);
    }
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(w[i].t, NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(shim_handles_count(), base);
}

static int dummy_xferinfo(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)u, (void)a, (void)b, (void)c, (void)d;
    return 0;
}

/* The limits a transfer obeys (xfer.h): TIMEOUT in seconds and TIMEOUT_MS
 * as milliseconds (the last set wins), NOPROGRESS (libcurl's default 1),
 * the progress callback and its data; reset restores the defaults, dup
 * copies them. */
static void limits_are_recorded(void **state)
{
    struct shim_handle_view v;
    union shim_optval fv;
    int ud;

    (void)state;
    rec_p(H(0x7100), CURLOPT_URL, "https://api.openai.com/v1/responses");
    assert_int_equal(shim_handles_view(H(0x7100), &v), 0);
    assert_int_equal(v.lim.timeout_ms, 0);
    assert_int_equal(v.lim.noprogress, 1);
    assert_null(v.lim.xferinfo);
    shim_handle_view_free(&v);

    rec_l(H(0x7100), CURLOPT_TIMEOUT, 3);
    rec_l(H(0x7100), CURLOPT_NOPROGRESS, 0);
    fv.fn = (void (*)(void))dummy_xferinfo;
    shim_handles_record(H(0x7100), SHIM_FLAVOR_OPENSSL, CURLOPT_XFERINFOFUNCTION, fv, 1);
    rec_p(H(0x7100), CURLOPT_XFERINFODATA, &ud);
    assert_int_equal(shim_handles_view(H(0x7100), &v), 0);
    assert_int_equal(v.lim.timeout_ms, 3000);
    assert_int_equal(v.lim.noprogress, 0);
    assert_ptr_equal(v.lim.xferinfo, dummy_xferinfo);
    assert_ptr_equal(v.lim.progress_data, &ud);
    shim_handle_view_free(&v);

    rec_l(H(0x7100), CURLOPT_TIMEOUT_MS, 250);
    shim_handles_dup(H(0x7100), H(0x7200));
    assert_int_equal(shim_handles_view(H(0x7200), &v), 0);
    assert_int_equal(v.lim.timeout_ms, 250);
    assert_ptr_equal(v.lim.xferinfo, dummy_xferinfo);
    shim_handle_view_free(&v);

    rec_l(H(0x7100), CURLOPT_TIMEOUT_MS, -5); /* libcurl refuses it; none here */
    shim_handles_reset(H(0x7200));
    rec_p(H(0x7200), CURLOPT_URL, "https://api.openai.com/v1/responses");
    assert_int_equal(shim_handles_view(H(0x7200), &v), 0);
    assert_int_equal(v.lim.timeout_ms, 0);
    assert_int_equal(v.lim.noprogress, 1);
    assert_null(v.lim.xferinfo);
    shim_handle_view_free(&v);
    assert_int_equal(shim_handles_view(H(0x7100), &v), 0);
    assert_int_equal(v.lim.timeout_ms, 0);
    shim_handle_view_free(&v);
    shim_handles_forget(H(0x7100));
    shim_handles_forget(H(0x7200));
}

/* A run of setopts on one handle finds its entry without the lock; once
 * the handle is cleaned up (its entry freed), the next setopt on the same
 * address (a new handle malloc handed the same memory) starts a fresh
 * entry instead of writing into the freed one, and one made with
 * create=0 (libcurl's own handle) records nothing. */
static void recorded_entry_is_forgotten_with_its_handle(void **state)
{
    static const struct curl_slist hdr = {(char *)"X-A: 1", NULL};
    struct shim_handle_view v;
    union shim_optval o;
    size_t base = shim_handles_count();
    CURL *h = H(0x7000);
    (void)state;

    rec_p(h, CURLOPT_URL, "http://u/v1/responses");
    rec_l(h, CURLOPT_POST, 1);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_count(), base);
    o.l = 1;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, CURLOPT_NOBODY, o, 0);
    assert_int_equal(shim_handles_count(), base);
    rec_p(h, CURLOPT_HTTPHEADER, &hdr);
    assert_int_equal(shim_handles_count(), base + 1);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_null(v.url);
    assert_int_equal(v.method, SHIM_METHOD_GET);
    assert_ptr_equal(v.headers, &hdr);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

/* The setopt wrappers ask shim_handles_wants before anything else: the
 * options apply() reads and the credentials are recorded, every other
 * option (most of what a program sets) is not, whatever its type. */
/* The connection callbacks and their data, each into its own field, and
 * a CURLOPT_CURLU handle's URL, read from it when a perform begins. */
static int fake_sockopt(void *d, curl_socket_t fd, curlsocktype t)
{
    (void)d;
    (void)fd;
    (void)t;
    return CURL_SOCKOPT_OK;
}

static void connection_callbacks_and_curlu_are_recorded(void **state)
{
    CURL *h = H(0x9100);
    struct shim_handle_view v;
    union shim_optval f;
    void *stale;
    int rb, i;
    static const CURLoption fns[] = {CURLOPT_OPENSOCKETFUNCTION, CURLOPT_SOCKOPTFUNCTION,
                                     CURLOPT_CLOSESOCKETFUNCTION, CURLOPT_PREREQFUNCTION,
                                     CURLOPT_RESOLVER_START_FUNCTION, CURLOPT_SSL_CTX_FUNCTION};
    static const CURLoption data[] = {CURLOPT_OPENSOCKETDATA, CURLOPT_SOCKOPTDATA,
                                      CURLOPT_CLOSESOCKETDATA, CURLOPT_PREREQDATA,
                                      CURLOPT_RESOLVER_START_DATA, CURLOPT_SSL_CTX_DATA};
    CURLU *u = curl_url();
    (void)state;

    f.fn = (void (*)(void))fake_sockopt;
    for (i = 0; i < 6; i++) {
        shim_handles_record(h, SHIM_FLAVOR_OPENSSL, fns[i], f, 1);
        rec_p(h, data[i], (void *)(uintptr_t)(0x100 + i));
    }
    view(h, &v);
    assert_ptr_equal(v.cbs.open, f.fn);
    assert_ptr_equal(v.cbs.sockopt, f.fn);
    assert_ptr_equal(v.cbs.close, f.fn);
    assert_ptr_equal(v.cbs.prereq, f.fn);
    assert_ptr_equal(v.cbs.resolver, f.fn);
    assert_ptr_equal(v.cbs.ssl_ctx, f.fn);
    assert_ptr_equal(v.cbs.open_data, (void *)0x100);
    assert_ptr_equal(v.cbs.sockopt_data, (void *)0x101);
    assert_ptr_equal(v.cbs.close_data, (void *)0x102);
    assert_ptr_equal(v.cbs.prereq_data, (void *)0x103);
    assert_ptr_equal(v.cbs.resolver_data, (void *)0x104);
    assert_ptr_equal(v.cbs.ssl_ctx_data, (void *)0x105);
    shim_handle_view_free(&v);

    /* a URL classified by one perform, then a CURLU one: classified anew */
    rec_p(h, CURLOPT_URL, "http://up.test/other");
    rec_p(h, CURLOPT_POSTFIELDS, "{\"tools\":[{\"type\":\"code_interpreter\"}]}");
    assert_int_equal(shim_handles_begin(h, 1 << 20, &rb, &stale), SHIM_API_NONE);
    assert_non_null(u);
    assert_int_equal(curl_url_set(u, CURLUPART_URL, "http://up.test/v1/responses", 0), CURLUE_OK);
    rec_p(h, CURLOPT_CURLU, u);
    assert_int_equal(shim_handles_begin(h, 1 << 20, &rb, &stale), SHIM_API_RESPONSES);
    view(h, &v);
    assert_non_null(v.url);
    assert_string_equal(v.url, "http://up.test/v1/responses");
    shim_handle_view_free(&v);
    shim_handles_forget(h);
    curl_url_cleanup(u);
}

static void wants_only_recorded_options(void **state)
{
    static const CURLoption recorded[] = {
        CURLOPT_URL, CURLOPT_POSTFIELDS, CURLOPT_POSTFIELDSIZE_LARGE, CURLOPT_HTTPHEADER,
        CURLOPT_WRITEFUNCTION, CURLOPT_READDATA, CURLOPT_CURLU, CURLOPT_TIMEOUT_MS,
        CURLOPT_XFERINFOFUNCTION, CURLOPT_RESOLVE, CURLOPT_INFILESIZE_LARGE};
    static const CURLoption creds[] = {CURLOPT_USERPWD, CURLOPT_COOKIE, CURLOPT_SSLKEY_BLOB,
                                       CURLOPT_XOAUTH2_BEARER, CURLOPT_TLSAUTH_PASSWORD};
    static const CURLoption others[] = {
        CURLOPT_VERBOSE, CURLOPT_USERAGENT, CURLOPT_SSL_VERIFYPEER, CURLOPT_MAXREDIRS,
        CURLOPT_DEBUGFUNCTION, CURLOPT_MAX_RECV_SPEED_LARGE, CURLOPT_CAINFO_BLOB,
        CURLOPT_TCP_KEEPALIVE, CURLOPT_ACCEPT_ENCODING, (CURLoption)-1, (CURLoption)99999,
        (CURLoption)(CURLOPTTYPE_OBJECTPOINT + 999)};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++)
        assert_int_equal(shim_handles_wants(recorded[i]), SHIM_OPT_RECORD);
    for (i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
        assert_int_equal(shim_handles_wants(creds[i]), SHIM_OPT_CRED);
        assert_true(shim_identity_is_option(creds[i]));
    }
    for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        assert_int_equal(shim_handles_wants(others[i]), 0);
    /* every option the table has is one the recorder acts on */
    for (i = 0; i < 5 * 1000; i++) {
        CURLoption o = (CURLoption)((i / 1000) * 10000 + i % 1000);
        assert_int_equal(shim_handles_wants(o) == SHIM_OPT_CRED, shim_identity_is_option(o));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_handles_have_nothing),
        cmocka_unit_test(limits_are_recorded),
        cmocka_unit_test(view_shows_recorded_options),
        cmocka_unit_test(views_own_their_strings),
        cmocka_unit_test(postfields_are_borrowed_and_sized_in_any_order),
        cmocka_unit_test(copypostfields_are_copied_as_libcurl_does),
        cmocka_unit_test(method_follows_libcurl),
        cmocka_unit_test(credentials_kept_as_digests),
        cmocka_unit_test(reused_address_starts_clean),
        cmocka_unit_test(dup_onto_stale_address_replaces_it),
        cmocka_unit_test(reset_restores_defaults_keeps_flavor),
        cmocka_unit_test(dup_copies_options_not_the_answer),
        cmocka_unit_test(transport_options_are_copied),
        cmocka_unit_test(resolve_list_is_copied_joined),
        cmocka_unit_test(answers_every_info_it_claims),
        cmocka_unit_test(begin_checks_and_clears),
        cmocka_unit_test(begin_read_callback_bodies),
        cmocka_unit_test(many_handles_survive_growth),
        cmocka_unit_test(concurrent_handles_stay_apart),
        cmocka_unit_test(connection_callbacks_and_curlu_are_recorded),
        cmocka_unit_test(wants_only_recorded_options),
        cmocka_unit_test(recorded_entry_is_forgotten_with_its_handle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
