/* cfiles.c - a plain libcurl C program using OpenAI's Containers API the
 * way a client library does: uploads with curl_mime (a MIME post, whose
 * body libcurl builds), downloads into memory through a write callback.
 *
 *   cfiles upload   BASE KEY CONTAINER_ID PATH   -> prints the file JSON
 *   cfiles download BASE KEY CONTAINER_ID FILE_ID OUT
 *                    -> writes the bytes to OUT, prints "status bytes type"
 * Exit 0 when libcurl succeeded (any HTTP status), 1 otherwise. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mem {
    char *p;
    size_t n;
};

static size_t collect(char *d, size_t sz, size_t nm, void *ud)
{
    struct mem *m = ud;
    char *q = realloc(m->p, m->n + sz * nm + 1);

    if (!q)
        return 0;
    memcpy(q + m->n, d, sz * nm);
    m->p = q;
    m->n += sz * nm;
    m->p[m->n] = '\0';
    return sz * nm;
}

int main(int argc, char **argv)
{
    char url[2048], auth[512];
    struct curl_slist *h = NULL;
    struct mem m = {NULL, 0};
    curl_mime *mime = NULL;
    CURL *c;
    CURLcode rc;
    long status = 0;
    char *ctype = NULL;

    if (argc < 6) {
        fprintf(stderr, "usage: cfiles upload|download BASE KEY CONTAINER ...\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c = curl_easy_init();
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", argv[3]);
    h = curl_slist_append(h, auth);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &m);
    if (!strcmp(argv[1], "upload")) {
        curl_mimepart *part;
        snprintf(url, sizeof(url), "%s/containers/%s/files", argv[2], argv[4]);
        mime = curl_mime_init(c);
        part = curl_mime_addpart(mime);
        curl_mime_name(part, "file");
        curl_mime_filedata(part, argv[5]);
        curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    } else if (argc >= 7) {
        snprintf(url, sizeof(url), "%s/containers/%s/files/%s/content", argv[2], argv[4],
                 argv[5]);
    } else {
        return 2;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
    if (rc == CURLE_OK && !strcmp(argv[1], "download")) {
        FILE *f = fopen(argv[6], "wb");
        if (!f || fwrite(m.p ? m.p : "", 1, m.n, f) != m.n)
            rc = CURLE_WRITE_ERROR;
        if (f)
            fclose(f);
        printf("%ld %zu %s\n", status, m.n, ctype ? ctype : "-");
    } else if (rc == CURLE_OK) {
        printf("%ld %s\n", status, m.p ? m.p : "");
    } else {
        fprintf(stderr, "cfiles: %s\n", curl_easy_strerror(rc));
    }
    curl_mime_free(mime);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(m.p);
    curl_global_cleanup();
    return rc == CURLE_OK ? 0 : 1;
}
