/* scratch.h - for unit suites that write files: a scratch directory made
 * under TMPDIR for each test and removed afterwards with all it holds,
 * an empty environment to parse settings from, and the settings of a
 * runtime directory inside the scratch one. Header-only. */
#ifndef TEST_SCRATCH_H
#define TEST_SCRATCH_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "system/settings.h"

static inline int scratch_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

/* dir = ${TMPDIR:-/tmp}/codeshim-<tag>-XXXXXX, made 0700. 0 or -1. */
static inline int scratch_make(char *dir, size_t n, const char *tag)
{
    const char *t = getenv("TMPDIR");

    snprintf(dir, n, "%s/codeshim-%s-XXXXXX", t && *t ? t : "/tmp", tag);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int scratch_remove(const char *dir)
{
    return nftw(dir, scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A getenv-shaped lookup of an empty environment (shim_config_parse). */
static inline const char *scratch_no_env(const char *name, void *ctx)
{
    (void)name;
    (void)ctx;
    return NULL;
}

/* cfg: the defaults, with dir/rt as the runtime directory the user chose
 * (CODESHIM_RUNTIME_DIR: never moved; not made here). */
static inline void scratch_runtime(struct shim_config *cfg, const char *dir)
{
    shim_config_parse(cfg, scratch_no_env, NULL, NULL);
    snprintf(cfg->runtime_dir, sizeof(cfg->runtime_dir), "%s/rt", dir);
    cfg->runtime_dir_default = 0;
}

#endif
