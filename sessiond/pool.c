/* pool.c - see sessiond.h: the user's sandbox host keeps sandboxes forked
 * from its fork server ready, and lends each to one request.
 *
 * A take is answered with one byte first, b"S" carrying the sandbox's
 * control socket (SCM_RIGHTS) or b"N" carrying nothing, then a frame:
 * the library reads the byte with its descriptor, then the answer. The
 * host closes its own copy of the socket at once, so that the sandbox's
 * supervisor ends everything when the program closes the one it got (or
 * exits); the host notices that on the sandbox's life socket and closes
 * it here, which removes its cgroup. */
#include "base/frame.h"
#include "base/log.h"
#include "sandbox/sandbox.h"
#include "session/proto.h"
#include "sessiond.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

void sessiond_pool_fill(struct sessiond_pool *p, int warm)
{
    struct shim_sandbox *sb;

    while (warm == 1 && p->nready < SESSIOND_POOL) {
        if (shim_sandbox_open_forked(p->cfg, &sb) < 0)
            return;
        p->ready[p->nready++] = sb;
    }
}

int sessiond_pool_reap(struct sessiond_pool *p)
{
    int i = 0, n = 0;

    while (i < p->nlent) {
        struct pollfd pf = {.fd = shim_sandbox_life_fd(p->lent[i]), .events = POLLIN};
        if (pf.fd < 0 || poll(&pf, 1, 0) != 0) {
            shim_sandbox_close(p->lent[i]);
            p->lent[i] = p->lent[--p->nlent];
            n++;
        } else {
            i++;
        }
    }
    return n;
}

/* A ready sandbox, up: from the pool (one that died meanwhile is closed),
 * else forked now. */
static struct shim_sandbox *take(struct sessiond_pool *p, int warm, int *fd, long *pid)
{
    struct shim_sandbox *sb;

    while (p->nready > 0) {
        sb = p->ready[0];
        memmove(&p->ready[0], &p->ready[1], (size_t)--p->nready * sizeof(p->ready[0]));
        if (shim_sandbox_lend(sb, fd, pid) == 0)
            return sb;
        shim_sandbox_close(sb);
    }
    if (warm == 1 && shim_sandbox_open_forked(p->cfg, &sb) == 0) {
        if (shim_sandbox_lend(sb, fd, pid) == 0)
            return sb;
        shim_sandbox_close(sb);
    }
    return NULL;
}

void sessiond_pool_take(struct sessiond_pool *p, int fd, int warm)
{
    struct shim_sandbox *sb = NULL;
    cJSON *ans = cJSON_CreateObject();
    int sfd = -1;
    long pid = 0;

    if (ans && p->nlent < SESSIOND_LENT)
        sb = take(p, warm, &sfd, &pid);
    if (sb && shim_frame_send_byte(fd, 'S', sfd) == 0) {
        p->lent[p->nlent++] = sb;
        p->lent_total++;
        cJSON_AddTrueToObject(ans, "ok");
        cJSON_AddNumberToObject(ans, "pid", (double)pid);
    } else {
        if (sfd >= 0)
            close(sfd);
        sfd = -1;
        if (sb) /* never reached the program: ended here */
            shim_sandbox_close(sb);
        sb = NULL;
        if (ans) {
            cJSON_AddFalseToObject(ans, "ok");
            cJSON_AddStringToObject(ans, "error", warm == 0 ? "the fork server is starting"
                                                            : "no sandbox can be had");
        }
        shim_frame_send_byte(fd, 'N', -1);
    }
    if (sfd >= 0)
        close(sfd); /* the program's copy is the only one now */
    if (ans)
        shim_proto_send(fd, ans, 1000);
    cJSON_Delete(ans);
    close(fd);
}

void sessiond_pool_end(struct sessiond_pool *p)
{
    while (p->nready > 0)
        shim_sandbox_close(p->ready[--p->nready]);
    while (p->nlent > 0)
        shim_sandbox_close(p->lent[--p->nlent]);
}
