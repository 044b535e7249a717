/* sessiond.h - the two halves of codeshim-sessiond: the host of one
 * identity's sessions under one set of settings (host.c), and each
 * session, a process the host forks (serve.c). */
#ifndef SESSIOND_H
#define SESSIOND_H

#include "config.h"

#include <signal.h>

struct shim_config;
struct shim_sandbox;

/* Set by SIGTERM and SIGINT: the process ends what it serves and exits. */
extern volatile sig_atomic_t sessiond_stop;

/* Runs the host in dir (iddir/hosts/<settings>) until it has had no
 * session for cfg->session_ttl_s seconds, or SIGTERM. ready gets "R" once
 * its socket listens (then is closed). The exit status. */
int sessiond_host(const struct shim_config *cfg, const char *dir, const char *settings,
                  int ready);

/* What the library asked the host for: the session's directory
 * (iddir/<name>), the explicit container it is (or ""), and its idle limit
 * (the asking program's CODESHIM_SESSION_TTL). */
struct sessiond_open {
    char dir[SHIM_PATH_MAX];
    const char *bind;
    int ttl_s;
};

/* Runs one session until it is idle for o->ttl_s seconds, is closed, or
 * SIGTERM; then ends its sandbox and removes its directory. sb: a sandbox
 * the host opened for it (adopted here), or NULL to open one here. The
 * host's request is answered on reply ({"ok": true, "container_id"} once
 * the session's socket listens), which is then closed. The exit status. */
int sessiond_session(const struct shim_config *cfg, const struct sessiond_open *o,
                     const char *settings, struct shim_sandbox *sb, int reply);

#endif
