/* real.c - binds the real libcurl functions; see real.h.
 *
 * Order per symbol: dlvsym(RTLD_NEXT, name, version) (the normal case:
 * libcurl linked by the program), then dlvsym on dlopen(soname,
 * RTLD_NOLOAD) (libcurl pulled in privately by a dlopen(RTLD_LOCAL)-ed
 * module, e.g. pycurl, where RTLD_NEXT finds nothing), then, for the
 * OpenSSL flavour only (the default version of our wrappers, so also what
 * unversioned callers reach), unversioned lookups. A result that is one of
 * our own wrappers is rejected: calling it would recurse forever.
 *
 * Binding happens lazily on the first wrapper call, never in a constructor
 * (pitfall: other libraries' constructors may call curl first). The one
 * constructor here only remembers where this library was loaded from,
 * while that path still means what the loader took it to mean. */
#include "system/real.h"

#include "base/guard.h"
#include "base/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct flavor_def {
    const char *version;
    const char *sonames[3];
};

static const struct flavor_def flavors[SHIM_NFLAVORS] = {
    [SHIM_FLAVOR_OPENSSL] = {"CURL_OPENSSL_4", {"libcurl.so.4", "libcurl.so", NULL}},
    [SHIM_FLAVOR_GNUTLS] = {"CURL_GNUTLS_3", {"libcurl-gnutls.so.4", NULL, NULL}},
    [SHIM_FLAVOR_NSS] = {"CURL_NSS_3", {"libcurl-nss.so.4", NULL, NULL}},
};

static struct shim_curl_api apis[SHIM_NFLAVORS];
static int bound_ok[SHIM_NFLAVORS];
/* &apis[f] once bound: every wrapper call reads it (real.h), one acquire
 * load instead of a pthread_once call */
const struct shim_curl_api *shim_real_ready[SHIM_NFLAVORS];
static pthread_once_t once[SHIM_NFLAVORS] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                             PTHREAD_ONCE_INIT};
__thread int shim_guard_depth;

/* The first and one past the last byte of this object, defined by the
 * linker; hidden, so they are ours and not the program's. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

/* A symbol defined in this very object is one of our wrappers: calling it
 * would recurse (proxychains' circular-reference check). An address
 * comparison: dladdr would scan the whole symbol table of the object p is
 * in (libcurl's: thousands of symbols) on every lookup. */
static int is_self(void *p)
{
    const char *c = p;

    return c && c >= __ehdr_start && c < _end;
}

static void *lookup(enum shim_flavor f, const char *name)
{
    const struct flavor_def *d = &flavors[f];
    void *p;
    int i;

    p = dlvsym(RTLD_NEXT, name, d->version);
    if (p && !is_self(p))
        return p;
    for (i = 0; i < 3 && d->sonames[i]; i++) {
        void *lib = dlopen(d->sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!lib)
            continue;
        p = dlvsym(lib, name, d->version);
        if (!p || is_self(p))
            p = f == SHIM_FLAVOR_OPENSSL ? dlsym(lib, name) : NULL;
        dlclose(lib); /* NOLOAD took a reference; the library stays loaded */
        if (p && !is_self(p))
            return p;
    }
    if (f == SHIM_FLAVOR_OPENSSL) {
        p = dlsym(RTLD_NEXT, name);
        if (p && !is_self(p))
            return p;
    }
    return NULL;
}

#define BIND(field, name)                                                      \
    do {                                                                       \
        *(void **)&a->field = lookup(f, name);                                 \
        if (!a->field) {                                                       \
            missing = name;                                                    \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* Optional: a program that calls one of these linked it, so it exists
 * wherever it matters; NULL elsewhere (the wrapper then fails cleanly). */
#define BIND_OPT(field, name) (*(void **)&a->field = lookup(f, name))

static void bind_multi(enum shim_flavor f, struct shim_curl_api *a)
{
#define BIND_MULTI(name, field, ret, params) BIND_OPT(field, #name);
    SHIM_MULTI_SYMBOLS(BIND_MULTI)
#undef BIND_MULTI
    BIND_OPT(multi_init, "curl_multi_init");
    BIND_OPT(url_get, "curl_url_get");
    BIND_OPT(url, "curl_url");
    BIND_OPT(url_set, "curl_url_set");
    BIND_OPT(url_cleanup, "curl_url_cleanup");
    BIND_OPT(easy_escape, "curl_easy_escape");
    BIND_OPT(easy_unescape, "curl_easy_unescape");
    BIND_OPT(free, "curl_free");
}

/* The executable segments of the object that holds code address p. */
struct text_find {
    uintptr_t base, lo, hi;
};

static int text_of_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct text_find *t = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int i;

    (void)size;
    if ((uintptr_t)info->dlpi_addr != t->base)
        return 0;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        if (info->dlpi_addr + ph->p_vaddr < lo)
            lo = info->dlpi_addr + ph->p_vaddr;
        if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
            hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    }
    if (hi > lo) {
        t->lo = lo;
        t->hi = hi;
    }
    return 1;
}

