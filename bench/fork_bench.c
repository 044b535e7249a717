/* fork_bench.c - what sandboxes forked from the fork server cost, as
 * ratios against references measured in the same run, each beside its
 * goal (make bench-fork; make bench runs it too).
 *
 *   fork_bench [N]
 *
 * References (N times each, interleaved with what they are compared to):
 *   python  a bare `/usr/bin/python3 -I -c pass` (spawn and wait);
 *   import  a cold `python3 -I -c "import numpy, pandas, matplotlib.pyplot"`.
 * Rows (open + first execution until its result is back, unless said):
 *   cold start       CODESHIM_FORK_SERVER=0: print('ok')
 *   forked start     the fork server up (started here as the sandbox host
 *                    starts its own: shim_sandbox_keep_warm): print('ok');
 *                    and the open + execution of `pass` alone (the new
 *                    sandbox ready)
 *   back to back     open (forked), print('ok'), close, N times in a row
 *   (a sandbox lent from the host's pool, whole requests: session_bench.py)
 *   first import     import numpy, pandas, matplotlib.pyplot in a new
 *                    sandbox from the server
 *   warm execution   print('ok') in a sandbox that is up
 *   idle memory      Private_Clean + Private_Dirty (smaps_rollup) of a
 *                    forked sandbox's processes after one execution, idle
 * Measured, never asserted. */
#include "sandbox/local/local_zygote.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAXN 200
#define IMPORTS "import numpy, pandas, matplotlib.pyplot"

static const char *no_env(const char *name, void *ctx)
{
    (void)name;
    (void)ctx;
    return NULL;
}

static int exec_ok(struct shim_sandbox *sb, const char *code)
{
    struct shim_exec_result r;
    int ok;

    if (shim_sandbox_exec(sb, code, strlen(code), &r) != 0)
        return 0;
    ok = r.status == SHIM_EXEC_OK;
    if (!ok)
        fprintf(stderr, "execution failed: %s\n", r.logs);
    shim_exec_result_free(&r);
    return ok;
}

/* open + first execution of code; the sandbox is closed after (untimed). */
static double open_exec(const struct shim_config *c, const char *code)
{
    struct shim_sandbox *sb = NULL;
    double t0 = now_ms(), t;

    if (shim_sandbox_open(c, &sb) != 0 || !exec_ok(sb, code))
        return -1;
    t = now_ms() - t0;
    shim_sandbox_close(sb);
    return t;
}

static void settle(void)
{
    struct timespec ts = {0, 200 * 1000000L};

    nanosleep(&ts, NULL);
}

static void server_up(const struct shim_config *c)
{
    struct shim_local_zygote_stats s;
    int i;

    for (i = 0; i < 600; i++) {
        shim_sandbox_keep_warm(c);
        shim_local_zygote_stats(&s);
        if (s.up && (unsigned long)s.up == s.servers_started - s.failed)
            return;
        settle();
    }
    fprintf(stderr, "no fork server came up\n");
}

/* Sum of Private_* (kB) of pid's descendants (not pid itself). */
static long parent_of(long pid)
{
    char path[64], buf[512], *p;
    long ppid = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (!(f = fopen(path, "r")))
        return -1;
    if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
        sscanf(p + 2, "%*c %ld", &ppid);
    fclose(f);
    return ppid;
}

static long private_kb(long pid)
{
    char path[64], line[256];
    long kb = 0, v;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", pid);
    if (!(f = fopen(path, "r")))
        return 0;
    while (fgets(line, sizeof(line), f))
        if ((sscanf(line, "Private_Clean: %ld", &v) == 1) ||
            (sscanf(line, "Private_Dirty: %ld", &v) == 1))
            kb += v;
    fclose(f);
    return kb;
}

static long tree_private_kb(long root, int *nproc)
{
    long tree[256], kb = 0;
    int n = 1, grew = 1, i;

    tree[0] = root;
    while (grew && n < 256) {
        DIR *d = opendir("/proc");
        struct dirent *e;

        grew = 0;
        while (d && (e = readdir(d)) && n < 256) {
            long p = strtol(e->d_name, NULL, 10), pp;
            int known = 0;

            if (p <= 0)
                continue;
            for (i = 0; i < n; i++)
                known |= tree[i] == p;
            if (known || (pp = parent_of(p)) <= 0)
                continue;
            for (i = 0; i < n; i++)
                if (tree[i] == pp) {
                    tree[n++] = p;
                    grew = 1;
                    break;
                }
        }
        if (d)
            closedir(d);
    }
    for (i = 1; i < n; i++)
        kb += private_kb(tree[i]);
    *nproc = n - 1;
    return kb;
}

/* A child of pid (the zygote: bwrap's only one), and how many it has
 * (the zygote's: one per sandbox forked from it that is still there). */
