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

#include <stddef.h>

struct shim_config;
struct shim_sandbox;

enum shim_exec_status {
    SHIM_EXEC_OK = 0,      /* ran to the end */
    SHIM_EXEC_ERROR = 1,   /* the code raised; logs hold the traceback */
    SHIM_EXEC_TIMEOUT = 2, /* wall-clock limit hit; interpreter restarted */
    SHIM_EXEC_FAILED = 3,  /* the sandbox itself failed; logs say why */
};

struct shim_exec_image {
    char *mime;   /* "image/png" */
    char *base64; /* payload, no data: prefix */
};

struct shim_exec_result {
    enum shim_exec_status status;
    char *logs; /* NUL-terminated text for the model and outputs[].logs,
                   already capped (with a visible truncation note) */
    size_t logs_len;
    struct shim_exec_image *images;
    size_t nimages;
    char **files; /* names of files in the working directory after the run
                     (relative to it, sorted; regular files only) */
    size_t nfiles;
    int files_changed; /* the listing (names, sizes or times) differs from
                          the one after the previous execution */
    double seconds; /* wall-clock duration of the execution */
};

void shim_exec_result_free(struct shim_exec_result *r);

/* Creates a sandbox with the backend named by cfg->sandbox. 0 or -errno.
 * Any thread may open, use and close a sandbox (one call at a time per
 * sandbox); the local backend's processes live until close, or until the
 * host process ends (spawn.c). A process that opens sandboxes repeatedly
 * gets them from a warm spare started in advance (local_spare.c): still a
 * fresh sandbox every time. */
int shim_sandbox_open(const struct shim_config *cfg, struct shim_sandbox **out);
/* Runs code. Returns 0 with *out filled (whatever the code did: errors in
 * the code, timeouts and sandbox failures are reported in out->status and
 * out->logs), or -errno only when no result could be produced at all. */
int shim_sandbox_exec(struct shim_sandbox *sb, const char *code, size_t len,
                      struct shim_exec_result *out);
/* "cntr_" + 48 hex, stable for the sandbox's life. Borrowed. */
const char *shim_sandbox_container_id(const struct shim_sandbox *sb);
void shim_sandbox_close(struct shim_sandbox *sb);

/* What the local backend did in this process, for tests and benchmarks
 * (a forked child starts from zero). */
struct shim_sandbox_stats {
    unsigned long opened;         /* local sandboxes opened */
    unsigned long spares_started; /* warm spares started (local_spare.c) */
    unsigned long spares_taken;   /* opens that got a warm spare */
    unsigned long spares_dropped; /* spares ended unused: other settings,
                                     or not healthy */
    long spare_pid; /* the waiting spare's first process (bwrap), or 0 */
    int spare_starting; /* a spare is being started */
};
void shim_sandbox_stats(struct shim_sandbox_stats *out);

#endif
