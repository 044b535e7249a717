/* files.h - a request's files: the container its sandbox is, in the
 * container store (cstore.h), so the Containers API lists it and serves
 * what the code wrote; the files of /mnt/data copied there when the answer
 * is made; and container_file_citation annotations where the model's
 * final text links them (sandbox:/mnt/data/NAME, cite.h).
 *
 * A request's own (auto) container is recorded with CODESHIM_CONTAINER_
 * MINUTES of idle expiry (and, for a session's, the session it is for);
 * an explicit one (POST /v1/containers) already is. A container named in
 * tools[].container is bound: a sandbox started for it afresh gets the
 * stored files back in /mnt/data before any code runs. */
#ifndef SHIM_FILES_H
#define SHIM_FILES_H

#include "api/capi.h"
#include "session/session.h"

#include <cjson/cJSON.h>
#include <stddef.h>

struct shim_config;
struct shim_upstream;

/* A file the request brings for the code: input_file parts with
 * file_data (Responses; Chat "file" parts), and files of the upstream's
 * Files API (input_file.file_id, tools[].container.file_ids), fetched with
 * the program's own credentials. */
struct shim_file_in {
    char name[256]; /* its safe name in /mnt/data */
    char *data;
    size_t len;
};

struct shim_files_in {
    struct shim_file_in *v;
    size_t n;
};

#define SHIM_FILES_IN_MAX 32

struct shim_files {
    char cid[64];
    struct shim_cfile *v; /* the container's files after the last sync */
    size_t n;
    int synced;
    char note[400]; /* for the model, once: the sandbox is new, files back */
};

/* The container a request names (tools[].container = "cntr_..." of
 * identity's, made with POST /v1/containers, or, unless the request is in
 * a session (in_session), a request's or session's own), or NULL. Its
 * running sandbox is used, else one started for it, with its files back
 * in /mnt/data. (A session's request naming another container is the
 * session's still, told when that container is not its own.) Borrowed. */
const char *shim_files_bound(const struct shim_config *cfg, const char *identity,
                             const cJSON *req, int in_session);
/* Collects and fetches the request's files into *in. 0, or -EINVAL with
 * why (whysz bytes) and *param for the program's 400: a bad file_data,
 * an unsafe name, too many or too large files, or a file id the
 * upstream's Files API does not give (or it has none). */
int shim_files_inputs(struct shim_files_in *in, const struct shim_config *cfg, const cJSON *req,
                      struct shim_upstream *u, char *why, size_t whysz, const char **param);
/* One file of the upstream's Files API (GET /files/{id}, then /content)
 * through u: its safe name and bytes (caller frees). 0, -EINVAL with why,
 * or -ENOMEM. */
int shim_files_fetch(struct shim_upstream *u, const struct shim_config *cfg, const char *id,
                     char name[256], char **data, size_t *len, char *why, size_t n);
/* Tells the model where they are: the code tool's description in the
 * upstream request up gets "Files in /mnt/data: ...". */
void shim_files_describe(cJSON *up, const char *tool_name, const struct shim_files_in *in);
/* Puts them into the sandbox and the container store (source "user"). */
void shim_files_place(struct shim_files *f, const struct shim_config *cfg, const char *identity,
                      struct shim_session *box, const struct shim_files_in *in);
void shim_files_inputs_free(struct shim_files_in *in);
/* After the sandbox opened: records or refreshes its container; puts the
 * stored files into a fresh sandbox of an explicit container. */
void shim_files_opened(struct shim_files *f, const struct shim_config *cfg,
                       const char *identity, struct shim_session *box, int bound);
/* Copies names (result.h's listing of /mnt/data) into the store: files
 * new or of another size than the stored ones of that path. */
void shim_files_sync(struct shim_files *f, const struct shim_config *cfg, const char *identity,
                     struct shim_session *box, char *const *names, size_t n);
/* The note for the model about a restarted container, once (or NULL). */
const char *shim_files_take_note(struct shim_files *f);
/* The annotations of one text (a new array; NULL when out of memory). */
cJSON *shim_files_annotations(const struct shim_files *f, const char *text);
/* Adds the annotations to every output_text of a Responses answer's
 * message items (their "annotations" arrays). */
void shim_files_annotate(const struct shim_files *f, cJSON *response);
void shim_files_free(struct shim_files *f);

#endif
