/* test_sandbox_util.h - helpers shared by test_sandbox.c and
 * test_sandbox_escape.c (static: each test binary has its own copy).
 * Include after cmocka.h, config.h and sandbox.h. */
#ifndef TEST_SANDBOX_UTIL_H
#define TEST_SANDBOX_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static char g_tmpdir[256];

static __attribute__((unused)) const char *no_env(const char *name, void *ctx)
{
    (void)name;
    (void)ctx;
    return NULL;
}

static __attribute__((unused)) void make_cfg(struct shim_config *c)
{
    shim_config_parse(c, no_env, NULL, NULL);
    snprintf(c->tmpdir, sizeof(c->tmpdir), "%s", g_tmpdir);
    c->exec_timeout_s = 20;
}

static __attribute__((unused)) double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((unused)) struct shim_sandbox *open_sb(const struct shim_config *c)
{
    struct shim_sandbox *sb = NULL;

    assert_int_equal(shim_sandbox_open(c, &sb), 0);
    assert_non_null(sb);
    return sb;
}

/* Runs code, asserts a result came back. */
static __attribute__((unused)) void run(struct shim_sandbox *sb, const char *code,
                struct shim_exec_result *r)
{
    assert_int_equal(shim_sandbox_exec(sb, code, strlen(code), r), 0);
    assert_non_null(r->logs);
    assert_int_equal(strlen(r->logs), r->logs_len);
}

/* Runs code expecting status st and logs exactly want. */
static __attribute__((unused)) void expect(struct shim_sandbox *sb, const char *code,
                   enum shim_exec_status st, const char *want)
{
    struct shim_exec_result r;

    run(sb, code, &r);
    if (r.status != st || strcmp(r.logs, want))
        print_error("code: %s\nstatus %d, logs:\n%s\n", code, r.status,
                    r.logs);
    assert_int_equal(r.status, st);
    assert_string_equal(r.logs, want);
    shim_exec_result_free(&r);
}

/* Runs code expecting status st and logs that contain want. */
static __attribute__((unused)) void expect_in(struct shim_sandbox *sb, const char *code,
                      enum shim_exec_status st, const char *want)
{
    struct shim_exec_result r;

    run(sb, code, &r);
    if (r.status != st || !strstr(r.logs, want))
        print_error("code: %s\nstatus %d, logs:\n%s\n(wanted: %s)\n", code,
                    r.status, r.logs, want);
    assert_int_equal(r.status, st);
    assert_non_null(strstr(r.logs, want));
    shim_exec_result_free(&r);
}

static __attribute__((unused)) int dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n == 0;
}

static __attribute__((unused)) int setup(void **state)
{
    const char *t = getenv("TMPDIR");

    (void)state;
    snprintf(g_tmpdir, sizeof(g_tmpdir), "%s/codeshim-test-XXXXXX",
             t && *t ? t : "/tmp");
    return mkdtemp(g_tmpdir) ? 0 : -1;
}

static __attribute__((unused)) int teardown(void **state)
{
    int empty = dir_is_empty(g_tmpdir);

    (void)state;
    if (!empty)
        fprintf(stderr, "sandbox directories left behind in %s\n", g_tmpdir);
    else
        rmdir(g_tmpdir);
    return empty ? 0 : -1;
}

/* Host processes (seen from outside every sandbox) whose command line is
 * exactly argv0 (base name) then arg1, e.g. "sleep" "1000.123": a marker
 * the sandboxed code starts. Stores the uid and pid of one of them. */
static __attribute__((unused)) int scan_host_procs(const char *argv0, const char *arg1,
                                                   uid_t *uid, pid_t *pid)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512], *a0, *base;
        ssize_t len;
        int fd;

        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        a0 = buf;
        base = strrchr(a0, '/');
        base = base ? base + 1 : a0;
        if (strcmp(base, argv0) || (size_t)len <= strlen(a0) + 1 ||
            strcmp(a0 + strlen(a0) + 1, arg1))
            continue;
        n++;
        if (pid)
            *pid = (pid_t)atoi(e->d_name);
        if (uid) {
            struct stat st;
            snprintf(path, sizeof(path), "/proc/%s", e->d_name);
            if (stat(path, &st) == 0)
                *uid = st.st_uid;
        }
    }
    closedir(d);
    return n;
}

static __attribute__((unused)) int count_host_procs(const char *argv0, const char *arg1, uid_t *uid)
{
    return scan_host_procs(argv0, arg1, uid, NULL);
}

/* The pid of the one such host process, or -1. */
static __attribute__((unused)) pid_t host_proc(const char *argv0, const char *arg1)
{
    pid_t pid = -1;

    return scan_host_procs(argv0, arg1, NULL, &pid) == 1 ? pid : -1;
}

/* A host process's parent, from /proc/<pid>/status; -1 if gone. */
static __attribute__((unused)) pid_t host_parent(pid_t pid)
{
    char path[64], buf[2048], *p;
    ssize_t len;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    p = strstr(buf, "\nPPid:");
    return p ? (pid_t)atoi(p + 7) : -1;
}

/* The interpreter (the marker's parent) and the supervisor (its parent)
 * of the sandbox whose code started the host process "argv0 arg1". */
static __attribute__((unused)) void sandbox_of(const char *argv0, const char *arg1,
                                               pid_t *worker, pid_t *sup)
{
    pid_t marker = host_proc(argv0, arg1);

    assert_true(marker > 0);
    *worker = host_parent(marker);
    assert_true(*worker > 0);
    *sup = host_parent(*worker);
    assert_true(*sup > 0);
}

/* Waits up to ms for count_host_procs() to reach 0; returns the count. */
static __attribute__((unused)) int wait_host_procs_gone(const char *argv0, const char *arg1, int ms)
{
    int n = count_host_procs(argv0, arg1, NULL);

    while (n > 0 && ms > 0) {
        usleep(10 * 1000);
        ms -= 10;
        n = count_host_procs(argv0, arg1, NULL);
    }
    return n;
}

#ifdef SHIM_LOCAL_ZYGOTE_H
static __attribute__((unused)) struct shim_local_zygote_stats zstats(void)
{
    struct shim_local_zygote_stats s;

    shim_local_zygote_stats(&s);
    return s;
}

/* Starts c's fork server (only shim_sandbox_keep_warm does: a program
 * never starts one of its own) and waits until every server started is
 * up. Include sandbox/local/local_zygote.h first. */
static __attribute__((unused)) void server_up(const struct shim_config *c)
{
    struct shim_local_zygote_stats s;
    int i;

    for (i = 0; i < 600 && shim_sandbox_keep_warm(c) == 0; i++)
        usleep(50 * 1000);
    s = zstats();
    assert_int_equal(s.failed, 0);
    assert_int_equal(s.up, s.servers_started);
}
#endif

#endif
