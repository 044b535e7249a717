/* local_chan.c - the host's end of the control socket to the local
 * sandbox's supervisor, in frame.h's frames (the protocol is described at
 * the top of worker.py): the request frame, and the reply frame split into
 * its parts, each checked against what it may hold before any of it becomes a
 * cJSON tree: the model's code runs next to the worker's end of the
 * channel and can forge what the worker says, so a reply's size, and the
 * number and nesting of the JSON values in it, are bounded by what
 * worker.py can legitimately send (a long JSON array of a few MB would
 * otherwise cost the host program hundreds of MB of cJSON items). */
#include "sandbox/local/local_int.h"

#include "base/frame.h"
#include "base/json.h"

#include <cjson/cJSON.h>
#include <string.h>

/* What the parts of a reply may hold; worker.py is where the numbers come
 * from. meta: at most MAX_FILES (1000) names, MAX_NAME_BYTES (512 KB) of
 * them in all, "changed" and a short "exit". worker JSON: "status" and at
 * most MAX_IMAGES (16) images, MAX_IMAGE_BYTES (12 MB) of base64 in all.
 * output: the supervisor's head and tail of keep (output_cap + OUT_SLACK)
 * bytes each around its truncation note. */
#define META_MAX ((512u << 10) + 8192)
#define META_VALUES (1000 + 16)
#define META_DEPTH 2 /* {"files": [...]} */
#define WORKER_MAX ((12u << 20) + 4096)
#define WORKER_VALUES 64
#define WORKER_DEPTH 3 /* {"images": [{...}]} */
#define NOTE_MAX 64
#define REPLY_HEAD 11 /* 'R', seq, kind, restarted, meta length */

static size_t out_max(const struct shim_local *l)
{
    return 2 * (l->p.output_cap + OUT_SLACK) + NOTE_MAX;
}

static size_t frame_max(const struct shim_local *l)
{
    return REPLY_HEAD + META_MAX + 4 + WORKER_MAX + out_max(l);
}


/* The object in p[0..n), or NULL when it is not JSON or does not fit. */
static cJSON *parse_part(const unsigned char *p, size_t n, size_t max,
                         size_t max_values, int max_depth)
{
    cJSON *j;

    if (n > max)
        return NULL;
    j = shim_json_parse_within((const char *)p, n, max_values, max_depth);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Reads one frame into b (freed again on error): 0, -EPROTO for an
 * oversized frame, or another frame.h error. */
int shim_local_recv_frame(struct shim_local *l, struct shim_buf *b, int64_t deadline)
{
    int rc = shim_frame_recv(l->fd, b, frame_max(l), deadline);

    if (rc)
        shim_buf_free(b);
    return rc;
}

int shim_local_send_request(struct shim_local *l, const char *code, size_t len,
                            int64_t deadline)
{
    unsigned char head[5];

    l->seq++;
    head[0] = 'E';
    shim_frame_put32(head + 1, l->seq);
    return shim_frame_send(l->fd, head, sizeof(head), code, len, deadline);
}

int shim_local_send_interrupt(struct shim_local *l, int64_t deadline)
{
    unsigned char head[5];

    head[0] = 'K';
    shim_frame_put32(head + 1, l->seq);
    return shim_frame_send(l->fd, head, sizeof(head), NULL, 0, deadline);
}

static int known_kind(unsigned char k)
{
    return k == SHIM_REPLY_DONE || k == SHIM_REPLY_TIMEOUT || k == SHIM_REPLY_DIED ||
           k == SHIM_REPLY_INVALID;
}

/* Splits an 'R' frame answering request l->seq; -EPROTO if malformed or
 * if a part holds more than it may (see META_MAX and the others). */
int shim_local_split_reply(const struct shim_local *l, const struct shim_buf *b,
                           struct shim_local_reply *r)
{
    const unsigned char *p = (const unsigned char *)b->data;
    size_t n = b->len, off = REPLY_HEAD, ml, wl;

    memset(r, 0, sizeof(*r));
    if (n < REPLY_HEAD || p[0] != 'R' || shim_frame_get32(p + 1) != l->seq ||
        !known_kind(p[5]) || p[6] > 1)
        return -EPROTO;
    r->kind = (enum shim_local_reply_kind)p[5];
    r->restarted = p[6];
    ml = shim_frame_get32(p + 7);
    if (ml > n - off || n - off - ml < 4)
        return -EPROTO;
    wl = shim_frame_get32(p + off + ml);
    if (wl > n - off - ml - 4 || n - off - ml - 4 - wl > out_max(l))
        return -EPROTO;
    if (r->kind != SHIM_REPLY_DONE && wl) /* only a finished cell has the worker's say */
        return -EPROTO;
    r->meta = parse_part(p + off, ml, META_MAX, META_VALUES, META_DEPTH);
    if (!r->meta)
        goto bad;
    off += ml + 4;
    if (r->kind == SHIM_REPLY_DONE) {
        r->worker = parse_part(p + off, wl, WORKER_MAX, WORKER_VALUES, WORKER_DEPTH);
        if (!r->worker)
            goto bad;
    }
    off += wl;
    r->out = (const char *)p + off;
    r->out_len = n - off;
    return 0;
bad:
    shim_local_reply_free(r);
    return -EPROTO;
}

void shim_local_reply_free(struct shim_local_reply *r)
{
    cJSON_Delete(r->meta);
    cJSON_Delete(r->worker);
    memset(r, 0, sizeof(*r));
}
