/* test_sandbox_fork.c - sandboxes forked from the local backend's fork
 * server (local_zygote.c, worker.py's _zygote): two of them never share a
 * random state nor see each other; the preloaded modules come from the
 * server (no file read to import them) while a fresh sandbox's globals and
 * sys.modules look as a cold one's; a virtualenv named by CODESHIM_PYTHON
 * works; a stuck PID 1 is killed at close. Runs as root (make sandbox) and
 * as an ordinary user. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/log.h"
#include "sandbox/local/local_zygote.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include "test_sandbox_util.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

/* A sandbox forked from the server (the fork counter says so). */
static struct shim_sandbox *open_forked(const struct shim_config *c)
{
    unsigned long forks = zstats().forks;
    struct shim_sandbox *sb = open_sb(c);

    assert_int_equal(zstats().forks, forks + 1);
    return sb;
}

/* The output of one execution (status OK), malloc'd. */
static char *output_of(struct shim_sandbox *sb, const char *src)
{
    struct shim_exec_result r;
    char *out;

    run(sb, src, &r);
    if (r.status != SHIM_EXEC_OK)
        print_error("status %d:\n%s\n", r.status, r.logs);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    out = strdup(r.logs);
    shim_exec_result_free(&r);
    return out;
}

#define RANDOMS                                                                \
    "import os, random, uuid\n"                                                \
    "try:\n"                                                                   \
    "    import numpy\n"                                                       \
    "    n = numpy.random.random()\n"                                          \
    "except ImportError:\n"                                                    \
    "    n = random.random()\n"                                                \
    "print(random.random())\nprint(n)\nprint(uuid.uuid4())\n"                  \
    "print(os.urandom(8).hex())\nprint(hash(object()) & 0)\n"

/* Each line of a and b differs but the last (a constant 0). */
static void all_differ(const char *a, const char *b)
{
    char la[128], lb[128];
    int n = 0;

    while (*a && *b) {
        size_t ia = strcspn(a, "\n"), ib = strcspn(b, "\n");

        assert_true(ia < sizeof(la) && ib < sizeof(lb));
        memcpy(la, a, ia);
        la[ia] = '\0';
        memcpy(lb, b, ib);
        lb[ib] = '\0';
        if (strcmp(la, "0") != 0) {
            if (!strcmp(la, lb))
                print_error("shared random state: %s\n", la);
            assert_string_not_equal(la, lb);
            n++;
        }
        a += ia + (a[ia] == '\n');
        b += ib + (b[ib] == '\n');
    }
    assert_int_equal(n, 4);
}

/* A process that never asks for a fork server (a program: only the
 * sandbox and session hosts do, through shim_sandbox_keep_warm) starts
 * none of its own however many sandboxes it opens: each starts cold. */
static void test_no_server_of_a_programs_own(void **state)
{
    struct shim_local_zygote_stats before, after;
    struct shim_config c;
    struct shim_sandbox *sb;
    int i;

    (void)state;
    make_cfg(&c);
    snprintf(c.preload_modules, sizeof(c.preload_modules), "json"); /* settings no test warms */
    before = zstats();
    for (i = 0; i < 3; i++) {
        sb = open_sb(&c);
        expect(sb, "print('cold')", SHIM_EXEC_OK, "cold\n");
        shim_sandbox_close(sb);
    }
    after = zstats();
    assert_int_equal(after.servers_started, before.servers_started);
    assert_int_equal(after.forks, before.forks);
}

/* Two sandboxes forked from one server: different random states, and
 * neither sees the other's files, processes, sockets or IPC. */
