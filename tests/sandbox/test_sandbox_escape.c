/* test_sandbox_escape.c - code no one has read tries to break out of the
 * local sandbox; each test fails if containment breaks. The kinds of escape
 * are these: host files, secrets
 * in the environment, writes outside /mnt/data and /tmp, network, other
 * processes and signals, memory, fork storms, disk fill, output floods, CPU,
 * endless loops and daemons, the kernel surface (seccomp, capabilities,
 * no_new_privs), other sandboxes, persistence, and the host being killed.
 * Also: a machine where the isolation cannot be set up runs nothing.
 *
 * Runs as root (CI) and as an ordinary user (tests/integration runs this
 * binary again as one). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sandbox/sandbox.h"
#include "system/config.h"

#include "test_sandbox_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

/* Formats code into a static buffer (one at a time). */
__attribute__((format(printf, 1, 2))) static const char *code(const char *fmt,
                                                               ...)
{
    static char buf[8192];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    return buf;
}

/* Runs code expecting OK and logs without any of the words in bad (a
 * NULL-terminated list), with every word in good. */
static void expect_clean(struct shim_sandbox *sb, const char *src,
                         const char *const *good, const char *const *bad)
{
    struct shim_exec_result r;
    size_t i;

    run(sb, src, &r);
    for (i = 0; bad && bad[i]; i++)
        if (strstr(r.logs, bad[i]))
            print_error("containment broken: found \"%s\" in:\n%s\n", bad[i],
                        r.logs);
    for (i = 0; good && good[i]; i++)
        if (!strstr(r.logs, good[i]))
            print_error("missing \"%s\" in:\n%s\n", good[i], r.logs);
    if (r.status != SHIM_EXEC_OK)
        print_error("status %d:\n%s\n", r.status, r.logs);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    for (i = 0; bad && bad[i]; i++)
        assert_null(strstr(r.logs, bad[i]));
    for (i = 0; good && good[i]; i++)
        assert_non_null(strstr(r.logs, good[i]));
    shim_exec_result_free(&r);
}

/* 1. host files: secrets, home directories, the program's own files, other
 * processes' environment. */
