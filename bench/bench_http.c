/* bench_http.c - times N POSTs from one libcurl handle (connection reused)
 * and prints median and spread. Run it with and without codeshim
 * preloaded to measure what codeshim costs a program:
 *
 *   bench_http URL N BODYFILE
 *
 * Prints: "<median_ms> <p25_ms> <p75_ms> <min_ms> <max_ms>". */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    FILE *f;
    char *body;
    long size;
    int n, i;
    double *t;
    CURL *h;
    struct curl_slist *hd = NULL;

    if (argc != 4 || (n = atoi(argv[2])) < 1) {
        fprintf(stderr, "usage: %s URL N BODYFILE\n", argv[0]);
        return 2;
    }
    f = fopen(argv[3], "rb");
    if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        return 2;
    body = malloc((size_t)size + 1);
    if (!body || fread(body, 1, (size_t)size, f) != (size_t)size)
        return 2;
    body[size] = '\0';
    fclose(f);
    t = calloc((size_t)n, sizeof(*t));
    hd = curl_slist_append(hd, "Content-Type: application/json");
    h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, argv[1]);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    for (i = 0; i < n; i++) {
        double t0 = now_ms();
        CURLcode rc = curl_easy_perform(h);
        t[i] = now_ms() - t0;
        if (rc != CURLE_OK) {
            fprintf(stderr, "request %d failed: %s\n", i, curl_easy_strerror(rc));
            return 1;
        }
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    printf("%.3f %.3f %.3f %.3f %.3f\n", t[n / 2], t[n / 4], t[(3 * n) / 4], t[0], t[n - 1]);
    curl_easy_cleanup(h);
    curl_slist_free_all(hd);
    free(body);
    free(t);
    return 0;
}
