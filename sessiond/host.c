/* host.c - the host of one identity's sessions under one set of sandbox
 * settings: the long-lived process of codeshim-sessiond.
 *
 * - Where: DIR = <identity dir>/hosts/<settings>, DIR/sock and DIR/pid;
 *   started by the library (shim/session/session_host.c) when a session is to start
 *   and no host answers there. One per identity and settings: nothing of
 *   it (its sessions, its fork server if it has one) ever serves another
 *   identity.
 * - What: its sessions' sandboxes are lent by the user's sandbox host
 *   (shim_session_lent), or, where none is lent, forked from a fork server
 *   of its own (shim_sandbox_keep_warm), so that a session starts as fast
 *   as a pooled sandbox, with the data libraries already imported. For
 *   each {"op":"open","name",["bind"]} on its socket it takes such a
 *   sandbox and forks the session's own process (serve.c), which adopts it, answers the
 *   library once the session's socket listens, and serves it from then
 *   on; the host forgets the sandbox. Without one ready (the first
 *   session, while the server imports; a server that failed), the session
 *   process opens its sandbox the cold way. {"op":"status"} says whether
 *   one is ready and how many sessions live. Connections wait (accept.c)
 *   until their request begins to arrive: one that sends nothing holds
 *   none of the others up.
 * - Why one process per session still: each session's executions are
 *   serialised on its own socket and none waits for another's, a session
 *   is closed or signalled alone (DIR/pid of the session), and a session
 *   process that dies takes only its own sandbox.
 * - Lifetime: the sandboxes it hands over are children of its fork
 *   server, which dies with it, so it stays while any session it forked
 *   lives, and then CODESHIM_SESSION_TTL seconds more without a new one.
 *   It ends under the identity's lock (the one the library opens sessions
 *   under), so no open ever reaches a host that is ending. SIGTERM ends
 *   every session first; its socket is closed meanwhile, so a library may
 *   start a successor in DIR then: leaving, a host removes only the
 *   socket and pid file it made itself (same inode), never a successor's.
 * - The user's sandbox host is this same loop with user set (DIR =
 *   <runtime>/hosts/<settings>-<build>): it opens no session; it keeps a
 *   pool of forked sandboxes (pool.c) and lends one for each
 *   {"op":"take"}, and it stays while any lent one lives. */
#include "base/clock.h"
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/sandbox.h"
#include "session/proto.h"
#include "session/session.h"
#include "sessiond.h"
#include "store/store.h"
#include "system/config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOST_MAX 1024       /* sessions at once (CODESHIM_SESSION_CAP <= 1000) */
#define WARMING_TICK_MS 100 /* how often a fork server getting ready is looked at */
#define END_WAIT_MS 10000   /* for the sessions to end at SIGTERM */
#define LENT_TICK_MS 100    /* how often lent sandboxes are looked at */
/* h->warm of a session host whose sandboxes the user's sandbox host lends:
 * it has no fork server of its own unless a lending fails */
#define LENDS (-EALREADY)

struct host {
    const struct shim_config *cfg;
    const char *dir, *settings;
    char iddir[SHIM_PATH_MAX];
    int lfd;
    int warm; /* shim_sandbox_keep_warm's last answer */
    int user; /* the user's sandbox host: lends pooled sandboxes, no sessions */
    struct sessiond_pool pool;
    pid_t kids[HOST_MAX];
    int nkids;
    long long last; /* ms: the last open, or the last session's end */
    struct sessiond_waiting w; /* connections yet to send their request */
    struct shim_store_own sock, pid; /* DIR/sock and DIR/pid as this host made them */
};

static void on_child(int sig)
{
    (void)sig; /* only to wake poll */
}

static void reap(struct host *h)
{
    int i = 0;

    while (i < h->nkids) {
        pid_t r = waitpid(h->kids[i], NULL, WNOHANG);
        if (r == h->kids[i] || (r < 0 && errno == ECHILD)) {
            h->kids[i] = h->kids[--h->nkids];
            h->last = shim_clock_ms();
        } else {
            i++;
        }
    }
}

static void refuse(int fd, const char *why)
{
    cJSON *ans = cJSON_CreateObject();

    LOG_WARN("session host: refused a request: %s", why);
    if (ans) {
        cJSON_AddFalseToObject(ans, "ok");
        cJSON_AddStringToObject(ans, "error", why);
        shim_proto_send(fd, ans, 5000);
    }
    cJSON_Delete(ans);
    close(fd);
}

/* An open request, checked: its session directory is iddir/<32 hex>, a
 * directory (the library made it), never a path of the request's; bind is
 * absent or a container id; ttl a CODESHIM_SESSION_TTL. 0 or -EINVAL. */
