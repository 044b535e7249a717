/* files.c - see files.h. Failures here never fail the request: a file
 * that cannot be stored is logged and simply not downloadable. */
#include "curl/files.h"

#include "api/cite.h"
#include "base/base64.h"
#include "base/json.h"
#include "base/log.h"
#include "base/text.h"
#include "curl/upstream.h"
#include "store/cstore.h"
#include "system/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CITES 64

const char *shim_files_bound(const struct shim_config *cfg, const char *identity,
                             const cJSON *req, int in_session)
{
    struct shim_container k;
    const cJSON *it;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *type = shim_json_str(it, "type"), *c = shim_json_str(it, "container");
        if (type && !strcmp(type, "code_interpreter") && c && !strncmp(c, "cntr_", 5) &&
            shim_cstore_find(cfg, identity, c, &k, 1) == 0 && (k.explicit_ || !in_session))
            return c;
    }
    return NULL;
}

static void reload(struct shim_files *f, const struct shim_config *cfg, const char *identity)
{
    free(f->v);
    f->v = NULL;
    f->n = 0;
    if (shim_cstore_files(cfg, identity, f->cid, &f->v, &f->n) < 0)
        f->n = 0;
}

/* Puts every stored file back into /mnt/data (names were made safe when
 * they were stored; subdirectories of an earlier sandbox are flattened
 * away: only top-level files return). */
static void restore(struct shim_files *f, const struct shim_config *cfg, const char *identity,
                    struct shim_session *box)
{
    size_t i;

    for (i = 0; i < f->n; i++) {
        const char *name = f->v[i].path + strlen("/mnt/data/");
        char *data = NULL;
        size_t len = 0;
        int rc;

        if (strncmp(f->v[i].path, "/mnt/data/", 10) || strchr(name, '/'))
            continue;
        rc = shim_cstore_file(cfg, identity, f->cid, f->v[i].id, NULL, &data, &len);
        if (rc == 0)
            rc = shim_session_file_put(box, name, data, len);
        free(data);
        if (rc < 0)
            LOG_WARN("container %s: cannot place %s in the sandbox: %s", f->cid, name,
                     strerror(-rc));
    }
}

/* Uploads that replaced a file of the same name since the code last ran:
 * the model is told, so it does not trust what it read before. */
static void replaced_note(struct shim_files *f, const struct shim_config *cfg,
                          const char *identity)
{
    char paths[2048], *p, *nl;
    size_t k;

    if (shim_cstore_take_notice(cfg, identity, f->cid, paths, sizeof(paths)) < 0 || !paths[0])
        return;
    k = (size_t)snprintf(f->note, sizeof(f->note), "[Note: uploads replaced these files since "
                         "the code last ran:");
    for (p = paths; (nl = strchr(p, '\n')) != NULL && k + 4 < sizeof(f->note); p = nl + 1) {
        *nl = '\0';
        k += (size_t)snprintf(f->note + k, sizeof(f->note) - k, " %s", p);
    }
    if (k + 3 < sizeof(f->note))
        snprintf(f->note + k, sizeof(f->note) - k, ".]\n");
}

void shim_files_opened(struct shim_files *f, const struct shim_config *cfg,
                       const char *identity, struct shim_session *box, int bound)
{
    struct shim_container c;
    int served;

    memset(f, 0, sizeof(*f));
    snprintf(f->cid, sizeof(f->cid), "%s", shim_session_container_id(box));
    if (!bound && shim_cstore_find(cfg, identity, f->cid, NULL, 1) < 0) {
        memset(&c, 0, sizeof(c));
        snprintf(c.id, sizeof(c.id), "%s", f->cid);
        snprintf(c.name, sizeof(c.name), "codeshim-auto");
        snprintf(c.session, sizeof(c.session), "%s", shim_session_key(box));
        c.minutes = cfg->container_minutes;
        if (shim_cstore_create(cfg, identity, &c) < 0 && shim_cstore_find(cfg, identity, f->cid, NULL, 0) < 0)
            LOG_INFO("container %s is not recorded: its files will not be downloadable", f->cid);
    }
    reload(f, cfg, identity);
    replaced_note(f, cfg, identity);
    served = shim_cstore_served(cfg, identity, f->cid);
    if (bound && shim_session_is_new(box)) {
        restore(f, cfg, identity, box);
        if (served == 1)
            snprintf(f->note, sizeof(f->note),
                     "[Note: the earlier sandbox of container %s has expired (or was started "
                     "with other sandbox settings); its variables and imports are not here. "
                     "This is a new sandbox for the same container%s.]\n",
                     f->cid, f->n ? ", with its files back in /mnt/data" : "");
        else if (f->n)
            snprintf(f->note, sizeof(f->note),
                     "[Note: container %s's files are in /mnt/data.]\n", f->cid);
    }
}

