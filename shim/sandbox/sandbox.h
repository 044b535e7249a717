/* sandbox.h - what the loop and sessions see of a sandbox.
 *
 * A sandbox is a stateful Python interpreter with notebook semantics: one
 * globals dict for its whole life; each execution returns stdout and stderr
 * in order, the value of a trailing expression, the traceback text of an
 * exception, and figures as PNG. Backends (local, e2b) hide behind an ops
 * table (sandbox_int.h); this header is all that upper layers include.
 *
 * Ownership: shim_sandbox_open returns a sandbox the caller must close;
 * shim_exec_result fields are owned by the result, released by
 * shim_exec_result_free. */
#ifndef SHIM_SANDBOX_H
#define SHIM_SANDBOX_H

#include "api/result.h"
#include "sandbox/tag.h"
#include "system/http.h"

#include <stddef.h>

struct shim_config;
struct shim_sandbox;


/* Creates a sandbox with the backend named by cfg->sandbox. 0 or -errno.
 * Any thread may open, use and close a sandbox (one call at a time per
 * sandbox); the local backend's processes live until close, or until the
 * host process ends (spawn.c). A fresh sandbox every time: a program's
 * are started cold, here, or lent by the user's sandbox host
 * (shim_sandbox_open_lent). */
int shim_sandbox_open(const struct shim_config *cfg, struct shim_sandbox **out);
/* shim_sandbox_open with the program's transport settings (for backends
 * that reach their sandboxes over HTTP; net may be NULL) and a tag (NULL:
 * a private sandbox). -ENOENT: the tag names only a container, and it is
 * not there. */
int shim_sandbox_open_at(const struct shim_config *cfg, const struct shim_http_net *net,
                         const struct shim_sandbox_tag *tag, struct shim_sandbox **out);
/* 1 when cfg's backend keeps session sandboxes itself, found again
 * through shim_sandbox_open_at's tag (no supervisor process needed). */
int shim_sandbox_keeps_sessions(const struct shim_config *cfg);
/* A note for the model, once (the backend replaced a vanished sandbox),
 * or NULL. Borrowed until the next call. */
const char *shim_sandbox_take_note(struct shim_sandbox *sb);
/* Runs code. Returns 0 with *out filled (whatever the code did: errors in
 * the code, timeouts and sandbox failures are reported in out->status and
 * out->logs), or -errno only when no result could be produced at all. */
int shim_sandbox_exec(struct shim_sandbox *sb, const char *code, size_t len,
                      struct shim_exec_result *out);
/* Asked about every SHIM_EXEC_STOP_TICK_MS while an execution runs:
 * nonzero interrupts it (the request that ran it is over: its time limit,
 * or its program said stop). The interpreter is then restarted, as after
 * its own time limit, so its state is lost and the sandbox's next
 * execution says so; the result says the code was interrupted. */
#define SHIM_EXEC_STOP_TICK_MS 50
struct shim_exec_stop {
    int (*fn)(void *ctx);
    void *ctx;
};
/* shim_sandbox_exec, interrupted when stop says so (stop NULL: never).
 * The e2b backend asks stop as its /execute stream moves and about once a
 * second while it waits (libcurl's progress callback), and while it waits
 * for a session's sandbox that another request here is using. */
int shim_sandbox_exec_until(struct shim_sandbox *sb, const char *code, size_t len,
                            const struct shim_exec_stop *stop, struct shim_exec_result *out);
/* A file of /mnt/data (name relative to it, as result.h lists them) into a
 * new buffer (caller frees) of at most max bytes: 0, -EFBIG, -ENOENT (no
 * such regular file: symlinks are never followed), -ENOTSUP (the backend
 * has no files), or -errno. */
int shim_sandbox_file_get(struct shim_sandbox *sb, const char *name, size_t max, char **out,
                          size_t *len);
/* Writes /mnt/data/name (a plain name: no "/") whole; the code sees the
 * old file or the new one, never a part. 0 or -errno. */
int shim_sandbox_file_put(struct shim_sandbox *sb, const char *name, const void *data,
                          size_t len);
/* Removes /mnt/data/name (relative, as result.h lists them; never through
 * a symlink), a regular file: 0, -ENOENT when there is none, -ENOTSUP
 * (the backend has no files), or -errno. */
int shim_sandbox_file_remove(struct shim_sandbox *sb, const char *name);
/* 1 when the sandbox was made by its open (a tagged one that was not found
 * again, or any private one): its /mnt/data is empty. */
int shim_sandbox_is_new(const struct shim_sandbox *sb);
/* "cntr_" + 48 hex, stable for the sandbox's life. Borrowed. */
const char *shim_sandbox_container_id(const struct shim_sandbox *sb);
void shim_sandbox_close(struct shim_sandbox *sb);

/* Sandboxes forked from a fork server (only codeshim-sessiond's sandbox
 * host keeps one; it lends them, below). Their processes are not
 * children of this process (the local backend's are the fork server's).
 * - keep_warm: start what makes such sandboxes fast now (the fork
 *   server); call it again to keep it so. 1 when it is up, 0 while it
 *   gets ready, -ENOTSUP when cfg's backend or settings have none (or it
 *   failed).
 * - open_forked: opens only such a sandbox; -EAGAIN when none can be had
 *   now. */
int shim_sandbox_keep_warm(const struct shim_config *cfg);
int shim_sandbox_open_forked(const struct shim_config *cfg, struct shim_sandbox **out);
/* Lending a sandbox to another process (the sandbox host, sessiond/,
 * lends the pooled sandboxes of its fork server to programs' requests).
 * - lend, in the host: a sandbox from open_forked that never ran code, up
 *   (its hello read): its control socket moves to *fd (the caller sends it
 *   and closes it), its pid to *pid; sb keeps what ends it (its life
 *   socket and cgroup). 0 or -errno (not such a sandbox, or it died).
 * - life_fd: the descriptor that becomes readable once a lent sandbox
 *   ended (the borrower closed its socket, or it died): close sb then
 *   (which removes its cgroup); -1 for other sandboxes.
 * - open_lent, in the borrower: a sandbox made of a lent control socket
 *   (fd, adopted; closed on failure) and pid. Closing it only closes the
 *   socket; a lost one is started again the cold way. */
int shim_sandbox_lend(struct shim_sandbox *sb, int *fd, long *pid);
/* Removes what the sandboxes of processes that are gone left behind (the
 * local backend: their cgroups, once empty, which any sandbox start on
 * the machine also removes). The sandbox host calls it as it starts and
 * as it ends, so that a host that was killed (its sandboxes die with its
 * fork server) leaves nothing once its successor's TTL has passed. */
void shim_sandbox_tidy(const struct shim_config *cfg);
int shim_sandbox_life_fd(const struct shim_sandbox *sb);
int shim_sandbox_open_lent(const struct shim_config *cfg, int fd, long pid,
                           struct shim_sandbox **out);
/* Ends the sandbox now, also one its backend keeps for a session (its
 * container was deleted), and closes it. */
void shim_sandbox_end(struct shim_sandbox *sb);

#endif
