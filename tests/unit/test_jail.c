/* test_jail.c - the jail's one table (local/jail.def) as local_layout.c
 * makes it bubblewrap's arguments, for a cold sandbox and for the fork
 * server, and the fork server's JAIL argument (what each fork makes its
 * own, worker/zygote.py): every element where it belongs, in bubblewrap's
 * order, and the same elements (environment, namespaces, masks, tmpfs,
 * ids, working directory) on both sides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/local/local_argv.h"
#include "sandbox/local/local_int.h"

#include <cjson/cJSON.h>

#define DISK (100ull << 20)
#define INODES 4321ull

static struct shim_local *new_local(int zygote, int own_tmpfs)
{
    struct shim_local *l = calloc(1, sizeof(*l));

    assert_non_null(l);
    l->zygote = zygote;
    l->own_tmpfs = own_tmpfs;
    l->p.disk = DISK;
    l->p.inodes = INODES;
    l->p.timeout_s = 30;
    l->p.memory = 1ull << 30;
    snprintf(l->p.preload, sizeof(l->p.preload), "json,numpy");
    return l;
}

static struct cmd *args_of(const struct shim_local *l)
{
    struct cmd *c = calloc(1, sizeof(*c));

    assert_non_null(c);
    shim_local_layout_args(c, l);
    assert_int_equal(c->overflow, 0);
    return c;
}

/* The index of the arguments a, b[, d] in a row (b, d may be NULL: not
 * compared, but present), or -1. */
static int find(const struct cmd *c, const char *a, const char *b, const char *d)
{
    int i;

    for (i = 0; i < c->n; i++) {
        if (strcmp(c->v[i], a))
            continue;
        if (b && (i + 1 >= c->n || strcmp(c->v[i + 1], b)))
            continue;
        if (d && (i + 2 >= c->n || strcmp(c->v[i + 2], d)))
            continue;
        return i;
    }
    return -1;
}