static int parse_open(const struct host *h, const cJSON *req, struct sessiond_open *o)
{
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(req, "name"));
    const cJSON *jb = cJSON_GetObjectItem(req, "bind");
    double ttl = cJSON_GetNumberValue(cJSON_GetObjectItem(req, "ttl"));
    struct stat st;

    o->bind = jb ? cJSON_GetStringValue(jb) : "";
    o->ttl_s = ttl >= 1 && ttl <= SHIM_SESSION_TTL_MAX ? (int)ttl : 0;
    if (!name || !shim_session_is_name(name) || shim_fileio_join(o->dir, sizeof(o->dir), h->iddir, name) < 0 ||
        lstat(o->dir, &st) < 0 || !S_ISDIR(st.st_mode) || !o->bind || !o->ttl_s ||
        (o->bind[0] && (strncmp(o->bind, "cntr_", 5) || strlen(o->bind) >= 64)))
        return -EINVAL;
    return 0;
}

/* {"op":"status"}: is a sandbox ready to hand over, how many sessions
 * live (for benchmarks and tests, which wait for the former). */
static void status(struct host *h, int fd)
{
    cJSON *ans = cJSON_CreateObject();

    if (h->warm >= 0)
        h->warm = shim_sandbox_keep_warm(h->cfg);
    if (ans) {
        cJSON_AddTrueToObject(ans, "ok");
        cJSON_AddBoolToObject(ans, "warm", h->warm == 1 ||
                                               (h->warm == LENDS && shim_session_lent_ready(h->cfg)));
        cJSON_AddNumberToObject(ans, "sessions", h->nkids);
        if (h->user) {
            cJSON_AddNumberToObject(ans, "pool", sessiond_pool_ready(&h->pool));
            cJSON_AddNumberToObject(ans, "lent", h->pool.nlent);
            cJSON_AddNumberToObject(ans, "lent_total", (double)h->pool.lent_total);
            cJSON_AddNumberToObject(ans, "pid", (double)getpid());
        }
        shim_proto_send(fd, ans, 5000);
    }
    cJSON_Delete(ans);
    close(fd);
}

/* One request on the host's socket (fd is ours to close). */
static void request(struct host *h, int fd)
{
    static struct sessiond_open o;
    struct shim_sandbox *sb = NULL;
    const char *op;
    cJSON *req = NULL;
    pid_t pid;

    if (shim_proto_recv(fd, &req, SESSIOND_REQUEST_MS) < 0) {
        close(fd);
        return;
    }
    op = cJSON_GetStringValue(cJSON_GetObjectItem(req, "op"));
    if (op && !strcmp(op, "status")) {
        cJSON_Delete(req);
        status(h, fd);
        return;
    }
    if (op && h->user && !strcmp(op, "take")) {
        cJSON_Delete(req);
        if (h->warm >= 0)
            h->warm = shim_sandbox_keep_warm(h->cfg);
        sessiond_pool_take(&h->pool, fd, h->warm);
        return;
    }
    if (!op || h->user || strcmp(op, "open") || parse_open(h, req, &o) < 0) {
        cJSON_Delete(req);
        refuse(fd, "not a request to open a session of this identity");
        return;
    }
    if (h->nkids >= HOST_MAX) {
        cJSON_Delete(req);
        refuse(fd, "too many sessions");
        return;
    }
    /* forked here, else (the fork server still imports) lent by the
     * user's sandbox host, else the session opens one itself */
    if (h->warm == LENDS && shim_session_lent(h->cfg, &sb) < 0) {
        sb = NULL; /* none lent: this host's own fork server from now on */
        h->warm = shim_sandbox_keep_warm(h->cfg);
    } else if (h->warm != LENDS && shim_sandbox_open_forked(h->cfg, &sb) < 0 &&
               shim_session_lent(h->cfg, &sb) < 0) {
        sb = NULL;
    }
    pid = fork();
    if (pid == 0) {
        close(h->lfd);
        sessiond_waiting_close(&h->w); /* the host's: closed here, they stay there */
        signal(SIGCHLD, SIG_DFL);
        exit(sessiond_session(h->cfg, &o, h->settings, sb, fd));
    }
    cJSON_Delete(req); /* o.bind with it */
    if (pid < 0) {
        refuse(fd, "cannot start the session's process");
        shim_sandbox_close(sb);
        return;
    }
    shim_sandbox_disown(sb);
    close(fd);
    h->kids[h->nkids++] = pid;
}

/* Leaves DIR (so the next open starts another host), under the identity's
 * lock when it can be had: with wait_ms 0, only if no library holds it
 * (returns 0 then: an open is on its way, stay). */
