/* config.h - codeshim's settings, read once from CODESHIM_* variables.
 *
 * config.c is the only caller of getenv(). The struct is filled once and is
 * immutable afterwards; every module reads it through shim_config(). A bad
 * value is logged and its default used: configuration never breaks the
 * host program. The README documents every variable with its range. */
#ifndef SHIM_CONFIG_H
#define SHIM_CONFIG_H

#include "system/settings.h"

#include <stddef.h>

/* The CODESHIM_* entries of this process's environment ("NAME=value"
 * copies, caller frees each and the array; NULL-terminated), for helper
 * processes that are codeshim's own (never the sandbox). */
char **shim_config_own_env(void);

/* The CODESHIM_* variables of the environment that are no setting, each
 * as a message naming the closest real one (at most max); codeshim
 * --check lists them, and the library warns of each once per process. */
size_t shim_config_misspelt(char (*out)[128], size_t max);

/* Loads the process-wide configuration (once, thread-safe) and returns it. */
const struct shim_config *shim_config_load(void);
/* It once loaded, else NULL; written only by shim_config_load. */
extern const struct shim_config *shim_config_ready;

/* The process-wide configuration; loaded on first use. Inline: every
 * wrapper call of the pass-through asks, so once loaded it is one load. */
static inline const struct shim_config *shim_config(void)
{
    const struct shim_config *c = __atomic_load_n(&shim_config_ready, __ATOMIC_ACQUIRE);

    return c ? c : shim_config_load();
}

/* The settings a request's code runs under. Without CODESHIM_CONFIG:
 * shim_config(). With it: the named sandbox (the file's default when name
 * is NULL, or when name came from a container string (named = 0) that
 * matches no sandbox and so may be a container id). NULL, with why and
 * *status (500: the file is broken, or the sandbox names an environment
 * variable that is not set, or is e2b without a key: only that sandbox is
 * unusable; 400: the name is unknown or not selectable), when the request
 * cannot have what it asks. The file is read on first use; each of these
 * errors is logged once per process. */
const struct shim_config *shim_config_sandbox(const char *name, int named, char *why,
                                              size_t whysz, int *status);
/* The configured names (at most max), which a request may choose, why
 * one cannot be used (NULL: it can) and the default's index (for
 * codeshim --check). */
size_t shim_config_sandbox_list(const char **names, int *selectable, const char **unusable,
                                size_t max, size_t *def);
/* Why CODESHIM_CONFIG could not be loaded, or NULL. */
const char *shim_config_file_error(void);

#endif
