/* test_sandbox.c - the sandbox layer (sandbox.c + the local backend) against
 * Debian's /usr/bin/python3: notebook semantics, capture, the environment
 * and fds, timeouts, crashes, caps, files, cleanup. The attacks on the
 * isolation itself are in test_sandbox_escape.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sandbox/sandbox.h"
#include "system/config.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_sandbox_util.h"

static void test_print_and_value(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "print('hi')\n1 + 1", SHIM_EXEC_OK, "hi\n2\n");
    expect(sb, "x = None\nx", SHIM_EXEC_OK, "");
    expect(sb, "'a' * 3", SHIM_EXEC_OK, "'aaa'\n");
    expect(sb, "", SHIM_EXEC_OK, "");
    expect(sb, "import sys\nprint(sys.stdout.fileno(), sys.stderr.fileno())\n"
               "import subprocess\n"
               "_ = subprocess.run(['echo', 'via fd'], stdout=sys.stdout)",
           SHIM_EXEC_OK, "1 2\nvia fd\n");
    expect(sb, "import sys; sys.stdout.write('no newline')", SHIM_EXEC_OK,
           "no newline10\n");
    shim_sandbox_close(sb);
}

static void test_order(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "print(1); import sys; print(2, file=sys.stderr); print(3)",
           SHIM_EXEC_OK, "1\n2\n3\n");
    expect(sb,
           "import os, sys\nprint('a', end='')\nos.system('echo b')\n"
           "print('c', file=sys.stderr)\nos.system('echo d >&2')\nprint('e')",
           SHIM_EXEC_OK, "ab\nc\nd\ne\n");
    shim_sandbox_close(sb);
}

static void test_state(void **state)
{
    struct shim_config c;
    struct shim_sandbox *a, *b;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    a = open_sb(&c);
    b = open_sb(&c);
    expect(a, "x = 41\nimport json", SHIM_EXEC_OK, "");
    expect(a, "x + 1", SHIM_EXEC_OK, "42\n");
    expect(a, "json.dumps([x])", SHIM_EXEC_OK, "'[41]'\n");
    expect(a, "__name__", SHIM_EXEC_OK, "'__main__'\n");
    expect(a, "class P: pass\nimport pickle\n"
              "type(pickle.loads(pickle.dumps(P()))).__name__",
           SHIM_EXEC_OK, "'P'\n");
    run(b, "x", &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_non_null(strstr(r.logs, "NameError: name 'x' is not defined"));
    shim_exec_result_free(&r);
    /* the worker's own names do not leak into the user's namespace */
    expect(b, "sorted(k for k in globals() if not k.startswith('__'))",
           SHIM_EXEC_OK, "[]\n");
    assert_string_not_equal(shim_sandbox_container_id(a),
                            shim_sandbox_container_id(b));
    shim_sandbox_close(a);
    shim_sandbox_close(b);
}

static void test_container_id(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    const char *id;
    size_t i;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    id = shim_sandbox_container_id(sb);
    assert_int_equal(strlen(id), 5 + 48);
    assert_memory_equal(id, "cntr_", 5);
    for (i = 5; i < 53; i++)
        assert_non_null(strchr("0123456789abcdef", id[i]));
    shim_sandbox_close(sb);
}

