/* session_open.c - a request's sandbox (shim_session_open): which
 * session it is (a session id's, an explicit container's, the one owning
 * a container it refers to), attached to or started under the identity's
 * lock, the least recently used one closed at the identity's cap, one of
 * a deleted container replaced; and the containers found, ended and
 * dropped by the Containers API. See session_int.h. */
#include "session/session.h"
#include "session/session_int.h"

#include "base/fileio.h"
#include "base/log.h"
#include "store/cstore.h"
#include "store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
        if (!shim_session_is_name(e->d_name) || !strcmp(e->d_name, keep))
            continue;
        if (shim_fileio_join(p, sizeof(p), iddir, e->d_name) < 0 || lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (!shim_session_alive(p)) {
            shim_session_remove_dir(p);
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
        shim_session_ask_close(oldest, 5000);
    }
}

/* Attaches to the session in b->dir, starting it when needed. Sets
 * *created when the sandbox is new. Called with the identity locked. */
int shim_session_attach(struct shim_session *b, int *created)
{
    char p[SHIM_PATH_MAX + 8], cf[SHIM_PATH_MAX + 80];
    int rc;

    *created = 0;
    if (!shim_session_alive(b->dir)) {
        shim_session_remove_dir(b->dir);
        make_room(b->cfg, b->iddir, b->name);
        if ((rc = shim_store_private_dir(b->dir)) < 0)
            return rc;
        if ((rc = shim_session_start(b)) < 0) {
            shim_session_remove_dir(b->dir);
            return rc;
        }
        *created = 1;
    }
    if ((rc = shim_fileio_join(p, sizeof(p), b->dir, "cntr")) < 0 ||
        (rc = shim_store_read(p, b->cid, sizeof(b->cid), 1)) < 0)
        return rc;
    shim_session_container_file(b->iddir, b->cid, b->settings, cf, sizeof(cf));
    if (*created)
        shim_store_write(cf, b->name);
    return 0;
}

/* The session that owns container cid under this request's settings, if
 * it is alive (a container made under other settings is not found). */
int shim_session_find_owned(struct shim_session *b, const char *cid)
{
    char cf[SHIM_PATH_MAX + 80], name[65];

    shim_session_container_file(b->iddir, cid, b->settings, cf, sizeof(cf));
    if (shim_store_read(cf, name, sizeof(name), 1) < 0 || !shim_session_is_name(name))
        return 0;
    snprintf(b->name, sizeof(b->name), "%s", name);
    return shim_fileio_join(b->dir, sizeof(b->dir), b->iddir, name) == 0 && shim_session_alive(b->dir);
}

/* The attached session's container was deleted (or expired) meanwhile:
 * its sandbox is ended, and one is had again (1 when rq is keyed by
 * neither a session nor a container: a private sandbox then). Called
 * with the identity locked. */
static int replace_gone(struct shim_session *b, int keyed, int *created, char dead[64])
{
    int rc;

    dead[0] = '\0';
    if (!shim_cstore_gone(b->cfg, b->identity, b->cid))
        return 0;
    LOG_INFO("session sandbox %s: its container is gone; ending it", b->cid);
    snprintf(dead, 64, "%s", b->cid);
    shim_session_end_dir(b->dir);
    rc = keyed ? shim_session_attach(b, created) : 1;
    return rc == 0 && !strcmp(b->cid, dead) ? 1 : rc; /* not ended yet: not this one */
}

/* rq's session (an explicit container's owner, a keyed one, or the one
 * owning a container rq refers to), attached to or started: 0, 1 when rq
 * is keyed by neither a session nor a container and none it refers to
 * lives (a private sandbox then), or -errno. Called with the identity
 * locked. */
static int open_locked(struct shim_session *b, const struct shim_session_req *rq,
                       int *created, char dead[64])
{
    int rc, found = 0, keyed = b->bind[0] || rq->session_id;
    size_t i;

    if (b->bind[0] && shim_session_find_owned(b, b->bind)) {
        rc = shim_session_attach(b, created); /* a container of a session, named later */
    } else if (keyed) {
        shim_session_keyed_name(rq->identity, rq->session_id, b->bind, b->settings, b->name);
        rc = shim_fileio_join(b->dir, sizeof(b->dir), b->iddir, b->name);
        if (rc == 0)
            rc = shim_session_attach(b, created);
    } else {
        for (i = 0; i < rq->ncontainers && !found; i++)
            found = rq->containers[i] && shim_session_find_owned(b, rq->containers[i]);
        rc = found ? shim_session_attach(b, created) : 1;
    }
    if (rc == 0 && !*created)
        rc = replace_gone(b, keyed, created, dead);
    if (rc == 0) /* mark as recently used, for the LRU cap */
        utimensat(AT_FDCWD, b->dir, NULL, 0);
    return rc;
}

