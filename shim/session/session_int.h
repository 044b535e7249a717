/* session_int.h - what the session files share; nothing but them includes
 * it (everyone else sees session.h). The files, lowest first (each calls
 * only those above it in this list):
 *   session.c       names, the runtime directory's layout (a session's
 *                   directory, its socket, the container map, the marks
 *                   of deleted containers), the model's notes, the small
 *                   accessors
 *   session_host.c  the user's sandbox host: started when none answers,
 *                   asked for a lent sandbox (a private request's) and
 *                   for a session's supervisor; a supervisor started
 *                   alone where there is no host
 *   session_e2b.c   sessions the backend keeps itself, found by tag (e2b)
 *   session_open.c  a request's sandbox: attach-or-start under the
 *                   identity's lock, the LRU cap, containers found, ended
 *                   and dropped
 *   session_exec.c  the channel to a session's supervisor: one connection
 *                   per execution, sent at most once, and the file calls */
#ifndef SHIM_SESSION_INT_H
#define SHIM_SESSION_INT_H

#include "system/config.h"

#include <stddef.h>

/* session.h's (not included: it is session.c's, the lowest of the files) */
struct shim_sandbox;
struct shim_session_req;

#define NAME_HEX 32 /* 128 bits of SHA-256 per path component */
#define LOCK_WAIT_MS 30000
#define HOST_OPEN_MS 60000 /* a session's sandbox started the cold way */

struct shim_session {
    const struct shim_config *cfg;
    struct shim_sandbox *sb; /* a private sandbox; NULL for a session */
    char iddir[SHIM_PATH_MAX];
    char dir[SHIM_PATH_MAX]; /* the session's directory */
    char name[65];
    char settings[65]; /* shim_session_settings(cfg) */
    char cid[64];
    char bind[64]; /* the explicit container this session is, or "" */
    char identity[65];
    int fresh;     /* its sandbox started with this open, or since */
    int renewed;   /* a new sandbox since the open (shim_session_take_renewed) */
    char note[512];
};

/* ---- session.c ---- */

/* The session a request's code runs in: an explicit container's own
 * (bind, keyed by its id) when there is one, else its session id's. */
void shim_session_keyed_name(const char *identity, const char *session_id, const char *bind,
                             const char *settings, char out[65]);
/* The map entry naming the session of container cid, under settings. */
void shim_session_container_file(const char *iddir, const char *cid, const char *settings,
                                 char *out, size_t n);
/* A connection to the supervisor (or host) listening in dir, or -errno. */
int shim_session_connect(const char *dir);
/* 1 when something answers on dir's socket. */
int shim_session_alive(const char *dir);
/* Removes a session's directory and the files its supervisor leaves. */
void shim_session_remove_dir(const char *dir);
/* Asks a supervisor to end its session; falls back to SIGTERM by pid. */
void shim_session_ask_close(const char *dir, int timeout_ms);
/* Ends the session in dir and waits (boundedly) until it no longer
 * answers: nothing attaches to it afterwards. */
void shim_session_end_dir(const char *dir);
/* iddir/d-<session>: the container of that session a deletion ended, so
 * that the session's next sandbox can tell the model. */
int shim_session_deleted_file(const char *iddir, const char *name, char *out, size_t n);
/* The container a deletion ended for b's session, taken (""/-ENOENT if
 * none). */
int shim_session_take_deleted(struct shim_session *b, char out[64]);
/* b->note: the sandbox old expired (or had other settings); container
 * gone was deleted. */
void shim_session_note_expired(struct shim_session *b, const char *old);
void shim_session_note_deleted(struct shim_session *b, const char *gone);
/* b's sandbox is new and the one before it (old, or NULL if unknown) is
 * gone: the model is told why, when a deletion ended it, else that it
 * expired (nothing when old is unknown and nothing was deleted). */
void shim_session_note_lost(struct shim_session *b, const char *old);
/* A referred-to container that is not the one in use, if any. */
const char *shim_session_stale_ref(const struct shim_session *b, const struct shim_session_req *rq);

/* ---- session_host.c ---- */

/* Starts b's session in its host, starting the host first if none
 * answers. Called with the identity locked (a host ends only under it). */
int shim_session_start(struct shim_session *b);
/* A private sandbox for rq: lent by the user's sandbox host, else
 * started the cold way. */
int shim_session_open_private(struct shim_session *b, const struct shim_session_req *rq);

/* ---- session_e2b.c ---- */

/* name: the session's name when rq is keyed by one (else ""). An
 * explicit container rq names is first looked for as the container of
 * some session (one named later in tools[].container), then as its own
 * session. */
int shim_session_remote_sandbox(const struct shim_config *cfg, const struct shim_session_req *rq,
                                const char *settings, int find_only, struct shim_sandbox **sb,
                                char name[65]);
/* A session kept by the backend itself (e2b): no supervisor, no lock. A
 * sandbox of a container deleted (or expired) meanwhile is ended, and
 * another one had. */
int shim_session_open_remote(struct shim_session *b, const struct shim_session_req *rq);
/* After an execution in a backend's own sandbox: it may have replaced a
 * vanished one (a new container id, and a note for the model). */
void shim_session_remote_after(struct shim_session *b);

/* ---- session_open.c ---- */

/* Attaches to the session in b->dir, starting it when needed. Sets
 * *created when the sandbox is new. Called with the identity locked. */
int shim_session_attach(struct shim_session *b, int *created);
/* The session that owns container cid under this request's settings, if
 * it is alive (a container made under other settings is not found). */
int shim_session_find_owned(struct shim_session *b, const char *cid);

#endif
