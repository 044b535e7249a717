/* test_confile.c - shim/base/confile.c: the config file's shape, and every way
 * a file can be wrong giving a message with its line, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/confile.h"

static struct shim_confile f;
static char err[512];

static int parse(const char *text)
{
    return shim_confile_parse(text, strlen(text), &f, err, sizeof(err));
}

static void reads_default_and_sandboxes_in_order(void **state)
{
    (void)state;
    assert_int_equal(parse("# named sandboxes\n"
                           "default: small\n"
                           "sandboxes:\n"
                           "  small:\n"
                           "    backend: local\n"
                           "    memory: 512M\n"
                           "  cloud:\n"
                           "    backend: e2b\n"
                           "    api_key: \"os.environ/E2B_API_KEY\"\n"
                           "    selectable: true\n"),
                     0);
    assert_string_equal(f.default_name, "small");
    assert_int_equal(f.nsandboxes, 2);
    assert_string_equal(f.sandboxes[0].name, "small");
    assert_int_equal(f.sandboxes[0].line, 4);
    assert_string_equal(shim_confile_get(&f.sandboxes[0], "memory"), "512M");
    assert_int_equal(f.sandboxes[0].pairs[1].line, 6);
    assert_string_equal(shim_confile_get(&f.sandboxes[1], "api_key"), "os.environ/E2B_API_KEY");
    assert_string_equal(shim_confile_get(&f.sandboxes[1], "selectable"), "true");
    assert_null(shim_confile_get(&f.sandboxes[1], "memory"));
}

static void flow_style_is_yaml_too(void **state)
{
    (void)state;
    assert_int_equal(parse("{sandboxes: {a: {backend: local}}}"), 0);
    assert_int_equal(f.nsandboxes, 1);
    assert_string_equal(f.default_name, "");
}

/* Each bad file: -EINVAL and a message that names the line and the fault. */
static void bad_files_name_line_and_fault(void **state)
{
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "must be a map"},
        {"- a\n- b\n", "must be a map"},
        {"default: a\n", "no \"sandboxes\""},
        {"sandboxes: [a, b]\n", "must be a map of named sandboxes"},
        {"sandboxes:\n  a: local\n", "line 2: sandbox \"a\" must be a map"},
        {"sandboxes:\n  a:\n    memory: [1, 2]\n", "line 3: memory must be a single value"},
        {"sandboxes:\n  a:\n    memory: {x: 1}\n", "memory must be a single value"},
        {"sandboxes:\n  a:\n    memory: 1\n    memory: 2\n", "line 4: setting \"memory\" is given twice"},
        {"sandboxes:\n  a: {}\n  a: {}\n", "line 3: sandbox \"a\" is defined twice"},
        {"sandboxes:\n  \"\": {}\n", "name is empty"},
        {"default: a\ndefault: b\nsandboxes: {a: {}}\n", "line 2: \"default\" is given twice"},
        {"defaults: a\nsandboxes: {a: {}}\n", "unknown top-level key \"defaults\""},
        {"default: [a]\nsandboxes: {a: {}}\n", "default must be a single value"},
        {"sandboxes:\n  a:\n    memory: \"1\n", "line"},
        {"sandboxes: {a: {}}\n---\nsandboxes: {b: {}}\n", "more than one YAML document"},
        {"x: &m {backend: local}\nsandboxes:\n  a: *m\n", "aliases"},
        {"sandboxes:\n  a:\n    k: \"a\\0b\"\n", "NUL"},
    };
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse(bad[i].text);
        if (rc != -EINVAL || !strstr(err, bad[i].msg))
            fail_msg("file %zu: rc %d, message \"%s\", wanted \"%s\"", i, rc, err, bad[i].msg);
    }
}

static void limits_hold(void **state)
{
    char *text = malloc(SHIM_CONFILE_MAX_BYTES + 64), *p;
    int i;
    (void)state;

    assert_non_null(text);
    /* too many sandboxes */
    p = text + sprintf(text, "sandboxes:\n");
    for (i = 0; i <= SHIM_CONFILE_MAX_SANDBOXES; i++)
        p += sprintf(p, "  s%d: {}\n", i);
    assert_int_equal(parse(text), -EINVAL);
    assert_non_null(strstr(err, "more than 16 sandboxes"));
    /* too many settings */
    p = text + sprintf(text, "sandboxes:\n  a:\n");
    for (i = 0; i <= SHIM_CONFILE_MAX_KEYS; i++)
        p += sprintf(p, "    k%d: v\n", i);
    assert_int_equal(parse(text), -EINVAL);
    assert_non_null(strstr(err, "more than 32 settings"));
    /* a value too long */
    p = text + sprintf(text, "sandboxes:\n  a:\n    k: ");
    memset(p, 'x', SHIM_CONFILE_VALUE_MAX);
    strcpy(p + SHIM_CONFILE_VALUE_MAX, "\n");
    assert_int_equal(parse(text), -EINVAL);
    assert_non_null(strstr(err, "longer than 1023 bytes"));
    /* the whole file too big: refused before parsing */
    memset(text, '#', SHIM_CONFILE_MAX_BYTES + 1);
    assert_int_equal(shim_confile_parse(text, SHIM_CONFILE_MAX_BYTES + 1, &f, err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "larger than"));
    free(text);
}

/* Deep nesting and garbage: an error or a parse, never a crash. */
static void arbitrary_bytes_never_crash(void **state)
{
    char text[4096];
    unsigned seed = 7;
    int round, i, rc;
    (void)state;

    for (i = 0; i < 1000; i++)
        text[i] = '[';
    text[i] = '\0';
    assert_int_equal(parse(text), -EINVAL);
    for (round = 0; round < 300; round++) {
        static const char alphabet[] = "ab: -[]{}\n\"'&*!|>#%@,?\t\\0x";
        int n = (int)((seed = seed * 1103515245 + 12345) >> 16) % 200;
        for (i = 0; i < n; i++)
            text[i] = alphabet[((seed = seed * 1103515245 + 12345) >> 16) % (sizeof(alphabet) - 1)];
        rc = shim_confile_parse(text, (size_t)n, &f, err, sizeof(err));
        assert_true(rc == 0 || rc == -EINVAL);
        assert_true(rc == 0 || err[0]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_default_and_sandboxes_in_order),
        cmocka_unit_test(flow_style_is_yaml_too),
        cmocka_unit_test(bad_files_name_line_and_fault),
        cmocka_unit_test(limits_hold),
        cmocka_unit_test(arbitrary_bytes_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
