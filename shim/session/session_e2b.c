/* session_e2b.c - sessions a backend keeps itself (e2b): no supervisor,
 * no lock; the backend finds its sandboxes again by tag, named here with
 * hashes that reveal neither the key nor the session id, and one of a
 * container deleted meanwhile is ended and another had. See
 * session_int.h. */
#include "session/session.h"
#include "session/session_int.h"

#include "base/log.h"
#include "base/sha256.h"
#include "store/cstore.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Opens the sandbox of rq's session (found again, or made), or of the
 * first container rq refers to that the backend still runs: 0 with *sb;
 * 1 when rq has no session id and none of its containers is there. The
 * backend finds and tags its sandboxes (sandbox/e2b.c); here they are
 * named with hashes that reveal neither the key nor the session id:
 *   owner   = H(identity)               the per-identity cap counts these
 *   salt    = H(identity, settings)     container ids derive from it
 *   session = shim_session_name(identity, session id, settings)
 * (shim_sha256_tagged_hex, 32 digits). */

/* One lookup (or, unless find_only, a sandbox made) in the backend:
 * by session name when session is set, else by container cid. */
static int remote_open(const struct shim_config *cfg, const struct shim_session_req *rq,
                       const char *settings, const char *session, const char *cid,
                       int find_only, struct shim_sandbox **sb)
{
    const char *owned[] = {rq->identity, ""}, *salted[] = {rq->identity, settings};
    char owner[65], salt[65];
    struct shim_sandbox_tag tag;

    shim_sha256_tagged_hex("codeshim-e2b-owner-v1", owned, 2, 16, owner);
    shim_sha256_tagged_hex("codeshim-e2b-salt-v1", salted, 2, 16, salt);
    memset(&tag, 0, sizeof(tag));
    tag.owner = owner;
    tag.salt = salt;
    tag.cap = cfg->session_cap;
    tag.ttl_s = cfg->session_ttl_s;
    tag.find_only = find_only || !session;
    tag.session = session;
    tag.container = session ? NULL : cid;
    return shim_sandbox_open_at(cfg, rq->net, &tag, sb);
}

/* name: the session's name when rq is keyed by one (else ""). An
 * explicit container rq names is first looked for as the container of
 * some session (one named later in tools[].container), then as its own
 * session. */
int shim_session_remote_sandbox(const struct shim_config *cfg, const struct shim_session_req *rq,
                                const char *settings, int find_only, struct shim_sandbox **sb,
                                char name[65])
{
    size_t i;
    int rc;

    name[0] = '\0';
    if (rq->bind_container &&
        (rc = remote_open(cfg, rq, settings, NULL, rq->bind_container, 1, sb)) != -ENOENT)
        return rc;
    if (rq->session_id || rq->bind_container) {
        shim_session_keyed_name(rq->identity, rq->session_id, rq->bind_container, settings, name);
        return remote_open(cfg, rq, settings, name, NULL, find_only, sb);
    }
    for (i = 0; i < rq->ncontainers; i++) {
        if (!rq->containers[i] || strncmp(rq->containers[i], "cntr_", 5))
            continue;
        rc = remote_open(cfg, rq, settings, NULL, rq->containers[i], 1, sb);
        if (rc != -ENOENT)
            return rc;
    }
    return 1;
}

static void remote_cid(struct shim_session *b)
{
    /* an explicit container keeps its own id, whatever the backend calls it */
    snprintf(b->cid, sizeof(b->cid), "%s", b->bind[0] ? b->bind : shim_sandbox_container_id(b->sb));
}

/* A session kept by the backend itself (e2b): no supervisor, no lock. A
 * sandbox of a container deleted (or expired) meanwhile is ended, and
 * another one had. */
int shim_session_open_remote(struct shim_session *b, const struct shim_session_req *rq)
{
    int rc = shim_session_remote_sandbox(b->cfg, rq, b->settings, 0, &b->sb, b->name);
    const char *old;
    char dead[64] = "";

    if (rc == 0) {
        remote_cid(b);
        if (shim_cstore_gone(b->cfg, rq->identity, b->cid)) {
            LOG_INFO("e2b sandbox %s: its container is gone; ending it", b->cid);
            snprintf(dead, sizeof(dead), "%s", b->cid);
            shim_sandbox_end(b->sb);
            b->sb = NULL;
            rc = shim_session_remote_sandbox(b->cfg, rq, b->settings, 0, &b->sb, b->name);
            if (rc == 0) {
                remote_cid(b);
                if (!strcmp(b->cid, dead)) { /* it could not be ended: not this one */
                    shim_sandbox_close(b->sb);
                    b->sb = NULL;
                    rc = 1;
                }
            }
        }
    }
    if (rc == 1)
        return shim_session_open_private(b, rq);
    if (rc < 0)
        return rc;
    b->fresh = shim_sandbox_is_new(b->sb);
    if (b->fresh || dead[0])
        shim_session_note_lost(b, dead[0] ? dead : NULL);
    else
        shim_session_take_deleted(b, dead); /* of an earlier container: this one lives */
    if (!b->note[0] && (old = shim_session_stale_ref(b, rq)) != NULL)
        shim_session_note_expired(b, old);
    return 0;
}

/* After an execution in a backend's own sandbox: it may have replaced a
 * vanished one (a new container id, and a note for the model). */
void shim_session_remote_after(struct shim_session *b)
{
    const char *note = shim_sandbox_take_note(b->sb);
    char old[64], gone[64];
    size_t n;

    snprintf(old, sizeof(old), "%s", b->cid);
    remote_cid(b);
    if (note)
        b->fresh = b->renewed = 1;
    if (note && b->bind[0])
        return; /* the container's own note says it (files.h), under its id */
    if (note && strcmp(old, b->cid) && shim_session_take_deleted(b, gone) == 0 && !strcmp(gone, old)) {
        shim_session_note_deleted(b, old); /* not vanished: a deletion ended it */
        return;
    }
    n = strlen(b->note);
    if (note)
        snprintf(b->note + n, sizeof(b->note) - n, "%s", note);
}
