/* cgroup.h - one cgroup per sandbox (cgroup.c): the memory and task
 * limits that hold for the sandbox as a whole, where this machine lets us
 * make cgroups; used by local_proc.c (each start) and the launcher's
 * `codeshim --check`.
 *
 * Where: cgroup v2 when this process's cgroup (or, writable by us, its
 * parent) enables memory and pids for its children; else the cgroup v1
 * memory and pids hierarchies, each where mounted and writable below this
 * process's own cgroup; else none (ordinary users, most containers): the
 * caller keeps the per-process limits only. The cgroup is named
 * codeshim-<pid namespace>-<pid>-<n>; one left behind by a process that
 * died is removed by the next create on the machine. */
#ifndef SHIM_CGROUP_H
#define SHIM_CGROUP_H

#include "sandbox/local/cgroup_info.h"

#include <stddef.h>
#include <sys/types.h>

/* One sandbox's cgroup(s): the memory one and the pids one (the same
 * directory under v2). */
struct shim_cgroup {
    char dir[2][SHIM_CG_PATH]; /* "" when none */
    char rel[2][SHIM_CG_PATH];
    int version[2];
    int join[2];  /* cgroup.procs of each, open for the spawned child */
    int njoin;
    int memory;   /* the memory limit holds */
    int pids;     /* the task limit holds */
    pid_t owner;  /* the process that made it (a forked child does not
                     remove its parent's) */
};

/* What this machine offers; looked up once per process. 0, or -ENOENT
 * when no controller is usable (out->why says why). */
int shim_cgroup_probe(struct shim_cgroup_info *out);

/* An empty one (nothing made); destroy is then a no-op. */
void shim_cgroup_init(struct shim_cgroup *cg);

/* Makes the sandbox's cgroup with memory.max / memory.limit_in_bytes =
 * memory (swap included where it can be limited) and pids.max = tasks,
 * and opens the cgroup.procs files the spawned child joins through
 * (spawn.c writes "0" to each before execve, so its first process runs
 * inside). Removes leftovers of dead processes first. 0, or -errno when
 * none could be made (then cg is empty). */
int shim_cgroup_create(struct shim_cgroup *cg, unsigned long long memory,
                       int tasks);

/* Closes the join descriptors (after the spawn). */
void shim_cgroup_joined(struct shim_cgroup *cg);

/* Kills every process still in it (cgroup.kill, else each listed pid
 * through a pidfd after checking it is still ours), then removes it,
 * retrying briefly while the kernel finishes their exit. Only the owner
 * does so. Leaves cg empty. */
void shim_cgroup_destroy(struct shim_cgroup *cg);


/* The highest memory use the memory cgroup saw, in bytes (v1
 * memory.max_usage_in_bytes, v2 memory.peak), or 0 when unknown. */
unsigned long long shim_cgroup_peak(const struct shim_cgroup *cg);

/* "codeshim-<pid namespace>-<pid>-": the start of the names of this
 * process's sandbox cgroups (for tests). */
void shim_cgroup_prefix(char *out, size_t outsz);

#endif
