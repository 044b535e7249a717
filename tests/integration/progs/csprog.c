/* csprog.c - an ordinary libcurl program for codeshim's integration tests.
 * It knows nothing about codeshim; each flag picks one way real programs use
 * libcurl (delivery, getinfo, body options, handle life cycle), and the
 * result of every transfer is written as JSON to --result FILE.
 *
 *   csprog --url URL [--body-file F] [--header "N: v"]... [options]
 *
 * Body: --body MODE with MODE one of
 *   postfields        POSTFIELDS (NUL-terminated)
 *   size-before       POSTFIELDSIZE then POSTFIELDS (buffer not NUL-terminated)
 *   size-after        POSTFIELDS then POSTFIELDSIZE (buffer not NUL-terminated)
 *   large-before      POSTFIELDSIZE_LARGE then POSTFIELDS (not NUL-terminated)
 *   large-after       POSTFIELDS then POSTFIELDSIZE_LARGE (not NUL-terminated)
 *   copy              COPYPOSTFIELDS, then the source is scribbled and freed
 *   copy-size         POSTFIELDSIZE, COPYPOSTFIELDS of a non-terminated buffer,
 *                     then the source is scribbled and freed
 *   --url-last        CURLOPT_URL is set after every other option
 * Delivery:
 *   --no-writefn      no WRITEFUNCTION (libcurl's fwrite default)
 *   --writedata-file F  WRITEDATA = fopen(F) (implies --no-writefn)
 *   --no-headerfn     no HEADERFUNCTION
 *   --headerdata      HEADERDATA set (to the header buffer); with --no-headerfn
 *                     headers reach the write callback with that userdata
 *   --include-header  CURLOPT_HEADER = 1
 *   --short-write     the write callback takes one byte less than given
 *   --short-header    the header callback takes nothing
 *   --failonerror     CURLOPT_FAILONERROR = 1
 *   --errbuf          CURLOPT_ERRORBUFFER set
 *   --errbuf-prefill  ... holding an old message before the transfer
 * Life cycle:
 *   --repeat N        perform the same handle N times (results[] has N)
 *   --reset-get URL2  after the first transfer: curl_easy_reset, then a plain
 *                     GET of URL2 with a write callback (one more result)
 *   --dup             configure a handle, duphandle it, clean the original up,
 *                     then perform the copy
 *   --reuse URL2      configure handle 1 as above (performed unless
 *                     --reuse-noperform), clean it up, init handle 2 (records
 *                     whether the address is the same and its RESPONSE_CODE
 *                     before any transfer), plain GET of URL2 on it
 *   --threads N       N threads, each its own handle and transfer; the body's
 *                     "@@N@@" is replaced by the thread number
 */
#define CURL_DISABLE_DEPRECATION 1 /* the tests ask the old double infos too */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    char *data;
    size_t len;
};

struct xfer {
    struct buf body, headers;
    int write_calls, hdr_calls;
    int short_write, short_header;
    CURL *h;
    long first_code; /* getinfo inside the header callback, first call */
    long last_code;  /* ... and at the last call */
    char last_ctype[256], last_url[1024];
    int last_ctype_null;
};

static const char *g_url, *g_body_mode = "postfields", *g_wfile;
static char *g_body;
static size_t g_body_len;
static struct curl_slist *g_headers;
static int g_no_writefn, g_no_headerfn, g_headerdata, g_include_header;
static int g_short_write, g_short_header, g_failonerror, g_errbuf, g_errbuf_prefill;
static int g_url_last;

static void buf_add(struct buf *b, const char *p, size_t n)
{
    char *d = realloc(b->data, b->len + n + 1);
    if (!d)
        abort();
    memcpy(d + b->len, p, n);
    b->data = d;
    b->len += n;
    d[b->len] = '\0';
}

/* WRITEDATA is the xfer (body); HEADERDATA (when set) is &xfer->headers.
 * When headers come through here (HEADERDATA without HEADERFUNCTION) the
 * userdata tells them apart. */
