/* settings.c - the table of settings (settings.h) and the pure parser
 * that reads it: variable names to struct shim_config,
 * through a getenv-shaped lookup. Every bad value is reported through the
 * warn callback, naming the variable, the value, what is accepted and the
 * default used instead. config.c feeds it the real environment, and the
 * named sandboxes of CODESHIM_CONFIG as an overlay on it. */
#include "system/settings.h"

#include "base/log.h"
#include "base/text.h"

#include <errno.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define F(field) offsetof(struct shim_config, field), sizeof(((struct shim_config *)0)->field)
#define K 1024LL
#define M (1024LL * K)
#define G (1024LL * M)
#define T (1024LL * G)
/* A default computed when parsing: CODESHIM_MAX_INFLIGHT's. */
#define DEF_BY_MEMORY (-1)
/* ...from what one intercepted transfer may hold at once (a worker's
 * stack, its queue, request and answer buffers, its share of a sandbox)
 * within half the machine's memory, between these bounds: the loop
 * mostly waits on the network, so the cores do not bound it */
#define INFLIGHT_BUDGET (32 * M)
#define INFLIGHT_MIN 16
#define INFLIGHT_MAX 256
/* The launcher's option: its name, the value's placeholder, whether it
 * names a program. */
#define OPT(name, arg, program) name, arg, program
#define NO_OPT NULL, NULL, 0
/* Its key in a named sandbox of CODESHIM_CONFIG (config.c). */
#define KEY(k) k
#define NO_KEY NULL

/* Rows in parse order: CODESHIM_E2B_API_KEY before E2B_API_KEY, which
 * fills the key only when the first left it empty. */
