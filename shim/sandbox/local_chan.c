/* local_chan.c - the host's end of the control socket to the local
 * sandbox's supervisor: frames of a 4-byte big-endian length and a
 * payload (the protocol is described at the top of worker.py), sent and
 * received with an absolute deadline on a non-blocking socket, never
 * raising SIGPIPE; the request frame, and the reply frame split into its
 * parts, each checked against what it may hold. */
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

static size_t frame_max(const struct local *l)
{
    return (17u << 20) + 2 * (l->p.output_cap + OUT_SLACK) + 4096;
}

/* Reads one frame into b: 0, -EPROTO for an oversized frame, or a
 * recv_all error. */
int shim_local_recv_frame(struct local *l, struct shim_buf *b, int64_t deadline)
{
    unsigned char hdr[4];
    char chunk[65536];
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

/* Splits an 'R' frame answering request l->seq; -EPROTO if malformed. */
int shim_local_split_reply(const struct local *l, const struct shim_buf *b,
                           struct shim_local_reply *r)
{
    const unsigned char *p = (const unsigned char *)b->data;
    size_t n = b->len, off = 11, ml, wl;

    memset(r, 0, sizeof(*r));
    if (n < 11 || p[0] != 'R' || get32(p + 1) != l->seq ||
        !strchr("DTXI", p[5]) || !p[5] || p[6] > 1)
        return -EPROTO;
    r->kind = (char)p[5];
    r->restarted = p[6];
    ml = get32(p + 7);
    if (ml > n - off)
        return -EPROTO;
    r->meta = cJSON_ParseWithLength((const char *)p + off, ml);
    off += ml;
    if (!cJSON_IsObject(r->meta) || n - off < 4)
        goto bad;
    wl = get32(p + off);
    off += 4;
    if (wl > n - off)
        goto bad;
    if (r->kind == 'D') {
        r->worker = cJSON_ParseWithLength((const char *)p + off, wl);
        if (!cJSON_IsObject(r->worker))
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
