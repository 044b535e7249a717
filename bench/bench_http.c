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

#include "bench_util.h"

int main(int argc, char **argv)
{
    char *body;
    int n, i;
    double *t;
    CURL *h;
    struct curl_slist *hd = NULL;

    if (argc != 4 || (n = atoi(argv[2])) < 1) {
        fprintf(stderr, "usage: %s URL N BODYFILE\n", argv[0]);
        return 2;
    }
    if (!(body = slurp(argv[3], NULL)))
        return 2;
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
