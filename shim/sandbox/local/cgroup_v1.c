/* cgroup_v1.c - cgroup v1 for cgroup.c: the memory and pids hierarchies,
 * each where mounted and writable below this process's own cgroup, and
 * the memory limits of a new cgroup (memory.limit_in_bytes counts kernel
 * memory too since 5.x kernels, so memory.kmem.limit_in_bytes is not
 * written; memory.memsw.limit_in_bytes = the same value keeps swap inside
 * it, swappiness 0 where memsw is missing; oom_control 0 keeps the OOM
 * killer on, which a v1 child would otherwise inherit from its parent).
 * See cgroup_int.h. */
#include "sandbox/local/cgroup_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void shim_cgroup_v1_probe(struct shim_cgroup_info *in, const char *ctl,
                          struct shim_cg_place *pl)
{
    char dir[SHIM_CG_PATH], rel[SHIM_CG_PATH];

    if (shim_cgroup_fs_find_dir(ctl, dir, rel, sizeof(dir)) != 0) {
        shim_cgroup_fs_note(in, ctl, "no cgroup v1 hierarchy");
        return;
    }
    if (access(dir, W_OK) != 0) {
        shim_cgroup_fs_note(in, ctl, errno == EACCES
                                         ? "not writable by this user"
                                         : strerror(errno));
        return;
    }
    pl->version = 1;
    snprintf(pl->base, sizeof(pl->base), "%s", dir);
    snprintf(pl->rel, sizeof(pl->rel), "%s", rel);
}

void shim_cgroup_v1_probe_memory(struct shim_cgroup_info *in)
{
    shim_cgroup_v1_probe(in, "memory", &in->mem);
    if (in->mem.version != 1)
        return;
    in->kmem = shim_cgroup_fs_has(in->mem.base, "memory.kmem.usage_in_bytes");
    in->swap = shim_cgroup_fs_has(in->mem.base,
                                  "memory.memsw.limit_in_bytes") ||
               shim_cgroup_fs_no_swap();
}

int shim_cgroup_v1_set_memory(const char *dir, const char *v)
{
    int rc;

    rc = shim_cgroup_fs_write(dir, "memory.limit_in_bytes", v);
    if (rc)
        return rc;
    /* mem+swap no larger than mem: no swap (after the limit: memsw may
     * never be below it) */
    if (shim_cgroup_fs_write(dir, "memory.memsw.limit_in_bytes", v) != 0)
        shim_cgroup_fs_write(dir, "memory.swappiness", "0");
    shim_cgroup_fs_write(dir, "memory.oom_control", "0");
    return 0;
}