static void test_host_files(void **state)
{
    static const char *const bad[] = {"SECRET-", "root:", "READ ", NULL};
    static const char *const good[] = {"done", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    char cwdfile[600], home[256];
    FILE *f;

    (void)state;
    /* a file of "the program": in its working directory, by full path */
    snprintf(cwdfile, sizeof(cwdfile), "%s/program-secret.txt", g_tmpdir);
    f = fopen(cwdfile, "w");
    assert_non_null(f);
    fputs("SECRET-FILE\n", f);
    fclose(f);
    setenv("CODESHIM_TEST_SECRET", "SECRET-ENV", 1);
    snprintf(home, sizeof(home), "%s", getenv("HOME") ? getenv("HOME") : "/root");
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(
        sb,
        code("import os, glob\n"
             "paths = ['/etc/shadow', '/etc/gshadow', '/etc/sudoers', "
             "'/etc/ssh/ssh_host_rsa_key', '/root/.bash_history', "
             "'/root/.ssh/id_rsa', '%s/.ssh/id_rsa', '%s', '/proc/%d/environ',"
             " '/proc/1/environ', '/proc/1/mem', '/var/log/syslog', "
             "'/home', '/sys/kernel/notes']\n"
             "paths += glob.glob('/home/*/.ssh/*') + glob.glob('/root/*')\n"
             "for p in paths:\n"
             "    try:\n"
             "        d = open(p, 'rb').read(4096)\n"
             "        print('READ', p, d[:40])\n"
             "    except OSError:\n"
             "        pass\n"
             "for p in ['/root', '/var', '/srv', '/opt', '/sys', '%s']:\n"
             "    if os.path.exists(p) and os.listdir(p):\n"
             "        print('READ dir', p, os.listdir(p)[:5])\n"
             "if os.listdir('/home') != ['sandbox']:\n"
             "    print('READ dir /home', os.listdir('/home'))\n"
             "system = {'bin', 'dev', 'etc', 'home', 'lib', 'lib32', 'lib64', "
             "'libx32', 'mnt', 'proc', 'sbin', 'tmp', 'usr'}\n"
             "if set(os.listdir('/')) - system:\n"
             "    print('READ root', os.listdir('/'))\n"
             "etc = {'alternatives', 'debian_version', 'fonts', 'group', "
             "'ld.so.cache', 'localtime', 'matplotlibrc', 'mime.types', "
             "'os-release', 'passwd', 'python3', 'timezone'}\n"
             "if {e for e in os.listdir('/etc') if not "
             "e.startswith('python3.')} - etc:\n"
             "    print('READ etc', os.listdir('/etc'))\n"
             "if open('/etc/passwd').read().count('\\n') != 2:\n"
             "    print('READ passwd', open('/etc/passwd').read())\n"
             "for pid in os.listdir('/proc'):\n"
             "    if pid.isdigit():\n"
             "        try:\n"
             "            print(open('/proc/%%s/environ' %% pid).read())\n"
             "        except OSError:\n"
             "            pass\n"
             "print('done')",
             home, cwdfile, (int)getpid(), g_tmpdir),
        good, bad);
    shim_sandbox_close(sb);
    unsetenv("CODESHIM_TEST_SECRET");
    unlink(cwdfile);
}

/* 2. secrets in the environment: nothing inherited, not even by children. */
static void test_env_secrets(void **state)
{
    static const char *const bad[] = {"sk-live", "LD_PRELOAD", "CODESHIM",
                                      "OPENAI", NULL};
    static const char *const good[] = {"PATH", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    setenv("OPENAI_API_KEY", "sk-live-should-not-leak", 1);
    setenv("CODESHIM_SECRET", "sk-live-2", 1);
    setenv("LD_PRELOAD", "/nonexistent/libsk-live.so", 1);
    make_cfg(&c);
    sb = open_sb(&c);
    unsetenv("LD_PRELOAD");
    expect_clean(sb,
                 "import os, subprocess\nprint(dict(os.environ))\n"
                 "print(open('/proc/self/environ').read())\n"
                 "print(subprocess.run(['env'], capture_output=True, "
                 "text=True).stdout)",
                 good, bad);
    unsetenv("OPENAI_API_KEY");
    unsetenv("CODESHIM_SECRET");
    shim_sandbox_close(sb);
}

/* 3. writes outside /mnt/data and /tmp, traversal, symlinks. */
static void test_writes_outside(void **state)
{
    static const char *const bad[] = {"WROTE", NULL};
    static const char *const good[] = {"ok /mnt/data/a", "ok /tmp/b",
                                       "ok /home/sandbox/c", "ok sub/../d",
                                       NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    char target[600], src[4096];
    struct stat st;

    (void)state;
    snprintf(target, sizeof(target), "%s/host-target", g_tmpdir);
    make_cfg(&c);
    sb = open_sb(&c);
    snprintf(src, sizeof(src), "%s",
             code("import os\n"
                  "os.makedirs('sub', exist_ok=True)\n"
                  "os.symlink('/etc/passwd', 'pw')\n"
                  "os.symlink('/usr/bin', 'ub')\n"
                  "os.symlink('%s', 'host')\n"
                  "for p in ['/etc/passwd', '/etc/x', '/usr/x', '/usr/bin/x', "
                  "'/x', '/home/x', '/mnt/x', '/dev/x', '/proc/x', "
                  "'/proc/sys/kernel/hostname', '/proc/sysrq-trigger', "
                  "'/root/x', '/mnt/data/../../etc/x', '../x', "
                  "'/tmp/../usr/x', 'pw', 'ub/x', 'host', '%s', "
                  "'/proc/1/root/etc/x', '/proc/self/root/usr/x']:\n"
                  "    try:\n"
                  "        open(p, 'a').write('x')\n"
                  "        print('WROTE', p)\n"
                  "    except OSError:\n"
                  "        pass\n"
                  "for p in ['/mnt/data/a', '/tmp/b', '/home/sandbox/c', "
                  "'sub/../d']:\n"
                  "    open(p, 'w').write('x')\n"
                  "    print('ok', p)\n"
                  "for d in ['/usr', '/etc', '/']:\n"
                  "    try:\n"
                  "        os.mkdir(d + '/newdir')\n"
                  "        print('WROTE dir', d)\n"
                  "    except OSError:\n"
                  "        pass\n"
                  "    try:\n"
                  "        os.chmod(d, 0o777)\n"
                  "        print('WROTE mode', d)\n"
                  "    except OSError:\n"
                  "        pass",
                  target, target));
    expect_clean(sb, src, good, bad);
    shim_sandbox_close(sb);
    assert_int_equal(stat(target, &st), -1); /* nothing reached the host */
    assert_int_equal(errno, ENOENT);
}

/* 4. network: no socket but Unix ones, no interface but a private
 * loopback, no host service reachable (TCP, UDP, DNS, metadata address,
 * abstract and path Unix sockets). */
static void test_network(void **state)
{
    static const char *const bad[] = {"CONNECTED", "OPENED", "RESOLVED",
                                      NULL};
    static const char *const good[] = {"interfaces ['lo']", "done", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr_un un = {.sun_family = AF_UNIX}, abs = {.sun_family = AF_UNIX};
    socklen_t len = sizeof(in);
    char abs_name[64];
    int tcp, upath, uabs;

    (void)state;
    tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(tcp >= 0);
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(tcp, (struct sockaddr *)&in, sizeof(in)), 0);
    assert_int_equal(listen(tcp, 8), 0);
    assert_int_equal(getsockname(tcp, (struct sockaddr *)&in, &len), 0);
    upath = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    snprintf(un.sun_path, sizeof(un.sun_path), "%.90s/h.sock", g_tmpdir);
    assert_int_equal(bind(upath, (struct sockaddr *)&un, sizeof(un)), 0);
    assert_int_equal(listen(upath, 8), 0);
    uabs = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    snprintf(abs_name, sizeof(abs_name), "codeshim-test-%d", (int)getpid());
    memcpy(abs.sun_path + 1, abs_name, strlen(abs_name));
    assert_int_equal(bind(uabs, (struct sockaddr *)&abs,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                      1 + strlen(abs_name))),
                     0);
    assert_int_equal(listen(uabs, 8), 0);

    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(
        sb,
        code("import socket\n"
             "S = socket.SOCK_STREAM\n"
             "D = socket.SOCK_DGRAM\n"
             "tries = [(socket.AF_INET, S, ('127.0.0.1', %d)),\n"
             "         (socket.AF_INET, D, ('8.8.8.8', 53)),\n"
             "         (socket.AF_INET, S, ('169.254.169.254', 80)),\n"
             "         (socket.AF_INET, S, ('1.1.1.1', 443)),\n"
             "         (socket.AF_INET6, S, ('::1', %d)),\n"
             "         (socket.AF_UNIX, S, '\\0%s'),\n"
             "         (socket.AF_UNIX, S, '%s')]\n"
             "for fam, typ, addr in tries:\n"
             "    try:\n"
             "        s = socket.socket(fam, typ)\n"
             "        s.settimeout(3)\n"
             "        s.connect(addr)\n"
             "        if typ == D:\n"
             "            s.send(b'x')\n"
             "        print('CONNECTED', addr)\n"
             "    except OSError as e:\n"
             "        print('refused', addr, e.errno)\n"
             "for fam in (socket.AF_NETLINK, socket.AF_PACKET, "
             "socket.AF_INET):\n"
             "    try:\n"
             "        socket.socket(fam, socket.SOCK_RAW)\n"
             "        print('OPENED', fam)\n"
             "    except OSError as e:\n"
             "        print('no raw socket', fam, e.errno)\n"
             "try:\n"
             "    socket.getaddrinfo('example.com', 80)\n"
             "    print('RESOLVED')\n"
             "except OSError:\n"
             "    pass\n"
             "lines = open('/proc/net/dev').read().splitlines()[2:]\n"
             "print('interfaces', sorted(l.split(':')[0].strip() "
             "for l in lines))\n"
             "print('done')",
             ntohs(in.sin_port), ntohs(in.sin_port), abs_name, un.sun_path),
        good, bad);
    shim_sandbox_close(sb);
    /* and the host's listeners never saw a connection */
    assert_int_equal(accept(tcp, NULL, NULL), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    assert_int_equal(accept(upath, NULL, NULL), -1);
    assert_int_equal(accept(uabs, NULL, NULL), -1);
    close(tcp);
    close(upath);
    close(uabs);
    unlink(un.sun_path);
}

/* 5a. memory: an allocation over the limit fails in the code (which goes
 * on), in a child too, and for shared mappings. */
static void test_memory(void **state)
{
    static const char *const good[] = {"big: MemoryError", "shared: 12",
                                       "child: MemoryError", "small ok",
                                       NULL};
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    c.memory_limit = 256u << 20;
    sb = open_sb(&c);
    expect_clean(sb,
                 "import mmap, subprocess, sys\n"
                 "try:\n"
                 "    x = bytearray(2 << 30)\n"
                 "    print('big: allocated')\n"
                 "except MemoryError:\n"
                 "    print('big: MemoryError')\n"
                 "try:\n"
                 "    m = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED | "
                 "mmap.MAP_ANONYMOUS)\n"
                 "    print('shared: mapped')\n"
                 "except OSError as e:\n"
                 "    print('shared:', e.errno)\n"
                 "p = subprocess.run([sys.executable, '-c', "
                 "'bytearray(1 << 30)'], capture_output=True, text=True)\n"
                 "print('child:', p.stderr.strip().splitlines()[-1])\n"
                 "y = bytearray(64 << 20)\n"
                 "print('small ok')",
                 good, NULL);
    shim_sandbox_close(sb);
}

/* 5b. fork storms: the task limit holds for processes and threads, a real
 * fork bomb ends at the time limit, and the next execution works. */
static void test_fork_storm(void **state)
{
    static const char *const good[] = {"processes capped True 11",
                                       "threads capped True", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    c.procs_limit = 32;
    c.exec_timeout_s = 3;
    sb = open_sb(&c);
    expect_clean(sb,
                 "import os, time, threading\n"
                 "kids, err = [], None\n"
                 "try:\n"
                 "    for i in range(1000):\n"
                 "        pid = os.fork()\n"
                 "        if pid == 0:\n"
                 "            time.sleep(30)\n"
                 "            os._exit(0)\n"
                 "        kids.append(pid)\n"
                 "except OSError as e:\n"
                 "    err = e.errno\n"
                 "print('processes capped', len(kids) < 32, err)\n"
                 "for k in kids:\n"
                 "    os.kill(k, 9)\n"
                 "    os.waitpid(k, 0)\n"
                 "ev = threading.Event()\n"
                 "ts = []\n"
                 "try:\n"
                 "    for i in range(1000):\n"
                 "        t = threading.Thread(target=ev.wait)\n"
                 "        t.start()\n"
                 "        ts.append(t)\n"
                 "except RuntimeError:\n"
                 "    pass\n"
                 "ev.set()\n"
                 "print('threads capped', len(ts) < 32)",
                 good, NULL);
    /* a real bomb: every process forks forever */
    run(sb, "import os\nwhile True:\n    try:\n        os.fork()\n"
            "    except OSError:\n        pass",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    shim_exec_result_free(&r);
    expect_in(sb, "import os\nlen([p for p in os.listdir('/proc') "
                  "if p.isdigit()])",
              SHIM_EXEC_OK, "\n2\n"); /* PID 1 and the new interpreter */
    shim_sandbox_close(sb);
}

/* 5c. disk fill: /mnt/data, /tmp (and HOME in it) and /dev/shm are small
 * private tmpfs; one file cannot pass the file size limit; the host's disk
 * is never written. */
static void test_disk_fill(void **state)
{
    static const char *const good[] = {
        "/mnt/data ENOSPC", "/tmp ENOSPC", "/home/sandbox ENOSPC",
        "/dev/shm ENOSPC", "big EFBIG", "size 16", "again ok", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    c.disk_limit = 16u << 20;
    c.file_size_limit = 8u << 20;
    sb = open_sb(&c);
    expect_clean(sb,
                 "import errno, os, shutil\n"
                 "def fill(d):\n"
                 "    try:\n"
                 "        for i in range(100):\n"
                 "            with open('%s/f%d' % (d, i), 'wb') as f:\n"
                 "                f.write(b'x' * (4 << 20))\n"
                 "        return 'wrote 400M'\n"
                 "    except OSError as e:\n"
                 "        return errno.errorcode[e.errno]\n"
                 "for d in ['/mnt/data', '/tmp', '/dev/shm']:\n"
                 "    print(d, fill(d))\n"
                 "print('/home/sandbox', fill('/home/sandbox'))\n"
                 "for d in ['/mnt/data', '/tmp', '/dev/shm']:\n"
                 "    for n in os.listdir(d):\n"
                 "        os.remove(os.path.join(d, n))\n"
                 "try:\n"
                 "    open('big', 'wb').write(b'x' * (9 << 20))\n"
                 "    print('big wrote')\n"
                 "except OSError as e:\n"
                 "    print('big', errno.errorcode[e.errno])\n"
                 "os.remove('big')\n"
                 "print('size', shutil.disk_usage('/mnt/data').total >> 20)\n"
                 "open('small', 'w').write('x')\n"
                 "print('again ok')",
                 good, NULL);
    shim_sandbox_close(sb);
    assert_true(dir_is_empty(g_tmpdir));
}

/* 5d. output floods: capped with a note, whether the code ends or not. */
static void test_output_flood(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    c.output_cap = 2000;
    c.exec_timeout_s = 2;
    sb = open_sb(&c);
    run(sb, "import os\nos.write(1, b'y' * (20 << 20))\nprint('END')", &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_true(r.logs_len <= 2000);
    assert_non_null(strstr(r.logs, "bytes of output truncated"));
    assert_non_null(strstr(r.logs, "END\n"));
    shim_exec_result_free(&r);
    run(sb, "import subprocess\nsubprocess.Popen(['yes'])\n"
            "while True:\n    print('x' * 10000)",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    assert_true(r.logs_len <= 2000);
    assert_non_null(strstr(r.logs, "bytes of output truncated"));
    assert_non_null(strstr(r.logs, "timed out"));
    shim_exec_result_free(&r);
    /* a background writer left over does not leak into the next output */
    run(sb, "import subprocess\nsubprocess.Popen(['yes', 'LEFTOVER'])\n"
            "print('first')",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    shim_exec_result_free(&r);
    expect_in(sb, "import time\ntime.sleep(0.2)\nprint('second')",
              SHIM_EXEC_OK, "second\n");
    run(sb, "print('third')", &r);
    assert_null(strstr(r.logs, "LEFTOVER"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

/* 5e. CPU time: a process over the limit is killed, even while the wall
 * clock would still allow it. */
static void test_cpu_time(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    double t0;

    (void)state;
    make_cfg(&c);
    c.cpu_time_s = 1;
    c.exec_timeout_s = 30;
    sb = open_sb(&c);
    t0 = now_s();
    run(sb, "while True: pass", &r);
    assert_true(now_s() - t0 < 10);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "signal 24"));
    assert_non_null(strstr(r.logs, "CPU time limit"));
    shim_exec_result_free(&r);
    expect_in(sb, "print('fresh')", SHIM_EXEC_OK, "fresh\n");
    shim_sandbox_close(sb);
}

/* 6. outliving the time limit: double-forked daemons in sessions of their
 * own die with the execution that started them. */
static void test_daemons_die(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    c.exec_timeout_s = 2;
    sb = open_sb(&c);
    run(sb, "import os, signal\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    if os.fork() == 0:\n"
            "        os.execvp('sleep', ['sleep', '1000.301'])\n"
            "    os._exit(0)\n"
            "import time\n"
            "time.sleep(0.3)\n"
            "print('daemon started', flush=True)\n"
            "while True:\n    pass",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_TIMEOUT);
    assert_non_null(strstr(r.logs, "daemon started"));
    shim_exec_result_free(&r);
    assert_int_equal(count_host_procs("sleep", "1000.301", NULL), 0);
    shim_sandbox_close(sb);
}

/* 7. kernel surface: seccomp, capabilities, no_new_privs, other ABIs. */
static void test_kernel_surface(void **state)
{
    static const char *const good[] = {
        "ptrace EPERM",          "process_vm_readv EPERM",
        "process_vm_writev EPERM", "bpf EPERM",
        "mount EPERM",           "umount2 EPERM",
        "unshare EPERM",         "setns EPERM",
        "keyctl EPERM",          "add_key EPERM",
        "request_key EPERM",     "io_uring_setup EPERM",
        "perf_event_open EPERM", "kexec_load EPERM",
        "init_module EPERM",     "finit_module EPERM",
        "personality EPERM",     "userfaultfd EPERM",
        "pidfd_getfd EPERM",     "open_by_handle_at EPERM",
        "clone3 ENOSYS",         "clone_newuser EPERM",
        "clone_newpid EPERM",    "chroot EPERM",
        "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
        "CapAmb:\t0000000000000000", "NoNewPrivs:\t1",
        "Seccomp:\t2",           "uid 1000",
        "su failed",             NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(
        sb,
        "import ctypes, errno, os, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = {'ptrace': (101, 16, 1, 0, 0), "
        "'process_vm_readv': (310, 1, 0, 0, 0, 0, 0), "
        "'process_vm_writev': (311, 1, 0, 0, 0, 0, 0), "
        "'bpf': (321, 0, 0, 0), 'mount': (165, 0, 0, 0, 0, 0), "
        "'umount2': (166, 0, 0), 'unshare': (272, 0x10000000), "
        "'setns': (308, 0, 0), 'keyctl': (250, 0, 0), "
        "'add_key': (248, 0, 0, 0, 0, 0), 'request_key': (249, 0, 0, 0, 0),"
        " 'io_uring_setup': (425, 1, 0), "
        "'perf_event_open': (298, 0, 0, 0, 0, 0), "
        "'kexec_load': (246, 0, 0, 0, 0), 'init_module': (175, 0, 0, 0), "
        "'finit_module': (313, 0, 0, 0), 'personality': (135, 0x0008), "
        "'userfaultfd': (323, 0), 'pidfd_getfd': (438, 0, 0, 0), "
        "'open_by_handle_at': (304, 0, 0, 0), 'clone3': (435, 0, 0), "
        "'clone_newuser': (56, 0x10000000 | 17, 0, 0, 0, 0), "
        "'clone_newpid': (56, 0x20000000 | 17, 0, 0, 0, 0), "
        "'chroot': (161, 0)}\n"
        "if os.uname().machine == 'x86_64':\n"
        "    for name, (nr, *args) in calls.items():\n"
        "        rc = libc.syscall(nr, *args)\n"
        "        print(name, errno.errorcode.get(ctypes.get_errno()) if rc < 0 "
        "else 'ALLOWED')\n"
        "else:\n"
        "    print('\\n'.join(n + (' ENOSYS' if n == 'clone3' else ' EPERM')"
        " for n in calls))\n"
        "print(''.join(l for l in open('/proc/self/status') if "
        "l.startswith(('Cap', 'NoNewPrivs', 'Seccomp:'))))\n"
        "print('uid', os.getuid(), os.geteuid(), os.getgid())\n"
        "p = subprocess.run(['su', '-c', 'id'], capture_output=True, text=True,"
        " stdin=subprocess.DEVNULL)\n"
        "print('su failed' if p.returncode and 'uid=0' not in p.stdout "
        "else 'SU WORKED')",
        good, NULL);
    /* a system call of another ABI (x32 here) kills the process */
    run(sb, "import ctypes, os\nif os.uname().machine == 'x86_64':\n"
            "    ctypes.CDLL(None).syscall(0x40000000 + 39)\n"
            "else:\n    os.kill(os.getpid(), 31)",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "signal 31"));
    shim_exec_result_free(&r);
    expect_in(sb, "print('next')", SHIM_EXEC_OK, "next\n");
    shim_sandbox_close(sb);
}

/* 9-11. other processes and signals: the host's are invisible; the
 * supervisor (PID 1) cannot be killed, traced or read from inside. */
static void test_processes_and_signals(void **state)
{
    static const char *const good[] = {"procs [1]", "pid1 alive", "no mem",
                                       "host pid unseen", NULL};
    static const char *const bad[] = {"SIGNALLED", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(
        sb,
        code("import os, signal\n"
             "print('procs', sorted(int(p) for p in os.listdir('/proc') "
             "if p.isdigit() and int(p) != os.getpid()))\n"
             "for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, "
             "signal.SIGSTOP, signal.SIGSEGV):\n"
             "    try:\n"
             "        os.kill(1, s)\n"
             "        print('SIGNALLED', s)\n"
             "    except PermissionError:\n"
             "        pass\n"
             "try:\n"
             "    os.kill(-1, signal.SIGKILL)\n"
             "except OSError:\n"
             "    pass\n"
             "try:\n"
             "    open('/proc/1/mem', 'rb')\n"
             "    print('READ MEM')\n"
             "except OSError:\n"
             "    print('no mem')\n"
             "try:\n"
             "    os.kill(%d, 0)\n"
             "    c = open('/proc/%d/cmdline', 'rb').read()\n"
             "    print('host pid unseen' if b'test_sandbox' not in c "
             "else 'HOST SEEN')\n"
             "except OSError:\n"
             "    print('host pid unseen')\n"
             "import time\ntime.sleep(0.1)\n"
             "if open('/proc/1/stat').read().split(') ')[1][0] in 'RS':\n"
             "    print('pid1 alive')",
             (int)getpid(), (int)getpid()),
        good, bad);
    /* PID 1 still serves, with the same interpreter (no restart note) */
    expect(sb, "print('still')", SHIM_EXEC_OK, "still\n");
    shim_sandbox_close(sb);
    assert_int_equal(kill(getpid(), 0), 0);
}

/* 9-11 (cont.). PID 1 is out of the code's reach: no signal, rlimit,
 * priority, scheduler or I/O priority call may name it (by pid, its
 * process group, the whole user, a pidfd, high bits above a pid_t, or as
 * the owner of SIGIO), and the autogroup PID 1 is in is not the code's
 * (prlimit used to crash it, SCHED_IDLE to stretch every time limit). The
 * code's own processes are still its own. */
static void test_supervisor_out_of_reach(void **state)
{
    static const char *const good[] = {
        "prlimit set EPERM",     "prlimit get EPERM",
        "prlimit high bits EPERM", "setpriority EPERM",
        "setpriority pgrp EPERM", "setpriority user EPERM",
        "sched_setscheduler EPERM", "sched_setparam EPERM",
        "sched_setaffinity EPERM", "sched_setattr EPERM",
        "ioprio_set EPERM",      "ioprio_set user EPERM",
        "kill 2 EPERM",          "kill 17 EPERM",
        "kill 15 EPERM",         "kill 0 EPERM",
        "kill high bits EPERM",  "tkill EPERM",
        "tgkill EPERM",          "rt_sigqueueinfo EPERM",
        "rt_tgsigqueueinfo EPERM", "pidfd_open EPERM",
        "pidfd_send_signal EPERM", "F_SETOWN EPERM",
        "F_SETOWN group EPERM",  "F_SETOWN_EX EPERM",
        "setpgid EPERM",         "child prlimit ok",
        "child setpriority ok",  "child sched ok",
        "self prlimit ok",       "self nice ok",
        "child kill ok",
        "pid1 policy 0 nice 0 autogroup nice 0", NULL};
    static const char *const bad[] = {"REACHED", "FAILED", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(sb,
        "import ctypes, errno, fcntl, os, resource, signal, struct, "
        "subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "L = ctypes.c_long\n"
        "def name(e):\n"
        "    return errno.errorcode.get(e, str(e))\n"
        "def deny(what, f):\n"
        "    try:\n"
        "        f()\n"
        "        print(what, 'REACHED PID 1')\n"
        "    except OSError as e:\n"
        "        print(what, name(e.errno))\n"
        "def raw(what, nr, *args):\n"
        "    rc = libc.syscall(L(nr), *[L(a) for a in args])\n"
        "    print(what, 'REACHED PID 1' if rc >= 0 else "
        "name(ctypes.get_errno()))\n"
        "def mine(what, f):\n"
        "    try:\n"
        "        f()\n"
        "        print(what, 'ok')\n"
        "    except OSError as e:\n"
        "        print(what, 'FAILED', name(e.errno))\n"
        "if os.uname().machine == 'x86_64':\n"
        "    NR = dict(kill=62, tkill=200, tgkill=234, "
        "rt_sigqueueinfo=129,\n"
        "              rt_tgsigqueueinfo=297, prlimit64=302, "
        "sched_setattr=314,\n"
        "              ioprio_set=251)\n"
        "else:\n"
        "    NR = dict(kill=129, tkill=130, tgkill=131, "
        "rt_sigqueueinfo=138,\n"
        "              rt_tgsigqueueinfo=240, prlimit64=261, "
        "sched_setattr=274,\n"
        "              ioprio_set=30)\n"
        "HI = 1 << 32\n"
        "INT = int(signal.SIGINT)\n"
        "info = ctypes.create_string_buffer(struct.pack('iii', INT, 0, "
        "-1), 128)\n"
        "attr = ctypes.create_string_buffer(struct.pack('IIQiIQQQ', 48, 5, "
        "0, 0, 0, 0, 0, 0), 48)\n"
        "deny('prlimit set', lambda: resource.prlimit(1, "
        "resource.RLIMIT_NOFILE, (3, 3)))\n"
        "deny('prlimit get', lambda: resource.prlimit(1, "
        "resource.RLIMIT_NOFILE))\n"
        "raw('prlimit high bits', NR['prlimit64'], 1 | HI, "
        "resource.RLIMIT_NOFILE, 0, 0)\n"
        "deny('setpriority', lambda: os.setpriority(os.PRIO_PROCESS, 1, "
        "19))\n"
        "deny('setpriority pgrp', lambda: os.setpriority(os.PRIO_PGRP, 1, "
        "19))\n"
        "deny('setpriority user', lambda: os.setpriority(os.PRIO_USER, 0, "
        "19))\n"
        "deny('sched_setscheduler', lambda: os.sched_setscheduler(1, "
        "os.SCHED_IDLE, os.sched_param(0)))\n"
        "deny('sched_setparam', lambda: os.sched_setparam(1, "
        "os.sched_param(0)))\n"
        "deny('sched_setaffinity', lambda: os.sched_setaffinity(1, {0}))\n"
        "raw('sched_setattr', NR['sched_setattr'], 1, "
        "ctypes.addressof(attr), 0)\n"
        "raw('ioprio_set', NR['ioprio_set'], 1, 1, 3 << 13)\n"
        "raw('ioprio_set user', NR['ioprio_set'], 3, os.getuid(), 3 << "
        "13)\n"
        "for s in (signal.SIGINT, signal.SIGCHLD, signal.SIGTERM, 0):\n"
        "    deny('kill %d' % s, lambda s=s: os.kill(1, s))\n"
        "raw('kill high bits', NR['kill'], 1 | HI, INT)\n"
        "raw('tkill', NR['tkill'], 1, INT)\n"
        "raw('tgkill', NR['tgkill'], 1, 1, INT)\n"
        "raw('rt_sigqueueinfo', NR['rt_sigqueueinfo'], 1, INT, "
        "ctypes.addressof(info))\n"
        "raw('rt_tgsigqueueinfo', NR['rt_tgsigqueueinfo'], 1, 1, INT, "
        "ctypes.addressof(info))\n"
        "deny('pidfd_open', lambda: os.pidfd_open(1))\n"
        "d = os.open('/proc/1', os.O_RDONLY | os.O_DIRECTORY)\n"
        "deny('pidfd_send_signal', lambda: signal.pidfd_send_signal(d, "
        "INT))\n"
        "r, w = os.pipe()\n"
        "deny('F_SETOWN', lambda: fcntl.fcntl(r, fcntl.F_SETOWN, 1))\n"
        "deny('F_SETOWN group', lambda: fcntl.fcntl(r, fcntl.F_SETOWN, "
        "-1))\n"
        "deny('F_SETOWN_EX', lambda: fcntl.fcntl(r, 15, struct.pack('ii', "
        "1, 1)))\n"
        "deny('setpgid', lambda: os.setpgid(0, 1))\n"
        "def write(path, b):\n"
        "    fd = os.open(path, os.O_WRONLY)\n"
        "    try:\n"
        "        os.write(fd, b)\n"
        "    finally:\n"
        "        os.close(fd)\n"
        "for f in ('oom_score_adj', 'timerslack_ns', 'comm', "
        "'autogroup'):\n"
        "    deny('write ' + f, lambda f=f: write('/proc/1/' + f, b'1'))\n"
        "# what the code may do to itself and its own children\n"
        "p = subprocess.Popen(['sleep', '30'])\n"
        "mine('child prlimit', lambda: resource.prlimit(p.pid, "
        "resource.RLIMIT_NOFILE, (64, 64)))\n"
        "mine('child setpriority', lambda: os.setpriority(os.PRIO_PROCESS, "
        "p.pid, 5))\n"
        "mine('child sched', lambda: os.sched_setscheduler(p.pid, "
        "os.SCHED_BATCH, os.sched_param(0)))\n"
        "mine('self prlimit', lambda: resource.prlimit(0, "
        "resource.RLIMIT_CORE, (0, 0)))\n"
        "mine('self nice', lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))\n"
        "mine('child kill', lambda: os.kill(p.pid, 9))\n"
        "p.wait()\n"
        "try:\n"
        "    write('/proc/self/autogroup', b'19')  # ours, but not PID "
        "1's\n"
        "except OSError:\n"
        "    pass\n"
        "ag = '/proc/1/autogroup'\n"
        "ag = open(ag).read().split()[-1] if os.path.exists(ag) else '0'\n"
        "print('pid1 policy', os.sched_getscheduler(1), 'nice', "
        "os.getpriority(os.PRIO_PROCESS, 1), 'autogroup nice', ag)",
        good, bad);
    /* the same supervisor and interpreter still serve */
    expect(sb, "print('still')", SHIM_EXEC_OK, "still\n");
    shim_sandbox_close(sb);
}

/* 7 (cont.). System calls newer than the filter fail with ENOSYS, as on an
 * older kernel (open_tree_attr, 467, used to return a descriptor), the
 * x32 numbers of them kill, and the usual stack does not notice. */
static void test_unknown_syscalls(void **state)
{
    static const char *const good[] = {
        "syscall 457 ENOSYS", "syscall 462 ENOSYS", "syscall 467 ENOSYS",
        "syscall 500 ENOSYS", "syscall 1000 ENOSYS", "stack 6 2", NULL};
    static const char *const bad[] = {"RETURNED", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(sb,
        "import ctypes, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "L = ctypes.c_long\n"
        "for nr in (457, 462, 467, 500, 1000):\n"
        "    rc = libc.syscall(L(nr), L(-100), b'/', L(0), L(0), L(0))\n"
        "    print('syscall', nr, 'RETURNED %d' % rc if rc >= 0 else "
        "errno.errorcode.get(ctypes.get_errno()))\n"
        "import numpy, pandas, matplotlib.pyplot as plt\n"
        "plt.plot(numpy.arange(3))\n"
        "plt.savefig('/tmp/plot.png')\n"
        "print('stack', int(numpy.arange(4).sum()), "
        "len(pandas.DataFrame({'a': [1, 2]})))",
        good, bad);
    run(sb, "import ctypes, os\nif os.uname().machine == 'x86_64':\n"
            "    ctypes.CDLL(None).syscall(0x40000000 + 467, -100, b'/', 0)\n"
            "else:\n    os.kill(os.getpid(), 31)",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_non_null(strstr(r.logs, "signal 31"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
}

/* Waits up to ms for count_host_procs() to reach n; returns the count. */
static int wait_host_procs(const char *argv0, const char *arg1, int n, int ms)
{
    int k = count_host_procs(argv0, arg1, NULL);

    for (; k != n && ms > 0; ms -= 10) {
        usleep(10 * 1000);
        k = count_host_procs(argv0, arg1, NULL);
    }
    return k;
}

/* 9 (cont.). A forged "done" frame: a thread answers for the interpreter
 * (and goes on answering), a child keeps writing. Between executions
 * nothing of it runs: no time stamp falls in a time the sandbox was idle.
 * And code that resumes itself while stopped (a POSIX timer sending
 * SIGCONT) is killed within about a second, and the model told. */
static void test_forged_done_frozen(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    double idle_from, idle_to;

    (void)state;
    make_cfg(&c);
    c.exec_timeout_s = 5;
    sb = open_sb(&c);
    expect_in(sb,
        "import os, socket, sys, threading, time\n"
        "f = sys._getframe()\n"
        "while 'sock' not in f.f_locals:\n"
        "    f = f.f_back\n"
        "sock, seq = f.f_locals['sock'], f.f_locals['seq']\n"
        "def send(b):\n"
        "    sock.sendall(len(b).to_bytes(4, 'big') + b)\n"
        "def recv(n):\n"
        "    b = b''\n"
        "    while len(b) < n:\n"
        "        b += sock.recv(n - len(b))\n"
        "    return b\n"
        "def impostor():\n"
        "    import contextlib, io\n"
        "    while True:\n"
        "        hdr, anc, _, _ = sock.recvmsg(4, socket.CMSG_SPACE(16))\n"
        "        out = int.from_bytes(anc[0][2][:4], sys.byteorder)\n"
        "        p = recv(int.from_bytes(hdr, 'big'))\n"
        "        buf = io.StringIO()\n"
        "        with contextlib.redirect_stdout(buf):\n"
        "            exec(p[5:].decode(), {})\n"
        "        os.write(out, buf.getvalue().encode())\n"
        "        os.close(out)\n"
        "        send(p[1:5] + b'{\"status\":\"ok\",\"images\":[]}')\n"
        "if os.fork() == 0:\n"
        "    while True:\n"
        "        with open('/mnt/data/stamps', 'a') as s:\n"
        "            s.write('%.6f\\n' % time.monotonic())\n"
        "        time.sleep(0.005)\n"
        "threading.Thread(target=impostor, daemon=True).start()\n"
        "print('forged', flush=True)\n"
        "send(seq + b'{\"status\":\"ok\",\"images\":[]}')\n"
        "time.sleep(1000)",
        SHIM_EXEC_OK, "forged\n");
    expect_in(sb, "print('serving')", SHIM_EXEC_OK, "serving\n");
    idle_from = now_s();
    usleep(400 * 1000); /* the idle time the attack is after */
    idle_to = now_s();
    expect_in(sb,
              code("s = open('/mnt/data/stamps').read().split()\n"
                   "print('idle stamps', sum(%.6f < float(x) < %.6f "
                   "for x in s), 'of', len(s))",
                   idle_from, idle_to),
              SHIM_EXEC_OK, "idle stamps 0 of ");
    shim_sandbox_close(sb);

    sb = open_sb(&c);
    expect_in(sb,
        "import ctypes, os, struct, time\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    # SIGCONT from a POSIX timer in 0.3 s: a way out of being "
        "stopped\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    t = ctypes.c_void_p()\n"
        "    ev = bytes(8) + struct.pack('ii', 18, 0) + bytes(48)\n"
        "    libc.timer_create(1, ev, ctypes.byref(t))\n"
        "    libc.timer_settime(t, 0, struct.pack('4q', 0, 0, 0, "
        "300000000), None)\n"
        "    os.write(w, b'armed')\n"
        "    time.sleep(0.3)\n"
        "    os.execvp('sleep', ['sleep', '1000.901'])\n"
        "print(os.read(r, 5).decode())",
        SHIM_EXEC_OK, "armed\n");
    /* it resumed itself and ran... */
    assert_int_equal(wait_host_procs("sleep", "1000.901", 1, 10000), 1);
    /* ...and was caught */
    assert_int_equal(wait_host_procs_gone("sleep", "1000.901", 10000), 0);
    expect_in(sb, "print('next')", SHIM_EXEC_OK,
              "kept running after that execution had ended");
    expect_in(sb, "import os\nsorted(int(p) for p in os.listdir('/proc') "
                  "if p.isdigit())",
              SHIM_EXEC_OK, "[1, ");
    shim_sandbox_close(sb);
}

/* 1 (cont.). Host-identifying /proc files read empty inside, as in
 * container runtimes, while the host reads them. */
static void test_proc_masked(void **state)
{
    static const char *const good[] = {
        "masked /proc/cmdline", "masked /proc/sys/kernel/random/boot_id",
        "masked /proc/config.gz", "masked /proc/partitions", NULL};
    static const char *const bad[] = {"UNMASKED", NULL};
    static const char *const host[] = {"/proc/cmdline",
                                       "/proc/sys/kernel/random/boot_id"};
    struct shim_config c;
    struct shim_sandbox *sb;
    char buf[64];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
        FILE *f = fopen(host[i], "r");

        assert_non_null(f);
        assert_true(fread(buf, 1, sizeof(buf), f) > 0);
        fclose(f);
    }
    make_cfg(&c);
    sb = open_sb(&c);
    expect_clean(sb,
        "for p in ['/proc/cmdline', '/proc/sys/kernel/random/boot_id', "
        "'/proc/kcore', '/proc/keys', '/proc/key-users', "
        "'/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', "
        "'/proc/latency_stats', '/proc/config.gz', '/proc/iomem', "
        "'/proc/ioports', '/proc/partitions', '/proc/diskstats',\n"
        "         '/proc/swaps']:\n"
        "    try:\n"
        "        with open(p, 'rb') as f:\n"
        "            n = len(f.read())\n"
        "    except OSError:\n"
        "        n = 0\n"
        "    print('masked' if n == 0 else 'UNMASKED', p)",
        good, bad);
    shim_sandbox_close(sb);
}

/* 10. two sandboxes share nothing: files, /tmp, /dev/shm, processes,
 * abstract sockets, System V IPC; as root, not even the host uid. */
static void test_between_sandboxes(void **state)
{
    static const char *const good[] = {"no files", "no procs",
                                       "no socket", "no shm", NULL};
    struct shim_config c;
    struct shim_sandbox *a, *b;
    struct shim_exec_result r;
    uid_t ua = 0, ub = 0;
    int i;

    (void)state;
    make_cfg(&c);
    a = open_sb(&c);
    b = open_sb(&c);
    run(a, "import ctypes, os, socket, subprocess\n"
           "for p in ['/mnt/data/secret-a', '/tmp/secret-a', "
           "'/dev/shm/secret-a', '/home/sandbox/secret-a']:\n"
           "    open(p, 'w').write('A')\n"
           "subprocess.Popen(['sleep', '1000.401'])\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "s.bind('\\0codeshim-sandbox-a')\ns.listen()\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "print('shm', libc.shmget(0x5eed, 4096, 0o1666))",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    shim_exec_result_free(&r);
    expect_clean(b,
                 "import ctypes, glob, os, socket\n"
                 "found = [p for d in ['/mnt/data', '/tmp', '/dev/shm', "
                 "'/home/sandbox'] for p in glob.glob(d + '/secret-*')]\n"
                 "print('FOUND' if found else 'no files', found)\n"
                 "mine = os.getpid()\n"
                 "procs = [p for p in os.listdir('/proc') if p.isdigit() and "
                 "int(p) not in (1, mine)]\n"
                 "print('PROCS' if procs else 'no procs', procs)\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n"
                 "    s.connect('\\0codeshim-sandbox-a')\n"
                 "    print('CONNECTED')\n"
                 "except OSError:\n"
                 "    print('no socket')\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "print('SHM' if libc.shmget(0x5eed, 0, 0) >= 0 else 'no shm')",
                 good, NULL);
    assert_int_equal(count_host_procs("sleep", "1000.401", &ua), 1);
    run(b, "import subprocess\nsubprocess.Popen(['sleep', '1000.402'])", &r);
    shim_exec_result_free(&r);
    /* Popen returns once the child's execve is under way (vfork): its
     * command line may show a moment later */
    for (i = 0; i < 200 && count_host_procs("sleep", "1000.402", NULL) != 1;
         i++)
        usleep(10 * 1000);
    assert_int_equal(count_host_procs("sleep", "1000.402", &ub), 1);
    if (geteuid() == 0) {
        /* each sandbox runs as a fresh unprivileged uid of its own */
        assert_true(ua != 0 && ub != 0 && ua != ub);
        assert_true(ua >= 0x40000000u && ub >= 0x40000000u);
    } else {
        assert_int_equal(ua, geteuid());
        assert_int_equal(ub, geteuid());
    }
    shim_sandbox_close(a);
    shim_sandbox_close(b);
    assert_int_equal(count_host_procs("sleep", "1000.401", NULL), 0);
    assert_int_equal(count_host_procs("sleep", "1000.402", NULL), 0);
}

/* 12. persistence past the sandbox: nothing written survives it. */
static void test_no_persistence(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c);
    run(sb, "import os\nfor p in ['/home/sandbox/.bashrc', "
            "'/home/sandbox/.profile', '/tmp/x', '/mnt/data/y', "
            "'/dev/shm/z']:\n    open(p, 'w').write('echo PWNED')",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
    sb = open_sb(&c);
    expect(sb, "import os\n[p for p in ['/home/sandbox/.bashrc', "
               "'/home/sandbox/.profile', '/tmp/x', '/mnt/data/y', "
               "'/dev/shm/z'] if os.path.exists(p)]",
           SHIM_EXEC_OK, "[]\n");
    shim_sandbox_close(sb);
}

/* Every sandbox process dies when the host program is killed. */
static void test_host_killed(void **state)
{
    int p[2];
    pid_t child;
    char ok = 0;
    int st;

    (void)state;
    assert_int_equal(pipe(p), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct shim_config c;
        struct shim_sandbox *sb = NULL;
        struct shim_exec_result r;
        const char *src =
            "import os, subprocess\n"
            "subprocess.Popen(['sleep', '1000.501'])\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        os.execvp('sleep', ['sleep', '1000.502'])\n"
            "    os._exit(0)\n"
            "import time\ntime.sleep(0.3)\nprint('up')";

        close(p[0]);
        make_cfg(&c);
        if (shim_sandbox_open(&c, &sb) == 0 &&
            shim_sandbox_exec(sb, src, strlen(src), &r) == 0 &&
            r.status == SHIM_EXEC_OK)
            ok = 1;
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 1);
    assert_int_equal(count_host_procs("sleep", "1000.501", NULL), 1);
    assert_int_equal(count_host_procs("sleep", "1000.502", NULL), 1);
    kill(child, SIGKILL);
    waitpid(child, &st, 0);
    assert_int_equal(wait_host_procs_gone("sleep", "1000.501", 3000), 0);
    assert_int_equal(wait_host_procs_gone("sleep", "1000.502", 3000), 0);
}

/* If the isolation cannot be set up, nothing runs, and the output says
 * why. */
static void test_refuses_without_isolation(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    char fake[600];
    FILE *f;

    (void)state;
    make_cfg(&c);
    snprintf(c.bwrap, sizeof(c.bwrap), "/nonexistent/bwrap");
    sb = open_sb(&c);
    run(sb, "print('RAN')", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_null(strstr(r.logs, "RAN"));
    assert_non_null(strstr(r.logs, "refused"));
    assert_non_null(strstr(r.logs, "bubblewrap"));
    assert_non_null(strstr(r.logs, "CODESHIM_UNSAFE_NO_ISOLATION"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);

    /* bwrap present, but the kernel says no (as in a container without
     * user namespaces): its message reaches the model */
    snprintf(fake, sizeof(fake), "%s/fake-bwrap", g_tmpdir);
    f = fopen(fake, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\necho 'bwrap: No permissions to creating new "
          "namespace, likely because the kernel does not allow "
          "non-privileged user namespaces.' >&2\nexit 1\n",
          f);
    fclose(f);
    chmod(fake, 0755);
    chmod(g_tmpdir, 0755); /* as root, bwrap runs as another user */
    snprintf(c.bwrap, sizeof(c.bwrap), "%s", fake);
    sb = open_sb(&c);
    run(sb, "print('RAN')", &r);
    assert_int_equal(r.status, SHIM_EXEC_FAILED);
    assert_null(strstr(r.logs, "RAN"));
    assert_non_null(strstr(r.logs, "refused"));
    assert_non_null(strstr(r.logs, "No permissions to creating new namespace"));
    shim_exec_result_free(&r);
    shim_sandbox_close(sb);
    unlink(fake);
    chmod(g_tmpdir, 0700);
}

/* CODESHIM_UNSAFE_NO_ISOLATION=1: the same notebook, no isolation (for
 * debugging), in a private directory removed at the end. */
static void test_unsafe_mode(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;

    (void)state;
    make_cfg(&c);
    snprintf(c.bwrap, sizeof(c.bwrap), "/nonexistent/bwrap");
    c.unsafe_no_isolation = 1;
    sb = open_sb(&c);
    run(sb, "import os\nx = 1\nprint(os.getcwd())\nopen('f.txt', 'w').close()",
        &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    assert_true(!strncmp(r.logs, g_tmpdir, strlen(g_tmpdir)));
    assert_non_null(strstr(r.logs, "[files in /mnt/data: f.txt]"));
    shim_exec_result_free(&r);
    expect(sb, "x + 1", SHIM_EXEC_OK, "2\n");
    expect(sb, "sorted(os.environ)", SHIM_EXEC_OK,
           "['HOME', 'LANG', 'MPLBACKEND', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE', "
           "'TMPDIR']\n");
    shim_sandbox_close(sb);
    assert_true(dir_is_empty(g_tmpdir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_files),
        cmocka_unit_test(test_env_secrets),
        cmocka_unit_test(test_writes_outside),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_fork_storm),
        cmocka_unit_test(test_disk_fill),
        cmocka_unit_test(test_output_flood),
        cmocka_unit_test(test_cpu_time),
        cmocka_unit_test(test_daemons_die),
        cmocka_unit_test(test_kernel_surface),
        cmocka_unit_test(test_processes_and_signals),
        cmocka_unit_test(test_supervisor_out_of_reach),
        cmocka_unit_test(test_unknown_syscalls),
        cmocka_unit_test(test_forged_done_frozen),
        cmocka_unit_test(test_proc_masked),
        cmocka_unit_test(test_between_sandboxes),
        cmocka_unit_test(test_no_persistence),
        cmocka_unit_test(test_host_killed),
        cmocka_unit_test(test_refuses_without_isolation),
        cmocka_unit_test(test_unsafe_mode),
    };

    signal(SIGPIPE, SIG_DFL);
    return cmocka_run_group_tests(tests, setup, teardown);
}
