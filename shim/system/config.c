/* config.c - the only getenv() caller; see config.h. The process-wide
 * settings (parsed by settings.c from the environment) and the named
 * sandboxes of CODESHIM_CONFIG (read by confile.c, each parsed by
 * settings.c as an overlay on the environment). */
#include "system/config.h"

#include "base/confile.h"
#include "base/fileio.h"
#include "base/log.h"
#include "system/real.h"
#include "system/settings.h"

#include <fcntl.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* codeshim's own settings, minus secrets: helpers never need the e2b key. */
static int own_var(const char *e)
{
    return !strncmp(e, "CODESHIM_", 9) && strncmp(e, "CODESHIM_E2B_API_KEY=", 21);
}

char **shim_config_own_env(void)
{
    extern char **environ;
    size_t n = 0, i, k = 0;
    char **out;

    for (i = 0; environ && environ[i]; i++)
        n += own_var(environ[i]);
    out = calloc(n + 1, sizeof(*out));
    for (i = 0; out && environ && environ[i] && k < n; i++)
        if (own_var(environ[i]) && (out[k] = strdup(environ[i])) != NULL)
            k++;
    return out;
}

/* ---- process-wide instance ---- */

static struct shim_config g_config;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The CODESHIM_* entries of the environment, gathered in one pass for
 * the one parse of load(): it asks for some forty of them, and one
 * getenv() walks the whole environment each time. */
#define OWN_PREFIX "CODESHIM_"
#define OWN_MAX 64
struct own_env {
    const char *e[OWN_MAX];
    size_t n;
    int overflow; /* more than OWN_MAX: getenv() it is */
};

static void gather_own(struct own_env *o)
{
    extern char **environ;
    char **p;

    o->n = 0;
    o->overflow = 0;
    for (p = environ; p && *p; p++) {
        if (strncmp(*p, OWN_PREFIX, sizeof(OWN_PREFIX) - 1))
            continue;
        if (o->n == OWN_MAX) {
            o->overflow = 1;
            return;
        }
        o->e[o->n++] = *p;
    }
}

static const char *real_env(const char *name, void *ctx)
{
    const struct own_env *o = ctx;
    size_t i, k;

    if (o->overflow || strncmp(name, OWN_PREFIX, sizeof(OWN_PREFIX) - 1))
        return getenv(name);
    k = strlen(name);
    for (i = 0; i < o->n; i++) /* the first, as getenv() */
        if (!strncmp(o->e[i], name, k) && o->e[i][k] == '=')
            return o->e[i] + k + 1;
    return NULL;
}

#define MAX_WARNINGS 8
static char g_warnings[MAX_WARNINGS][256];
static int g_nwarnings;

static void keep_warning(const char *msg, void *ctx)
{
    (void)ctx;
    if (g_nwarnings < MAX_WARNINGS)
        snprintf(g_warnings[g_nwarnings++], sizeof(g_warnings[0]), "%s", msg);
}

/* The supervisor next to the library's real path (real.c knows where the
 * library was loaded from), when CODESHIM_SESSIOND does not say; left
 * empty when that is unknown, and sessions are refused. */
static void default_sessiond(struct shim_config *c)
{
    char dir[SHIM_PATH_MAX];

    if (c->sessiond[0])
        return;
    shim_real_self_dir(dir, sizeof(dir));
    if (dir[0] == '/') {
        int n = snprintf(c->sessiond, sizeof(c->sessiond), "%s/codeshim-sessiond", dir);
        if (n < 0 || (size_t)n >= sizeof(c->sessiond))
            c->sessiond[0] = '\0'; /* too long: sessions are refused */
    }
}

/* "CODESHIM_OFLINE is not a codeshim setting; did you mean ...?" for an
 * environment entry e (NAME=value) whose name no row knows, else "". */
static void misspelt(const char *e, char *out, size_t outsz)
{
    char name[64];
    size_t n = strcspn(e, "=");
    const char *near;

    out[0] = '\0';
    if (n >= sizeof(name))
        n = sizeof(name) - 1;
    memcpy(name, e, n);
    name[n] = '\0';
    if (shim_setting_known(name))
        return;
    near = shim_setting_closest(name);
    snprintf(out, outsz, "%s is not a codeshim setting%s%s%s; it is ignored", name,
             near ? " (did you mean " : "", near ? near : "", near ? "?)" : "");
}

