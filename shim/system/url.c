/* url.c - see url.h. */
#include "system/url.h"

#include "system/real.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libcurl's flags for CURLOPT_URL (lib/url.c parseurlandfillconn) */
#define PARSE_FLAGS (CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME)

/* The first libcurl build the process has bound (any of them reads a URL
 * the same way; its allocations go back to it), else the OpenSSL one. */
static const struct shim_curl_api *parser(void)
{
    const struct shim_curl_api *a;
    int f;

    for (f = 0; f < SHIM_NFLAVORS; f++) {
        a = __atomic_load_n(&shim_real_ready[f], __ATOMIC_ACQUIRE);
        if (a && a->url && a->url_set && a->url_get && a->url_cleanup && a->free)
            return a;
    }
    a = shim_real(SHIM_FLAVOR_OPENSSL);
    return a && a->url && a->url_set && a->url_get && a->url_cleanup && a->free ? a : NULL;
}

static int errno_of(CURLUcode rc)
{
    return rc == CURLUE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

/* The parsed handle of url, or NULL with *err set. */
static CURLU *handle(const struct shim_curl_api *a, const char *url, int *err)
{
    CURLU *h;
    CURLUcode rc;

    if (!url) {
        *err = -EINVAL;
        return NULL;
    }
    if (!(h = a->url())) {
        *err = -ENOMEM;
        return NULL;
    }
    rc = a->url_set(h, CURLUPART_URL, url, PARSE_FLAGS);
    if (rc != CURLUE_OK) {
        a->url_cleanup(h);
        *err = errno_of(rc);
        return NULL;
    }
    return h;
}

int shim_url_parse(const char *url, unsigned flags, struct shim_url *u)
{
    static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_USER,  CURLUPART_PASSWORD,
                                      CURLUPART_HOST,   CURLUPART_PORT,  CURLUPART_PATH,
                                      CURLUPART_QUERY,  CURLUPART_FRAGMENT};
    const struct shim_curl_api *a = parser();
    char **out[] = {&u->scheme, &u->user, &u->password, &u->host,
                    &u->port,   &u->path, &u->query,    &u->fragment};
    CURLU *h;
    size_t i;
    int err = 0;

    memset(u, 0, sizeof(*u));
    if (!a)
        return -ENOSYS;
    if (!(h = handle(a, url, &err)))
        return err;
    u->api = a;
    for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        unsigned f = (flags & SHIM_URL_DECODE) &&
                             (parts[i] == CURLUPART_USER || parts[i] == CURLUPART_PASSWORD)
                         ? CURLU_URLDECODE
                         : 0;
        CURLUcode rc = a->url_get(h, parts[i], out[i], f);
        if (rc == CURLUE_URLDECODE) /* a control byte libcurl will not decode: as sent */
            rc = a->url_get(h, parts[i], out[i], 0);
        if (rc == CURLUE_OUT_OF_MEMORY) {
            err = -ENOMEM;
            break;
        }
        if (rc != CURLUE_OK)
            *out[i] = NULL; /* that part is absent */
    }
    a->url_cleanup(h);
    if (err || !u->host || !u->path) {
        shim_url_free(u);
        return err ? err : -EINVAL;
    }
    return 0;
}

void shim_url_free(struct shim_url *u)
{
    const struct shim_curl_api *a = u->api;
    char **p[] = {&u->scheme, &u->user, &u->password, &u->host,
                  &u->port,   &u->path, &u->query,    &u->fragment};
    size_t i;

    if (a)
        for (i = 0; i < sizeof(p) / sizeof(p[0]); i++)
            if (*p[i])
                a->free(*p[i]);
    memset(u, 0, sizeof(*u));
}

/* libcurl's string s (may be NULL) into out (n bytes), then freed:
 * 0, -ENAMETOOLONG (out cut), -ENOMEM when there was none. */
static int take(const struct shim_curl_api *a, char *s, char *out, size_t n)
{
    int err = 0;

    if (!s)
        return -ENOMEM;
    if ((size_t)snprintf(out, n, "%s", s) >= n)
        err = -ENAMETOOLONG;
    a->free(s);
    return err;
}

/* h's whole URL into out (n bytes); h is cleaned up. */
static int url_of(const struct shim_curl_api *a, CURLU *h, char *out, size_t n)
{
    char *s = NULL;
    CURLUcode rc = a->url_get(h, CURLUPART_URL, &s, 0);

    a->url_cleanup(h);
    if (rc != CURLUE_OK)
        return errno_of(rc);
    return take(a, s, out, n);
}

void shim_url_redact(const char *url, char *out, size_t n)
{
    const struct shim_curl_api *a = parser();
    CURLU *h;
    int err = 0;

    if (!n)
        return;
    out[0] = '\0';
    if (!url)
        return;
    h = a ? handle(a, url, &err) : NULL;
    if (h && (a->url_set(h, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
              a->url_set(h, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
              a->url_set(h, CURLUPART_OPTIONS, NULL, 0) != CURLUE_OK ||
              a->url_set(h, CURLUPART_QUERY, NULL, 0) != CURLUE_OK ||
              a->url_set(h, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK)) {
        a->url_cleanup(h);
        h = NULL;
    }
    /* too long: cut, which only ever shortens the path */
    if (!h || (url_of(a, h, out, n) < 0 && !out[0]))
        snprintf(out, n, "(unreadable URL)");
}

int shim_url_with_path(const char *url, const char *path, char *out, size_t n)
{
    const struct shim_curl_api *a = parser();
    const char *q = strchr(path, '?');
    char p[2048];
    CURLU *h;
    int err = 0;

    if (!a)
        return -ENOSYS;
    if (snprintf(p, sizeof(p), "%.*s", (int)(q ? (size_t)(q - path) : strlen(path)), path) >=
        (int)sizeof(p))
        return -ENAMETOOLONG;
    if (!(h = handle(a, url, &err)))
        return err;
    if (a->url_set(h, CURLUPART_PATH, p, 0) != CURLUE_OK ||
        a->url_set(h, CURLUPART_QUERY, q ? q + 1 : NULL, 0) != CURLUE_OK ||
        a->url_set(h, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK) {
        a->url_cleanup(h);
        return -ENOMEM;
    }
    return url_of(a, h, out, n);
}

char *shim_url_unescape(const char *p, size_t n, int plus, size_t *outlen)
{
    const struct shim_curl_api *a = parser();
    char *copy, *d, *out;
    int len = 0;
    size_t i;

    *outlen = 0;
    if (!a || !a->easy_unescape || n > (size_t)0x7fffffff - 1)
        return NULL;
    if (!(copy = malloc(n + 1)))
        return NULL;
    for (i = 0; i < n; i++)
        copy[i] = plus && p[i] == '+' ? ' ' : p[i];
    copy[n] = '\0';
    d = a->easy_unescape(NULL, copy, (int)n, &len);
    free(copy);
    if (!d || len < 0)
        return NULL;
    out = malloc((size_t)len + 1);
    if (out) {
        memcpy(out, d, (size_t)len);
        out[len] = '\0';
        *outlen = (size_t)len;
    }
    a->free(d);
    return out;
}

int shim_url_escape(const char *s, char *out, size_t n)
{
    const struct shim_curl_api *a = parser();

    if (!a || !a->easy_escape)
        return -ENOSYS;
    if (strlen(s) > 0x7fffffff)
        return -ENAMETOOLONG;
    return take(a, a->easy_escape(NULL, s, (int)strlen(s)), out, n);
}