static void test_forks_apart(void **state)
{
    struct shim_config c;
    struct shim_sandbox *a, *b;
    char *ra, *rb, *out;

    (void)state;
    make_cfg(&c);
    server_up(&c);
    a = open_forked(&c);
    b = open_forked(&c);
    ra = output_of(a, RANDOMS);
    rb = output_of(b, RANDOMS);
    all_differ(ra, rb);
    free(ra);
    free(rb);
    free(output_of(a,
                   "import ctypes, os, socket, subprocess\n"
                   "for p in ['/mnt/data/fork-a', '/tmp/fork-a', "
                   "'/dev/shm/fork-a']:\n"
                   "    open(p, 'w').write('A')\n"
                   "subprocess.Popen(['sleep', '1000.801'])\n"
                   "s = socket.socket(socket.AF_UNIX)\n"
                   "s.bind('\\0codeshim-fork-a')\ns.listen()\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "print('shm', libc.shmget(0x5eee, 4096, 0o1666))"));
    out = output_of(b,
                    "import ctypes, glob, os, socket\n"
                    "found = [p for d in ['/mnt/data', '/tmp', '/dev/shm'] "
                    "for p in glob.glob(d + '/fork-*')]\n"
                    "print('FOUND' if found else 'no files', found)\n"
                    "procs = [p for p in os.listdir('/proc') if p.isdigit() "
                    "and int(p) not in (1, os.getpid())]\n"
                    "print('PROCS' if procs else 'no procs', procs)\n"
                    "s = socket.socket(socket.AF_UNIX)\n"
                    "try:\n"
                    "    s.connect('\\0codeshim-fork-a')\n"
                    "    print('CONNECTED')\n"
                    "except OSError:\n"
                    "    print('no socket')\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "print('SHM' if libc.shmget(0x5eee, 0, 0) >= 0 else "
                    "'no shm')\n"
                    "print(os.getpid(), os.getuid(), open('/proc/1/cmdline')"
                    ".read() == '')");
    if (!strstr(out, "no files") || !strstr(out, "no procs") ||
        !strstr(out, "no socket") || !strstr(out, "no shm"))
        print_error("containment broken:\n%s\n", out);
    assert_non_null(strstr(out, "no files"));
    assert_non_null(strstr(out, "no procs"));
    assert_non_null(strstr(out, "no socket"));
    assert_non_null(strstr(out, "no shm"));
    free(out);
    assert_int_equal(count_host_procs("sleep", "1000.801", NULL), 1);
    shim_sandbox_close(a);
    shim_sandbox_close(b);
    assert_int_equal(count_host_procs("sleep", "1000.801", NULL), 0);
}

/* The preloaded modules are in the sandbox before its first execution
 * (importing them opens no file), yet a fresh sandbox shows none of them:
 * not in its globals, not in sys.modules until imported. */
static void test_preloaded(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    snprintf(c.preload_modules, sizeof(c.preload_modules), "%s",
             "json,no_such_module_zz,email.parser");
    server_up(&c);
    sb = open_forked(&c);
    expect(sb,
           "import sys\n"
           "print(sorted(k for k in globals() if not k.startswith('__')))\n"
           "print([m for m in ('json', 'email', 'email.parser') "
           "if m in sys.modules])\n"
           "opened = []\n"
           "sys.addaudithook(lambda e, a: opened.append(a[0]) "
           "if e == 'open' else None)\n"
           "import json, email.parser\n"
           "print(json.dumps([1]), email.parser.Parser.__name__, "
           "json.__spec__.name, [p for p in opened if str(p).endswith('.py') "
           "or str(p).endswith('.pyc')])\n"
           "import importlib\nimportlib.reload(json).__name__",
           SHIM_EXEC_OK, "['sys']\n[]\n[1] Parser json []\n'json'\n");
    shim_sandbox_close(sb);
}

/* CODESHIM_PYTHON names a virtualenv's python (its own site-packages, the
 * system's too): sandboxes start from it, cold and forked. */
static void test_venv(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char cmd[1024], site[512];
    FILE *f;

    (void)state;
    make_cfg(&c);
    snprintf(cmd, sizeof(cmd),
             "/usr/bin/python3 -m venv --without-pip --system-site-packages "
             "%s/venv", g_tmpdir);
    assert_int_equal(system(cmd), 0);
    snprintf(site, sizeof(site), "%s/venv/lib/python3.%s/site-packages/"
             "venv_only_mod.py", g_tmpdir, "11");
    f = fopen(site, "w");
    if (!f) { /* another minor version: find the directory */
        snprintf(cmd, sizeof(cmd), "%s/venv/bin/python -c 'import site; "
                 "print(site.getsitepackages()[0])'", g_tmpdir);
        f = popen(cmd, "r");
        assert_non_null(f);
        assert_non_null(fgets(site, sizeof(site) - 20, f));
        pclose(f);
        site[strcspn(site, "\n")] = '\0';
        strcat(site, "/venv_only_mod.py");
        f = fopen(site, "w");
    }
    assert_non_null(f);
    fputs("VALUE = 'from the venv'\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "chmod -R a+rX %s", g_tmpdir);
    assert_int_equal(system(cmd), 0);
    snprintf(c.python, sizeof(c.python), "%s/venv/bin/python", g_tmpdir);
    snprintf(c.preload_modules, sizeof(c.preload_modules), "venv_only_mod");
    sb = open_sb(&c); /* cold: the first */
    expect(sb, "import sys, venv_only_mod\nprint(sys.prefix != "
               "sys.base_prefix, venv_only_mod.VALUE)",
           SHIM_EXEC_OK, "True from the venv\n");
    shim_sandbox_close(sb);
    server_up(&c);
    sb = open_forked(&c);
    expect(sb, "import sys, venv_only_mod\nprint(sys.prefix != "
               "sys.base_prefix, venv_only_mod.VALUE)",
           SHIM_EXEC_OK, "True from the venv\n");
    shim_sandbox_close(sb);
    snprintf(cmd, sizeof(cmd), "rm -rf %s/venv", g_tmpdir);
    assert_int_equal(system(cmd), 0);
}

/* A forked sandbox whose PID 1 does not end when its control socket is
 * closed (stopped here from the host, as a hung supervisor would be): the
 * close still ends it, through the life socket (b"K"), and everything of
 * it is gone when the close returns. */
static void test_stuck_pid1_killed(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char marker[32], code[300], logf[300], log[4096];
    pid_t worker, sup;
    size_t n;
    FILE *f;

    (void)state;
    make_cfg(&c);
    server_up(&c);
    sb = open_forked(&c);
    snprintf(marker, sizeof(marker), "1000.9%05d", (int)(getpid() % 100000));
    snprintf(code, sizeof(code),
             "import subprocess\n_ = subprocess.Popen(['sleep', '%s'])", marker);
    free(output_of(sb, code));
    sandbox_of("sleep", marker, &worker, &sup);
    assert_int_equal(kill(sup, SIGSTOP), 0);
    /* the log says whether b"K" ended it, or only the cgroup's kill after
     * (as root a cgroup is there too, which would hide a K not obeyed) */
    snprintf(logf, sizeof(logf), "%s/stuck.log", g_tmpdir);
    shim_log_setup(SHIM_LOG_WARN, logf);
    shim_sandbox_close(sb);
    shim_log_setup(SHIM_LOG_WARN, "");
    assert_int_equal(kill(sup, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_int_equal(wait_host_procs_gone("sleep", marker, 10000), 0);
    f = fopen(logf, "r");
    n = f ? fread(log, 1, sizeof(log) - 1, f) : 0;
    log[n] = '\0';
    if (f)
        fclose(f);
    unlink(logf);
    if (strstr(log, "did not end"))
        print_error("%s", log);
    assert_null(strstr(log, "did not end"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_server_of_a_programs_own),
        cmocka_unit_test(test_forks_apart),
        cmocka_unit_test(test_preloaded),
        cmocka_unit_test(test_venv),
        cmocka_unit_test(test_stuck_pid1_killed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
