/* cassette.c - see cassette.h. */
#include "store/cassette.h"

#include "api/identity.h"
#include "base/fileio.h"

#include "api/match.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sha256.h"
#include "store/store.h"
#include "system/url.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE (256u << 20)
#define MAX_EXCHANGES 10000 /* files of a cassette folder read */
/* A whole cassette holds many exchanges: more values than one body may,
 * still bounded (a tree of them costs at most some 400 MB). */
#define CASSETTE_MAX_VALUES (16 * SHIM_JSON_MAX_VALUES)

struct seen {
    struct seen *next;
    char key[65];
    int n;
};

static struct seen *g_seen;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* The path of url as libcurl sends it, without query or fragment (keys
 * may live there); "/" when libcurl cannot read the URL. */
static void url_path(const char *url, char *out, size_t n)
{
    struct shim_url u;

    if (shim_url_parse(url, 0, &u) < 0 || (size_t)snprintf(out, n, "%s", u.path) >= n)
        snprintf(out, n, "/");
    shim_url_free(&u);
}

void shim_cassette_key(const char *url, const char *body, size_t len, char key[65],
                       int *occurrence)
{
    struct shim_sha256 s;
    char path[1024];
    struct seen *e;

    url_path(url, path, sizeof(path));
    shim_sha256_init(&s);
    shim_sha256_update(&s, "POST ", 5);
    shim_sha256_update(&s, path, strlen(path));
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

/* The reply as a cassette's "response": status, version, type, headers
 * without credentials, body. */
static cJSON *response_json(const struct shim_http_reply *r)
{
    cJSON *resp = cJSON_CreateObject(), *hdrs;
    const char *p = r->head.data, *end = r->head.data + r->head.len;

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
    return resp;
}

/* The request half of an exchange: method, path (no query: keys may live
 * there), the body codeshim sent, and (cassettes) what it is matched on. */
static cJSON *request_json(const char *url, const char *body, size_t len)
{
    cJSON *req = cJSON_CreateObject(), *b;
    char path[1024];

    url_path(url, path, sizeof(path));
    cJSON_AddStringToObject(req, "method", "POST");
    cJSON_AddStringToObject(req, "path", path);
    b = shim_json_parse(body, len);
    cJSON_AddItemToObject(req, "body", b ? b : cJSON_CreateNull());
    return req;
}

int shim_cassette_save(const char *dir, const char *key, int occurrence, const char *url,
                       const char *body, size_t len, const struct shim_http_reply *r)
{
    char path[4200];
    cJSON *doc = cJSON_CreateObject();
    char *text;
    int rc;

    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        cJSON_Delete(doc);
        return -errno;
    }
    cJSON_AddStringToObject(doc, "key", key);
    cJSON_AddItemToObject(doc, "request", request_json(url, body, len));
    cJSON_AddItemToObject(doc, "response", response_json(r));
    text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text)
        return -ENOMEM;
    file_name(path, sizeof(path), dir, key, occurrence);
    rc = shim_store_write(path, text);
    free(text);
    return rc;
}

/* A cassette's "response" into r. 0, -EPROTO, or -E2BIG. */
static int response_read(const cJSON *resp, struct shim_http_reply *r, size_t max_response)
{
    const char *body = shim_json_str(resp, "body"), *ct;
    const cJSON *h;

    if (!body)
        return -EPROTO;
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
        shim_http_reply_free(r);
        return -E2BIG;
    }
    return 0;
}

/* A whole JSON file of at most MAX_FILE bytes, or NULL (errno set). */
static cJSON *read_json(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    int rc = shim_store_read_all(path, MAX_FILE, &text, &len);
    cJSON *doc;

    if (rc < 0) {
        errno = rc == -ENOENT ? ENOENT : EPROTO;
        return NULL;
    }
    doc = shim_json_parse_within(text, len, CASSETTE_MAX_VALUES, SHIM_JSON_MAX_DEPTH);
    free(text);
    if (!doc)
        errno = EPROTO;
    return doc;
}

int shim_cassette_load(const char *dir, const char *key, int occurrence,
                       struct shim_http_reply *r, size_t max_response)
{
    char path[4200];
    cJSON *doc;
    int rc;

    file_name(path, sizeof(path), dir, key, occurrence);
    doc = read_json(path);
    if (!doc)
        return errno == ENOENT ? -ENOENT : -EPROTO;
    rc = response_read(cJSON_GetObjectItemCaseSensitive(doc, "response"), r, max_response);
    cJSON_Delete(doc);
    return rc;
}

/* ---- cassettes (CODESHIM_CASSETTE): one file or folder, in order ---- */

/* The process's one cassette: every exchange of it, which of them this
 * process has replayed, and whether it existed at the first look. */
static struct {
    char path[4096];
    int loaded, existed, is_dir;
    cJSON *list;          /* the exchanges, in order */
    unsigned char *used;  /* one flag per exchange */
    size_t nused;
} g_cas;

