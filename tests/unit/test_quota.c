/* Unit tests: quota.c, the per-user caps on sessions and session hosts
 * (quota.h), counted over every identity of a runtime directory: a live
 * socket counts, a directory being started (no socket yet, made lately)
 * counts, a dead one's stale socket and an old empty directory do not, nor
 * cstore's containers/ or the caller's own directories. Each test has its
 * own runtime directory under TMPDIR, removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "scratch.h"
#include "session/proto.h"
#include "session/quota.h"
#include "store/store.h"
#include "system/config.h"

#define ID1 "11111111111111111111111111111111"
#define ID2 "22222222222222222222222222222222"
#define S(c) #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c #c \
             #c #c #c #c

static char g_dir[512];
static struct shim_config g_cfg;
static int g_fds[8], g_nfds;

static int setup(void **state)
{
    (void)state;
    if (scratch_make(g_dir, sizeof(g_dir), "quota") < 0)
        return -1;
    scratch_runtime(&g_cfg, g_dir);
    g_cfg.user_sessions = 2;
    g_nfds = 0;
    return mkdir(g_cfg.runtime_dir, 0700);
}

static int teardown(void **state)
{
    (void)state;
    while (g_nfds)
        close(g_fds[--g_nfds]);
    return scratch_remove(g_dir);
}

/* <runtime>/<rel>, made with its parents; its path into out. */
static void make(const char *rel, char *out, size_t n)
{
    char p[1024];
    char *s;

    snprintf(p, sizeof(p), "%.600s/%.300s", g_cfg.runtime_dir, rel);
    for (s = strchr(p + strlen(g_cfg.runtime_dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(p, 0700);
        *s = '/';
    }
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(out, n, "%s", p);
}

static void listening(const char *dir)
{
    int fd = shim_proto_socket(dir, 1);

    assert_true(fd >= 0);
    g_fds[g_nfds++] = fd;
}

static void stale_socket(const char *dir)
{
    int fd = shim_proto_socket(dir, 1);

    assert_true(fd >= 0);
    close(fd); /* the file stays, nothing listens */
}

static void backdate(const char *dir, long seconds)
{
    struct timeval tv[2];

    gettimeofday(&tv[0], NULL);
    tv[0].tv_sec -= seconds;
    tv[1] = tv[0];
    assert_int_equal(utimes(dir, tv), 0);
}

static void live_and_starting_sessions_count_across_identities(void **state)
{
    char a[1024], b[1024], self[1024];
    (void)state;

    make(ID1 "/" S(a), a, sizeof(a));
    listening(a);
    make(ID2 "/" S(b), b, sizeof(b)); /* being started: no socket yet */
    make(ID2 "/" S(c), self, sizeof(self));
    assert_int_equal(shim_quota_session(&g_cfg, self), -EUSERS);
    assert_non_null(strstr(shim_store_why(), "CODESHIM_USER_SESSIONS"));
    assert_non_null(strstr(shim_store_why(), "2 live sessions"));
    g_cfg.user_sessions = 3;
    assert_int_equal(shim_quota_session(&g_cfg, self), 0); /* self is not counted */
}

static void dead_old_and_foreign_directories_do_not_count(void **state)
{
    char d[1024], self[1024];
    (void)state;

    make(ID1 "/" S(a), d, sizeof(d));
    stale_socket(d); /* a supervisor that died */
    make(ID1 "/" S(b), d, sizeof(d));
    backdate(d, 600); /* left behind long ago, never started */
    make("containers/" S(c), d, sizeof(d)); /* cstore's, named by a hash too */
    make(ID1 "/not-a-session", d, sizeof(d));
    make(ID2 "/" S(d), self, sizeof(self));
    g_cfg.user_sessions = 1;
    assert_int_equal(shim_quota_session(&g_cfg, self), 0);
}

static void the_sandbox_hosts_hold_no_session(void **state)
{
    char h[1024], self[1024];
    (void)state;

    /* the user's sandbox hosts, however they are named, are no identity's
     * sessions (and there is no host per identity to count) */
    make("hosts/" S(e), h, sizeof(h));
    listening(h);
    make("hosts/" S(f) "-0123456789abcdef", h, sizeof(h));
    listening(h);
    make(ID2 "/" S(a), self, sizeof(self));
    g_cfg.user_sessions = 1;
    assert_int_equal(shim_quota_session(&g_cfg, self), 0);
}

static void a_runtime_dir_that_is_not_private_is_refused(void **state)
{
    (void)state;

    assert_int_equal(chmod(g_cfg.runtime_dir, 0755), 0);
    assert_int_equal(shim_quota_session(&g_cfg, "/nonexistent"), -EPERM);
    assert_non_null(strstr(shim_store_why(), g_cfg.runtime_dir));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(live_and_starting_sessions_count_across_identities),
        T(dead_old_and_foreign_directories_do_not_count),
        T(the_sandbox_hosts_hold_no_session),
        T(a_runtime_dir_that_is_not_private_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