static int is_file(const char *p)
{
    struct stat st;

    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *const unshares[] = {"--unshare-user", "--unshare-pid",
                                       "--unshare-net", "--unshare-ipc",
                                       "--unshare-uts", "--unshare-cgroup-try"};

static void cold_sandbox_args(void **state)
{
    struct shim_local *l = new_local(0, 1);
    struct cmd *c = args_of(l);
    size_t i;
    int proc;

    (void)state;
    for (i = 0; i < sizeof(unshares) / sizeof(unshares[0]); i++)
        assert_true(find(c, unshares[i], NULL, NULL) >= 0);
    assert_true(find(c, "--disable-userns", NULL, NULL) >= 0);
    assert_true(find(c, "--uid", "1000", NULL) >= 0);
    assert_true(find(c, "--gid", "1000", NULL) >= 0);
    assert_true(find(c, "--hostname", "sandbox", NULL) >= 0);
    assert_true(find(c, "--cap-drop", "ALL", NULL) >= 0);
    assert_int_equal(find(c, "--cap-add", NULL, NULL), -1);
    assert_true(find(c, "--die-with-parent", NULL, NULL) >= 0);
    assert_true(find(c, "--as-pid-1", NULL, NULL) >= 0);
    /* the environment: nothing inherited, then the table's */
    assert_true(find(c, "--clearenv", NULL, NULL) >= 0);
    assert_true(find(c, "--clearenv", NULL, NULL) <
                find(c, "--setenv", NULL, NULL));
    assert_true(find(c, "--setenv", "HOME", "/home/sandbox") >= 0);
    assert_true(find(c, "--setenv", "TMPDIR", "/tmp") >= 0);
    assert_true(find(c, "--ro-bind", "/usr", "/usr") >= 0);
    assert_true(find(c, "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache") >= 0);
    assert_true(find(c, "--ro-bind-data", "5", "/etc/passwd") >= 0);
    assert_true(find(c, "--ro-bind-data", "6", "/etc/group") >= 0);
    /* /proc, then its masks (those this kernel has) */
    proc = find(c, "--proc", "/proc", NULL);
    assert_true(proc >= 0);
    assert_true(is_file("/proc/cmdline"));
    assert_true(find(c, "--dev-bind", "/dev/null", "/proc/cmdline") > proc);
    if (!is_file("/proc/timer_stats"))
        assert_int_equal(find(c, "--dev-bind", "/dev/null", "/proc/timer_stats"), -1);
    assert_true(find(c, "--dev", "/dev", NULL) >= 0);
    /* spawn.c's tmpfs, by descriptor, in their order */
    assert_true(find(c, "--bind-fd", "9", "/dev/shm") >= 0);
    assert_true(find(c, "--bind-fd", "10", "/mnt/data") >= 0);
    assert_true(find(c, "--bind-fd", "11", "/tmp") >= 0);
    assert_int_equal(find(c, "--tmpfs", NULL, NULL), -1);
    assert_true(find(c, "--perms", "0755", "--dir") >= 0);
    assert_int_equal(find(c, "--perms", "0755", "--dir") + 2,
                     find(c, "--dir", "/home", NULL));
    assert_true(find(c, "--symlink", "/tmp", "/home/sandbox") > find(c, "--dir", "/home", NULL));
    assert_true(find(c, "--remount-ro", "/", NULL) > find(c, "--symlink", "/tmp", "/home/sandbox"));
    assert_true(find(c, "--chdir", "/mnt/data", NULL) >= 0);
    assert_true(find(c, "--seccomp", "4", NULL) >= 0);
    free(c);
    /* bwrap's own tmpfs: a size only */
    l->own_tmpfs = 0;
    c = args_of(l);
    assert_true(find(c, "--size", "104857600", "--tmpfs") >= 0);
    assert_true(find(c, "--size", "67108864", "--tmpfs") + 3 ==
                find(c, "/dev/shm", NULL, NULL));
    assert_int_equal(find(c, "--bind-fd", NULL, NULL), -1);
    free(c);
    free(l);
}

/* The fork server keeps what each fork makes its own. */
static void server_args(void **state)
{
    struct shim_local *l = new_local(1, 0);
    struct cmd *c = args_of(l);
    int root = geteuid() == 0;

    (void)state;
    assert_int_equal(find(c, "--disable-userns", NULL, NULL), -1);
    assert_int_equal(find(c, "--seccomp", NULL, NULL), -1);
    assert_int_equal(find(c, "--dev-bind", "/dev/null", "/proc/cmdline"), -1);
    assert_int_equal(find(c, "--cap-drop", NULL, NULL), -1);
    assert_true(find(c, "--cap-add", "ALL", NULL) >= 0);
    assert_true(find(c, "--unshare-net", NULL, NULL) >= 0);
    assert_true(find(c, "--proc", "/proc", NULL) >= 0);
    assert_true(find(c, "--hostname", "sandbox", NULL) >= 0);
    assert_true(find(c, "--setenv", "HOME", "/home/sandbox") >= 0);
    if (root) { /* root: it maps each fork's ids itself */
        assert_int_equal(find(c, "--unshare-user", NULL, NULL), -1);
        assert_int_equal(find(c, "--uid", NULL, NULL), -1);
    } else { /* root of a user namespace of its own */
        assert_true(find(c, "--unshare-user", NULL, NULL) >= 0);
        assert_true(find(c, "--uid", "0", NULL) >= 0);
    }
    free(c);
    free(l);
}

static cJSON *jail_of(const struct shim_local *l)
{
    struct cmd *c = calloc(1, sizeof(*c));
    cJSON *j;

    assert_non_null(c);
    shim_local_layout_zygote(c, l);
    assert_int_equal(c->overflow, 0);
    assert_int_equal(c->n, 8); /* PRELOAD JAIL and six limits */
    assert_string_equal(c->v[0], "json,numpy");
    assert_string_equal(c->v[2], "30000");
    j = cJSON_Parse(c->v[1]);
    if (!j)
        print_error("not JSON: %s\n", c->v[1]);
    assert_non_null(j);
    free(c);
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* The fork's part of the table, as zygote.py reads it. */
static void server_jail(void **state)
{
    static const struct {
        const char *name;
        unsigned long flag;
    } ns[] = {{"mnt", CLONE_NEWNS},   {"user", CLONE_NEWUSER},
              {"pid", CLONE_NEWPID},  {"net", CLONE_NEWNET},
              {"ipc", CLONE_NEWIPC},  {"uts", CLONE_NEWUTS},
              {"cgroup", CLONE_NEWCGROUP}};
    static const char *const tmpfs[] = {"/dev/shm", "/mnt/data", "/tmp"};
    struct shim_local *l = new_local(1, 0);
    cJSON *j = jail_of(l), *o, *e;
    char want[128];
    size_t i;
    int n;

    (void)state;
    o = cJSON_GetObjectItemCaseSensitive(j, "ns");
    assert_int_equal(cJSON_GetArraySize(o), 7);
    for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
        assert_true(num(o, ns[i].name) == (double)ns[i].flag);
    assert_true(num(j, "id") == 1000);
    assert_true(num(j, "seccomp") == 4);
    assert_true(num(j, "no_userns") == 1);
    assert_true(num(j, "caps_none") == 1);
    assert_string_equal(str(j, "hostname"), "sandbox");
    assert_string_equal(str(j, "cwd"), "/mnt/data");
    assert_string_equal(str(j, "mask_with"), "/dev/null");
    o = cJSON_GetObjectItemCaseSensitive(j, "proc");
    assert_int_equal(cJSON_GetArraySize(o), 2);
    assert_string_equal(cJSON_GetArrayItem(o, 0)->valuestring, "/proc");
    assert_true(cJSON_GetArrayItem(o, 1)->valuedouble ==
                (double)(MS_NOSUID | MS_NODEV | MS_NOEXEC));
    o = cJSON_GetObjectItemCaseSensitive(j, "tmpfs");
    assert_int_equal(cJSON_GetArraySize(o), 3);
    for (i = 0; i < 3; i++) {
        e = cJSON_GetArrayItem(o, (int)i);
        assert_string_equal(cJSON_GetArrayItem(e, 0)->valuestring, tmpfs[i]);
        assert_true(cJSON_GetArrayItem(e, 1)->valuedouble ==
                    (double)(MS_NOSUID | MS_NODEV));
        snprintf(want, sizeof(want), "size=%llu,nr_inodes=%llu,mode=0755",
                 i ? DISK : 64ull << 20, i ? INODES : 1024ull);
        assert_string_equal(cJSON_GetArrayItem(e, 2)->valuestring, want);
    }
    o = cJSON_GetObjectItemCaseSensitive(j, "masks");
    n = cJSON_GetArraySize(o);
    assert_true(n > 0);
    for (i = 0; i < (size_t)n; i++) /* only those this kernel has */
        assert_true(is_file(cJSON_GetArrayItem(o, (int)i)->valuestring));
    cJSON_Delete(j);
    free(l);
}

/* One table: what the cold sandbox's bwrap is given and what a fork is
 * given are the same elements. */
static void both_sides_alike(void **state)
{
    struct shim_local *cold = new_local(0, 1), *server = new_local(1, 0);
    struct cmd *c = args_of(cold);
    cJSON *j = jail_of(server), *env, *masks, *e;
    int i, nenv = 0, nmask = 0, found;

    (void)state;
    env = cJSON_GetObjectItemCaseSensitive(j, "env");
    masks = cJSON_GetObjectItemCaseSensitive(j, "masks");
    for (i = 0; i < c->n; i++) {
        if (!strcmp(c->v[i], "--setenv")) {
            found = 0;
            cJSON_ArrayForEach(e, env)
                found |= !strcmp(cJSON_GetArrayItem(e, 0)->valuestring, c->v[i + 1]) &&
                         !strcmp(cJSON_GetArrayItem(e, 1)->valuestring, c->v[i + 2]);
            assert_true(found);
            nenv++;
        } else if (!strcmp(c->v[i], "--dev-bind")) {
            found = 0;
            cJSON_ArrayForEach(e, masks)
                found |= !strcmp(e->valuestring, c->v[i + 2]);
            assert_true(found);
            nmask++;
        } else if (!strncmp(c->v[i], "--unshare-", 10)) {
            char name[32];

            snprintf(name, sizeof(name), "%s", c->v[i] + 10);
            name[strcspn(name, "-")] = '\0';
            assert_non_null(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(j, "ns"), name));
        }
    }
    assert_int_equal(nenv, cJSON_GetArraySize(env));
    assert_int_equal(nmask, cJSON_GetArraySize(masks));
    assert_true(find(c, "--chdir", str(j, "cwd"), NULL) >= 0);
    assert_true(find(c, "--hostname", str(j, "hostname"), NULL) >= 0);
    assert_true(find(c, "--uid", "1000", NULL) >= 0);
    assert_int_equal(shim_local_jail_id(), 1000);
    assert_string_equal(shim_local_jail_cwd(), "/mnt/data");
    cJSON_Delete(j);
    free(c);
    free(cold);
    free(server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cold_sandbox_args),
        cmocka_unit_test(server_args),
        cmocka_unit_test(server_jail),
        cmocka_unit_test(both_sides_alike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
