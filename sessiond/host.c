/* host.c - the user's sandbox host: the long-lived process of
 * codeshim-sessiond, one per user, sandbox settings and build, shared by
 * every program run and every identity of the user.
 *
 * - Where: DIR = <runtime>/hosts/<settings>-<build>, DIR/sock and
 *   DIR/pid; started by the library (shim/session/session_host.c) when
 *   none answers there.
 * - What: a fork server (imports done once) and a pool of sandboxes
 *   forked from it (pool.c). {"op":"take"} lends one to a program's
 *   private request. {"op":"open","identity","name",["bind"],"ttl"}
 *   starts a session: the host lends a sandbox to a new process of its
 *   own (codeshim-sessiond --session, serve.c), which answers the
 *   library on the same connection once the session's socket listens and
 *   serves the session from then on. {"op":"status"} says how many are
 *   ready, lent and live. Connections wait (accept.c) until their
 *   request begins to arrive: one that sends nothing holds none of the
 *   others up.
 * - Identities: a sandbox is lent once and never comes back, so no two
 *   requests and no two sessions, and so no two identities, share one;
 *   each session's directory is its identity's (checked here: the
 *   identity's directory under the runtime directory, never a path of the
 *   request's). What every sandbox shares is the fork server's read-only
 *   image of the interpreter and its imports (doc/ARCHITECTURE.md).
 * - Why one process per session: each session's executions are
 *   serialised on its own socket and none waits for another's, a session
 *   is closed or signalled alone (DIR/pid of the session), and a session
 *   process that dies takes only its own sandbox. It is spawned (a fresh
 *   image, not a fork of this threaded process) with the sandbox's
 *   control socket, so it is just another borrower.
 * - Lifetime: lent sandboxes are children of the fork server, which dies
 *   with the host, so it stays while any lent one or session lives, and
 *   then CODESHIM_SESSION_TTL seconds more without a request. It leaves
 *   under the user's lock; SIGTERM ends every session first; its socket
 *   is closed meanwhile, so a library may start a successor in DIR then:
 *   leaving, a host removes only the socket and pid file it made itself
 *   (same inode), never a successor's. */
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

struct host {
    const struct shim_config *cfg;
    const char *dir, *settings;
    /* the runtime directory (the host's environment may not name it: it
     * is where the host is): the identities' directories, the user's lock */
    char rtdir[SHIM_PATH_MAX];
    char exe[SHIM_PATH_MAX];   /* this program, for the sessions' processes */
    int lfd;
    int warm; /* shim_sandbox_keep_warm's last answer */
    struct sessiond_pool pool;
    pid_t kids[HOST_MAX]; /* the sessions' processes */
    int nkids;
    long long last; /* ms: the last request, or the last session's end */
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

    LOG_WARN("sandbox host: refused a request: %s", why);
    if (ans) {
        cJSON_AddFalseToObject(ans, "ok");
        cJSON_AddStringToObject(ans, "error", why);
        shim_proto_send(fd, ans, 5000);
    }
    cJSON_Delete(ans);
    close(fd);
}

/* An identity as the library names its directory: "anonymous" or 32
 * lowercase hex digits (identity.h), the shape of a session's name too;
 * so never a path. */
static int is_identity(const char *id)
{
    return !strcmp(id, "anonymous") || shim_session_is_name(id);
}

