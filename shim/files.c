/* files.c - see files.h. Failures here never fail the request: a file
 * that cannot be stored is logged and simply not downloadable. */
#include "files.h"

#include "cite.h"
#include "config.h"
#include "cstore.h"
#include "json.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CITES 64

const char *shim_files_bound(const struct shim_config *cfg, const char *identity,
                             const cJSON *req)
{
    struct shim_container k;
    const cJSON *it;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *type = shim_json_str(it, "type"), *c = shim_json_str(it, "container");
        if (type && !strcmp(type, "code_interpreter") && c && !strncmp(c, "cntr_", 5) &&
            shim_cstore_find(cfg, identity, c, &k, 1) == 0 && k.explicit_)
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

void shim_files_opened(struct shim_files *f, const struct shim_config *cfg,
                       const char *identity, struct shim_session *box, int bound)
{
    struct shim_container c;

    memset(f, 0, sizeof(*f));
    snprintf(f->cid, sizeof(f->cid), "%s", shim_session_container_id(box));
    if (!bound && shim_cstore_find(cfg, identity, f->cid, NULL, 1) < 0) {
        memset(&c, 0, sizeof(c));
        snprintf(c.id, sizeof(c.id), "%s", f->cid);
        snprintf(c.name, sizeof(c.name), "codeshim-auto");
        c.minutes = cfg->container_minutes;
        if (shim_cstore_create(cfg, identity, &c) < 0 && shim_cstore_find(cfg, identity, f->cid, NULL, 0) < 0)
            LOG_INFO("container %s is not recorded: its files will not be downloadable", f->cid);
    }
    reload(f, cfg, identity);
    if (bound && shim_session_is_new(box)) {
        restore(f, cfg, identity, box);
        snprintf(f->note, sizeof(f->note),
                 "[Note: the earlier sandbox of container %s has expired; its variables and "
                 "imports are not here. This is a new sandbox for the same container%s.]\n",
                 f->cid, f->n ? ", with its files back in /mnt/data" : "");
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
