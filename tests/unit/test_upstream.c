/* Unit tests: the private handle of upstream calls (upstream.c), against a
 * fake libcurl table. A handle libcurl 7.88 cannot duplicate (an unsized
 * COPYPOSTFIELDS) is duplicated all the same and left as the program set
 * it; when duplication fails no call is made on a fresh handle, and the
 * transfer fails with a clear error (loop.c). The network's answers go
 * through http.c's transfer core, fed here by the fake's perform: the
 * final head kept, a whole body capped (too large: its own error), an SSE
 * body parsed as it comes, cut at the cap or stopped by the loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl/loop.h"
#include "curl/upstream.h"

#include <cjson/cJSON.h>

static char prog_h, dup_h; /* their addresses are the handles */

static struct {
    int dup_fails, copy_fails;
    int inits, dups, performs;
    int postfields_at_dup; /* the body was a plain POSTFIELDS when duplicated */
    CURLoption opt[16];    /* options set on the program's handle */
    const void *arg[16];
    int nopt;
    /* the duplicate's callbacks, and what its perform feeds them */
    curl_write_callback wf, hf;
    void *wd, *hd;
    const char *feed_head[8]; /* header lines, NULL-terminated */
    const char *feed_body;    /* sent in chunks of 1000 bytes, repeat times */
    int repeat;
    long status;
    const char *ctype;
} F;

static CURL *f_init(void)
{
    F.inits++;
    return (CURL *)&dup_h;
}

static CURLcode f_setopt(CURL *h, CURLoption o, ...)
{
    va_list ap;
    const void *p = NULL;

    if (h == (CURL *)&dup_h) {
        va_start(ap, o);
        if (o == CURLOPT_WRITEFUNCTION || o == CURLOPT_HEADERFUNCTION)
            *(o == CURLOPT_WRITEFUNCTION ? &F.wf : &F.hf) = va_arg(ap, curl_write_callback);
        else if (o == CURLOPT_WRITEDATA || o == CURLOPT_HEADERDATA)
            *(o == CURLOPT_WRITEDATA ? &F.wd : &F.hd) = va_arg(ap, void *);
        va_end(ap);
        return CURLE_OK;
    }
    if (h != (CURL *)&prog_h)
        return CURLE_OK;
    va_start(ap, o);
    if (o >= CURLOPTTYPE_OBJECTPOINT && o < CURLOPTTYPE_FUNCTIONPOINT)
        p = va_arg(ap, void *);
    va_end(ap);
    if (F.nopt < 16) {
        F.opt[F.nopt] = o;
        F.arg[F.nopt++] = p;
    }
    return o == CURLOPT_COPYPOSTFIELDS && F.copy_fails ? CURLE_OUT_OF_MEMORY : CURLE_OK;
}

static CURLcode f_perform(CURL *h)
{
    size_t i, n, off;
    int k;

    F.performs++;
    if (h != (CURL *)&dup_h)
        return CURLE_OK;
    for (i = 0; F.feed_head[i]; i++) {
        n = strlen(F.feed_head[i]);
        if (F.hf((char *)F.feed_head[i], 1, n, F.hd) != n)
            return CURLE_WRITE_ERROR;
    }
    for (k = 0; F.feed_body && k < F.repeat; k++)
        for (off = 0; off < strlen(F.feed_body); off += n) {
            n = strlen(F.feed_body) - off;
            n = n > 1000 ? 1000 : n;
            if (F.wf((char *)F.feed_body + off, 1, n, F.wd) != n)
                return CURLE_WRITE_ERROR;
        }
    return CURLE_OK;
}

static CURLcode f_getinfo(CURL *h, CURLINFO i, ...)
{
    va_list ap;

    (void)h;
    va_start(ap, i);
    if (i == CURLINFO_RESPONSE_CODE)
        *va_arg(ap, long *) = F.status;
    else if (i == CURLINFO_HTTP_VERSION)
        *va_arg(ap, long *) = CURL_HTTP_VERSION_1_1;
    else if (i == CURLINFO_CONTENT_TYPE)
        *va_arg(ap, const char **) = F.ctype;
    va_end(ap);
    return CURLE_OK;
}

static CURL *f_dup(CURL *h)
{
    (void)h;
    F.dups++;
    F.postfields_at_dup = F.nopt && F.opt[F.nopt - 1] == CURLOPT_POSTFIELDS;
    return F.dup_fails ? NULL : (CURL *)&dup_h;
}

static void f_cleanup(CURL *h) { (void)h; }
static void f_reset(CURL *h) { (void)h; }

static struct curl_slist *f_append(struct curl_slist *l, const char *s)
{
    struct curl_slist *n = calloc(1, sizeof(*n)), *t = l;

