/* settings.h - the table of codeshim's settings: every variable the
 * library reads, with its kind, default, range and one line of help. The
 * parser (shim_config_parse in settings.c), the check for misspelt
 * CODESHIM_* names, the launcher's options and --help, the keys of the
 * CODESHIM_CONFIG file (config.c), and `make test`'s
 * check of the README and the man page (tests/tools/settings_docs.py) all
 * read this one table, so they cannot
 * drift. Pure: no I/O, no globals but the constant table. */
#ifndef SHIM_SETTINGS_H
#define SHIM_SETTINGS_H

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
    char cassette[SHIM_PATH_MAX];   /* CODESHIM_CASSETTE (cassette.h) */
    char record_mode[8];            /* CODESHIM_RECORD_MODE: once|new|none|all */
    char match_ignore[1024];        /* CODESHIM_MATCH_IGNORE (match.h) */
    char script[SHIM_PATH_MAX];     /* CODESHIM_SCRIPT (script.h) */
    int session_ttl_s;             /* CODESHIM_SESSION_TTL: idle seconds */
    int session_cap;               /* CODESHIM_SESSION_CAP: per identity */
    int user_sessions;             /* CODESHIM_USER_SESSIONS: per user, all keys */
    char runtime_dir[SHIM_PATH_MAX]; /* session store (see store.h) */
    int runtime_dir_default;       /* not chosen by the user: store.c makes
                                      its parents, checked */
    char sessiond[SHIM_PATH_MAX];  /* CODESHIM_SESSIOND, absolute; by
                                      default the one next to the library's
                                      real path ("" when that is unknown) */
    /* The local sandbox (shim/sandbox/local/local.c). Sizes in bytes. */
    unsigned long long memory_limit;    /* CODESHIM_MEMORY: per process */
    int procs_limit;                    /* CODESHIM_PROCS: tasks */
    unsigned long long file_size_limit; /* CODESHIM_FILE_SIZE */
    unsigned long long disk_limit;      /* CODESHIM_DISK: /mnt/data, /tmp */
    unsigned long long inodes_limit;    /* CODESHIM_INODES: files in each */
    int open_files_limit;               /* CODESHIM_OPEN_FILES: per process */
    int cpu_time_s;                     /* CODESHIM_CPU_TIME: per process */
    int unsafe_no_isolation;            /* CODESHIM_UNSAFE_NO_ISOLATION=1 */
    char bwrap[SHIM_PATH_MAX];          /* CODESHIM_BWRAP */
    int fork_server;                    /* CODESHIM_FORK_SERVER: 0|1 */
    int sandbox_host;                   /* CODESHIM_SANDBOX_HOST: 0|1 */
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
    unsigned long long user_files_disk; /* CODESHIM_USER_FILES_DISK: the user's */
    int container_minutes;         /* CODESHIM_CONTAINER_MINUTES: idle
                                      expiry of a request's container */
    /* CODESHIM_CONFIG: a YAML file of named sandbox configurations */
    char config_file[SHIM_PATH_MAX];
    /* CODESHIM_MAX_INFLIGHT: intercepted multi-interface transfers whose
     * loops run at once (coroutines, multi.c); default by memory */
    int max_inflight;
};

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


enum shim_setting_kind {
    SHIM_SET_BOOL,   /* 1/0 true/false yes/no on/off, any case */
    SHIM_SET_NUM,    /* a whole number in lo..hi */
    SHIM_SET_SIZE,   /* bytes: a whole number with K, M, G or T, in lo..hi */
    SHIM_SET_WORD,   /* one of words ("a|b|c"), kept as the word */
    SHIM_SET_LEVEL,  /* one of words, kept as its index */
    SHIM_SET_STR,    /* text */
    SHIM_SET_PATH,   /* an absolute path ("" = default) */
    SHIM_SET_SECRET, /* text never echoed in a message */
    SHIM_SET_DIR,    /* the runtime directory: settings.c's own rule */
};

struct shim_setting {
    const char *var;          /* the environment variable */
    enum shim_setting_kind kind;
    size_t offset, size;      /* its field in struct shim_config */
    long long def, lo, hi;    /* BOOL, NUM, SIZE, LEVEL */
    const char *text;         /* STR/PATH default; WORD/LEVEL: the words */
    int fails_closed;         /* BOOL that weakens isolation when on: a
                                 value it cannot read means off */
    int bad_is_error;         /* WORD: a bad value leaves the field empty
                                 (requests that need it fail) */
    const char *help;         /* one line, for --help and the docs */
    /* The launcher's option that sets it (codeshim --NAME), or NULL. A
     * BOOL option takes no value and sets "1"; a NUM or SIZE option takes
     * digits in lo..hi; a WORD or LEVEL option one of the words; a STR
     * option a path, made absolute (a program only when it holds a '/'). */
    const char *option;
    const char *arg;          /* the option's value in --help and messages */
    int option_program;       /* STR: a program, looked up in PATH */
    /* Its key in a named sandbox of the CODESHIM_CONFIG file ("memory"),
     * which takes the same values, or NULL: not set per sandbox. */
    const char *file_key;
};

extern const struct shim_setting shim_settings[];
extern const size_t shim_nsettings;

/* The row of var, or NULL. */
const struct shim_setting *shim_setting_find(const char *var);
/* The row whose CODESHIM_CONFIG key is key, or NULL. */
const struct shim_setting *shim_setting_by_file_key(const char *key);

/* A boolean's value: 1 or 0, or -EINVAL for anything but 1/0, true/false,
 * yes/no, on/off (any case). The one reader of booleans: the environment,
 * the launcher's options and the YAML file all use it. */
int shim_setting_bool(const char *v);

/* Whether v is a good value of s: 0, or -EINVAL with a message in why
 * ("out of range 1..86400; using 60", naming the accepted values and the
 * default it falls back to; secrets are never quoted). */
int shim_setting_check(const struct shim_setting *s, const char *v, char *why,
                       size_t whysz);

/* The word of a WORD or LEVEL setting that v names (any case), as the
 * table spells it, into out: its index, or -EINVAL. */
int shim_setting_word(const struct shim_setting *s, const char *v, char *out, size_t outsz);

/* Its default and the values it takes ("1..1000", "64M..1T",
 * "local|e2b"; "" for text), as people read them, n bytes each. */
void shim_setting_describe(const struct shim_setting *s, char *def, char *range, size_t n);

/* The nearest setting name to a misspelt CODESHIM_* name (an edit
 * distance of at most a third of its length), or NULL. */
const char *shim_setting_closest(const char *var);

/* Whether a CODESHIM_* name is known: a setting, or one of the names
 * codeshim's programs read (CODESHIM_LIB, the launcher's). */
int shim_setting_known(const char *var);

#endif