const struct shim_setting shim_settings[] = {
    {"CODESHIM_DISABLE", SHIM_SET_BOOL, F(disabled), 0, 0, 1, NULL, 0, 0,
     "pure pass-through: intercept nothing", NO_OPT, NO_KEY},
    {"CODESHIM_OFFLINE", SHIM_SET_BOOL, F(offline), 0, 0, 1, NULL, 0, 0,
     "answer with the built-in offline model; no network", OPT("offline", NULL, 0), NO_KEY},
    {"CODESHIM_MAX_LOOPS", SHIM_SET_NUM, F(max_loops), 10, 1, 1000, NULL, 0, 0,
     "executions per request", OPT("max-loops", "N", 0), NO_KEY},
    {"CODESHIM_EXEC_TIMEOUT", SHIM_SET_NUM, F(exec_timeout_s), 60, 1, 86400, NULL, 0, 0,
     "wall-clock seconds per execution", OPT("timeout", "SECONDS", 0), KEY("timeout")},
    {"CODESHIM_OUTPUT_CAP", SHIM_SET_SIZE, F(output_cap), 20000, 256, 10 * M, NULL, 0, 0,
     "bytes of tool output the model sees per execution", OPT("output-cap", "BYTES", 0),
     KEY("output_cap")},
    {"CODESHIM_MAX_REQUEST", SHIM_SET_SIZE, F(max_request), 32 * M, 4 * K, G, NULL, 0, 0,
     "larger request bodies pass through untouched", NO_OPT, NO_KEY},
    {"CODESHIM_MAX_RESPONSE", SHIM_SET_SIZE, F(max_response), 64 * M, 4 * K, G, NULL, 0, 0,
     "largest upstream answer read", NO_OPT, NO_KEY},
    {"CODESHIM_LOG", SHIM_SET_LEVEL, F(log_level), SHIM_LOG_WARN, 0, 3,
     "error|warn|info|debug", 0, 0, "log level", OPT("log", "LEVEL", 0), NO_KEY},
    {"CODESHIM_LOG_FILE", SHIM_SET_STR, F(log_file), 0, 0, 0, "", 0, 0,
     "append the log here instead of stderr", OPT("log-file", "FILE", 0), NO_KEY},
    {"CODESHIM_PYTHON", SHIM_SET_STR, F(python), 0, 0, 0, "/usr/bin/python3", 0, 0,
     "the local sandbox's Python", OPT("python", "PATH", 1), KEY("python")},
    {"CODESHIM_SANDBOX", SHIM_SET_WORD, F(sandbox), 0, 0, 0, "local|e2b", 0, 1,
     "sandbox backend", OPT("sandbox", "NAME", 0), KEY("backend")},
    {"TMPDIR", SHIM_SET_STR, F(tmpdir), 0, 0, 0, "/tmp", 0, 0,
     "where local sandboxes' work directories live", NO_OPT, NO_KEY},
    {"CODESHIM_RECORD", SHIM_SET_STR, F(record_dir), 0, 0, 0, "", 0, 0,
     "save each upstream exchange in this directory", OPT("record", "DIR", 0), NO_KEY},
    {"CODESHIM_REPLAY", SHIM_SET_STR, F(replay_dir), 0, 0, 0, "", 0, 0,
     "answer upstream calls from this directory; no network", OPT("replay", "DIR", 0), NO_KEY},
    {"CODESHIM_CASSETTE", SHIM_SET_STR, F(cassette), 0, 0, 0, "", 0, 0,
     "a cassette (file or folder) of upstream exchanges to replay and record", NO_OPT, NO_KEY},
    {"CODESHIM_RECORD_MODE", SHIM_SET_WORD, F(record_mode), 0, 0, 0, "once|new|none|all", 0, 0,
     "once: record only into a new cassette; new: record what is missing; none: replay only; "
     "all: record everything", NO_OPT, NO_KEY},
    {"CODESHIM_MATCH_IGNORE", SHIM_SET_STR, F(match_ignore), 0, 0, 0, "", 0, 0,
     "request fields a cassette does not match on (comma-separated dot paths)", NO_OPT, NO_KEY},
    {"CODESHIM_SCRIPT", SHIM_SET_STR, F(script), 0, 0, 0, "", 0, 0,
     "a YAML script of the model's answers: a deterministic model for tests", NO_OPT, NO_KEY},
    {"CODESHIM_TRACE", SHIM_SET_STR, F(trace_file), 0, 0, 0, "", 0, 0,
     "append JSON Lines trace events to this file", OPT("trace", "FILE", 0), NO_KEY},
    {"CODESHIM_SESSION_TTL", SHIM_SET_NUM, F(session_ttl_s), 900, 1, SHIM_SESSION_TTL_MAX,
     NULL, 0, 0, "idle seconds before a session closes", NO_OPT, NO_KEY},
    {"CODESHIM_SESSION_CAP", SHIM_SET_NUM, F(session_cap), 10, 1, 1000, NULL, 0, 0,
     "live sessions per identity (the least recently used closes)", NO_OPT, NO_KEY},
    {"CODESHIM_USER_SESSIONS", SHIM_SET_NUM, F(user_sessions), 20, 1, 10000, NULL, 0, 0,
     "live sessions of all the user's API keys together", NO_OPT, NO_KEY},
    {"CODESHIM_RUNTIME_DIR", SHIM_SET_DIR, F(runtime_dir), 0, 0, 0, NULL, 0, 0,
     "private directory of sessions, continuations and container files", NO_OPT, NO_KEY},
    {"CODESHIM_SESSIOND", SHIM_SET_PATH, F(sessiond), 0, 0, 0, "", 0, 0,
     "the sandbox host and session supervisor program (default: next to the library)", NO_OPT, NO_KEY},
    {"CODESHIM_MEMORY", SHIM_SET_SIZE, F(memory_limit), G, 64 * M, T, NULL, 0, 0,
     "memory of a local sandbox", NO_OPT, KEY("memory")},
    {"CODESHIM_PROCS", SHIM_SET_NUM, F(procs_limit), 256, 16, 65536, NULL, 0, 0,
     "processes of a local sandbox", NO_OPT, KEY("procs")},
    {"CODESHIM_FILE_SIZE", SHIM_SET_SIZE, F(file_size_limit), 512 * M, M, T, NULL, 0, 0,
     "largest file a sandbox's code may write", NO_OPT, KEY("file_size")},
    {"CODESHIM_DISK", SHIM_SET_SIZE, F(disk_limit), G, M, T, NULL, 0, 0,
     "bytes of /mnt/data and of /tmp in a local sandbox", NO_OPT, KEY("disk")},
    {"CODESHIM_INODES", SHIM_SET_NUM, F(inodes_limit), 65536, 256, 1 << 24, NULL, 0, 0,
     "files in each of /mnt/data and /tmp", NO_OPT, KEY("inodes")},
    {"CODESHIM_OPEN_FILES", SHIM_SET_NUM, F(open_files_limit), 1024, 64, 1 << 20, NULL, 0, 0,
     "open files per sandbox process", NO_OPT, KEY("open_files")},
    {"CODESHIM_CPU_TIME", SHIM_SET_NUM, F(cpu_time_s), 3600, 1, 7 * 86400, NULL, 0, 0,
     "CPU seconds per sandbox process", NO_OPT, KEY("cpu_time")},
    {"CODESHIM_UNSAFE_NO_ISOLATION", SHIM_SET_BOOL, F(unsafe_no_isolation), 0, 0, 1, NULL, 1,
     0, "run code without bubblewrap, as the program's own user (unsafe)", NO_OPT, NO_KEY},
    {"CODESHIM_BWRAP", SHIM_SET_STR, F(bwrap), 0, 0, 0, "/usr/bin/bwrap", 0, 0,
     "the bubblewrap program", NO_OPT, KEY("bwrap")},
    {"CODESHIM_FORK_SERVER", SHIM_SET_BOOL, F(fork_server), 1, 0, 1, NULL, 0, 0,
     "fork sandboxes from a server that imported the data libraries", NO_OPT, NO_KEY},
    {"CODESHIM_SANDBOX_HOST", SHIM_SET_BOOL, F(sandbox_host), 1, 0, 1, NULL, 0, 0,
     "take sandboxes from the user's sandbox host, which keeps some ready", NO_OPT, NO_KEY},
    {"CODESHIM_PRELOAD_MODULES", SHIM_SET_STR, F(preload_modules), 0, 0, 0,
     "numpy,pandas,matplotlib.pyplot", 0, 0, "modules the fork server imports", NO_OPT, NO_KEY},
    {"CODESHIM_E2B_API_KEY", SHIM_SET_SECRET, F(e2b_api_key), 0, 0, 0, NULL, 0, 0,
     "e2b's API key (wins over E2B_API_KEY)", NO_OPT, KEY("api_key")},
    {"E2B_API_KEY", SHIM_SET_SECRET, F(e2b_api_key), 0, 0, 0, NULL, 0, 0,
     "e2b's API key, as e2b's SDKs name it", NO_OPT, NO_KEY},
    {"E2B_API_URL", SHIM_SET_STR, F(e2b_api_url), 0, 0, 0, "", 0, 0,
     "e2b's control plane (default https://api.<E2B_DOMAIN>)", NO_OPT, KEY("api_url")},
    {"E2B_DOMAIN", SHIM_SET_STR, F(e2b_domain), 0, 0, 0, "e2b.app", 0, 0,
     "e2b's sandbox domain", NO_OPT, KEY("domain")},
    {"CODESHIM_E2B_SANDBOX_URL", SHIM_SET_STR, F(e2b_sandbox_url), 0, 0, 0, "", 0, 0,
     "one base URL for all in-sandbox e2b traffic", NO_OPT, KEY("sandbox_url")},
    {"CODESHIM_E2B_TEMPLATE", SHIM_SET_STR, F(e2b_template), 0, 0, 0, "code-interpreter-v1", 0,
     0, "e2b template", NO_OPT, KEY("template")},
    {"CODESHIM_E2B_INTERNET", SHIM_SET_BOOL, F(e2b_internet), 0, 0, 1, NULL, 1, 0,
     "let e2b sandboxes reach the internet", NO_OPT, KEY("internet")},
    {"CODESHIM_FILE_MAX", SHIM_SET_SIZE, F(file_max), 100 * M, K, 2 * G, NULL, 0, 0,
     "largest container file", NO_OPT, NO_KEY},
    {"CODESHIM_FILES_DISK", SHIM_SET_SIZE, F(files_disk), G, M, T, NULL, 0, 0,
     "container file bytes per identity", NO_OPT, NO_KEY},
    {"CODESHIM_USER_FILES_DISK", SHIM_SET_SIZE, F(user_files_disk), 2 * G, M, T, NULL, 0, 0,
     "container file bytes of all the user's API keys together", NO_OPT, NO_KEY},
    {"CODESHIM_CONTAINER_MINUTES", SHIM_SET_NUM, F(container_minutes), 20, 1, 7 * 1440, NULL,
     0, 0, "idle minutes before a request's container expires", NO_OPT, NO_KEY},
    {"CODESHIM_CONFIG", SHIM_SET_STR, F(config_file), 0, 0, 0, "", 0, 0,
     "YAML file of named sandboxes", NO_OPT, NO_KEY},
    {"CODESHIM_MAX_INFLIGHT", SHIM_SET_NUM, F(max_inflight), DEF_BY_MEMORY, 1, 1024, NULL,
     0, 0, "intercepted multi transfers whose loops run at once (default: one per 32 MiB of "
     "half the memory, 16..256)", NO_OPT, NO_KEY},
};
const size_t shim_nsettings = sizeof(shim_settings) / sizeof(shim_settings[0]);

