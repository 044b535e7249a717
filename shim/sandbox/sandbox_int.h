/* sandbox_int.h - the backend ops table (curl's vtls pattern).
 *
 * Only sandbox.c and the backends include this. A backend returns raw
 * results; sandbox.c applies the common policy (output cap and truncation
 * note, timing, container ids). */
#ifndef SHIM_SANDBOX_INT_H
#define SHIM_SANDBOX_INT_H

#include "api/result.h"
#include "sandbox/tag.h"

struct shim_config;
struct shim_http_net;
struct shim_exec_stop;

struct shim_sandbox_ops {
    const char *name;
    /* Start a sandbox; *state is the backend's own. 0 or -errno. */
    int (*create)(const struct shim_config *cfg, void **state);
    /* Run code; fill out (logs uncapped but bounded by the backend). Same
     * contract as shim_sandbox_exec. */
    int (*exec)(void *state, const char *code, size_t len,
                struct shim_exec_result *out);
    /* Optional: exec, interrupted when stop says so (sandbox.h). */
    int (*exec_until)(void *state, const char *code, size_t len,
                      const struct shim_exec_stop *stop, struct shim_exec_result *out);
    /* Stop everything the sandbox started and free state. */
    void (*destroy)(void *state);
    /* The files of /mnt/data between executions (shim_sandbox_file_get,
     * _put); NULL when the backend has none. */
    int (*file_get)(void *state, const char *name, size_t max, char **out, size_t *len);
    int (*file_put)(void *state, const char *name, const void *data, size_t len);
    /* Optional: removes a file of /mnt/data (shim_sandbox_file_remove). */
    int (*file_remove)(void *state, const char *name);
    /* Optional: 1 when the open made the sandbox (a tagged one was not
     * found again): its /mnt/data is empty. */
    int (*is_new)(void *state);
    /* Optional: end the sandbox now, even one kept for a session (its
     * container was deleted); destroy still follows. */
    void (*end)(void *state);
    /* Optional, for backends whose sandboxes live elsewhere (e2b): create
     * with the program's transport settings (net, may be NULL) and, for a
     * sandbox to be found again, its tag (NULL: a private one); -ENOENT
     * when the tag names only a container that is not there. Used instead
     * of create when set. */
    int (*create_at)(const struct shim_config *cfg, const struct shim_http_net *net,
                     const struct shim_sandbox_tag *tag, void **state);
    /* Optional: the backend's own container id (NULL: the dispatcher's). */
    const char *(*container_id)(void *state);
    /* Optional: a note for the model, once (NULL if none). */
    const char *(*take_note)(void *state);
    /* Optional: sandboxes forked from a fork server (sandbox.h,
     * shim_sandbox_keep_warm and open_forked). */
    int (*warm)(const struct shim_config *cfg);
    int (*create_forked)(const struct shim_config *cfg, void **state);
    /* Optional: lending sandboxes to other processes (sandbox.h,
     * shim_sandbox_lend and the two after it). */
    int (*lend)(void *state, int *fd, long *pid);
    int (*life_fd)(void *state);
    int (*create_lent)(const struct shim_config *cfg, int fd, long pid, void **state);
    /* Optional: shim_sandbox_tidy (sandbox.h). */
    void (*tidy)(const struct shim_config *cfg);
};

extern const struct shim_sandbox_ops shim_sandbox_local;
extern const struct shim_sandbox_ops shim_sandbox_e2b;

/* spawn.c: starts a process like posix_spawn, as another user if asked,
 * from one long-lived thread of the host (so its parent-death signal fires
 * only when the host process ends). In the child, in this order: "0"
 * written to each join descriptor (cgroup.procs: the child and all it
 * starts are in those cgroups from the start), oom_score_adj if not 0;
 * fds[i] becomes descriptor i in the child (each fds[i] >= nfds); every
 * other descriptor is closed; new session; default signal dispositions,
 * empty mask; cwd if not NULL; with setid, no supplementary groups and
 * uid/gid for all three ids (the caller must be root); RLIMIT_NOFILE
 * lowered to nofile if not 0; if ntmpfs, a mount namespace of the child's
 * own (as root: before the credentials change; else with a user namespace
 * of its own, its ids mapped to themselves), in which a small tmpfs is
 * mounted on tmpfs_at (a directory that does not hold path), and each
 * tmpfs on its dir (made below tmpfs_at) with opts (tmpfs's mount
 * options), left open (O_PATH) at descriptor fd (>= nfds), for bwrap
 * --bind-fd. 0 or -errno
 * (the errno of the failed step, execve's included); *failed, if not
 * NULL, then says which step failed. */
#include <sys/types.h>
struct shim_spawn_tmpfs {
    const char *dir;
    const char *opts;
    int fd;
};
enum shim_spawn_step {
    SHIM_SPAWN_OTHER = 0,
    SHIM_SPAWN_JOIN,  /* joining a cgroup */
    SHIM_SPAWN_TMPFS, /* the namespaces or mounts of the tmpfs, or the
                         execve after them */
};
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
    const int *join;
    int njoin;
    int oom_score_adj;
    unsigned long nofile;
    const char *tmpfs_at;
    const struct shim_spawn_tmpfs *tmpfs;
    int ntmpfs;
    enum shim_spawn_step *failed;
};
int shim_sandbox_spawn(const struct shim_spawn *s, pid_t *pid);

/* seccomp.c: a new memfd (close-on-exec, at offset 0) holding the
 * sandbox's seccomp filter as BPF, for bwrap --seccomp. fd or -errno. */
int shim_sandbox_seccomp_fd(void);

#endif
