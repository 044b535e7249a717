/* sessiond.h - the parts of codeshim-sessiond: the user's sandbox host
 * (host.c), its pool of forked sandboxes (pool.c), and each session, a
 * process of its own that borrows one of them (serve.c). */
#ifndef SESSIOND_H
#define SESSIOND_H

#include "system/config.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

struct shim_config;
struct shim_sandbox;

/* Set by SIGTERM and SIGINT: the process ends what it serves and exits. */
extern volatile sig_atomic_t sessiond_stop;

/* The user's sandbox host (sessiond/pool.c): one per user, sandbox
 * settings and build, shared by every program and identity of the user.
 * It keeps SESSIOND_POOL sandboxes forked from its fork server ready and
 * lends each, once, to one request ({"op":"take"}): its control socket is
 * passed (SCM_RIGHTS) and the host keeps what ends it, so that the
 * program only closes the socket and the host removes the rest (cgroup,
 * processes) off the program's path. A sandbox is lent once and never
 * comes back: no two requests, and so no two identities, share one. */
#define SESSIOND_POOL 4
#define SESSIOND_LENT 1024 /* lent and not ended yet, at once */
struct sessiond_pool {
    const struct shim_config *cfg;
    struct shim_sandbox *ready[SESSIOND_POOL]; /* shared with the refill thread */
    int nready;
    int warm;    /* the fork server is up (1): the thread may fork */
    int stop;    /* the thread is to end */
    int running; /* the refill thread was started */
    pthread_t thread;
    struct shim_sandbox *lent[SESSIOND_LENT]; /* the main thread's */
    int nlent;
    unsigned long lent_total; /* lent since the host started */
};
/* Has the refill thread (started at the first call) fork sandboxes until
 * SESSIOND_POOL are ready, while warm (the fork server is up): called
 * after each look at the fork server; it returns at once. */
void sessiond_pool_fill(struct sessiond_pool *p, int warm);
/* How many are ready now. */
int sessiond_pool_ready(struct sessiond_pool *p);
/* Closes each lent sandbox that ended (its borrower closed it, or it
 * died), which removes its cgroup: how many. */
int sessiond_pool_reap(struct sessiond_pool *p);
/* Lends a sandbox (its control socket *fd, the caller's to pass on and
 * close; *pid its supervisor), kept among the lent ones until it ends:
 * 0, -EAGAIN while the fork server imports, -EUSERS past SESSIOND_LENT,
 * or -ECHILD when none can be forked. */
int sessiond_pool_lend(struct sessiond_pool *p, int warm, int *fd, long *pid);
/* Answers a take on fd (then closed): b"S" with the socket and
 * {"ok":true,"pid"}, or b"N" and {"ok":false,"error"} when none can be
 * had now (the fork server still imports, or failed). */
void sessiond_pool_take(struct sessiond_pool *p, int fd, int warm);
/* Ends every sandbox of the pool, ready or lent. */
void sessiond_pool_end(struct sessiond_pool *p);

/* Runs the user's sandbox host in dir (<runtime>/hosts/<settings>-
 * <build>) until it has had nothing lent and no session for
 * cfg->session_ttl_s seconds, or SIGTERM. ready gets "R" once its socket
 * listens (then is closed). The exit status. */
int sessiond_host(const struct shim_config *cfg, const char *dir, const char *settings,
                  int ready);

/* What a session is started with: its directory (<identity dir>/<name>),
 * the explicit container it is (or ""), its idle limit (the asking
 * program's CODESHIM_SESSION_TTL), and the sandbox lent to it (its
 * control socket and supervisor), or lent_pid 0 to open one the cold
 * way. */
struct sessiond_open {
    char dir[SHIM_PATH_MAX];
    const char *bind;
    int ttl_s;
    int lent_fd;
    long lent_pid;
};

/* Runs one session until it is idle for o->ttl_s seconds, is closed, or
 * SIGTERM; then ends its sandbox and removes its directory. The request
 * that started it is answered on reply ({"ok": true, "container_id"} once
 * the session's socket listens, or why not), which is then closed. The
 * exit status. */
int sessiond_session(const struct shim_config *cfg, const struct sessiond_open *o,
                     const char *settings, int reply);

/* Connections accepted and not yet read from (accept.c). Both the host and
 * each session poll them together with their listening socket, so that a
 * peer that connects and sends nothing (or not yet) holds one of
 * SESSIOND_WAITING slots, never the process: requests are read in the
 * order they begin to arrive. A connection idle for SESSIOND_IDLE_MS is
 * closed, and so is the oldest when every slot is taken. Once a request
 * has begun it must arrive whole within SESSIOND_REQUEST_MS (a slow
 * sender holds the process that long at most). */
#define SESSIOND_WAITING 16
#define SESSIOND_IDLE_MS 10000
#define SESSIOND_REQUEST_MS 5000
struct sessiond_waiting {
    int fd[SESSIOND_WAITING];
    int64_t since[SESSIOND_WAITING]; /* accepted, shim_clock_ms() */
    int n;
};

/* The next connection whose request has begun to arrive (or that closed):
 * the caller's to read and close. New connections on lfd are accepted
 * meanwhile, each greeted with greet(fd, ctx) when greet is not NULL (one
 * it fails is closed). Waits at most timeout_ms: the fd, -ETIMEDOUT, or
 * -EINTR when a signal came (SIGCHLD, SIGTERM: the caller looks). */
int sessiond_next(struct sessiond_waiting *w, int lfd, int timeout_ms,
                  int (*greet)(int fd, void *ctx), void *ctx);
/* Closes every waiting connection. */
void sessiond_waiting_close(struct sessiond_waiting *w);

#endif
