/* local_files.c - the files of a local sandbox's /mnt/data, moved between
 * executions through the supervisor (worker.py: G and P frames): read in
 * chunks up to a cap, written through a hidden part file that becomes the
 * file only with its last chunk, so the code never sees half a file, and
 * removed (U frames: one regular file, never through a symlink). The
 * sandbox is started first if it is not up (a container's files may
 * arrive before any code). A supervisor that answers out of turn ends the
 * sandbox, as in local_exec.c. */
#include "sandbox/local/local_int.h"

#include "base/frame.h"
#include "base/log.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK (1u << 20)
#define FILE_WAIT_MS 30000

static int ensure_up(struct shim_local *l)
{
    if (l->pid <= 0 && shim_local_start(l) != 0)
        return -ECHILD;
    if (!l->up && shim_local_wait_up(l) != 0)
        return -ECHILD;
    return 0;
}

/* One F reply to request l->seq: status and size; the data stays in b
 * (at *data, *n bytes). */
static int recv_reply(struct shim_local *l, struct shim_buf *b, int64_t deadline, char *status,
                      unsigned long long *size, const char **data, size_t *n)
{
    const unsigned char *p;
    int rc = shim_local_recv_frame(l, b, deadline);

    if (rc < 0)
        return rc;
    p = (const unsigned char *)b->data;
    if (b->len < 14 || p[0] != 'F' || shim_frame_get32(p + 1) != l->seq) {
        shim_buf_free(b);
        return -EPROTO;
    }
    *status = (char)p[5];
    *size = (unsigned long long)shim_frame_get32(p + 6) << 32 | shim_frame_get32(p + 10);
    *data = (const char *)p + 14;
    *n = b->len - 14;
    return 0;
}

static int failed(struct shim_local *l, int rc)
{
    LOG_WARN("sandbox file transfer failed (%s): the sandbox is ended", strerror(-rc));
    shim_local_stop(l, NULL, 0);
    l->lost_all = 1;
    return rc;
}

int shim_local_file_get(struct shim_local *l, const char *name, size_t max, char **out,
                        size_t *len)
{
    struct shim_buf acc, fr;
    unsigned long long size = 0;
    int64_t deadline = shim_clock_ms() + FILE_WAIT_MS;
    size_t nl = strlen(name);
    int rc;

    *out = NULL;
    *len = 0;
    if ((rc = ensure_up(l)) < 0)
        return rc;
    shim_buf_init(&acc, max + 1);
    do {
        unsigned char head[17];
        const char *data;
        size_t n;
        char st;

        l->seq++;
        head[0] = 'G';
        shim_frame_put32(head + 1, l->seq);
        shim_frame_put32(head + 5, (uint32_t)((unsigned long long)acc.len >> 32));
        shim_frame_put32(head + 9, (uint32_t)acc.len);
        shim_frame_put32(head + 13, CHUNK);
        if ((rc = shim_frame_send(l->fd, head, sizeof(head), name, nl, deadline)) < 0 ||
            (rc = recv_reply(l, &fr, deadline, &st, &size, &data, &n)) < 0) {
            shim_buf_free(&acc);
            return failed(l, rc);
        }
        if (st != 'O' || size > max) {
            shim_buf_free(&fr);
            shim_buf_free(&acc);
            return st == 'N' ? -ENOENT : st == 'O' ? -EFBIG : -EIO;
        }
        rc = n ? shim_buf_add(&acc, data, n) : 0;
        shim_buf_free(&fr);
        if (rc < 0 || (!n && acc.len < size)) { /* shrank under us */
            shim_buf_free(&acc);
            return rc < 0 ? -EFBIG : -EIO;
        }
    } while (acc.len < size);
    if (!acc.data && !(acc.data = calloc(1, 1)))
        return -ENOMEM;
    *len = acc.len;
    *out = shim_buf_take(&acc, len);
    return *out ? 0 : -ENOMEM;
}

int shim_local_file_put(struct shim_local *l, const char *name, const void *data, size_t len)
{
    const char *p = data;
    size_t nl = strlen(name), off = 0;
    int64_t deadline = shim_clock_ms() + FILE_WAIT_MS + (int64_t)(len >> 20) * 100;
    int rc;

    if (!nl || nl > 200 || strchr(name, '/'))
        return -EINVAL;
    if ((rc = ensure_up(l)) < 0)
        return rc;
    l->used = 1; /* holds someone's file now: never anyone's spare */
    do {
        size_t n = len - off < CHUNK ? len - off : CHUNK;
        unsigned char *msg = malloc(8 + nl + n);
        unsigned long long size;
        struct shim_buf fr;
        const char *rd;
        size_t rn;
        char st;

        if (!msg)
            return -ENOMEM;
        msg[0] = 'P';
        shim_frame_put32(msg + 1, ++l->seq);
        msg[5] = (unsigned char)((off + n == len ? 1 : 0) | (off == 0 ? 2 : 0));
        msg[6] = (unsigned char)(nl >> 8);
        msg[7] = (unsigned char)nl;
        memcpy(msg + 8, name, nl);
        if (n)
            memcpy(msg + 8 + nl, p + off, n);
        rc = shim_frame_send(l->fd, msg, 8 + nl + n, NULL, 0, deadline);
        free(msg);
        if (rc < 0 || (rc = recv_reply(l, &fr, deadline, &st, &size, &rd, &rn)) < 0)
            return failed(l, rc);
        shim_buf_free(&fr);
        if (st != 'O')
            return st == 'N' ? -EINVAL : -ENOSPC;
        off += n;
    } while (off < len);
    return 0;
}

int shim_local_file_remove(struct shim_local *l, const char *name)
{
    int64_t deadline = shim_clock_ms() + FILE_WAIT_MS;
    size_t nl = strlen(name), rn;
    unsigned long long size;
    unsigned char head[5];
    struct shim_buf fr;
    const char *rd;
    char st;
    int rc;

    if (!nl || nl > 4096)
        return -EINVAL;
    if ((rc = ensure_up(l)) < 0)
        return rc;
    head[0] = 'U';
    shim_frame_put32(head + 1, ++l->seq);
    if ((rc = shim_frame_send(l->fd, head, sizeof(head), name, nl, deadline)) < 0 ||
        (rc = recv_reply(l, &fr, deadline, &st, &size, &rd, &rn)) < 0)
        return failed(l, rc);
    shim_buf_free(&fr);
    return st == 'O' ? 0 : st == 'N' ? -ENOENT : -EIO;
}