/* CODESHIM_* names that codeshim's programs read beside the table. */
static const char *const other_names[] = {"CODESHIM_LIB"};

const struct shim_setting *shim_setting_find(const char *var)
{
    size_t i;

    for (i = 0; i < shim_nsettings; i++)
        if (!strcmp(shim_settings[i].var, var))
            return &shim_settings[i];
    return NULL;
}

const struct shim_setting *shim_setting_by_file_key(const char *key)
{
    size_t i;

    for (i = 0; i < shim_nsettings; i++)
        if (shim_settings[i].file_key && !strcmp(shim_settings[i].file_key, key))
            return &shim_settings[i];
    return NULL;
}

int shim_setting_known(const char *var)
{
    size_t i;

    for (i = 0; i < sizeof(other_names) / sizeof(other_names[0]); i++)
        if (!strcmp(other_names[i], var))
            return 1;
    return shim_setting_find(var) != NULL;
}

const char *shim_setting_closest(const char *var)
{
    const char *best = NULL;
    size_t i, bestd = strlen(var) / 3;

    for (i = 0; i < shim_nsettings; i++) {
        size_t d = shim_text_distance(var, shim_settings[i].var, bestd);
        if (d <= bestd && (!best || d < bestd)) {
            best = shim_settings[i].var;
            bestd = d;
        }
    }
    return best;
}

