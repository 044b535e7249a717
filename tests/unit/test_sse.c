/* Unit tests: sse.c, the parser of the upstream's own event stream: the
 * same events whatever the split (every byte boundary, byte by byte),
 * LF / CR / CRLF line ends (a CRLF split across feeds is one end),
 * comments, multi-line data, a BOM, and the caps on a line and an event. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/sse.h"
#include "base/buf.h"

/* Events as "name|data\n" lines ("-" for no name). */
static int collect(void *ctx, const char *name, const char *data, size_t len)
{
    struct shim_buf *b = ctx;

    assert_int_equal(strlen(data), len); /* NUL-terminated */
    shim_buf_addf(b, "%s|", name ? name : "-");
    shim_buf_add(b, data, len);
    shim_buf_adds(b, "\n");
    return 0;
}

/* Parses text fed in two parts split at cut (cut > len: byte by byte). */
static int parse(const char *text, size_t cut, size_t cap, struct shim_buf *out)
{
    struct shim_sse p;
    size_t n = strlen(text), i;
    int rc = 0;

    shim_sse_init(&p, cap, cap, collect, out);
    if (cut > n) {
        for (i = 0; i < n && rc == 0; i++)
            rc = shim_sse_feed(&p, text + i, 1);
    } else {
        rc = shim_sse_feed(&p, text, cut);
        if (rc == 0)
            rc = shim_sse_feed(&p, text + cut, n - cut);
    }
    if (rc == 0)
        rc = shim_sse_end(&p);
    shim_sse_free(&p);
    return rc;
}

/* The same events at every split point and byte by byte. */
static void check_all_splits(const char *text, const char *want)
{
    size_t cut, n = strlen(text);

    for (cut = 0; cut <= n + 1; cut++) {
        struct shim_buf out;
        shim_buf_init(&out, 1 << 20);
        assert_int_equal(parse(text, cut, 4096, &out), 0);
        if (strcmp(out.data ? out.data : "", want))
            fail_msg("split at %zu: got [%s], want [%s]", cut, out.data ? out.data : "", want);
        shim_buf_free(&out);
    }
}

static void responses_framing(void **state)
{
    (void)state;
    check_all_splits("event: response.created\ndata: {\"a\":1}\n\n"
                     "event: response.output_text.delta\ndata: {\"d\":\"x\"}\n\n",
                     "response.created|{\"a\":1}\nresponse.output_text.delta|{\"d\":\"x\"}\n");
}

static void chat_framing_and_done(void **state)
{
    (void)state;
    check_all_splits("data: {\"c\":1}\n\ndata: [DONE]\n\n", "-|{\"c\":1}\n-|[DONE]\n");
}

static void line_ends_crlf_cr_lf(void **state)
{
    (void)state;
    check_all_splits("event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n",
                     "a|1\nb|2\n-|3\n");
}

static void comments_and_unknown_fields(void **state)
{
    (void)state;
    check_all_splits(": keep-alive\n\nid: 7\nretry: 10\nfoo: bar\ndata: x\n: mid\n\n"
                     ":\n\n",
                     "-|x\n");
}

static void multi_line_data_and_spaces(void **state)
{
    (void)state;
    /* lines joined with \n; one space after the colon dropped, no more */
    check_all_splits("data: one\ndata:two\ndata:  three\ndata\n\n", "-|one\ntwo\n three\n\n");
}

static void bom_and_event_without_data(void **state)
{
    (void)state;
    check_all_splits("\xEF\xBB\xBF" "event: lonely\n\nevent: x\ndata: y\n\n", "x|y\n");
}

static void last_event_without_blank_line(void **state)
{
    (void)state;
    /* a server that closes right after the last data line; a partial
     * line at the very end is dropped */
    check_all_splits("data: a\n\ndata: b\ndata: par", "-|a\n-|b\n");
}

static void over_long_line_rejected(void **state)
{
    struct shim_buf out;
    char text[200];
    size_t cut;

    (void)state;
    memset(text, 'x', sizeof(text));
    memcpy(text, "data: ", 6);
    text[150] = '\n';
    text[151] = '\n';
    text[152] = '\0';
    for (cut = 0; cut <= 153; cut += 7) {
        shim_buf_init(&out, 1 << 16);
        assert_int_equal(parse(text, cut, 100, &out), -E2BIG);
        assert_null(out.data); /* nothing dispatched */
        shim_buf_free(&out);
    }
    /* a short comment right at the cap is fine */
    shim_buf_init(&out, 1 << 16);
    assert_int_equal(parse(":xxxxxxxx\ndata: ok\n\n", 100, 10, &out), 0);
    assert_string_equal(out.data, "-|ok\n");
    shim_buf_free(&out);
}

static void over_large_event_rejected(void **state)
{
    struct shim_buf out;

    (void)state;
    shim_buf_init(&out, 1 << 16);
    /* each line fits in 20 bytes; together the data does not */
    assert_int_equal(parse("data: 0123456789\ndata: 0123456789\n\n", 999, 20, &out), -E2BIG);
    shim_buf_free(&out);
}

static int stop_at_second(void *ctx, const char *name, const char *data, size_t len)
{
    int *n = ctx;
    (void)name;
    (void)data;
    (void)len;
    return ++*n == 2 ? 42 : 0;
}

static void callback_stops_the_parse(void **state)
{
    struct shim_sse p;
    int n = 0;

    (void)state;
    shim_sse_init(&p, 100, 100, stop_at_second, &n);
    assert_int_equal(shim_sse_feed(&p, "data: 1\n\ndata: 2\n\ndata: 3\n\n", 27), 42);
    assert_int_equal(shim_sse_feed(&p, "data: 4\n\n", 9), 42); /* sticky */
    assert_int_equal(n, 2);
    shim_sse_free(&p);
}

static int count(void *ctx, const char *name, const char *data, size_t len)
{
    (void)name;
    (void)data;
    *(size_t *)ctx += len;
    return 0;
}

/* 4 MB of one-byte feeds: linear (a quadratic parser would not finish). */
static void large_stream_byte_by_byte(void **state)
{
    struct shim_sse p;
    static const char ev[] = "data: 0123456789abcdef\n\n";
    size_t total = 0, i, k;

    (void)state;
    shim_sse_init(&p, 64, 64, count, &total);
    for (i = 0; i < (4u << 20) / (sizeof(ev) - 1); i++)
        for (k = 0; k < sizeof(ev) - 1; k++)
            assert_int_equal(shim_sse_feed(&p, ev + k, 1), 0);
    assert_int_equal(total, 16 * i);
    shim_sse_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(responses_framing),
        cmocka_unit_test(chat_framing_and_done),
        cmocka_unit_test(line_ends_crlf_cr_lf),
        cmocka_unit_test(comments_and_unknown_fields),
        cmocka_unit_test(multi_line_data_and_spaces),
        cmocka_unit_test(bom_and_event_without_data),
        cmocka_unit_test(last_event_without_blank_line),
        cmocka_unit_test(over_long_line_rejected),
        cmocka_unit_test(over_large_event_rejected),
        cmocka_unit_test(callback_stops_the_parse),
        cmocka_unit_test(large_stream_byte_by_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
