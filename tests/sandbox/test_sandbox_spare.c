/* test_sandbox_spare.c - the local backend's warm spare (local_spare.c):
 * a process that opens sandboxes repeatedly gets the next one started in
 * advance; each open still gets a fresh sandbox (nothing of an earlier
 * request in it), one made with the open's own settings; none with
 * CODESHIM_WARM_SPARE=0 or in a program that opens one sandbox only; a
 * forked child never sees its parent's; and a spare dies with the host
 * like any sandbox, even one that exits while its spare is starting. The
 * evidence is shim_local_spare_stats() and the spare's processes, never
 * timing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sandbox/local/local_spare.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include <signal.h>
#include <sys/wait.h>

#include "test_sandbox_util.h"

#define MAX_TREE 32

static struct shim_local_spare_stats stats(void)
{
    struct shim_local_spare_stats st;

    shim_local_spare_stats(&st);
    return st;
}

/* Waits up to 10 s for no spare to be starting. */
static void settle(void)
{
    int i;

    for (i = 0; i < 1000 && stats().spare_starting; i++)
        usleep(10 * 1000);
}

/* Waits up to 10 s for a spare to be waiting; its bwrap's pid, or 0. */
static long wait_spare(void)
{
    int i;

    for (i = 0; i < 1000; i++) {
        struct shim_local_spare_stats st = stats();
        if (st.spare_pid)
            return st.spare_pid;
        usleep(10 * 1000);
    }
    return 0;
}

static void open_run_close(const struct shim_config *c)
{
    struct shim_sandbox *sb;

    assert_int_equal(shim_sandbox_open(c, &sb), 0);
    expect(sb, "print(1)", SHIM_EXEC_OK, "1\n");
    shim_sandbox_close(sb);
}

/* A process that opened sandboxes before, and a spare made with c
 * waiting: its pid. */
static long prime(const struct shim_config *c)
{
    long pid;

    settle();
    open_run_close(c); /* takes or ends whatever spare was waiting */
    open_run_close(c); /* a second open at least: a spare is due */
    pid = wait_spare();
    assert_true(pid > 0);
    return pid;
}

/* The parent of pid from /proc/pid/stat, -1 if gone; *state its state. */
static long parent_of(long pid, char *state)
{
    char path[64], buf[512], *p;
    long ppid = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) != NULL &&
        sscanf(p + 1, " %c %ld", state, &ppid) != 2)
        ppid = -1;
    fclose(f);
    return ppid;
}

/* Alive: exists and is not a zombie. */
static int alive(long pid)
{
    char st = 0;

    return parent_of(pid, &st) >= 0 && st != 'Z' && st != 'X';
}

/* pid and its descendants (up to MAX_TREE) into tree; their count. */
static int process_tree(long pid, long *tree)
{
    int n = 1, i, grew = 1;

    tree[0] = pid;
    while (grew && n < MAX_TREE) {
        DIR *d = opendir("/proc");
        struct dirent *e;

        grew = 0;
        if (!d)
            break;
        while ((e = readdir(d)) != NULL && n < MAX_TREE) {
            long p = strtol(e->d_name, NULL, 10), pp;
            char st;
            int known = 0;

            if (p <= 0)
                continue;
            for (i = 0; i < n; i++)
                known |= tree[i] == p;
            pp = known ? -1 : parent_of(p, &st);
            for (i = 0; i < n && pp > 0; i++)
                if (tree[i] == pp) {
                    tree[n++] = p;
                    grew = 1;
                    break;
                }
        }
        closedir(d);
    }
    return n;
}

/* The next open takes the spare: the sandbox it gets was started before
 * the open (its bwrap is the spare's, ended by this close), is up, runs
 * code, and a new spare follows its first execution. */
static void test_spare_used(void **state)
{
    struct shim_config c;
    struct shim_local_spare_stats before, after;
    struct shim_sandbox *sb;
    long pid, next;

    (void)state;
    make_cfg(&c);
    pid = prime(&c);
    assert_true(alive(pid));
    before = stats();
    sb = open_sb(&c);
    after = stats();
    assert_int_equal(after.spares_taken, before.spares_taken + 1);
    assert_int_equal(after.opened, before.opened + 1);
    assert_int_equal(after.spare_pid, 0); /* the next one: after an exec */
    assert_false(after.spare_starting);
    expect(sb, "print('hi')\n6 * 7", SHIM_EXEC_OK, "hi\n42\n");
    next = wait_spare();
    assert_true(next > 0 && next != pid);
    assert_true(alive(pid));
    shim_sandbox_close(sb);
    assert_false(alive(pid)); /* it was that sandbox */
    assert_true(alive(next));
    assert_int_equal(stats().spares_started, after.spares_started + 1);
}

