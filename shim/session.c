/* session.c - see session.h. The library side of sessions: naming, the
 * private runtime directory, attach-or-start under a per-identity lock,
 * LRU eviction, and one connection per execution to the supervisor
 * (codeshim-sessiond, sessiond/sessiond.c). Processes are started here
 * only for the supervisor; the sandbox itself is sandbox/'s business. */
#include "session.h"

#include "config.h"
#include "json.h"
#include "log.h"
#include "proto.h"
#include "real.h"
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NAME_HEX 32 /* 128 bits of SHA-256 per path component */
#define LOCK_WAIT_MS 30000

struct shim_box {
    const struct shim_config *cfg;
    struct shim_sandbox *sb; /* a private sandbox; NULL for a session */
    char iddir[SHIM_PATH_MAX];
    char dir[SHIM_PATH_MAX]; /* the session's directory */
    char name[65];
    char cid[64];
    char note[512];
};

/* ---------------- names ---------------- */

void shim_session_name(const char *identity, const char *session_id, char out[65])
{
    shim_store_hash("codeshim-session-v1", identity, session_id, out);
}

static void container_file(const char *iddir, const char *cid, char *out, size_t n)
{
    char h[68] = "c-";
    shim_store_hash("codeshim-container-v1", cid, NULL, h + 2);
    shim_store_join(out, n, iddir, h);
}

/* ---------------- the supervisor's socket ---------------- */

static int connect_dir(const char *dir)
{
    return shim_proto_socket(dir, 0);
}

static int alive(const char *dir)
{
    int fd = connect_dir(dir);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void remove_dir(const char *dir)
{
    static const char *const files[] = {"sock", "cntr", "pid"};
    char p[SHIM_PATH_MAX + 8];
    size_t i;

    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (shim_store_join(p, sizeof(p), dir, files[i]) == 0)
            unlink(p);
    rmdir(dir);
}

void shim_session_remove(const char *dir, const char *cid)
{
    char iddir[SHIM_PATH_MAX], cf[SHIM_PATH_MAX + 80];
    const char *slash = strrchr(dir, '/');

    remove_dir(dir);
    if (!cid || !*cid || !slash || (size_t)(slash - dir) >= sizeof(iddir))
        return;
    memcpy(iddir, dir, (size_t)(slash - dir));
    iddir[slash - dir] = '\0';
    container_file(iddir, cid, cf, sizeof(cf));
    if (cf[0])
        unlink(cf);
}

/* Asks a supervisor to end its session; falls back to SIGTERM by pid. */
static void close_session(const char *dir, int timeout_ms)
{
    int fd = connect_dir(dir);
    char pidtxt[32], p[SHIM_PATH_MAX + 8];
    cJSON *msg, *ans = NULL;
    int ok = 0;

    if (fd >= 0) {
        msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "op", "close");
        ok = shim_proto_send(fd, msg, timeout_ms) == 0 &&
             shim_proto_recv(fd, &ans, timeout_ms) == 0;
        cJSON_Delete(msg);
        cJSON_Delete(ans);
        close(fd);
    }
    if (!ok && shim_store_join(p, sizeof(p), dir, "pid") == 0 && shim_store_read(p, pidtxt, sizeof(pidtxt), 1) == 0) {
        long pid = strtol(pidtxt, NULL, 10);
        if (pid > 1)
            kill((pid_t)pid, SIGTERM);
    }
}

/* ---------------- starting a supervisor ---------------- */

static void sessiond_path(const struct shim_config *cfg, char *out, size_t n)
{
    char dir[SHIM_PATH_MAX];

    if (cfg->sessiond[0]) {
        snprintf(out, n, "%s", cfg->sessiond);
        return;
    }
    shim_real_self_dir(dir, sizeof(dir));
    shim_store_join(out, n, dir[0] ? dir : ".", "codeshim-sessiond");
}

/* Starts codeshim-sessiond for dir; it daemonises and its first process
 * exits once the socket listens, so waiting for it costs no zombie. */
static int spawn_supervisor(const struct shim_config *cfg, const char *dir)
{
    char path[SHIM_PATH_MAX], tmpenv[SHIM_PATH_MAX + 8];
    char *argv[] = {path, (char *)dir, NULL};
    char **own = shim_config_own_env(), **envp;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    size_t n = 0, i;
    pid_t pid;
    int rc, status;

    sessiond_path(cfg, path, sizeof(path));
    for (i = 0; own && own[i]; i++)
        n++;
    envp = calloc(n + 3, sizeof(*envp));
    if (!own || !envp) {
        rc = -ENOMEM;
        goto out;
    }
    for (i = 0; i < n; i++)
        envp[i] = own[i];
    snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", cfg->tmpdir);
    envp[n] = (char *)"PATH=/usr/bin:/bin";
    envp[n + 1] = tmpenv;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* no host fd leaks */
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    rc = -posix_spawn(&pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc) {
        LOG_ERR("cannot start %s: %s", path, strerror(-rc));
        goto out;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!alive(dir)) {
        LOG_ERR("%s did not start a session (status %d)", path, status);
        rc = -ECHILD;
    }
out:
    for (i = 0; own && own[i]; i++)
        free(own[i]);
    free(own);
    free(envp);
    return rc;
}

