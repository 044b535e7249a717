/* spawn_child.h - between spawn.c (the parent: the clone) and
 * spawn_child.c (the child, up to execve). */
#ifndef SHIM_SPAWN_CHILD_H
#define SHIM_SPAWN_CHILD_H

#include "sandbox/sandbox_int.h"

struct shim_spawn_child {
    const struct shim_spawn *s;
    char uid_map[32], gid_map[32], oom[16]; /* made by the parent: no
                                               stdio in the child */
    volatile int err; /* errno of the failed step; the parent reads it */
    volatile int step; /* enum shim_spawn_step of the failed step */
    int root;          /* the host is root: mounts need no user namespace */
};

/* The child's entry point (clone's fn, arg a struct shim_spawn_child): execve, or
 * _exit(127) with c->err and c->step saying what failed. */
int shim_spawn_child_main(void *arg);

#endif
