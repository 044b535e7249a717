/* fuzz_sandbox.c - libFuzzer harness: the frames the local sandbox's
 * supervisor sends back (shim/sandbox/local/local_chan.c). Code inside the
 * sandbox may take the supervisor over, so its frames are untrusted.
 * shim_local_recv_frame reads the input as the control socket's byte
 * stream (over a socketpair whose writer has hung up: no sandbox is
 * started, nothing waits), and shim_local_split_reply splits what it
 * received, and the input itself, as an 'R' reply frame. A split reply
 * must hold a known kind, a restarted flag of 0 or 1, a meta object, a
 * worker object exactly for kind D, and output bytes that are the frame's
 * tail. */
#include "fuzz_common.h"

#include "sandbox/local/local_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>


FUZZ_PLAIN_INITIALIZE

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A sandbox that was never started: only what local_chan.c reads. */
static void local_init(struct shim_local *l, const struct fuzz_input *in)
{
    memset(l, 0, sizeof(*l));
    l->p.output_cap = fuzz_pick(in, 90, 2) ? 20000 : 16;
    l->p.timeout_s = 1;
    l->pid = -1;
    l->fd = l->errfd = -1;
}

static void split(struct shim_local *l, const struct fuzz_input *in, const struct shim_buf *b)
{
    struct shim_local_reply r;
    const uint8_t *p = (const uint8_t *)b->data;

    /* mostly the sequence number the frame answers, to get past it */
    l->seq = b->len >= 5 && fuzz_pick(in, 91, 8) ? get32(p + 1) : 1;
    if (shim_local_split_reply(l, b, &r) < 0) {
        if (r.meta || r.worker)
            fuzz_invalid("split-reply", "a failed split left parsed parts");
        return;
    }
    if (!r.kind || !strchr("DTXI", r.kind) || (r.restarted != 0 && r.restarted != 1))
        fuzz_invalid("split-reply", "kind %d, restarted %d", r.kind, r.restarted);
    if (!cJSON_IsObject(r.meta) || (r.kind == 'D') != cJSON_IsObject(r.worker) ||
        (r.kind != 'D' && r.worker))
        fuzz_invalid("split-reply", "meta or worker of the wrong type");
    if (r.out < b->data || r.out > b->data + b->len || r.out + r.out_len != b->data + b->len)
        fuzz_invalid("split-reply", "output is not the frame's tail");
    fuzz_check_json("split-reply-meta", r.meta);
    fuzz_check_json("split-reply-worker", r.worker);
    shim_local_reply_free(&r);
}

/* The input as the byte stream of the control socket. */
static void recv_frames(struct shim_local *l, const struct fuzz_input *in)
{
    struct shim_buf b;
    int sv[2], rc, k;
    size_t off = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    while (off < in->n) {
        ssize_t w = send(sv[1], in->p + off, in->n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the socket buffer is full: the rest never arrives */
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    l->fd = sv[0];
    for (k = 0; k < 4; k++) { /* a few frames back to back */
        memset(&b, 0, sizeof(b));
        rc = shim_local_recv_frame(l, &b, shim_clock_ms() + 2000);
        if (rc != 0) {
            if (b.data)
                fuzz_invalid("recv-frame", "a failed read kept its buffer");
            break;
        }
        if (!b.len)
            fuzz_invalid("recv-frame", "an empty frame accepted");
        split(l, in, &b);
        shim_buf_free(&b);
    }
    l->fd = -1;
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    struct shim_local l;
    struct shim_buf b;

    fuzz_input_begin(&in, data, size, 0);
    fuzz_target = "sandbox-frames";
    local_init(&l, &in);
    b.data = fuzz_exact(data, size);
    b.len = b.alloc = b.cap = size;
    split(&l, &in, &b);
    free(b.data);
    recv_frames(&l, &in);
    fuzz_input_end(&in);
    return 0;
}