/* ---------------- the per-identity set of sessions ---------------- */

static int lock_identity(const char *iddir)
{
    char p[SHIM_PATH_MAX + 8];
    int fd, waited = 0;

    if (shim_store_join(p, sizeof(p), iddir, ".lock") < 0)
        return -ENAMETOOLONG;
    fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        struct timespec ts = {0, 10 * 1000000};
        if (errno != EWOULDBLOCK || (waited += 10) > LOCK_WAIT_MS) {
            close(fd);
            return -ETIMEDOUT;
        }
        nanosleep(&ts, NULL);
    }
    return fd;
}

static int is_session_name(const char *n)
{
    size_t i;

    for (i = 0; i < NAME_HEX; i++)
        if (!n[i] || !strchr("0123456789abcdef", n[i]))
            return 0;
    return n[NAME_HEX] == '\0';
}

/* Clears dead sessions and, when the identity is at its cap, closes the
 * least recently used live one (supervisors touch their dir on use). */
static void make_room(const struct shim_config *cfg, const char *iddir, const char *keep)
{
    DIR *d = opendir(iddir);
    struct dirent *e;
    char oldest[SHIM_PATH_MAX] = "", p[SHIM_PATH_MAX];
    time_t oldest_t = 0;
    long oldest_ns = 0;
    int live = 0;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!is_session_name(e->d_name) || !strcmp(e->d_name, keep))
            continue;
        if (shim_store_join(p, sizeof(p), iddir, e->d_name) < 0 || lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (!alive(p)) {
            remove_dir(p);
            continue;
        }
        live++;
        if (!oldest[0] || st.st_mtim.tv_sec < oldest_t ||
            (st.st_mtim.tv_sec == oldest_t && st.st_mtim.tv_nsec < oldest_ns)) {
            snprintf(oldest, sizeof(oldest), "%s", p);
            oldest_t = st.st_mtim.tv_sec;
            oldest_ns = st.st_mtim.tv_nsec;
        }
    }
    closedir(d);
    if (live >= cfg->session_cap && oldest[0]) {
        LOG_INFO("session cap (%d) reached: closing the least recently used session",
                 cfg->session_cap);
        close_session(oldest, 5000);
    }
}

/* Attaches to the session in b->dir, starting it when needed. Sets
 * *created when the sandbox is new. Called with the identity locked. */
static int attach(struct shim_box *b, int *created)
{
    char p[SHIM_PATH_MAX + 8], cf[SHIM_PATH_MAX + 80];
    int rc;

    *created = 0;
    if (!alive(b->dir)) {
        remove_dir(b->dir);
        make_room(b->cfg, b->iddir, b->name);
        if ((rc = shim_store_private_dir(b->dir)) < 0)
            return rc;
        if ((rc = spawn_supervisor(b->cfg, b->dir)) < 0) {
            remove_dir(b->dir);
            return rc;
        }
        *created = 1;
    }
    if ((rc = shim_store_join(p, sizeof(p), b->dir, "cntr")) < 0 ||
        (rc = shim_store_read(p, b->cid, sizeof(b->cid), 1)) < 0)
        return rc;
    container_file(b->iddir, b->cid, cf, sizeof(cf));
    if (*created)
        shim_store_write(cf, b->name);
    return 0;
}

/* The session that owns container cid, if it is alive. */
static int find_container(struct shim_box *b, const char *cid)
{
    char cf[SHIM_PATH_MAX + 80], name[65];

    container_file(b->iddir, cid, cf, sizeof(cf));
    if (shim_store_read(cf, name, sizeof(name), 1) < 0 || !is_session_name(name))
        return 0;
    snprintf(b->name, sizeof(b->name), "%s", name);
    return shim_store_join(b->dir, sizeof(b->dir), b->iddir, name) == 0 && alive(b->dir);
}

static void expired_note(struct shim_box *b, const char *old)
{
    snprintf(b->note, sizeof(b->note),
             "[Note: the earlier sandbox %.64s has expired; its variables, imports and "
             "files are gone. This is a new sandbox (%s).]\n", old, b->cid);
}