int shim_setting_bool(const char *v)
{
    static const char *const on[] = {"1", "true", "yes", "on"};
    static const char *const off[] = {"0", "false", "no", "off"};
    size_t i;

    for (i = 0; v && i < 4; i++) {
        if (!strcasecmp(v, on[i]))
            return 1;
        if (!strcasecmp(v, off[i]))
            return 0;
    }
    return -EINVAL;
}

/* ---- values ---- */

/* A size as its largest exact binary unit: 1G, 64M, 20000. */
static void fmt_size(long long n, char *out, size_t outsz)
{
    static const char units[] = "TGMK";
    long long u = T;
    int i;

    for (i = 0; i < 4; i++, u /= 1024)
        if (n >= u && n % u == 0) {
            snprintf(out, outsz, "%lld%c", n / u, units[i]);
            return;
        }
    snprintf(out, outsz, "%lld", n);
}

static void fmt_value(const struct shim_setting *s, long long n, char *out, size_t outsz)
{
    if (s->kind == SHIM_SET_SIZE)
        fmt_size(n, out, outsz);
    else
        snprintf(out, outsz, "%lld", n);
}

static long long default_of(const struct shim_setting *s)
{
    long pages, psize;
    long long n;

    if (s->def != DEF_BY_MEMORY)
        return s->def;
    pages = sysconf(_SC_PHYS_PAGES);
    psize = sysconf(_SC_PAGESIZE);
    n = pages > 0 && psize > 0 ? (long long)pages / 2 / (INFLIGHT_BUDGET / psize) : 0;
    return n < INFLIGHT_MIN ? INFLIGHT_MIN : n > INFLIGHT_MAX ? INFLIGHT_MAX : n;
}

/* A whole number, or a size with an optional binary suffix K, M, G or T
 * ("KiB"/"KB"/"K" alike, any case). */
