/* cstore.h - the containers codeshim issued and the files in them, as the
 * Containers API shows them, kept in the private runtime directory
 * (store.h) so that they outlive the program that made them:
 *   <runtime>/containers/<hash of id>/meta          JSON: id, owner, name,
 *                                                   created_at, minutes,
 *                                                   memory_limit, session
 *   <runtime>/containers/<hash of id>/f-<file id>   the bytes
 *   <runtime>/containers/<hash of id>/m-<file id>   JSON: path, bytes,
 *                                                   created_at, source
 * last_active_at is meta's mtime; any use refreshes it. The owner is the
 * identity hash (identity.h): a container another identity owns is not
 * found, exactly as one that does not exist, and one past its expiry
 * (minutes after last_active_at) is removed when it is next looked at.
 * Files are written whole and atomically: nothing partial is ever seen.
 * Sizes: at most cfg->file_max bytes a file, cfg->disk_limit bytes a
 * container (its files must fit its sandbox's /mnt/data) and
 * cfg->files_disk bytes an identity; SHIM_CSTORE_MAX_FILES files a
 * container. */
#ifndef SHIM_CSTORE_H
#define SHIM_CSTORE_H

#include "api/capi.h"

#include <stddef.h>

struct shim_config;

#define SHIM_CSTORE_MAX_FILES 1000
#define SHIM_CSTORE_MAX_CONTAINERS 1000 /* per identity */

/* Records container c (c->id, name, minutes, memory_limit; created_at and
 * last_active_at are set) as identity's. -EEXIST if the id is taken,
 * -EDQUOT past SHIM_CSTORE_MAX_CONTAINERS. */
int shim_cstore_create(const struct shim_config *cfg, const char *identity,
                       struct shim_container *c);
/* 0 with *out (if not NULL) and last_active_at refreshed (touch != 0), or
 * -ENOENT: absent, another identity's, or expired (then removed). */
int shim_cstore_find(const struct shim_config *cfg, const char *identity, const char *cid,
                     struct shim_container *out, int touch);
/* Whether codeshim issued cid, whoever owns it (a foreign id is not). */
int shim_cstore_issued(const struct shim_config *cfg, const char *cid);
/* identity's live containers, oldest first (caller frees *out). */
int shim_cstore_list(const struct shim_config *cfg, const char *identity,
                     struct shim_container **out, size_t *n);
/* Ends container cid: its files go, its id stays known (a tombstone).
 * *out (if not NULL): its record as it was. */
int shim_cstore_delete(const struct shim_config *cfg, const char *identity, const char *cid,
                       struct shim_container *out);
/* 1 when cid is identity's container and was deleted or has expired (a
 * sandbox still running for it must not be used again); else 0. */
int shim_cstore_gone(const struct shim_config *cfg, const char *identity, const char *cid);

/* Stores a file at path (/mnt/data/NAME); a file already at that path is
 * replaced (the new one gets a new id). -EFBIG past file_max, -EDQUOT past
 * the identity's budget or the file count, -ENOSPC past the user's budget
 * (every identity's files: CODESHIM_USER_FILES_DISK, counted and written
 * under the user's lock) or on a full disk (shim_store_why() says which),
 * -ENOENT without the container. */
int shim_cstore_put(const struct shim_config *cfg, const char *identity, const char *cid,
                    const char *path, const void *data, size_t len, const char *source,
                    struct shim_cfile *out);
/* The container's files, oldest first (caller frees *out). */
int shim_cstore_files(const struct shim_config *cfg, const char *identity, const char *cid,
                      struct shim_cfile **out, size_t *n);
/* One file's record and, when data is not NULL, its bytes (caller frees). */
int shim_cstore_file(const struct shim_config *cfg, const char *identity, const char *cid,
                     const char *fid, struct shim_cfile *meta, char **data, size_t *len);
/* The paths uploads replaced since last asked, one a line ("" if none);
 * cleared by the call. 0 or -errno. */
int shim_cstore_take_notice(const struct shim_config *cfg, const char *identity, const char *cid,
                            char *out, size_t n);
int shim_cstore_remove(const struct shim_config *cfg, const char *identity, const char *cid,
                       const char *fid);
/* A sandbox serves cid now: 1 when one did before, 0 for the first (now
 * marked), or -errno. A new sandbox of a container no sandbox ever served
 * has no earlier state to have lost. */
int shim_cstore_served(const struct shim_config *cfg, const char *identity, const char *cid);

#endif