/* Every open gets a fresh sandbox: no variable, import, file or process
 * of an earlier request, and no note about a restart. */
static void test_spare_fresh(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    unsigned long taken;
    int i;

    (void)state;
    make_cfg(&c);
    prime(&c);
    for (i = 0; i < 3; i++) {
        taken = stats().spares_taken;
        sb = open_sb(&c);
        assert_int_equal(stats().spares_taken, taken + 1);
        expect(sb,
               "import os\n(sorted(k for k in globals() if not "
               "k.startswith('__')), os.listdir('.'), "
               "[p for p in ('/tmp/t', '/dev/shm/s', '/home/sandbox/.rc') "
               "if os.path.exists(p)], 'json' in __import__('sys').modules, "
               "[p for p in os.listdir('/proc') if p.isdigit() and "
               "int(p) not in (1, os.getpid())])",
               SHIM_EXEC_OK, "(['os'], [], [], False, [])\n");
        expect(sb,
               "import json, subprocess\nx = 41\n"
               "open('f.txt', 'w').write('a')\n"
               "for p in ('/tmp/t', '/dev/shm/s', '/home/sandbox/.rc'):\n"
               "    open(p, 'w').close()\n"
               "_ = subprocess.Popen(['sleep', '1000.701'])",
               SHIM_EXEC_OK, "[files in /mnt/data: f.txt]\n");
        expect(sb, "x + 1", SHIM_EXEC_OK, "42\n");
        shim_sandbox_close(sb);
        assert_int_equal(count_host_procs("sleep", "1000.701", NULL), 0);
        assert_true(wait_spare() > 0);
    }
}

/* A spare made with other settings is not used (and is ended): the open
 * gets a sandbox with its own. */
static void test_spare_settings(void **state)
{
    struct shim_config c, other;
    struct shim_local_spare_stats before, after;
    struct shim_sandbox *sb;
    long pid;

    (void)state;
    make_cfg(&c);
    pid = prime(&c);
    other = c;
    other.exec_timeout_s = 1;
    before = stats();
    sb = open_sb(&other);
    after = stats();
    assert_int_equal(after.spares_taken, before.spares_taken);
    assert_int_equal(after.spares_dropped, before.spares_dropped + 1);
    assert_false(alive(pid));
    expect_in(sb, "import time\ntime.sleep(5)", SHIM_EXEC_TIMEOUT,
              "timed out after 1 s");
    shim_sandbox_close(sb);
}

/* CODESHIM_WARM_SPARE=0 (c.warm_spare; its parsing is in test_sandbox.c):
 * no spare taken, none started; the same for the unsafe mode. */
static void test_spare_disabled(void **state)
{
    struct shim_config c;
    struct shim_local_spare_stats before, after;
    long pid;
    int i;

    (void)state;
    make_cfg(&c);
    assert_int_equal(c.warm_spare, 1); /* the default */
    pid = prime(&c);
    c.warm_spare = 0;
    before = stats();
    for (i = 0; i < 3; i++)
        open_run_close(&c);
    settle(); /* a spare these opens asked for would be starting now */
    after = stats();
    assert_int_equal(after.opened, before.opened + 3);
    assert_int_equal(after.spares_taken, before.spares_taken);
    assert_int_equal(after.spares_started, before.spares_started);
    assert_int_equal(after.spare_pid, pid); /* left waiting, untouched */
    assert_true(alive(pid));

    make_cfg(&c);
    c.unsafe_no_isolation = 1;
    before = stats();
    for (i = 0; i < 3; i++)
        open_run_close(&c); /* also ends the spare made with other settings */
    settle();
    after = stats();
    assert_int_equal(after.spares_taken, before.spares_taken);
    assert_int_equal(after.spares_started, before.spares_started);
    assert_int_equal(after.spare_pid, 0);
    assert_false(after.spare_starting);
    assert_false(alive(pid));
}

struct child_report {
    int fresh;   /* no spare, no counts, right after the fork */
    int single;  /* one open: no spare started */
    int second;  /* the second open's execution: a spare */
    int third;   /* the third open took it */
    int ntree;
    long tree[MAX_TREE]; /* the child's own spare, up */
};

/* open, print(1), close; 0 or -1. No cmocka assertion: for the child. */
static int cycle(const struct shim_config *c)
{
    struct shim_exec_result r;
    struct shim_sandbox *sb;
    int ok;

    if (shim_sandbox_open(c, &sb) != 0)
        return -1;
    ok = shim_sandbox_exec(sb, "print(1)", 8, &r) == 0 &&
         r.status == SHIM_EXEC_OK && !strcmp(r.logs, "1\n");
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
    return ok ? 0 : -1;
}

