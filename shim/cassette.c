/* cassette.c - see cassette.h. */
#include "cassette.h"

#include "identity.h"

#include "json.h"
#include "log.h"
#include "sha256.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE (256u << 20)

struct seen {
    struct seen *next;
    char key[65];
    int n;
};

static struct seen *g_seen;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *url_path(const char *url)
{
    const char *p = strstr(url ? url : "", "://");
    const char *path;

    p = p ? p + 3 : (url ? url : "");
    path = strchr(p, '/');
    return path ? path : "/";
}

void shim_cassette_key(const char *url, const char *body, size_t len, char key[65],
                       int *occurrence)
{
    struct shim_sha256 s;
    const char *path = url_path(url);
    size_t plen = strcspn(path, "?#");
    struct seen *e;

    shim_sha256_init(&s);
    shim_sha256_update(&s, "POST ", 5);
    shim_sha256_update(&s, path, plen);
    shim_sha256_update(&s, "\n", 1);
    shim_sha256_update(&s, body, len);
    shim_sha256_final_hex(&s, 32, key);
    pthread_mutex_lock(&g_lock);
    for (e = g_seen; e && strcmp(e->key, key); e = e->next)
        ;
    if (!e && (e = calloc(1, sizeof(*e))) != NULL) {
        memcpy(e->key, key, 65);
        e->next = g_seen;
        g_seen = e;
    }
    *occurrence = e ? ++e->n : 1;
    pthread_mutex_unlock(&g_lock);
}

static void file_name(char *out, size_t n, const char *dir, const char *key, int occ)
{
    if (occ > 1)
        snprintf(out, n, "%s/%s-%d.json", dir, key, occ);
    else
        snprintf(out, n, "%s/%s.json", dir, key);
}

/* A header line whose name looks like a credential, by the one rule
 * codeshim has for that (identity.c); the status line is never one. */
static int secret_header(const char *line, size_t n, int first)
{
    const char *colon = memchr(line, ':', n);

    return !first && shim_identity_credential_name(line, colon ? (size_t)(colon - line) : n);
}

int shim_cassette_save(const char *dir, const char *key, int occurrence, const char *url,
                       const char *body, size_t len, const struct shim_http_reply *r)
{
    char path[4200];
    cJSON *doc = cJSON_CreateObject(), *req, *resp, *hdrs, *b;
    const char *p = r->head.data, *end = r->head.data + r->head.len;
    char *text;
    int rc;

    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        cJSON_Delete(doc);
        return -errno;
    }
    cJSON_AddStringToObject(doc, "key", key);
    req = cJSON_AddObjectToObject(doc, "request");
    cJSON_AddStringToObject(req, "method", "POST");
    {
        const char *up = url_path(url); /* no query: keys may live there */
        char *clean = strndup(up, strcspn(up, "?#"));
        cJSON_AddStringToObject(req, "path", clean ? clean : "/");
        free(clean);
    }
    b = shim_json_parse(body, len);
    cJSON_AddItemToObject(req, "body", b ? b : cJSON_CreateNull());
    resp = cJSON_AddObjectToObject(doc, "response");
    cJSON_AddNumberToObject(resp, "status", (double)r->status);
    cJSON_AddNumberToObject(resp, "http_version", (double)r->http_version);
    cJSON_AddStringToObject(resp, "content_type", r->content_type);
    hdrs = cJSON_AddArrayToObject(resp, "headers");
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ln = nl ? (size_t)(nl - p + 1) : (size_t)(end - p), t = ln;
        while (t && (p[t - 1] == '\n' || p[t - 1] == '\r'))
            t--;
        if (t && !secret_header(p, t, p == r->head.data)) {
            char *line = strndup(p, t);
            if (line)
                cJSON_AddItemToArray(hdrs, cJSON_CreateString(line));
            free(line);
        }
        p += ln;
    }
    cJSON_AddStringToObject(resp, "body", r->body.data ? r->body.data : "");
    text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text)
        return -ENOMEM;
    file_name(path, sizeof(path), dir, key, occurrence);
    rc = shim_store_write(path, text);
    free(text);
    return rc;
}

static char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    char *buf;
    size_t got = 0;

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > MAX_FILE) {
        close(fd);
        errno = EPROTO;
        return NULL;
    }
    buf = malloc((size_t)st.st_size + 1);
    while (buf && got < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (buf)
        buf[got] = '\0';
    *len = got;
    return buf;
}

int shim_cassette_load(const char *dir, const char *key, int occurrence,
                       struct shim_http_reply *r, size_t max_response)
{
    char path[4200];
    size_t len;
    char *text;
    cJSON *doc, *resp, *h;
    const char *body, *ct;

    file_name(path, sizeof(path), dir, key, occurrence);
    text = read_file(path, &len);
    if (!text)
        return errno == ENOENT ? -ENOENT : -EPROTO;
    doc = shim_json_parse(text, len);
    free(text);
    resp = cJSON_GetObjectItemCaseSensitive(doc, "response");
    body = shim_json_str(resp, "body");
    if (!body) {
        cJSON_Delete(doc);
        return -EPROTO;
    }
    shim_http_reply_init(r, 256 * 1024, max_response);
    r->status = (long)shim_json_int(resp, "status");
    r->http_version = (long)shim_json_int(resp, "http_version");
    ct = shim_json_str(resp, "content_type");
    snprintf(r->content_type, sizeof(r->content_type), "%s", ct ? ct : "");
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(resp, "headers"))
    {
        if (cJSON_IsString(h)) {
            shim_buf_adds(&r->head, h->valuestring);
            shim_buf_adds(&r->head, "\r\n");
        }
    }
    shim_buf_adds(&r->head, "\r\n");
    if (shim_buf_adds(&r->body, body) < 0) {
        cJSON_Delete(doc);
        shim_http_reply_free(r);
        return -E2BIG;
    }
    cJSON_Delete(doc);
    return 0;
}
