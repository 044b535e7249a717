/* Unit tests: session naming (session.c) and the session socket protocol
 * (proto.c), including forged and oversized frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "identity.h"
#include "proto.h"
#include "session.h"
#include "store.h"

static void identities(void **state)
{
    char a[65], b[65], c[65], n1[65], n2[65], n3[65];
    (void)state;

    shim_identity_key("sk-one", a);
    shim_identity_key("sk-two", b);
    shim_identity_key(NULL, c);
    assert_int_equal(strlen(a), 32);
    assert_string_not_equal(a, b);
    assert_string_equal(c, "anonymous"); /* not hex: never a key's hash */
    shim_identity_key("", c);
    assert_string_equal(c, "anonymous");
    assert_null(strstr(a, "one"));
    shim_identity_key("sk-one", b);
    assert_string_equal(a, b); /* stable across runs */
    shim_session_name(a, "s1", n1);
    shim_session_name(a, "s2", n2);
    shim_identity_key("sk-two", b);
    shim_session_name(b, "s1", n3);
    assert_string_not_equal(n1, n2);
    assert_string_not_equal(n1, n3); /* same id, other key: other session */
    assert_int_equal(strlen(n1), 32);
}

static void frames_roundtrip(void **state)
{
    int sv[2];
    cJSON *m = cJSON_CreateObject(), *got = NULL;
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cJSON_AddStringToObject(m, "op", "exec");
    cJSON_AddStringToObject(m, "code", "print('\\u00e9')");
    assert_int_equal(shim_proto_send(sv[0], m, 1000), 0);
    assert_int_equal(shim_proto_recv(sv[1], &got, 1000), 0);
    assert_string_equal(cJSON_GetObjectItem(got, "code")->valuestring, "print('\\u00e9')");
    cJSON_Delete(got);
    cJSON_Delete(m);
    /* nothing arrives: a deadline, not a hang */
    assert_int_equal(shim_proto_recv(sv[1], &got, 50), -ETIMEDOUT);
    close(sv[0]);
    assert_int_equal(shim_proto_recv(sv[1], &got, 1000), -EPIPE);
    close(sv[1]);
}

static void forged_frames(void **state)
{
    int sv[2];
    cJSON *got = (cJSON *)1;
    unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff}, zero[4] = {0, 0, 0, 0};
    unsigned char arr[4] = {0, 0, 0, 3};
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(write(sv[0], huge, 4), 4);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_null(got);
    assert_int_equal(write(sv[0], zero, 4), 4);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_int_equal(write(sv[0], arr, 4), 4);
    assert_int_equal(write(sv[0], "[1]", 3), 3); /* JSON, but not an object */
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_int_equal(write(sv[0], arr, 4), 4);
    assert_int_equal(write(sv[0], "{\"", 2), 2); /* truncated, then closed */
    close(sv[0]);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPIPE);
    close(sv[1]);
}

static void results_roundtrip(void **state)
{
    struct shim_exec_result r, back;
    struct shim_exec_image img = {(char *)"image/png", (char *)"iVBORw0KGgo="};
    char *files[] = {(char *)"a.csv", (char *)"sub/b.png"};
    cJSON *j, *bad;
    (void)state;

    memset(&r, 0, sizeof(r));
    r.status = SHIM_EXEC_ERROR;
    r.logs = (char *)"Traceback...\nValueError: x\n";
    r.images = &img;
    r.nimages = 1;
    r.files = files;
    r.nfiles = 2;
    r.seconds = 0.25;
    j = shim_proto_result_to_json(&r);
    assert_int_equal(shim_proto_result_from_json(j, &back), 0);
    assert_int_equal(back.status, SHIM_EXEC_ERROR);
    assert_string_equal(back.logs, r.logs);
    assert_int_equal(back.nimages, 1);
    assert_string_equal(back.images[0].base64, "iVBORw0KGgo=");
    assert_int_equal(back.nfiles, 2);
    assert_string_equal(back.files[1], "sub/b.png");
    shim_exec_result_free(&back);
    cJSON_Delete(j);
    bad = cJSON_Parse("{\"status\":9,\"logs\":\"x\"}");
    assert_int_equal(shim_proto_result_from_json(bad, &back), -EPROTO);
    cJSON_Delete(bad);
    bad = cJSON_Parse("{\"status\":0}");
    assert_int_equal(shim_proto_result_from_json(bad, &back), -EPROTO);
    cJSON_Delete(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identities),
        cmocka_unit_test(frames_roundtrip),
        cmocka_unit_test(forged_frames),
        cmocka_unit_test(results_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