static void child_main(const struct shim_config *c, int fd)
{
    struct child_report rep;
    struct shim_local_spare_stats st;
    long pid = 0;
    int i;

    alarm(60); /* never outlives a parent that failed to end it */
    memset(&rep, 0, sizeof(rep));
    shim_local_spare_stats(&st);
    rep.fresh = !st.opened && !st.spare_pid && !st.spare_starting &&
                !st.spares_started;
    rep.single = cycle(c) == 0;
    settle();
    shim_local_spare_stats(&st);
    rep.single = rep.single && st.opened == 1 && !st.spares_started &&
                 !st.spare_pid && !st.spare_starting;
    rep.second = cycle(c) == 0 && (pid = wait_spare()) > 0;
    rep.third = rep.second && cycle(c) == 0;
    shim_local_spare_stats(&st);
    rep.third = rep.third && st.spares_taken == 1 && !alive(pid);
    pid = wait_spare();
    /* up: bwrap, the supervisor and the worker (polled, at most 10 s) */
    for (i = 0; pid > 0 && i < 1000; i++) {
        rep.ntree = process_tree(pid, rep.tree);
        if (rep.ntree >= 3)
            break;
        usleep(10 * 1000);
    }
    if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        _exit(1);
    for (;;)
        pause();
}

/* A forked child starts with no spare and no history (its parent's spare
 * stays the parent's, unused); in the child, one open makes no spare, the
 * second makes one, the third takes it; killing the child (kill -9) ends
 * every process of its spare. */
static void test_spare_fork_and_host_death(void **state)
{
    struct shim_config c;
    struct child_report rep;
    long parent_spare;
    pid_t child;
    ssize_t n;
    int p[2], st, i, left, all_alive = 1;

    (void)state;
    make_cfg(&c);
    parent_spare = prime(&c);
    assert_int_equal(pipe(p), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(p[0]);
        child_main(&c, p[1]);
    }
    close(p[1]);
    memset(&rep, 0, sizeof(rep));
    n = read(p[0], &rep, sizeof(rep));
    close(p[0]);
    for (i = 0; i < rep.ntree; i++)
        all_alive &= alive(rep.tree[i]);
    kill(child, SIGKILL); /* before any assertion: it must not linger */
    waitpid(child, &st, 0);
    assert_int_equal(n, (ssize_t)sizeof(rep));
    assert_true(rep.fresh);
    assert_true(rep.single);
    assert_true(rep.second);
    assert_true(rep.third);
    assert_true(rep.ntree >= 3); /* bwrap, the supervisor, the worker */
    assert_true(all_alive);
    for (left = 5000; left > 0; left -= 10) {
        int alive_n = 0;
        for (i = 0; i < rep.ntree; i++)
            alive_n += alive(rep.tree[i]);
        if (!alive_n)
            break;
        usleep(10 * 1000);
    }
    for (i = 0; i < rep.ntree; i++)
        assert_false(alive(rep.tree[i]));
    /* the parent's spare: still waiting, still its own, and used next */
    assert_int_equal(stats().spare_pid, parent_spare);
    assert_true(alive(parent_spare));
    open_run_close(&c);
    assert_false(alive(parent_spare));
}

/* A program that ends (exit) just as its spare starts: the spare ends
 * with it; no process is left behind, whatever the moment. */
static void test_spare_exit_while_starting(void **state)
{
    struct shim_config c;
    char link[600];
    int delay, st;

    (void)state;
    /* bwrap under a name of its own: "bwrap-exit-test --unshare-all" is
     * on the command line of these sandboxes' bwrap processes only */
    make_cfg(&c);
    snprintf(link, sizeof(link), "%s/bwrap-exit-test", g_tmpdir);
    assert_int_equal(symlink("/usr/bin/bwrap", link), 0);
    chmod(g_tmpdir, 0755); /* as root, bwrap runs as another user */
    snprintf(c.bwrap, sizeof(c.bwrap), "%s", link);
    for (delay = 0; delay < 8; delay++) {
        pid_t child = fork();

        assert_true(child >= 0);
        if (child == 0) {
            alarm(60);
            if (cycle(&c) || cycle(&c)) /* the second: a spare is due */
                _exit(1);
            usleep((useconds_t)delay * 1000);
            exit(0);
        }
        waitpid(child, &st, 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    st = wait_host_procs_gone("bwrap-exit-test", "--unshare-all", 5000);
    unlink(link);
    chmod(g_tmpdir, 0700);
    assert_int_equal(st, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spare_used),
        cmocka_unit_test(test_spare_fresh),
        cmocka_unit_test(test_spare_settings),
        cmocka_unit_test(test_spare_disabled),
        cmocka_unit_test(test_spare_fork_and_host_death),
        cmocka_unit_test(test_spare_exit_while_starting),
    };

    signal(SIGPIPE, SIG_DFL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
