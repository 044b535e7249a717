/* xferprog.c - an ordinary libcurl program that POSTs with
 * CURLOPT_COPYPOSTFIELDS and no POSTFIELDSIZE (a handle libcurl 7.88
 * cannot curl_easy_duphandle), with the transport and credential options
 * real programs set. It knows nothing about codeshim.
 *
 *   xferprog --url URL --body-file F [options]
 *
 *   --resolve H:P:A      CURLOPT_RESOLVE
 *   --connect-to S       CURLOPT_CONNECT_TO
 *   --unix-socket PATH   CURLOPT_UNIX_SOCKET_PATH
 *   --proxy URL          CURLOPT_PROXY
 *   --header "N: v"      CURLOPT_HTTPHEADER (repeatable)
 *   --username U         CURLOPT_USERNAME
 *   --password P         CURLOPT_PASSWORD
 *   --repeat N           perform the same handle N times
 *   --then-url URL2      afterwards: the same handle, only CURLOPT_URL
 *                        changed, performed once more
 *
 * The body is copied from a buffer that is scribbled and freed right after
 * the setopt. Every response body goes to stdout; a failed transfer prints
 * "curl error N: message" on stderr and exits with N. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    (void)ud;
    return fwrite(p, sz, n, stdout) * sz;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s;
    long n;

    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
        return NULL;
    s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static int perform(CURL *h, char *errbuf)
{
    CURLcode rc;

    errbuf[0] = '\0';
    rc = curl_easy_perform(h);
    fflush(stdout);
    if (rc != CURLE_OK)
        fprintf(stderr, "curl error %d: %s\n", (int)rc, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    return (int)rc;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *then_url = NULL, *body_file = NULL;
    struct curl_slist *headers = NULL, *resolve = NULL, *connect_to = NULL;
    char errbuf[CURL_ERROR_SIZE], *body;
    int repeat = 1, i, rc = 0;
    CURL *h;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    h = curl_easy_init();
    if (!h)
        return 90;
    for (i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--url"))
            url = v;
        else if (!strcmp(o, "--body-file"))
            body_file = v;
        else if (!strcmp(o, "--then-url"))
            then_url = v;
        else if (!strcmp(o, "--repeat"))
            repeat = atoi(v);
        else if (!strcmp(o, "--resolve"))
            resolve = curl_slist_append(resolve, v);
        else if (!strcmp(o, "--connect-to"))
            connect_to = curl_slist_append(connect_to, v);
        else if (!strcmp(o, "--header"))
            headers = curl_slist_append(headers, v);
        else if (!strcmp(o, "--unix-socket"))
            curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, v);
        else if (!strcmp(o, "--proxy"))
            curl_easy_setopt(h, CURLOPT_PROXY, v);
        else if (!strcmp(o, "--username"))
            curl_easy_setopt(h, CURLOPT_USERNAME, v);
        else if (!strcmp(o, "--password"))
            curl_easy_setopt(h, CURLOPT_PASSWORD, v);
        else {
            fprintf(stderr, "unknown option %s\n", o);
            return 91;
        }
    }
    if (!url || !body_file || !(body = slurp(body_file))) {
        fprintf(stderr, "usage: xferprog --url URL --body-file F [options]\n");
        return 92;
    }
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_RESOLVE, resolve);
    curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, body); /* no POSTFIELDSIZE */
    memset(body, 'X', strlen(body));
    free(body);
    for (i = 0; i < repeat && !rc; i++)
        rc = perform(h, errbuf);
    if (!rc && then_url) {
        curl_easy_setopt(h, CURLOPT_URL, then_url);
        rc = perform(h, errbuf);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    curl_slist_free_all(resolve);
    curl_slist_free_all(connect_to);
    curl_global_cleanup();
    return rc;
}
