/* Unit tests: the recorded setopt of handles.c (shim_handles_setopt and
 * the tables behind shim_handles_wants): every option the interception
 * reads is recorded into its own field, libcurl's refusal records
 * nothing, a run of options on one handle stays on its entry while other
 * handles come and go, an entry kept for the next handle starts clean,
 * and a zero that changes nothing is forwarded without being stored. Handles are fake pointer values (the table never dereferences
 * them); the "libcurl" is a fake setopt that answers what the test says.
 * Every test forgets what it recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curl/handles.h"
#include "handles_rec.h"

/* The fake libcurl: counts its calls and answers fake_rc. */
static CURLcode fake_rc;
static int fake_calls;
static CURLcode fake_setopt(CURL *h, CURLoption o, ...)
{
    (void)h;
    (void)o;
    fake_calls++;
    return fake_rc;
}

static struct shim_curl_api fake_api(void)
{
    struct shim_curl_api a;

    memset(&a, 0, sizeof(a));
    a.flavor = SHIM_FLAVOR_OPENSSL;
    a.easy_setopt = fake_setopt;
    a.text_lo = 0;
    a.text_len = 0; /* no caller is libcurl's own: every handle may get an entry */
    return a;
}

/* One setopt through the wrapper's recorded path, as preload.c calls it. */
static CURLcode set(const struct shim_curl_api *a, CURL *h, CURLoption o, union shim_optval v)
{
    assert_int_not_equal(shim_handles_wants(o), 0);
    return shim_handles_setopt(h, o, v, a, SHIM_OPT_SLOT(o), NULL);
}

static CURLcode set_p(const struct shim_curl_api *a, CURL *h, CURLoption o, const void *p)
{
    union shim_optval v;

    v.p = (void *)p;
    return set(a, h, o, v);
}

static CURLcode set_l(const struct shim_curl_api *a, CURL *h, CURLoption o, long l)
{
    union shim_optval v;

    v.l = l;
    return set(a, h, o, v);
}

#define P(x) ((void *)(uintptr_t)(x))
#define F(x) ((void (*)(void))(uintptr_t)(x))

static int dummy_sockopt(void *d, curl_socket_t fd, curlsocktype t)
{
    (void)d;
    (void)fd;
    (void)t;
    return CURL_SOCKOPT_OK;
}

/* Every option codeshim records, with a value of its type and where a
 * view shows it: a recorded option dropped from handles.c's list (or
 * stored into the wrong field) fails here. */
enum { PTR, FN, LONGV, OFF };
struct probe {
    CURLoption opt;
    int type;
    uintptr_t value;
};
static const struct probe probes[] = {
    {CURLOPT_HTTPHEADER, PTR, 0x1001},
    {CURLOPT_POSTFIELDS, PTR, 0}, /* a body of its own below */
    {CURLOPT_POSTFIELDSIZE_LARGE, OFF, 5},
    {CURLOPT_READFUNCTION, FN, 0x1101},
    {CURLOPT_READDATA, PTR, 0x1102},
    {CURLOPT_SEEKFUNCTION, FN, 0x1103},
    {CURLOPT_SEEKDATA, PTR, 0x1104},
    {CURLOPT_IOCTLFUNCTION, FN, 0x1105},
    {CURLOPT_IOCTLDATA, PTR, 0x1106},
    {CURLOPT_WRITEFUNCTION, FN, 0x1201},
    {CURLOPT_WRITEDATA, PTR, 0x1202},
    {CURLOPT_HEADERFUNCTION, FN, 0x1203},
    {CURLOPT_HEADERDATA, PTR, 0x1204},
    {CURLOPT_FAILONERROR, LONGV, 1},
    {CURLOPT_HEADER, LONGV, 1},
    {CURLOPT_ERRORBUFFER, PTR, 0x1205},
    {CURLOPT_TIMEOUT_MS, LONGV, 1500},
    {CURLOPT_NOPROGRESS, LONGV, 0},
    {CURLOPT_XFERINFOFUNCTION, FN, 0x1301},
    {CURLOPT_PROGRESSFUNCTION, FN, 0x1302},
    {CURLOPT_XFERINFODATA, PTR, 0x1303},
    {CURLOPT_OPENSOCKETFUNCTION, FN, 0x1401},
    {CURLOPT_OPENSOCKETDATA, PTR, 0x1402},
    {CURLOPT_SOCKOPTFUNCTION, FN, 0x1403},
    {CURLOPT_SOCKOPTDATA, PTR, 0x1404},
    {CURLOPT_CLOSESOCKETFUNCTION, FN, 0x1405},
    {CURLOPT_CLOSESOCKETDATA, PTR, 0x1406},
    {CURLOPT_PREREQFUNCTION, FN, 0x1407},
    {CURLOPT_PREREQDATA, PTR, 0x1408},
    {CURLOPT_RESOLVER_START_FUNCTION, FN, 0x1409},
    {CURLOPT_RESOLVER_START_DATA, PTR, 0x140a},
    {CURLOPT_SSL_CTX_FUNCTION, FN, 0x140b},
    {CURLOPT_SSL_CTX_DATA, PTR, 0x140c},
};

