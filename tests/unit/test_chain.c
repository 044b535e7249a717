/* Unit tests: chain.c, continuing by id (chain.h): save then apply for
 * the same identity, nothing for another, the owed outputs first, private
 * files, pruning after a day, and entries that cannot be used. Each test
 * has its own runtime directory under TMPDIR, given through a struct
 * shim_config filled here, and removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "api/identity.h"
#include "base/json.h"
#include "scratch.h"
#include "store/chain.h"
#include "system/config.h"

static char g_dir[512];
static struct shim_config g_cfg;
static char g_alice[SHIM_IDENTITY_SIZE], g_bob[SHIM_IDENTITY_SIZE];

static int setup(void **state)
{
    (void)state;
    if (scratch_make(g_dir, sizeof(g_dir), "chain") < 0)
        return -1;
    scratch_runtime(&g_cfg, g_dir);
    shim_identity_key("sk-alice", g_alice);
    shim_identity_key("sk-bob", g_bob);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return scratch_remove(g_dir);
}

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static void assert_json(const cJSON *got, const char *want)
{
    cJSON *w = J(want);
    if (!cJSON_Compare(got, w, 1)) {
        char *g = cJSON_PrintUnformatted(got);
        print_error("got  %s\nwant %s\n", g, want);
        free(g);
    }
    assert_true(cJSON_Compare(got, w, 1));
    cJSON_Delete(w);
}

/* The identity's directory and its one entry file (path into entry). */
static void identity_dir(char *out, size_t n, const char *identity)
{
    snprintf(out, n, "%s/rt/%s", g_dir, identity);
}

static int entries(const char *identity, char *entry, size_t n)
{
    char dir[700];
    DIR *d;
    struct dirent *e;
    int k = 0;

    identity_dir(dir, sizeof(dir), identity);
    if (!(d = opendir(dir)))
        return 0;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "r-", 2))
            continue;
        if (entry)
            snprintf(entry, n, "%s/%.100s", dir, e->d_name);
        k++;
    }
    closedir(d);
    return k;
}

/* Request continuing from prev with input (JSON text, may be NULL). */
static cJSON *continuing(const char *prev, const char *input)
{
    cJSON *up = cJSON_CreateObject();

    cJSON_AddStringToObject(up, "model", "gpt-test");
    if (prev)
        cJSON_AddStringToObject(up, "previous_response_id", prev);
    if (input)
        cJSON_AddItemToObject(up, "input", J(input));
    return up;
}

/* apply must leave up exactly as it was. */
static void assert_untouched(const char *identity, cJSON *up)
{
    cJSON *before = cJSON_Duplicate(up, 1);

    assert_int_equal(shim_chain_apply(&g_cfg, identity, up), 0);
    assert_true(cJSON_Compare(up, before, 1));
    cJSON_Delete(before);
}

static void backdate(const char *path, long seconds)
{
    struct timeval tv[2];

    tv[0].tv_sec = tv[1].tv_sec = time(NULL) - seconds;
    tv[0].tv_usec = tv[1].tv_usec = 0;
    assert_int_equal(utimes(path, tv), 0);
}

/* ---- the promise ---- */

static void continues_from_the_upstream_id(void **state)
{
    const char *input = "[{\"role\":\"user\",\"content\":\"and now?\"}]";
    cJSON *up;
    (void)state;

    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_answer", "resp_last", NULL), 0);
    up = continuing("resp_answer", input);
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_string_equal(shim_json_str(up, "previous_response_id"), "resp_last");
    assert_json(cJSON_GetObjectItem(up, "input"), input); /* nothing owed */
    assert_string_equal(shim_json_str(up, "model"), "gpt-test");
    cJSON_Delete(up);

    /* the entry stays: a retried request continues the same way */
    up = continuing("resp_answer", "\"again\"");
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_string_equal(shim_json_str(up, "previous_response_id"), "resp_last");
    assert_json(cJSON_GetObjectItem(up, "input"), "\"again\"");
    cJSON_Delete(up);

    /* saving the answer again replaces its entry */
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_answer", "resp_newer", NULL), 0);
    assert_int_equal(entries(g_alice, NULL, 0), 1);
    up = continuing("resp_answer", NULL);
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_string_equal(shim_json_str(up, "previous_response_id"), "resp_newer");
    assert_null(cJSON_GetObjectItem(up, "input"));
    cJSON_Delete(up);
}

