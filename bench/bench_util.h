/* bench_util.h - what the benchmarks of bench/ measure with: clocks in ms,
 * the order and median of samples, a write callback that keeps nothing, a
 * file read whole, and the reference: a bare Python start. Header-only
 * (static inline): each benchmark is a program of one file. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

static inline double clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline double now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

/* qsort's order of doubles */
static inline int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Sorts v (n > 0) and returns its median. */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return v[n / 2];
}

/* CURLOPT_WRITEFUNCTION that takes and drops everything */
static inline size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* The whole file, NUL-terminated (its size in *len if len), or NULL. */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long size;
    char *b;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return NULL;
    }
    b = malloc((size_t)size + 1);
    if (b && fread(b, 1, (size_t)size, f) != (size_t)size) {
        free(b);
        b = NULL;
    }
    if (b) {
        b[size] = '\0';
        if (len)
            *len = (size_t)size;
    }
    fclose(f);
    return b;
}

/* ms of `/usr/bin/python3 -I -c code`, spawned and waited for; -1 if it
 * could not start. */
static inline double python_ms(const char *code)
{
    extern char **environ;
    char py[] = "/usr/bin/python3", i[] = "-I", cc[] = "-c";
    char *argv[] = {py, i, cc, (char *)code, NULL};
    double t0 = now_ms();
    pid_t pid;
    int st;

    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    waitpid(pid, &st, 0);
    return now_ms() - t0;
}

#endif