int shim_session_open(const struct shim_config *cfg, const struct shim_session_req *rq,
                      struct shim_session **out)
{
    struct shim_session *b = calloc(1, sizeof(*b));
    int lk, rc = 0, created = 0;
    char dead[64] = "";

    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    shim_session_settings(cfg, b->settings);
    *out = b;
    snprintf(b->identity, sizeof(b->identity), "%s", rq->identity ? rq->identity : "");
    if (rq->bind_container && strlen(rq->bind_container) < sizeof(b->bind))
        snprintf(b->bind, sizeof(b->bind), "%s", rq->bind_container);
    if ((rq->session_id || rq->ncontainers || b->bind[0]) && shim_sandbox_keeps_sessions(cfg)) {
        if (shim_store_identity_dir(cfg, rq->identity, b->iddir, sizeof(b->iddir)) < 0)
            b->iddir[0] = '\0'; /* no note of deletions then */
        return shim_session_open_remote(b, rq);
    }
    if (!rq->session_id && !rq->ncontainers && !b->bind[0])
        return shim_session_open_private(b, rq);
    if (shim_store_identity_dir(cfg, rq->identity, b->iddir, sizeof(b->iddir)) < 0)
        return rq->session_id || b->bind[0] ? SHIM_SESSION_NO_STORE : shim_session_open_private(b, rq);
    lk = shim_session_lock(b->iddir, LOCK_WAIT_MS);
    if (lk < 0) {
        LOG_WARN("session lock: %s; using a private sandbox", strerror(-lk));
        return shim_session_open_private(b, rq);
    }
    rc = open_locked(b, rq, &created, dead);
    close(lk);
    if (rc == SHIM_SESSION_USER_CAP || rc == SHIM_SESSION_NO_STORE)
        return rc;
    if (rc != 0) {
        if (rc < 0)
            LOG_WARN("session unavailable (%s); using a private sandbox", strerror(-rc));
        b->dir[0] = '\0';
        b->name[0] = '\0';
        return shim_session_open_private(b, rq);
    }
    b->fresh = created;
    if (created)
        shim_session_note_lost(b, dead[0] ? dead : shim_session_stale_ref(b, rq));
    else
        shim_session_take_deleted(b, dead); /* of an earlier container: this one lives */
    LOG_INFO("%s session sandbox %s", created ? "started" : "attached to", b->cid);
    return 0;
}

int shim_session_find_container(const struct shim_config *cfg, const char *identity,
                                const char *cid, const struct shim_http_net *net,
                                struct shim_session **out)
{
    struct shim_session *b = calloc(1, sizeof(*b));

    *out = NULL;
    if (!b)
        return -ENOMEM;
    if (!cid || strncmp(cid, "cntr_", 5) || strlen(cid) >= sizeof(b->bind)) {
        free(b);
        return -ENOENT;
    }
    b->cfg = cfg;
    shim_session_settings(cfg, b->settings);
    snprintf(b->identity, sizeof(b->identity), "%s", identity);
    snprintf(b->bind, sizeof(b->bind), "%s", cid);
    if (shim_sandbox_keeps_sessions(cfg)) { /* e2b: found in e2b, never made here */
        struct shim_session_req rq;
        memset(&rq, 0, sizeof(rq));
        rq.net = net;
        rq.identity = identity;
        rq.bind_container = b->bind;
        if (shim_session_remote_sandbox(cfg, &rq, b->settings, 1, &b->sb, b->name) != 0) {
            free(b);
            return -ENOENT;
        }
        snprintf(b->cid, sizeof(b->cid), "%s", b->bind);
        *out = b;
        return 0;
    }
    if (shim_store_identity_dir(cfg, identity, b->iddir, sizeof(b->iddir)) < 0 ||
        !shim_session_find_owned(b, cid)) { /* whichever session's container it is */
        free(b);
        return -ENOENT;
    }
    snprintf(b->cid, sizeof(b->cid), "%s", cid);
    *out = b;
    return 0;
}

void shim_session_drop(const struct shim_config *cfg, const char *identity, const char *cid,
                       const char *session, const struct shim_http_net *net)
{
    struct shim_session *live;
    char iddir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 80];
    int lk = -1;

    if (shim_store_identity_dir(cfg, identity, iddir, sizeof(iddir)) == 0) {
        if (session && shim_session_deleted_file(iddir, session, p, sizeof(p)) == 0 &&
            shim_store_write(p, cid) < 0)
            LOG_WARN("container %s: its session will not be told of its deletion", cid);
        if (!shim_sandbox_keeps_sessions(cfg))
            lk = shim_session_lock(iddir, LOCK_WAIT_MS); /* no open attaches meanwhile */
    }
    if (shim_session_find_container(cfg, identity, cid, net, &live) == 0) {
        LOG_INFO("container %s deleted: its sandbox is ended", cid);
        shim_session_end(live);
    }
    if (lk >= 0)
        close(lk);
}

void shim_session_end(struct shim_session *b)
{
    if (!b)
        return;
    if (!b->sb && b->dir[0])
        shim_session_end_dir(b->dir);
    if (b->sb) {
        shim_sandbox_end(b->sb);
        b->sb = NULL;
    }
    shim_session_close(b);
}
