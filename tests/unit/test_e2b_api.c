/* Unit tests: e2b_api.c's requests, as a loopback server of the test's
 * own receives them (E2B_API_URL and CODESHIM_E2B_SANDBOX_URL pointed at
 * it): each call's method, path and query, headers and JSON or form
 * body, and what is read back from e2b's answers (the sandbox, paging,
 * refusals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "base/json.h"
#include "sandbox/e2b/e2b_int.h"
#include "system/config.h"

static struct shim_config cfg;

/* A client whose control plane and data plane are s (the shared-host
 * form of the data plane: E2b-Sandbox-Id/-Port headers). */
static void client(struct shim_e2b_api *a, const struct server *s)
{
    struct shim_http_net net = {.flavor = SHIM_FLAVOR_OPENSSL};

    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.e2b_api_key, sizeof(cfg.e2b_api_key), "e2b_test_key");
    snprintf(cfg.e2b_api_url, sizeof(cfg.e2b_api_url), "http://127.0.0.1:%d/", s->port);
    snprintf(cfg.e2b_sandbox_url, sizeof(cfg.e2b_sandbox_url), "http://127.0.0.1:%d", s->port);
    snprintf(cfg.e2b_domain, sizeof(cfg.e2b_domain), "e2b.test");
    snprintf(cfg.e2b_template, sizeof(cfg.e2b_template), "code-interpreter-v1");
    cfg.e2b_internet = 0;
    cfg.exec_timeout_s = 10;
    cfg.output_cap = 20000;
    assert_int_equal(shim_e2b_api_init(a, &cfg, &net), 0);
}

static int starts(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* The request's header line "Name: value\r\n" is there. */
static int has_header(const struct server *s, int i, const char *line)
{
    char want[700];

    snprintf(want, sizeof(want), "\r\n%s\r\n", line);
    return strstr(s->req[i], want) != NULL;
}


static char answer[4][2048];

/* An HTTP answer with body b (its Content-Length computed), in slot i. */
static const char *json_answer(int i, long status, const char *extra, const char *b)
{
    snprintf(answer[i], sizeof(answer[i]),
             "HTTP/1.1 %ld X\r\nContent-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n%s",
             status, extra, strlen(b), b);
    return answer[i];
}

static const char sandbox_json[] =
    "{\"sandboxID\":\"ib0x\",\"envdAccessToken\":\"tok-e\",\"trafficAccessToken\":\"tok-t\","
    "\"envdVersion\":\"0.5.7\",\"metadata\":{\"codeshim_nonce\":\"n1\"}}";

static void create_posts_the_template_metadata_and_timeout(void **state)
{
    static const char *const md[] = {"codeshim_session", "s1", "codeshim_nonce", "n1", NULL};
    struct shim_e2b_api a;
    struct shim_e2b_box box;
    struct server s;
    cJSON *o, *m;
    (void)state;

    start(&s, 1, json_answer(0, 201, "", sandbox_json));
    client(&a, &s);
    assert_int_equal(shim_e2b_create(&a, md, 900, &box), 0);
    shim_e2b_api_free(&a);
    stop(&s);

    assert_true(starts(s.req[0], "POST /sandboxes HTTP/1.1\r\n"));
    assert_true(has_header(&s, 0, "X-API-Key: e2b_test_key"));
    assert_true(has_header(&s, 0, "Content-Type: application/json"));
    o = cJSON_Parse(body_of(&s, 0));
    assert_non_null(o);
    assert_string_equal(shim_json_str(o, "templateID"), "code-interpreter-v1");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "timeout")->valueint, 900);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "secure")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(o, "allow_internet_access")));
    m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    assert_string_equal(shim_json_str(m, "codeshim_session"), "s1");
    assert_string_equal(shim_json_str(m, "codeshim_nonce"), "n1");
    assert_int_equal(cJSON_GetArraySize(m), 2);
    cJSON_Delete(o);
    /* what the answer said */
    assert_string_equal(box.id, "ib0x");
    assert_string_equal(box.envd_token, "tok-e");
    assert_string_equal(box.traffic_token, "tok-t");
    assert_string_equal(box.nonce, "n1");
    assert_string_equal(box.envd_version, "0.5.7");
}

