/* Unit tests: settings.c, the table of settings and its parser. Booleans
 * fail closed, bad values say the accepted range and the default used,
 * sizes take K/M/G everywhere, a bad backend is an error, and a misspelt
 * name finds its nearest setting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/text.h"
#include "system/config.h"
#include "system/settings.h"

struct env {
    const char *kv[16]; /* name, value, ..., NULL */
    char last[256];
    int warned;
};

static const char *lookup(const char *name, void *ctx)
{
    struct env *e = ctx;
    int i;

    for (i = 0; e->kv[i]; i += 2)
        if (!strcmp(e->kv[i], name))
            return e->kv[i + 1];
    return NULL;
}

static void warn(const char *msg, void *ctx)
{
    struct env *e = ctx;

    snprintf(e->last, sizeof(e->last), "%s", msg);
    e->warned++;
}

static void parse(struct shim_config *c, struct env *e)
{
    e->warned = 0;
    e->last[0] = '\0';
    shim_config_parse(c, lookup, warn, e);
}

static void booleans_take_every_spelling(void **state)
{
    static const char *const on[] = {"1", "true", "TRUE", "yes", "Yes", "on", "ON"};
    static const char *const off[] = {"0", "false", "False", "no", "NO", "off", "Off"};
    size_t i;
    (void)state;

    for (i = 0; i < 7; i++) {
        assert_int_equal(shim_setting_bool(on[i]), 1);
        assert_int_equal(shim_setting_bool(off[i]), 0);
    }
    assert_int_equal(shim_setting_bool("maybe"), -EINVAL);
    assert_int_equal(shim_setting_bool("disabled"), -EINVAL);
    assert_int_equal(shim_setting_bool(""), -EINVAL);
    assert_int_equal(shim_setting_bool("2"), -EINVAL);
    assert_int_equal(shim_setting_bool(NULL), -EINVAL);
}

/* The setting that runs model code on the host: only a readable "on"
 * turns isolation off. */
static void unsafe_no_isolation_fails_closed(void **state)
{
    static const char *const closed[] = {"off", "OFF", "no", "0", "false", "disabled",
                                         "maybe", "nope", "2", " 1"};
    struct shim_config c;
    struct env e = {{0}, "", 0};
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(closed) / sizeof(closed[0]); i++) {
        e.kv[0] = "CODESHIM_UNSAFE_NO_ISOLATION";
        e.kv[1] = closed[i];
        e.kv[2] = NULL;
        parse(&c, &e);
        assert_int_equal(c.unsafe_no_isolation, 0);
    }
    e.kv[1] = "maybe";
    parse(&c, &e);
    assert_int_equal(e.warned, 1);
    assert_string_equal(e.last, "CODESHIM_UNSAFE_NO_ISOLATION=maybe: not a boolean "
                                "(1/0, true/false, yes/no, on/off); isolation stays on");
    e.kv[1] = "on";
    parse(&c, &e);
    assert_int_equal(c.unsafe_no_isolation, 1);
    assert_int_equal(e.warned, 0);
}

static void other_booleans(void **state)
{
    struct shim_config c;
    struct env e = {{"CODESHIM_OFFLINE", "off", "CODESHIM_E2B_INTERNET", "nope",
                     "CODESHIM_SANDBOX_HOST", "yes", "CODESHIM_FORK_SERVER", "off",
                     "CODESHIM_DISABLE", "On", NULL},
                    "", 0};
    (void)state;

    parse(&c, &e);
    assert_int_equal(c.offline, 0);
    assert_int_equal(c.e2b_internet, 0); /* weakens isolation: fails closed */
    assert_int_equal(c.sandbox_host, 1);
    assert_int_equal(c.fork_server, 0);
    assert_int_equal(c.disabled, 1);
    assert_int_equal(e.warned, 1);
    assert_string_equal(e.last, "CODESHIM_E2B_INTERNET=nope: not a boolean "
                                "(1/0, true/false, yes/no, on/off); isolation stays on");
    e = (struct env){{"CODESHIM_SANDBOX_HOST", "maybe", NULL}, "", 0};
    parse(&c, &e);
    assert_int_equal(c.sandbox_host, 1);
    assert_string_equal(e.last, "CODESHIM_SANDBOX_HOST=maybe: not a boolean "
                                "(1/0, true/false, yes/no, on/off); using on");
}

