/* Unit tests: cstore.c, the containers codeshim issued and their files,
 * in a runtime directory of each test's own under TMPDIR (removed
 * afterwards): a container is its maker's only (another identity finds
 * none, as for an id never issued), files replace by path and are counted
 * against the file, identity and user budgets, a deletion leaves a
 * tombstone, and an idle container expires. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "scratch.h"
#include "store/cstore.h"
#include "system/config.h"

#define ME "11111111111111111111111111111111"
#define OTHER "22222222222222222222222222222222"
#define CID "cntr_0123456789abcdef0123456789abcdef"

static char g_dir[512];
static struct shim_config g_cfg;

static int setup(void **state)
{
    (void)state;
    if (scratch_make(g_dir, sizeof(g_dir), "cstore") < 0)
        return -1;
    scratch_runtime(&g_cfg, g_dir);
    return mkdir(g_cfg.runtime_dir, 0700);
}

static int teardown(void **state)
{
    (void)state;
    return scratch_remove(g_dir);
}

static void make(const char *identity, const char *cid, int minutes)
{
    struct shim_container c;

    memset(&c, 0, sizeof(c));
    snprintf(c.id, sizeof(c.id), "%s", cid);
    snprintf(c.name, sizeof(c.name), "box");
    c.minutes = minutes;
    assert_int_equal(shim_cstore_create(&g_cfg, identity, &c), 0);
    assert_true(c.created_at > 0 && c.last_active_at == c.created_at);
    assert_string_equal(c.memory_limit, "1g"); /* the default */
}

static int put(const char *identity, const char *path, const char *text, struct shim_cfile *f)
{
    return shim_cstore_put(&g_cfg, identity, CID, path, text, strlen(text), "user", f);
}

/* Found by its maker, with what was recorded; not by anyone else, nor an
 * id that is not codeshim's. */
static void a_container_is_its_makers_only(void **state)
{
    struct shim_container c, dup;
    (void)state;

    make(ME, CID, 20);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, CID, &c, 0), 0);
    assert_string_equal(c.id, CID);
    assert_string_equal(c.name, "box");
    assert_int_equal(c.minutes, 20);
    assert_int_equal(shim_cstore_find(&g_cfg, OTHER, CID, &c, 0), -ENOENT);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, "cntr_unknown", &c, 0), -ENOENT);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, "file-abc", &c, 0), -ENOENT);
    assert_int_equal(shim_cstore_issued(&g_cfg, CID), 1); /* whoever owns it */
    assert_int_equal(shim_cstore_issued(&g_cfg, "cntr_never"), 0);
    memset(&dup, 0, sizeof(dup));
    snprintf(dup.id, sizeof(dup.id), "%s", CID);
    assert_int_equal(shim_cstore_create(&g_cfg, OTHER, &dup), -EEXIST);
    snprintf(dup.id, sizeof(dup.id), "box_1");
    assert_int_equal(shim_cstore_create(&g_cfg, ME, &dup), -EINVAL);
}

/* A file at a path that is taken replaces it (a new id), once noticed;
 * its bytes read back whole; a removed file is gone. */
