/* identity.c - see identity.h. Pure: no I/O, no globals; URLs are read
 * and decoded by url.c (libcurl's parser).
 *
 * Each piece of credential material becomes one entry, the SHA-256 of
 * (kind, canonical name, value); the identity is the hash of the sorted
 * entries, so the order of headers or parameters does not matter. One
 * recognised API key alone keeps the key's own hash (shim_identity_key),
 * the identity codeshim has always given it. */
#include "api/identity.h"

#include "base/sha256.h"
#include "system/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_TAG "codeshim-identity-v1"
#define SET_TAG "codeshim-identity-set-v1"
#define ORDERED_TAG "codeshim-identity-ordered-v1"
#define MAX_SORTED 64 /* entries sorted; past that, hashed in order */
#define NAME_CAP 256  /* longer names count as credentials */

struct collect {
    unsigned char d[MAX_SORTED][32];
    size_t n;
    struct shim_sha256 ordered; /* every entry in order, for n > MAX_SORTED */
    int recognised;             /* entries that are a recognised key */
    char key[SHIM_IDENTITY_SIZE]; /* identity of the first of those */
};

/* SHA-256 over KEY_TAG NUL key NUL, as store.c named identities. */
static void key_hash(const void *p, size_t n, char out[SHIM_IDENTITY_SIZE])
{
    struct shim_sha256 s;

    shim_sha256_init(&s);
    shim_sha256_update(&s, KEY_TAG, sizeof(KEY_TAG));
    shim_sha256_update(&s, p, n);
    shim_sha256_update(&s, "", 1);
    shim_sha256_final_hex(&s, 16, out);
}

void shim_identity_key(const char *api_key, char out[SHIM_IDENTITY_SIZE])
{
    if (!api_key || !*api_key)
        snprintf(out, SHIM_IDENTITY_SIZE, "anonymous");
    else
        key_hash(api_key, strlen(api_key), out);
}

/* ---------------- options, reduced to digests when set ---------------- */

static const struct {
    CURLoption opt;
    int slot, second; /* second >= 0: "user:password" split into both */
    int blob;
} options[] = {
#define CRED_ROW(opt, slot, second, blob) {opt, slot, second, blob},
    SHIM_CRED_OPTIONS(CRED_ROW)
#undef CRED_ROW
};

static const char *const slot_names[SHIM_CRED_NSLOTS] = {
    "xoauth2_bearer", "user", "password", "cookie", "proxy_user", "proxy_password",
    "sslcert", "sslkey", "keypasswd", "tlsauth_user", "tlsauth_password",
};

static int option_index(CURLoption opt)
{
    size_t i;

    for (i = 0; i < sizeof(options) / sizeof(options[0]); i++)
        if (options[i].opt == opt)
            return (int)i;
    return -1;
}

int shim_identity_is_option(CURLoption opt)
{
    return option_index(opt) >= 0;
}

/* An empty value is no credential. */
static void set_slot(struct shim_cred_update *u, int slot, const void *p, size_t n)
{
    u->slot[u->n] = slot;
    if (p && n)
        key_hash(p, n, u->d[u->n]);
    else
        u->d[u->n][0] = '\0';
    u->n++;
}

void shim_identity_digest(struct shim_cred_update *u, CURLoption opt, const void *arg)
{
    int i = option_index(opt);
    const char *s = arg, *colon;

    u->n = 0;
    if (i < 0)
        return;
    if (options[i].blob) {
        const struct curl_blob *b = arg;
        set_slot(u, options[i].slot, b ? b->data : NULL, b ? b->len : 0);
        return;
    }
    if (options[i].second < 0) {
        set_slot(u, options[i].slot, s, s ? strlen(s) : 0);
        return;
    }
    /* libcurl splits "user:password" at the first ':'; no ':' sets the
     * user and clears the password; NULL clears both. */
    colon = s ? strchr(s, ':') : NULL;
    set_slot(u, options[i].slot, s, s ? (colon ? (size_t)(colon - s) : strlen(s)) : 0);
    set_slot(u, options[i].second, colon ? colon + 1 : NULL, colon ? strlen(colon + 1) : 0);
}

void shim_identity_apply(struct shim_creds *c, const struct shim_cred_update *u)
{
    int i;

    for (i = 0; i < u->n; i++)
        memcpy(c->d[u->slot[i]], u->d[i], SHIM_IDENTITY_SIZE);
}

