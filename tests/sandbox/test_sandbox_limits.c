/* test_sandbox_limits.c - limits that hold for a sandbox as a whole, not
 * per process: its cgroup (memory counting page cache, memfd, tmpfs and
 * kernel memory; tasks), the file-count limit of its tmpfs, the open-file
 * cap, and the cgroup's life (made for each start, removed at close,
 * leftovers of dead processes removed, the kill of what is left in it).
 *
 * Runs as root (CI: the cgroup v1 memory and pids controllers, or v2, are
 * writable) and as an ordinary user (tests/integration runs this binary
 * again as one), where no cgroup can be made: then the tests check the
 * documented fallback (no cgroup, the per-process limits, the same tmpfs
 * file-count limits) and skip the attacks that only a cgroup stops. Each
 * attack stops by itself at a few times the limit. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sandbox/local/cgroup.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include "test_sandbox_util.h"

#include <signal.h>
#include <sys/wait.h>

#define MEM (256u << 20)

static int g_cgroup; /* this process can make sandbox cgroups */
static struct shim_cgroup_info g_info;

static void limits_cfg(struct shim_config *c)
{
    make_cfg(c);
    c->memory_limit = MEM;
}

/* The directory of this process's only sandbox cgroup in base, into out;
 * 1 found, 0 none. */
static int find_cgroup(const char *base, char *out, size_t outsz)
{
    char prefix[96];
    DIR *d = opendir(base);
    struct dirent *e;
    int n = 0;

    shim_cgroup_prefix(prefix, sizeof(prefix));
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            snprintf(out, outsz, "%s/%s", base, e->d_name);
            n++;
        }
    closedir(d);
    assert_true(n <= 1);
    return n;
}

static unsigned long long read_num(const char *dir, const char *name)
{
    char path[SHIM_CG_PATH + 64], buf[64];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return strncmp(buf, "max", 3) ? strtoull(buf, NULL, 10) : ~0ULL;
}

/* The most memory the open sandbox's cgroup ever used. */
static unsigned long long peak(void)
{
    char dir[SHIM_CG_PATH + 128];

    assert_true(find_cgroup(g_info.mem.base, dir, sizeof(dir)));
    return read_num(dir, g_info.mem.version == 2 ? "memory.peak"
                                                 : "memory.max_usage_in_bytes");
}

/* The largest number printed after word in logs, or -1. */
static long last_after(const char *logs, const char *word)
{
    const char *p = logs;
    long best = -1;

    while ((p = strstr(p, word)) != NULL) {
        long v;
        p += strlen(word);
        v = strtol(p, NULL, 10);
        if (v > best)
            best = v;
    }
    return best;
}

/* Runs an attack that prints "<word> <MB>" as it goes: the code either
 * stopped with an error or was killed (the interpreter restarted); in
 * both cases it held less than the limit, and the cgroup saw no more. */
static void expect_bounded(struct shim_sandbox *sb, const char *src,
                           const char *word)
{
    struct shim_exec_result r;
    long mb;

    run(sb, src, &r);
    mb = last_after(r.logs, word);
    print_message("%s%ld MB (limit %u MB), status %d\n", word, mb, MEM >> 20,
                  r.status);
    if (mb < 0 || mb >= (long)(MEM >> 20))
        print_error("logs:\n%s\n", r.logs);
    assert_true(mb >= 0 && mb < (long)(MEM >> 20));
    assert_true(r.status == SHIM_EXEC_OK || r.status == SHIM_EXEC_FAILED);
    print_message("cgroup peak %llu MB\n", peak() >> 20);
    assert_true(peak() <= MEM);
    shim_exec_result_free(&r);
    /* the sandbox goes on */
    expect_in(sb, "6 * 7", SHIM_EXEC_OK, "42");
}

/* ---- the cgroup's life ---- */

/* Made for the sandbox with its limits; gone once the sandbox is closed.
 * Without a cgroup (an ordinary user): none is made and code still runs
 * (per-process limits only). */
