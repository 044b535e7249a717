/* test_capi.c - shim/api/capi.c: which Containers API call a transfer is, and
 * the pagination of its lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/capi.h"

#define CID "cntr_0123456789abcdef"
#define FID "cfile_0123456789abcdef"

static void routes(void **state)
{
    static const struct {
        const char *method, *url;
        enum shim_capi_op op;
    } cases[] = {
        {"GET", "https://api.openai.com/v1/containers", SHIM_CAPI_LIST},
        {"GET", "https://h/v1/containers?limit=2&order=asc", SHIM_CAPI_LIST},
        {"POST", "http://h:8/openai/v1/containers", SHIM_CAPI_CREATE},
        {"GET", "https://h/v1/containers/" CID, SHIM_CAPI_GET},
        {"DELETE", "https://h/v1/containers/" CID, SHIM_CAPI_DELETE},
        {"GET", "https://h/v1/containers/" CID "/files", SHIM_CAPI_FILES},
        {"POST", "https://h/v1/containers/" CID "/files", SHIM_CAPI_UPLOAD},
        {"GET", "https://h/v1/containers/" CID "/files/" FID, SHIM_CAPI_FILE},
        {"DELETE", "https://h/v1/containers/" CID "/files/" FID, SHIM_CAPI_FILE_DELETE},
        {"GET", "https://h/v1/containers/" CID "/files/" FID "/content", SHIM_CAPI_CONTENT},
        {"GET", "localhost/v1/containers/" CID "/files/" FID "/content", SHIM_CAPI_CONTENT},
        /* not ours */
        {"PUT", "https://h/v1/containers", SHIM_CAPI_NONE},
        {"POST", "https://h/v1/containers/" CID, SHIM_CAPI_NONE},
        {"GET", "https://h/v1/containers/notanid", SHIM_CAPI_NONE},
        {"GET", "https://h/v1/containers/" CID "/files/" FID "/content/x", SHIM_CAPI_NONE},
        {"POST", "https://h/v1/containers/" CID "/files/" FID "/content", SHIM_CAPI_NONE},
        {"GET", "https://h/v1/containersx", SHIM_CAPI_NONE},
        {"GET", "https://h/v1/responses?x=/containers", SHIM_CAPI_NONE},
        {"GET", "https://h/v1/files", SHIM_CAPI_NONE},
    };
    struct shim_capi_route r;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (shim_capi_route(cases[i].method, cases[i].url, &r) != cases[i].op)
            fail_msg("case %zu: %s %s gave %d", i, cases[i].method, cases[i].url, (int)r.op);
    shim_capi_route("GET", "https://h/v1/containers/" CID "/files/" FID, &r);
    assert_string_equal(r.cid, CID);
    assert_string_equal(r.fid, FID);
    shim_capi_route("GET", "https://h/v1/containers?limit=0", &r);
    assert_string_equal(r.bad_param, "limit");
    shim_capi_route("GET", "https://h/v1/containers?limit=100&order=asc&after=" CID, &r);
    assert_int_equal(r.limit, 100);
    assert_true(r.ascending);
    assert_string_equal(r.after, CID);
}

static void pages(void **state)
{
    struct shim_container v[5];
    struct shim_capi_route r;
    cJSON *j;
    int i;
    (void)state;

    memset(v, 0, sizeof(v));
    for (i = 0; i < 5; i++)
        snprintf(v[i].id, sizeof(v[i].id), "cntr_%d", i);
    shim_capi_route("GET", "https://h/v1/containers?limit=2", &r); /* desc */
    j = shim_capi_list(v, 5, NULL, &r);
    assert_string_equal(cJSON_GetObjectItem(j, "first_id")->valuestring, "cntr_4");
    assert_string_equal(cJSON_GetObjectItem(j, "last_id")->valuestring, "cntr_3");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "has_more")));
    cJSON_Delete(j);
    shim_capi_route("GET", "https://h/v1/containers?limit=2&after=cntr_1", &r);
    j = shim_capi_list(v, 5, NULL, &r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 1);
    assert_string_equal(cJSON_GetObjectItem(j, "first_id")->valuestring, "cntr_0");
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "has_more")));
    cJSON_Delete(j);
    shim_capi_route("GET", "https://h/v1/containers?order=asc&after=cntr_3", &r);
    j = shim_capi_list(v, 5, NULL, &r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 1);
    assert_string_equal(cJSON_GetObjectItem(j, "last_id")->valuestring, "cntr_4");
    cJSON_Delete(j);
    j = shim_capi_list(v, 0, NULL, &r);
    assert_string_equal(cJSON_GetObjectItem(j, "first_id")->valuestring, "");
    cJSON_Delete(j);
}

/* A name filter: the value percent-decoded, and has_more only when one
 * more container the filter keeps follows the page. */
static void name_filter(void **state)
{
    struct shim_container v[4];
    struct shim_capi_route r;
    cJSON *j;
    int i;
    (void)state;

    memset(v, 0, sizeof(v));
    for (i = 0; i < 4; i++) {
        snprintf(v[i].id, sizeof(v[i].id), "cntr_%d", i);
        snprintf(v[i].name, sizeof(v[i].name), "%s", i < 2 ? "a b/c" : "zz");
    }
    shim_capi_route("GET", "https://h/v1/containers?order=asc&limit=2&name=a%20b%2Fc", &r);
    assert_string_equal(r.name, "a b/c");
    j = shim_capi_list(v, 4, NULL, &r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 2);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "has_more")));
    cJSON_Delete(j);
    shim_capi_route("GET", "https://h/v1/containers?name=a+b%2fc&limit=1", &r);
    assert_string_equal(r.name, "a b/c");
    j = shim_capi_list(v, 4, NULL, &r); /* desc: cntr_1, then cntr_0 follows */
    assert_string_equal(cJSON_GetObjectItem(j, "first_id")->valuestring, "cntr_1");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "has_more")));
    cJSON_Delete(j);
    shim_capi_route("GET", "https://h/v1/containers?name=100%25%2&limit=1", &r);
    assert_string_equal(r.name, "100%%2"); /* a broken escape stays as it is */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes),
        cmocka_unit_test(pages),
        cmocka_unit_test(name_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