/* The options recorded by other means than a plain value (strings, the
 * method, sizes and the CURLU handle): the tests below set each. */
static const CURLoption others[] = {
    CURLOPT_URL, CURLOPT_CUSTOMREQUEST, CURLOPT_COPYPOSTFIELDS, CURLOPT_POSTFIELDSIZE,
    CURLOPT_POST, CURLOPT_HTTPGET, CURLOPT_NOBODY, CURLOPT_UPLOAD, CURLOPT_HTTPPOST,
    CURLOPT_MIMEPOST, CURLOPT_INFILESIZE, CURLOPT_INFILESIZE_LARGE, CURLOPT_CURLU,
    CURLOPT_TIMEOUT, CURLOPT_CAINFO, CURLOPT_CAPATH, CURLOPT_PROXY, CURLOPT_NOPROXY,
    CURLOPT_RESOLVE,
};

static union shim_optval probe_value(const struct probe *p)
{
    union shim_optval v;

    memset(&v, 0, sizeof(v));
    switch (p->type) {
    case FN: v.fn = F(p->value); break;
    case LONGV: v.l = (long)p->value; break;
    case OFF: v.off = (curl_off_t)p->value; break;
    default: v.p = P(p->value); break;
    }
    return v;
}

static void every_recorded_option_reaches_its_field(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    CURL *h = H(0x51000);
    size_t i, n = 0, ncred = 0;

    (void)state;
    fake_rc = CURLE_OK;
    assert_int_equal(set_p(&a, h, CURLOPT_URL, "http://up.test/v1/responses"), CURLE_OK);
    for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        union shim_optval val = probe_value(&probes[i]);
        if (probes[i].opt == CURLOPT_POSTFIELDS)
            val.p = (void *)(uintptr_t)"hello";
        assert_int_equal(shim_handles_wants(probes[i].opt), SHIM_OPT_RECORD);
        assert_int_equal(set(&a, h, probes[i].opt, val), CURLE_OK);
    }
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_string_equal(v.url, "http://up.test/v1/responses");
    assert_ptr_equal(v.headers, P(0x1001));
    assert_string_equal(v.body, "hello");
    assert_int_equal(v.body_len, 5);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    assert_ptr_equal(v.src.read_cb, F(0x1101));
    assert_ptr_equal(v.src.read_data, P(0x1102));
    assert_ptr_equal(v.src.seek_cb, F(0x1103));
    assert_ptr_equal(v.src.seek_data, P(0x1104));
    assert_ptr_equal(v.src.ioctl_cb, F(0x1105));
    assert_ptr_equal(v.src.ioctl_data, P(0x1106));
    assert_ptr_equal(v.write_cb, F(0x1201));
    assert_ptr_equal(v.write_data, P(0x1202));
    assert_ptr_equal(v.header_cb, F(0x1203));
    assert_ptr_equal(v.header_data, P(0x1204));
    assert_int_equal(v.failonerror, 1);
    assert_int_equal(v.include_header, 1);
    assert_ptr_equal(v.errorbuffer, P(0x1205));
    assert_int_equal(v.lim.timeout_ms, 1500);
    assert_int_equal(v.lim.noprogress, 0);
    assert_ptr_equal(v.lim.xferinfo, F(0x1301));
    assert_ptr_equal(v.lim.progress, F(0x1302));
    assert_ptr_equal(v.lim.progress_data, P(0x1303));
    assert_ptr_equal(v.cbs.open, F(0x1401));
    assert_ptr_equal(v.cbs.open_data, P(0x1402));
    assert_ptr_equal(v.cbs.sockopt, F(0x1403));
    assert_ptr_equal(v.cbs.sockopt_data, P(0x1404));
    assert_ptr_equal(v.cbs.close, F(0x1405));
    assert_ptr_equal(v.cbs.close_data, P(0x1406));
    assert_ptr_equal(v.cbs.prereq, F(0x1407));
    assert_ptr_equal(v.cbs.prereq_data, P(0x1408));
    assert_ptr_equal(v.cbs.resolver, F(0x1409));
    assert_ptr_equal(v.cbs.resolver_data, P(0x140a));
    assert_ptr_equal(v.cbs.ssl_ctx, F(0x140b));
    assert_ptr_equal(v.cbs.ssl_ctx_data, P(0x140c));
    shim_handle_view_free(&v);
    shim_handles_forget(h);

    /* the tables hold exactly these, the others and the credentials */
    for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        assert_int_equal(shim_handles_wants(others[i]), SHIM_OPT_RECORD);
    for (i = 0; i < SHIM_OPT_SLOTS; i++) {
        if (!shim_handles_optkey[i])
            continue;
        assert_int_equal(SHIM_OPT_SLOT(shim_handles_optkey[i]), i);
        if ((shim_handles_optinfo[i] & 3) == SHIM_OPT_CRED) {
            assert_true(shim_identity_is_option((CURLoption)shim_handles_optkey[i]));
            ncred++;
        } else {
            assert_int_equal(shim_handles_optinfo[i] & 3, SHIM_OPT_RECORD);
            n++;
        }
    }
    assert_int_equal(n, sizeof(probes) / sizeof(probes[0]) + sizeof(others) / sizeof(others[0]));
    assert_true(ncred >= 14);
}