static void test_cgroup_made_and_removed(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char dir[SHIM_CG_PATH + 128], pdir[SHIM_CG_PATH + 128];

    (void)state;
    limits_cfg(&c);
    c.procs_limit = 40;
    sb = open_sb(&c);
    /* the per-process cap holds in every case */
    expect_in(sb, "try:\n    bytearray(300 << 20)\nexcept MemoryError:\n"
                  "    print('capped')",
              SHIM_EXEC_OK, "capped");
    if (!g_cgroup) {
        print_message("no cgroup here (%s): per-process limits only\n",
                      g_info.why);
        assert_false(g_info.mem.version && find_cgroup(g_info.mem.base, dir,
                                                       sizeof(dir)));
        shim_sandbox_close(sb);
        return;
    }
    if (g_info.mem.version) {
        assert_true(find_cgroup(g_info.mem.base, dir, sizeof(dir)));
        assert_int_equal(read_num(dir, g_info.mem.version == 2
                                           ? "memory.max"
                                           : "memory.limit_in_bytes"),
                         MEM);
    }
    if (g_info.pids.version) {
        assert_true(find_cgroup(g_info.pids.base, pdir, sizeof(pdir)));
        assert_int_equal(read_num(pdir, "pids.max"), 42);
    }
    shim_sandbox_close(sb);
    if (g_info.mem.version)
        assert_false(find_cgroup(g_info.mem.base, dir, sizeof(dir)));
    if (g_info.pids.version)
        assert_false(find_cgroup(g_info.pids.base, pdir, sizeof(pdir)));
}

/* A cgroup left by a process that died (its host killed) is removed by
 * the next start; one whose process lives is kept. */
static void test_leftovers_removed(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char prefix[96], dead[SHIM_CG_PATH + 128], live[SHIM_CG_PATH + 128];
    const char *base;
    unsigned long ns;
    pid_t pid;
    int st;

    (void)state;
    if (!g_cgroup) {
        skip();
        return;
    }
    base = g_info.mem.version ? g_info.mem.base : g_info.pids.base;
    shim_cgroup_prefix(prefix, sizeof(prefix));
    ns = strtoul(prefix + strlen("codeshim-"), NULL, 10);
    pid = fork();
    if (pid == 0)
        _exit(0);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    snprintf(dead, sizeof(dead), "%s/codeshim-%lu-%ld-7", base, ns,
             (long)pid);
    snprintf(live, sizeof(live), "%s/codeshim-%lu-%ld-7", base, ns,
             (long)getppid());
    assert_int_equal(mkdir(dead, 0755), 0);
    assert_int_equal(mkdir(live, 0755), 0);
    limits_cfg(&c);
    sb = open_sb(&c);
    expect_in(sb, "print('up')", SHIM_EXEC_OK, "up");
    shim_sandbox_close(sb);
    st = (access(dead, F_OK) == 0) | (rmdir(live) != 0) << 1;
    rmdir(dead); /* whatever happened: nothing of the test left behind */
    assert_int_equal(st, 0);
}

/* The unsafe mode has no PID namespace: a daemon in a session of its own
 * outlives the supervisor's kill, but not the cgroup's at close. */
static void test_cgroup_kills_what_is_left(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    if (!g_cgroup) {
        skip();
        return;
    }
    limits_cfg(&c);
    c.unsafe_no_isolation = 1;
    sb = open_sb(&c);
    expect_in(sb,
              "import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        os.execvp('sleep', ['sleep', '1000.417'])\n"
              "    os._exit(0)\n"
              "time.sleep(0.3)\n"
              "print('daemon started')",
              SHIM_EXEC_OK, "daemon started");
    assert_int_equal(count_host_procs("sleep", "1000.417", NULL), 1);
    shim_sandbox_close(sb);
    assert_int_equal(wait_host_procs_gone("sleep", "1000.417", 5000), 0);
}

/* ---- memory for the sandbox as a whole (a cgroup only) ---- */

/* Attack code that forks kids: the parent (which reports) makes itself
 * the OOM killer's last choice in the sandbox, the kids its first. */
#define OOM_ORDER                                                              \
    "def oom(v):\n"                                                            \
    "    open('/proc/self/oom_score_adj', 'w').write(str(v))\n"                \
    "oom(500)\n"
/* The kids (pids) set flags[i] once they hold their share: waits
 * (bounded) until each holds it or is gone, leaving alive = those that
 * live; then KILL_KIDS ends them. */
#define WAIT_KIDS                                                              \
    "alive = set(kids)\n"                                                      \
    "def reap():\n"                                                            \
    "    for k in list(alive):\n"                                              \
    "        if os.waitpid(k, os.WNOHANG)[0]:\n"                               \
    "            alive.discard(k)\n"                                           \
    "end = time.time() + 20\n"                                                 \
    "while time.time() < end:\n"                                               \
    "    reap()\n"                                                             \
    "    if all(flags[i] for i, k in enumerate(kids) if k in alive):\n"        \
    "        break\n"                                                          \
    "    time.sleep(0.05)\n"                                                   \
    "time.sleep(0.3)\n" /* kills under way have ended */                       \
    "reap()\n"
#define KILL_KIDS                                                              \
    "for k in alive:\n"                                                        \
    "    os.kill(k, 9)\n"                                                      \
    "    os.waitpid(k, 0)\n"

