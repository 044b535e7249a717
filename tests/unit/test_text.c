/* test_text.c - shim/base/text.c: UTF-8 cut points, sanitising, hex. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "base/text.h"

static void cut_points_never_split_a_character(void **state)
{
    const char *s = "a\xc3\xa9" "b\xe2\x82\xac" "c\xf0\x9f\x98\x80"; /* a é b € c 😀 */
    size_t n = strlen(s), i;
    (void)state;

    assert_int_equal(shim_text_cut_back(s, 2), 1);    /* inside é */
    assert_int_equal(shim_text_cut_forward(s, 2, n), 3);
    assert_int_equal(shim_text_cut_back(s, 6), 4);    /* inside € */
    assert_int_equal(shim_text_cut_forward(s, 9, n), n); /* inside 😀, at the end */
    assert_int_equal(shim_text_cut_back(s, 0), 0);
    assert_int_equal(shim_text_cut_forward(s, n, n), n);
    for (i = 0; i <= n; i++) {
        size_t b = shim_text_cut_back(s, i), f = shim_text_cut_forward(s, i, n);
        assert_true(b <= i && f >= i);
        assert_true(b == n || !shim_text_is_cont((unsigned char)s[b]));
        assert_true(f == n || !shim_text_is_cont((unsigned char)s[f]));
    }
}

static void sanitize_keeps_valid_text_and_length(void **state)
{
    char ok[] = "plain \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    char bad[] = "a\0b\xc3(\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80\xe2\x82";
    size_t n = sizeof(bad) - 1;
    (void)state;

    shim_text_sanitize_utf8(ok, strlen(ok));
    assert_string_equal(ok, "plain \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    shim_text_sanitize_utf8(bad, n);
    /* NUL, a lone lead byte, a surrogate, an overlong form, a code point
     * past U+10FFFF and a truncated sequence all become '?' byte by byte */
    assert_memory_equal(bad, "a?b?(?????????????", n);
}

static void hex_is_lowercase_and_terminated(void **state)
{
    const unsigned char in[] = {0x00, 0x0f, 0xa5, 0xff};
    char out[9];
    (void)state;

    memset(out, 'x', sizeof(out));
    shim_text_hex(in, sizeof(in), out);
    assert_string_equal(out, "000fa5ff");
    shim_text_hex(in, 0, out);
    assert_string_equal(out, "");
}

static void safe_filename_keeps_the_base_name_or_refuses(void **state)
{
    static const char *const bad[] = {"", ".", "..", "dir/", "a/..", "x\nname", "tab\there",
                                      "del\x7f", "bad\xc3", "\xed\xa0\x80surrogate",
                                      "\xc0\xafoverlong"};
    char out[256], longname[300];
    size_t i;
    (void)state;

    assert_int_equal(shim_text_safe_filename("data.csv", out, sizeof(out)), 0);
    assert_string_equal(out, "data.csv");
    assert_int_equal(shim_text_safe_filename("../../etc/passwd", out, sizeof(out)), 0);
    assert_string_equal(out, "passwd");
    assert_int_equal(shim_text_safe_filename("C:\\Users\\me\\r\xc3\xa9sum\xc3\xa9.pdf", out,
                                             sizeof(out)), 0);
    assert_string_equal(out, "r\xc3\xa9sum\xc3\xa9.pdf");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (shim_text_safe_filename(bad[i], out, sizeof(out)) != -EINVAL)
            fail_msg("name %zu accepted", i);
    memset(longname, 'a', 256);
    longname[256] = '\0';
    assert_int_equal(shim_text_safe_filename(longname, out, sizeof(out)), -EINVAL);
    longname[255] = '\0';
    assert_int_equal(shim_text_safe_filename(longname, out, sizeof(out)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cut_points_never_split_a_character),
        cmocka_unit_test(sanitize_keeps_valid_text_and_length),
        cmocka_unit_test(hex_is_lowercase_and_terminated),
        cmocka_unit_test(safe_filename_keeps_the_base_name_or_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