static int leave(struct host *h, int wait_ms)
{
    int lock = shim_session_lock(h->iddir, wait_ms);

    if (lock == -ETIMEDOUT && wait_ms == 0)
        return 0;
    /* only this host's own files: a successor may already serve DIR (one
     * started while this host ended its sessions, its socket closed) */
    if (shim_store_unlink_own(h->dir, "sock", &h->sock) == -ESTALE)
        LOG_INFO("session host: %s/sock is a successor's; left to it", h->dir);
    shim_store_unlink_own(h->dir, "pid", &h->pid);
    rmdir(h->dir); /* fails while a successor's files are there */
    if (lock >= 0)
        close(lock); /* the lock with it */
    return 1;
}

/* SIGTERM: every session ends (closing its sandbox), in bounded time. */
static void end_sessions(struct host *h)
{
    int64_t end = shim_clock_ms() + END_WAIT_MS;
    int i;

    for (i = 0; i < h->nkids; i++)
        kill(h->kids[i], SIGTERM);
    while (h->nkids && shim_clock_ms() < end) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
        reap(h);
    }
    for (i = 0; i < h->nkids; i++) {
        kill(h->kids[i], SIGKILL);
        waitpid(h->kids[i], NULL, 0);
    }
    h->nkids = 0;
}

static int poll_ms(const struct host *h)
{
    long long idle_left = h->last + h->cfg->session_ttl_s * 1000LL - shim_clock_ms();
    long long ms = 60000;

    if (h->warm == 0)
        ms = WARMING_TICK_MS;
    if (h->pool.nlent && ms > LENT_TICK_MS)
        ms = LENT_TICK_MS;
    if (!h->nkids && !h->pool.nlent && idle_left < ms)
        ms = idle_left < 10 ? 10 : idle_left; /* 10: the lock may be taken */
    return (int)ms;
}

/* iddir = dir without its last two components (hosts/<settings>). */
static int identity_dir(const char *dir, char *out, size_t n)
{
    size_t len = strlen(dir);
    int cut = 0;

    while (len > 1 && cut < 2)
        if (dir[--len] == '/')
            cut++;
    if (cut < 2 || len == 0 || len >= n)
        return -ENAMETOOLONG;
    memcpy(out, dir, len);
    out[len] = '\0';
    return 0;
}

int sessiond_host(const struct shim_config *cfg, const char *dir, const char *settings,
                  int user, int ready)
{
    static struct host h; /* its kids table is large */
    struct sigaction sa;
    char pidtxt[32], p[SHIM_PATH_MAX + 8];

    h.cfg = cfg;
    h.dir = dir;
    h.settings = settings;
    h.user = user;
    h.pool.cfg = cfg;
    if (identity_dir(dir, h.iddir, sizeof(h.iddir)) < 0 || (h.lfd = shim_proto_socket(dir, 1)) < 0)
        return 1;
    snprintf(pidtxt, sizeof(pidtxt), "%ld", (long)getpid());
    if (shim_fileio_join(p, sizeof(p), dir, "pid") < 0 || shim_store_write(p, pidtxt) < 0)
        LOG_WARN("cannot write %s/pid", dir);
    shim_store_mark(dir, "sock", &h.sock);
    shim_store_mark(dir, "pid", &h.pid);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_child; /* no SA_RESTART: a session's end wakes poll */
    sigaction(SIGCHLD, &sa, NULL);
    if (write(ready, "R", 1) != 1)
        LOG_WARN("readiness pipe closed");
    close(ready);
    if (user) /* a killed predecessor's cgroups, where they are empty now */
        shim_sandbox_tidy(cfg);
    /* a session host's sandboxes come from the user's sandbox host (no
     * fork server and imports for each identity) where there is one */
    h.warm = !user && shim_session_lent_ready(cfg) ? LENDS : shim_sandbox_keep_warm(cfg);
    h.last = shim_clock_ms();
    LOG_INFO("%s host up (fork server: %s)", user ? "sandbox" : "session", h.warm < 0 ? "none" : "starting");
    for (;;) {
        int fd;
        reap(&h);
        if (sessiond_pool_reap(&h.pool))
            h.last = shim_clock_ms();
        if (sessiond_stop)
            break;
        if (!h.nkids && !h.pool.nlent && shim_clock_ms() - h.last >= cfg->session_ttl_s * 1000LL && leave(&h, 0))
            break;
        if ((fd = sessiond_next(&h.w, h.lfd, poll_ms(&h), NULL, NULL)) >= 0) {
            request(&h, fd);
            h.last = shim_clock_ms();
        }
        if (h.warm >= 0)
            h.warm = shim_sandbox_keep_warm(cfg);
        if (h.user)
            sessiond_pool_fill(&h.pool, h.warm);
    }
    sessiond_waiting_close(&h.w);
    close(h.lfd);
    sessiond_pool_end(&h.pool);
    if (user) /* and those whose processes were still ending at the start */
        shim_sandbox_tidy(cfg);
    if (sessiond_stop) {
        end_sessions(&h);
        leave(&h, 1000);
    }
    LOG_INFO("session host ends");
    return 0;
}