/* memfd_create: shared memory no address-space limit sees. */
static void test_memfd(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    if (!g_cgroup || !g_info.mem.version) {
        skip();
        return;
    }
    limits_cfg(&c);
    sb = open_sb(&c);
    expect_bounded(sb,
                   "import os\n"
                   "fds, mb = [], 0\n"
                   "try:\n"
                   "    while mb < 1024:\n"
                   "        fd = os.memfd_create('x')\n"
                   "        fds.append(fd)\n"
                   "        for i in range(16):\n"
                   "            os.write(fd, b'x' * (1 << 20))\n"
                   "        mb += 16\n"
                   "        print('memfd', mb, flush=True)\n"
                   "except OSError as e:\n"
                   "    print('stopped', e.errno)",
                   "memfd ");
    shim_sandbox_close(sb);
}

/* Ten processes, each under the per-process cap: what they hold at once
 * stays under the sandbox's limit. */
static void test_ten_processes(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    if (!g_cgroup || !g_info.mem.version) {
        skip();
        return;
    }
    limits_cfg(&c);
    sb = open_sb(&c);
    expect_bounded(sb,
                   "import mmap, os, time\n"
                   OOM_ORDER
                   "flags = mmap.mmap(-1, 64)\n"
                   "kids = []\n"
                   "for i in range(10):\n"
                   "    pid = os.fork()\n"
                   "    if pid == 0:\n"
                   "        oom(1000)\n"
                   "        a = b'x' * (100 << 20)\n"
                   "        flags[i] = 1\n"
                   "        time.sleep(30)\n"
                   "        os._exit(0)\n"
                   "    kids.append(pid)\n"
                   WAIT_KIDS
                   "held = sum(100 for i, k in enumerate(kids) "
                   "if k in alive and flags[i])\n"
                   "print('ten MB', held, 'alive', len(alive), flush=True)\n"
                   KILL_KIDS,
                   "ten MB ");
    shim_sandbox_close(sb);
}

/* Pipe buffers across many processes: kernel memory. */
static void test_pipes(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    if (!g_cgroup || !g_info.mem.version || !g_info.kmem) {
        skip();
        return;
    }
    limits_cfg(&c);
    sb = open_sb(&c);
    expect_bounded(sb,
                   "import mmap, os, struct, time\n"
                   OOM_ORDER
                   "N = 128\n"
                   "flags = mmap.mmap(-1, N)\n"
                   "held = mmap.mmap(-1, 8 * N)\n"
                   "kids = []\n"
                   "for i in range(N):\n"
                   "    pid = os.fork()\n"
                   "    if pid == 0:\n"
                   "        oom(1000)\n"
                   "        fds, total = [], 0\n"
                   "        try:\n"
                   "            while len(fds) < 4000:\n"
                   "                r, w = os.pipe()\n"
                   "                fds += [r, w]\n"
                   "                os.set_blocking(w, False)\n"
                   "                try:\n"
                   "                    total += os.write(w, b'x' * 65536)\n"
                   "                except BlockingIOError:\n"
                   "                    pass\n"
                   "                held[8 * i:8 * i + 8] = "
                   "struct.pack('q', total)\n"
                   "        except OSError:\n"
                   "            pass\n"
                   "        flags[i] = 1\n"
                   "        time.sleep(30)\n"
                   "        os._exit(0)\n"
                   "    kids.append(pid)\n"
                   WAIT_KIDS
                   "mb = sum(struct.unpack('q', held[8 * i:8 * i + 8])[0] "
                   "for i, k in enumerate(kids) if k in alive) >> 20\n"
                   "print('pipes MB', mb, 'alive', len(alive), flush=True)\n"
                   KILL_KIDS,
                   "pipes MB ");
    shim_sandbox_close(sb);
}

/* ---- files ---- */

/* Every tmpfs has a file-count limit (CODESHIM_INODES; /dev/shm its own):
 * empty files stop there with ENOSPC, as root and as an ordinary user. */