static struct xfer *g_owner_of_headers[64];

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
    size_t len = sz * n;
    struct xfer *x = ud;
    int i;

    for (i = 0; i < 64; i++) {
        if (g_owner_of_headers[i] && ud == &g_owner_of_headers[i]->headers) {
            x = g_owner_of_headers[i];
            x->hdr_calls++;
            buf_add(&x->headers, p, len);
            return len;
        }
    }
    x->write_calls++;
    buf_add(&x->body, p, len);
    if (x->short_write)
        return len - 1;
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    size_t len = sz * n;
    struct xfer *x = (struct xfer *)((char *)ud - offsetof(struct xfer, headers));
    long code = -1;
    char *ct = NULL, *url = NULL;

    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
    if (x->hdr_calls == 0)
        x->first_code = code;
    x->last_code = code;
    curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ct);
    x->last_ctype_null = ct == NULL;
    snprintf(x->last_ctype, sizeof(x->last_ctype), "%s", ct ? ct : "");
    curl_easy_getinfo(x->h, CURLINFO_EFFECTIVE_URL, &url);
    snprintf(x->last_url, sizeof(x->last_url), "%s", url ? url : "");
    x->hdr_calls++;
    buf_add(&x->headers, p, len);
    return x->short_header ? 0 : len;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct buf b = {0};
    char tmp[65536];
    size_t n;

    if (!f) {
        perror(path);
        exit(2);
    }
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        buf_add(&b, tmp, n);
    fclose(f);
    if (!b.data)
        buf_add(&b, "", 0);
    *len = b.len;
    return b.data;
}

/* A copy of body with no NUL after it: junk that would break the JSON if
 * anyone read past the given size. */
static char *unterminated(const char *body, size_t len)
{
    char *p = malloc(len + 4097);
    memcpy(p, body, len);
    memset(p + len, 'Z', 4096);
    p[len + 4096] = '\0';
    return p;
}

static void set_body(CURL *h, const char *body, size_t len, char **keep)
{
    const char *m = g_body_mode;
    char *p;

    *keep = NULL;
    if (!strcmp(m, "postfields")) {
        p = malloc(len + 1);
        memcpy(p, body, len);
        p[len] = '\0';
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, p);
        *keep = p;
    } else if (!strcmp(m, "size-before")) {
        p = unterminated(body, len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, p);
        *keep = p;
    } else if (!strcmp(m, "size-after")) {
        p = unterminated(body, len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, p);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
        *keep = p;
    } else if (!strcmp(m, "large-before")) {
        p = unterminated(body, len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, p);
        *keep = p;
    } else if (!strcmp(m, "large-after")) {
        p = unterminated(body, len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, p);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        *keep = p;
    } else if (!strcmp(m, "copy")) {
        p = malloc(len + 1);
        memcpy(p, body, len);
        p[len] = '\0';
        curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, p);
        memset(p, 'X', len);
        free(p);
    } else if (!strcmp(m, "copy-size")) {
        p = unterminated(body, len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
        curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, p);
        memset(p, 'X', len + 4096);
        free(p);
    } else {
        fprintf(stderr, "unknown --body mode %s\n", m);
        exit(2);
    }
}

static char g_errbufs[64][CURL_ERROR_SIZE];

/* Sets up h for one transfer as the flags say. slot picks the error
 * buffer and the header-owner table entry. */
static void configure(CURL *h, struct xfer *x, int slot, const char *body, size_t blen,
                      char **keep)
{
    x->h = h;
    x->short_write = g_short_write;
    x->short_header = g_short_header;
    if (!g_url_last)
        curl_easy_setopt(h, CURLOPT_URL, g_url);
    if (g_headers)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, g_headers);
    *keep = NULL;
    if (body)
        set_body(h, body, blen, keep);
    if (!g_no_writefn) {
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    }
    if (!g_no_headerfn)
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    if (!g_no_headerfn || g_headerdata) {
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &x->headers);
        g_owner_of_headers[slot] = g_no_headerfn ? x : NULL;
    }
    if (g_include_header)
        curl_easy_setopt(h, CURLOPT_HEADER, 1L);
    if (g_failonerror)
        curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    if (g_errbuf) {
        /* libcurl empties the buffer when a transfer starts */
        snprintf(g_errbufs[slot], CURL_ERROR_SIZE, "%s",
                 g_errbuf_prefill ? "stale message from an earlier transfer" : "");
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, g_errbufs[slot]);
    }
    if (g_url_last)
        curl_easy_setopt(h, CURLOPT_URL, g_url);
}

