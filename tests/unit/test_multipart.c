/* test_multipart.c - shim/api/multipart.c: form-data uploads as curl -F sends
 * them, and malformed bodies refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/multipart.h"

static struct shim_part parts[4];
static size_t n;

static int parse(const char *body, size_t len, const char *b)
{
    return shim_multipart_parse(body, len, b, parts, 4, &n);
}

static void boundary_from_content_type(void **state)
{
    char b[SHIM_MULTIPART_BOUNDARY_MAX + 1];
    (void)state;
    assert_int_equal(shim_multipart_boundary("multipart/form-data; boundary=------abc123", b), 0);
    assert_string_equal(b, "------abc123");
    assert_int_equal(shim_multipart_boundary("Multipart/Form-Data;boundary=\"a b\"", b), 0);
    assert_string_equal(b, "a b");
    assert_int_equal(shim_multipart_boundary("multipart/form-data", b), -EINVAL);
    assert_int_equal(shim_multipart_boundary("multipart/mixed; boundary=x", b), -EINVAL);
    assert_int_equal(shim_multipart_boundary("application/json", b), -EINVAL);
    assert_int_equal(shim_multipart_boundary("multipart/form-data; boundary=", b), -EINVAL);
    assert_int_equal(shim_multipart_boundary(
                         "multipart/form-data; boundary=0123456789012345678901234567890123456789"
                         "0123456789012345678901234567890123456789", b),
                     -EINVAL);
}

static void a_file_part_with_binary_bytes(void **state)
{
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"da\\\"ta.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n"
        "\r\n"
        "a\0b\r\n--Xy\r\nc"
        "\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=purpose\r\n"
        "\r\n"
        "user\r\n"
        "--XyZ--\r\nepilogue";
    (void)state;
    assert_int_equal(parse(body, sizeof(body) - 1, "XyZ"), 0);
    assert_int_equal(n, 2);
    assert_string_equal(parts[0].name, "file");
    assert_true(parts[0].has_filename);
    assert_string_equal(parts[0].filename, "da\"ta.bin");
    assert_string_equal(parts[0].content_type, "application/octet-stream");
    assert_int_equal(parts[0].len, 12);
    assert_memory_equal(parts[0].data, "a\0b\r\n--Xy\r\nc", 12);
    assert_string_equal(parts[1].name, "purpose");
    assert_false(parts[1].has_filename);
    assert_int_equal(parts[1].len, 4);
}

static void empty_file_and_preamble(void **state)
{
    static const char body[] = "preamble\r\n--b\r\n"
                               "content-disposition: form-data; name=\"file\"; filename=\"e\"\r\n"
                               "\r\n"
                               "\r\n--b--";
    (void)state;
    assert_int_equal(parse(body, sizeof(body) - 1, "b"), 0);
    assert_int_equal(n, 1);
    assert_int_equal(parts[0].len, 0);
    assert_string_equal(parts[0].filename, "e");
}

static void malformed_bodies_are_refused(void **state)
{
    static const char *const bad[] = {
        "", "no delimiter at all",
        "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\ntruncated",
        "--b\r\nContent-Disposition: form-data; name=\"f\"\r\nno blank line",
        "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",           /* no disposition */
        "--b\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--",      /* no name */
        "--b\r\nContent-Disposition: form-data; name=\"\"\r\n\r\nx\r\n--b--", /* empty */
        "--b\r\nContent-Disposition: form-data; name=\"f\r\n\r\nx\r\n--b--",
        "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n"
        "Content-Disposition: form-data; name=\"g\"\r\n\r\nx\r\n--b--",
        "--bjunk\r\n",
    };
    size_t i;
    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (parse(bad[i], strlen(bad[i]), "b") != -EINVAL)
            fail_msg("body %zu was accepted", i);
}

static void too_many_parts_and_huge_headers(void **state)
{
    char *body = malloc(20000);
    size_t len = 0;
    int i;
    (void)state;
    for (i = 0; i < 5; i++)
        len += (size_t)sprintf(body + len,
                               "--b\r\nContent-Disposition: form-data; name=\"f%d\"\r\n\r\nx\r\n", i);
    len += (size_t)sprintf(body + len, "--b--");
    assert_int_equal(parse(body, len, "b"), -E2BIG);
    len = (size_t)sprintf(body, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\nX: ");
    memset(body + len, 'a', SHIM_MULTIPART_HEAD_MAX);
    len += SHIM_MULTIPART_HEAD_MAX;
    len += (size_t)sprintf(body + len, "\r\n\r\nx\r\n--b--");
    assert_int_equal(parse(body, len, "b"), -EINVAL);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(boundary_from_content_type),
        cmocka_unit_test(a_file_part_with_binary_bytes),
        cmocka_unit_test(empty_file_and_preamble),
        cmocka_unit_test(malformed_bodies_are_refused),
        cmocka_unit_test(too_many_parts_and_huge_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