/* The strings, method, sizes and net options, through the same path. */
static void strings_and_methods_through_setopt(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    struct curl_slist r1 = {(char *)"up.test:80:127.0.0.1", NULL};
    CURL *h = H(0x52000);

    (void)state;
    fake_rc = CURLE_OK;
    set_p(&a, h, CURLOPT_URL, "http://up.test/v1/chat/completions");
    set_p(&a, h, CURLOPT_CUSTOMREQUEST, "PUT");
    set_p(&a, h, CURLOPT_CAINFO, "/etc/ca.pem");
    set_p(&a, h, CURLOPT_CAPATH, "/etc/ca.d");
    set_p(&a, h, CURLOPT_PROXY, "http://proxy.test:3128");
    set_p(&a, h, CURLOPT_NOPROXY, "localhost");
    set_p(&a, h, CURLOPT_RESOLVE, &r1);
    set_l(&a, h, CURLOPT_TIMEOUT, 3);
    set_l(&a, h, CURLOPT_UPLOAD, 1);
    set_l(&a, h, CURLOPT_INFILESIZE, 7);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_string_equal(v.url, "http://up.test/v1/chat/completions");
    assert_string_equal(v.custom_request, "PUT");
    assert_string_equal(v.net[0], "/etc/ca.pem");
    assert_string_equal(v.net[1], "/etc/ca.d");
    assert_string_equal(v.net[2], "http://proxy.test:3128");
    assert_string_equal(v.net[3], "localhost");
    assert_string_equal(v.net[4], "up.test:80:127.0.0.1");
    assert_int_equal(v.lim.timeout_ms, 3000);
    assert_int_equal(v.method, SHIM_METHOD_PUT);
    assert_int_equal(v.body_from_cb, 1);
    assert_int_equal(v.src.size, 7);
    shim_handle_view_free(&v);

    /* a NULL unsets; HTTPGET, NOBODY and POST move the method */
    set_p(&a, h, CURLOPT_PROXY, NULL);
    set_p(&a, h, CURLOPT_CUSTOMREQUEST, NULL);
    set_l(&a, h, CURLOPT_NOBODY, 1);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_null(v.net[2]);
    assert_null(v.custom_request);
    assert_int_equal(v.method, SHIM_METHOD_HEAD);
    shim_handle_view_free(&v);
    set_l(&a, h, CURLOPT_HTTPGET, 1);
    set_l(&a, h, CURLOPT_POST, 1);
    set_p(&a, h, CURLOPT_COPYPOSTFIELDS, "{\"a\":1}");
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_int_equal(v.method, SHIM_METHOD_POST);
    assert_string_equal(v.body, "{\"a\":1}");
    assert_int_equal(v.body_copied_unsized, 1);
    shim_handle_view_free(&v);
    shim_handles_forget(h);
}

