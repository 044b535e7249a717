/* bodyprog.c - an ordinary libcurl program that POSTs a body through
 * CURLOPT_READFUNCTION, the ways programs do. It knows nothing about
 * codeshim.
 *
 *   bodyprog --url URL --key K [options] < body
 *
 *   --chunked        no POSTFIELDSIZE: libcurl sends it chunked
 *   --seek           a SEEKFUNCTION that rewinds the body
 *   --abort-at N     the read callback returns CURL_READFUNC_ABORT once
 *                    N bytes are given
 *   --pause-at N     the read callback returns CURL_READFUNC_PAUSE once N
 *                    bytes are given (once); the progress callback resumes
 *                    the transfer with curl_easy_pause(CURLPAUSE_CONT)
 *   --repeat N       perform the same handle N times (the body rewound by
 *                    the program between performs)
 *   --curlu          the URL through CURLOPT_CURLU, not CURLOPT_URL
 *   --inside URL2    perform an outer GET of URL2 first and make, set up
 *                    and perform the request inside its write callback
 *
 * Every response body goes to stdout; then one line on stderr per
 * request: "rc=N code=C reads=R seeks=S". Exits with the last rc. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct body {
    char *data;
    size_t len, off, abort_at, pause_at;
    int reads, seeks, paused, pauses, resumes;
};

static const char *url, *key, *inside;
static int chunked, seek, use_curlu, repeat = 1;
static struct body b;
static int inner_done, last_rc;

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
    struct body *x = ud;
    size_t k = sz * n;

    x->reads++;
    if (x->abort_at && x->off >= x->abort_at)
        return CURL_READFUNC_ABORT;
    if (x->pause_at && x->off >= x->pause_at && !x->pauses) {
        x->pauses++;
        x->paused = 1;
        return CURL_READFUNC_PAUSE;
    }
    if (x->paused)
        return CURL_READFUNC_PAUSE; /* still no data: paused again */
    if (k > 7)
        k = 7; /* small pieces: a body arrives in many calls */
    if (k > x->len - x->off)
        k = x->len - x->off;
    memcpy(p, x->data + x->off, k);
    x->off += k;
    return k;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
    struct body *x = ud;

    x->seeks++;
    if (origin != SEEK_SET || off < 0 || (size_t)off > x->len)
        return CURL_SEEKFUNC_FAIL;
    x->off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b_, curl_off_t c, curl_off_t d)
{
    CURL *h = ud;

    (void)a, (void)b_, (void)c, (void)d;
    if (b.paused) {
        b.paused = 0;
        b.resumes++;
        curl_easy_pause(h, CURLPAUSE_CONT);
    }
    return 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    (void)ud;
    return fwrite(p, sz, n, stdout) * sz;
}

static int request(void)
{
    CURL *h = curl_easy_init();
    CURLU *u = NULL;
    struct curl_slist *hd = NULL;
    char auth[512];
    long code = 0;
    int i, rc = 0;

    if (!h)
        return 2;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    hd = curl_slist_append(hd, auth);
    if (use_curlu) {
        u = curl_url();
        curl_url_set(u, CURLUPART_URL, url, 0);
        curl_easy_setopt(h, CURLOPT_CURLU, u);
    } else {
        curl_easy_setopt(h, CURLOPT_URL, url);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &b);
    if (!chunked)
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b.len);
    if (seek) {
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, &b);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    if (b.pause_at) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, h);
    }
    for (i = 0; i < repeat; i++) {
        b.off = 0;
        b.reads = b.seeks = 0;
        rc = curl_easy_perform(h);
        code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        fflush(stdout);
        fprintf(stderr, "rc=%d code=%ld reads=%d seeks=%d\n", rc, code, b.reads, b.seeks);
        if (b.pause_at)
            fprintf(stderr, "pauses=%d resumes=%d\n", b.pauses, b.resumes);
    }
    curl_easy_cleanup(h);
    curl_url_cleanup(u);
    curl_slist_free_all(hd);
    return rc;
}

static size_t outer_body(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    if (!inner_done) {
        inner_done = 1;
        last_rc = request();
    }
    return sz * n;
}

/* The whole of standard input (the body), or NULL. */
static char *read_stdin(size_t *len)
{
    size_t cap = 4096, n = 0, k;
    char *buf = malloc(cap), *t;

    while (buf && (k = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += k;
        if (n < cap)
            continue;
        t = realloc(buf, cap * 2);
        if (!t)
            free(buf);
        buf = t;
        cap *= 2;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strcmp(argv[i], "--key") && i + 1 < argc)
            key = argv[++i];
        else if (!strcmp(argv[i], "--chunked"))
            chunked = 1;
        else if (!strcmp(argv[i], "--seek"))
            seek = 1;
        else if (!strcmp(argv[i], "--abort-at") && i + 1 < argc)
            b.abort_at = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--pause-at") && i + 1 < argc)
            b.pause_at = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--curlu"))
            use_curlu = 1;
        else if (!strcmp(argv[i], "--inside") && i + 1 < argc)
            inside = argv[++i];
        else
            return 2;
    }
    if (!url || !key || !(b.data = read_stdin(&b.len)))
        return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (inside) {
        CURL *o = curl_easy_init();
        int orc;
        curl_easy_setopt(o, CURLOPT_URL, inside);
        curl_easy_setopt(o, CURLOPT_WRITEFUNCTION, outer_body);
        orc = curl_easy_perform(o);
        fprintf(stderr, "outer rc=%d inner=%d\n", orc, inner_done);
        curl_easy_cleanup(o);
    } else {
        last_rc = request();
    }
    curl_global_cleanup();
    free(b.data);
    return last_rc;
}
