/* sandbox_bench.c - what the local sandbox costs (make bench-sandbox).
 *
 *   sandbox_bench [N]
 *
 * Times, N times each (interleaved, so both see the same machine load):
 *   python      a bare `/usr/bin/python3 -I -c pass` (spawn and wait): the
 *               floor any Python sandbox starts from;
 *   cold        shim_sandbox_open + the first shim_sandbox_exec("print(1)")
 *               until its result is back: bubblewrap, namespaces, seccomp,
 *               the supervisor and the notebook interpreter (what a
 *               request costs where no sandbox host lends one; pooled
 *               sandboxes: fork_bench and session_bench);
 *   warm        shim_sandbox_exec("print(1)") in a sandbox that is up;
 *   restart     the execution after a timeout (a fresh interpreter, same
 *               sandbox), minus nothing: what the next call costs;
 *   close       shim_sandbox_close (every sandbox process gone).
 * Before each open, the machine is left idle for a moment (SETTLE_MS), as
 * a program is while the model answers.
 * Prints median, interquartile range, min and max in milliseconds. Measured,
 * never asserted. */
#include "sandbox/sandbox.h"
#include "system/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define SETTLE_MS 300

static void row(const char *name, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    printf("%-46s median %8.3f ms   IQR %8.3f-%-8.3f  min %8.3f  max %8.3f\n",
           name, v[n / 2], v[n / 4], v[(3 * n) / 4], v[0], v[n - 1]);
}

static const char *no_env(const char *name, void *ctx)
{
    (void)ctx;
    /* the benchmark's own settings only: never the caller's CODESHIM_* */
    if (!strcmp(name, "CODESHIM_EXEC_TIMEOUT"))
        return "1";
    return NULL;
}

static int exec1(struct shim_sandbox *sb, const char *code,
                 enum shim_exec_status want)
{
    struct shim_exec_result r;
    int ok;

    if (shim_sandbox_exec(sb, code, strlen(code), &r) != 0)
        return -1;
    ok = r.status == want;
    if (!ok)
        fprintf(stderr, "unexpected status %d: %s\n", r.status, r.logs);
    shim_exec_result_free(&r);
    return ok ? 0 : -1;
}

/* Lets everything started before finish starting. */
static void settle(void)
{
    struct timespec ts = {0, SETTLE_MS * 1000000L};

    nanosleep(&ts, NULL);
}

/* open + the first print(1): ms, or -1. */
static double open_exec(const struct shim_config *c, struct shim_sandbox **sb)
{
    double t0 = now_ms();

    if (shim_sandbox_open(c, sb) != 0 || exec1(*sb, "print(1)", SHIM_EXEC_OK))
        return -1;
    return now_ms() - t0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 30, i, w = 0;
    double *py, *cold, *warm, *restart, *close_t;
    struct shim_config c;
    struct shim_sandbox *sb;

    if (n < 4)
        n = 4;
    py = calloc((size_t)n, sizeof(double));
    cold = calloc((size_t)n, sizeof(double));
    warm = calloc((size_t)n * 10, sizeof(double));
    restart = calloc((size_t)n, sizeof(double));
    close_t = calloc((size_t)n, sizeof(double));
    if (!py || !cold || !warm || !restart || !close_t)
        return 1;
    shim_config_parse(&c, no_env, NULL, NULL);
    if (open_exec(&c, &sb) < 0) {
        fprintf(stderr, "the sandbox does not work here\n");
        return 1;
    }
    shim_sandbox_close(sb);
    for (i = 0; i < n; i++) {
        double t0;
        int k;

        settle();
        py[i] = python_ms("pass");
        settle();
        cold[i] = open_exec(&c, &sb);
        if (cold[i] < 0)
            return 1;
        for (k = 0; k < 10; k++) {
            t0 = now_ms();
            if (exec1(sb, "print(1)", SHIM_EXEC_OK) != 0)
                return 1;
            warm[w++] = now_ms() - t0;
        }
        if (exec1(sb, "while True: pass", SHIM_EXEC_TIMEOUT) != 0)
            return 1;
        t0 = now_ms();
        if (exec1(sb, "print(1)", SHIM_EXEC_OK) != 0)
            return 1;
        restart[i] = now_ms() - t0;
        t0 = now_ms();
        shim_sandbox_close(sb);
        close_t[i] = now_ms() - t0;
    }
    printf("local sandbox, N=%d (%ld cores, %s)\n", n,
           sysconf(_SC_NPROCESSORS_ONLN),
           geteuid() == 0 ? "root" : "ordinary user");
    row("bare python3 -I -c pass (spawn + wait)", py, n);
    row("cold: open + first print(1)", cold, n);
    row("warm: print(1) in a running sandbox", warm, w);
    row("after a timeout: print(1), fresh interpreter", restart, n);
    row("close (all sandbox processes gone)", close_t, n);
    return 0;
}
