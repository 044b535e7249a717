/* sandbox_int.h - the backend ops table (curl's vtls pattern).
 *
 * Only sandbox.c and the backends include this. A backend returns raw
 * results; sandbox.c applies the common policy (output cap and truncation
 * note, timing, container ids). */
#ifndef SHIM_SANDBOX_INT_H
#define SHIM_SANDBOX_INT_H

#include "sandbox.h"

struct shim_sandbox_ops {
    const char *name;
    /* Start a sandbox; *state is the backend's own. 0 or -errno. */
    int (*create)(const struct shim_config *cfg, void **state);
    /* Run code; fill out (logs uncapped but bounded by the backend). Same
     * contract as shim_sandbox_exec. */
    int (*exec)(void *state, const char *code, size_t len,
                struct shim_exec_result *out);
    /* Stop everything the sandbox started and free state. */
    void (*destroy)(void *state);
};

extern const struct shim_sandbox_ops shim_sandbox_local;

#endif