static void test_inodes(void **state)
{
    static const char *const want[] = {"/mnt/data 2000 ENOSPC",
                                       "/tmp 2000 ENOSPC",
                                       "/dev/shm 1024 ENOSPC", NULL};
    struct shim_config c;
    struct shim_sandbox *sb;
    struct shim_exec_result r;
    size_t i;

    (void)state;
    limits_cfg(&c);
    c.inodes_limit = 2000;
    sb = open_sb(&c);
    run(sb,
        "import errno, os\n"
        "for d in ['/mnt/data', '/tmp', '/dev/shm']:\n"
        "    os.makedirs(d + '/many')\n"
        "    n, err = 0, None\n"
        "    try:\n"
        "        while n < 10000:\n"
        "            open('%s/many/%d' % (d, n), 'w').close()\n"
        "            n += 1\n"
        "    except OSError as e:\n"
        "        err = errno.errorcode[e.errno]\n"
        "    print(d, os.statvfs(d).f_files, err, n < 2000)\n",
        &r);
    for (i = 0; want[i]; i++) {
        if (!strstr(r.logs, want[i]))
            print_error("missing \"%s\" in:\n%s\n", want[i], r.logs);
        assert_non_null(strstr(r.logs, want[i]));
    }
    assert_null(strstr(r.logs, "False"));
    shim_exec_result_free(&r);
    /* the descriptors the tmpfs came through are not in the sandbox */
    expect_in(sb,
              "import os\n"
              "print(sorted(set(os.listdir('/proc/self/fd')) & "
              "{'9', '10', '11'}))",
              SHIM_EXEC_OK, "[]");
    shim_sandbox_close(sb);
}

/* A bwrap reached through /tmp (where the tmpfs are mounted before bwrap
 * binds them, if nothing lives there) still starts, with the limits. */
static void test_bwrap_in_tmp(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    char link[600];

    (void)state;
    limits_cfg(&c);
    c.inodes_limit = 3000;
    snprintf(link, sizeof(link), "%s/bwrap-link", g_tmpdir);
    assert_int_equal(symlink("/usr/bin/bwrap", link), 0);
    chmod(g_tmpdir, 0755); /* as root, bwrap runs as another user */
    snprintf(c.bwrap, sizeof(c.bwrap), "%s", link);
    sb = open_sb(&c);
    expect_in(sb, "import os\nprint(os.statvfs('/mnt/data').f_files)",
              SHIM_EXEC_OK, "3000\n");
    shim_sandbox_close(sb);
    unlink(link);
    chmod(g_tmpdir, 0700);
}

/* Open files: CODESHIM_OPEN_FILES per process (soft and hard, so the code
 * cannot raise it); in a cgroup, their kernel memory counts too. */
static void test_open_files(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;

    (void)state;
    limits_cfg(&c);
    c.open_files_limit = 200;
    sb = open_sb(&c);
    expect_in(sb,
              "import errno, os, resource\n"
              "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
              "fds = []\n"
              "try:\n"
              "    while len(fds) < 1000:\n"
              "        fds += os.pipe()\n"
              "except OSError as e:\n"
              "    print(errno.errorcode[e.errno], len(fds) < 200)\n"
              "try:\n"
              "    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))\n"
              "    print('RAISED')\n"
              "except ValueError:\n"
              "    print('not raised')",
              SHIM_EXEC_OK, "(200, 200)\nEMFILE True\nnot raised");
    shim_sandbox_close(sb);
}

/* ---- settings ---- */

static const char *env_of(const char *name, void *ctx)
{
    const char *const *kv = ctx;

    for (; kv[0]; kv += 2)
        if (!strcmp(kv[0], name))
            return kv[1];
    return NULL;
}

static void test_settings(void **state)
{
    static const char *const set[] = {"CODESHIM_INODES", "5000",
                                      "CODESHIM_OPEN_FILES", "300", NULL};
    static const char *const bad[] = {"CODESHIM_INODES", "10",
                                      "CODESHIM_OPEN_FILES", "x", NULL};
    static const char *const none[] = {NULL};
    struct shim_config c;

    (void)state;
    shim_config_parse(&c, env_of, NULL, (void *)none);
    assert_int_equal(c.inodes_limit, 65536);
    assert_int_equal(c.open_files_limit, 1024);
    shim_config_parse(&c, env_of, NULL, (void *)set);
    assert_int_equal(c.inodes_limit, 5000);
    assert_int_equal(c.open_files_limit, 300);
    shim_config_parse(&c, env_of, NULL, (void *)bad);
    assert_int_equal(c.inodes_limit, 65536); /* out of range: the default */
    assert_int_equal(c.open_files_limit, 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cgroup_made_and_removed),
        cmocka_unit_test(test_leftovers_removed),
        cmocka_unit_test(test_cgroup_kills_what_is_left),
        cmocka_unit_test(test_memfd),
        cmocka_unit_test(test_ten_processes),
        cmocka_unit_test(test_pipes),
        cmocka_unit_test(test_inodes),
        cmocka_unit_test(test_bwrap_in_tmp),
        cmocka_unit_test(test_open_files),
        cmocka_unit_test(test_settings),
    };
    struct shim_cgroup cg;

    signal(SIGPIPE, SIG_DFL);
    if (shim_cgroup_probe(&g_info) == 0 &&
        shim_cgroup_create(&cg, MEM, 64) == 0) {
        g_cgroup = 1;
        shim_cgroup_destroy(&cg);
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
