/* Unit tests: yamljson.c (YAML to a bounded cJSON tree) and script.c
 * (the scripted model's turns: parsing, errors, which turn answers). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/script.h"
#include "base/yamljson.h"

static cJSON *yaml(const char *text, char *err)
{
    return shim_yaml_to_json(text, strlen(text), err, 256);
}

static void yaml_scalars_lists_and_maps(void **state)
{
    char err[256];
    cJSON *d = yaml("a: 1\nb: true\nc: ~\nd: '7'\ne: [x, 2]\nf: {g: h}\ni: 1.5\n", err);
    char *t;
    (void)state;

    assert_non_null(d);
    t = cJSON_PrintUnformatted(d);
    assert_string_equal(t, "{\"a\":1,\"b\":true,\"c\":null,\"d\":\"7\",\"e\":[\"x\",2],"
                           "\"f\":{\"g\":\"h\"},\"i\":\"1.5\"}");
    free(t);
    cJSON_Delete(d);
}

static void yaml_refuses_what_it_cannot_read(void **state)
{
    static const char *const bad[][2] = {
        {"a: 1\na: 2\n", "line 2: a key given twice"},
        {"a: &x 1\nb: *x\n", "alias"},
        {"a: 1\n---\nb: 2\n", "a second document"},
        {"[1, 2\n", "line "},
        {"", "an empty file"},
        {"? [1]\n: 2\n", "a key that is not a plain word"},
    };
    char err[256];
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(yaml(bad[i][0], err));
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err);
    }
}

static void yaml_is_bounded(void **state)
{
    char *deep = malloc(200), *wide = malloc(200000), err[256];
    size_t n = 0, i;
    (void)state;

    for (i = 0; i < 40; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    assert_null(yaml(deep, err));
    assert_non_null(strstr(err, "nested too deep"));
    n = 0;
    wide[n++] = '[';
    for (i = 0; i < 30000; i++) {
        wide[n++] = '0';
        wide[n++] = ',';
    }
    wide[n++] = ']';
    wide[n] = '\0';
    assert_null(yaml(wide, err));
    assert_non_null(strstr(err, "too many values"));
    free(deep);
    free(wide);
}

static struct shim_script *script(const char *text, char *err)
{
    cJSON *d = yaml(text, err);
    struct shim_script *s = NULL;

    assert_non_null(d);
    if (shim_script_parse(d, &s, err, 256) < 0)
        s = NULL;
    cJSON_Delete(d);
    return s;
}

static void turns_are_taken_by_match_then_in_order(void **state)
{
    char err[256];
    struct shim_script *s = script("turns:\n  - match: weather\n    call: {name: w, arguments: "
                                   "{city: Rome}}\n  - run: [\"a = 1\", \"print(a)\"]\n"
                                   "  - say: done\n    delay_ms: 5\n",
                                   err);
    size_t i;
    (void)state;

    assert_non_null(s);
    assert_int_equal(shim_script_take(s, "hello", &i), 0);
    assert_int_equal(i, 1); /* turn 0 waits for its match */
    assert_int_equal(cJSON_GetArraySize(s->turns[1].codes), 2);
    assert_int_equal(shim_script_take(s, "the weather?", &i), 0);
    assert_int_equal(i, 0);
    assert_string_equal(s->turns[0].call_name, "w");
    assert_string_equal(s->turns[0].call_args, "{\"city\":\"Rome\"}");
    assert_int_equal(shim_script_take(s, "x", &i), 0);
    assert_int_equal(i, 2);
    assert_int_equal(s->turns[2].delay_ms, 5);
    assert_int_equal(shim_script_take(s, "x", &i), -ENOENT);
    shim_script_free(s);
}

static void errors_and_cuts(void **state)
{
    char err[256];
    struct shim_script *s = script("- status: 429\n  retry_after: 3\n  error: slow\n"
                                   "- cut: true\n",
                                   err);
    (void)state;

    assert_non_null(s);
    assert_int_equal(s->turns[0].status, 429);
    assert_int_equal(s->turns[0].retry_after, 3);
    assert_string_equal(s->turns[0].error, "slow");
    assert_true(s->turns[1].cut);
    assert_int_equal(s->turns[1].retry_after, -1);
    shim_script_free(s);
}

static void bad_scripts_name_the_turn_and_key(void **state)
{
    static const char *const bad[][2] = {
        {"- run: x\n  colour: blue\n", "turn 1: unknown key \"colour\""},
        {"- say: a\n- status: 700\n", "turn 2: status must be a whole number in 400..599"},
        {"- match: \"(\"\n  say: x\n", "turn 1: match:"},
        {"- {}\n", "turn 1: says nothing"},
        {"- cut: yes\n", "turn 1: cut must be true or false"},
        {"- status: 500\n  run: x\n", "an error or a cut answers nothing else"},
        {"- call: {arguments: {}}\n", "call must be a map with a name"},
        {"- run: [1]\n", "run must be code"},
        {"turns: []\n", "no turns"},
        {"a: b\n", "no turns"},
        {"- delay_ms: 999999\n  say: x\n", "delay_ms must be a whole number in 0..60000"},
    };
    char err[256];
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(script(bad[i][0], err));
        if (!strstr(err, bad[i][1]))
            fail_msg("%s: %s", bad[i][0], err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(yaml_scalars_lists_and_maps),
        cmocka_unit_test(yaml_refuses_what_it_cannot_read),
        cmocka_unit_test(yaml_is_bounded),
        cmocka_unit_test(turns_are_taken_by_match_then_in_order),
        cmocka_unit_test(errors_and_cuts),
        cmocka_unit_test(bad_scripts_name_the_turn_and_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
