/* cgroup_info.h - what cgroup.h's probe finds on this machine: where one
 * controller's sandbox cgroups go and what the machine offers. Its own
 * header (no .c owns it) so that the cgroup parts below cgroup.c
 * (cgroup_v1.c, cgroup_v2.c, cgroup_fs.c) can fill it in without reaching
 * up to cgroup.c; cgroup.h includes it, so users see one header. */
#ifndef SHIM_CGROUP_INFO_H
#define SHIM_CGROUP_INFO_H

#define SHIM_CG_PATH 1024

/* Where one controller's sandbox cgroups go (what probe found). */
struct shim_cg_place {
    int version;             /* 0 none, 1 or 2 */
    char base[SHIM_CG_PATH]; /* the directory they are made in */
    char rel[SHIM_CG_PATH];  /* base as /proc/<pid>/cgroup names it */
};

/* What this machine offers (shim_cgroup_probe). */
struct shim_cgroup_info {
    struct shim_cg_place mem, pids;
    int kmem;      /* kernel memory (inodes, pipes, files) counts too */
    int swap;      /* the limit holds for swap as well */
    int kill;      /* cgroup.kill exists (v2, kernel 5.14+) */
    char why[256]; /* why a controller is missing */
};

#endif