size_t shim_config_misspelt(char (*out)[128], size_t max)
{
    extern char **environ;
    char **p;
    size_t n = 0;

    for (p = environ; p && *p && n < max; p++)
        if (!strncmp(*p, OWN_PREFIX, sizeof(OWN_PREFIX) - 1)) {
            misspelt(*p, out[n], sizeof(out[n]));
            n += out[n][0] != '\0';
        }
    return n;
}

static void load(void)
{
    struct own_env own;
    char msg[128];
    size_t k;
    int i;

    gather_own(&own);
    shim_config_fill(&g_config, real_env, keep_warning, &own); /* once, still zero */
    for (k = 0; k < own.n; k++) {
        misspelt(own.e[k], msg, sizeof(msg));
        if (msg[0])
            keep_warning(msg, NULL);
    }
    default_sessiond(&g_config);
    shim_log_setup(g_config.log_level, g_config.log_file);
    for (i = 0; i < g_nwarnings; i++)
        LOG_WARN("%s", g_warnings[i]);
}

const struct shim_config *shim_config_ready;

const struct shim_config *shim_config_load(void)
{
    pthread_once(&g_once, load);
    __atomic_store_n(&shim_config_ready, &g_config, __ATOMIC_RELEASE);
    return &g_config;
}


/* ---- named sandboxes (CODESHIM_CONFIG) ---- */

/* A file setting is a row of the settings table with a file key
 * (settings.h): the variable whose parser and range it shares. */
static const char *file_var(const char *key)
{
    const struct shim_setting *s = shim_setting_by_file_key(key);

    return s ? s->var : NULL;
}

#define ENV_PREFIX "os.environ/" /* LiteLLM's spelling for "from the environment" */

struct named {
    char name[SHIM_CONFILE_NAME_MAX];
    int selectable;
    /* "" when usable; else why not, for a reason of the environment (a
     * variable it names is not set), said once: logged (set) the first
     * time a request picks it */
    char unusable[640];
    int logged;
    struct shim_config cfg;
};

static struct {
    pthread_once_t once;
    struct named *v;
    size_t n, def;
    char error[768]; /* "" when the file loaded, or there is none */
} g_named = {PTHREAD_ONCE_INIT, NULL, 0, 0, ""};

/* The overlay: a sandbox's settings first, then the environment. error:
 * the file's own mistake (the whole file is refused); unset: a variable
 * it names is not set here (only this sandbox cannot be used). */
struct overlay {
    const struct shim_confile_sandbox *s;
    char error[512];
    char unset[512];
};

static void overlay_fail(struct overlay *o, int line, const char *msg)
{
    if (!o->error[0])
        snprintf(o->error, sizeof(o->error), "line %d: %s", line, msg);
}

static const char *overlay_env(const char *name, void *ctx)
{
    struct overlay *o = ctx;
    const char *var;
    size_t i;

    for (i = 0; i < o->s->npairs; i++) {
        const struct shim_confile_pair *p = &o->s->pairs[i];
        const char *v = p->value;

        var = file_var(p->key);
        if (!var || strcmp(var, name))
            continue;
        if (strncmp(v, ENV_PREFIX, strlen(ENV_PREFIX)))
            return v;
        v = getenv(v + strlen(ENV_PREFIX));
        if (!v || !*v) {
            char msg[300];
            snprintf(msg, sizeof(msg), "%s names the environment variable %.200s, which is "
                     "not set", p->key, p->value + strlen(ENV_PREFIX));
            if (!o->unset[0])
                snprintf(o->unset, sizeof(o->unset), "line %d: %s", p->line, msg);
        }
        return v;
    }
    return getenv(name);
}

/* settings.c's warning about a variable, told as the file's setting. */
static void overlay_warn(const char *msg, void *ctx)
{
    struct overlay *o = ctx;
    size_t i, n;

    for (i = 0; i < o->s->npairs; i++) {
        const struct shim_confile_pair *p = &o->s->pairs[i];
        const char *var = file_var(p->key);

        n = var ? strlen(var) : 0;
        if (n && !strncmp(msg, var, n) && (msg[n] == '=' || msg[n] == ' ')) {
            char text[300];
            snprintf(text, sizeof(text), "%s%.*s", p->key, (int)strcspn(msg + n, ";"), msg + n);
            overlay_fail(o, p->line, text);
            return;
        }
    }
}