const char *shim_files_take_note(struct shim_files *f)
{
    static __thread char note[400];

    if (!f->note[0])
        return NULL;
    snprintf(note, sizeof(note), "%s", f->note);
    f->note[0] = '\0';
    return note;
}

static const struct shim_cfile *by_path(const struct shim_files *f, const char *path)
{
    size_t i;

    for (i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].path, path))
            return &f->v[i];
    return NULL;
}

void shim_files_sync(struct shim_files *f, const struct shim_config *cfg, const char *identity,
                     struct shim_session *box, char *const *names, size_t n)
{
    size_t i;
    int changed = 0;

    if (!f->cid[0])
        return;
    for (i = 0; i < n; i++) {
        char path[600], *data = NULL;
        const struct shim_cfile *old;
        size_t len = 0;
        int rc;

        if (snprintf(path, sizeof(path), "/mnt/data/%s", names[i]) >= (int)sizeof(path))
            continue;
        rc = shim_session_file_get(box, names[i], (size_t)cfg->file_max, &data, &len);
        old = by_path(f, path);
        if (rc == 0 && (!old || (size_t)old->bytes != len)) {
            rc = shim_cstore_put(cfg, identity, f->cid, path, data, len, "assistant", NULL);
            changed |= rc == 0;
        }
        free(data);
        if (rc < 0)
            LOG_INFO("container %s: %s is not stored (%s)", f->cid, path, strerror(-rc));
    }
    if (changed)
        reload(f, cfg, identity);
    f->synced = 1;
}

/* The annotations for one text. */
static cJSON *annotations_for(const struct shim_files *f, const char *text)
{
    struct shim_cite c[MAX_CITES];
    size_t n = shim_cite_find(text, strlen(text), c, MAX_CITES), i;
    cJSON *arr = cJSON_CreateArray();

    for (i = 0; arr && i < n; i++) {
        char path[300];
        const struct shim_cfile *file;
        cJSON *a;

        snprintf(path, sizeof(path), "/mnt/data/%s", c[i].name);
        if (!(file = by_path(f, path)))
            continue;
        a = cJSON_CreateObject();
        cJSON_AddStringToObject(a, "type", "container_file_citation");
        cJSON_AddStringToObject(a, "container_id", f->cid);
        cJSON_AddStringToObject(a, "file_id", file->id);
        cJSON_AddStringToObject(a, "filename", strrchr(path, '/') + 1);
        cJSON_AddNumberToObject(a, "start_index", (double)c[i].start);
        cJSON_AddNumberToObject(a, "end_index", (double)c[i].end);
        cJSON_AddItemToArray(arr, a);
    }
    return arr;
}

cJSON *shim_files_annotations(const struct shim_files *f, const char *text)
{
    return f->n ? annotations_for(f, text) : cJSON_CreateArray();
}

void shim_files_annotate(const struct shim_files *f, cJSON *response)
{
    cJSON *item, *part;

    if (!f->n)
        return;
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(response, "output"))
    {
        const char *type = shim_json_str(item, "type");
        if (!type || strcmp(type, "message"))
            continue;
        cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(item, "content"))
        {
            const char *pt = shim_json_str(part, "type"), *text = shim_json_str(part, "text");
            cJSON *ann = cJSON_GetObjectItemCaseSensitive(part, "annotations"), *add, *a;

            if (!pt || strcmp(pt, "output_text") || !text)
                continue;
            if (!cJSON_IsArray(ann)) {
                ann = cJSON_CreateArray();
                shim_json_set(part, "annotations", ann);
            }
            add = annotations_for(f, text);
            while (add && (a = cJSON_DetachItemFromArray(add, 0)) != NULL)
                cJSON_AddItemToArray(ann, a);
            cJSON_Delete(add);
        }
    }
}

void shim_files_free(struct shim_files *f)
{
    free(f->v);
    memset(f, 0, sizeof(*f));
}

/* ---------------- files the request brings ---------------- */

static int fail_in(char *why, size_t n, const char **param, const char *p, const char *msg,
                   ...) __attribute__((format(printf, 5, 6)));

static int fail_in(char *why, size_t n, const char **param, const char *p, const char *msg, ...)
{
    va_list ap;

    va_start(ap, msg);
    vsnprintf(why, n, msg, ap);
    va_end(ap);
    *param = p;
    return -EINVAL;
}

