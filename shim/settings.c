/* settings.c - the pure parser behind config.h: variable names to
 * struct shim_config, through a getenv-shaped lookup, with ranges and
 * defaults; every bad value is reported through the warn callback and its
 * default used. config.c feeds it the real environment, and the named
 * sandboxes of CODESHIM_CONFIG as an overlay on it. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct parse_ctx {
    shim_env_fn env;
    shim_warn_fn warn;
    void *ctx;
};

static void warnf(struct parse_ctx *p, const char *name, const char *val,
                  const char *why)
{
    char msg[256];

    if (!p->warn)
        return;
    snprintf(msg, sizeof(msg), "%s=%.64s is %s; using the default", name, val,
             why);
    p->warn(msg, p->ctx);
}

static long long get_num(struct parse_ctx *p, const char *name, long long def,
                         long long lo, long long hi)
{
    const char *v = p->env(name, p->ctx);
    char *end;
    long long n;

    if (!v || !*v)
        return def;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || *end || end == v) {
        warnf(p, name, v, "not a whole number");
        return def;
    }
    if (n < lo || n > hi) {
        warnf(p, name, v, "out of range");
        return def;
    }
    return n;
}

static void get_str(struct parse_ctx *p, const char *name, const char *def,
                    char *out, size_t outsz)
{
    const char *v = p->env(name, p->ctx);

    if (!v || !*v)
        v = def;
    if (strlen(v) >= outsz) {
        warnf(p, name, v, "too long");
        v = def;
    }
    snprintf(out, outsz, "%s", v);
}

/* A size in bytes: a whole number with an optional binary suffix K, M, G
 * or T (case-insensitive; "KiB"/"KB"/"K" alike). */
static unsigned long long get_size(struct parse_ctx *p, const char *name,
                                   unsigned long long def,
                                   unsigned long long lo,
                                   unsigned long long hi)
{
    const char *v = p->env(name, p->ctx);
    unsigned long long n, mul = 1;
    char *end;

    if (!v || !*v)
        return def;
    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno || end == v || strchr(v, '-')) {
        warnf(p, name, v, "not a size (bytes, or a number with K, M, G or T)");
        return def;
    }
    switch (*end) {
    case 'k': case 'K': mul = 1ULL << 10; end++; break;
    case 'm': case 'M': mul = 1ULL << 20; end++; break;
    case 'g': case 'G': mul = 1ULL << 30; end++; break;
    case 't': case 'T': mul = 1ULL << 40; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (mul > 1 && (*end == 'b' || *end == 'B'))
        end++;
    if (*end) {
        warnf(p, name, v, "not a size (bytes, or a number with K, M, G or T)");
        return def;
    }
    if (n > hi / mul || n * mul < lo || n * mul > hi) {
        warnf(p, name, v, "out of range");
        return def;
    }
    return n * mul;
}

static int get_bool(struct parse_ctx *p, const char *name)
{
    const char *v = p->env(name, p->ctx);

    if (!v || !*v || !strcmp(v, "0") || !strcasecmp(v, "false") ||
        !strcasecmp(v, "no"))
        return 0;
    return 1;
}

static int get_level(struct parse_ctx *p)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *v = p->env("CODESHIM_LOG", p->ctx);
    int i;

    if (!v || !*v)
        return SHIM_LOG_WARN;
    for (i = 0; i < 4; i++)
        if (!strcasecmp(v, names[i]))
            return i;
    warnf(p, "CODESHIM_LOG", v, "not one of error|warn|info|debug");
    return SHIM_LOG_WARN;
}

/* CODESHIM_RUNTIME_DIR, else $XDG_RUNTIME_DIR/codeshim, else
 * ${TMPDIR:-/tmp}/codeshim-<uid>: private to the user (store.c checks it,
 * and moves a default taken by someone else to a private sibling).
 * Returns 1 for a default, 0 for the user's choice. */