/* The keys a sandbox takes, "a, b, ..., selectable", into out. */
static void known_keys(char *out, size_t n)
{
    size_t i, len = 0;

    out[0] = '\0';
    for (i = 0; i < shim_nsettings && len < n; i++)
        if (shim_settings[i].file_key)
            len += (size_t)snprintf(out + len, n - len, "%s, ", shim_settings[i].file_key);
    if (len < n)
        snprintf(out + len, n - len, "selectable");
}

static int check_keys(const struct shim_confile_sandbox *s, char *err, size_t errsz)
{
    char known[320];
    size_t i;

    for (i = 0; i < s->npairs; i++) {
        const char *key = s->pairs[i].key;

        if (!file_var(key) && strcmp(key, "selectable")) {
            known_keys(known, sizeof(known));
            snprintf(err, errsz, "line %d: unknown setting \"%.64s\" in sandbox \"%s\" "
                     "(known: %s)", s->pairs[i].line, key, s->name, known);
            return -EINVAL;
        }
    }
    return 0;
}

/* One named sandbox: the environment's settings with the entry's on top. */
static int build_named(const struct shim_confile_sandbox *s, struct named *out, char *err,
                       size_t errsz)
{
    struct overlay o = {s, "", ""};
    const char *sel = shim_confile_get(s, "selectable");
    const char *backend;

    if (check_keys(s, err, errsz) < 0)
        return -EINVAL;
    snprintf(out->name, sizeof(out->name), "%s", s->name);
    if (sel && (out->selectable = shim_setting_bool(sel)) < 0) {
        snprintf(err, errsz, "sandbox \"%s\": selectable must be true or false (or yes/no, "
                 "on/off, 1/0)", s->name);
        return -EINVAL;
    }
    shim_config_parse(&out->cfg, overlay_env, overlay_warn, &o);
    default_sessiond(&out->cfg);
    backend = out->cfg.sandbox;
    if (!backend[0]) /* settings.c left a bad backend empty: say which it was */
        snprintf(o.error, sizeof(o.error), "line %d: backend \"%.32s\" is not one of local, e2b",
                 s->line, shim_confile_get(s, "backend") ? shim_confile_get(s, "backend") : "");
    if (!o.error[0] && !o.unset[0] && !strcmp(backend, "e2b") && !out->cfg.e2b_api_key[0])
        snprintf(o.unset, sizeof(o.unset), "line %d: an e2b sandbox needs api_key (or "
                 "E2B_API_KEY in the environment), and none is set", s->line);
    if (o.error[0]) {
        snprintf(err, errsz, "sandbox \"%s\", %s", s->name, o.error);
        return -EINVAL;
    }
    if (o.unset[0])
        snprintf(out->unusable, sizeof(out->unusable), "sandbox \"%s\", %s", s->name, o.unset);
    return 0;
}

/* Reads at most SHIM_CONFILE_MAX_BYTES + 1 bytes of path into a new buffer. */
static char *read_file(const char *path, size_t *len, char *err, size_t errsz)
{
    size_t cap = SHIM_CONFILE_MAX_BYTES + 1, n = 0;
    char *buf;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, errsz, "cannot open it: %s", strerror(errno));
        return NULL;
    }
    buf = malloc(cap);
    if (buf) {
        ssize_t r = shim_fileio_read_fd(fd, buf, cap);
        if (r < 0) {
            snprintf(err, errsz, "cannot read it: %s", strerror((int)-r));
            free(buf);
            buf = NULL;
        } else {
            n = (size_t)r;
        }
    }
    if (!buf && !err[0])
        snprintf(err, errsz, "out of memory");
    close(fd);
    *len = n;
    return buf;
}

