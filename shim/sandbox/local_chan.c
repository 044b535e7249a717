/* local_chan.c - the host's end of the control socket to the local
 * sandbox's supervisor: frames of a 4-byte big-endian length and a
 * payload (the protocol is described at the top of worker.py), sent and
 * received with an absolute deadline on a non-blocking socket, never
 * raising SIGPIPE; the request frame, and the reply frame split into its
 * parts, each checked against what it may hold before any of it becomes a
 * cJSON tree: the model's code runs next to the worker's end of the
 * channel and can forge what the worker says, so a reply's size, and the
 * number and nesting of the JSON values in it, are bounded by what
 * worker.py can legitimately send (a long JSON array of a few MB would
 * otherwise cost the host program hundreds of MB of cJSON items). */
#include "local_int.h"

#include <cjson/cJSON.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

/* Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - shim_local_now_ms();
        int n;

        if (left <= 0)
            return -ETIMEDOUT;
        n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 0; /* readable, writable, HUP or ERR: the I/O call says */
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int send_all(int fd, const void *buf, size_t n, int64_t deadline)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc)
                return rc;
        } else if (w < 0 && errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* 0, -ECONNRESET at end of stream, -ETIMEDOUT or -errno. */
static int recv_all(int fd, void *buf, size_t n, int64_t deadline)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0) {
            return -ECONNRESET;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc)
                return rc;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

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

static size_t out_max(const struct local *l)
{
    return 2 * (l->p.output_cap + OUT_SLACK) + NOTE_MAX;
}

static size_t frame_max(const struct local *l)
{
    return REPLY_HEAD + META_MAX + 4 + WORKER_MAX + out_max(l);
}

/* Whether the JSON text p[0..n) makes at most max_values values nested at
 * most max_depth deep, counted on the text in one pass: outside strings,
 * one value, plus at most one more per ',' '[' and '{'. (Whether it is
 * JSON at all is cJSON's to say.) */
static int json_fits(const char *p, size_t n, size_t max_values, int max_depth)
{
    size_t i, values = 1;
    int depth = 0, in_str = 0;

    for (i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return 0;
            values++;
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',') {
            values++;
        }
        if (values > max_values)
            return 0;
    }
    return 1;
}

/* The object in p[0..n), or NULL when it is not JSON or does not fit. */
static cJSON *parse_part(const unsigned char *p, size_t n, size_t max,
                         size_t max_values, int max_depth)
{
    cJSON *j;

    if (n > max || !json_fits((const char *)p, n, max_values, max_depth))
        return NULL;
    j = cJSON_ParseWithLength((const char *)p, n);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Reads one frame into b: 0, -EPROTO for an oversized frame, or a
 * recv_all error. */
int shim_local_recv_frame(struct local *l, struct shim_buf *b, int64_t deadline)
{
    unsigned char hdr[4];
    char chunk[16384]; /* the program's thread stack may be small */
    size_t n;
    int rc = recv_all(l->fd, hdr, sizeof(hdr), deadline);

    if (rc)
        return rc;
    n = get32(hdr);
    if (n > frame_max(l) || n == 0)
        return -EPROTO;
    shim_buf_init(b, n);
    while (n > 0) {
        size_t k = n < sizeof(chunk) ? n : sizeof(chunk);
        rc = recv_all(l->fd, chunk, k, deadline);
        if (rc == 0)
            rc = shim_buf_add(b, chunk, k);
        if (rc) {
            shim_buf_free(b);
            return rc;
        }
        n -= k;
    }
    return 0;
}

int shim_local_send_request(struct local *l, const char *code, size_t len,
                        int64_t deadline)
{
    unsigned char hdr[9];
    int rc;

    l->seq++;
    put32(hdr, (uint32_t)len + 5);
    hdr[4] = 'E';
    put32(hdr + 5, l->seq);
    rc = send_all(l->fd, hdr, sizeof(hdr), deadline);
    if (rc == 0 && len)
        rc = send_all(l->fd, code, len, deadline);
    return rc;
}

/* Splits an 'R' frame answering request l->seq; -EPROTO if malformed or
 * if a part holds more than it may (see META_MAX and the others). */
int shim_local_split_reply(const struct local *l, const struct shim_buf *b,
                           struct shim_local_reply *r)
{
    const unsigned char *p = (const unsigned char *)b->data;
    size_t n = b->len, off = REPLY_HEAD, ml, wl;

    memset(r, 0, sizeof(*r));
    if (n < REPLY_HEAD || p[0] != 'R' || get32(p + 1) != l->seq ||
        !strchr("DTXI", p[5]) || !p[5] || p[6] > 1)
        return -EPROTO;
    r->kind = (char)p[5];
    r->restarted = p[6];
    ml = get32(p + 7);
    if (ml > n - off || n - off - ml < 4)
        return -EPROTO;
    wl = get32(p + off + ml);
    if (wl > n - off - ml - 4 || n - off - ml - 4 - wl > out_max(l))
        return -EPROTO;
    if (r->kind != 'D' && wl) /* only a finished cell has the worker's say */
        return -EPROTO;
    r->meta = parse_part(p + off, ml, META_MAX, META_VALUES, META_DEPTH);
    if (!r->meta)
        goto bad;
    off += ml + 4;
    if (r->kind == 'D') {
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
