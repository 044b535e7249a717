/* Unit tests: fileio.c (the one path join and capped file reader), and
 * shim_store_read, which reads through it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "scratch.h"
#include "store/store.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    return scratch_make(dir, sizeof(dir), "fileio");
}

static int teardown(void **state)
{
    (void)state;
    return scratch_remove(dir);
}

static void spit(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void joins(void **state)
{
    char out[8];
    (void)state;

    assert_int_equal(shim_fileio_join(out, sizeof(out), "ab", "cd"), 0);
    assert_string_equal(out, "ab/cd");
    assert_int_equal(shim_fileio_join(out, sizeof(out), "abc", "def"), 0); /* 7 + NUL */
    assert_string_equal(out, "abc/def");
    assert_int_equal(shim_fileio_join(out, sizeof(out), "abcd", "def"), -ENAMETOOLONG);
    assert_string_equal(out, "");
    assert_int_equal(shim_fileio_join(out, 0, "a", "b"), -ENAMETOOLONG);
}

static void reads_under_a_cap(void **state)
{
    char p[300], l[300], out[8];
    (void)state;

    snprintf(p, sizeof(p), "%s/f", dir);
    spit(p, "a\0bcdef", 7); /* 7 bytes fit in 8 with the NUL, NUL inside */
    assert_int_equal(shim_fileio_read(p, 0, out, sizeof(out)), 7);
    assert_memory_equal(out, "a\0bcdef", 8);
    spit(p, "abcdefgh", 8); /* one too many: refused, the first 7 kept */
    assert_int_equal(shim_fileio_read(p, 0, out, sizeof(out)), -EFBIG);
    assert_string_equal(out, "abcdefg");
    spit(p, "", 0);
    assert_int_equal(shim_fileio_read(p, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    snprintf(l, sizeof(l), "%s/missing", dir);
    assert_int_equal(shim_fileio_read(l, 0, out, sizeof(out)), -ENOENT);
    assert_int_equal(shim_fileio_read(p, 0, out, 0), -EINVAL);
    /* O_NOFOLLOW, as the store asks: a symlink is not followed */
    spit(p, "x", 1);
    snprintf(l, sizeof(l), "%s/link", dir);
    assert_int_equal(symlink(p, l), 0);
    assert_int_equal(shim_fileio_read(l, O_NOFOLLOW, out, sizeof(out)), -ELOOP);
    assert_int_equal(shim_fileio_read(l, 0, out, sizeof(out)), 1);
    /* the store's reader: first line, -EFBIG, empty is -EIO */
    spit(p, "one\ntwo", 7);
    assert_int_equal(shim_store_read(p, out, sizeof(out), 1), 0);
    assert_string_equal(out, "one");
    spit(p, "", 0);
    assert_int_equal(shim_store_read(p, out, sizeof(out), 0), -EIO);
}

static void on_usr1(int sig)
{
    (void)sig;
}

/* A signal that interrupts the read (no SA_RESTART) does not end it:
 * the child waits until this process sleeps in the pipe's read (its
 * wchan; where the kernel hides it, the test only loses its edge),
 * signals it, and only then writes. */
static void reads_through_eintr(void **state)
{
    struct sigaction sa, old;
    char buf[16];
    int fds[2];
    pid_t child;
    ssize_t n;
    (void)state;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1; /* no SA_RESTART: read returns EINTR */
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    assert_int_equal(pipe(fds), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char wchan[128], path[64];
        pid_t parent = getppid();
        int i;

        close(fds[0]);
        snprintf(path, sizeof(path), "/proc/%d/wchan", (int)parent);
        for (i = 0; i < 1000000; i++) { /* until the parent sleeps in the pipe's read */
            if (shim_fileio_read(path, 0, wchan, sizeof(wchan)) > 0 && strstr(wchan, "pipe"))
                break;
            sched_yield();
        }
        kill(parent, SIGUSR1);
        for (i = 0; i < 1000; i++)
            sched_yield();
        if (write(fds[1], "ok", 2) != 2)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    n = shim_fileio_read_fd(fds[0], buf, sizeof(buf));
    close(fds[0]);
    waitpid(child, NULL, 0);
    sigaction(SIGUSR1, &old, NULL);
    assert_int_equal(n, 2);
    assert_memory_equal(buf, "ok", 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(joins),
        cmocka_unit_test_setup_teardown(reads_under_a_cap, setup, teardown),
        cmocka_unit_test(reads_through_eintr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
