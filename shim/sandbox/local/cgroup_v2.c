/* cgroup_v2.c - cgroup v2 for cgroup.c: the delegated subtree a sandbox's
 * cgroup is made in (memory and pids in one directory), what it offers
 * (swap limit, cgroup.kill), the memory limits of a new cgroup
 * (memory.max counts anonymous memory, page cache, tmpfs and memfd and
 * kernel memory; memory.swap.max = 0 keeps it out of swap) and the kill of
 * everything in one. See cgroup_int.h. */
#include "base/fileio.h"
#include "sandbox/local/cgroup_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* v2: a directory whose children get memory (and pids): our own cgroup
 * when it enables them below it, else its parent when we may write it. */
void shim_cgroup_v2_probe(struct shim_cgroup_info *in)
{
    char dir[SHIM_CG_PATH], rel[SHIM_CG_PATH], ctl[512];
    int i;

    if (shim_cgroup_fs_find_dir(NULL, dir, rel, sizeof(dir)) != 0)
        return;
    for (i = 0; i < 2; i++) {
        char path[SHIM_CG_PATH + 32];
        char *slash;

        if (shim_fileio_join(path, sizeof(path), dir,
                             "cgroup.subtree_control") == 0 &&
            shim_cgroup_fs_read(path, ctl, sizeof(ctl)) >= 0 &&
            shim_cgroup_fs_has_word(ctl, "memory", ' ') &&
            access(dir, W_OK) == 0) {
            in->mem.version = 2;
            snprintf(in->mem.base, sizeof(in->mem.base), "%s", dir);
            snprintf(in->mem.rel, sizeof(in->mem.rel), "%s", rel);
            if (shim_cgroup_fs_has_word(ctl, "pids", ' '))
                in->pids = in->mem;
            in->kmem = 1;
            in->kill = shim_cgroup_fs_has(dir, "cgroup.kill");
            in->swap = shim_cgroup_fs_has(dir, "memory.swap.max") ||
                       shim_cgroup_fs_no_swap();
            return;
        }
        /* the parent, unless we are at the top of what we see */
        slash = strrchr(rel, '/');
        if (i == 1 || !slash || slash == rel)
            break;
        *slash = '\0';
        slash = strrchr(dir, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    shim_cgroup_fs_note(in, "cgroup v2", "no delegated subtree with memory");
}

int shim_cgroup_v2_set_memory(const char *dir, const char *v)
{
    int rc;

    rc = shim_cgroup_fs_write(dir, "memory.max", v);
    if (rc == 0 && shim_cgroup_fs_has(dir, "memory.swap.max"))
        shim_cgroup_fs_write(dir, "memory.swap.max", "0");
    return rc;
}

void shim_cgroup_v2_kill(const char *dir)
{
    if (shim_cgroup_fs_has(dir, "cgroup.kill"))
        shim_cgroup_fs_write(dir, "cgroup.kill", "1");
}
