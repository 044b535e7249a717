/* test_sandbox_jail.c - a cold sandbox (bubblewrap's jail, local_jail.c)
 * and one forked from the fork server (worker/zygote.py's) are the same
 * jail, as the code in each sees it: the same mounts (mountinfo: where,
 * what, how; stacked mounts show as such; bubblewrap's files of data by
 * their kind, not their random names), the same namespaces apart from
 * the host's, uid and gid maps, credentials and capabilities, seccomp and
 * no_new_privs, hostname, network interfaces and the loopback's addresses (no socket: seccomp), working directory, environment, and no further
 * user namespaces (the limit, seen from the host, in the user namespace
 * the sandbox's is nested in). Both are made from one table (local/jail.def); this
 * fails when either path drops or changes one of its elements. Runs as
 * root (make sandbox) and as an ordinary user. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sandbox/local/local_zygote.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include "test_sandbox_util.h"

#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

/* What the code sees of its jail, one fact a line. Ids that differ per
 * sandbox (mount ids, outer uids, the namespaces' inodes) are left out
 * (an outer uid only says whether it is the inner one: it is in a user
 * namespace nested in the sandbox's, as no further user namespaces
 * makes);
 * what is left is the same for two sandboxes of one jail. The host's
 * namespace links are %s (ns=inode pairs), to tell which are new. */
#define JAIL_FACTS                                                             \
    "import os, re, socket\n"                                                  \
    "host = dict(p.split('=', 1) for p in '%s'.split())\n"                     \
    "facts = []\n"                                                             \
    "for n in sorted(os.listdir('/proc/self/ns')):\n"                          \
    "    link = os.readlink('/proc/self/ns/' + n)\n"                           \
    "    if n in host:\n"                                                      \
    "        facts.append('ns %%s %%s' %% (n, 'host' if host[n] == link "      \
    "else 'own'))\n"                                                           \
    "mounts = []\n"                                                            \
    "for ln in open('/proc/self/mountinfo'):\n"                                \
    "    f = ln.split()\n"                                                     \
    "    dash = f.index('-')\n"                                                \
    "    sup = ','.join(o for o in f[dash + 3].split(',') "                    \
    "if o.split('=')[0] not in ('uid', 'gid'))\n"                              \
    "    root = re.sub('^/bindfile[^/]*/', '/bindfile/', f[3])\n"             \
    "    mounts.append('mount %%s root=%%s %%s %%s %%s %%s' %% (f[4], root, "   \
    "f[5], f[dash + 1], f[dash + 2] if f[dash + 1] != 'tmpfs' else '-', "       \
    "sup))\n"                                                                  \
    "facts += sorted(mounts)\n"                                                \
    "seen = [m.split()[1] for m in mounts]\n"                                  \
    "facts += ['stacked ' + p for p in sorted(set(seen)) "                     \
    "if seen.count(p) > 1]\n"                                                  \
    "for k in ('uid_map', 'gid_map', 'setgroups'):\n"                          \
    "    for ln in open('/proc/self/' + k):\n"                                 \
    "        f = ln.split()\n"                                                 \
    "        outer = f[1:2] and ('outer=inner' if f[1] == f[0] else "          \
    "'outer=other')\n"                                                        \
    "        facts.append('%%s %%s' %% (k, ' '.join(f[:1] + f[2:] + "           \
    "[outer or ''])))\n"                                                      \
    "for ln in open('/proc/self/status'):\n"                                   \
    "    k = ln.split(':')[0]\n"                                               \
    "    if k.startswith('Cap') or k in ('NoNewPrivs', 'Seccomp', 'Uid', "     \
    "'Gid', 'Groups'):\n"                                                      \
    "        facts.append(' '.join(ln.split()))\n"                             \
    "facts.append('hostname ' + socket.gethostname())\n"                       \
    "facts.append('interfaces %%s' %% sorted(ln.split(':')[0].strip() "      \
    "for ln in list(open('/proc/net/dev'))[2:]))\n"                          \
    "facts.append('loopback ' + ('up' if '127.0.0.1' in "                     \
    "open('/proc/net/fib_trie').read() else 'down'))\n"                      \
    "facts.append('cwd ' + os.getcwd())\n"                                     \
    "facts.append('max_user_namespaces ' + "                                   \
    "open('/proc/sys/user/max_user_namespaces').read().strip())\n"             \
    "import ctypes\n"                                                         \
    "libc = ctypes.CDLL(None, use_errno=True)\n"                              \
    "if libc.unshare(0x10000000) == 0:\n"                                     \
    "    facts.append('userns allowed')\n"                                     \
    "else:\n"                                                                  \
    "    facts.append('userns refused %%d' %% ctypes.get_errno())\n"          \
    "facts += ['env %%s=%%s' %% kv for kv in sorted(os.environ.items())]\n"     \
    "st = os.stat('/home')\n"                                                  \
    "facts.append('/home %%o' %% (st.st_mode & 0o7777))\n"                     \
    "print('\\n'.join(facts))\n"