static void owed_outputs_come_first(void **state)
{
    const char *owed = "[{\"type\":\"function_call_output\",\"call_id\":\"call_ci\","
                       "\"output\":\"42\\n\"}]";
    cJSON *outs = J(owed), *up;
    (void)state;

    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_a", "resp_u", outs), 0);
    cJSON_Delete(outs); /* save kept its own copy */

    /* an input list: the owed outputs, then the program's items in order */
    up = continuing("resp_a", "[{\"type\":\"function_call_output\",\"call_id\":\"call_prog\","
                              "\"output\":\"sunny\"},{\"role\":\"user\",\"content\":\"ok\"}]");
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_string_equal(shim_json_str(up, "previous_response_id"), "resp_u");
    assert_json(cJSON_GetObjectItem(up, "input"),
                "[{\"type\":\"function_call_output\",\"call_id\":\"call_ci\",\"output\":\"42\\n\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"call_prog\",\"output\":\"sunny\"},"
                "{\"role\":\"user\",\"content\":\"ok\"}]");
    cJSON_Delete(up);

    /* a string input becomes a user message after them */
    up = continuing("resp_a", "\"thanks\"");
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_json(cJSON_GetObjectItem(up, "input"),
                "[{\"type\":\"function_call_output\",\"call_id\":\"call_ci\",\"output\":\"42\\n\"},"
                "{\"role\":\"user\",\"content\":\"thanks\"}]");
    cJSON_Delete(up);

    /* no input: just what is owed */
    up = continuing("resp_a", NULL);
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_json(cJSON_GetObjectItem(up, "input"), owed);
    cJSON_Delete(up);
}

static void another_identity_gets_nothing(void **state)
{
    char anon[SHIM_IDENTITY_SIZE];
    cJSON *up, *outs;
    (void)state;

    shim_identity_key(NULL, anon);
    outs = J("[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"secret\"}]");
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_private", "resp_u", outs), 0);
    cJSON_Delete(outs);
    up = continuing("resp_private", "[{\"role\":\"user\",\"content\":\"hi\"}]");
    assert_untouched(g_bob, up);
    assert_untouched(anon, up);
    assert_int_equal(entries(g_bob, NULL, 0), 0);
    /* and alice still has it */
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    cJSON_Delete(up);
}

static void nothing_to_continue(void **state)
{
    cJSON *up;
    (void)state;

    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_known", "resp_u", NULL), 0);
    up = continuing(NULL, "\"no id\"");
    assert_untouched(g_alice, up);
    cJSON_Delete(up);
    up = continuing("resp_unknown", "\"other id\"");
    assert_untouched(g_alice, up);
    cJSON_Delete(up);
    up = J("{\"previous_response_id\":7,\"input\":\"not a string id\"}");
    assert_untouched(g_alice, up);
    cJSON_Delete(up);
    /* ids are required to save */
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, NULL, "resp_u", NULL), -EINVAL);
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_x", NULL, NULL), -EINVAL);
    assert_int_equal(entries(g_alice, NULL, 0), 1);
}

/* ---- where and how entries live ---- */

static void entries_are_private_to_the_user(void **state)
{
    char dir[700], entry[1024], *text;
    struct stat st;
    mode_t old;
    FILE *f;
    long n;
    size_t i;
    int rc;
    (void)state;

    old = umask(0); /* a permissive umask does not open them up */
    rc = shim_chain_save(&g_cfg, g_alice, "resp_mode", "resp_u", NULL);
    umask(old);
    assert_int_equal(rc, 0);
    identity_dir(dir, sizeof(dir), g_alice);
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(entries(g_alice, entry, sizeof(entry)), 1);
    assert_int_equal(lstat(entry, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    /* r-<hash>: the answer id is not the name */
    assert_null(strstr(entry, "resp_mode"));
    for (i = strlen(dir) + 3; entry[i]; i++)
        assert_non_null(strchr("0123456789abcdef", entry[i]));
    f = fopen(entry, "r");
    assert_non_null(f);
    text = calloc(1, 4096);
    assert_non_null(text);
    n = (long)fread(text, 1, 4095, f);
    fclose(f);
    assert_true(n > 0);
    assert_non_null(strstr(text, "resp_u"));
    free(text);
}

/* A runtime directory others can read is refused, not used. */
static void a_shared_runtime_dir_is_refused(void **state)
{
    char rt[600];
    cJSON *up, *before;
    (void)state;

    snprintf(rt, sizeof(rt), "%s/rt", g_dir);
    assert_int_equal(mkdir(rt, 0700), 0);
    assert_int_equal(chmod(rt, 0755), 0);
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_a", "resp_u", NULL), -EPERM);
    assert_int_equal(entries(g_alice, NULL, 0), 0);
    up = continuing("resp_a", "\"hi\"");
    before = cJSON_Duplicate(up, 1);
    /* a continuation cannot be looked up: refused (the request answers
     * why), never passed on as if the id were the upstream's */
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), -ENOLINK);
    assert_true(cJSON_Compare(up, before, 1));
    cJSON_Delete(before);
    cJSON_Delete(up);
}