static long a_child(long pid, int *n)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    long found = -1;

    *n = 0;
    while (d && (e = readdir(d))) {
        long p = strtol(e->d_name, NULL, 10);
        if (p > 0 && parent_of(p) == pid) {
            found = p;
            ++*n;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* goal 0: a row the issue asks to report, with no goal of its own */
static void ratio(const char *name, double v, double ref, const char *refname,
                  double goal)
{
    printf("%-44s %9.3f ms = %6.3fx %-8s", name, v, v / ref, refname);
    if (goal > 0)
        printf(" goal <= %gx%s", goal, v / ref <= goal ? "" : "  (not met)");
    printf("\n");
}

int main(int argc, char **argv)
{
    static double ref_py[MAXN], ref_imp[MAXN], cold[MAXN], pooled[MAXN],
        ready[MAXN], b2b[MAXN], imp[MAXN], warm[MAXN];
    int n = argc > 1 ? atoi(argv[1]) : 20, ni, i;
    struct shim_config c, cold_c;
    struct shim_sandbox *sb = NULL, *sb2 = NULL;
    struct shim_local_zygote_stats zs;
    double t0, py, im;
    long kb, zyg;
    int nproc, nsb = 0;

    if (n < 4)
        n = 4;
    if (n > MAXN)
        n = MAXN;
    ni = n / 4 < 3 ? 3 : n / 4;
    shim_config_parse(&c, no_env, NULL, NULL);
    cold_c = c;
    cold_c.fork_server = 0;
    server_up(&c);
    for (i = 0; i < n; i++) {
        ref_py[i] = python_ms("pass");
        settle();
        cold[i] = open_exec(&cold_c, "print('ok')");
        settle();
        pooled[i] = open_exec(&c, "print('ok')");
        settle();
        ready[i] = open_exec(&c, "pass");
        settle();
    }
    for (i = 0; i < ni; i++) {
        ref_imp[i] = python_ms(IMPORTS);
        settle();
        imp[i] = open_exec(&c, IMPORTS);
        settle();
    }
    for (i = 0; i < n; i++) /* back to back: no pause */
        b2b[i] = open_exec(&c, "print('ok')");
    if (shim_sandbox_open(&c, &sb) == 0 && exec_ok(sb, "pass")) {
        for (i = 0; i < n; i++) {
            t0 = now_ms();
            exec_ok(sb, "print('ok')");
            warm[i] = now_ms() - t0;
        }
    }
    /* a second one open: the server's children tell it from its own */
    if (shim_sandbox_open(&c, &sb2) != 0 || !exec_ok(sb2, "pass"))
        sb2 = NULL;
    settle();
    shim_local_zygote_stats(&zs);
    zyg = a_child(zs.server_pid, &nsb);
    /* as an ordinary user the server is the only child of the process
     * bwrap started (worker.py's _own_pid_namespace); the sandboxes, the
     * two open, are two */
    while (a_child(zyg, &nsb) > 0 && nsb == 1) {
        long kid = a_child(zyg, &nsb);
        int grandchildren;

        if (a_child(kid, &grandchildren) <= 0 || grandchildren < 2)
            break;
        zyg = kid;
    }
    a_child(zyg, &nsb);
    /* each sandbox: its PID 1 and worker; per sandbox */
    kb = tree_private_kb(zyg, &nproc) / (nsb > 0 ? nsb : 1);
    shim_sandbox_close(sb);
    shim_sandbox_close(sb2);

    py = median(ref_py, n);
    im = median(ref_imp, ni);
    printf("fork server benchmarks, N=%d (%d for imports), %ld cores; "
           "references: python3 -I -c pass %.3f ms, cold import %.3f ms\n",
           n, ni, sysconf(_SC_NPROCESSORS_ONLN), py, im);
    ratio("cold start (no fork server): print('ok')", median(cold, n), py,
          "python", 0);
    ratio("forked start: print('ok')", median(pooled, n), py,
          "python", 0);
    printf("%-44s %9.3f ms\n", "new sandbox forked and ready: pass",
           median(ready, n));
    ratio("back to back (forked each time)", median(b2b, n), py, "python",
          0);
    ratio("first import numpy, pandas, matplotlib", median(imp, ni), im,
          "import", 0.1);
    ratio("warm execution: print('ok')", median(warm, n), py, "python", 0);
    printf("%-44s %9.1f MB   goal <= 10 MB%s (%d sandboxes, %d "
           "processes)\n", "idle private memory of a forked sandbox",
           (double)kb / 1024, kb <= 10 * 1024 ? "" : "  (not met)", nsb,
           nproc);
    shim_local_zygote_stats(&zs);
    printf("(%lu sandboxes forked, %lu fork servers started, %lu failed)\n",
           zs.forks, zs.servers_started, zs.failed);
    return 0;
}
