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

/* spawn.c: starts a process like posix_spawn, as another user if asked,
 * from one long-lived thread of the host (so its parent-death signal fires
 * only when the host process ends). fds[i] becomes descriptor i in the
 * child (each fds[i] >= nfds); every other descriptor is closed; new
 * session; default signal dispositions, empty mask; cwd if not NULL; with
 * setid, no supplementary groups and uid/gid for all three ids (the
 * caller must be root). 0 or -errno (the errno of the failed step, execve's
 * included). */
#include <sys/types.h>
struct shim_spawn {
    const char *path;
    char *const *argv;
    char *const *envp;
    const int *fds;
    int nfds;
    const char *cwd;
    int setid;
    uid_t uid;
    gid_t gid;
};
int shim_sandbox_spawn(const struct shim_spawn *s, pid_t *pid);
/* Runs fn(arg) on that same thread when it has no spawn to make; the
 * spawns fn asks for are made right there. One job at a time: -EBUSY
 * while one waits. A forked child forgets the parent's job. 0 or -errno
 * (no thread could be started). */
int shim_sandbox_spawn_later(void (*fn)(void *), void *arg);

/* seccomp.c: a new memfd (close-on-exec, at offset 0) holding the
 * sandbox's seccomp filter as BPF, for bwrap --seccomp. fd or -errno. */
int shim_sandbox_seccomp_fd(void);

#endif