/* chain.h: entries are pruned after a day (when new ones are written). */
static void entries_older_than_a_day_are_pruned(void **state)
{
    char old_entry[1024], dir[700], keep[1024];
    struct stat st;
    cJSON *up;
    (void)state;

    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_old", "resp_u1", NULL), 0);
    assert_int_equal(entries(g_alice, old_entry, sizeof(old_entry)), 1);
    backdate(old_entry, 2 * 24 * 3600);
    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_recent", "resp_u2", NULL), 0);
    assert_int_equal(entries(g_alice, keep, sizeof(keep)), 1);
    assert_int_equal(lstat(old_entry, &st), -1);
    up = continuing("resp_old", "\"hi\"");
    assert_untouched(g_alice, up);
    cJSON_Delete(up);

    /* an hour is well within the day; other files are not entries */
    backdate(keep, 3600);
    identity_dir(dir, sizeof(dir), g_alice);
    {
        char other[1024];
        FILE *f;
        snprintf(other, sizeof(other), "%s/not-an-entry", dir);
        f = fopen(other, "w");
        assert_non_null(f);
        fclose(f);
        backdate(other, 3 * 24 * 3600);
        assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_third", "resp_u3", NULL), 0);
        assert_int_equal(lstat(other, &st), 0);
    }
    assert_int_equal(entries(g_alice, NULL, 0), 2);
    up = continuing("resp_recent", "\"hi\"");
    assert_int_equal(shim_chain_apply(&g_cfg, g_alice, up), 1);
    assert_string_equal(shim_json_str(up, "previous_response_id"), "resp_u2");
    cJSON_Delete(up);
}

/* An entry that is not what save writes is ignored, never half-applied. */
static void unusable_entries_change_nothing(void **state)
{
    static const char *const bad[] = {
        "", "not json", "{\"outputs\":[{\"type\":\"function_call_output\"}]}",
        "{\"upstream_id\":42,\"outputs\":[]}", "[\"resp_u\"]",
    };
    char entry[1024];
    cJSON *up;
    size_t i;
    FILE *f;
    (void)state;

    assert_int_equal(shim_chain_save(&g_cfg, g_alice, "resp_bad", "resp_u", NULL), 0);
    assert_int_equal(entries(g_alice, entry, sizeof(entry)), 1);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        f = fopen(entry, "w");
        assert_non_null(f);
        fputs(bad[i], f);
        fclose(f);
        up = continuing("resp_bad", "[{\"role\":\"user\",\"content\":\"hi\"}]");
        assert_untouched(g_alice, up);
        cJSON_Delete(up);
    }
    /* a link in its place is not followed */
    {
        char target[700];
        snprintf(target, sizeof(target), "%s/elsewhere", g_dir);
        f = fopen(target, "w");
        assert_non_null(f);
        fputs("{\"upstream_id\":\"resp_planted\",\"outputs\":[]}", f);
        fclose(f);
        assert_int_equal(unlink(entry), 0);
        assert_int_equal(symlink(target, entry), 0);
        up = continuing("resp_bad", "\"hi\"");
        assert_untouched(g_alice, up);
        cJSON_Delete(up);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(continues_from_the_upstream_id),
        T(owed_outputs_come_first),
        T(another_identity_gets_nothing),
        T(nothing_to_continue),
        T(entries_are_private_to_the_user),
        T(a_shared_runtime_dir_is_refused),
        T(entries_older_than_a_day_are_pruned),
        T(unusable_entries_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