    n->data = strdup(s);
    if (!l)
        return n;
    while (t->next)
        t = t->next;
    t->next = n;
    return l;
}

static void f_free_all(struct curl_slist *l)
{
    while (l) {
        struct curl_slist *n = l->next;
        free(l->data);
        free(l);
        l = n;
    }
}

static const struct shim_curl_api api = {
    .flavor = SHIM_FLAVOR_OPENSSL, .easy_init = f_init, .easy_setopt = f_setopt,
    .easy_perform = f_perform, .easy_getinfo = f_getinfo, .easy_cleanup = f_cleanup,
    .easy_reset = f_reset, .easy_duphandle = f_dup, .slist_append = f_append,
    .slist_free_all = f_free_all,
};

static const char body[] = "{\"model\":\"m\",\"input\":\"hi\",\"tools\":"
                           "[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}]}";

static void view(struct shim_handle_view *v, int unsized)
{
    memset(v, 0, sizeof(*v));
    memset(&F, 0, sizeof(F));
    v->url = (char *)"http://upstream.test:1/v1/responses";
    v->method = SHIM_METHOD_POST;
    v->body = body;
    v->body_len = strlen(body);
    v->body_copied_unsized = unsized;
}

static void unsized_copy_is_duplicated_and_restored(void **state)
{
    struct shim_handle_view v;
    struct shim_upstream *u = NULL;
    (void)state;

    view(&v, 1);
    assert_int_equal(shim_upstream_open(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, &u), 0);
    assert_non_null(u);
    assert_int_equal(F.dups, 1);
    assert_true(F.postfields_at_dup);
    assert_int_equal(F.inits, 0); /* never a fresh handle */
    /* the program's handle: POSTFIELDS for the copy, then its own
     * COPYPOSTFIELDS of the same bytes again, nothing else */
    assert_int_equal(F.nopt, 2);
    assert_int_equal(F.opt[0], CURLOPT_POSTFIELDS);
    assert_ptr_equal(F.arg[0], body);
    assert_int_equal(F.opt[1], CURLOPT_COPYPOSTFIELDS);
    assert_ptr_equal(F.arg[1], body);
    shim_upstream_close(u);
}

static void sized_body_is_duplicated_untouched(void **state)
{
    struct shim_handle_view v;
    struct shim_upstream *u = NULL;
    (void)state;

    view(&v, 0);
    assert_int_equal(shim_upstream_open(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, &u), 0);
    assert_int_equal(F.dups, 1);
    assert_int_equal(F.nopt, 0);
    shim_upstream_close(u);
}

static void no_duplicate_no_call(void **state)
{
    struct shim_handle_view v;
    struct shim_upstream *u = NULL;
    (void)state;

    view(&v, 1);
    F.dup_fails = 1;
    assert_int_equal(shim_upstream_open(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, &u),
                     -ENOTSUP);
    assert_null(u);
    assert_int_equal(F.inits, 0);
    assert_int_equal(F.opt[F.nopt - 1], CURLOPT_COPYPOSTFIELDS); /* body restored */
}

static void failed_restore_leaves_no_dangling_body(void **state)
{
    struct shim_handle_view v;
    struct shim_upstream *u = NULL;
    (void)state;

    view(&v, 1);
    F.copy_fails = 1;
    assert_int_equal(shim_upstream_open(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, &u), 0);
    assert_int_equal(F.nopt, 3);
    assert_int_equal(F.opt[2], CURLOPT_POSTFIELDS);
    assert_ptr_not_equal(F.arg[2], body); /* not codeshim's memory */
    assert_string_equal((const char *)F.arg[2], "");
    shim_upstream_close(u);
}

static void loop_fails_the_transfer_clearly(void **state)
{
    struct shim_handle_view v;
    char errbuf[CURL_ERROR_SIZE] = "";
    cJSON *req = cJSON_Parse(body);
    (void)state;

    view(&v, 1);
    v.errorbuffer = errbuf;
    F.dup_fails = 1;
    assert_int_equal(shim_loop_run(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, req, 0),
                     CURLE_FAILED_INIT);
    assert_int_equal(F.performs, 0);
    assert_int_equal(F.inits, 0);
    assert_non_null(strstr(errbuf, "not sent"));
    cJSON_Delete(req);
}

/* ---- the network's answers, through http.c's transfer core ---- */

static struct shim_upstream *network(void)
{
    static const char *const head[] = {"HTTP/1.1 100 Continue\r\n", "\r\n",
                                       "HTTP/1.1 200 OK\r\n", "X-Final: 1\r\n", "\r\n", NULL};
    struct shim_handle_view v;
    struct shim_upstream *u = NULL;
    size_t i;