static void bad_values_say_range_and_default(void **state)
{
    struct shim_config c;
    struct env e = {{"CODESHIM_EXEC_TIMEOUT", "-5", NULL}, "", 0};
    (void)state;

    parse(&c, &e);
    assert_int_equal(c.exec_timeout_s, 60);
    assert_string_equal(e.last, "CODESHIM_EXEC_TIMEOUT=-5: out of range 1..86400; using 60");
    e.kv[1] = " 5"; /* strtoll would take it */
    parse(&c, &e);
    assert_int_equal(c.exec_timeout_s, 60);
    e.kv[1] = "+5";
    parse(&c, &e);
    assert_int_equal(c.exec_timeout_s, 60);
    e.kv[1] = "soon";
    parse(&c, &e);
    assert_string_equal(e.last,
                        "CODESHIM_EXEC_TIMEOUT=soon: not a whole number 1..86400; using 60");
    e = (struct env){{"CODESHIM_MEMORY", "1M", NULL}, "", 0};
    parse(&c, &e);
    assert_true(c.memory_limit == 1ULL << 30);
    assert_string_equal(e.last, "CODESHIM_MEMORY=1M: out of range 64M..1T; using 1G");
    e = (struct env){{"CODESHIM_LOG", "loud", NULL}, "", 0};
    parse(&c, &e);
    assert_int_equal(c.log_level, SHIM_LOG_WARN);
    assert_string_equal(e.last,
                        "CODESHIM_LOG=loud: not one of error|warn|info|debug; using warn");
    e = (struct env){{"CODESHIM_SESSIOND", "rel/path", NULL}, "", 0};
    parse(&c, &e);
    assert_string_equal(c.sessiond, "");
    assert_int_equal(e.warned, 1);
}

/* Every byte-sized setting reads K/M/G the same way. */
static void sizes_take_suffixes(void **state)
{
    struct shim_config c;
    struct env e = {{"CODESHIM_OUTPUT_CAP", "64K", "CODESHIM_MAX_REQUEST", "8M",
                     "CODESHIM_MAX_RESPONSE", "1G", "CODESHIM_FILE_MAX", "2MiB",
                     "CODESHIM_FILES_DISK", "3gb", "CODESHIM_DISK", "512m", NULL},
                    "", 0};
    size_t i, sizes = 0;
    (void)state;

    parse(&c, &e);
    assert_int_equal(e.warned, 0);
    assert_true(c.output_cap == 64 << 10);
    assert_true(c.max_request == 8 << 20);
    assert_true(c.max_response == 1 << 30);
    assert_true(c.file_max == 2 << 20);
    assert_true(c.files_disk == 3ULL << 30);
    assert_true(c.disk_limit == 512ULL << 20);
    e = (struct env){{"CODESHIM_OUTPUT_CAP", "20M", NULL}, "", 0};
    parse(&c, &e);
    assert_string_equal(e.last, "CODESHIM_OUTPUT_CAP=20M: out of range 256..10M; using 20000");
    e = (struct env){{"CODESHIM_FILE_MAX", "99999999999999999999T", NULL}, "", 0};
    parse(&c, &e);
    assert_true(c.file_max == 100 << 20);
    for (i = 0; i < shim_nsettings; i++)
        sizes += shim_settings[i].kind == SHIM_SET_SIZE;
    assert_int_equal(sizes, 9);
}

/* A bad backend is no silent fall-back: the field is left empty, and
 * requests that would run code answer the error (config.c). */