/* What libcurl refused is not recorded; libcurl's answer comes back. */
static void refused_options_are_not_recorded(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    CURL *h = H(0x53000);

    (void)state;
    fake_rc = CURLE_OK;
    fake_calls = 0;
    assert_int_equal(set_p(&a, h, CURLOPT_URL, "http://up.test/a"), CURLE_OK);
    fake_rc = CURLE_BAD_FUNCTION_ARGUMENT;
    assert_int_equal(set_p(&a, h, CURLOPT_URL, "http://up.test/b"), CURLE_BAD_FUNCTION_ARGUMENT);
    assert_int_equal(set_l(&a, h, CURLOPT_TIMEOUT_MS, -1), CURLE_BAD_FUNCTION_ARGUMENT);
    assert_int_equal(fake_calls, 3);
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_string_equal(v.url, "http://up.test/a");
    assert_int_equal(v.lim.timeout_ms, 0);
    shim_handle_view_free(&v);
    shim_handles_forget(h);

    /* a first option refused makes no entry */
    assert_int_equal(set_p(&a, H(0x53100), CURLOPT_URL, "http://up.test/c"),
                     CURLE_BAD_FUNCTION_ARGUMENT);
    assert_int_equal(shim_handles_view(H(0x53100), &v), -ENOENT);
    fake_rc = CURLE_OK;
}

/* A run of options on one handle, with other handles made and cleaned up
 * between them (each free moves the table on): every value lands on its
 * own handle's entry. */
static void interleaved_handles_keep_their_values(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    CURL *h1 = H(0x54000), *h2 = H(0x54100);
    int i;

    (void)state;
    fake_rc = CURLE_OK;
    set_p(&a, h1, CURLOPT_URL, "http://up.test/one");
    for (i = 0; i < 20; i++) {
        set_p(&a, h2, CURLOPT_URL, "http://up.test/two");
        set_p(&a, h1, CURLOPT_WRITEDATA, P(0x100 + i));
        set_p(&a, h2, CURLOPT_WRITEDATA, P(0x200 + i));
        shim_handles_forget(h2);
        set_l(&a, h1, CURLOPT_FAILONERROR, i & 1);
    }
    assert_int_equal(shim_handles_view(h1, &v), 0);
    assert_string_equal(v.url, "http://up.test/one");
    assert_ptr_equal(v.write_data, P(0x100 + 19));
    assert_int_equal(v.failonerror, 1);
    shim_handle_view_free(&v);
    assert_int_equal(shim_handles_view(h2, &v), -ENOENT);
    shim_handles_forget(h1);
    assert_int_equal(shim_handles_count(), 0);
}

/* An entry kept for the next handle (handles.c keeps a few) shows
 * nothing of the handle it served: defaults only, no credential. */
static void a_kept_entry_starts_clean(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    union shim_optval fn;
    int i, k;

    (void)state;
    fake_rc = CURLE_OK;
    fn.fn = (void (*)(void))dummy_sockopt;
    for (k = 0; k < 8; k++) {
        CURL *h = H(0x55000 + 0x100 * k);
        set_p(&a, h, CURLOPT_URL, "http://up.test/v1/responses");
        set_p(&a, h, CURLOPT_USERPWD, "user:secret");
        set_p(&a, h, CURLOPT_PROXY, "http://proxy.test");
        set_p(&a, h, CURLOPT_POSTFIELDS, "body");
        set_l(&a, h, CURLOPT_NOPROGRESS, 0);
        set(&a, h, CURLOPT_SOCKOPTFUNCTION, fn);
        shim_handles_forget(h);
    }
    for (k = 0; k < 8; k++) {
        CURL *h = H(0x56000 + 0x100 * k);
        set_p(&a, h, CURLOPT_URL, "http://other.test/");
        assert_int_equal(shim_handles_view(h, &v), 0);
        assert_string_equal(v.url, "http://other.test/");
        assert_null(v.body);
        assert_null(v.net[2]);
        assert_null(v.cbs.sockopt);
        assert_int_equal(v.lim.noprogress, 1);
        assert_int_equal(v.method, SHIM_METHOD_GET);
        assert_ptr_equal(v.write_data, stdout);
        for (i = 0; i < SHIM_CRED_NSLOTS; i++)
            assert_string_equal(v.creds.d[i], "");
        shim_handle_view_free(&v);
        shim_handles_forget(h);
    }
    assert_int_equal(shim_handles_count(), 0);
}

