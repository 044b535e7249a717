/* chain.c - see chain.h. */
#include "store/chain.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "store/store.h"
#include "system/config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ENTRY_MAX (16u << 20)
#define ENTRY_TTL (24 * 3600)

static int entry_path(const struct shim_config *cfg, const char *identity, const char *id,
                      char *out, size_t n)
{
    char dir[SHIM_PATH_MAX], h[68] = "r-";
    int rc = shim_store_identity_dir(cfg, identity, dir, sizeof(dir));

    if (rc < 0)
        return rc;
    shim_store_hash("codeshim-chain-v1", id, NULL, h + 2);
    return shim_fileio_join(out, n, dir, h);
}

/* Old entries go when new ones are written: no daemon needed. */
static void prune(const char *entry)
{
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 80];
    const char *slash = strrchr(entry, '/');
    time_t now = (time_t)shim_clock_wall_s();
    struct dirent *e;
    DIR *d;

    if (!slash || (size_t)(slash - entry) >= sizeof(dir))
        return;
    memcpy(dir, entry, (size_t)(slash - entry));
    dir[slash - entry] = '\0';
    if (!(d = opendir(dir)))
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, "r-", 2) || shim_fileio_join(p, sizeof(p), dir, e->d_name) < 0)
            continue;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > ENTRY_TTL)
            unlink(p);
    }
    closedir(d);
}

int shim_chain_save(const struct shim_config *cfg, const char *identity,
                    const char *answer_id, const char *upstream_id, const cJSON *outputs)
{
    char path[SHIM_PATH_MAX + 80], *text;
    cJSON *doc;
    int rc;

    if (!answer_id || !upstream_id)
        return -EINVAL;
    if ((rc = entry_path(cfg, identity, answer_id, path, sizeof(path))) < 0)
        return rc;
    doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "upstream_id", upstream_id);
    cJSON_AddItemToObject(doc, "outputs",
                          outputs ? cJSON_Duplicate(outputs, 1) : cJSON_CreateArray());
    text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    rc = text ? shim_store_write(path, text) : -ENOMEM;
    free(text);
    prune(path);
    if (rc < 0)
        LOG_WARN("cannot remember answer %.64s for continuation: %s", answer_id, strerror(-rc));
    return rc;
}

void shim_chain_forget(const struct shim_config *cfg, const char *identity,
                       const char *answer_id)
{
    char path[SHIM_PATH_MAX + 80];

    /* no runtime directory yet: no entry to drop, and none is made */
    if (answer_id && access(cfg->runtime_dir, F_OK) == 0 &&
        entry_path(cfg, identity, answer_id, path, sizeof(path)) == 0)
        unlink(path);
}

int shim_chain_apply(const struct shim_config *cfg, const char *identity, cJSON *up)
{
    const char *prev = shim_json_str(up, "previous_response_id"), *uid;
    char path[SHIM_PATH_MAX + 80], *text;
    cJSON *doc, *input, *outs, *it, *merged;
    int rc;

    if (!prev)
        return 0;
    if ((rc = entry_path(cfg, identity, prev, path, sizeof(path))) < 0)
        return rc == -ENAMETOOLONG ? 0 : -ENOLINK;
    text = malloc(ENTRY_MAX);
    if (!text)
        return 0;
    rc = shim_store_read(path, text, ENTRY_MAX, 0);
    doc = rc == 0 ? shim_json_parse(text, strlen(text)) : NULL;
    free(text);
    uid = shim_json_str(doc, "upstream_id");
    if (!uid) {
        cJSON_Delete(doc);
        return 0;
    }
    shim_json_set(up, "previous_response_id", cJSON_CreateString(uid));
    outs = cJSON_GetObjectItemCaseSensitive(doc, "outputs");
    if (cJSON_GetArraySize(outs) > 0) {
        /* the owed outputs come first: their calls end the stored response */
        input = cJSON_GetObjectItemCaseSensitive(up, "input");
        merged = cJSON_Duplicate(outs, 1);
        if (cJSON_IsString(input)) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", input->valuestring);
            cJSON_AddItemToArray(merged, m);
        } else {
            cJSON_ArrayForEach(it, input)
                cJSON_AddItemToArray(merged, cJSON_Duplicate(it, 1));
        }
        shim_json_set(up, "input", merged);
    }
    LOG_INFO("continuing answer %.64s from upstream response %.64s", prev, uid);
    cJSON_Delete(doc);
    return 1;
}