static int is_dir_form(const char *path)
{
    struct stat st;
    size_t n = strlen(path);

    return (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* The folder form: NNNN.json files, each one exchange, by name. */
static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static cJSON *read_dir(const char *dir)
{
    cJSON *list = cJSON_CreateArray();
    char **names = calloc(MAX_EXCHANGES, sizeof(*names)), path[4200];
    size_t n = 0, i;
    struct dirent *e;
    DIR *d = names ? opendir(dir) : NULL;

    if (!d) {
        free(names);
        return list;
    }
    while ((e = readdir(d)) != NULL && n < MAX_EXCHANGES) {
        size_t k = strlen(e->d_name);
        if (k > 5 && !strcmp(e->d_name + k - 5, ".json") && e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), by_name);
    for (i = 0; i < n; i++) {
        cJSON *x;
        if (names[i] && shim_fileio_join(path, sizeof(path), dir, names[i]) == 0 &&
            (x = read_json(path)) != NULL)
            cJSON_AddItemToArray(list, x);
        free(names[i]);
    }
    free(names);
    return list;
}

/* The exchanges now on disk (an empty list when there is no cassette). */
static cJSON *read_cassette(const char *path, int *existed)
{
    cJSON *doc, *list;

    *existed = 0;
    if (is_dir_form(path)) {
        struct stat st;
        *existed = stat(path, &st) == 0;
        return read_dir(path);
    }
    doc = read_json(path);
    if (!doc)
        return errno == ENOENT ? cJSON_CreateArray() : NULL;
    *existed = 1;
    list = cJSON_DetachItemFromObjectCaseSensitive(doc, "exchanges");
    cJSON_Delete(doc);
    return cJSON_IsArray(list) ? list : (cJSON_Delete(list), NULL);
}

static int ensure_used(size_t n)
{
    unsigned char *u;

    if (n <= g_cas.nused)
        return 0;
    u = realloc(g_cas.used, n);
    if (!u)
        return -ENOMEM;
    memset(u + g_cas.nused, 0, n - g_cas.nused);
    g_cas.used = u;
    g_cas.nused = n;
    return 0;
}

/* Loads the cassette at its first use in this process (lock held). */
static int cas_load(const char *path)
{
    cJSON *list;

    if (g_cas.loaded && !strcmp(g_cas.path, path))
        return 0;
    list = read_cassette(path, &g_cas.existed);
    if (!list)
        return -EPROTO;
    g_cas.existed = cJSON_GetArraySize(list) > 0; /* an empty one is recorded into */
    cJSON_Delete(g_cas.list);
    free(g_cas.used);
    g_cas.used = NULL;
    g_cas.nused = 0;
    g_cas.list = list;
    g_cas.is_dir = is_dir_form(path);
    snprintf(g_cas.path, sizeof(g_cas.path), "%s", path);
    g_cas.loaded = 1;
    return ensure_used((size_t)cJSON_GetArraySize(list) + 1);
}

int shim_cassette_existed(const char *path)
{
    int existed;

    pthread_mutex_lock(&g_lock);
    existed = cas_load(path) == 0 && g_cas.existed;
    pthread_mutex_unlock(&g_lock);
    return existed;
}

static const cJSON *ex_request(const cJSON *ex)
{
    return cJSON_GetObjectItemCaseSensitive(ex, "request");
}

static int same_route(const cJSON *ex, const char *path)
{
    const char *p = shim_json_str(ex_request(ex), "path");
    return p && !strcmp(p, path);
}

/* Why nothing matched: the nearest recorded exchange and where it differs. */
static void near_miss(const char *path, const cJSON *now, char *why, size_t whysz)
{
    char at[256], was[120], is[120], bat[256] = "", bwas[120] = "", bis[120] = "";
    long best = -2, d;
    int i = 0, besti = 0, n = cJSON_GetArraySize(g_cas.list), alike_used = 0;
    const cJSON *ex;

    cJSON_ArrayForEach(ex, g_cas.list)
    {
        i++;
        if (!same_route(ex, path))
            continue;
        d = shim_match_diff(cJSON_GetObjectItemCaseSensitive(ex_request(ex), "match"), now, at,
                            sizeof(at), was, is, sizeof(was));
        if (d < 0) {
            alike_used++;
            continue;
        }
        if (d > best) {
            best = d;
            besti = i;
            snprintf(bat, sizeof(bat), "%s", at);
            snprintf(bwas, sizeof(bwas), "%s", was);
            snprintf(bis, sizeof(bis), "%s", is);
        }
    }
    if (alike_used)
        snprintf(why, whysz, "the %d recorded exchange(s) that match this request were all "
                 "replayed already (cassette %s)", alike_used, g_cas.path);
    else if (besti)
        snprintf(why, whysz, "no recorded exchange matches this request (cassette %s); the "
                 "nearest is exchange %d of %d, which differs at %s: recorded %s, this request "
                 "%s", g_cas.path, besti, n, bat[0] ? bat : "(the whole)", bwas, bis);
    else
        snprintf(why, whysz, "no recorded exchange matches this request (cassette %s, %d "
                 "exchange(s), none to %s)", g_cas.path, n, path);
}

int shim_cassette_find(const char *cassette, const char *url, const cJSON *match,
                       struct shim_http_reply *r, size_t max_response, int *index, char *why,
                       size_t whysz)
{
    char path[1024];
    const cJSON *ex;
    int i = 0, rc = -ENOENT;

    url_path(url, path, sizeof(path));
    pthread_mutex_lock(&g_lock);
    if (cas_load(cassette) < 0) {
        snprintf(why, whysz, "the cassette %s cannot be read (not a codeshim cassette, or "
                 "larger than %u MiB)", cassette, MAX_FILE >> 20);
        pthread_mutex_unlock(&g_lock);
        return -EPROTO;
    }
    cJSON_ArrayForEach(ex, g_cas.list)
    {
        i++;
        if ((size_t)i < g_cas.nused && g_cas.used[i] == 0 && same_route(ex, path) &&
            cJSON_Compare(cJSON_GetObjectItemCaseSensitive(ex_request(ex), "match"), match, 1)) {
            rc = response_read(cJSON_GetObjectItemCaseSensitive(ex, "response"), r,
                               max_response);
            if (rc == 0) {
                g_cas.used[i] = 1;
                *index = i;
            } else
                snprintf(why, whysz, "exchange %d of the cassette %s is broken", i, cassette);
            break;
        }
    }
    if (rc == -ENOENT)
        near_miss(path, match, why, whysz);
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* Holds an exclusive lock on the cassette's folder (or the folder it is
 * in) while it is read and written: other processes record too. */
static int lock_folder(const char *cassette, int is_dir)
{
    char dir[4096];
    char *slash;
    int fd;

    snprintf(dir, sizeof(dir), "%s", cassette);
    if (!is_dir) {
        slash = strrchr(dir, '/');
        if (slash == dir)
            dir[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof(dir), ".");
    } else if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            close(fd);
            return -errno;
        }
    return fd;
}

/* The whole cassette file, as it now is with ex appended. */
static int write_file(const char *cassette, cJSON *list)
{
    cJSON *doc = cJSON_CreateObject();
    char *text;
    int rc;

    cJSON_AddNumberToObject(doc, "codeshim_cassette", 1);
    cJSON_AddItemReferenceToObject(doc, "exchanges", list);
    text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text)
        return -ENOMEM;
    rc = shim_store_write(cassette, text);
    free(text);
    return rc;
}