static void bad_backend_is_an_error(void **state)
{
    struct shim_config c;
    struct env e = {{"CODESHIM_SANDBOX", "e2bb", NULL}, "", 0};
    (void)state;

    parse(&c, &e);
    assert_string_equal(c.sandbox, "");
    assert_string_equal(e.last, "CODESHIM_SANDBOX=e2bb: not one of local|e2b; requests that "
                                "would run code fail until it is fixed");
    e.kv[1] = "E2B";
    parse(&c, &e);
    assert_string_equal(c.sandbox, "e2b");
    e.kv[0] = NULL;
    parse(&c, &e);
    assert_string_equal(c.sandbox, "local");
}

static void secrets_are_never_echoed(void **state)
{
    static char long_key[400];
    struct shim_config c;
    struct env e = {{"CODESHIM_E2B_API_KEY", "e2b_first", "E2B_API_KEY", "e2b_second", NULL},
                    "", 0};
    (void)state;

    parse(&c, &e);
    assert_string_equal(c.e2b_api_key, "e2b_first");
    e.kv[0] = "OTHER";
    parse(&c, &e);
    assert_string_equal(c.e2b_api_key, "e2b_second");
    memset(long_key, 'k', sizeof(long_key) - 1);
    e = (struct env){{"E2B_API_KEY", long_key, NULL}, "", 0};
    parse(&c, &e);
    assert_string_equal(c.e2b_api_key, "");
    assert_int_equal(e.warned, 1);
    assert_null(strstr(e.last, "kkkk"));
}

static void misspelt_names_find_their_setting(void **state)
{
    (void)state;
    assert_string_equal(shim_setting_closest("CODESHIM_OFLINE"), "CODESHIM_OFFLINE");
    assert_string_equal(shim_setting_closest("CODESHIM_EXEC_TIMOUT"), "CODESHIM_EXEC_TIMEOUT");
    assert_string_equal(shim_setting_closest("codeshim_sandbox"), "CODESHIM_SANDBOX");
    assert_null(shim_setting_closest("CODESHIM_SOMETHING_ELSE_ENTIRELY"));
    assert_true(shim_setting_known("CODESHIM_OFFLINE"));
    assert_true(shim_setting_known("CODESHIM_LIB"));
    assert_false(shim_setting_known("CODESHIM_OFLINE"));
    assert_int_equal(shim_text_distance("kitten", "sitting", 5), 3);
    assert_int_equal(shim_text_distance("abc", "abc", 0), 0);
    assert_int_equal(shim_text_distance("abc", "xyz", 1), 2);
}

/* The table is whole: every row names a variable, a field and help, and
 * the launcher's checks see the same ranges as the parser. */
static void the_table_is_whole(void **state)
{
    char why[256];
    size_t i;
    (void)state;

    for (i = 0; i < shim_nsettings; i++) {
        const struct shim_setting *s = &shim_settings[i];
        assert_non_null(s->help);
        assert_true(s->size > 0 && s->offset + s->size <= sizeof(struct shim_config));
        assert_ptr_equal(shim_setting_find(s->var), s); /* each name once */
    }
    assert_int_equal(shim_setting_check(shim_setting_find("CODESHIM_MAX_LOOPS"), "1000", why,
                                        sizeof(why)), 0);
    assert_int_equal(shim_setting_check(shim_setting_find("CODESHIM_MAX_LOOPS"), "1001", why,
                                        sizeof(why)), -EINVAL);
    assert_string_equal(why, "CODESHIM_MAX_LOOPS=1001: out of range 1..1000; using 10");
}

/* A word setting's value in any case names the word as the table spells
 * it; anything else, or a setting of another kind, is -EINVAL. */
