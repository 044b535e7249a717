/* accept.c - see sessiond.h: the connections accepted but not yet read
 * from, polled together, so that a peer that connects and sends nothing
 * holds a slot, never the process. */
#include "base/clock.h"
#include "sessiond.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Takes w's connection i out, keeping the others in the order they came. */
static int unlink_at(struct sessiond_waiting *w, int i)
{
    int fd = w->fd[i];

    memmove(&w->fd[i], &w->fd[i + 1], (size_t)(w->n - i - 1) * sizeof(w->fd[0]));
    memmove(&w->since[i], &w->since[i + 1], (size_t)(w->n - i - 1) * sizeof(w->since[0]));
    w->n--;
    return fd;
}

static void drop(struct sessiond_waiting *w, int i)
{
    close(unlink_at(w, i));
}

static void take(struct sessiond_waiting *w, int lfd, int64_t now,
                 int (*greet)(int fd, void *ctx), void *ctx)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    if (greet && greet(fd, ctx) < 0) {
        close(fd);
        return;
    }
    if (w->n == SESSIOND_WAITING) /* the oldest has waited longest for nothing */
        drop(w, 0);
    w->fd[w->n] = fd;
    w->since[w->n++] = now;
}

int sessiond_next(struct sessiond_waiting *w, int lfd, int timeout_ms,
                  int (*greet)(int fd, void *ctx), void *ctx)
{
    int64_t end = shim_clock_ms() + (timeout_ms > 0 ? timeout_ms : 0);

    for (;;) {
        struct pollfd p[1 + SESSIOND_WAITING];
        int64_t now = shim_clock_ms(), wake = end;
        int i, rc;

        for (i = 0; i < w->n;) {
            if (now - w->since[i] >= SESSIOND_IDLE_MS) {
                drop(w, i);
                continue;
            }
            if (w->since[i] + SESSIOND_IDLE_MS < wake)
                wake = w->since[i] + SESSIOND_IDLE_MS;
            i++;
        }
        if (now >= end)
            return -ETIMEDOUT;
        p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (i = 0; i < w->n; i++)
            p[1 + i] = (struct pollfd){.fd = w->fd[i], .events = POLLIN};
        rc = poll(p, (nfds_t)(1 + w->n), (int)(wake - now));
        if (rc < 0 && errno == EINTR)
            return -EINTR; /* a child ended, or SIGTERM: the caller looks */
        if (rc < 0)
            return -errno;
        for (i = 0; i < w->n; i++)
            if (p[1 + i].revents) /* its request began (or it closed): the oldest first */
                return unlink_at(w, i);
        if (p[0].revents & POLLIN) /* now: poll may have waited long */
            take(w, lfd, shim_clock_ms(), greet, ctx);
    }
}

void sessiond_waiting_close(struct sessiond_waiting *w)
{
    while (w->n)
        drop(w, w->n - 1);
}