/* 1 when path is a directory (not a link) of this user's. */
static int own_dir(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

/* The fork server looked at again, unless there is none to have. */
static void keep_warm(struct host *h)
{
    if (h->warm >= 0)
        h->warm = shim_sandbox_keep_warm(h->cfg);
}

/* An open request, checked: its session directory is <identity dir>/<32
 * hex>, a directory (the library made it), never a path of the
 * request's; bind is absent or a container id; ttl a
 * CODESHIM_SESSION_TTL. 0 or -EINVAL. */
static int parse_open(const struct host *h, const cJSON *req, struct sessiond_open *o)
{
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(req, "identity"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(req, "name"));
    const cJSON *jb = cJSON_GetObjectItem(req, "bind");
    double ttl = cJSON_GetNumberValue(cJSON_GetObjectItem(req, "ttl"));
    char iddir[SHIM_PATH_MAX];

    o->bind = jb ? cJSON_GetStringValue(jb) : "";
    o->ttl_s = ttl >= 1 && ttl <= SHIM_SESSION_TTL_MAX ? (int)ttl : 0;
    if (!id || !is_identity(id) || !name || !shim_session_is_name(name) ||
        shim_fileio_join(iddir, sizeof(iddir), h->rtdir, id) < 0 || !own_dir(iddir) ||
        shim_fileio_join(o->dir, sizeof(o->dir), iddir, name) < 0 || !own_dir(o->dir) ||
        !o->bind || !o->ttl_s ||
        (o->bind[0] && (strncmp(o->bind, "cntr_", 5) || strlen(o->bind) >= 64)))
        return -EINVAL;
    return 0;
}

/* {"op":"status"}: whether the fork server is up, how many sandboxes are
 * ready and lent, how many sessions live (benchmarks and tests wait on
 * it rather than sleep). */
static void status(struct host *h, int fd)
{
    cJSON *ans = cJSON_CreateObject();

    keep_warm(h);
    if (ans) {
        cJSON_AddTrueToObject(ans, "ok");
        cJSON_AddBoolToObject(ans, "warm", h->warm == 1);
        cJSON_AddNumberToObject(ans, "sessions", h->nkids);
        cJSON_AddNumberToObject(ans, "pool", sessiond_pool_ready(&h->pool));
        cJSON_AddNumberToObject(ans, "lent", h->pool.nlent);
        cJSON_AddNumberToObject(ans, "lent_total", (double)h->pool.lent_total);
        cJSON_AddNumberToObject(ans, "pid", (double)getpid());
        shim_proto_send(fd, ans, 5000);
    }
    cJSON_Delete(ans);
    close(fd);
}

/* Starts the session's process: this program again (--session), with the
 * library's connection as fd 3 (it answers there) and the lent sandbox's
 * control socket as fd 4. Its pid, or -errno. */
static pid_t spawn_session(struct host *h, const struct sessiond_open *o, int reply)
{
    char ttl[16], pid[24];
    char *argv[] = {h->exe, (char *)"--session", (char *)o->dir, (char *)h->settings, ttl,
                    (char *)(o->bind[0] ? o->bind : "-"), pid, NULL};
    int fds[2] = {reply, o->lent_fd};

    snprintf(ttl, sizeof(ttl), "%d", o->ttl_s);
    snprintf(pid, sizeof(pid), "%ld", o->lent_pid);
    return shim_session_spawn(h->cfg, argv, fds, o->lent_fd >= 0 ? 2 : 1, 0);
}

static void open_session(struct host *h, const cJSON *req, int fd)
{
    struct sessiond_open o;
    pid_t pid;
    int rc;

    if (parse_open(h, req, &o) < 0) {
        refuse(fd, "not a request to open a session");
        return;
    }
    if (h->nkids >= HOST_MAX) {
        refuse(fd, "too many sessions");
        return;
    }
    keep_warm(h);
    /* a pooled sandbox, else (the fork server still imports, or failed)
     * the session opens one the cold way */
    rc = sessiond_pool_lend(&h->pool, h->warm, &o.lent_fd, &o.lent_pid);
    if (rc < 0) {
        o.lent_fd = -1;
        o.lent_pid = 0;
        LOG_INFO("sandbox host: no sandbox to lend a new session (%s); it starts the cold way",
                 strerror(-rc));
    }
    pid = spawn_session(h, &o, fd);
    if (o.lent_fd >= 0)
        close(o.lent_fd); /* the session's copy only: it ends when the session does */
    if (pid < 0) {
        refuse(fd, "cannot start the session's process");
        return;
    }
    close(fd); /* the session answers on its copy */
    h->kids[h->nkids++] = pid;
}

/* One request on the host's socket (fd is ours to close). */
static void request(struct host *h, int fd)
{
    const char *op;
    cJSON *req = NULL;

    if (shim_proto_recv(fd, &req, SESSIOND_REQUEST_MS) < 0) {
        close(fd);
        return;
    }
    op = cJSON_GetStringValue(cJSON_GetObjectItem(req, "op"));
    if (op && !strcmp(op, "status")) {
        status(h, fd);
    } else if (op && !strcmp(op, "take")) {
        keep_warm(h);
        sessiond_pool_take(&h->pool, fd, h->warm);
    } else if (op && !strcmp(op, "open")) {
        open_session(h, req, fd);
    } else {
        refuse(fd, "not a request this host knows");
    }
    cJSON_Delete(req);
}

/* Leaves DIR (so the next open starts another host), under the identity's
 * lock when it can be had: with wait_ms 0, only if no library holds it
 * (returns 0 then: an open is on its way, stay). */
static int leave(struct host *h, int wait_ms)
{
    int lock = shim_session_lock(h->rtdir, wait_ms);

    if (lock == -ETIMEDOUT && wait_ms == 0)
        return 0;
    /* only this host's own files: a successor may already serve DIR (one
     * started while this host ended its sessions, its socket closed) */
    if (shim_store_unlink_own(h->dir, "sock", &h->sock) == -ESTALE)
        LOG_INFO("sandbox host: %s/sock is a successor's; left to it", h->dir);
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

/* rtdir = dir without its last two components (hosts/<name>). */
static int runtime_dir(const char *dir, char *out, size_t n)
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

int sessiond_host(const struct shim_config *cfg, const char *dir, const char *settings, int ready)
{
    static struct host h; /* its kids table is large */
    struct sigaction sa;
    char pidtxt[32], p[SHIM_PATH_MAX + 8];
    ssize_t n;

    h.cfg = cfg;
    h.dir = dir;
    h.settings = settings;
    h.pool.cfg = cfg;
    n = readlink("/proc/self/exe", h.exe, sizeof(h.exe) - 1);
    if (n <= 0 || (size_t)n >= sizeof(h.exe) - 1 || runtime_dir(dir, h.rtdir, sizeof(h.rtdir)) < 0 ||
        (h.lfd = shim_proto_socket(dir, 1)) < 0)
        return 1;
    h.exe[n] = '\0';
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
    shim_sandbox_tidy(cfg); /* a killed predecessor's cgroups, where they are empty now */
    h.warm = shim_sandbox_keep_warm(cfg);
    h.last = shim_clock_ms();
    LOG_INFO("sandbox host up (fork server: %s)", h.warm < 0 ? "none" : "starting");
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
        keep_warm(&h);
        sessiond_pool_fill(&h.pool, h.warm);
    }
    sessiond_waiting_close(&h.w);
    close(h.lfd);
    if (sessiond_stop)
        end_sessions(&h);
    sessiond_pool_end(&h.pool);
    shim_sandbox_tidy(cfg); /* and those whose processes were still ending at the start */
    if (sessiond_stop)
        leave(&h, 1000);
    LOG_INFO("sandbox host ends");
    return 0;
}
