/* session.h - which sandbox a request's code runs in: a private sandbox
 * for one request, or a session's, kept across requests and program runs
 * by a supervisor process (sessiond/). The session key (identity, session
 * id, sandbox settings), the runtime directory's layout, the caps and the
 * at-most-once rule for executions are told in doc/ARCHITECTURE.md,
 * "Sessions". */
#ifndef SHIM_SESSION_H
#define SHIM_SESSION_H

#include "sandbox/sandbox.h"

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

struct shim_config;
struct shim_session;

struct shim_session_req {
    const char *identity;    /* shim_identity_of() of the request */
    const char *session_id;  /* metadata.session_id, or NULL */
    const char *const *containers; /* container ids the request refers to */
    size_t ncontainers;
    /* an explicit container (cstore.h) the sandbox is: the session is
     * keyed by it and reports it as its container id; NULL if none */
    const char *bind_container;
    /* the program's transport settings, for backends reached over HTTP
     * (e2b); NULL: libcurl's defaults */
    const struct shim_http_net *net;
};

/* Opens the sandbox for a request. 0 or -errno; two refusals end the
 * request with an error answer, shim_store_why() saying why:
 * SHIM_SESSION_NO_STORE, a session (a session id, an explicit container)
 * without a private runtime directory; SHIM_SESSION_USER_CAP, a new
 * session past the user's caps (quota.h). */
#define SHIM_SESSION_NO_STORE (-ENOLINK)
#define SHIM_SESSION_USER_CAP (-EUSERS)
int shim_session_open(const struct shim_config *cfg, const struct shim_session_req *rq,
                  struct shim_session **out);
/* Runs code; same contract as shim_sandbox_exec_until (stop may be
 * NULL). A session's supervisor is told to interrupt the code by the
 * connection closing (serve.c). A session whose
 * supervisor cannot be reached is started afresh (and the note says so);
 * any later failure is a SHIM_EXEC_FAILED result saying what happened. */
int shim_session_exec(struct shim_session *b, const char *code, size_t len,
                      const struct shim_exec_stop *stop, struct shim_exec_result *out);
const char *shim_session_container_id(const struct shim_session *b);
/* A note for the model, once: earlier state is gone (NULL if none). */
const char *shim_session_take_note(struct shim_session *b);
void shim_session_close(struct shim_session *b);

/* The files of the sandbox's /mnt/data (sandbox.h's contract): through
 * the supervisor for a session (in chunks), directly for a private
 * sandbox. 0 or -errno. */
int shim_session_file_get(struct shim_session *b, const char *name, size_t max, char **out,
                          size_t *len);
int shim_session_file_put(struct shim_session *b, const char *name, const void *data,
                          size_t len);
/* Removes a file of the sandbox's /mnt/data (sandbox.h's contract). */
int shim_session_file_remove(struct shim_session *b, const char *name);
/* The running sandbox of container cid, whichever session's it is (a
 * session id's, an explicit container's, or one named later in
 * tools[].container), if there is one (none is started): 0 with *out
 * (close it), or -ENOENT. File calls on it fail (-ESTALE) once it is
 * another container's. net: the program's CA, proxy and resolve
 * settings, for a backend reached over HTTP (e2b), or NULL. */
int shim_session_find_container(const struct shim_config *cfg, const char *identity,
                                const char *cid, const struct shim_http_net *net,
                                struct shim_session **out);
/* Ends a found session's sandbox now (its supervisor exits, waited for)
 * and closes b. */
void shim_session_end(struct shim_session *b);
/* Container cid was deleted: its running sandbox, if any, is ended (under
 * the identity's lock: no request attaches to it meanwhile), and session
 * (shim_session_key of the session it was made for, or "") is left a
 * mark, so that the session's next sandbox tells the model its container
 * was deleted. net as for shim_session_find_container. */
void shim_session_drop(const struct shim_config *cfg, const char *identity, const char *cid,
                       const char *session, const struct shim_http_net *net);
/* The session's name (a hash, shim_session_name) when the sandbox is a
 * session's, else "". */
const char *shim_session_key(const struct shim_session *b);
/* Whether the sandbox was started by this open, or since (its /mnt/data
 * was empty). */
int shim_session_is_new(const struct shim_session *b);
/* Whether a new sandbox replaced the one in use since the open (or the
 * last call): a lost one, started again. Cleared by the call. */
int shim_session_take_renewed(struct shim_session *b);

/* The fingerprint of cfg's sandbox settings: backend, isolation on or
 * off, interpreter, bwrap path, memory, process, disk, file-size and CPU
 * limits, execution timeout and output cap; for e2b also its URLs,
 * domain, template, internet access and a hash of its key. 32 hex digits (pure; out must
 * hold 65 bytes). codeshim-sessiond refuses to start under other settings. */
void shim_session_settings(const struct shim_config *cfg, char out[65]);
/* The build of codeshim whose sandbox host exe is (its file: device,
 * inode, size, modification time) with what its fork server imports: 16
 * hex digits into out (65 bytes), part of the host's directory name, so
 * that no program uses a host of another build. 0 or -errno. */
int shim_session_build(const struct shim_config *cfg, const char *exe, char out[65]);
/* Starts argv[0] (an absolute path) with argv, codeshim's own settings
 * in its environment (and PATH, TMPDIR), stdin/out/err on /dev/null, and
 * fds[0..nfds) as its descriptors 3.. (no other one leaks), in a session
 * of its own when own_session. Not waited for: its pid, or -errno. The
 * library starts codeshim-sessiond so; the host its sessions' processes. */
#define SHIM_SPAWN_FDS 4
pid_t shim_session_spawn(const struct shim_config *cfg, char *const argv[], const int *fds,
                         int nfds, int own_session);

/* Removes a session's directory (dir: <identity dir>/<session>) and the
 * map entry of its container cid under settings: what a supervisor leaves
 * when it ends. */
void shim_session_remove(const char *dir, const char *cid, const char *settings);
/* Asks the supervisor of the session directory dir to end its session
 * (SIGTERM by its pid file when it does not answer): `codeshim sessions
 * stop`. */
void shim_session_stop(const char *dir);
/* The identity's lock (iddir/.lock, flock): sessions start, and a session
 * host ends, only under it. The locked descriptor (closing it unlocks),
 * or -ETIMEDOUT after wait_ms (0: one try), or -errno. */
int shim_session_lock(const char *iddir, int wait_ms);
/* 1 when n is a session's directory name (32 lowercase hex digits). */
int shim_session_is_name(const char *n);
/* A session's directory name (pure; out must hold 65 bytes). */
void shim_session_name(const char *identity, const char *session_id, const char *settings,
                       char out[65]);

#endif