void shim_identity_option(struct shim_creds *c, CURLoption opt, const void *arg)
{
    struct shim_cred_update u;

    shim_identity_digest(&u, opt, arg);
    shim_identity_apply(c, &u);
}

/* ---------------- what looks like a credential ---------------- */

static char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

int shim_identity_credential_name(const char *name, size_t n)
{
    static const char *const words[] = {
        "key", "token", "auth", "secret", "sig", "pass", "pwd", "session", "sess",
        "cookie", "cred", "bearer", "jwt", "code", "sid", "ticket", "apim",
    };
    /* request metadata that merely contains one of the words */
    static const char *const not_credentials[] = {"idempotency-key", "x-idempotency-key"};
    char buf[NAME_CAP];
    size_t i;

    if (n > NAME_CAP)
        return 1; /* too long to judge: rather separate than share */
    for (i = 0; i < n; i++)
        buf[i] = lower(name[i]);
    for (i = 0; i < sizeof(not_credentials) / sizeof(not_credentials[0]); i++)
        if (n == strlen(not_credentials[i]) && !memcmp(buf, not_credentials[i], n))
            return 0;
    /* memmem, not strstr: a decoded name may hold a NUL */
    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (memmem(buf, n, words[i], strlen(words[i])))
            return 1;
    return 0;
}

/* ---------------- entries ---------------- */

static void entry_begin(struct shim_sha256 *s, const char *kind)
{
    shim_sha256_init(s);
    shim_sha256_update(s, kind, strlen(kind) + 1);
}

static void update_lower(struct shim_sha256 *s, const char *p, size_t n)
{
    char buf[64];
    size_t i, k;

    while (n) {
        k = n < sizeof(buf) ? n : sizeof(buf);
        for (i = 0; i < k; i++)
            buf[i] = lower(p[i]);
        shim_sha256_update(s, buf, k);
        p += k;
        n -= k;
    }
}

/* p[0..n) percent-decoded into s (url.c); the bytes as they are when
 * they cannot be decoded, so they still count. */
static void update_decoded(struct shim_sha256 *s, const char *p, size_t n)
{
    size_t k;
    char *d = shim_url_unescape(p, n, 0, &k);

    if (d)
        shim_sha256_update(s, d, k);
    else
        shim_sha256_update(s, p, n);
    free(d);
}

