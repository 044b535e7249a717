/* containers.c - see containers.h. Every answer is OpenAI-shaped: the
 * resource JSON, or {"error": ...} with the status OpenAI uses; a
 * container another API key made is "not found", as one that never
 * existed. Upload bodies are multipart/form-data (a field "file") held in
 * memory (capped by CODESHIM_FILE_MAX), or a libcurl MIME post read back
 * through upload.c. */
#include "curl/containers.h"

#include "api/identity.h"
#include "api/multipart.h"
#include "base/ids.h"
#include "base/json.h"
#include "base/log.h"
#include "base/text.h"
#include "curl/files.h"
#include "curl/sink.h"
#include "curl/upstream.h"
#include "session/session.h"
#include "store/cstore.h"
#include "store/store.h"
#include "store/upload.h"
#include "system/config.h"
#include "system/http.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_PARTS 16

struct call {
    const struct shim_curl_api *api;
    CURL *h;
    const struct shim_config *cfg;
    const struct shim_handle_view *v;
    const struct shim_capi_route *r;
    struct shim_sink sink;
    char identity[65];
};

/* The program's own CA, proxy and resolve settings, with which a sandbox
 * backend is reached over HTTP (as the request loop does). */
static struct shim_http_net program_net(const struct call *c)
{
    const struct shim_handle_view *v = c->v;
    struct shim_http_net net = {v->flavor, v->net[0], v->net[1], v->net[2], v->net[3],
                                v->net[4]};

    return net;
}

/* The running sandbox of container cid, whichever session's it is. */
static int find_live(const struct call *c, const char *cid, struct shim_session **out)
{
    struct shim_http_net net = program_net(c);

    return shim_session_find_container(c->cfg, c->identity, cid, &net, out);
}

enum shim_capi_op shim_containers_match(const struct shim_handle_view *v,
                                        struct shim_capi_route *r)
{
    enum shim_capi_op op = shim_capi_route(shim_handle_view_method(v), v->url, r);

    if (op == SHIM_CAPI_NONE || op == SHIM_CAPI_LIST || op == SHIM_CAPI_CREATE)
        return op;
    return shim_cstore_issued(shim_config(), r->cid) ? op : SHIM_CAPI_NONE;
}

