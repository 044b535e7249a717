/* tag.h - struct shim_sandbox_tag, shared by sandbox.h (its callers) and
 * the backends (sandbox_int.h), which must not include sandbox.h. */
#ifndef SHIM_SANDBOX_TAG_H
#define SHIM_SANDBOX_TAG_H

/* How a sandbox that must outlive this process is found again, for the
 * backends that keep such sandboxes themselves (e2b: by metadata; see
 * shim_sandbox_keeps_sessions in sandbox.h). Only hashes (32 hex
 * digits), never a key or a session id. */
struct shim_sandbox_tag {
    const char *owner;     /* the identity: the per-owner cap counts these */
    const char *session;   /* identity, session id and settings; NULL: the
                              sandbox is found by container only */
    const char *salt;      /* identity and settings: container ids are
                              derived and looked up with it */
    const char *container; /* a container id the request refers to (to
                              find when session is NULL), or NULL */
    int find_only;         /* only an existing sandbox will do (-ENOENT) */
    int cap;               /* sandboxes per owner at most */
    int ttl_s;             /* kept alive this long after each use */
};

#endif
