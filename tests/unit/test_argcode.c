/* Unit tests: argcode.c, the code decoded out of streamed call arguments:
 * the same code for every split of the arguments (into two pieces at every
 * byte, and byte by byte), escapes and \uXXXX surrogate pairs split
 * anywhere, the decoded text cut only at UTF-8 boundaries, and arguments
 * of another shape stopping the decoder (the whole parse decides then). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/argcode.h"
#include "api/conv.h"
#include "base/buf.h"

/* Decodes args fed as pieces split at cut (cut > len: byte by byte);
 * checks that every prefix sent as a delta ends on a UTF-8 boundary and
 * that what was sent adds up to the output. Returns 1 when stopped. */
static int decode(const char *args, size_t cut, struct shim_buf *out)
{
    struct shim_argcode d;
    size_t n = strlen(args), i, sent = 0;

    shim_argcode_init(&d);
    for (i = 0; i < n;) {
        size_t k = cut > n ? 1 : (i == 0 ? cut : n - cut);
        if (k == 0) {
            cut = n; /* an empty first piece: then the rest */
            continue;
        }
        assert_int_equal(shim_argcode_feed(&d, args + i, k, out), 0);
        i += k;
        {
            size_t whole = shim_argcode_whole(out->data, out->len);
            assert_true(whole >= sent);
            sent = whole;
        }
    }
    return shim_argcode_stopped(&d);
}

/* The decoded code equals the whole parse's at every split. */
static void check(const char *args)
{
    const char *why;
    char *want = shim_conv_parse_code(args, &why);
    size_t cut, n = strlen(args);

    assert_non_null(want);
    for (cut = 0; cut <= n + 1; cut++) {
        struct shim_buf out;
        shim_buf_init(&out, 1 << 16);
        assert_int_equal(decode(args, cut, &out), 0);
        if (strcmp(out.data ? out.data : "", want))
            fail_msg("split at %zu of %s: got [%s]", cut, args, out.data ? out.data : "");
        assert_int_equal(shim_argcode_whole(out.data, out.len), out.len);
        shim_buf_free(&out);
    }
    free(want);
}

static void plain_code(void **state)
{
    (void)state;
    check("{\"code\": \"print(6 * 7)\\n\"}");
    check(" \n{ \"code\" :\t\"x = 1\" , \"other\": 2}");
    check("{\"code\":\"\"}");
}

static void escapes_split_anywhere(void **state)
{
    (void)state;
    check("{\"code\": \"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\te\"}");
    check("{\"code\": \"caf\\u00e9 \\u20ac \\u0041\"}");
}

static void surrogate_pairs_split_anywhere(void **state)
{
    (void)state;
    check("{\"code\": \"print('\\ud83d\\ude00')\"}");     /* U+1F600 */
    check("{\"code\": \"\\uD834\\uDD1E\\ud83d\\ude00x\"}"); /* two pairs, upper hex */
}

static void raw_utf8_held_at_boundaries(void **state)
{
    struct shim_buf out;
    struct shim_argcode d;
    const char *args = "{\"code\":\"\xE2\x82\xAC\xF0\x9F\x98\x80\"}";
    size_t i;

    (void)state;
    check(args);
    /* byte by byte: after each byte the sendable prefix is whole characters */
    shim_buf_init(&out, 1 << 10);
    shim_argcode_init(&d);
    for (i = 0; i < strlen(args); i++) {
        shim_argcode_feed(&d, args + i, 1, &out);
        if (out.len == 1 || out.len == 2)
            assert_int_equal(shim_argcode_whole(out.data, out.len), 0);
        if (out.len == 4 || out.len == 5 || out.len == 6)
            assert_int_equal(shim_argcode_whole(out.data, out.len), 3);
    }
    assert_int_equal(shim_argcode_whole(out.data, out.len), 7);
    shim_buf_free(&out);
}

/* Other shapes: the decoder stops at once and gives nothing wrong. */
static void stops(const char *args, const char *prefix)
{
    size_t cut, n = strlen(args);

    for (cut = 0; cut <= n + 1; cut++) {
        struct shim_buf out;
        shim_buf_init(&out, 1 << 16);
        assert_int_equal(decode(args, cut, &out), 1);
        assert_string_equal(out.data ? out.data : "", prefix);
        shim_buf_free(&out);
    }
}

static void other_shapes_stop(void **state)
{
    (void)state;
    stops("{\"other\": 1, \"code\": \"x\"}", "");
    stops("{\"\\u0063ode\": \"x\"}", ""); /* the key written with an escape */
    stops("[\"code\"]", "");
    stops("{\"code\": 5}", "");
    stops("{\"codes\": \"x\"}", "");
    stops("\"code\"", "");
}

static void refused_content_stops(void **state)
{
    (void)state;
    /* what shim_json_read refuses, or what is not JSON, stops there */
    stops("{\"code\": \"ab\\u0000cd\"}", "ab");
    stops("{\"code\": \"ab\\ud83dcd\"}", "ab");     /* a lone high surrogate */
    stops("{\"code\": \"ab\\ude00cd\"}", "ab");     /* a lone low surrogate */
    stops("{\"code\": \"ab\\ud83d\\u0041\"}", "ab"); /* high then not low */
    stops("{\"code\": \"ab\\ud83d\\ncd\"}", "ab");
    stops("{\"code\": \"ab\\xcd\"}", "ab");          /* an unknown escape */
    stops("{\"code\": \"ab\\u12g4\"}", "ab");
    stops("{\"code\": \"ab\ncd\"}", "ab");           /* a raw control byte */
}

static void output_cap_stops(void **state)
{
    struct shim_buf out;
    struct shim_argcode d;
    const char *args = "{\"code\": \"0123456789\"}";

    (void)state;
    shim_buf_init(&out, 4);
    shim_argcode_init(&d);
    assert_int_not_equal(shim_argcode_feed(&d, args, strlen(args), &out), 0);
    assert_true(shim_argcode_stopped(&d));
    shim_buf_free(&out);
}

/* 8 MB of code fed in 3-byte pieces: linear. */
static void large_code_linear(void **state)
{
    struct shim_buf out;
    struct shim_argcode d;
    static const char piece[] = "a\\n";
    size_t i;

    (void)state;
    shim_buf_init(&out, 64u << 20);
    shim_argcode_init(&d);
    assert_int_equal(shim_argcode_feed(&d, "{\"code\": \"", 10, &out), 0);
    for (i = 0; i < (8u << 20) / 3; i++)
        assert_int_equal(shim_argcode_feed(&d, piece, 3, &out), 0);
    assert_int_equal(out.len, 2 * i);
    shim_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plain_code),
        cmocka_unit_test(escapes_split_anywhere),
        cmocka_unit_test(surrogate_pairs_split_anywhere),
        cmocka_unit_test(raw_utf8_held_at_boundaries),
        cmocka_unit_test(other_shapes_stop),
        cmocka_unit_test(refused_content_stops),
        cmocka_unit_test(output_cap_stops),
        cmocka_unit_test(large_code_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