static int get_runtime_dir(struct parse_ctx *p, char *out, size_t outsz)
{
    const char *v = p->env("CODESHIM_RUNTIME_DIR", p->ctx);
    const char *xdg = p->env("XDG_RUNTIME_DIR", p->ctx);
    const char *tmp = p->env("TMPDIR", p->ctx);

    if (v && *v && strlen(v) < outsz - 64) {
        snprintf(out, outsz, "%s", v);
        return 0;
    }
    if (xdg && *xdg == '/' && strlen(xdg) < outsz - 80)
        snprintf(out, outsz, "%s/codeshim", xdg);
    else if (tmp && *tmp == '/' && strlen(tmp) < outsz - 96)
        snprintf(out, outsz, "%s/codeshim-%ld", tmp, (long)geteuid());
    else
        snprintf(out, outsz, "/tmp/codeshim-%ld", (long)geteuid());
    return 1;
}

/* A secret: a bad value is reported by name only, never echoed. */
static void get_secret(struct parse_ctx *p, const char *name, char *out, size_t outsz)
{
    const char *v = p->env(name, p->ctx);

    out[0] = '\0';
    if (!v || !*v)
        return;
    if (strlen(v) >= outsz) {
        if (p->warn) {
            char msg[128];
            snprintf(msg, sizeof(msg), "%s is too long (at most %zu bytes); ignored", name,
                     outsz - 1);
            p->warn(msg, p->ctx);
        }
        return;
    }
    snprintf(out, outsz, "%s", v);
}

/* The e2b backend's settings; CODESHIM_E2B_API_KEY wins over E2B_API_KEY. */
static void get_e2b(struct parse_ctx *p, struct shim_config *c)
{
    get_secret(p, "CODESHIM_E2B_API_KEY", c->e2b_api_key, sizeof(c->e2b_api_key));
    if (!c->e2b_api_key[0])
        get_secret(p, "E2B_API_KEY", c->e2b_api_key, sizeof(c->e2b_api_key));
    /* unset: "" and the control plane is https://api.<E2B_DOMAIN>, as e2b's
     * SDKs make it (https://api.e2b.app by default) */
    get_str(p, "E2B_API_URL", "", c->e2b_api_url, sizeof(c->e2b_api_url));
    get_str(p, "E2B_DOMAIN", "e2b.app", c->e2b_domain, sizeof(c->e2b_domain));
    get_str(p, "CODESHIM_E2B_SANDBOX_URL", "", c->e2b_sandbox_url, sizeof(c->e2b_sandbox_url));
    get_str(p, "CODESHIM_E2B_TEMPLATE", "code-interpreter-v1", c->e2b_template,
            sizeof(c->e2b_template));
    c->e2b_internet = get_bool(p, "CODESHIM_E2B_INTERNET");
}

/* CODESHIM_SESSIOND: an absolute path only; a relative one would depend on
 * whatever directory the program is in when a session starts. */
static void get_sessiond(struct parse_ctx *p, char *out, size_t outsz)
{
    get_str(p, "CODESHIM_SESSIOND", "", out, outsz);
    if (out[0] && out[0] != '/') {
        warnf(p, "CODESHIM_SESSIOND", out, "not an absolute path");
        out[0] = '\0';
    }
}

/* Worker threads for intercepted multi transfers: two per online core
 * (they mostly wait on the model), within 2..64. */
static long long default_inflight(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    if (n < 1)
        n = 1;
    return n > 32 ? 64 : 2 * n;
}

void shim_config_parse(struct shim_config *c, shim_env_fn env, shim_warn_fn warn,
                       void *ctx)
{
    memset(c, 0, sizeof(*c));
    shim_config_fill(c, env, warn, ctx);
}

