/* proto.c - see proto.h. Messages as frame.h frames, the shape check
 * done before parsing, and exec results to JSON (cut to fit a frame) and back
 * (checked for a result's shape). */
#include "session/proto.h"

#include "base/clock.h"
#include "base/frame.h"
#include "base/json.h"
#include "base/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>


int shim_proto_socket(const char *dir, int listening)
{
    struct sockaddr_un a;
    int fd, dfd = -1, rc;

    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    if (strlen(dir) + sizeof("/sock") <= sizeof(a.sun_path)) {
        snprintf(a.sun_path, sizeof(a.sun_path), "%s/sock", dir);
    } else {
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -errno;
        snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/sock", dfd);
    }
    if (listening)
        unlink(a.sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        rc = -errno;
    else if (listening ? bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0
                       : connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        rc = -errno;
    else
        rc = fd;
    if (rc < 0 && fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int shim_proto_send(int fd, const cJSON *msg, int timeout_ms)
{
    char *s = cJSON_PrintUnformatted(msg);
    size_t n;
    int rc;

    if (!s)
        return -ENOMEM;
    n = strlen(s);
    rc = n > SHIM_PROTO_MAX ? -E2BIG
                            : shim_frame_send(fd, s, n, NULL, 0, shim_clock_ms() + timeout_ms);
    free(s);
    return rc;
}

int shim_proto_recv(int fd, cJSON **out, int timeout_ms)
{
    struct shim_buf b;
    int rc = shim_frame_recv(fd, &b, SHIM_PROTO_MAX, shim_clock_ms() + timeout_ms);

    *out = NULL;
    if (!rc) { /* measured before it costs a tree */
        *out = shim_json_parse_within(b.data, b.len, SHIM_PROTO_MAX_NODES, SHIM_PROTO_MAX_DEPTH);
        if (!cJSON_IsObject(*out)) {
            cJSON_Delete(*out);
            *out = NULL;
            rc = -EPROTO;
        }
    }
    shim_buf_free(&b);
    return rc;
}

int shim_proto_check_shape(const char *p, size_t n)
{
    return shim_json_fits(p, n, SHIM_PROTO_MAX_NODES, SHIM_PROTO_MAX_DEPTH) ? 0 : -EPROTO;
}

/* ---------------- results to JSON, cut to fit ---------------- */

#define FIXED_FIELDS 192  /* {"status":..,"logs":,"seconds":..,"images":[],"files":[],"files_changed":true} */
#define IMAGE_FIELDS 32   /* {"mime":,"base64":}, */
#define NOTE_MAX 320      /* the note, as JSON */
#define TAIL_MAX (16u << 10)
#define NOTE "\n[... codeshim: this result was too large for the session channel " \
             "(%zu bytes at most): %zu bytes of output, %zu of %zu images and %zu of %zu " \
             "file names were left out ...]\n"

/* What one byte of a string takes in JSON (cJSON's escaping). */
static size_t esc_len(unsigned char c)
{
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
        return 2;
    return c < 32 ? 6 : 1;
}

static size_t json_len(const char *s)
{
    size_t n = 2;

    for (; *s; s++)
        n += esc_len((unsigned char)*s);
    return n;
}


/* Length of the longest prefix of s (ending before a character) whose
 * JSON takes at most budget bytes. */
static size_t head_fit(const char *s, size_t len, size_t budget)
{
    size_t i = 0, used = 0, ok = 0;

    while (i < len && used + esc_len((unsigned char)s[i]) <= budget) {
        used += esc_len((unsigned char)s[i++]);
        if (i == len || !shim_text_is_cont((unsigned char)s[i]))
            ok = i;
    }
    return ok;
}

/* Start of the longest suffix of s (starting on a character) whose JSON
 * takes at most budget bytes. */
static size_t tail_fit(const char *s, size_t len, size_t budget)
{
    size_t i = len, used = 0, ok = len;

    while (i > 0 && used + esc_len((unsigned char)s[i - 1]) <= budget) {
        used += esc_len((unsigned char)s[--i]);
        if (!shim_text_is_cont((unsigned char)s[i]))
            ok = i;
    }
    return ok;
}

static const char *mime_of(const struct shim_exec_image *im)
{
    return im->mime ? im->mime : "image/png";
}

static size_t image_len(const struct shim_exec_image *im)
{
    return json_len(im->base64 ? im->base64 : "") + json_len(mime_of(im)) + IMAGE_FIELDS;
}

struct cut {
    size_t nimages, nfiles; /* how many are kept */
    size_t head, tail;      /* logs kept: [0, head) and [tail, len) */
};

/* Decides what fits in budget bytes: the file names in at most half of
 * it, then the images from the first, then the logs' head and tail. */
static int plan_cut(const struct shim_exec_result *r, const char *logs, size_t budget,
                    struct cut *c)
{
    size_t len = strlen(logs), llen = json_len(logs), ilen = 0, flen = 0, i, avail, t;

    c->nimages = r->nimages;
    c->nfiles = r->nfiles;
    c->head = c->tail = len;
    for (i = 0; i < r->nimages; i++)
        ilen += image_len(&r->images[i]);
    for (i = 0; i < r->nfiles; i++)
        flen += json_len(r->files[i] ? r->files[i] : "") + 1;
    if (llen + ilen + flen <= budget)
        return 0;
    budget = budget > NOTE_MAX ? budget - NOTE_MAX : 0;
    while (c->nfiles && flen > budget / 2)
        flen -= json_len(r->files[--c->nfiles] ? r->files[c->nfiles] : "") + 1;
    while (c->nimages && llen + ilen + flen > budget)
        ilen -= image_len(&r->images[--c->nimages]);
    if (llen + ilen + flen > budget) {
        avail = budget - ilen - flen; /* >= budget / 2: no image is left */
        avail = avail > 2 ? avail - 2 : 0;
        t = avail / 4 < TAIL_MAX ? avail / 4 : TAIL_MAX;
        c->head = head_fit(logs, len, avail - t);
        c->tail = c->head + tail_fit(logs + c->head, len - c->head, t);
    }
    return 1;
}

/* The logs with the note where they were cut (or at the end). */
static char *cut_logs(const struct shim_exec_result *r, const char *logs, size_t max_bytes,
                      const struct cut *c)
{
    size_t len = strlen(logs), tl = len - c->tail, nl;
    char note[NOTE_MAX], *out;

    nl = (size_t)snprintf(note, sizeof(note), NOTE, max_bytes, c->tail - c->head,
                          r->nimages - c->nimages, r->nimages, r->nfiles - c->nfiles, r->nfiles);
    if (nl >= sizeof(note))
        nl = sizeof(note) - 1;
    out = malloc(c->head + nl + tl + 1);
    if (!out)
        return NULL;
    memcpy(out, logs, c->head);
    memcpy(out + c->head, note, nl);
    memcpy(out + c->head + nl, logs + c->tail, tl);
    out[c->head + nl + tl] = '\0';
    return out;
}

cJSON *shim_proto_result_capped(const struct shim_exec_result *r, size_t max_bytes)
{
    const char *logs = r->logs ? r->logs : "";
    cJSON *j, *imgs, *files;
    char *text = NULL;
    struct cut c;
    size_t i;

    if (plan_cut(r, logs, max_bytes > FIXED_FIELDS ? max_bytes - FIXED_FIELDS : 0, &c) &&
        !(text = cut_logs(r, logs, max_bytes, &c)))
        return NULL;
    j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "status", r->status);
    cJSON_AddStringToObject(j, "logs", text ? text : logs);
    free(text);
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    imgs = cJSON_AddArrayToObject(j, "images");
    for (i = 0; i < c.nimages; i++) {
        cJSON *im = cJSON_CreateObject();
        cJSON_AddStringToObject(im, "mime", mime_of(&r->images[i]));
        cJSON_AddStringToObject(im, "base64", r->images[i].base64 ? r->images[i].base64 : "");
        cJSON_AddItemToArray(imgs, im);
    }
    files = cJSON_AddArrayToObject(j, "files");
    for (i = 0; i < c.nfiles; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(r->files[i] ? r->files[i] : ""));
    if (r->files_changed) /* the library copies the files then (files.h) */
        cJSON_AddTrueToObject(j, "files_changed");
    return j;
}

cJSON *shim_proto_result_to_json(const struct shim_exec_result *r)
{
    return shim_proto_result_capped(r, SHIM_PROTO_MAX - SHIM_PROTO_ENVELOPE);
}

/* ---------------- results from JSON, checked ---------------- */

/* NULL, or an array of at most max items. */
static int list_ok(const cJSON *a, int max)
{
    return !a || (cJSON_IsArray(a) && cJSON_GetArraySize(a) <= max);
}

static int shape_ok(const cJSON *j)
{
    const cJSON *imgs = cJSON_GetObjectItemCaseSensitive(j, "images");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(j, "seconds");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status"), *it;
    long long s = shim_json_int(j, "status");

    if (!shim_json_str(j, "logs") || !cJSON_IsNumber(st) || s < SHIM_EXEC_OK ||
        s > SHIM_EXEC_FAILED || (secs && !cJSON_IsNumber(secs)) ||
        !list_ok(imgs, SHIM_PROTO_MAX_IMAGES) || !list_ok(files, SHIM_PROTO_MAX_FILES))
        return 0;
    cJSON_ArrayForEach(it, imgs)
    {
        const char *b = shim_json_str(it, "base64"), *m = shim_json_str(it, "mime");
        if (!b || !shim_text_is_base64(b) || (cJSON_GetObjectItemCaseSensitive(it, "mime") &&
                                    (!m || strcmp(m, "image/png"))))
            return 0;
    }
    cJSON_ArrayForEach(it, files)
    {
        if (!cJSON_IsString(it))
            return 0;
    }
    return 1;
}

int shim_proto_result_from_json(const cJSON *j, struct shim_exec_result *r)
{
    const cJSON *it, *imgs = cJSON_GetObjectItemCaseSensitive(j, "images");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(j, "seconds");
    const char *logs = shim_json_str(j, "logs");
    size_t nf = (size_t)cJSON_GetArraySize(files);
    int oom = 0;

    memset(r, 0, sizeof(*r));
    if (!shape_ok(j))
        return -EPROTO;
    r->status = (enum shim_exec_status)shim_json_int(j, "status");
    r->files_changed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "files_changed"));
    r->logs = strdup(logs);
    r->logs_len = strlen(logs);
    r->seconds = cJSON_IsNumber(secs) ? secs->valuedouble : 0;
    cJSON_ArrayForEach(it, imgs)
    {
        if (!oom && shim_exec_image_add(&r->images, &r->nimages, "image/png",
                                        shim_json_str(it, "base64")) < 0)
            oom = 1;
    }
    if (nf && !(r->files = calloc(nf, sizeof(*r->files))))
        oom = 1;
    if (!r->files)
        files = NULL;
    cJSON_ArrayForEach(it, files)
    {
        oom |= !(r->files[r->nfiles++] = strdup(it->valuestring));
    }
    if (oom || !r->logs) {
        shim_exec_result_free(r);
        return -ENOMEM;
    }
    return 0;
}