int shim_cassette_add(const char *cassette, const char *url, const cJSON *match,
                      const char *body, size_t len, const struct shim_http_reply *r,
                      int *index)
{
    cJSON *ex = cJSON_CreateObject(), *req = request_json(url, body, len), *list = NULL;
    int fd, rc = -ENOMEM, existed, n;
    char name[4200];

    pthread_mutex_lock(&g_lock);
    if (cas_load(cassette) < 0 || !ex || !req) {
        cJSON_Delete(ex);
        cJSON_Delete(req);
        pthread_mutex_unlock(&g_lock);
        return -EPROTO;
    }
    cJSON_AddItemToObject(req, "match", cJSON_Duplicate(match, 1));
    cJSON_AddItemToObject(ex, "request", req);
    cJSON_AddItemToObject(ex, "response", response_json(r));
    fd = lock_folder(cassette, g_cas.is_dir);
    if (fd >= 0 && (list = read_cassette(cassette, &existed)) != NULL) {
        n = cJSON_GetArraySize(list) + 1;
        if (g_cas.is_dir) {
            char *text = cJSON_Print(ex);
            snprintf(name, sizeof(name), "%s/%04d.json", cassette, n);
            rc = text ? shim_store_write(name, text) : -ENOMEM;
            free(text);
            cJSON_AddItemToArray(list, ex);
        } else {
            cJSON_AddItemToArray(list, ex);
            rc = write_file(cassette, list);
        }
        ex = NULL;
        if (rc == 0 && ensure_used((size_t)n + 1) == 0) {
            cJSON_Delete(g_cas.list); /* others' new exchanges come in too */
            g_cas.list = list;
            list = NULL;
            g_cas.used[n] = 1; /* what was just recorded is not replayed again */
            *index = n;
        }
    } else if (fd >= 0)
        rc = -EPROTO;
    else
        rc = fd;
    if (fd >= 0)
        close(fd);
    cJSON_Delete(list);
    cJSON_Delete(ex);
    pthread_mutex_unlock(&g_lock);
    return rc;
}