static cJSON *result(CURL *h, CURLcode rc, struct xfer *x, int slot)
{
    cJSON *r = cJSON_CreateObject();
    long code = -1, hv = -1;
    char *ct = NULL, *url = NULL, *scheme = NULL;
    double tt = -1, sd = -1;
    curl_off_t ttt = -1, sdt = -1;

    cJSON_AddNumberToObject(r, "rc", rc);
    if (g_errbuf)
        cJSON_AddStringToObject(r, "errbuf", g_errbufs[slot]);
    cJSON_AddNumberToObject(r, "getinfo_rc",
                            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code));
    cJSON_AddNumberToObject(r, "code", code);
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        cJSON_AddStringToObject(r, "ctype", ct);
    else
        cJSON_AddNullToObject(r, "ctype");
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url);
    cJSON_AddStringToObject(r, "url", url ? url : "");
    curl_easy_getinfo(h, CURLINFO_SCHEME, &scheme);
    cJSON_AddStringToObject(r, "scheme", scheme ? scheme : "");
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &tt);
    cJSON_AddNumberToObject(r, "total_time", tt);
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &ttt);
    cJSON_AddNumberToObject(r, "total_time_t", (double)ttt);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD, &sd);
    cJSON_AddNumberToObject(r, "size_dl", sd);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &sdt);
    cJSON_AddNumberToObject(r, "size_dl_t", (double)sdt);
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &hv);
    cJSON_AddNumberToObject(r, "http_version", hv);
    cJSON_AddStringToObject(r, "headers", x->headers.data ? x->headers.data : "");
    cJSON_AddStringToObject(r, "body", x->body.data ? x->body.data : "");
    cJSON_AddNumberToObject(r, "hdr_calls", x->hdr_calls);
    cJSON_AddNumberToObject(r, "write_calls", x->write_calls);
    cJSON_AddNumberToObject(r, "in_header_first_code", x->first_code);
    cJSON_AddNumberToObject(r, "in_header_last_code", x->last_code);
    if (x->last_ctype_null)
        cJSON_AddNullToObject(r, "in_header_last_ctype");
    else
        cJSON_AddStringToObject(r, "in_header_last_ctype", x->last_ctype);
    cJSON_AddStringToObject(r, "in_header_last_url", x->last_url);
    return r;
}

static void xfer_free(struct xfer *x)
{
    free(x->body.data);
    free(x->headers.data);
    memset(x, 0, sizeof(*x));
}

/* A plain GET on h (after reset, or on a fresh handle). */
static cJSON *plain_get(CURL *h, const char *url, int slot)
{
    struct xfer x;
    CURLcode rc;
    cJSON *r;

    memset(&x, 0, sizeof(x));
    x.h = h;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x.headers);
    g_errbufs[slot][0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, g_errbufs[slot]);
    rc = curl_easy_perform(h);
    r = result(h, rc, &x, slot);
    cJSON_AddStringToObject(r, "errbuf", g_errbufs[slot]);
    xfer_free(&x);
    return r;
}

struct thread_arg {
    int i;
    cJSON *res;
};

