/* limitprog.c - a libcurl program that sets limits on its one transfer,
 * for codeshim's integration tests (test_limits.py). It knows nothing
 * about codeshim. One POST of the body read from --body-file to --url; the
 * result is one JSON object on stdout:
 *   {"rc", "errbuf", "progress_calls", "progress_off_thread" (calls on
 *    another thread or outside curl_easy_perform), "writes",
 *    "writes_while_paused" (header or body), "pauses", "headers", "body"}
 *
 *   --timeout-ms N     CURLOPT_TIMEOUT_MS
 *   --progress         XFERINFOFUNCTION counting its calls, NOPROGRESS 0
 *   --old-progress     the same with the old PROGRESSFUNCTION
 *   --abort-at N       the progress callback returns 1 on its Nth call
 *   --abort-after-ms N ... on its first call N ms or more after the
 *                      transfer began (with code that runs longer: a call
 *                      made while it runs)
 *   --pause-write      the write callback answers CURL_WRITEFUNC_PAUSE on
 *                      its first call (and on its 5th); the progress
 *                      callback unpauses (curl_easy_pause CONT) at its
 *                      third call after each pause
 *   --pause-header     the header callback answers CURL_WRITEFUNC_PAUSE on
 *                      its first call; unpaused as above
 *   --pause-api        curl_easy_pause(CURLPAUSE_RECV) from the header
 *                      callback at the first header line; unpaused as
 *                      above
 */
#define CURL_DISABLE_DEPRECATION 1 /* --old-progress sets PROGRESSFUNCTION */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CURL *g_h;
static pthread_t g_main;
static int g_in_perform;
static int g_progress_calls, g_off_thread, g_abort_at;
static long g_abort_after_ms;
static struct timespec g_t0;
static int g_pause_write, g_pause_api, g_pause_header, g_paused, g_since_pause, g_pauses;
static int g_writes, g_writes_paused, g_headers;
static char *g_body, *g_hdrs;
static size_t g_len, g_hlen;

static int add(char **b, size_t *len, const char *p, size_t n)
{
    char *d = realloc(*b, *len + n + 1);

    if (!d)
        return -1;
    memcpy(d + *len, p, n);
    *b = d;
    *len += n;
    d[*len] = '\0';
    return 0;
}

static void on_thread(void)
{
    if (!pthread_equal(pthread_self(), g_main) || !g_in_perform)
        g_off_thread++;
}

static int progress_step(void)
{
    on_thread();
    g_progress_calls++;
    if (g_paused && ++g_since_pause >= 3) {
        g_paused = 0;
        curl_easy_pause(g_h, CURLPAUSE_CONT);
    }
    if (g_abort_after_ms) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - g_t0.tv_sec) * 1000 + (t.tv_nsec - g_t0.tv_nsec) / 1000000 >=
            g_abort_after_ms)
            return 1;
    }
    return g_abort_at && g_progress_calls >= g_abort_at;
}

static int on_xferinfo(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)ud, (void)dt, (void)dn, (void)ut, (void)un;
    return progress_step();
}

static int on_progress(void *ud, double dt, double dn, double ut, double un)
{
    (void)ud, (void)dt, (void)dn, (void)ut, (void)un;
    return progress_step();
}

static void pause_now(void)
{
    g_paused = 1;
    g_since_pause = 0;
    g_pauses++;
}

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
    (void)ud;
    on_thread();
    if (g_paused)
        g_writes_paused++;
    g_writes++;
    if (g_pause_write && (g_writes == 1 || g_writes == 5)) {
        pause_now();
        return CURL_WRITEFUNC_PAUSE; /* these bytes come again */
    }
    return add(&g_body, &g_len, p, sz * n) ? 0 : sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    (void)ud;
    on_thread();
    if (g_paused)
        g_writes_paused++;
    if (g_pause_header && g_headers++ == 0) {
        pause_now();
        return CURL_WRITEFUNC_PAUSE; /* this line comes again */
    }
    if (g_pause_api && g_headers++ == 0) {
        pause_now();
        curl_easy_pause(g_h, CURLPAUSE_RECV);
    }
    return add(&g_hdrs, &g_hlen, p, sz * n) ? 0 : sz * n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s;
    long n;

    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        exit(2);
    s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n)
        exit(2);
    s[n] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *body = NULL;
    long timeout_ms = 0;
    int progress = 0, old_progress = 0, i;
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hl = NULL;
    cJSON *o;
    CURLcode rc;
    char *js;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--body-file") && i + 1 < argc)
            body = slurp(argv[++i]);
        else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
            timeout_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--abort-at") && i + 1 < argc)
            g_abort_at = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--abort-after-ms") && i + 1 < argc)
            g_abort_after_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--progress"))
            progress = 1;
        else if (!strcmp(argv[i], "--old-progress"))
            old_progress = 1;
        else if (!strcmp(argv[i], "--pause-write"))
            g_pause_write = progress = 1;
        else if (!strcmp(argv[i], "--pause-header"))
            g_pause_header = progress = 1;
        else if (!strcmp(argv[i], "--pause-api"))
            g_pause_api = progress = 1;
        else
            return 2;
    }
    if (!url || !body)
        return 2;
    g_main = pthread_self();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    g_h = curl_easy_init();
    hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Authorization: Bearer sk-test");
    curl_easy_setopt(g_h, CURLOPT_URL, url);
    curl_easy_setopt(g_h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(g_h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(g_h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(g_h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(g_h, CURLOPT_ERRORBUFFER, errbuf);
    if (timeout_ms)
        curl_easy_setopt(g_h, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (progress) {
        curl_easy_setopt(g_h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
        curl_easy_setopt(g_h, CURLOPT_NOPROGRESS, 0L);
    } else if (old_progress) {
        curl_easy_setopt(g_h, CURLOPT_PROGRESSFUNCTION, on_progress);
        curl_easy_setopt(g_h, CURLOPT_NOPROGRESS, 0L);
    }
    g_in_perform = 1;
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    rc = curl_easy_perform(g_h);
    g_in_perform = 0;
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "rc", rc);
    cJSON_AddStringToObject(o, "errbuf", errbuf);
    cJSON_AddNumberToObject(o, "progress_calls", g_progress_calls);
    cJSON_AddNumberToObject(o, "progress_off_thread", g_off_thread);
    cJSON_AddNumberToObject(o, "writes", g_writes);
    cJSON_AddNumberToObject(o, "writes_while_paused", g_writes_paused);
    cJSON_AddNumberToObject(o, "pauses", g_pauses);
    cJSON_AddStringToObject(o, "headers", g_hdrs ? g_hdrs : "");
    cJSON_AddStringToObject(o, "body", g_body ? g_body : "");
    js = cJSON_PrintUnformatted(o);
    puts(js);
    free(js);
    cJSON_Delete(o);
    curl_easy_cleanup(g_h);
    curl_slist_free_all(hl);
    free(g_body);
    free(g_hdrs);
    free((char *)body);
    curl_global_cleanup();
    return 0;
}