static CURLcode send_json(struct call *c, long status, cJSON *j)
{
    char *body = j ? cJSON_PrintUnformatted(j) : NULL;
    CURLcode rc;

    cJSON_Delete(j);
    if (!body)
        return shim_sink_fail(&c->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    rc = shim_sink_whole(&c->sink, status, CURL_HTTP_VERSION_1_1, NULL, 0, "application/json",
                         body, strlen(body));
    free(body);
    return rc;
}

static CURLcode error(struct call *c, long status, const char *type, const char *param,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static CURLcode error(struct call *c, long status, const char *type, const char *param,
                      const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    LOG_INFO("containers API: %ld %s", status, msg);
    return send_json(c, status, shim_json_error(msg, type, param, NULL));
}

static CURLcode not_found(struct call *c, const char *what, const char *id)
{
    return error(c, 404, "invalid_request_error", NULL, "No %s found with id '%s'.", what, id);
}

static CURLcode store_error(struct call *c, int rc, const char *id)
{
    if (rc == -ENOENT)
        return not_found(c, "container", id);
    if (rc == -EFBIG)
        return error(c, 400, "invalid_request_error", "file",
                     "The file is larger than codeshim's limit (CODESHIM_FILE_MAX).");
    if (rc == -EDQUOT)
        return error(c, 400, "invalid_request_error", "file",
                     "The container's files would exceed codeshim's limits: the container's "
                     "disk (CODESHIM_DISK), the budget for this API key (CODESHIM_FILES_DISK) "
                     "or the file count.");
    if (rc == -EPERM)
        return error(c, 500, "server_error", NULL, "%s.", shim_store_why());
    if (rc == -ENOSPC) /* the user's budget, all keys together (or a full disk) */
        return error(c, 507, "server_error", NULL, "%s.", shim_store_why());
    return error(c, 500, "server_error", NULL, "codeshim could not store this: %s.",
                 strerror(-rc));
}

/* Copies Files API files into container cid (and its running sandbox),
 * with the program's credentials; *out, if not NULL, the last stored. 0,
 * or an answer already sent (1) for the first that fails. */
static void to_live_sandbox(struct call *c, const char *cid, const char *name, const char *data,
                            size_t len);

static int copy_file_ids(struct call *c, const struct shim_curl_api *api, CURL *h,
                         const char *cid, const cJSON *ids, struct shim_cfile *out, CURLcode *rc)
{
    struct shim_upstream *u = NULL;
    const cJSON *id;
    int err = 0;

    if (!cJSON_GetArraySize(ids))
        return 0;
    if (shim_upstream_open(api, h, c->v, SHIM_API_NONE, &u) < 0) {
        *rc = error(c, 500, "server_error", NULL, "codeshim could not reach the upstream's "
                    "Files API (the program's handle cannot be copied)");
        return 1;
    }
    cJSON_ArrayForEach(id, ids)
    {
        char name[256], path[300], why[512], *data = NULL;
        size_t len = 0;

        if (!cJSON_IsString(id)) {
            *rc = error(c, 400, "invalid_request_error", "file_ids", "file ids must be strings");
            err = 1;
            break;
        }
        if (shim_files_fetch(u, c->cfg, id->valuestring, name, &data, &len, why, sizeof(why)) < 0) {
            *rc = error(c, 400, "invalid_request_error", "file_id", "%s", why);
            err = 1;
            break;
        }
        snprintf(path, sizeof(path), "/mnt/data/%s", name);
        err = shim_cstore_put(c->cfg, c->identity, cid, path, data, len, "user", out);
        if (err == 0)
            to_live_sandbox(c, cid, name, data, len);
        free(data);
        if (err < 0) {
            *rc = store_error(c, err, cid);
            err = 1;
            break;
        }
    }
    shim_upstream_close(u);
    return err;
}

/* ---------------- containers ---------------- */

static CURLcode create(struct call *c)
{
    CURLcode cc = CURLE_OK;
    struct shim_container k;
    cJSON *req = c->v->body ? shim_json_parse(c->v->body, c->v->body_len) : NULL;
    const cJSON *ea = req ? cJSON_GetObjectItemCaseSensitive(req, "expires_after") : NULL;
    const cJSON *fids = req ? cJSON_GetObjectItemCaseSensitive(req, "file_ids") : NULL;
    const char *name = req ? shim_json_str(req, "name") : NULL;
    const char *mem = req ? shim_json_str(req, "memory_limit") : NULL;
    long long minutes = ea ? shim_json_int(ea, "minutes") : c->cfg->container_minutes;
    int rc;

    memset(&k, 0, sizeof(k));
    if (!cJSON_IsObject(req) || !name) {
        cJSON_Delete(req);
        return error(c, 400, "invalid_request_error", "name",
                     "The body must be a JSON object with a \"name\" string.");
    }
    if (strlen(name) >= sizeof(k.name) || (mem && strcmp(mem, "1g") && strcmp(mem, "4g") &&
                                           strcmp(mem, "16g") && strcmp(mem, "64g")) ||
        minutes < 1 || minutes > 7 * 1440 || (fids && !cJSON_IsArray(fids))) {
        const char *param = strlen(name) >= sizeof(k.name) ? "name"
                            : minutes < 1 || minutes > 7 * 1440 ? "expires_after.minutes"
                            : fids && !cJSON_IsArray(fids) ? "file_ids" : "memory_limit";
        cJSON_Delete(req);
        return error(c, 400, "invalid_request_error", param, "Invalid value for '%s'.", param);
    }
    shim_id_make(k.id, sizeof(k.id), "cntr_", 48);
    snprintf(k.name, sizeof(k.name), "%s", name);
    snprintf(k.memory_limit, sizeof(k.memory_limit), "%s", mem ? mem : "1g");
    k.minutes = (int)minutes;
    k.explicit_ = 1;
    if ((rc = shim_cstore_create(c->cfg, c->identity, &k)) < 0) {
        cJSON_Delete(req);
        return store_error(c, rc, k.id);
    }
    if (copy_file_ids(c, c->api, c->h, k.id, fids, NULL, &cc)) {
        shim_cstore_delete(c->cfg, c->identity, k.id, NULL); /* nothing half made is left */
        cJSON_Delete(req);
        return cc;
    }
    cJSON_Delete(req);
    LOG_INFO("containers API: created %s", k.id);
    return send_json(c, 200, shim_capi_container(&k));
}

static CURLcode list(struct call *c)
{
    struct shim_container *v;
    size_t n;
    cJSON *j;
    int rc = shim_cstore_list(c->cfg, c->identity, &v, &n);

    if (rc < 0)
        return store_error(c, rc, "");
    j = shim_capi_list(v, n, NULL, c->r);
    free(v);
    return send_json(c, 200, j);
}

static CURLcode get(struct call *c)
{
    struct shim_container k;
    int rc = shim_cstore_find(c->cfg, c->identity, c->r->cid, &k, 1);

    return rc < 0 ? store_error(c, rc, c->r->cid) : send_json(c, 200, shim_capi_container(&k));
}

/* The container's files go, and its sandbox (whichever session's it is)
 * with them: nothing of it is readable afterwards. */
static CURLcode del(struct call *c)
{
    struct shim_container k;
    struct shim_http_net net = program_net(c);
    int rc = shim_cstore_delete(c->cfg, c->identity, c->r->cid, &k);

    if (rc < 0)
        return store_error(c, rc, c->r->cid);
    shim_session_drop(c->cfg, c->identity, c->r->cid, k.session, &net);
    LOG_INFO("containers API: deleted %s", c->r->cid);
    return send_json(c, 200, shim_capi_deleted(c->r->cid, "container.deleted"));
}

/* ---------------- files ---------------- */

static CURLcode files(struct call *c)
{
    struct shim_cfile *v;
    size_t n;
    cJSON *j;
    int rc = shim_cstore_files(c->cfg, c->identity, c->r->cid, &v, &n);

    if (rc < 0)
        return store_error(c, rc, c->r->cid);
    j = shim_capi_list(v, n, c->r->cid, c->r);
    free(v);
    return send_json(c, 200, j);
}

static void from_live_sandbox(struct call *c, const char *cid, const char *path);

static CURLcode file_meta(struct call *c, int remove)
{
    struct shim_cfile f;
    int rc = shim_cstore_file(c->cfg, c->identity, c->r->cid, c->r->fid, &f, NULL, NULL);

    if (rc == 0 && remove) { /* the sandbox's copy first: no sync brings it back */
        from_live_sandbox(c, c->r->cid, f.path);
        rc = shim_cstore_remove(c->cfg, c->identity, c->r->cid, c->r->fid);
    }

    if (rc == -ENOENT && shim_cstore_find(c->cfg, c->identity, c->r->cid, NULL, 0) == 0)
        return not_found(c, "file", c->r->fid);
    if (rc < 0)
        return store_error(c, rc, c->r->cid);
    return send_json(c, 200, remove ? shim_capi_deleted(c->r->fid, "container.file.deleted")
                                    : shim_capi_file(&f, c->r->cid));
}

/* The media type a download is sent with, by the name's extension. */
static const char *media_type(const char *path)
{
    static const char *const map[][2] = {
        {".csv", "text/csv"},           {".txt", "text/plain"},       {".md", "text/markdown"},
        {".json", "application/json"},  {".png", "image/png"},        {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"},        {".gif", "image/gif"},        {".svg", "image/svg+xml"},
        {".pdf", "application/pdf"},    {".html", "text/html"},       {".zip", "application/zip"},
        {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    };
    const char *dot = strrchr(path, '.');
    size_t i;

    for (i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcasecmp(dot, map[i][0]))
            return map[i][1];
    return "application/octet-stream";
}

static CURLcode content(struct call *c)
{
    struct shim_cfile f;
    char *data = NULL;
    size_t len = 0;
    CURLcode rc;
    int err = shim_cstore_file(c->cfg, c->identity, c->r->cid, c->r->fid, &f, &data, &len);

    if (err == -ENOENT && shim_cstore_find(c->cfg, c->identity, c->r->cid, NULL, 0) == 0)
        return not_found(c, "file", c->r->fid);
    if (err < 0)
        return store_error(c, err, c->r->cid);
    rc = shim_sink_whole(&c->sink, 200, CURL_HTTP_VERSION_1_1, NULL, 0, media_type(f.path),
                         data, len);
    free(data);
    return rc;
}

/* A container whose sandbox is running (a session's, or an explicit
 * container's) gets the file in /mnt/data at once (else it is placed
 * there when a sandbox for the container starts: files.h). */
static void to_live_sandbox(struct call *c, const char *cid, const char *name, const char *data,
                            size_t len)
{
    struct shim_session *live;
    int rc;

    if (find_live(c, cid, &live) < 0)
        return;
    rc = shim_session_file_put(live, name, data, len);
    if (rc < 0)
        LOG_WARN("container %s: the upload is stored, but the running sandbox did not take "
                 "it (%s)", cid, strerror(-rc));
    shim_session_close(live);
}

/* A file deleted through the API leaves the running sandbox too. */
static void from_live_sandbox(struct call *c, const char *cid, const char *path)
{
    struct shim_session *live;
    int rc;

    if (strncmp(path, "/mnt/data/", 10) || find_live(c, cid, &live) < 0)
        return;
    rc = shim_session_file_remove(live, path + 10);
    if (rc < 0 && rc != -ENOENT)
        LOG_WARN("container %s: %s is deleted, but the running sandbox did not remove it "
                 "(%s)", cid, path, strerror(-rc));
    shim_session_close(live);
}

/* The "file" part of a multipart body, stored under its sanitised name. */
static CURLcode upload_multipart(struct call *c, const char *ctype, const char *body, size_t len)
{
    struct shim_part *parts = calloc(MAX_PARTS, sizeof(*parts));
    char boundary[SHIM_MULTIPART_BOUNDARY_MAX + 1], name[256], path[300];
    struct shim_cfile f;
    size_t n = 0, i;
    CURLcode rc;
    int err;

    if (!parts)
        return shim_sink_fail(&c->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    err = shim_multipart_boundary(ctype, boundary);
    if (err == 0)
        err = shim_multipart_parse(body, len, boundary, parts, MAX_PARTS, &n);
    for (i = 0; err == 0 && i < n && strcmp(parts[i].name, "file"); i++)
        ;
    if (err < 0 || i == n) {
        free(parts);
        return error(c, 400, "invalid_request_error", "file",
                     "The body must be multipart/form-data with a \"file\" part.");
    }
    if (!parts[i].has_filename || shim_text_safe_filename(parts[i].filename, name, sizeof(name)) < 0) {
        free(parts);
        return error(c, 400, "invalid_request_error", "file",
                     "The file's name is missing or unsafe (a path, a control character, "
                     "\".\" or \"..\", or over 255 bytes).");
    }
    snprintf(path, sizeof(path), "/mnt/data/%s", name);
    err = shim_cstore_put(c->cfg, c->identity, c->r->cid, path, parts[i].data, parts[i].len,
                          "user", &f);
    if (err == 0)
        to_live_sandbox(c, c->r->cid, name, parts[i].data, parts[i].len);
    free(parts);
    if (err < 0)
        return store_error(c, err, c->r->cid);
    LOG_INFO("containers API: %s <- %s (%lld bytes)", c->r->cid, path, f.bytes);
    rc = send_json(c, 200, shim_capi_file(&f, c->r->cid));
    return rc;
}

static const char *header(const struct curl_slist *h, const char *name)
{
    size_t n = strlen(name);

    for (; h; h = h->next)
        if (h->data && !strncasecmp(h->data, name, n) && h->data[n] == ':')
            return h->data + n + 1 + strspn(h->data + n + 1, " \t");
    return NULL;
}

static CURLcode upload(struct call *c, const struct shim_curl_api *api, CURL *h)
{
    struct shim_upload up;
    const char *ct = header(c->v->headers, "Content-Type");
    CURLcode rc;
    int err;

    if (shim_cstore_find(c->cfg, c->identity, c->r->cid, NULL, 0) < 0)
        return not_found(c, "container", c->r->cid);
    if (c->v->body) {
        if (ct && !strncasecmp(ct, "application/json", 16)) {
            cJSON *req = shim_json_parse(c->v->body, c->v->body_len), *ids = cJSON_CreateArray();
            const char *fid = shim_json_str(req, "file_id");
            struct shim_cfile f;
            CURLcode cc = CURLE_OK;

            if (!fid) {
                cJSON_Delete(req);
                cJSON_Delete(ids);
                return error(c, 400, "invalid_request_error", "file_id",
                             "The JSON body must name a \"file_id\".");
            }
            cJSON_AddItemToArray(ids, cJSON_CreateString(fid));
            cJSON_Delete(req);
            memset(&f, 0, sizeof(f));
            if (copy_file_ids(c, api, h, c->r->cid, ids, &f, &cc)) {
                cJSON_Delete(ids);
                return cc;
            }
            cJSON_Delete(ids);
            return send_json(c, 200, shim_capi_file(&f, c->r->cid));
        }
        return upload_multipart(c, ct ? ct : "", c->v->body, c->v->body_len);
    }
    /* a libcurl MIME post (curl -F): its bytes as libcurl would send them */
    err = shim_upload_capture(api, h, c->cfg->file_max + 65536, &up);
    if (err == -EFBIG)
        return store_error(c, -EFBIG, c->r->cid);
    if (err < 0)
        return error(c, 400, "invalid_request_error", "file",
                     "codeshim could not read this upload's body (%s).", strerror(-err));
    rc = upload_multipart(c, up.content_type, up.body, up.len);
    shim_upload_free(&up);
    return rc;
}

CURLcode shim_containers_serve(const struct shim_curl_api *api, CURL *h,
                               const struct shim_handle_view *v,
                               const struct shim_capi_route *r, double t0)
{
    struct call c;

    memset(&c, 0, sizeof(c));
    c.cfg = shim_config();
    c.api = api;
    c.h = h;
    c.v = v;
    c.r = r;
    shim_sink_init(&c.sink, h, v, t0);
    shim_identity_of(v->headers, v->url, &v->creds, c.identity);
    if (r->bad_param[0])
        return error(&c, 400, "invalid_request_error", r->bad_param,
                     "Invalid value for '%s'.", r->bad_param);
    switch (r->op) {
    case SHIM_CAPI_LIST: return list(&c);
    case SHIM_CAPI_CREATE: return create(&c);
    case SHIM_CAPI_GET: return get(&c);
    case SHIM_CAPI_DELETE: return del(&c);
    case SHIM_CAPI_FILES: return files(&c);
    case SHIM_CAPI_UPLOAD: return upload(&c, api, h);
    case SHIM_CAPI_FILE: return file_meta(&c, 0);
    case SHIM_CAPI_FILE_DELETE: return file_meta(&c, 1);
    case SHIM_CAPI_CONTENT: return content(&c);
    default: return error(&c, 404, "invalid_request_error", NULL, "Unknown request.");
    }
}