    view(&v, 0);
    for (i = 0; head[i]; i++)
        F.feed_head[i] = head[i];
    F.status = 200;
    F.repeat = 1;
    assert_int_equal(shim_upstream_open(&api, (CURL *)&prog_h, &v, SHIM_API_RESPONSES, &u), 0);
    return u;
}

static void whole_answer_keeps_the_final_head_and_is_capped(void **state)
{
    static char big[1001];
    struct shim_upstream *u = network();
    struct shim_http_reply r;
    char errbuf[CURL_ERROR_SIZE];
    (void)state;

    F.ctype = "application/json";
    F.feed_body = "{\"id\":\"resp_1\"}";
    assert_int_equal(shim_upstream_post(u, body, strlen(body), &r, errbuf), CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body.data, "{\"id\":\"resp_1\"}");
    assert_true(!strncmp(r.head.data, "HTTP/1.1 200 OK\r\n", 17));
    assert_null(strstr(r.head.data, "100 Continue"));
    assert_non_null(strstr(r.head.data, "X-Final: 1"));
    assert_string_equal(r.content_type, "application/json");
    shim_http_reply_free(&r);

    memset(big, 'x', 1000); /* 5000 bytes past the 4096 of CODESHIM_MAX_RESPONSE */
    F.feed_body = big;
    F.repeat = 5;
    assert_int_equal(shim_upstream_post(u, body, strlen(body), &r, errbuf),
                     CURLE_FILESIZE_EXCEEDED);
    assert_non_null(strstr(errbuf, "CODESHIM_MAX_RESPONSE"));
    assert_true(r.body.len <= 4096);
    shim_http_reply_free(&r);
    shim_upstream_close(u);
}

struct events {
    int n, stop_at;
};

static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
    struct events *e = ctx;

    (void)name, (void)data, (void)len;
    return e->n++ == e->stop_at;
}

static void sse_answer_is_parsed_as_it_comes_cut_at_the_cap_or_stopped(void **state)
{
    static char big[1001];
    struct shim_upstream *u = network();
    struct shim_http_reply r;
    struct events e = {.stop_at = -1};
    char errbuf[CURL_ERROR_SIZE];
    int streamed = 0;
    (void)state;

    F.ctype = "text/event-stream";
    F.feed_body = "data: {\"type\":\"a\"}\n\ndata: {\"type\":\"b\"}\n\n";
    assert_int_equal(shim_upstream_post_stream(u, body, strlen(body), &r, errbuf, on_event, &e,
                                               &streamed), CURLE_OK);
    assert_true(streamed);
    assert_int_equal(e.n, 2);
    assert_int_equal(r.body.len, 0); /* parsed, not kept (not recording) */
    shim_http_reply_free(&r);

    e = (struct events){.stop_at = 0};
    assert_int_equal(shim_upstream_post_stream(u, body, strlen(body), &r, errbuf, on_event, &e,
                                               &streamed), CURLE_WRITE_ERROR);
    assert_int_equal(e.n, 1);
    assert_non_null(strstr(errbuf, "stopped"));
    shim_http_reply_free(&r);

    /* 5000 bytes of comments: past the cap before any event ends */
    memset(big, ':', 1000);
    big[999] = '\n';
    F.feed_body = big;
    F.repeat = 5;
    e = (struct events){.stop_at = -1};
    assert_int_equal(shim_upstream_post_stream(u, body, strlen(body), &r, errbuf, on_event, &e,
                                               &streamed), CURLE_FILESIZE_EXCEEDED);
    assert_non_null(strstr(errbuf, "upstream response larger than 4096 bytes"));
    shim_http_reply_free(&r);

    /* not SSE: kept whole, not streamed */
    F.ctype = "application/json";
    F.feed_body = "{}";
    F.repeat = 1;
    assert_int_equal(shim_upstream_post_stream(u, body, strlen(body), &r, errbuf, on_event, &e,
                                               &streamed), CURLE_OK);
    assert_false(streamed);
    assert_string_equal(r.body.data, "{}");
    shim_http_reply_free(&r);
    shim_upstream_close(u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unsized_copy_is_duplicated_and_restored),
        cmocka_unit_test(sized_body_is_duplicated_untouched),
        cmocka_unit_test(no_duplicate_no_call),
        cmocka_unit_test(failed_restore_leaves_no_dangling_body),
        cmocka_unit_test(loop_fails_the_transfer_clearly),
        cmocka_unit_test(whole_answer_keeps_the_final_head_and_is_capped),
        cmocka_unit_test(sse_answer_is_parsed_as_it_comes_cut_at_the_cap_or_stopped),
    };
    unsetenv("CODESHIM_OFFLINE");
    unsetenv("CODESHIM_REPLAY");
    unsetenv("CODESHIM_RECORD");
    setenv("CODESHIM_MAX_RESPONSE", "4096", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