/* Strings beyond the entry's own room, and many of them: each value is
 * the last one set, however it was stored. */
static void strings_beyond_the_entrys_room(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    char url[2048], last[2048];
    CURL *h = H(0x57000), *d = H(0x57100);
    int i;

    (void)state;
    fake_rc = CURLE_OK;
    for (i = 0; i < 100; i++) {
        snprintf(url, sizeof(url), "http://up.test/v1/responses?n=%d&pad=%0*d", i,
                 i % 3 ? 10 : 900, 0);
        set_p(&a, h, CURLOPT_URL, url);
        set_p(&a, h, i % 2 ? CURLOPT_CAINFO : CURLOPT_NOPROXY, url);
    }
    memcpy(last, url, sizeof(url));
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_string_equal(v.url, last);
    assert_string_equal(v.net[0], last);
    shim_handle_view_free(&v);
    /* a duplicate owns its own copies */
    shim_handles_dup(h, d);
    shim_handles_forget(h);
    assert_int_equal(shim_handles_view(d, &v), 0);
    assert_string_equal(v.url, last);
    shim_handle_view_free(&v);
    /* a reset gives the room back */
    shim_handles_reset(d);
    set_p(&a, d, CURLOPT_URL, "http://up.test/after-reset");
    assert_int_equal(shim_handles_view(d, &v), 0);
    assert_string_equal(v.url, "http://up.test/after-reset");
    assert_null(v.net[0]);
    shim_handle_view_free(&v);
    shim_handles_forget(d);
}

/* shim_handles_forget skips the lock only for a handle that has no
 * entry: handles sharing a class of addresses are each forgotten. */
static void forget_finds_every_entry(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    int k;

    (void)state;
    fake_rc = CURLE_OK;
    for (k = 0; k < 300; k++)
        set_p(&a, H(0x60000 + 0x40 * k), CURLOPT_URL, "http://up.test/");
    assert_int_equal(shim_handles_count(), 300);
    for (k = 0; k < 300; k += 2)
        shim_handles_forget(H(0x60000 + 0x40 * k));
    for (k = 0; k < 300; k++)
        shim_handles_forget(H(0x90000 + 0x40 * k)); /* never recorded */
    assert_int_equal(shim_handles_count(), 150);
    for (k = 1; k < 300; k += 2) {
        assert_int_equal(shim_handles_view(H(0x60000 + 0x40 * k), &v), 0);
        shim_handle_view_free(&v);
        shim_handles_forget(H(0x60000 + 0x40 * k));
    }
    assert_int_equal(shim_handles_count(), 0);
}

/* The options a zero of which the wrapper may forward unstored, each
 * with a value to set before its zero, and its field in a view (as
 * 8 bytes: a pointer or a long; a credential's is a digest slot). */