/* The host's namespaces, as "name=link" words. */
static void host_ns(char *out, size_t outsz)
{
    static const char *const ns[] = {"cgroup", "ipc", "mnt", "net",
                                     "pid", "user", "uts"};
    size_t i, used = 0;

    out[0] = '\0';
    for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        char path[64], link[64];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
        n = readlink(path, link, sizeof(link) - 1);
        assert_true(n > 0);
        link[n] = '\0';
        used += (size_t)snprintf(out + used, outsz - used, "%s%s=%s",
                                 used ? " " : "", ns[i], link);
        assert_true(used < outsz);
    }
}

/* What the code cannot see: the limit on user namespaces of the one its
 * own is nested in (no further user namespaces: seccomp refuses them
 * before the limit would), read by a child of ours that joins it. */
static void outer_limit(pid_t pid, char *out, size_t outsz)
{
    char path[64], buf[32] = "";
    int fd, parent, p[2];
    ssize_t n = 0;
    pid_t child;

    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    parent = ioctl(fd, NS_GET_PARENT);
    assert_true(parent >= 0);
    assert_int_equal(pipe(p), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        int f;

        if (setns(parent, CLONE_NEWUSER) == 0 &&
            (f = open("/proc/sys/user/max_user_namespaces", O_RDONLY)) >= 0)
            n = read(f, buf, sizeof(buf) - 1);
        _exit(n > 0 && write(p[1], buf, (size_t)n) == n ? 0 : 1);
    }
    close(p[1]);
    n = read(p[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(p[0]);
    close(parent);
    close(fd);
    waitpid(child, NULL, 0);
    snprintf(out, outsz, "outer max_user_namespaces %s", buf);
}

static char *facts_of(struct shim_sandbox *sb)
{
    char ns[512], code[sizeof(JAIL_FACTS) + 512], limit[64], marker[32];
    struct shim_exec_result r;
    pid_t worker, sup;
    char *out;

    snprintf(marker, sizeof(marker), "1000.7%05d", (int)(getpid() % 100000));
    snprintf(code, sizeof(code),
             "import subprocess\n_ = subprocess.Popen(['sleep', '%s'])",
             marker);
    run(sb, code, &r);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    shim_exec_result_free(&r);
    sandbox_of("sleep", marker, &worker, &sup);
    outer_limit(sup, limit, sizeof(limit));
    host_ns(ns, sizeof(ns));
    snprintf(code, sizeof(code), JAIL_FACTS, ns);
    run(sb, code, &r);
    if (r.status != SHIM_EXEC_OK)
        print_error("status %d:\n%s\n", r.status, r.logs);
    assert_int_equal(r.status, SHIM_EXEC_OK);
    out = malloc(r.logs_len + strlen(limit) + 1);
    assert_non_null(out);
    memcpy(out, r.logs, r.logs_len);
    strcpy(out + r.logs_len, limit);
    shim_exec_result_free(&r);
    return out;
}

/* Prints the lines of a not in b (prefix) for the failure's message. */
static int missing_lines(const char *a, const char *b, const char *prefix)
{
    int n = 0;

    while (*a) {
        size_t len = strcspn(a, "\n");
        const char *p = b;
        int found = 0;

        while (*p && !found) {
            size_t lp = strcspn(p, "\n");

            found = lp == len && !strncmp(p, a, len);
            p += lp + (p[lp] == '\n');
        }
        if (!found) {
            print_error("%s%.*s\n", prefix, (int)len, a);
            n++;
        }
        a += len + (a[len] == '\n');
    }
    return n;
}

static void test_cold_and_forked_alike(void **state)
{
    struct shim_config c;
    struct shim_sandbox *sb;
    unsigned long forks = zstats().forks;
    char *cold, *forked;

    (void)state;
    make_cfg(&c);
    sb = open_sb(&c); /* no server up: cold */
    cold = facts_of(sb);
    shim_sandbox_close(sb);
    assert_int_equal(zstats().forks, forks);
    server_up(&c);
    sb = open_sb(&c);
    assert_int_equal(zstats().forks, forks + 1);
    forked = facts_of(sb);
    shim_sandbox_close(sb);
    if (strcmp(cold, forked)) {
        print_error("cold and forked jails differ\n");
        missing_lines(cold, forked, "  only cold:   ");
        missing_lines(forked, cold, "  only forked: ");
        fprintf(stderr, "cold:\n%s\nforked:\n%s\n", cold, forked);
    }
    assert_string_equal(cold, forked);
    /* the facts say something: a jail that shows none is no test */
    assert_non_null(strstr(cold, "ns net own"));
    assert_non_null(strstr(cold, "mount /mnt/data "));
    assert_non_null(strstr(cold, "CapEff: 0000000000000000"));
    assert_non_null(strstr(cold, "outer max_user_namespaces 1\n"));
    free(cold);
    free(forked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cold_and_forked_alike),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
