/* capi.c - see capi.h. */
#include "api/capi.h"

#include "system/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int id_like(const char *s, size_t n, const char *prefix)
{
    size_t pl = strlen(prefix), i;

    if (n <= pl || n >= 64 || strncmp(s, prefix, pl))
        return 0;
    for (i = pl; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

/* The next path segment at *p (up to '/' or the end). */
static size_t segment(const char **p)
{
    size_t n = strcspn(*p, "/");
    return n;
}

/* A query value as its sender meant it: %XX decoded, '+' a space (an HTML
 * form's and the SDKs' encoding). Truncated to out's size. */
static void unescape(const char *v, size_t vl, char *out, size_t outsz)
{
    size_t n;
    char *d = shim_url_unescape(v, vl, 1, &n);

    snprintf(out, outsz, "%.*s", d ? (int)strnlen(d, n) : 0, d ? d : "");
    free(d);
}

static void query(const char *q, struct shim_capi_route *r)
{
    while (q && *q) {
        size_t n = strcspn(q, "&"), kl = strcspn(q, "=&");
        const char *v = q + kl + (q[kl] == '=');
        size_t vl = kl < n ? n - kl - 1 : 0;
        char val[256];

        unescape(v, vl, val, sizeof(val));
        if (kl == 5 && !strncmp(q, "limit", 5)) {
            char *end;
            long l = strtol(val, &end, 10);
            if (*end || !*val || l < 1 || l > 100)
                snprintf(r->bad_param, sizeof(r->bad_param), "limit");
            else
                r->limit = (int)l;
        } else if (kl == 5 && !strncmp(q, "order", 5)) {
            if (!strcmp(val, "asc") || !strcmp(val, "desc"))
                r->ascending = !strcmp(val, "asc");
            else
                snprintf(r->bad_param, sizeof(r->bad_param), "order");
        } else if (kl == 5 && !strncmp(q, "after", 5)) {
            snprintf(r->after, sizeof(r->after), "%.63s", val);
        } else if (kl == 4 && !strncmp(q, "name", 4)) {
            snprintf(r->name, sizeof(r->name), "%s", val);
        }
        q += n + (q[n] == '&');
    }
}

/* The route of a URL's path (no query or fragment) and query. */
static enum shim_capi_op route(int get, int post, int del, const char *path, const char *q,
                               struct shim_capi_route *r)
{
    const char *p, *s, *c = NULL;
    size_t n;

    /* the last "/containers" segment of the path: .../v1/containers... */
    for (s = path; (s = strstr(s, "/containers")) != NULL; s++)
        if (s[11] == '\0' || s[11] == '/')
            c = s;
    if (!c)
        return SHIM_CAPI_NONE;
    p = c + 11;
    if (*p != '/') { /* .../containers */
        query(q, r);
        r->op = get ? SHIM_CAPI_LIST : post ? SHIM_CAPI_CREATE : SHIM_CAPI_NONE;
        return r->op;
    }
    p++;
    n = segment(&p);
    if (!id_like(p, n, "cntr_"))
        return SHIM_CAPI_NONE;
    memcpy(r->cid, p, n);
    p += n;
    if (*p != '/') {
        r->op = get ? SHIM_CAPI_GET : del ? SHIM_CAPI_DELETE : SHIM_CAPI_NONE;
        return r->op;
    }
    p++;
    n = segment(&p);
    if (n != 5 || strncmp(p, "files", 5))
        return SHIM_CAPI_NONE;
    p += 5;
    if (*p != '/') {
        query(q, r);
        r->op = get ? SHIM_CAPI_FILES : post ? SHIM_CAPI_UPLOAD : SHIM_CAPI_NONE;
        return r->op;
    }
    p++;
    n = segment(&p);
    if (!id_like(p, n, "cfile_"))
        return SHIM_CAPI_NONE;
    memcpy(r->fid, p, n);
    p += n;
    if (*p != '/') {
        r->op = get ? SHIM_CAPI_FILE : del ? SHIM_CAPI_FILE_DELETE : SHIM_CAPI_NONE;
        return r->op;
    }
    p++;
    if (!strcmp(p, "content") && get)
        return r->op = SHIM_CAPI_CONTENT;
    return SHIM_CAPI_NONE;
}

enum shim_capi_op shim_capi_route(const char *method, const char *url, struct shim_capi_route *r)
{
    struct shim_url u;
    enum shim_capi_op op;
    int get, post, del;

    memset(r, 0, sizeof(*r));
    r->limit = 20;
    get = !strcmp(method, "GET");
    post = !strcmp(method, "POST");
    del = !strcmp(method, "DELETE");
    if (!url || (!get && !post && !del) || shim_url_parse(url, 0, &u) < 0)
        return SHIM_CAPI_NONE;
    op = route(get, post, del, u.path, u.query, r);
    shim_url_free(&u);
    return op;
}

cJSON *shim_capi_container(const struct shim_container *c)
{
    cJSON *j = cJSON_CreateObject(), *e = cJSON_CreateObject(), *np = cJSON_CreateObject();

    cJSON_AddStringToObject(j, "id", c->id);
    cJSON_AddStringToObject(j, "object", "container");
    cJSON_AddStringToObject(j, "name", c->name);
    cJSON_AddNumberToObject(j, "created_at", (double)c->created_at);
    cJSON_AddStringToObject(j, "status", "running");
    cJSON_AddNumberToObject(j, "last_active_at", (double)c->last_active_at);
    cJSON_AddStringToObject(e, "anchor", "last_active_at");
    cJSON_AddNumberToObject(e, "minutes", c->minutes);
    cJSON_AddItemToObject(j, "expires_after", e);
    cJSON_AddStringToObject(j, "memory_limit", c->memory_limit[0] ? c->memory_limit : "1g");
    cJSON_AddStringToObject(np, "type", "disabled");
    cJSON_AddItemToObject(j, "network_policy", np);
    return j;
}

cJSON *shim_capi_file(const struct shim_cfile *f, const char *cid)
{
    cJSON *j = cJSON_CreateObject();

    cJSON_AddStringToObject(j, "id", f->id);
    cJSON_AddStringToObject(j, "object", "container.file");
    cJSON_AddNumberToObject(j, "created_at", (double)f->created_at);
    cJSON_AddNumberToObject(j, "bytes", (double)f->bytes);
    cJSON_AddStringToObject(j, "container_id", cid);
    cJSON_AddStringToObject(j, "path", f->path);
    cJSON_AddStringToObject(j, "source", f->source);
    return j;
}

static const char *item_id(const void *v, size_t i, const char *cid)
{
    return cid ? ((const struct shim_cfile *)v)[i].id : ((const struct shim_container *)v)[i].id;
}

cJSON *shim_capi_list(const void *v, size_t n, const char *cid,
                      const struct shim_capi_route *r)
{
    cJSON *j = cJSON_CreateObject(), *data = cJSON_CreateArray();
    size_t k, taken = 0, start = 0, idx;
    int more = 0;
    const char *first = "", *last = "";

    /* position after the 'after' cursor, in the requested order */
    if (r->after[0])
        for (k = 0; k < n; k++)
            if (!strcmp(item_id(v, r->ascending ? k : n - 1 - k, cid), r->after))
                start = k + 1;
    for (k = start; k < n; k++) {
        idx = r->ascending ? k : n - 1 - k;
        if (!cid && r->name[0] && strcmp(((const struct shim_container *)v)[idx].name, r->name))
            continue;
        if ((int)taken == r->limit) { /* one more that the filter keeps */
            more = 1;
            break;
        }
        cJSON_AddItemToArray(data, cid ? shim_capi_file(&((const struct shim_cfile *)v)[idx], cid)
                                       : shim_capi_container(&((const struct shim_container *)v)[idx]));
        if (!taken)
            first = item_id(v, idx, cid);
        last = item_id(v, idx, cid);
        taken++;
    }
    cJSON_AddStringToObject(j, "object", "list");
    cJSON_AddItemToObject(j, "data", data);
    cJSON_AddStringToObject(j, "first_id", first);
    cJSON_AddStringToObject(j, "last_id", last);
    cJSON_AddBoolToObject(j, "has_more", more);
    return j;
}

cJSON *shim_capi_deleted(const char *id, const char *object)
{
    cJSON *j = cJSON_CreateObject();

    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddBoolToObject(j, "deleted", 1);
    return j;
}