static void files_replace_by_path(void **state)
{
    struct shim_cfile a, b, meta, *v;
    char notice[256], *data;
    size_t n, len;
    (void)state;

    make(ME, CID, 20);
    assert_int_equal(put(ME, "/mnt/data/a.txt", "first", &a), 0);
    assert_int_equal(strncmp(a.id, "cfile_", 6), 0);
    assert_int_equal(a.bytes, 5);
    assert_int_equal(shim_cstore_take_notice(&g_cfg, ME, CID, notice, sizeof(notice)), 0);
    assert_string_equal(notice, ""); /* nothing was replaced */
    assert_int_equal(put(ME, "/mnt/data/a.txt", "second!", &b), 0);
    assert_string_not_equal(a.id, b.id);
    assert_int_equal(shim_cstore_take_notice(&g_cfg, ME, CID, notice, sizeof(notice)), 0);
    assert_non_null(strstr(notice, "/mnt/data/a.txt"));
    assert_int_equal(shim_cstore_take_notice(&g_cfg, ME, CID, notice, sizeof(notice)), 0);
    assert_string_equal(notice, ""); /* cleared by the call */
    assert_int_equal(shim_cstore_files(&g_cfg, ME, CID, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].id, b.id);
    free(v);
    assert_int_equal(shim_cstore_file(&g_cfg, ME, CID, b.id, &meta, &data, &len), 0);
    assert_int_equal(len, 7);
    assert_memory_equal(data, "second!", 7);
    assert_string_equal(meta.path, "/mnt/data/a.txt");
    assert_string_equal(meta.source, "user");
    free(data);
    assert_int_equal(shim_cstore_file(&g_cfg, ME, CID, a.id, &meta, NULL, NULL), -ENOENT);
    assert_int_equal(shim_cstore_file(&g_cfg, OTHER, CID, b.id, &meta, NULL, NULL), -ENOENT);
    assert_int_equal(shim_cstore_remove(&g_cfg, ME, CID, b.id), 0);
    assert_int_equal(shim_cstore_files(&g_cfg, ME, CID, &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
}

/* The file, identity and user budgets, each with its own answer. */
static void budgets_refuse_what_does_not_fit(void **state)
{
    struct shim_cfile f, *v;
    size_t n;
    (void)state;

    make(ME, CID, 20);
    g_cfg.file_max = 8;
    assert_int_equal(put(ME, "/mnt/data/big", "123456789", &f), -EFBIG);
    assert_int_equal(put(ME, "/mnt/data/ok", "12345678", &f), 0);
    g_cfg.files_disk = 12;
    assert_int_equal(put(ME, "/mnt/data/more", "12345", &f), -EDQUOT);
    /* a replacement is counted without the file it replaces */
    assert_int_equal(put(ME, "/mnt/data/ok", "abcdefgh", &f), 0);
    g_cfg.files_disk = 1 << 20;
    g_cfg.user_files_disk = 10;
    assert_int_equal(put(ME, "/mnt/data/more", "12345", &f), -ENOSPC);
    assert_int_equal(shim_cstore_files(&g_cfg, ME, CID, &v, &n), 0);
    assert_int_equal(n, 1); /* nothing refused was kept */
    assert_string_equal(v[0].path, "/mnt/data/ok");
    free(v);
}

/* A deleted container's files go and its id stays codeshim's. */
static void a_deletion_leaves_a_tombstone(void **state)
{
    struct shim_container c, *v;
    struct shim_cfile f;
    size_t n;
    (void)state;

    make(ME, CID, 20);
    assert_int_equal(put(ME, "/mnt/data/a", "x", &f), 0);
    assert_int_equal(shim_cstore_gone(&g_cfg, ME, CID), 0);
    assert_int_equal(shim_cstore_delete(&g_cfg, OTHER, CID, &c), -ENOENT);
    assert_int_equal(shim_cstore_delete(&g_cfg, ME, CID, &c), 0);
    assert_string_equal(c.name, "box");
    assert_int_equal(shim_cstore_find(&g_cfg, ME, CID, &c, 0), -ENOENT);
    assert_int_equal(shim_cstore_gone(&g_cfg, ME, CID), 1);
    assert_int_equal(shim_cstore_issued(&g_cfg, CID), 1);
    assert_int_equal(put(ME, "/mnt/data/b", "y", &f), -ENOENT);
    assert_int_equal(shim_cstore_list(&g_cfg, ME, &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
}

/* Idle past its minutes (meta's mtime is its last activity): expired,
 * and removed when next looked at. */
static void an_idle_container_expires(void **state)
{
    struct shim_container c;
    struct timespec ts[2];
    char pat[SHIM_PATH_MAX + 32];
    glob_t g;
    (void)state;

    make(ME, CID, 1);
    snprintf(pat, sizeof(pat), "%s/containers/*/meta", g_cfg.runtime_dir);
    assert_int_equal(glob(pat, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, 1);
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) - 59;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    assert_int_equal(utimensat(AT_FDCWD, g.gl_pathv[0], ts, 0), 0);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, CID, &c, 1), 0); /* not yet; touched */
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) - 120;
    assert_int_equal(utimensat(AT_FDCWD, g.gl_pathv[0], ts, 0), 0);
    globfree(&g);
    assert_int_equal(shim_cstore_gone(&g_cfg, ME, CID), 1);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, CID, &c, 0), -ENOENT);
}

