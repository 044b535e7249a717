/* frame.h - length-prefixed frames on a stream socket: a 4-byte
 * big-endian length, then the payload. The one framing both channels use,
 * the session channel (proto.c, library <-> codeshim-sessiond) and the
 * local sandbox's control socket (sandbox/local_chan.c, host <->
 * supervisor). Every read and write has an absolute deadline on the
 * monotonic clock (clock.h), works on blocking and non-blocking sockets,
 * and never raises SIGPIPE, so a stuck or vanished peer cannot hang or
 * kill the host program.
 *
 * Errors, the same everywhere: -ETIMEDOUT (the deadline passed),
 * -ECONNRESET (the peer closed or reset the connection while we read),
 * -EPIPE (it is gone while we write), -EPROTO (a frame length of 0 or over
 * the reader's maximum), -ENOMEM, or another -errno. */
#ifndef SHIM_FRAME_H
#define SHIM_FRAME_H

#include "base/buf.h"

#include <stddef.h>
#include <stdint.h>

/* Exactly n bytes out, or in. 0 or an error above. */
int shim_frame_write_all(int fd, const void *p, size_t n, int64_t deadline);
int shim_frame_read_all(int fd, void *p, size_t n, int64_t deadline);
/* One frame whose payload is head[0..hn) then body[0..bn) (either may be
 * empty). -E2BIG when the payload does not fit a 32-bit length. */
int shim_frame_send(int fd, const void *head, size_t hn, const void *body, size_t bn,
                    int64_t deadline);
/* One frame of at most max payload bytes into b (initialised here, capped
 * at the frame's length; the caller frees it, also on error). The buffer
 * grows as bytes arrive, so a peer that announces a large frame costs the
 * host nothing until it sends it. */
int shim_frame_recv(int fd, struct shim_buf *b, size_t max, int64_t deadline);

/* Waits for fd to have bytes to read (or to be closed) until deadline,
 * asking stop(ctx) every tick_ms meanwhile: 0 when fd is readable or the
 * deadline passed (the read that follows says which), -ECANCELED once
 * stop answers nonzero. stop NULL: returns 0 at once. */
int shim_frame_wait(int fd, int64_t deadline, int tick_ms, int (*stop)(void *), void *ctx);
/* While set on a thread, every wait of this file to read (a frame, a
 * byte, shim_frame_wait's ticks) goes through fn(fd, ms) instead of poll
 * (> 0: readable, 0: ms passed): the multi engine (curl/multi.c) yields
 * there, so a sandbox is waited on through its descriptor inside the
 * program's own waits. NULL: poll. */
void shim_frame_set_waiter(int (*fn)(int fd, int ms));
/* One such tick: fd readable (> 0) or ms over (0), through the thread's
 * waiter when one is set, else poll; fd -1 waits for nothing (a sleep
 * that a transfer's loop spends yielded). */
int shim_frame_tick(int fd, int ms);

uint32_t shim_frame_get32(const unsigned char *p);
void shim_frame_put32(unsigned char *p, uint32_t v);

/* One byte on a Unix socket, with the descriptors it carries: send_byte
 * passes fd along unless it is -1 (0 or -errno); recv_byte waits at most
 * timeout_ms for one, keeps up to max of the descriptors (SCM_RIGHTS,
 * close-on-exec) in fds[0..*nfds), closes any more, and sets *pid from
 * the sender's credentials when the socket has SO_PASSCRED (pid may be
 * NULL). 0, -ECONNRESET at the end of the stream, -ETIMEDOUT, or -errno. */
int shim_frame_send_byte(int sock, char b, int fd);
int shim_frame_recv_byte(int sock, char *b, int *fds, int max, int *nfds, int *pid,
                         int timeout_ms);

#endif