/* Adds a finished entry; key: the identity of a recognised API key. */
static void entry_end(struct collect *c, struct shim_sha256 *s, const char *key)
{
    unsigned char d[32];

    shim_sha256_final(s, d);
    if (c->n < MAX_SORTED)
        memcpy(c->d[c->n], d, 32);
    c->n++;
    shim_sha256_update(&c->ordered, d, 32);
    if (key && c->recognised++ == 0)
        memcpy(c->key, key, SHIM_IDENTITY_SIZE);
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

static int name_is(const char *p, size_t n, const char *lname)
{
    size_t i;

    if (strlen(lname) != n)
        return 0;
    for (i = 0; i < n; i++)
        if (lower(p[i]) != lname[i])
            return 0;
    return 1;
}

/* The API key of a header codeshim recognises, or NULL. */
static const char *recognised_key(const char *name, size_t nlen, const char *v,
                                  const char *end, size_t *klen)
{
    if (name_is(name, nlen, "api-key") || name_is(name, nlen, "x-api-key")) {
        *klen = (size_t)(end - v);
        return v;
    }
    if (name_is(name, nlen, "authorization") && end - v > 7 &&
        name_is(v, 6, "bearer") && (v[6] == ' ' || v[6] == '\t')) {
        v += 7;
        while (v < end && is_space(*v))
            v++;
        *klen = (size_t)(end - v);
        return *klen ? v : NULL;
    }
    return NULL;
}

/* "Name: value". "Name:" tells libcurl to drop the header and "Name;"
 * sends it empty: neither carries a credential. */
static void add_header(struct collect *c, const char *line)
{
    const char *colon = strchr(line, ':'), *v, *end, *k;
    char kid[SHIM_IDENTITY_SIZE];
    struct shim_sha256 s;
    size_t nlen, klen = 0;

    if (!colon)
        return;
    nlen = (size_t)(colon - line);
    while (nlen && is_space(line[nlen - 1]))
        nlen--;
    v = colon + 1;
    while (*v && is_space(*v))
        v++;
    end = v + strlen(v);
    while (end > v && is_space(end[-1]))
        end--;
    if (end == v || !shim_identity_credential_name(line, nlen))
        return;
    k = recognised_key(line, nlen, v, end, &klen);
    if (k)
        key_hash(k, klen, kid);
    entry_begin(&s, "header");
    update_lower(&s, line, nlen);
    shim_sha256_update(&s, "", 1);
    shim_sha256_update(&s, v, (size_t)(end - v));
    entry_end(c, &s, k ? kid : NULL);
}

/* One "name=value" of the query string (p[0..n)). */
static void add_param(struct collect *c, const char *p, size_t n)
{
    const char *eq = memchr(p, '=', n);
    char *name;
    size_t nlen, dlen;
    struct shim_sha256 s;

    if (!eq || eq + 1 == p + n)
        return; /* no value */
    nlen = (size_t)(eq - p);
    name = shim_url_unescape(p, nlen, 0, &dlen);
    /* (a longer name, or one that cannot be decoded, counts as a credential) */
    if (name && dlen <= NAME_CAP && !shim_identity_credential_name(name, dlen)) {
        free(name);
        return;
    }
    free(name);
    entry_begin(&s, "query");
    update_decoded(&s, p, nlen);
    shim_sha256_update(&s, "", 1);
    update_decoded(&s, eq + 1, (size_t)(p + n - eq - 1));
    entry_end(c, &s, NULL);
}

/* The URL as libcurl reads it (url.c): userinfo, and each query parameter
 * whose name looks like a credential. A URL that cannot be read counts
 * whole, rather separate than share (libcurl refuses it anyway). */
static void add_url(struct collect *c, const char *url)
{
    struct shim_url u;
    struct shim_sha256 s;
    const char *q, *end;
    size_t n;

    if (shim_url_parse(url, SHIM_URL_DECODE, &u) < 0) {
        entry_begin(&s, "url");
        shim_sha256_update(&s, url, strlen(url));
        entry_end(c, &s, NULL);
        return;
    }
    if ((u.user && u.user[0]) || u.password) { /* user:password@host */
        entry_begin(&s, "userinfo");
        if (u.user)
            shim_sha256_update(&s, u.user, strlen(u.user));
        if (u.password) {
            shim_sha256_update(&s, ":", 1);
            shim_sha256_update(&s, u.password, strlen(u.password));
        }
        entry_end(c, &s, NULL);
    }
    /* '&' separates parameters, and ';' too for some servers */
    for (q = u.query; q && *q; q = *end ? end + 1 : end) {
        n = strcspn(q, "&;");
        end = q + n;
        add_param(c, q, n);
    }
    shim_url_free(&u);
}

static void add_options(struct collect *c, const struct shim_creds *o)
{
    struct shim_sha256 s;
    int i;

    for (i = 0; i < SHIM_CRED_NSLOTS; i++) {
        if (!o->d[i][0])
            continue;
        entry_begin(&s, "option");
        shim_sha256_update(&s, slot_names[i], strlen(slot_names[i]) + 1);
        shim_sha256_update(&s, o->d[i], strlen(o->d[i]));
        /* the bearer option's digest is its key's identity */
        entry_end(c, &s, i == SHIM_CRED_XOAUTH2 ? o->d[i] : NULL);
    }
}

static int cmp_digest(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

void shim_identity_of(const struct curl_slist *headers, const char *url,
                      const struct shim_creds *opts, char out[SHIM_IDENTITY_SIZE])
{
    struct collect c;
    struct shim_sha256 s;
    size_t i;

    c.n = 0;
    c.recognised = 0;
    c.key[0] = '\0';
    shim_sha256_init(&c.ordered);
    shim_sha256_update(&c.ordered, ORDERED_TAG, sizeof(ORDERED_TAG));
    for (; headers; headers = headers->next)
        if (headers->data)
            add_header(&c, headers->data);
    if (url)
        add_url(&c, url);
    if (opts)
        add_options(&c, opts);
    if (!c.n) {
        shim_identity_key(NULL, out);
        return;
    }
    if (c.n == 1 && c.recognised) {
        memcpy(out, c.key, SHIM_IDENTITY_SIZE);
        return;
    }
    if (c.n > MAX_SORTED) {
        shim_sha256_final_hex(&c.ordered, 16, out);
        return;
    }
    qsort(c.d, c.n, 32, cmp_digest);
    shim_sha256_init(&s);
    shim_sha256_update(&s, SET_TAG, sizeof(SET_TAG));
    for (i = 0; i < c.n; i++)
        shim_sha256_update(&s, c.d[i], 32);
    shim_sha256_final_hex(&s, 16, out);
}