/* A referred-to container that is not the one in use, if any. */
static const char *stale_ref(const struct shim_box *b, const struct shim_box_req *rq)
{
    size_t i;

    for (i = 0; i < rq->ncontainers; i++)
        if (rq->containers[i] && strcmp(rq->containers[i], b->cid))
            return rq->containers[i];
    return NULL;
}

static int open_private(struct shim_box *b, const struct shim_box_req *rq)
{
    int rc = shim_sandbox_open(b->cfg, &b->sb);
    const char *old;

    if (rc < 0)
        return rc;
    snprintf(b->cid, sizeof(b->cid), "%s", shim_sandbox_container_id(b->sb));
    if ((old = stale_ref(b, rq)) != NULL)
        expired_note(b, old);
    return 0;
}

int shim_box_open(const struct shim_config *cfg, const struct shim_box_req *rq,
                  struct shim_box **out)
{
    struct shim_box *b = calloc(1, sizeof(*b));
    int lk, rc = 0, created = 0, found = 0;
    size_t i;

    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    *out = b;
    if ((!rq->session_id && !rq->ncontainers) ||
        shim_store_identity_dir(cfg, rq->identity, b->iddir, sizeof(b->iddir)) < 0)
        return open_private(b, rq);
    lk = lock_identity(b->iddir);
    if (lk < 0) {
        LOG_WARN("session lock: %s; using a private sandbox", strerror(-lk));
        return open_private(b, rq);
    }
    if (rq->session_id) {
        shim_session_name(rq->identity, rq->session_id, b->name);
        rc = shim_store_join(b->dir, sizeof(b->dir), b->iddir, b->name);
        if (rc == 0)
            rc = attach(b, &created);
    } else {
        for (i = 0; i < rq->ncontainers && !found; i++)
            found = rq->containers[i] && find_container(b, rq->containers[i]);
        rc = found ? attach(b, &created) : 1;
    }
    if (rc == 0) /* mark as recently used, for the LRU cap */
        utimensat(AT_FDCWD, b->dir, NULL, 0);
    close(lk);
    if (rc != 0) {
        if (rc < 0)
            LOG_WARN("session unavailable (%s); using a private sandbox", strerror(-rc));
        b->dir[0] = '\0';
        return open_private(b, rq);
    }
    if (created && stale_ref(b, rq))
        expired_note(b, stale_ref(b, rq));
    LOG_INFO("%s session sandbox %s", created ? "started" : "attached to", b->cid);
    return 0;
}

/* One execution in the session: one connection. */
static int session_exec(struct shim_box *b, const char *code, struct shim_exec_result *out)
{
    int timeout = b->cfg->exec_timeout_s * 3000 + 30000; /* may queue behind another */
    int fd = connect_dir(b->dir), rc;
    cJSON *msg, *ans = NULL;

    if (fd < 0)
        return -EPIPE;
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "op", "exec");
    cJSON_AddStringToObject(msg, "code", code);
    rc = shim_proto_send(fd, msg, 10000);
    if (!rc)
        rc = shim_proto_recv(fd, &ans, timeout);
    if (!rc)
        rc = shim_proto_result_from_json(ans, out);
    cJSON_Delete(msg);
    cJSON_Delete(ans);
    close(fd);
    if (!rc)
        utimensat(AT_FDCWD, b->dir, NULL, 0);
    return rc;
}

int shim_box_exec(struct shim_box *b, const char *code, size_t len,
                  struct shim_exec_result *out)
{
    char *c;
    int rc, created, lk;

    if (!b)
        return -EINVAL;
    if (b->sb)
        return shim_sandbox_exec(b->sb, code, len, out);
    c = strndup(code, len);
    if (!c)
        return -ENOMEM;
    rc = session_exec(b, c, out);
    if (rc == -EPIPE || rc == -ECONNREFUSED || rc == -ENOENT) {
        /* the supervisor ended (idle TTL, evicted): start the session anew */
        char old[64];
        snprintf(old, sizeof(old), "%s", b->cid);
        lk = lock_identity(b->iddir);
        rc = lk < 0 ? lk : attach(b, &created);
        if (lk >= 0)
            close(lk);
        if (rc == 0) {
            if (created)
                expired_note(b, old);
            rc = session_exec(b, c, out);
        }
    }
    free(c);
    return rc;
}

const char *shim_box_container_id(const struct shim_box *b)
{
    return b ? b->cid : "";
}

const char *shim_box_take_note(struct shim_box *b)
{
    static __thread char note[512];

    if (!b || !b->note[0])
        return NULL;
    snprintf(note, sizeof(note), "%s", b->note);
    b->note[0] = '\0';
    return note;
}

void shim_box_close(struct shim_box *b)
{
    if (!b)
        return;
    shim_sandbox_close(b->sb); /* a session lives on in its supervisor */
    free(b);
}
