/* test_cite.c - shim/api/cite.c: finding sandbox:/mnt/data links in text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cite.h"

static struct shim_cite c[8];

static size_t find(const char *t)
{
    memset(c, 0, sizeof(c));
    return shim_cite_find(t, strlen(t), c, 8);
}

static void markdown_link_spans_the_whole_link(void **state)
{
    const char *t = "Here: [the chart](sandbox:/mnt/data/plot.png) and "
                    "![img](sandbox:/mnt/data/a%20b.csv).";
    (void)state;
    assert_int_equal(find(t), 2);
    assert_string_equal(c[0].name, "plot.png");
    assert_int_equal(c[0].start, 6);
    assert_int_equal(c[0].end, strlen("Here: [the chart](sandbox:/mnt/data/plot.png)"));
    assert_string_equal(c[1].name, "a b.csv");
    assert_int_equal(c[1].start, strchr(t, '!') - t);
    assert_int_equal(c[1].end, strlen(t) - 1);
}

static void bare_link_drops_sentence_punctuation(void **state)
{
    (void)state;
    assert_int_equal(find("Saved to sandbox:/mnt/data/out.csv."), 1);
    assert_string_equal(c[0].name, "out.csv");
    assert_int_equal(c[0].start, 9);
    assert_int_equal(c[0].end, 9 + strlen("sandbox:/mnt/data/out.csv"));
    assert_int_equal(find("(see `sandbox:/mnt/data/x.txt`)"), 1);
    assert_string_equal(c[0].name, "x.txt");
}

static void indices_count_characters_not_bytes(void **state)
{
    const char *t = "d\xc3\xa9j\xc3\xa0 \xf0\x9f\x98\x80 [f](sandbox:/mnt/data/\xc3\xa9.csv)";
    (void)state;
    assert_int_equal(find(t), 1);
    assert_int_equal(c[0].start, 7); /* d é j à ␠ 😀 ␠ */
    assert_int_equal(c[0].end, 7 + strlen("[f](sandbox:/mnt/data/") + 1 + strlen(".csv)"));
    assert_string_equal(c[0].name, "\xc3\xa9.csv");
}

static void unsafe_or_empty_names_are_skipped(void **state)
{
    (void)state;
    assert_int_equal(find("sandbox:/mnt/data/ and sandbox:/mnt/data/../etc/passwd "
                          "[x](sandbox:/mnt/data/a/./b) sandbox:/mnt/data/%2e%2e/x "
                          "sandbox:/mnt/data/a%00b sandbox:/mnt/data/a%0Ab "
                          "[u](sandbox:/mnt/data/unclosed"),
                     0);
    assert_int_equal(find("sandbox:/mnt/data/sub/ok.txt"), 1);
    assert_string_equal(c[0].name, "sub/ok.txt");
}

static void at_most_max_and_linear_on_many_links(void **state)
{
    size_t n = 200000, i, len = 0, got;
    char *t = malloc(n * 40);
    struct shim_cite *many = calloc(100000, sizeof(*many));
    (void)state;

    for (i = 0; i < n; i++)
        len += (size_t)sprintf(t + len, "](sandbox:/mnt/data/%zu) ", i % 10);
    got = shim_cite_find(t, len, many, 100000);
    assert_int_equal(got, 100000); /* no '[': each is a bare link */
    assert_int_equal(find("sandbox:/mnt/data/a sandbox:/mnt/data/b sandbox:/mnt/data/c "
                          "sandbox:/mnt/data/d sandbox:/mnt/data/e sandbox:/mnt/data/f "
                          "sandbox:/mnt/data/g sandbox:/mnt/data/h sandbox:/mnt/data/i"),
                     8);
    free(many);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(markdown_link_spans_the_whole_link),
        cmocka_unit_test(bare_link_drops_sentence_punctuation),
        cmocka_unit_test(indices_count_characters_not_bytes),
        cmocka_unit_test(unsafe_or_empty_names_are_skipped),
        cmocka_unit_test(at_most_max_and_linear_on_many_links),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