static void find_text(struct shim_curl_api *a)
{
    struct text_find t = {0, 0, 0};
    Dl_info info;
    struct link_map *lm = NULL;

    a->text_lo = 0; /* unknown: every call counts as libcurl's, as the guard alone said */
    a->text_len = UINTPTR_MAX;
    if (!dladdr1(*(void **)&a->easy_perform, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return;
    t.base = (uintptr_t)lm->l_addr;
    dl_iterate_phdr(text_of_object, &t);
    if (t.hi > t.lo) {
        a->text_lo = t.lo;
        a->text_len = t.hi - t.lo;
    }
}

static void bind_flavor(enum shim_flavor f)
{
    struct shim_curl_api *a = &apis[f];
    const char *missing = NULL;

    a->flavor = f;
#define BIND_EASY(name, field, ret, params) BIND(field, #name);
    SHIM_EASY_SYMBOLS(BIND_EASY)
#undef BIND_EASY
    BIND(slist_append, "curl_slist_append");
    BIND(slist_free_all, "curl_slist_free_all");
    bind_multi(f, a);
    find_text(a);
    bound_ok[f] = 1;
    __atomic_store_n(&shim_real_ready[f], a, __ATOMIC_RELEASE);
out:
    if (missing)
        LOG_ERR("cannot find the real %s (%s build of libcurl) in this process",
                missing, flavors[f].version);
}

static void bind_openssl(void) { bind_flavor(SHIM_FLAVOR_OPENSSL); }
static void bind_gnutls(void) { bind_flavor(SHIM_FLAVOR_GNUTLS); }
static void bind_nss(void) { bind_flavor(SHIM_FLAVOR_NSS); }

const struct shim_curl_api *shim_real_bind(enum shim_flavor f)
{
    static void (*const binders[SHIM_NFLAVORS])(void) = {bind_openssl, bind_gnutls,
                                                         bind_nss};

    if ((unsigned)f >= SHIM_NFLAVORS)
        return NULL;
    pthread_once(&once[f], binders[f]);
    return bound_ok[f] ? &apis[f] : NULL;
}

static char self_dir[PATH_MAX];
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static const char *self_name; /* the loader's name of this library */

static void find_self(void)
{
    char *real, *slash;

    if (!self_name)
        return;
    real = realpath(self_name, NULL);
    if (!real)
        return;
    slash = strrchr(real, '/');
    if (slash && (size_t)(slash - real) < sizeof(self_dir))
        snprintf(self_dir, sizeof(self_dir), "%.*s", slash == real ? 1 : (int)(slash - real),
                 real);
    free(real);
}

/* The real, absolute directory of this library. The loader may have been
 * given a relative path (LD_PRELOAD=build/libcodeshim.so), which means
 * something else once the program has changed directory: such a name is
 * resolved at load time, before the program's own code runs. An absolute
 * one (the loader keeps the string) waits until a helper is looked for,
 * which most programs never do. */
__attribute__((constructor)) static void remember_self_dir(void)
{
    Dl_info info;

    if (!dladdr((void *)&shim_real_self_dir, &info) || !info.dli_fname)
        return;
    self_name = info.dli_fname;
    if (self_name[0] != '/')
        pthread_once(&self_once, find_self);
}

void shim_real_self_dir(char *out, size_t outsz)
{
    pthread_once(&self_once, find_self);
    if ((size_t)snprintf(out, outsz, "%s", self_dir) >= outsz)
        out[0] = '\0';
}

int shim_real_cjson(const char *const names[], void *out[], size_t n)
{
    void *lib = dlopen("libcjson.so.1", RTLD_NOW | RTLD_LOCAL);
    size_t i;

    if (!lib) {
        LOG_ERR("cannot load libcjson.so.1: %s", dlerror());
        return -ENOENT;
    }
    for (i = 0; i < n; i++) {
        out[i] = dlsym(lib, names[i]);
        if (!out[i]) {
            LOG_ERR("libcjson.so.1 has no %s", names[i]);
            memset(out, 0, n * sizeof(*out));
            return -ENOENT; /* the library stays loaded: harmless */
        }
    }
    return 0;
}

static shim_dlopen_fn real_dlopen_fn;
static pthread_once_t dlopen_once = PTHREAD_ONCE_INIT;

static void bind_dlopen(void)
{
    void *p = dlsym(RTLD_NEXT, "dlopen");
    if (p && !is_self(p))
        real_dlopen_fn = (shim_dlopen_fn)p;
}

shim_dlopen_fn shim_real_dlopen(void)
{
    pthread_once(&dlopen_once, bind_dlopen);
    return real_dlopen_fn;
}