struct zprobe {
    CURLoption opt;
    int type;
    uintptr_t value;
    size_t field; /* offsetof(struct shim_handle_view, ...) */
};
#define VF(f) offsetof(struct shim_handle_view, f)
static const struct zprobe zprobes[] = {
    {CURLOPT_CUSTOMREQUEST, PTR, (uintptr_t)"PATCH", VF(custom_request)},
    {CURLOPT_HTTPHEADER, PTR, 0x2001, VF(headers)},
    {CURLOPT_FAILONERROR, LONGV, 1, VF(failonerror)},
    {CURLOPT_HEADER, LONGV, 1, VF(include_header)},
    {CURLOPT_ERRORBUFFER, PTR, 0x2002, VF(errorbuffer)},
    {CURLOPT_TIMEOUT, LONGV, 3, VF(lim.timeout_ms)},
    {CURLOPT_TIMEOUT_MS, LONGV, 700, VF(lim.timeout_ms)},
    {CURLOPT_CAINFO, PTR, (uintptr_t)"/ca/file", VF(net[0])},
    {CURLOPT_CAPATH, PTR, (uintptr_t)"/ca/dir", VF(net[1])},
    {CURLOPT_PROXY, PTR, (uintptr_t)"http://proxy.test", VF(net[2])},
    {CURLOPT_NOPROXY, PTR, (uintptr_t)"localhost", VF(net[3])},
};

static uint64_t field_of(const struct shim_handle_view *v, size_t off)
{
    uint64_t x;

    memcpy(&x, (const char *)v + off, sizeof(x));
    return x;
}

/* A zero (0, NULL) set while its field is still zero is forwarded
 * without being stored; one set after a value clears it, each option on
 * its own (every other field zero). Either way libcurl gets the call. */
static void zeros_reach_libcurl_and_clear(void **state)
{
    struct shim_curl_api a = fake_api();
    struct shim_handle_view v;
    CURL *h = H(0x58000);
    union shim_optval zero;
    size_t i;
    int calls, k;

    (void)state;
    fake_rc = CURLE_OK;
    memset(&zero, 0, sizeof(zero));
    for (i = 0; i < sizeof(zprobes) / sizeof(zprobes[0]); i++) {
        set_p(&a, h, CURLOPT_URL, "http://up.test/v1/responses");
        for (k = 0; k < 2; k++) { /* k 0: a zero onto zero; k 1: a value, then zero */
            if (k) {
                struct probe p = {zprobes[i].opt, zprobes[i].type, zprobes[i].value};
                set(&a, h, zprobes[i].opt, probe_value(&p));
                assert_int_equal(shim_handles_view(h, &v), 0);
                assert_true(field_of(&v, zprobes[i].field) != 0);
                shim_handle_view_free(&v);
            }
            calls = fake_calls;
            assert_int_equal(set(&a, h, zprobes[i].opt, zero), CURLE_OK);
            assert_int_equal(fake_calls - calls, 1);
            assert_int_equal(shim_handles_view(h, &v), 0);
            assert_true(field_of(&v, zprobes[i].field) == 0);
            assert_string_equal(v.url, "http://up.test/v1/responses");
            shim_handle_view_free(&v);
        }
        shim_handles_forget(h);
    }
    /* a credential: a NULL clears the one set, another NULL changes nothing */
    set_p(&a, h, CURLOPT_USERPWD, NULL);
    set_p(&a, h, CURLOPT_USERPWD, "user:secret");
    assert_int_equal(shim_handles_view(h, &v), 0);
    assert_string_not_equal(v.creds.d[SHIM_CRED_USER], "");
    shim_handle_view_free(&v);
    set_p(&a, h, CURLOPT_USERPWD, NULL);
    set_p(&a, h, CURLOPT_SSLKEY, NULL);
    assert_int_equal(shim_handles_view(h, &v), 0);
    for (k = 0; k < SHIM_CRED_NSLOTS; k++)
        assert_string_equal(v.creds.d[k], "");
    shim_handle_view_free(&v);
    /* a zero refused by libcurl: its answer */
    fake_rc = CURLE_UNKNOWN_OPTION;
    assert_int_equal(set_p(&a, h, CURLOPT_PROXY, NULL), CURLE_UNKNOWN_OPTION);
    fake_rc = CURLE_OK;
    shim_handles_forget(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_recorded_option_reaches_its_field),
        cmocka_unit_test(strings_and_methods_through_setopt),
        cmocka_unit_test(refused_options_are_not_recorded),
        cmocka_unit_test(interleaved_handles_keep_their_values),
        cmocka_unit_test(a_kept_entry_starts_clean),
        cmocka_unit_test(strings_beyond_the_entrys_room),
        cmocka_unit_test(forget_finds_every_entry),
        cmocka_unit_test(zeros_reach_libcurl_and_clear),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