void shim_config_fill(struct shim_config *c, shim_env_fn env, shim_warn_fn warn,
                      void *ctx)
{
    struct parse_ctx p = {env, warn, ctx};

    c->disabled = get_bool(&p, "CODESHIM_DISABLE");
    c->max_loops = (int)get_num(&p, "CODESHIM_MAX_LOOPS", 10, 1, 1000);
    c->exec_timeout_s = (int)get_num(&p, "CODESHIM_EXEC_TIMEOUT", 60, 1, 86400);
    c->output_cap =
        (size_t)get_num(&p, "CODESHIM_OUTPUT_CAP", 20000, 256, 10 << 20);
    c->max_request = (size_t)get_num(&p, "CODESHIM_MAX_REQUEST", 32 << 20,
                                     4096, 1LL << 30);
    c->max_response = (size_t)get_num(&p, "CODESHIM_MAX_RESPONSE", 64 << 20,
                                      4096, 1LL << 30);
    c->log_level = get_level(&p);
    get_str(&p, "CODESHIM_LOG_FILE", "", c->log_file, sizeof(c->log_file));
    get_str(&p, "CODESHIM_PYTHON", "/usr/bin/python3", c->python,
            sizeof(c->python));
    get_str(&p, "CODESHIM_SANDBOX", "local", c->sandbox, sizeof(c->sandbox));
    get_str(&p, "TMPDIR", "/tmp", c->tmpdir, sizeof(c->tmpdir));
    c->offline = get_bool(&p, "CODESHIM_OFFLINE");
    get_str(&p, "CODESHIM_RECORD", "", c->record_dir, sizeof(c->record_dir));
    get_str(&p, "CODESHIM_REPLAY", "", c->replay_dir, sizeof(c->replay_dir));
    get_str(&p, "CODESHIM_TRACE", "", c->trace_file, sizeof(c->trace_file));
    c->session_ttl_s = (int)get_num(&p, "CODESHIM_SESSION_TTL", 900, 1, SHIM_SESSION_TTL_MAX);
    c->session_cap = (int)get_num(&p, "CODESHIM_SESSION_CAP", 10, 1, 1000);
    c->runtime_dir_default = get_runtime_dir(&p, c->runtime_dir, sizeof(c->runtime_dir));
    get_sessiond(&p, c->sessiond, sizeof(c->sessiond));
    c->memory_limit = get_size(&p, "CODESHIM_MEMORY", 1ULL << 30, 64ULL << 20,
                               1ULL << 40);
    c->procs_limit = (int)get_num(&p, "CODESHIM_PROCS", 256, 16, 65536);
    c->file_size_limit = get_size(&p, "CODESHIM_FILE_SIZE", 512ULL << 20,
                                  1ULL << 20, 1ULL << 40);
    c->disk_limit = get_size(&p, "CODESHIM_DISK", 1ULL << 30, 1ULL << 20,
                             1ULL << 40);
    c->inodes_limit = (unsigned long long)get_num(&p, "CODESHIM_INODES", 65536,
                                                  256, 1 << 24);
    c->open_files_limit =
        (int)get_num(&p, "CODESHIM_OPEN_FILES", 1024, 64, 1 << 20);
    c->cpu_time_s = (int)get_num(&p, "CODESHIM_CPU_TIME", 3600, 1, 7 * 86400);
    c->unsafe_no_isolation = get_bool(&p, "CODESHIM_UNSAFE_NO_ISOLATION");
    get_str(&p, "CODESHIM_BWRAP", "/usr/bin/bwrap", c->bwrap, sizeof(c->bwrap));
    c->warm_spare = (int)get_num(&p, "CODESHIM_WARM_SPARE", 1, 0, 1);
    c->fork_server = (int)get_num(&p, "CODESHIM_FORK_SERVER", 1, 0, 1);
    get_str(&p, "CODESHIM_PRELOAD_MODULES", "numpy,pandas,matplotlib.pyplot",
            c->preload_modules, sizeof(c->preload_modules));
    get_e2b(&p, c);
    c->file_max = get_size(&p, "CODESHIM_FILE_MAX", 100ULL << 20, 1ULL << 10, 2ULL << 30);
    c->files_disk = get_size(&p, "CODESHIM_FILES_DISK", 1ULL << 30, 1ULL << 20, 1ULL << 40);
    c->container_minutes = (int)get_num(&p, "CODESHIM_CONTAINER_MINUTES", 20, 1, 7 * 1440);
    get_str(&p, "CODESHIM_CONFIG", "", c->config_file, sizeof(c->config_file));
    c->max_inflight = (int)get_num(&p, "CODESHIM_MAX_INFLIGHT", default_inflight(), 1, 1024);
}