static void test_exception(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    const char *want = "ZeroDivisionError: division by zero\n";

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    run(sb, "print('before')\ny = 5\ndef f():\n    return 1 / 0\nf()", &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_true(!strncmp(r.logs, "before\nTraceback (most recent call last):",
                         strlen("before\nTraceback (most recent call last):")));
    assert_true(r.logs_len > strlen(want));
    assert_string_equal(r.logs + r.logs_len - strlen(want), want);
    assert_non_null(strstr(r.logs, "return 1 / 0")); /* source lines shown */
    assert_null(strstr(r.logs, "<string>"));          /* no worker frames */
    assert_null(strstr(r.logs, "run_code"));
    shim_exec_result_free(&r);
    expect(sb, "y", SHIM_EXEC_OK, "5\n"); /* state survives the exception */

    run(sb, "def g(:\n    pass", &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_non_null(strstr(r.logs, "SyntaxError"));
    assert_null(strstr(r.logs, "Traceback"));
    shim_exec_result_free(&r);

    /* sys.exit() reports and keeps the interpreter */
    run(sb, "import sys\nsys.exit(4)", &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_non_null(strstr(r.logs, "SystemExit: 4"));
    shim_exec_result_free(&r);
    run(sb, "raise SystemExit", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_non_null(strstr(r.logs, "SystemExit"));
    shim_exec_result_free(&r);
    expect(sb, "y", SHIM_EXEC_OK, "5\n");

    /* an exception in repr() of the value is the user's */
    run(sb, "class R:\n    def __repr__(self): raise ValueError('bad')\nR()",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_ERROR);
    assert_non_null(strstr(r.logs, "__repr__"));
    assert_non_null(strstr(r.logs, "ValueError: bad"));
    shim_exec_result_free(&r);

    /* a fork() in user code does not answer twice */
    expect(sb, "import os\npid = os.fork()\nif pid == 0: print('child')\n"
               "else: os.waitpid(pid, 0); print('parent')",
           SHIM_EXEC_OK, "child\nparent\n");
    expect(sb, "y", SHIM_EXEC_OK, "5\n");
    expect(sb, "import asyncio\nawait asyncio.sleep(0)\n6 * 7", SHIM_EXEC_OK,
           "42\n");
    shim_sandbox_close(sb);
}

static void test_subprocess_output(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "import os; os.system('echo hi')", SHIM_EXEC_OK, "hi\n0\n");
    expect(sb, "import subprocess\n_ = subprocess.run(['sh', '-c', "
               "'echo out; echo err >&2'])",
           SHIM_EXEC_OK, "out\nerr\n");
    expect(sb, "input()", SHIM_EXEC_ERROR,
           "Traceback (most recent call last):\n"
           "  File \"<cell-3>\", line 1, in <module>\n"
           "    input()\n"
           "EOFError: EOF when reading a line\n");
    shim_sandbox_close(sb);
}

static void test_clean_env(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    setenv("OPENAI_API_KEY", "sk-test-should-not-leak", 1);
    setenv("CODESHIM_SECRET", "nope", 1);
    setenv("PYTHONSTARTUP", "/nonexistent/startup.py", 1);
    setenv("LD_PRELOAD", "/nonexistent/libnothing.so", 1);
    make_cfg(&c);
    sb = open_sb(&c);
    unsetenv("LD_PRELOAD");
    run(sb, "import os; print(sorted(os.environ))", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_null(strstr(r.logs, "OPENAI_API_KEY"));
    assert_null(strstr(r.logs, "LD_PRELOAD"));
    assert_null(strstr(r.logs, "CODESHIM"));
    assert_string_equal(r.logs, "['HOME', 'LANG', 'MPLBACKEND', 'PATH', "
                                "'PWD', 'PYTHONDONTWRITEBYTECODE', 'TMPDIR', "
                                "'USER']\n");
    shim_exec_result_free(&r);
    expect(sb, "import subprocess\n"
               "print(subprocess.run(['env'], capture_output=True, "
               "text=True).stdout.count('OPENAI'))",
           SHIM_EXEC_OK, "0\n");
    expect(sb, "import os\n(os.environ['TMPDIR'], os.environ['HOME'], "
               "os.getcwd(), os.environ['MPLBACKEND'])",
           SHIM_EXEC_OK, "('/tmp', '/home/sandbox', '/mnt/data', 'Agg')\n");
    unsetenv("OPENAI_API_KEY");
    unsetenv("CODESHIM_SECRET");
    unsetenv("PYTHONSTARTUP");
    shim_sandbox_close(sb);
}

static void test_fds(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    char code[512];
    int fd, hi;

    (void)state;
    fd = open("/etc/hostname", O_RDONLY); /* deliberately no O_CLOEXEC */
    assert_true(fd >= 0);
    hi = fcntl(fd, F_DUPFD, 50);
    assert_true(hi >= 50);
    make_cfg(&c);
    sb = open_sb(&c);
    snprintf(code, sizeof(code),
             "import os\nfor fd in (%d, %d):\n"
             "    try:\n        os.fstat(fd); print(fd, 'open')\n"
             "    except OSError:\n        print(fd, 'closed')",
             fd, hi);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    /* the worker's own fds may take the low number; never the host's file */
    assert_null(strstr(r.logs, "50 open"));
    shim_exec_result_free(&r);
    run(sb, "import os\nfor fd in sorted(int(f) for f in "
            "os.listdir('/proc/self/fd'))[:-1]:\n"
            "    print(fd, os.readlink('/proc/self/fd/%d' % fd))",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_null(strstr(r.logs, "/etc/hostname"));
    assert_non_null(strstr(r.logs, "0 /dev/null"));
    assert_non_null(strstr(r.logs, "socket:"));
    shim_exec_result_free(&r);
    /* stdin is /dev/null; fds 1 and 2 are the capture file */
    expect(sb, "import sys; sys.stdin.read()", SHIM_EXEC_OK, "''\n");
    shim_sandbox_close(sb);
    close(fd);
    close(hi);
}

/* The next execution in sb runs in a new interpreter: x (set before) is
 * gone, and the output says so first. */
static void expect_restarted(struct shim_sandbox *sb)
{
    struct shim_exec_result r;

    run(sb, "print('x' in globals())", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_true(!strncmp(r.logs, "[Note: the Python interpreter was restarted",
                         strlen("[Note: the Python interpreter was restarted")));
    assert_string_equal(strchr(r.logs, '\n') + 1, "False\n");
    shim_exec_result_free(&r);
}

static void test_timeout(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    double t0, dt;

    (void)state;
    make_cfg(&c);
    c.exec_timeout_s = 1;
    sb = open_sb(&c);
    expect(sb, "x = 1", SHIM_EXEC_OK, "");
    t0 = now_s();
    run(sb, "print('started', flush=True)\nwhile True: pass", &r);
    dt = now_s() - t0;
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    assert_true(dt >= 0.9 && dt < 3.0);
    assert_true(r.seconds >= 0.9 && r.seconds < 3.0);
    if (strncmp(r.logs, "started\n", 8))
        print_error("logs: %s\n", r.logs);
    assert_true(!strncmp(r.logs, "started\n", 8)); /* partial output kept */
    assert_non_null(strstr(r.logs, "timed out after 1 s"));
    assert_non_null(strstr(r.logs, "state (variables, imports) was lost"));
    shim_exec_result_free(&r);

    expect_restarted(sb);
    expect(sb, "print(7)", SHIM_EXEC_OK, "7\n"); /* the note comes once */

    /* a sleeping child holding the output open does not stop the kill */
    t0 = now_s();
    run(sb, "import subprocess\nsubprocess.run(['sleep', '30'])", &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    assert_true(now_s() - t0 < 3.0);
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

/* The stop hook: nonzero from its third call on. */
static int stop_at_third(void *ctx)
{
    return ++*(int *)ctx >= 3;
}

/* An execution its caller stops is interrupted at once (not at its time
 * limit), its interpreter restarted; the sandbox goes on, and its next
 * execution says the state was lost. */
static void test_exec_until_stops(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    int calls = 0;
    struct shim_exec_stop stop = {stop_at_third, &calls};
    double t0, dt;

    (void)state;
    make_cfg(&c);
    c.exec_timeout_s = 30;
    sb = open_sb(&c);
    expect(sb, "x = 1", SHIM_EXEC_OK, "");
    t0 = now_s();
    assert_int_equal(shim_sandbox_exec_until(sb, "import time\ntime.sleep(20)", 26, &stop, &r),
                     0);
    dt = now_s() - t0;
    assert_int_equal(calls, 3);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "Execution interrupted"));
    assert_true(dt < 10.0); /* not the 20 s sleep, nor the 30 s limit */
    shim_exec_result_free(&r);

    expect_restarted(sb);
    shim_sandbox_close(sb);
}

static void test_worker_death(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    char marker[32], code[600];

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect(sb, "z = 2", SHIM_EXEC_OK, "");
    run(sb, "print('bye', flush=True)\nimport os; os._exit(3)", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "bye\n"));
    assert_non_null(strstr(r.logs, "exited with status 3"));
    assert_non_null(strstr(r.logs, "was lost"));
    shim_exec_result_free(&r);
    run(sb, "print(8)", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_non_null(strstr(r.logs, "restarted"));
    assert_string_equal(strchr(r.logs, '\n') + 1, "8\n");
    shim_exec_result_free(&r);

    run(sb, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "killed by signal 11"));
    shim_exec_result_free(&r);
    expect(sb, "'z' in globals()", SHIM_EXEC_OK,
           "[Note: the Python interpreter was restarted before this "
           "execution; its earlier state (variables, imports) was lost. Files "
           "in the working directory were kept.]\nFalse\n");

    /* user code that breaks the sandbox's plumbing only costs a restart */
    run(sb, "import os\nos.closerange(3, 1024)", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    shim_exec_result_free(&r);
    run(sb, "import os, shutil\nfor n in os.listdir('.'):\n"
            "    shutil.rmtree(n, ignore_errors=True)\nos._exit(1)",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    shim_exec_result_free(&r);
    run(sb, "print(10)", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_non_null(strstr(r.logs, "\n10\n"));
    shim_exec_result_free(&r);

    /* killed between executions: the next one restarts transparently.
     * (The sandbox is stopped between executions: only SIGKILL, here from
     * a POSIX timer, ends a process then, as the OOM killer would.) The
     * marker child dies with the interpreter (PDEATHSIG); its argument is
     * this run's own, so no other run's marker is counted. */
    snprintf(marker, sizeof(marker), "1000.3%05d", (int)(getpid() % 100000));
    snprintf(code, sizeof(code),
             "import ctypes, struct, subprocess\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "_ = subprocess.Popen(['sleep', '%s'],\n"
             "                     preexec_fn=lambda: libc.prctl(1, 9))\n"
             "t = ctypes.c_void_p()\n"
             "ev = bytes(8) + struct.pack('ii', 9, 0) + bytes(48)\n"
             "assert libc.timer_create(1, ev, ctypes.byref(t)) == 0\n"
             "assert libc.timer_settime(t, 0, struct.pack('4q', 0, 0, 0, "
             "50000000), None) == 0", marker);
    expect(sb, code, SHIM_EXEC_OK, "");
    assert_int_equal(count_host_procs("sleep", marker, NULL), 1);
    assert_int_equal(wait_host_procs_gone("sleep", marker, 10000), 0);
    run(sb, "print(9)", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_non_null(strstr(r.logs, "restarted"));
    assert_non_null(strstr(r.logs, "\n9\n"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

/* One execution on another thread: its request sent, it waits in poll. */
struct exec_job {
    struct shim_sandbox *sb;
    const char *code;
    struct shim_exec_result r;
    pid_t tid; /* atomic */
    int rc;
};

static void *exec_thread(void *arg)
{
    struct exec_job *j = arg;

    __atomic_store_n(&j->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    j->rc = shim_sandbox_exec(j->sb, j->code, strlen(j->code), &j->r);
    return NULL;
}

/* 1 once thread tid sleeps in poll(2) or ppoll(2), which the host only
 * does with its request written, waiting for the reply. */
static int waits_in_poll(pid_t tid)
{
    char path[64], buf[128];
    long nr;
    ssize_t len;
    int fd;

    snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", (long)tid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return 0;
    buf[len] = '\0';
    if (sscanf(buf, "%ld", &nr) != 1)
        return 0;
#ifdef SYS_poll
    if (nr == SYS_poll)
        return 1;
#endif
    return nr == SYS_ppoll;
}

/* The interpreter dies between executions and the next request reaches the
 * supervisor before it noticed (stopped here, as a busy machine may leave
 * it unscheduled): the request still runs, in a new interpreter, and the
 * model is told. The marker child is the interpreter's, which is the
 * supervisor's. */
static void test_worker_death_unseen(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct exec_job j = {0};
    pthread_t th;
    char marker[32], code[400];
    pid_t worker, sup;
    int i;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    snprintf(marker, sizeof(marker), "1000.4%05d", (int)(getpid() % 100000));
    snprintf(code, sizeof(code),
             "import ctypes, subprocess\n"
             "libc = ctypes.CDLL(None)\n"
             "_ = subprocess.Popen(['sleep', '%s'],\n"
             "                     preexec_fn=lambda: libc.prctl(1, 9))",
             marker);
    expect(sb, code, SHIM_EXEC_OK, "");
    sandbox_of("sleep", marker, &worker, &sup);

    assert_int_equal(kill(sup, SIGSTOP), 0);
    assert_int_equal(kill(worker, SIGKILL), 0);
    /* the marker dies as the interpreter exits, after its files closed */
    assert_int_equal(wait_host_procs_gone("sleep", marker, 10000), 0);
    j.sb = sb;
    j.code = "print(9)";
    assert_int_equal(pthread_create(&th, NULL, exec_thread, &j), 0);
    for (i = 0; i < 10000; i++) {
        pid_t tid = __atomic_load_n(&j.tid, __ATOMIC_ACQUIRE);
        if (tid > 0 && waits_in_poll(tid))
            break;
        usleep(1000);
    }
    assert_int_equal(kill(sup, SIGCONT), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(j.rc, 0);
    if (j.r.status != SHIM_EXEC_OK)
        print_error("status %d, logs:\n%s\n", j.r.status, j.r.logs);
    assert_int_equal(j.r.status, SHIM_EXEC_OK);
    assert_non_null(strstr(j.r.logs, "restarted"));
    assert_non_null(strstr(j.r.logs, "\n9\n"));
    shim_exec_result_free(&j.r);
    shim_sandbox_close(sb);
}

static void test_forged_frames(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    const char *find_sock =
        "import os\n"
        "def sock():\n"
        "    for f in os.listdir('/proc/self/fd'):\n"
        "        try:\n"
        "            if os.readlink('/proc/self/fd/' + f)[:7] == 'socket:':\n"
        "                return int(f)\n"
        "        except OSError:\n"
        "            pass\n"
        "s = sock()\n";
    char code[1024];

    (void)state;
    make_cfg(&c);
    c.exec_timeout_s = 5;
    sb = open_sb(&c);
    /* a length far over the cap */
    snprintf(code, sizeof(code), "%sos.write(s, b'\\xff\\xff\\xff\\xff')",
             find_sock);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "invalid reply"));
    assert_true(r.seconds < 2.0);
    shim_exec_result_free(&r);
    expect(sb, "1", SHIM_EXEC_OK,
           "[Note: the Python interpreter was restarted before this "
           "execution; its earlier state (variables, imports) was lost. Files "
           "in the working directory were kept.]\n1\n");
    /* a well-formed frame that answers no request */
    snprintf(code, sizeof(code),
             "%sj = b'{\"seq\": 99, \"status\": \"ok\", \"images\": [], "
             "\"files\": []}'\nos.write(s, len(j).to_bytes(4, 'big') + j)",
             find_sock);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    shim_exec_result_free(&r);
    /* a short frame, then silence: the deadline ends the wait */
    snprintf(code, sizeof(code),
             "%sos.write(s, b'\\x00\\x00\\x01\\x00{')\nimport time\n"
             "time.sleep(60)",
             find_sock);
    c.exec_timeout_s = 1;
    shim_sandbox_close(sb);
    sb = open_sb(&c);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    shim_exec_result_free(&r);
    expect(sb, "2", SHIM_EXEC_OK,
           "[Note: the Python interpreter was restarted before this "
           "execution; its earlier state (variables, imports) was lost. Files "
           "in the working directory were kept.]\n2\n");
    shim_sandbox_close(sb);
}

/* Parses "[... N bytes of output truncated ...]" out of s. */
static size_t truncated_count(const char *s)
{
    const char *p = strstr(s, "\n[... ");
    size_t n = 0;

    assert_non_null(p);
    assert_int_equal(sscanf(p, "\n[... %zu bytes of output truncated", &n), 1);
    return n;
}

static size_t count_char(const char *s, char ch)
{
    size_t n = 0;

    for (; *s; s++)
        n += *s == ch;
    return n;
}

static int valid_utf8(const unsigned char *s)
{
    while (*s) {
        int k = *s < 0x80 ? 0 : (*s & 0xe0) == 0xc0 ? 1
                               : (*s & 0xf0) == 0xe0 ? 2
                               : (*s & 0xf8) == 0xf0 ? 3 : -1;
        if (k < 0)
            return 0;
        s++;
        while (k-- > 0)
            if ((*s++ & 0xc0) != 0x80)
                return 0;
    }
    return 1;
}

static void test_output_cap(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    c.output_cap = 1000;
    sb = open_sb(&c);
    run(sb, "print('x' * 100000)", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_true(r.logs_len <= 1000);
    assert_true(r.logs_len > 800);
    assert_int_equal(r.logs[0], 'x');
    assert_int_equal(r.logs[r.logs_len - 1], '\n');
    /* the note counts exactly what is missing */
    assert_int_equal(truncated_count(r.logs) + count_char(r.logs, 'x'),
                     100000);
    shim_exec_result_free(&r);

    /* far beyond what the backend reads: its own cut is merged */
    run(sb, "import sys\nsys.stdout.write('y' * 5000000)\nprint('END')", &r);
    assert_true(r.logs_len <= 1000);
    assert_true(strstr(r.logs, "END\n") != NULL);
    /* the 'y' of the note's "bytes" is not output */
    assert_int_equal(truncated_count(r.logs) + count_char(r.logs, 'y') - 1,
                     5000000);
    shim_exec_result_free(&r);

    /* multi-byte characters are never cut in half */
    run(sb, "print('\xc3\xa9' * 50001)", &r);
    assert_true(r.logs_len <= 1000);
    assert_true(valid_utf8((const unsigned char *)r.logs));
    assert_null(strchr(r.logs, '?'));
    shim_exec_result_free(&r);

    /* raw bytes that are not UTF-8, and NULs, are made text */
    expect(sb, "import os; os.write(1, b'a\\xff\\x00b\\n')", SHIM_EXEC_OK,
           "a??b\n5\n");
    shim_sandbox_close(sb);
}

static void test_children_killed_on_close(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    int i;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    /* a plain child, and a daemon in a session of its own */
    run(sb, "import subprocess\nsubprocess.Popen(['sleep', '1000.201'])\n"
            "subprocess.Popen(['sleep', '1000.202'], start_new_session=True)\n"
            "print('ok')",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    shim_exec_result_free(&r);
    /* Popen returns once the child's execve is under way (vfork): its
     * command line may show a moment later */
    for (i = 0; i < 200 && (count_host_procs("sleep", "1000.201", NULL) != 1 ||
                            count_host_procs("sleep", "1000.202", NULL) != 1);
         i++)
        usleep(10 * 1000);
    assert_int_equal(count_host_procs("sleep", "1000.201", NULL), 1);
    assert_int_equal(count_host_procs("sleep", "1000.202", NULL), 1);
    shim_sandbox_close(sb);
    /* close waits for the sandbox to end: nothing is left, right away */
    assert_int_equal(count_host_procs("sleep", "1000.201", NULL), 0);
    assert_int_equal(count_host_procs("sleep", "1000.202", NULL), 0);

    /* the same after a timeout, with the sandbox still open */
    c.exec_timeout_s = 1;
    sb = open_sb(&c);
    run(sb, "import subprocess\nsubprocess.Popen(['sleep', '1000.203'], "
            "start_new_session=True)\nprint('started', flush=True)\n"
            "while True: pass",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    shim_exec_result_free(&r);
    assert_int_equal(count_host_procs("sleep", "1000.203", NULL), 0);
    /* and the sandbox sees no process but its own PID 1 and the new
     * interpreter */
    expect(sb, "import os\nsorted(int(p) for p in os.listdir('/proc') "
               "if p.isdigit() and int(p) != os.getpid())",
           SHIM_EXEC_OK,
           "[Note: the Python interpreter was restarted before this "
           "execution; its earlier state (variables, imports) was lost. Files "
           "in the working directory were kept.]\n[1]\n");
    shim_sandbox_close(sb);
}

static void test_workdir(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    char outside[512], keep[600], code[2048];
    struct stat st;
    FILE *f;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    snprintf(outside, sizeof(outside), "%s/outside-XXXXXX", g_tmpdir);
    assert_non_null(mkdtemp(outside));
    snprintf(keep, sizeof(keep), "%s/keep.txt", outside);
    f = fopen(keep, "w");
    assert_non_null(f);
    fclose(f);
    /* the host directory does not exist in the sandbox; a link to it is a
     * dangling link, neither listed nor followed */
    snprintf(code, sizeof(code),
             "import os\nopen('out.txt', 'w').write('x')\n"
             "os.makedirs('sub/deeper', exist_ok=True)\n"
             "open('sub/deeper/b.csv', 'w').write('y')\n"
             "os.symlink('%s', 'link')\nos.symlink('/etc/passwd', 'pw')\n"
             "os.makedirs('locked/inner')\nos.chmod('locked', 0)\n"
             "print(os.getcwd(), os.path.exists('%s'))",
             outside, keep);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_string_equal(r.logs,
                        "/mnt/data False\n"
                        "[files in /mnt/data: out.txt, sub/deeper/b.csv]\n");
    assert_int_equal(r.nfiles, 2);
    assert_string_equal(r.files[0], "out.txt");
    assert_string_equal(r.files[1], "sub/deeper/b.csv");
    assert_true(r.files_changed);
    shim_exec_result_free(&r);

    /* no change, no line; a changed file (same name) is a change */
    run(sb, "print(len(os.listdir('.')))", &r);
    assert_string_equal(r.logs, "5\n");
    assert_false(r.files_changed);
    assert_int_equal(r.nfiles, 2);
    shim_exec_result_free(&r);
    expect(sb, "open('out.txt', 'a').write('more')\nNone", SHIM_EXEC_OK,
           "[files in /mnt/data: out.txt, sub/deeper/b.csv]\n");
    /* removing all files: nothing to list */
    run(sb, "import shutil\nos.chmod('locked', 0o700)\n"
            "for n in os.listdir('.'):\n"
            "    (shutil.rmtree if os.path.isdir(n) and not os.path.islink(n)"
            " else os.remove)(n)",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_string_equal(r.logs, "");
    assert_int_equal(r.nfiles, 0);
    assert_true(r.files_changed);
    shim_exec_result_free(&r);
    /* many files: the line stays short and says how many more */
    run(sb, "for i in range(300): open('file-%03d.txt' % i, 'w').close()",
        &r);
    assert_int_equal(r.nfiles, 300);
    assert_true(r.logs_len < 1100);
    assert_non_null(strstr(r.logs, "[files in /mnt/data: file-000.txt, "));
    assert_non_null(strstr(r.logs, " more]\n"));
    shim_exec_result_free(&r);
    /* files survive an interpreter restart */
    run(sb, "os._exit(0)", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    shim_exec_result_free(&r);
    expect_in(sb, "import os\nlen(os.listdir('.'))", SHIM_EXEC_OK, "\n300\n");

    shim_sandbox_close(sb);
    /* the host's directory was not touched */
    assert_int_equal(stat(keep, &st), 0);
    unlink(keep);
    rmdir(outside);
}

struct thread_arg {
    struct shim_config *c;
    struct shim_sandbox *sb;
    int rc;
};

static void *open_and_run(void *p)
{
    struct thread_arg *a = p;
    struct shim_exec_result r;

    a->rc = shim_sandbox_open(a->c, &a->sb);
    if (a->rc == 0) {
        a->rc = shim_sandbox_exec(a->sb, "x = 5", 5, &r);
        if (a->rc == 0 && r.status != SHIM_EXEC_OK)
            a->rc = -1;
        shim_exec_result_free(&r);
    }
    return NULL;
}

static void *close_it(void *p)
{
    shim_sandbox_close(((struct thread_arg *)p)->sb);
    return NULL;
}

/* A sandbox opened by a thread that then ends lives on: other threads use
 * and close it. */
static void test_other_threads(void **state)
{
    struct shim_config c;
    struct thread_arg a = {.c = &c};
    pthread_t t;

    (void)state;
    make_cfg(&c);
    assert_int_equal(pthread_create(&t, NULL, open_and_run, &a), 0);
    pthread_join(t, NULL);
    assert_int_equal(a.rc, 0);
    expect(a.sb, "import subprocess\nsubprocess.Popen(['sleep', '1000.211'])\n"
                 "x + 1", SHIM_EXEC_OK, "6\n");
    assert_int_equal(pthread_create(&t, NULL, close_it, &a), 0);
    pthread_join(t, NULL);
    assert_int_equal(count_host_procs("sleep", "1000.211", NULL), 0);
}

static const char *const *g_env;

static const char *table_env(const char *name, void *ctx)
{
    size_t i;

    (void)ctx;
    for (i = 0; g_env[i]; i += 2)
        if (!strcmp(g_env[i], name))
            return g_env[i + 1];
    return NULL;
}

static void count_warning(const char *msg, void *ctx)
{
    (void)msg;
    ++*(int *)ctx;
}

/* The sandbox's settings: defaults, sizes with suffixes, bad values. */
static void test_config_limits(void **state)
{
    static const char *const defaults[] = {NULL};
    static const char *const set[] = {
        "CODESHIM_MEMORY", "512M", "CODESHIM_PROCS", "64",
        "CODESHIM_FILE_SIZE", "10MiB", "CODESHIM_DISK", "2g",
        "CODESHIM_CPU_TIME", "90", "CODESHIM_UNSAFE_NO_ISOLATION", "1",
        "CODESHIM_BWRAP", "/opt/bwrap", "CODESHIM_SANDBOX_HOST", "0", NULL};
    static const char *const bad[] = {
        "CODESHIM_MEMORY", "1M", "CODESHIM_PROCS", "3",
        "CODESHIM_FILE_SIZE", "12X", "CODESHIM_DISK", "-5G",
        "CODESHIM_CPU_TIME", "0", "CODESHIM_UNSAFE_NO_ISOLATION", "0",
        "CODESHIM_SANDBOX_HOST", "maybe", NULL};
    struct shim_config c;
    int warnings = 0;

    (void)state;
    g_env = defaults;
    shim_config_parse(&c, table_env, count_warning, &warnings);
    assert_int_equal(warnings, 0);
    assert_true(c.memory_limit == 1ULL << 30);
    assert_int_equal(c.procs_limit, 256);
    assert_true(c.file_size_limit == 512ULL << 20);
    assert_true(c.disk_limit == 1ULL << 30);
    assert_int_equal(c.cpu_time_s, 3600);
    assert_int_equal(c.unsafe_no_isolation, 0);
    assert_string_equal(c.bwrap, "/usr/bin/bwrap");
    assert_int_equal(c.sandbox_host, 1);

    g_env = set;
    shim_config_parse(&c, table_env, count_warning, &warnings);
    assert_int_equal(warnings, 0);
    assert_true(c.memory_limit == 512ULL << 20);
    assert_int_equal(c.procs_limit, 64);
    assert_true(c.file_size_limit == 10ULL << 20);
    assert_true(c.disk_limit == 2ULL << 30);
    assert_int_equal(c.cpu_time_s, 90);
    assert_int_equal(c.unsafe_no_isolation, 1);
    assert_string_equal(c.bwrap, "/opt/bwrap");
    assert_int_equal(c.sandbox_host, 0);

    g_env = bad; /* each logged, each default */
    shim_config_parse(&c, table_env, count_warning, &warnings);
    assert_int_equal(warnings, 6);
    assert_true(c.memory_limit == 1ULL << 30);
    assert_int_equal(c.procs_limit, 256);
    assert_true(c.file_size_limit == 512ULL << 20);
    assert_true(c.disk_limit == 1ULL << 30);
    assert_int_equal(c.cpu_time_s, 3600);
    assert_int_equal(c.unsafe_no_isolation, 0);
    assert_int_equal(c.sandbox_host, 1);
}

static void test_matplotlib(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    run(sb, "import matplotlib", &r);
    if (r.status != SHIM_EXEC_OK) {
        shim_exec_result_free(&r);
        shim_sandbox_close(sb);
        skip(); /* python3-matplotlib is not installed */
    }
    shim_exec_result_free(&r);
    run(sb, "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3])\nplt.figure()\nplt.bar([1], [2])\n"
            "plt.show()\nprint('done')",
        &r);
    if (r.status != SHIM_EXEC_OK)
        print_error("%s\n", r.logs);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_int_equal(r.nimages, 2);
    assert_string_equal(r.images[0].mime, "image/png");
    assert_true(!strncmp(r.images[0].base64, "iVBORw0KGgo", 11)); /* PNG */
    assert_true(!strncmp(r.images[1].base64, "iVBORw0KGgo", 11));
    assert_string_equal(r.logs, "done\n[image produced: figure 1 (PNG)]\n"
                                "[image produced: figure 2 (PNG)]\n");
    shim_exec_result_free(&r);
    /* figures were closed: the next execution returns none */
    run(sb, "len(plt.get_fignums())", &r);
    assert_int_equal(r.nimages, 0);
    assert_string_equal(r.logs, "0\n");
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

static void test_bad_args(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb = (struct shim_sandbox *)&c;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    assert_int_equal(shim_sandbox_exec(NULL, "1", 1, &r), -EINVAL);
    snprintf(c.sandbox, sizeof(c.sandbox), "nope");
    assert_int_equal(shim_sandbox_open(&c, &sb), -EINVAL);
    assert_null(sb);
    shim_sandbox_close(NULL);
    shim_exec_result_free(NULL);

    /* a missing interpreter: open works, exec says why */
    make_cfg(&c);
    snprintf(c.python, sizeof(c.python), "/nonexistent/python3");
    sb = open_sb(&c);
    run(sb, "1", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "/nonexistent/python3"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_and_value),
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_state),
        cmocka_unit_test(test_container_id),
        cmocka_unit_test(test_exception),
        cmocka_unit_test(test_subprocess_output),
        cmocka_unit_test(test_clean_env),
        cmocka_unit_test(test_fds),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_exec_until_stops),
        cmocka_unit_test(test_worker_death),
        cmocka_unit_test(test_worker_death_unseen),
        cmocka_unit_test(test_forged_frames),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_children_killed_on_close),
        cmocka_unit_test(test_workdir),
        cmocka_unit_test(test_other_threads),
        cmocka_unit_test(test_config_limits),
        cmocka_unit_test(test_matplotlib),
        cmocka_unit_test(test_bad_args),
    };

    signal(SIGPIPE, SIG_DFL); /* a SIGPIPE from the library would kill us */
    return cmocka_run_group_tests(tests, setup, teardown);
}
