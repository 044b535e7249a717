/* frame.c - see frame.h. */
#include "base/frame.h"

#include "base/clock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK 16384 /* read in pieces: the program's thread stack may be small */

/* The thread's waiter (shim_frame_set_waiter), or NULL. */
static __thread int (*waiter)(int fd, int ms);

/* Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno. A wait
 * to read goes through the thread's waiter when one is set. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - shim_clock_ms();
        int n, ms;

        if (left <= 0)
            return -ETIMEDOUT;
        ms = left > INT_MAX ? INT_MAX : (int)left;
        n = waiter && events == POLLIN ? waiter(fd, ms) : poll(&p, 1, ms);
        if (n > 0)
            return 0; /* ready, HUP or ERR: the I/O call says which */
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int shim_frame_write_all(int fd, const void *buf, size_t n, int64_t deadline)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        int rc;

        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if ((rc = wait_fd(fd, POLLOUT, deadline)) != 0)
                return rc;
        } else if (w < 0 && errno != EINTR) {
            return errno == ECONNRESET ? -EPIPE : -errno;
        }
    }
    return 0;
}

int shim_frame_read_all(int fd, void *buf, size_t n, int64_t deadline)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        int rc;

        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0) {
            return -ECONNRESET;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if ((rc = wait_fd(fd, POLLIN, deadline)) != 0)
                return rc;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

uint32_t shim_frame_get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void shim_frame_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

int shim_frame_send(int fd, const void *head, size_t hn, const void *body, size_t bn,
                    int64_t deadline)
{
    unsigned char len[4];
    int rc;

    if (hn > UINT32_MAX || bn > UINT32_MAX - hn)
        return -E2BIG;
    shim_frame_put32(len, (uint32_t)(hn + bn));
    rc = shim_frame_write_all(fd, len, sizeof(len), deadline);
    if (rc == 0 && hn)
        rc = shim_frame_write_all(fd, head, hn, deadline);
    if (rc == 0 && bn)
        rc = shim_frame_write_all(fd, body, bn, deadline);
    return rc;
}

int shim_frame_recv(int fd, struct shim_buf *b, size_t max, int64_t deadline)
{
    unsigned char len[4];
    char chunk[CHUNK];
    size_t n;
    int rc;

    shim_buf_init(b, 0);
    if ((rc = shim_frame_read_all(fd, len, sizeof(len), deadline)) != 0)
        return rc;
    n = shim_frame_get32(len);
    if (n == 0 || n > max)
        return -EPROTO;
    shim_buf_init(b, n);
    while (n > 0) {
        size_t k = n < sizeof(chunk) ? n : sizeof(chunk);
        if ((rc = shim_frame_read_all(fd, chunk, k, deadline)) != 0 ||
            (rc = shim_buf_add(b, chunk, k)) != 0)
            return rc;
        n -= k;
    }
    return 0;
}

void shim_frame_set_waiter(int (*fn)(int fd, int ms))
{
    waiter = fn;
}

int shim_frame_tick(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};

    return waiter ? waiter(fd, ms) : poll(&p, 1, ms);
}

int shim_frame_wait(int fd, int64_t deadline, int tick_ms, int (*stop)(void *), void *ctx)
{
    while (stop) {
        int64_t left = deadline - shim_clock_ms();
        int n;

        if (left <= 0)
            return 0;
        n = shim_frame_tick(fd, left > tick_ms ? tick_ms : (int)left);
        if (n > 0 || (n < 0 && errno != EINTR))
            return 0; /* readable, or broken: the read says how */
        if (stop(ctx))
            return -ECANCELED;
    }
    return 0;
}

/* ---- one byte with descriptors (SCM_RIGHTS) ---- */

int shim_frame_send_byte(int sock, char b, int fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &b, .iov_len = 1};
    struct msghdr mh;
    struct cmsghdr *cm;

    memset(&mh, 0, sizeof(mh));
    memset(&u, 0, sizeof(u));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (fd >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    return sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == 1 ? 0 : -errno;
}

#define RECV_FDS 8 /* descriptors looked at in one message */

/* The descriptors and credentials of one received message. */
static void take_cmsgs(struct msghdr *mh, int *fds, int max, int *nfds, int *pid)
{
    struct cmsghdr *cm;

    for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS && pid) {
            struct ucred uc;
            memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
            *pid = uc.pid;
        } else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int got[RECV_FDS], n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), i;
            if (n > RECV_FDS)
                n = RECV_FDS;
            memcpy(got, CMSG_DATA(cm), sizeof(int) * (size_t)n);
            for (i = 0; i < n; i++) {
                if (*nfds < max)
                    fds[(*nfds)++] = got[i];
                else
                    close(got[i]);
            }
        }
    }
}

int shim_frame_recv_byte(int sock, char *b, int *fds, int max, int *nfds, int *pid,
                         int timeout_ms)
{
    int64_t end = shim_clock_ms() + timeout_ms;

    *nfds = 0;
    for (;;) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * RECV_FDS) + CMSG_SPACE(sizeof(struct ucred))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = b, .iov_len = 1};
        struct msghdr mh;
        struct pollfd pf = {.fd = sock, .events = POLLIN};
        int64_t left = end - shim_clock_ms();
        ssize_t r;

        if (left <= 0)
            return -ETIMEDOUT;
        if ((waiter ? waiter(sock, (int)left) : poll(&pf, 1, (int)left)) <= 0)
            continue;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        r = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ECONNRESET;
        take_cmsgs(&mh, fds, max, nfds, pid);
        return 0;
    }
}