/* Making a container reads no other record while a sweep is recent (a
 * request's cost must not grow with the store), and sweeps the expired
 * ones away once the last sweep is a minute old. */
static void making_one_sweeps_the_expired_a_minute_apart(void **state)
{
    struct timespec ts[2];
    char pat[SHIM_PATH_MAX + 32], mark[SHIM_PATH_MAX + 32], meta[SHIM_PATH_MAX + 64];
    struct stat st;
    glob_t g;
    (void)state;

    make(ME, CID, 1); /* the first make sweeps (there was no mark) */
    snprintf(mark, sizeof(mark), "%s/containers/.swept", g_cfg.runtime_dir);
    assert_int_equal(access(mark, F_OK), 0);
    snprintf(pat, sizeof(pat), "%s/containers/*/meta", g_cfg.runtime_dir);
    assert_int_equal(glob(pat, 0, NULL, &g), 0);
    snprintf(meta, sizeof(meta), "%s", g.gl_pathv[0]);
    globfree(&g);
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) - 120; /* CID has expired */
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    assert_int_equal(utimensat(AT_FDCWD, meta, ts, 0), 0);
    make(ME, "cntr_1111111111111111111111111111111111111111", 20);
    assert_int_equal(stat(meta, &st), 0);
    assert_int_equal(st.st_mtime, ts[0].tv_sec); /* the mark is recent: CID not read */
    assert_int_equal(utimensat(AT_FDCWD, mark, ts, 0), 0);
    make(ME, "cntr_2222222222222222222222222222222222222222", 20);
    assert_int_equal(stat(meta, &st), 0);
    assert_true(st.st_mtime > ts[0].tv_sec); /* swept: a tombstone now */
    assert_int_equal(shim_cstore_issued(&g_cfg, CID), 1);
    assert_int_equal(shim_cstore_find(&g_cfg, ME, CID, NULL, 0), -ENOENT);
}

/* Oldest first, the identity's own only; served once marked. */
static void lists_are_oldest_first(void **state)
{
    struct shim_container *v;
    size_t n;
    (void)state;

    make(ME, CID, 20);
    make(OTHER, "cntr_other", 20);
    make(ME, "cntr_second", 20);
    assert_int_equal(shim_cstore_list(&g_cfg, ME, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, CID);
    assert_string_equal(v[1].id, "cntr_second");
    free(v);
    assert_int_equal(shim_cstore_served(&g_cfg, ME, CID), 0);
    assert_int_equal(shim_cstore_served(&g_cfg, ME, CID), 1);
    assert_int_equal(shim_cstore_served(&g_cfg, ME, "cntr_second"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_container_is_its_makers_only, setup, teardown),
        cmocka_unit_test_setup_teardown(files_replace_by_path, setup, teardown),
        cmocka_unit_test_setup_teardown(budgets_refuse_what_does_not_fit, setup, teardown),
        cmocka_unit_test_setup_teardown(a_deletion_leaves_a_tombstone, setup, teardown),
        cmocka_unit_test_setup_teardown(an_idle_container_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(lists_are_oldest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(making_one_sweeps_the_expired_a_minute_apart, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