static void get_timeout_and_kill_name_the_sandbox(void **state)
{
    struct shim_e2b_api a;
    struct shim_e2b_box box;
    struct server s;
    cJSON *o;
    (void)state;

    start(&s, 3, json_answer(0, 200, "", sandbox_json), json_answer(1, 204, "", ""),
          json_answer(2, 204, "", ""));
    client(&a, &s);
    assert_int_equal(shim_e2b_get(&a, "ib0x", &box), 0);
    assert_int_equal(shim_e2b_set_timeout(&a, "ib0x", 3600), 0);
    assert_int_equal(shim_e2b_kill(&a, "ib0x"), 0);
    shim_e2b_api_free(&a);
    stop(&s);

    assert_true(starts(s.req[0], "GET /sandboxes/ib0x HTTP/1.1\r\n"));
    assert_true(starts(s.req[1], "POST /sandboxes/ib0x/timeout HTTP/1.1\r\n"));
    o = cJSON_Parse(body_of(&s, 1));
    assert_non_null(o);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(o, "timeout")->valueint, 3600);
    cJSON_Delete(o);
    assert_true(starts(s.req[2], "DELETE /sandboxes/ib0x HTTP/1.1\r\n"));
    assert_true(has_header(&s, 2, "X-API-Key: e2b_test_key"));
}

static void list_filters_by_metadata_and_follows_the_next_token(void **state)
{
    static const char page1[] = "[{\"sandboxID\":\"a1\"},{\"sandboxID\":\"a2\"}]";
    static const char page2[] = "[{\"sandboxID\":\"a3\"},{\"sandboxID\":\"bad/id\"}]";
    struct shim_e2b_api a;
    struct shim_e2b_box out[8];
    struct server s;
    size_t n;
    (void)state;

    start(&s, 2, json_answer(0, 200, "X-Next-Token: p/2+x=\r\n", page1),
          json_answer(1, 200, "", page2));
    client(&a, &s);
    assert_int_equal(shim_e2b_list(&a, "codeshim_user", "u1", out, 8, &n), 0);
    shim_e2b_api_free(&a);
    stop(&s);

    assert_true(starts(s.req[0], "GET /v2/sandboxes?metadata=codeshim_user%3Du1"
                                 "&state=running&limit=100 HTTP/1.1\r\n"));
    /* the opaque token percent-encoded */
    assert_true(starts(s.req[1], "GET /v2/sandboxes?metadata=codeshim_user%3Du1"
                                 "&state=running&limit=100&nextToken=p%2F2%2Bx%3D HTTP/1.1\r\n"));
    assert_int_equal(n, 3); /* an id that cannot go into a URL is left out */
    assert_string_equal(out[0].id, "a1");
    assert_string_equal(out[2].id, "a3");
}

static void execute_posts_the_code_to_the_sandbox(void **state)
{
    static const char nd[] = "{\"type\":\"stdout\",\"text\":\"hi\\n\"}\n"
                             "{\"type\":\"end_of_execution\"}\n";
    struct shim_e2b_api a;
    struct shim_e2b_box box;
    struct shim_exec_result res;
    enum shim_e2b_exec_end end;
    struct server s;
    double secs;
    cJSON *o;
    (void)state;

    memset(&box, 0, sizeof(box));
    snprintf(box.id, sizeof(box.id), "ib0x");
    snprintf(box.envd_token, sizeof(box.envd_token), "tok-e");
    snprintf(box.traffic_token, sizeof(box.traffic_token), "tok-t");
    start(&s, 1, json_answer(0, 200, "", nd));
    client(&a, &s);
    assert_int_equal(shim_e2b_execute(&a, &box, "print('hi')\nx = \"q\"", 19, NULL, &res, &end, &secs),
                     0);
    shim_e2b_api_free(&a);
    stop(&s);

    assert_int_equal(end, SHIM_E2B_RAN);
    assert_non_null(res.logs);
    assert_non_null(strstr(res.logs, "hi"));
    shim_exec_result_free(&res);
    assert_true(starts(s.req[0], "POST /execute HTTP/1.1\r\n"));
    assert_true(has_header(&s, 0, "E2b-Sandbox-Id: ib0x"));
    assert_true(has_header(&s, 0, "E2b-Sandbox-Port: 49999"));
    assert_true(has_header(&s, 0, "X-Access-Token: tok-e"));
    assert_true(has_header(&s, 0, "E2B-Traffic-Access-Token: tok-t"));
    assert_null(strstr(s.req[0], "X-API-Key")); /* the key stays on the control plane */
    o = cJSON_Parse(body_of(&s, 0));
    assert_non_null(o);
    assert_string_equal(shim_json_str(o, "code"), "print('hi')\nx = \"q\"");
    assert_string_equal(shim_json_str(o, "language"), "python");
    cJSON_Delete(o);
}