static int load_file(const char *path, char *err, size_t errsz)
{
    struct shim_confile *f = calloc(1, sizeof(*f));
    size_t len = 0, i;
    char *text = f ? read_file(path, &len, err, errsz) : NULL;
    int rc = text ? shim_confile_parse(text, len, f, err, errsz) : -EINVAL;

    free(text);
    if (rc == 0 && !f->nsandboxes) {
        snprintf(err, errsz, "\"sandboxes\" names no sandbox");
        rc = -EINVAL;
    }
    if (rc == 0 && !(g_named.v = calloc(f->nsandboxes, sizeof(*g_named.v)))) {
        snprintf(err, errsz, "out of memory");
        rc = -ENOMEM;
    }
    for (i = 0; rc == 0 && i < f->nsandboxes; i++)
        rc = build_named(&f->sandboxes[i], &g_named.v[i], err, errsz);
    if (rc == 0) {
        g_named.n = f->nsandboxes;
        for (i = 0; i < g_named.n && strcmp(g_named.v[i].name, f->default_name); i++)
            ;
        g_named.def = i;
        if (!f->default_name[0] && g_named.n == 1)
            g_named.def = 0;
        else if (i == g_named.n) {
            if (f->default_name[0])
                snprintf(err, errsz, "default names \"%s\", which is not among the sandboxes",
                         f->default_name);
            else
                snprintf(err, errsz, "no \"default\": say which sandbox requests use when "
                         "they name none");
            rc = -EINVAL;
        }
    }
    if (rc < 0) {
        free(g_named.v);
        g_named.v = NULL;
        g_named.n = 0;
    }
    free(f);
    return rc;
}

static void load_named(void)
{
    const struct shim_config *c = shim_config();
    char err[600] = "";

    if (!c->config_file[0] || load_file(c->config_file, err, sizeof(err)) == 0)
        return;
    snprintf(g_named.error, sizeof(g_named.error), "CODESHIM_CONFIG=%.128s: %s", c->config_file,
             err);
    LOG_ERR("%s; requests that would run code are answered with this error", g_named.error);
}

/* n's settings, or NULL (500) when the environment lacks what it names;
 * that is logged once a process, the first time a request picks it. */
static const struct shim_config *usable(struct named *n, char *why, size_t whysz, int *status)
{
    if (!n->unusable[0])
        return &n->cfg;
    if (!__atomic_exchange_n(&n->logged, 1, __ATOMIC_RELAXED))
        LOG_ERR("CODESHIM_CONFIG=%.128s: %s; requests that pick it are answered with this "
                "error", shim_config()->config_file, n->unusable);
    snprintf(why, whysz, "codeshim's sandbox \"%s\" cannot be used: CODESHIM_CONFIG=%.128s: %s",
             n->name, shim_config()->config_file, n->unusable);
    *status = 500;
    return NULL;
}

const struct shim_config *shim_config_sandbox(const char *name, int named, char *why,
                                              size_t whysz, int *status)
{
    size_t i;

    pthread_once(&g_named.once, load_named);
    *status = 0;
    if (g_named.error[0]) {
        snprintf(why, whysz, "codeshim's sandbox configuration is broken: %s", g_named.error);
        *status = 500;
        return NULL;
    }
    if (!g_named.n && !shim_config()->sandbox[0]) {
        snprintf(why, whysz, "codeshim's sandbox configuration is broken: "
                 "CODESHIM_SANDBOX=%.64s is not one of local, e2b", getenv("CODESHIM_SANDBOX"));
        *status = 500;
        return NULL;
    }
    if (!g_named.n) {
        if (!named || !name)
            return shim_config();
        snprintf(why, whysz, "this request names the sandbox \"%.64s\", but codeshim has no "
                 "named sandboxes (CODESHIM_CONFIG is not set)", name);
        *status = 400;
        return NULL;
    }
    for (i = 0; name && i < g_named.n && strcmp(g_named.v[i].name, name); i++)
        ;
    if (!name || (i == g_named.n && !named))
        i = g_named.def;
    if (i < g_named.n && (g_named.v[i].selectable || i == g_named.def))
        return usable(&g_named.v[i], why, whysz, status);
    snprintf(why, whysz, i == g_named.n ? "the sandbox \"%.64s\" is not configured"
                                        : "the sandbox \"%.64s\" may not be chosen by a request "
                                          "(it is not selectable in CODESHIM_CONFIG)", name);
    *status = 400;
    return NULL;
}

size_t shim_config_sandbox_list(const char **names, int *selectable, const char **unusable,
                                size_t max, size_t *def)
{
    size_t i;

    pthread_once(&g_named.once, load_named);
    *def = g_named.def;
    for (i = 0; i < g_named.n && i < max; i++) {
        names[i] = g_named.v[i].name;
        selectable[i] = g_named.v[i].selectable || i == g_named.def;
        unusable[i] = g_named.v[i].unusable[0] ? g_named.v[i].unusable : NULL;
    }
    return g_named.n;
}

const char *shim_config_file_error(void)
{
    pthread_once(&g_named.once, load_named);
    return g_named.error[0] ? g_named.error : NULL;
}
