/* Unit tests: store.c, the private runtime directory, in a scratch
 * directory of each test's own under TMPDIR (removed afterwards): a
 * directory is private only as a real 0700 directory of this user, and a
 * refusal says why; files are written whole with mode 0600; the lock
 * excludes a second taker; a process removes only the file it made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"
#include "store/store.h"
#include "system/config.h"

static char g_dir[512];

static int setup(void **state)
{
    (void)state;
    return scratch_make(g_dir, sizeof(g_dir), "store");
}

static int teardown(void **state)
{
    (void)state;
    return scratch_remove(g_dir);
}

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_dir, name);
}

/* Made 0700 when missing; a directory others may enter, a symlink to a
 * private one, or a file is refused, with the path in the reason. */
static void only_a_private_directory_will_do(void **state)
{
    char p[600], q[600];
    struct stat st;
    (void)state;

    path(p, sizeof(p), "new");
    assert_int_equal(shim_store_private_dir(p), 0);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    assert_int_equal(shim_store_private_dir(p), 0); /* again: already fine */
    path(q, sizeof(q), "open");
    assert_int_equal(mkdir(q, 0700), 0);
    assert_int_equal(chmod(q, 0755), 0);
    assert_int_equal(shim_store_private_dir(q), -EPERM);
    assert_non_null(strstr(shim_store_why(), q));
    assert_non_null(strstr(shim_store_why(), "CODESHIM_RUNTIME_DIR"));
    path(q, sizeof(q), "link");
    assert_int_equal(symlink(p, q), 0);
    assert_int_equal(shim_store_private_dir(q), -EPERM);
    assert_non_null(strstr(shim_store_why(), "not a directory"));
}

/* The runtime directory the user chose: made, checked, refused when open
 * to others; none at all is refused too, in words. */
static void the_runtime_directory_is_checked(void **state)
{
    struct shim_config cfg;
    char out[SHIM_PATH_MAX];
    (void)state;

    scratch_runtime(&cfg, g_dir);
    assert_int_equal(shim_store_runtime(&cfg, out, sizeof(out)), 0);
    assert_string_equal(out, cfg.runtime_dir);
    assert_int_equal(chmod(cfg.runtime_dir, 0770), 0);
    assert_int_equal(shim_store_runtime(&cfg, out, sizeof(out)), -EPERM);
    assert_string_equal(out, "");
    cfg.runtime_dir[0] = '\0';
    assert_int_equal(shim_store_runtime(&cfg, out, sizeof(out)), -EPERM);
    assert_non_null(strstr(shim_store_why(), "no home directory"));
}

/* Written whole, 0600, replacing what was there. */
static void files_are_written_whole_and_private(void **state)
{
    char p[600], got[64];
    struct stat st;
    (void)state;

    path(p, sizeof(p), "f");
    assert_int_equal(shim_store_write(p, "one\ntwo\n"), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(shim_store_read(p, got, sizeof(got), 1), 0);
    assert_string_equal(got, "one");
    assert_int_equal(shim_store_write_bytes(p, "x\0y", 3), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(shim_store_write(p, "0123456789"), 0);
    assert_int_equal(shim_store_read(p, got, 5, 0), -EFBIG);
}

/* A second taker of the lock waits and gives up; the first's close frees it. */
static void the_lock_excludes_a_second_taker(void **state)
{
    int a, b;
    (void)state;

    a = shim_store_lock(g_dir, 0);
    assert_true(a >= 0);
    assert_int_equal(shim_store_lock(g_dir, 0), -ETIMEDOUT);
    assert_int_equal(shim_store_lock(g_dir, 50), -ETIMEDOUT);
    close(a);
    b = shim_store_lock(g_dir, 0);
    assert_true(b >= 0);
    close(b);
}

/* A file replaced under the same name is another's: never removed. */
static void only_ones_own_file_is_removed(void **state)
{
    struct shim_store_own own = {0}, none = {0};
    char p[600];
    (void)state;

    path(p, sizeof(p), "pid");
    assert_int_equal(shim_store_write(p, "1"), 0);
    assert_int_equal(shim_store_mark(g_dir, "pid", &own), 0);
    assert_int_equal(shim_store_is_own(g_dir, "pid", &own), 1);
    assert_int_equal(shim_store_is_own(g_dir, "pid", &none), 0);
    assert_int_equal(shim_store_write(p, "2"), 0); /* a successor's, atomically */
    assert_int_equal(shim_store_is_own(g_dir, "pid", &own), 0);
    assert_int_equal(shim_store_unlink_own(g_dir, "pid", &own), -ESTALE);
    assert_int_equal(access(p, F_OK), 0);
    assert_int_equal(shim_store_mark(g_dir, "pid", &own), 0);
    assert_int_equal(shim_store_unlink_own(g_dir, "pid", &own), 0);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(shim_store_mark(g_dir, "pid", &own), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(only_a_private_directory_will_do, setup, teardown),
        cmocka_unit_test_setup_teardown(the_runtime_directory_is_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(files_are_written_whole_and_private, setup, teardown),
        cmocka_unit_test_setup_teardown(the_lock_excludes_a_second_taker, setup, teardown),
        cmocka_unit_test_setup_teardown(only_ones_own_file_is_removed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
