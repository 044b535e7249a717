/* ctorcurl.c - a shared library that uses libcurl from its constructor,
 * before the program's main runs (libfaketime tests the same case: a
 * preload library must work when another library calls it that early).
 *
 * The constructor POSTs the file named by CTORCURL_BODY to CTORCURL_URL
 * and writes the answer to CTORCURL_OUT; the program then does nothing. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>

static size_t to_file(char *p, size_t sz, size_t n, void *f)
{
    return fwrite(p, sz, n, (FILE *)f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(buf = calloc(1, (size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        if (f)
            fclose(f);
        return NULL;
    }
    fclose(f);
    return buf;
}

__attribute__((constructor)) static void ctorcurl(void)
{
    const char *url = getenv("CTORCURL_URL"), *bodyf = getenv("CTORCURL_BODY"),
               *outf = getenv("CTORCURL_OUT");
    struct curl_slist *hs = NULL;
    char *body;
    FILE *out;
    CURL *h;
    CURLcode rc;

    if (!url || !bodyf || !outf || !(body = slurp(bodyf)) || !(out = fopen(outf, "wb")))
        return;
    h = curl_easy_init();
    hs = curl_slist_append(hs, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_file);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    rc = curl_easy_perform(h);
    fprintf(stderr, "ctorcurl: %d\n", (int)rc);
    curl_easy_cleanup(h);
    curl_slist_free_all(hs);
    fclose(out);
    free(body);
}