static int add_in(struct shim_files_in *in, const char *name, char *data, size_t len)
{
    struct shim_file_in *v = realloc(in->v, (in->n + 1) * sizeof(*v));
    size_t i;

    if (!v) {
        free(data);
        return -ENOMEM;
    }
    in->v = v;
    for (i = 0; i < in->n; i++)
        if (!strcmp(in->v[i].name, name)) { /* a later file of that name wins */
            free(in->v[i].data);
            in->v[i].data = data;
            in->v[i].len = len;
            return 0;
        }
    snprintf(v[in->n].name, sizeof(v[in->n].name), "%s", name);
    v[in->n].data = data;
    v[in->n].len = len;
    in->n++;
    return 0;
}

/* file_data: base64, bare or as a data: URL. */
static int from_data(struct shim_files_in *in, const struct shim_config *cfg, const char *fname,
                     const char *fdata, char *why, size_t n, const char **param)
{
    const char *b64 = fdata, *comma;
    char name[256], *data;
    size_t len;
    int rc;

    if (!strncmp(fdata, "data:", 5) && (comma = strchr(fdata, ',')) != NULL) {
        if (!memmem(fdata, (size_t)(comma - fdata), ";base64", 7))
            return fail_in(why, n, param, "input.file_data",
                           "file_data of \"%s\" is a data: URL without ;base64", fname);
        b64 = comma + 1;
    }
    if (!fname || shim_text_safe_filename(fname, name, sizeof(name)) < 0)
        return fail_in(why, n, param, "input.filename",
                       "an input_file with file_data needs a safe \"filename\" (no path, no "
                       "control characters, at most 255 bytes)%s", "");
    if (strlen(b64) / 4 * 3 > cfg->file_max)
        return fail_in(why, n, param, "input.file_data",
                       "the file \"%s\" is larger than codeshim's limit (CODESHIM_FILE_MAX)", name);
    if ((rc = shim_base64_decode(b64, &data, &len)) < 0)
        return rc == -ENOMEM ? rc : fail_in(why, n, param, "input.file_data",
                                            "file_data of \"%s\" is not base64", name);
    return add_in(in, name, data, len);
}

int shim_files_fetch(struct shim_upstream *u, const struct shim_config *cfg, const char *id,
                     char name[256], char **data, size_t *len, char *why, size_t n)
{
    struct shim_http_reply r;
    char path[300], errbuf[CURL_ERROR_SIZE];
    const char *fn;
    cJSON *meta;
    CURLcode cc;
    size_t i;

    *data = NULL;
    *len = 0;
    name[0] = '\0';
    for (i = 0; id[i]; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-') || i > 120) {
            snprintf(why, n, "\"%.64s\" is not a file id", id);
            return -EINVAL;
        }
    snprintf(path, sizeof(path), "/files/%s", id);
    cc = shim_upstream_get(u, path, 1 << 20, &r, errbuf);
    meta = cc == CURLE_OK && r.status == 200 ? shim_json_parse(r.body.data, r.body.len) : NULL;
    fn = shim_json_str(meta, "filename");
    if (fn && shim_text_safe_filename(fn, name, 256) < 0)
        name[0] = '\0';
    cJSON_Delete(meta);
    if (!name[0]) {
        int st = cc == CURLE_OK ? (int)r.status : 0;
        shim_http_reply_free(&r);
        if (st == 404)
            snprintf(why, n, "the upstream's Files API has no file \"%s\" (404)", id);
        else if (st)
            snprintf(why, n, "the file \"%s\" could not be read from the upstream's Files API "
                     "(HTTP %d: it may have none)", id, st);
        else
            snprintf(why, n, "the file \"%s\" could not be read from the upstream's Files API "
                     "(%s)", id, errbuf);
        return -EINVAL;
    }
    shim_http_reply_free(&r);
    snprintf(path, sizeof(path), "/files/%s/content", id);
    cc = shim_upstream_get(u, path, (size_t)cfg->file_max, &r, errbuf);
    if (cc != CURLE_OK || r.status != 200) {
        shim_http_reply_free(&r);
        if (cc == CURLE_FILESIZE_EXCEEDED)
            snprintf(why, n, "the file \"%s\" is larger than codeshim's limit "
                     "(CODESHIM_FILE_MAX)", id);
        else
            snprintf(why, n, "the content of file \"%s\" could not be read from the upstream",
                     id);
        return -EINVAL;
    }
    *len = r.body.len;
    *data = r.body.data ? shim_buf_take(&r.body, len) : calloc(1, 1);
    shim_http_reply_free(&r);
    return *data ? 0 : -ENOMEM;
}

static int from_upstream(struct shim_files_in *in, const struct shim_config *cfg,
                         struct shim_upstream *u, const char *id, char *why, size_t n,
                         const char **param)
{
    char name[256], *data;
    size_t len;
    int rc = shim_files_fetch(u, cfg, id, name, &data, &len, why, n);

    *param = "file_id";
    return rc < 0 ? rc : add_in(in, name, data, len);
}