/* envd 0.5.7 and later take the file's bytes raw; earlier ones a form
 * with one part named "file". */
static void file_put_raw_or_as_a_form_by_envd_version(void **state)
{
    static const char data[] = "a,b\n1,2\n";
    struct shim_e2b_api a;
    struct shim_e2b_box box;
    struct server s;
    const char *ct, *b;
    char bound[200], want[300];
    (void)state;

    memset(&box, 0, sizeof(box));
    snprintf(box.id, sizeof(box.id), "ib0x");
    snprintf(box.envd_version, sizeof(box.envd_version), "0.5.7");
    start(&s, 2, json_answer(0, 200, "", "[]"), json_answer(1, 200, "", "[]"));
    client(&a, &s);
    assert_int_equal(shim_e2b_file_put(&a, &box, "/mnt/data/my file.csv", data, 8), 0);
    snprintf(box.envd_version, sizeof(box.envd_version), "0.5.6");
    assert_int_equal(shim_e2b_file_put(&a, &box, "/mnt/data/my file.csv", data, 8), 0);
    shim_e2b_api_free(&a);
    stop(&s);

    assert_true(starts(s.req[0], "POST /files?username=user&path=/mnt/data/my%20file.csv "
                                 "HTTP/1.1\r\n"));
    assert_true(has_header(&s, 0, "E2b-Sandbox-Port: 49983"));
    assert_true(has_header(&s, 0, "Content-Type: application/octet-stream"));
    assert_string_equal(body_of(&s, 0), data);

    assert_true(starts(s.req[1], "POST /files?username=user&path=/mnt/data/my%20file.csv "));
    ct = strstr(s.req[1], "\r\nContent-Type: multipart/form-data; boundary=");
    assert_non_null(ct);
    assert_int_equal(sscanf(ct + 46, "%199[^\r]", bound), 1);
    b = body_of(&s, 1);
    snprintf(want, sizeof(want), "--%s\r\nContent-Disposition: form-data; name=\"file\"; "
             "filename=\"my file.csv\"\r\n", bound);
    assert_true(starts(b, want));
    snprintf(want, sizeof(want), "\r\n\r\n%s\r\n--%s--\r\n", data, bound);
    assert_non_null(strstr(b, want));
}

static void refusals_map_to_errno_and_never_show_the_key(void **state)
{
    struct shim_e2b_api a;
    struct shim_e2b_box box;
    struct server s;
    (void)state;

    start(&s, 2, json_answer(0, 401, "", "{\"code\":401,\"message\":\"Invalid API key e2b_test_key\"}"),
          json_answer(1, 404, "", "{\"code\":404,\"message\":\"not found\"}"));
    client(&a, &s);
    assert_int_equal(shim_e2b_get(&a, "ib0x", &box), -EACCES);
    assert_int_equal(a.status, 401);
    assert_null(strstr(a.why, "e2b_test_key"));
    assert_int_equal(shim_e2b_kill(&a, "gone"), -ENOENT);
    /* no key: nothing is sent */
    cfg.e2b_api_key[0] = '\0';
    assert_int_equal(shim_e2b_get(&a, "ib0x", &box), -EACCES);
    shim_e2b_api_free(&a);
    stop(&s);
    assert_int_equal(s.nreq, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_posts_the_template_metadata_and_timeout),
        cmocka_unit_test(get_timeout_and_kill_name_the_sandbox),
        cmocka_unit_test(list_filters_by_metadata_and_follows_the_next_token),
        cmocka_unit_test(execute_posts_the_code_to_the_sandbox),
        cmocka_unit_test(file_put_raw_or_as_a_form_by_envd_version),
        cmocka_unit_test(refusals_map_to_errno_and_never_show_the_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
