/* cgroup_int.h - what the cgroup files share; nothing but them includes
 * it (everyone else sees cgroup.h; the types they fill in are
 * cgroup_info.h's).
 *   cgroup.c     the front: which version, names, create, kill, remove
 *   cgroup_v1.c  the v1 memory and pids hierarchies: where, the limits
 *   cgroup_v2.c  a delegated v2 subtree: where, the limits, cgroup.kill
 *   cgroup_fs.c  the files: small reads and writes, this process's and
 *                another's cgroup (/proc/<pid>/cgroup, mountinfo) */
#ifndef SHIM_CGROUP_INT_H
#define SHIM_CGROUP_INT_H

#include "sandbox/local/cgroup_info.h"

#include <stddef.h>
#include <sys/types.h>

#define CG_LINE 4096     /* longer /proc lines are skipped */

/* ---- cgroup_fs.c ---- */

/* Up to outsz-1 bytes of a small file, NUL-terminated (a longer one
 * cut); length or -errno. */
ssize_t shim_cgroup_fs_read(const char *path, char *out, size_t outsz);
/* Writes text to dir/name; 0 or -errno. */
int shim_cgroup_fs_write(const char *dir, const char *name, const char *text);
/* Does dir/name exist? */
int shim_cgroup_fs_has(const char *dir, const char *name);
/* Is word one of the sep-separated items of list? */
int shim_cgroup_fs_has_word(const char *list, const char *word, char sep);
/* The directory of this process's cgroup in the hierarchy of ctl (v1)
 * or v2 (ctl NULL); rel gets the path /proc/<pid>/cgroup shows. */
int shim_cgroup_fs_find_dir(const char *ctl, char *dir, char *rel,
                            size_t sz);
/* Adds "what: why" to in->why. */
void shim_cgroup_fs_note(struct shim_cgroup_info *in, const char *what,
                         const char *why);
/* Is there no swap area at all? */
int shim_cgroup_fs_no_swap(void);
/* Is pid in cgroup rel (as /proc/<pid>/cgroup says)? */
int shim_cgroup_fs_member(long pid, const char *rel, int version,
                          const char *ctl);

/* ---- cgroup_v1.c ---- */

/* The v1 hierarchy of ctl into pl, where mounted and writable; else a
 * note in in->why. */
void shim_cgroup_v1_probe(struct shim_cgroup_info *in, const char *ctl,
                          struct shim_cg_place *pl);
/* The v1 memory hierarchy into in->mem, with whether kernel memory and
 * swap count. */
void shim_cgroup_v1_probe_memory(struct shim_cgroup_info *in);
/* The memory limits of a new v1 cgroup; 0 or -errno. */
int shim_cgroup_v1_set_memory(const char *dir, const char *v);

/* ---- cgroup_v2.c ---- */

/* A delegated v2 subtree into in->mem (and in->pids), with what it
 * offers; else a note in in->why. */
void shim_cgroup_v2_probe(struct shim_cgroup_info *in);
/* The memory limits of a new v2 cgroup; 0 or -errno. */
int shim_cgroup_v2_set_memory(const char *dir, const char *v);
/* Kills every process in the v2 cgroup dir at once, where the kernel
 * has cgroup.kill. */
void shim_cgroup_v2_kill(const char *dir);

#endif