/* One content part: Responses input_file, Chat {"type":"file","file":{...}}. */
static int part_in(struct shim_files_in *in, const struct shim_config *cfg, const cJSON *p,
                   struct shim_upstream *u, char *why, size_t n, const char **param)
{
    const char *type = shim_json_str(p, "type");
    const cJSON *f = p;

    if (type && !strcmp(type, "file"))
        f = cJSON_GetObjectItemCaseSensitive(p, "file");
    else if (!type || strcmp(type, "input_file"))
        return 0;
    if (in->n >= SHIM_FILES_IN_MAX)
        return fail_in(why, n, param, "input", "more than %s input files", "32");
    if (shim_json_str(f, "file_data"))
        return from_data(in, cfg, shim_json_str(f, "filename"), shim_json_str(f, "file_data"),
                         why, n, param);
    if (shim_json_str(f, "file_id"))
        return from_upstream(in, cfg, u, shim_json_str(f, "file_id"), why, n, param);
    return 0; /* file_url: the model's business */
}

int shim_files_inputs(struct shim_files_in *in, const struct shim_config *cfg, const cJSON *req,
                      struct shim_upstream *u, char *why, size_t whysz, const char **param)
{
    static const char *const lists[] = {"input", "messages"};
    const cJSON *it, *p, *id;
    size_t l;
    int rc = 0;

    memset(in, 0, sizeof(*in));
    for (l = 0; l < 2; l++)
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, lists[l]))
        {
            cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(it, "content"))
            {
                if ((rc = part_in(in, cfg, p, u, why, whysz, param)) < 0)
                    return rc;
            }
        }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *type = shim_json_str(it, "type");
        if (!type || strcmp(type, "code_interpreter"))
            continue;
        cJSON_ArrayForEach(id, cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(it, "container"), "file_ids"))
        {
            if (!cJSON_IsString(id))
                return fail_in(why, whysz, param, "tools.container.file_ids",
                               "file_ids must be strings%s", "");
            if (in->n >= SHIM_FILES_IN_MAX)
                return fail_in(why, whysz, param, "tools.container.file_ids",
                               "more than %s input files", "32");
            if ((rc = from_upstream(in, cfg, u, id->valuestring, why, whysz, param)) < 0) {
                if (!strcmp(*param, "file_id"))
                    *param = "tools.container.file_ids";
                return rc;
            }
        }
    }
    return 0;
}

void shim_files_describe(cJSON *up, const char *tool_name, const struct shim_files_in *in)
{
    char list[2048];
    size_t i, k = 0;
    cJSON *t;

    if (!in->n)
        return;
    for (i = 0; i < in->n && k + 300 < sizeof(list); i++)
        k += (size_t)snprintf(list + k, sizeof(list) - k, "%s/mnt/data/%s", i ? ", " : "",
                              in->v[i].name);
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(up, "tools"))
    {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        cJSON *holder = cJSON_IsObject(fn) ? fn : t;
        const char *name = shim_json_str(holder, "name"), *d = shim_json_str(holder, "description");
        char *text;
        size_t tl;

        if (!name || strcmp(name, tool_name) || !d)
            continue;
        tl = strlen(d) + strlen(list) + 64;
        if (!(text = malloc(tl)))
            return;
        snprintf(text, tl, "%s The user's files are in the sandbox: %s.", d, list);
        shim_json_set(holder, "description", cJSON_CreateString(text));
        free(text);
    }
}

void shim_files_place(struct shim_files *f, const struct shim_config *cfg, const char *identity,
                      struct shim_session *box, const struct shim_files_in *in)
{
    size_t i;

    for (i = 0; i < in->n; i++) {
        char path[300];
        int rc = shim_session_file_put(box, in->v[i].name, in->v[i].data, in->v[i].len);

        if (rc < 0) {
            LOG_WARN("cannot place %s in the sandbox: %s", in->v[i].name, strerror(-rc));
            continue;
        }
        snprintf(path, sizeof(path), "/mnt/data/%s", in->v[i].name);
        if (f->cid[0] && shim_cstore_put(cfg, identity, f->cid, path, in->v[i].data,
                                         in->v[i].len, "user", NULL) == 0)
            reload(f, cfg, identity);
    }
    if (in->n && f->cid[0]) { /* the request's own files: its tool says so already */
        char drop[64];
        shim_cstore_take_notice(cfg, identity, f->cid, drop, sizeof(drop));
    }
}

void shim_files_inputs_free(struct shim_files_in *in)
{
    size_t i;

    for (i = 0; i < in->n; i++)
        free(in->v[i].data);
    free(in->v);
    memset(in, 0, sizeof(*in));
}
