/* config.h - codeshim's settings, read once from CODESHIM_* variables.
 *
 * config.c is the only caller of getenv(). The struct is filled once and is
 * immutable afterwards; every module reads it through shim_config(). A bad
 * value is logged and its default used: configuration never breaks the
 * host program. The README documents every variable with its range. */
#ifndef SHIM_CONFIG_H
#define SHIM_CONFIG_H

#include <stddef.h>

#define SHIM_PATH_MAX 4096
#define SHIM_SESSION_TTL_MAX (7 * 86400) /* CODESHIM_SESSION_TTL's range: 1 to this */

struct shim_config {
    int disabled;               /* CODESHIM_DISABLE=1: pure pass-through */
    int max_loops;              /* CODESHIM_MAX_LOOPS: executions/request */
    int exec_timeout_s;         /* CODESHIM_EXEC_TIMEOUT: wall clock/exec */
    size_t output_cap;          /* CODESHIM_OUTPUT_CAP: bytes of tool output */
    size_t max_request;         /* CODESHIM_MAX_REQUEST: larger bodies pass */
    size_t max_response;        /* CODESHIM_MAX_RESPONSE: upstream body cap */
    int log_level;              /* CODESHIM_LOG */
    char log_file[SHIM_PATH_MAX];  /* CODESHIM_LOG_FILE ("" = stderr) */
    char python[SHIM_PATH_MAX];    /* CODESHIM_PYTHON */
    char sandbox[32];              /* CODESHIM_SANDBOX: backend name */
    char tmpdir[SHIM_PATH_MAX];    /* TMPDIR or /tmp: sandbox work dirs */
    int offline;                   /* CODESHIM_OFFLINE: built-in model */
    char record_dir[SHIM_PATH_MAX]; /* CODESHIM_RECORD */
    char replay_dir[SHIM_PATH_MAX]; /* CODESHIM_REPLAY */
    char trace_file[SHIM_PATH_MAX]; /* CODESHIM_TRACE */
    int session_ttl_s;             /* CODESHIM_SESSION_TTL: idle seconds */
    int session_cap;               /* CODESHIM_SESSION_CAP: per identity */
    char runtime_dir[SHIM_PATH_MAX]; /* session store (see store.h) */
    int runtime_dir_default;       /* not chosen by the user: store.c may
                                      move to a private sibling */
    char sessiond[SHIM_PATH_MAX];  /* CODESHIM_SESSIOND, absolute; by
                                      default the one next to the library's
                                      real path ("" when that is unknown) */
    /* The local sandbox (shim/sandbox/local.c). Sizes in bytes. */
    unsigned long long memory_limit;    /* CODESHIM_MEMORY: per process */
    int procs_limit;                    /* CODESHIM_PROCS: tasks */
    unsigned long long file_size_limit; /* CODESHIM_FILE_SIZE */
    unsigned long long disk_limit;      /* CODESHIM_DISK: /mnt/data, /tmp */
    unsigned long long inodes_limit;    /* CODESHIM_INODES: files in each */
    int open_files_limit;               /* CODESHIM_OPEN_FILES: per process */
    int cpu_time_s;                     /* CODESHIM_CPU_TIME: per process */
    int unsafe_no_isolation;            /* CODESHIM_UNSAFE_NO_ISOLATION=1 */
    char bwrap[SHIM_PATH_MAX];          /* CODESHIM_BWRAP */
    int warm_spare;                     /* CODESHIM_WARM_SPARE: 0|1 */
    int fork_server;                    /* CODESHIM_FORK_SERVER: 0|1 */
    char preload_modules[512];          /* CODESHIM_PRELOAD_MODULES */
    /* The e2b backend (CODESHIM_SANDBOX=e2b), named as e2b's SDKs name
     * them. The key is a secret: never logged, traced or written. */
    char e2b_api_key[256];       /* CODESHIM_E2B_API_KEY, else E2B_API_KEY */
    char e2b_api_url[1024];      /* E2B_API_URL: the control plane ("":
                                    https://api.<e2b_domain>) */
    char e2b_domain[256];        /* E2B_DOMAIN: sandbox hosts
                                    https://<port>-<id>.<domain> */
    char e2b_sandbox_url[1024];  /* CODESHIM_E2B_SANDBOX_URL: one base URL
                                    for all in-sandbox traffic, with
                                    E2b-Sandbox-Id/-Port headers ("" =
                                    per-port hosts) */
    char e2b_template[128];      /* CODESHIM_E2B_TEMPLATE */
    int e2b_internet;            /* CODESHIM_E2B_INTERNET=1: internet on */
    /* Files of containers (cstore.h) */
    unsigned long long file_max;   /* CODESHIM_FILE_MAX: one file */
    unsigned long long files_disk; /* CODESHIM_FILES_DISK: an identity's */
    int container_minutes;         /* CODESHIM_CONTAINER_MINUTES: idle
                                      expiry of a request's container */
    /* CODESHIM_CONFIG: a YAML file of named sandbox configurations */
    char config_file[SHIM_PATH_MAX];
    /* CODESHIM_MAX_INFLIGHT: intercepted multi-interface transfers whose
     * loops run at once (worker threads); default 2 x online cores */
    int max_inflight;
};

/* The CODESHIM_* entries of this process's environment ("NAME=value"
 * copies, caller frees each and the array; NULL-terminated), for helper
 * processes that are codeshim's own (never the sandbox). */
char **shim_config_own_env(void);

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

/* Pure parser used by shim_config() and the unit tests: fills c from the
 * lookup function (getenv-shaped). Warnings about bad values go to warn,
 * which may be NULL. */
typedef const char *(*shim_env_fn)(const char *name, void *ctx);
typedef void (*shim_warn_fn)(const char *msg, void *ctx);
void shim_config_parse(struct shim_config *c, shim_env_fn env, shim_warn_fn warn,
                       void *ctx);
/* The same without clearing c first, for one that is all zero already:
 * the process-wide instance, static storage the loader cleared (its
 * clearing is some 45 KB of paths, paid by every program at its first
 * curl call otherwise). */
void shim_config_fill(struct shim_config *c, shim_env_fn env, shim_warn_fn warn,
                      void *ctx);

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
