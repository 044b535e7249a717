/* Unit tests: the private handle of upstream calls (upstream.c), against a
 * fake libcurl table. A handle libcurl 7.88 cannot duplicate (an unsized
 * COPYPOSTFIELDS) is duplicated all the same and left as the program set
 * it; when duplication fails no call is made on a fresh handle, and the
 * transfer fails with a clear error (loop.c). */
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
    (void)h;
    F.performs++;
    return CURLE_OK;
}

static CURLcode f_getinfo(CURL *h, CURLINFO i, ...)
{
    (void)h;
    (void)i;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unsized_copy_is_duplicated_and_restored),
        cmocka_unit_test(sized_body_is_duplicated_untouched),
        cmocka_unit_test(no_duplicate_no_call),
        cmocka_unit_test(failed_restore_leaves_no_dangling_body),
        cmocka_unit_test(loop_fails_the_transfer_clearly),
    };
    unsetenv("CODESHIM_OFFLINE");
    unsetenv("CODESHIM_REPLAY");
    unsetenv("CODESHIM_RECORD");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
