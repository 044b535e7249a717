/* host_bench.c - what codeshim costs a host program, measured from inside
 * one (run it with and without codeshim preloaded; bench/run.sh does):
 *
 *   host_bench cpu URL N BODYFILE
 *       N performs of BODYFILE on one handle; prints the CPU time of the
 *       calling thread per perform (codeshim's loop runs on it), in ms:
 *       "<median> <p25> <p75>"
 *   host_bench threads URL T R BODYFILE
 *       T threads, each with its own handle, each R performs; prints
 *       "<requests per second> <VmHWM kB>"
 *   host_bench mem URL BODYFILE [K]
 *       K performs (1); prints "<VmRSS before> <peak during> <VmRSS after>
 *       <VmRSS after malloc_trim>" in kB (the peak is VmHWM, reset just
 *       before the perform; the last tells memory still in use from memory
 *       the C library keeps for reuse)
 *
 * Every perform must succeed with HTTP 200, or the program fails. */
#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

static const char *url;
static const char *body;

/* A kB field of /proc/self/status ("VmRSS", "VmHWM"); -1 if unreadable. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = atol(line + n + 1);
    fclose(f);
    return v;
}

static CURL *handle(struct curl_slist *hd)
{
    CURL *h = curl_easy_init();

    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    return h;
}

static int perform(CURL *h)
{
    long code = 0;
    CURLcode rc = curl_easy_perform(h);

    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK || code != 200) {
        fprintf(stderr, "host_bench: perform: %s, HTTP %ld\n", curl_easy_strerror(rc), code);
        return -1;
    }
    return 0;
}

static int run_cpu(int n, struct curl_slist *hd)
{
    CURL *h = handle(hd);
    double *t = calloc((size_t)n, sizeof(*t));
    int i;

    if (!h || !t)
        return 1;
    for (i = 0; i < n; i++) {
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        if (perform(h) < 0)
            return 1;
        t[i] = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    printf("%.4f %.4f %.4f\n", t[n / 2], t[n / 4], t[(3 * n) / 4]);
    curl_easy_cleanup(h);
    free(t);
    return 0;
}

struct worker {
    pthread_t tid;
    int r, failed;
    struct curl_slist *hd;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    CURL *h = handle(w->hd);
    int i;

    w->failed = !h;
    for (i = 0; h && i < w->r && !w->failed; i++)
        w->failed = perform(h) < 0;
    curl_easy_cleanup(h);
    return NULL;
}

static int run_threads(int t, int r, struct curl_slist *hd)
{
    struct worker *w = calloc((size_t)t, sizeof(*w));
    double t0 = clock_ms(CLOCK_MONOTONIC), dt;
    int i, failed = 0;

    if (!w)
        return 1;
    for (i = 0; i < t; i++) {
        w[i].r = r;
        w[i].hd = hd;
        if (pthread_create(&w[i].tid, NULL, work, &w[i]) != 0)
            return 1;
    }
    for (i = 0; i < t; i++) {
        pthread_join(w[i].tid, NULL);
        failed |= w[i].failed;
    }
    dt = clock_ms(CLOCK_MONOTONIC) - t0;
    if (failed)
        return 1;
    printf("%.2f %ld\n", (double)t * r / (dt / 1e3), status_kb("VmHWM"));
    free(w);
    return 0;
}

static int run_mem(int k, struct curl_slist *hd)
{
    CURL *h = handle(hd);
    long before, peak, after, trimmed;
    FILE *f;

    if (!h)
        return 1;
    before = status_kb("VmRSS");
    f = fopen("/proc/self/clear_refs", "w"); /* "5": VmHWM := VmRSS */
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    while (k-- > 0)
        if (perform(h) < 0)
            return 1;
    peak = status_kb("VmHWM");
    after = status_kb("VmRSS");
    malloc_trim(0);
    trimmed = status_kb("VmRSS");
    printf("%ld %ld %ld %ld\n", before, peak, after, trimmed);
    curl_easy_cleanup(h);
    return 0;
}

int main(int argc, char **argv)
{
    struct curl_slist *hd = NULL;
    const char *mode = argc > 1 ? argv[1] : "";
    int rc;

    if (!strcmp(mode, "cpu") && argc == 5)
        body = slurp(argv[4], NULL);
    else if (!strcmp(mode, "threads") && argc == 6)
        body = slurp(argv[5], NULL);
    else if (!strcmp(mode, "mem") && (argc == 4 || argc == 5))
        body = slurp(argv[3], NULL);
    else {
        fprintf(stderr, "usage: %s cpu URL N BODY | threads URL T R BODY | mem URL BODY [K]\n",
                argv[0]);
        return 2;
    }
    if (!body)
        return 2;
    url = argv[2];
    curl_global_init(CURL_GLOBAL_DEFAULT);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    if (!strcmp(mode, "cpu"))
        rc = run_cpu(atoi(argv[3]) > 0 ? atoi(argv[3]) : 1, hd);
    else if (!strcmp(mode, "threads"))
        rc = run_threads(atoi(argv[3]) > 0 ? atoi(argv[3]) : 1,
                         atoi(argv[4]) > 0 ? atoi(argv[4]) : 1, hd);
    else
        rc = run_mem(argc == 5 && atoi(argv[4]) > 0 ? atoi(argv[4]) : 1, hd);
    curl_slist_free_all(hd);
    curl_global_cleanup();
    return rc;
}