static int read_number(const struct shim_setting *s, const char *v, long long *out)
{
    unsigned long long n, mul = 1;
    char *end;

    errno = 0;
    /* digits, and for a number a leading '-': no blanks, '+' or hex */
    if (!(v[0] >= '0' && v[0] <= '9') &&
        !(s->kind == SHIM_SET_NUM && v[0] == '-' && v[1] >= '0' && v[1] <= '9'))
        return -EINVAL;
    if (s->kind == SHIM_SET_NUM) {
        long long x = strtoll(v, &end, 10);
        if (errno || *end || end == v)
            return -EINVAL;
        *out = x;
        return 0;
    }
    n = strtoull(v, &end, 10);
    if (errno || end == v)
        return -EINVAL;
    switch (*end) {
    case 'k': case 'K': mul = (unsigned long long)K; end++; break;
    case 'm': case 'M': mul = (unsigned long long)M; end++; break;
    case 'g': case 'G': mul = (unsigned long long)G; end++; break;
    case 't': case 'T': mul = (unsigned long long)T; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (mul > 1 && (*end == 'b' || *end == 'B'))
        end++;
    if (*end)
        return -EINVAL;
    if (n > (unsigned long long)INT64_MAX / mul)
        return -ERANGE;
    *out = (long long)(n * mul);
    return 0;
}

/* The index of v among s's words ("a|b|c", any case), or -1. */
static int word_index(const struct shim_setting *s, const char *v)
{
    const char *w = s->text;
    int i = 0;

    for (;;) {
        size_t n = strcspn(w, "|");
        if (n == strlen(v) && !strncasecmp(w, v, n))
            return i;
        if (!w[n])
            return -1;
        w += n + 1;
        i++;
    }
}

/* The idx-th of s's words into out. */
static void word_at(const struct shim_setting *s, long long idx, char *out, size_t outsz)
{
    const char *w = s->text;

    while (idx-- > 0 && strchr(w, '|'))
        w = strchr(w, '|') + 1;
    snprintf(out, outsz, "%.*s", (int)strcspn(w, "|"), w);
}

int shim_setting_word(const struct shim_setting *s, const char *v, char *out, size_t outsz)
{
    int i;

    if ((s->kind != SHIM_SET_WORD && s->kind != SHIM_SET_LEVEL) || (i = word_index(s, v)) < 0)
        return -EINVAL;
    word_at(s, i, out, outsz);
    return i;
}

/* Why v is no good (NULL: it is), and the number or word index it means. */
static const char *judge(const struct shim_setting *s, const char *v, long long *n)
{
    int rc;

    switch (s->kind) {
    case SHIM_SET_BOOL:
        rc = shim_setting_bool(v);
        *n = rc;
        return rc < 0 ? "not a boolean (1/0, true/false, yes/no, on/off)" : NULL;
    case SHIM_SET_NUM:
    case SHIM_SET_SIZE:
        rc = read_number(s, v, n);
        if (rc == -EINVAL)
            return s->kind == SHIM_SET_NUM ? "not a whole number"
                                           : "not a size (bytes, or a number with K, M, G or T)";
        return rc < 0 || *n < s->lo || *n > s->hi ? "out of range" : NULL;
    case SHIM_SET_WORD:
    case SHIM_SET_LEVEL:
        *n = word_index(s, v);
        return *n < 0 ? "not one of" : NULL;
    case SHIM_SET_PATH:
        return v[0] != '/' ? "not an absolute path" : NULL;
    default:
        return NULL;
    }
}

/* What the setting falls back to, as a message says it. */
static void fallback(const struct shim_setting *s, char *out, size_t outsz)
{
    long long def = default_of(s);

    if (s->kind == SHIM_SET_BOOL && s->fails_closed)
        snprintf(out, outsz, "isolation stays on");
    else if (s->kind == SHIM_SET_BOOL)
        snprintf(out, outsz, "using %s", def ? "on" : "off");
    else if (s->kind == SHIM_SET_WORD && s->bad_is_error)
        snprintf(out, outsz, "requests that would run code fail until it is fixed");
    else if (s->kind == SHIM_SET_LEVEL) {
        char w[32];
        word_at(s, def, w, sizeof(w));
        snprintf(out, outsz, "using %s", w);
    }
    else if (s->kind == SHIM_SET_NUM || s->kind == SHIM_SET_SIZE) {
        char d[32];
        fmt_value(s, def, d, sizeof(d));
        snprintf(out, outsz, "using %s", d);
    } else
        snprintf(out, outsz, "using the default");
}

void shim_setting_describe(const struct shim_setting *s, char *def, char *range, size_t n)
{
    char lo[32], hi[32];

    range[0] = '\0';
    switch (s->kind) {
    case SHIM_SET_BOOL:
        snprintf(def, n, "%s", s->def ? "on" : "off");
        break;
    case SHIM_SET_NUM:
    case SHIM_SET_SIZE:
        if (s->def == DEF_BY_MEMORY)
            snprintf(def, n, "one per 32 MiB of half the memory (%d to %d)", INFLIGHT_MIN,
                     INFLIGHT_MAX);
        else
            fmt_value(s, s->def, def, n);
        fmt_value(s, s->lo, lo, sizeof(lo));
        fmt_value(s, s->hi, hi, sizeof(hi));
        snprintf(range, n, "%s..%s", lo, hi);
        break;
    case SHIM_SET_WORD:
    case SHIM_SET_LEVEL:
        word_at(s, s->kind == SHIM_SET_LEVEL ? s->def : 0, def, n);
        snprintf(range, n, "%s", s->text);
        break;
    case SHIM_SET_DIR: /* get_runtime_dir's rule */
        snprintf(def, n, "/run/codeshim for root, else $XDG_RUNTIME_DIR/codeshim (when it is "
                 "the user's own, 0700), else $XDG_CACHE_HOME/codeshim/run or "
                 "~/.cache/codeshim/run");
        break;
    default:
        snprintf(def, n, "%s", s->text && s->text[0] ? s->text : "unset");
    }
}

/* v judged once: 0 with *n the number (or word index) it means, or
 * -EINVAL with the message in why. */
static int read_value(const struct shim_setting *s, const char *v, long long *n, char *why,
                      size_t whysz)
{
    char lo[32], hi[32], fb[96];
    const char *bad;

    *n = 0;
    if (s->kind == SHIM_SET_SECRET || s->kind == SHIM_SET_STR || s->kind == SHIM_SET_DIR ||
        !(bad = judge(s, v, n)))
        return 0;
    fallback(s, fb, sizeof(fb));
    fmt_value(s, s->lo, lo, sizeof(lo));
    fmt_value(s, s->hi, hi, sizeof(hi));
    if (s->kind == SHIM_SET_NUM || s->kind == SHIM_SET_SIZE)
        snprintf(why, whysz, "%s=%.64s: %s %s..%s; %s", s->var, v, bad, lo, hi, fb);
    else if (s->kind == SHIM_SET_WORD || s->kind == SHIM_SET_LEVEL)
        snprintf(why, whysz, "%s=%.64s: %s %s; %s", s->var, v, bad, s->text, fb);
    else
        snprintf(why, whysz, "%s=%.64s: %s; %s", s->var, v, bad, fb);
    return -EINVAL;
}

int shim_setting_check(const struct shim_setting *s, const char *v, char *why, size_t whysz)
{
    long long n;

    return read_value(s, v, &n, why, whysz);
}

/* ---- the parser ---- */

struct parse_ctx {
    shim_env_fn env;
    shim_warn_fn warn;
    void *ctx;
};

static void warn(struct parse_ctx *p, const char *msg)
{
    if (p->warn)
        p->warn(msg, p->ctx);
}

static void store_num(struct shim_config *c, const struct shim_setting *s, long long n)
{
    char *f = (char *)c + s->offset;

    if (s->size == sizeof(int)) {
        int x = (int)n;
        memcpy(f, &x, sizeof(x));
    } else {
        uint64_t x = (uint64_t)n;
        memcpy(f, &x, sizeof(x));
    }
}

static void store_str(struct shim_config *c, const struct shim_setting *s, const char *v)
{
    snprintf((char *)c + s->offset, s->size, "%s", v);
}

/* XDG_RUNTIME_DIR when it is usable as the base of a private directory:
 * absolute, a real directory of this user with mode 0700 (so no other
 * user can have made or replaced anything in it). */
static int xdg_runtime_ok(const char *xdg, size_t room)
{
    struct stat st;

    return xdg && *xdg == '/' && strlen(xdg) < room && lstat(xdg, &st) == 0 &&
           S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
}

/* CODESHIM_RUNTIME_DIR, else a directory no other user can take:
 * /run/codeshim for root, $XDG_RUNTIME_DIR/codeshim when that is the
 * user's own (xdg_runtime_ok), else codeshim/run in the user's cache
 * directory ($XDG_CACHE_HOME, or ~/.cache with $HOME, or the passwd
 * entry's home when HOME is unset). store.c checks whichever it is and
 * refuses one that is not private; never a shared place such as /tmp.
 * Returns 1 for a default, 0 for the user's choice ("" when there is no
 * home to put it in). */
static int get_runtime_dir(struct parse_ctx *p, char *out, size_t outsz)
{
    const char *v = p->env("CODESHIM_RUNTIME_DIR", p->ctx);
    const char *xdg = p->env("XDG_RUNTIME_DIR", p->ctx);
    const char *cache = p->env("XDG_CACHE_HOME", p->ctx);
    const char *home = p->env("HOME", p->ctx);
    struct passwd pw, *found = NULL;
    char pwbuf[4096];

    out[0] = '\0';
    if (v && *v && strlen(v) < outsz - 64) {
        snprintf(out, outsz, "%s", v);
        return 0;
    }
    if (geteuid() == 0) {
        snprintf(out, outsz, "/run/codeshim");
        return 1;
    }
    if (xdg_runtime_ok(xdg, outsz - 80)) {
        snprintf(out, outsz, "%s/codeshim", xdg);
        return 1;
    }
    if (cache && *cache == '/' && strlen(cache) < outsz - 80) {
        snprintf(out, outsz, "%s/codeshim/run", cache);
        return 1;
    }
    if ((!home || *home != '/') && getpwuid_r(geteuid(), &pw, pwbuf, sizeof(pwbuf), &found) == 0 &&
        found)
        home = found->pw_dir;
    if (home && *home == '/' && strlen(home) < outsz - 96)
        snprintf(out, outsz, "%s/.cache/codeshim/run", strcmp(home, "/") ? home : "");
    return 1;
}

/* The default of s into its field. */
static void set_default(struct shim_config *c, const struct shim_setting *s)
{
    switch (s->kind) {
    case SHIM_SET_WORD:
        word_at(s, 0, (char *)c + s->offset, s->size);
        break;
    case SHIM_SET_STR:
    case SHIM_SET_PATH:
        store_str(c, s, s->text);
        break;
    case SHIM_SET_SECRET:
    case SHIM_SET_DIR:
        break;
    default:
        store_num(c, s, default_of(s));
    }
}

/* A secret: a bad value is reported by name only, never echoed. */
static void parse_secret(struct parse_ctx *p, struct shim_config *c,
                         const struct shim_setting *s, const char *v)
{
    char msg[128];

    if (((char *)c + s->offset)[0])
        return; /* an earlier row (CODESHIM_E2B_API_KEY) filled it */
    if (strlen(v) < s->size) {
        store_str(c, s, v);
        return;
    }
    snprintf(msg, sizeof(msg), "%s is too long (at most %zu bytes); ignored", s->var,
             s->size - 1);
    warn(p, msg);
}

static void parse_one(struct parse_ctx *p, struct shim_config *c, const struct shim_setting *s)
{
    const char *v = p->env(s->var, p->ctx);
    char why[256];
    long long n;

    if (s->kind == SHIM_SET_DIR) {
        c->runtime_dir_default = get_runtime_dir(p, c->runtime_dir, sizeof(c->runtime_dir));
        return;
    }
    if (s->kind != SHIM_SET_SECRET)
        set_default(c, s);
    if (!v || !*v)
        return;
    if (s->kind == SHIM_SET_SECRET) {
        parse_secret(p, c, s, v);
        return;
    }
    if (read_value(s, v, &n, why, sizeof(why)) < 0) {
        warn(p, why);
        if (s->kind == SHIM_SET_WORD && s->bad_is_error)
            store_str(c, s, "");
        return;
    }
    if ((s->kind == SHIM_SET_STR || s->kind == SHIM_SET_PATH) && strlen(v) >= s->size) {
        snprintf(why, sizeof(why), "%s=%.64s...: too long (at most %zu bytes); using the "
                 "default", s->var, v, s->size - 1);
        warn(p, why);
        return;
    }
    if (s->kind == SHIM_SET_STR || s->kind == SHIM_SET_PATH)
        store_str(c, s, v);
    else if (s->kind == SHIM_SET_WORD) /* the word as the table spells it */
        word_at(s, n, (char *)c + s->offset, s->size);
    else
        store_num(c, s, n);
}

void shim_config_parse(struct shim_config *c, shim_env_fn env, shim_warn_fn warn_fn,
                       void *ctx)
{
    memset(c, 0, sizeof(*c));
    shim_config_fill(c, env, warn_fn, ctx);
}

void shim_config_fill(struct shim_config *c, shim_env_fn env, shim_warn_fn warn_fn,
                      void *ctx)
{
    struct parse_ctx p = {env, warn_fn, ctx};
    size_t i;

    for (i = 0; i < shim_nsettings; i++)
        parse_one(&p, c, &shim_settings[i]);
}