static void *thread_main(void *p)
{
    struct thread_arg *a = p;
    struct xfer x;
    CURL *h = curl_easy_init();
    char num[16], *body, *keep, *at;
    size_t n;
    CURLcode rc;

    memset(&x, 0, sizeof(x));
    snprintf(num, sizeof(num), "%d", a->i);
    body = malloc(g_body_len * 2 + 64);
    /* replace every @@N@@ by the thread number */
    n = 0;
    for (at = g_body; at < g_body + g_body_len;) {
        if ((size_t)(g_body + g_body_len - at) >= 5 && !memcmp(at, "@@N@@", 5)) {
            memcpy(body + n, num, strlen(num));
            n += strlen(num);
            at += 5;
        } else {
            body[n++] = *at++;
        }
    }
    body[n] = '\0';
    configure(h, &x, a->i + 1, body, n, &keep);
    rc = curl_easy_perform(h);
    a->res = result(h, rc, &x, a->i + 1);
    cJSON_AddNumberToObject(a->res, "thread", a->i);
    curl_easy_cleanup(h);
    free(keep);
    free(body);
    xfer_free(&x);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *result_path = NULL, *reset_url = NULL, *reuse_url = NULL;
    int repeat = 1, dup = 0, threads = 0, reuse_noperform = 0, i;
    cJSON *out = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(out, "results");
    struct xfer x;
    CURL *h;
    char *keep = NULL, *s;
    FILE *f;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE() (i++, next)
        if (!strcmp(a, "--url")) g_url = TAKE();
        else if (!strcmp(a, "--body-file")) g_body = slurp(TAKE(), &g_body_len);
        else if (!strcmp(a, "--body")) g_body_mode = TAKE();
        else if (!strcmp(a, "--header")) g_headers = curl_slist_append(g_headers, TAKE());
        else if (!strcmp(a, "--result")) result_path = TAKE();
        else if (!strcmp(a, "--no-writefn")) g_no_writefn = 1;
        else if (!strcmp(a, "--writedata-file")) { g_wfile = TAKE(); g_no_writefn = 1; }
        else if (!strcmp(a, "--no-headerfn")) g_no_headerfn = 1;
        else if (!strcmp(a, "--headerdata")) g_headerdata = 1;
        else if (!strcmp(a, "--include-header")) g_include_header = 1;
        else if (!strcmp(a, "--short-write")) g_short_write = 1;
        else if (!strcmp(a, "--short-header")) g_short_header = 1;
        else if (!strcmp(a, "--failonerror")) g_failonerror = 1;
        else if (!strcmp(a, "--errbuf")) g_errbuf = 1;
        else if (!strcmp(a, "--errbuf-prefill")) g_errbuf_prefill = 1;
        else if (!strcmp(a, "--url-last")) g_url_last = 1;
        else if (!strcmp(a, "--repeat")) repeat = atoi(TAKE());
        else if (!strcmp(a, "--reset-get")) reset_url = TAKE();
        else if (!strcmp(a, "--dup")) dup = 1;
        else if (!strcmp(a, "--reuse")) reuse_url = TAKE();
        else if (!strcmp(a, "--reuse-noperform")) reuse_noperform = 1;
        else if (!strcmp(a, "--threads")) threads = atoi(TAKE());
        else {
            fprintf(stderr, "unknown argument %s\n", a);
            return 2;
        }
    }
    if (!g_url || !result_path) {
        fprintf(stderr, "usage: csprog --url URL --result FILE [options]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);

    if (threads > 0) {
        pthread_t tid[64];
        struct thread_arg args[64];
        if (threads > 60)
            threads = 60;
        for (i = 0; i < threads; i++) {
            args[i].i = i;
            args[i].res = NULL;
            pthread_create(&tid[i], NULL, thread_main, &args[i]);
        }
        for (i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            cJSON_AddItemToArray(results, args[i].res);
        }
        goto done;
    }

    if (reuse_url) {
        CURL *h2;
        uintptr_t h_addr;
        long code = -1;
        memset(&x, 0, sizeof(x));
        h = curl_easy_init();
        configure(h, &x, 0, g_body, g_body_len, &keep);
        if (!reuse_noperform)
            cJSON_AddItemToArray(results, result(h, curl_easy_perform(h), &x, 0));
        h_addr = (uintptr_t)h;
        curl_easy_cleanup(h);
        free(keep);
        xfer_free(&x);
        g_owner_of_headers[0] = NULL;
        /* malloc usually hands the freed handle's memory to the next
         * handle; allocate (and keep) handles until it does */
        {
            CURL *held[64];
            int nheld = 0, k;
            h2 = curl_easy_init();
            while ((uintptr_t)h2 != h_addr && nheld < 64) {
                held[nheld++] = h2;
                h2 = curl_easy_init();
            }
            for (k = 0; k < nheld; k++)
                curl_easy_cleanup(held[k]);
            cJSON_AddNumberToObject(out, "inits", nheld + 1);
        }
        cJSON_AddBoolToObject(out, "same_address", (uintptr_t)h2 == h_addr);
        curl_easy_getinfo(h2, CURLINFO_RESPONSE_CODE, &code);
        cJSON_AddNumberToObject(out, "fresh_code", code);
        cJSON_AddItemToArray(results, plain_get(h2, reuse_url, 1));
        curl_easy_cleanup(h2);
        goto done;
    }

    memset(&x, 0, sizeof(x));
    h = curl_easy_init();
    configure(h, &x, 0, g_body, g_body_len, &keep);
    if (g_wfile) {
        f = fopen(g_wfile, "wb");
        if (!f) {
            perror(g_wfile);
            return 2;
        }
        curl_easy_setopt(h, CURLOPT_WRITEDATA, f);
    } else {
        f = NULL;
    }
    if (dup) {
        CURL *d = curl_easy_duphandle(h);
        curl_easy_cleanup(h);
        h = d;
        x.h = d;
    }
    for (i = 0; i < repeat; i++) {
        CURLcode rc = curl_easy_perform(h);
        if (f)
            fflush(f);
        cJSON_AddItemToArray(results, result(h, rc, &x, 0));
        xfer_free(&x);
        x.h = h;
        x.short_write = g_short_write;
        x.short_header = g_short_header;
    }
    if (reset_url) {
        curl_easy_reset(h);
        cJSON_AddItemToArray(results, plain_get(h, reset_url, 1));
    }
    curl_easy_cleanup(h);
    if (f)
        fclose(f);
    free(keep);

done:
    s = cJSON_Print(out);
    f = fopen(result_path, "w");
    if (!f) {
        perror(result_path);
        return 2;
    }
    fputs(s, f);
    fclose(f);
    free(s);
    cJSON_Delete(out);
    curl_slist_free_all(g_headers);
    free(g_body);
    curl_global_cleanup();
    return 0;
}