static void words_are_named_as_the_table_spells_them(void **state)
{
    char w[16];
    (void)state;

    assert_int_equal(shim_setting_word(shim_setting_find("CODESHIM_LOG"), "DeBuG", w,
                                       sizeof(w)), 3);
    assert_string_equal(w, "debug");
    assert_int_equal(shim_setting_word(shim_setting_find("CODESHIM_SANDBOX"), "E2B", w,
                                       sizeof(w)), 1);
    assert_string_equal(w, "e2b");
    assert_int_equal(shim_setting_word(shim_setting_find("CODESHIM_LOG"), "deb", w, sizeof(w)),
                     -EINVAL);
    assert_int_equal(shim_setting_word(shim_setting_find("CODESHIM_LOG"), "", w, sizeof(w)),
                     -EINVAL);
    assert_int_equal(shim_setting_word(shim_setting_find("CODESHIM_MAX_LOOPS"), "1", w,
                                       sizeof(w)), -EINVAL);
}

/* The launcher's options come from the table: each name once, a value
 * placeholder for all but booleans, and only kinds the launcher reads. */
static void launcher_options_are_rows_of_the_table(void **state)
{
    size_t i, j, n = 0;
    (void)state;

    for (i = 0; i < shim_nsettings; i++) {
        const struct shim_setting *s = &shim_settings[i];
        if (!s->option) {
            assert_null(s->arg);
            continue;
        }
        n++;
        assert_true(s->kind == SHIM_SET_BOOL || s->kind == SHIM_SET_NUM ||
                    s->kind == SHIM_SET_SIZE || s->kind == SHIM_SET_WORD ||
                    s->kind == SHIM_SET_LEVEL || s->kind == SHIM_SET_STR);
        assert_true((s->kind == SHIM_SET_BOOL) == (s->arg == NULL));
        assert_true(!s->option_program || s->kind == SHIM_SET_STR);
        for (j = 0; j < i; j++)
            assert_false(shim_settings[j].option && !strcmp(shim_settings[j].option, s->option));
    }
    assert_int_equal(n, 11);
    assert_string_equal(shim_setting_find("CODESHIM_EXEC_TIMEOUT")->option, "timeout");
}

/* The CODESHIM_CONFIG keys are rows of the table: each once, each the
 * variable whose values it takes. */
static void file_keys_are_rows_of_the_table(void **state)
{
    size_t i, j, n = 0;
    (void)state;

    for (i = 0; i < shim_nsettings; i++) {
        const char *k = shim_settings[i].file_key;
        if (!k)
            continue;
        n++;
        assert_ptr_equal(shim_setting_by_file_key(k), &shim_settings[i]);
        for (j = 0; j < i; j++)
            assert_false(shim_settings[j].file_key && !strcmp(shim_settings[j].file_key, k));
    }
    assert_int_equal(n, 18);
    assert_string_equal(shim_setting_by_file_key("timeout")->var, "CODESHIM_EXEC_TIMEOUT");
    assert_string_equal(shim_setting_by_file_key("backend")->var, "CODESHIM_SANDBOX");
    assert_string_equal(shim_setting_by_file_key("api_key")->var, "CODESHIM_E2B_API_KEY");
    assert_null(shim_setting_by_file_key("selectable")); /* config.c's own */
    assert_null(shim_setting_by_file_key("log"));
    assert_null(shim_setting_by_file_key("warm_spare")); /* removed: the host pools */
    assert_null(shim_setting_by_file_key(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(booleans_take_every_spelling),
        cmocka_unit_test(unsafe_no_isolation_fails_closed),
        cmocka_unit_test(other_booleans),
        cmocka_unit_test(bad_values_say_range_and_default),
        cmocka_unit_test(sizes_take_suffixes),
        cmocka_unit_test(bad_backend_is_an_error),
        cmocka_unit_test(secrets_are_never_echoed),
        cmocka_unit_test(misspelt_names_find_their_setting),
        cmocka_unit_test(the_table_is_whole),
        cmocka_unit_test(words_are_named_as_the_table_spells_them),
        cmocka_unit_test(launcher_options_are_rows_of_the_table),
        cmocka_unit_test(file_keys_are_rows_of_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
