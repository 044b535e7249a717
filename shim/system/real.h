/* real.h - the real libcurl functions, per libcurl build ("flavour").
 *
 * Debian ships libcurl in several builds whose symbols carry different
 * versions (CURL_OPENSSL_4, CURL_GNUTLS_3, CURL_NSS_3); one process may
 * load more than one. preload.c exports a wrapper per flavour, so every
 * wrapper knows which build its caller linked, and calls that build's real
 * functions from this table. Calling one build with another's handle would
 * corrupt memory, which is also why codeshim never links -lcurl.
 *
 * real.c is the only file that calls dlsym/dlvsym/dlopen. */
#ifndef SHIM_REAL_H
#define SHIM_REAL_H

#include "system/symbols.h"

#include <curl/curl.h>
#include <stdint.h>

enum shim_flavor {
    SHIM_FLAVOR_OPENSSL = 0,
    SHIM_FLAVOR_GNUTLS = 1,
    SHIM_FLAVOR_NSS = 2,
    SHIM_NFLAVORS
};

struct shim_curl_api {
    enum shim_flavor flavor;
    /* the interposed functions (symbols.h), each under its own name */
#define SHIM_REAL_FIELD(name, field, ret, params) ret(*field) params;
    SHIM_EASY_SYMBOLS(SHIM_REAL_FIELD)
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    /* The multi interface (multi.h). Bound when present: a libcurl
     * without one of them leaves it NULL and the easy API still works. */
    SHIM_MULTI_SYMBOLS(SHIM_REAL_FIELD)
#undef SHIM_REAL_FIELD
    /* the multi engine's private handles (curl/multi.c); not interposed */
    CURLM *(*multi_init)(void);
    /* CURLOPT_CURLU's URL (handles.c); NULL in a libcurl without them */
    CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
    /* url.c's parser and escapes; NULL in a libcurl without them */
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    void (*url_cleanup)(CURLU *);
    char *(*easy_escape)(CURL *, const char *, int);
    char *(*easy_unescape)(CURL *, const char *, int, int *);
    void (*free)(void *);
    /* [text_lo, text_lo + text_len): libcurl's own code, so a call into a
     * wrapper from there is libcurl calling itself (shim_real_from_libcurl);
     * all of memory when it could not be located */
    uintptr_t text_lo, text_len;
};

/* Binds flavour f (once) and returns its table; NULL (and one error log)
 * when that libcurl cannot be found in the process. */
const struct shim_curl_api *shim_real_bind(enum shim_flavor f);
/* [f] is the bound table once shim_real_bind published it; written only
 * there. */
extern const struct shim_curl_api *shim_real_ready[SHIM_NFLAVORS];

/* The real API of flavour f, bound on first use: inline, because libcurl
 * itself calls the curl_multi_* wrappers thousands of times a second from
 * inside curl_easy_perform, so one load is the whole cost once bound. */
static inline const struct shim_curl_api *shim_real(enum shim_flavor f)
{
    const struct shim_curl_api *a;

    if ((unsigned)f >= SHIM_NFLAVORS)
        return NULL;
    a = __atomic_load_n(&shim_real_ready[f], __ATOMIC_ACQUIRE);
    return a ? a : shim_real_bind(f);
}

/* One curl_easy_setopt argument, re-packed by option type. */
union shim_optval {
    long l;
    void *p;
    void (*fn)(void);
    curl_off_t off;
};

/* api's curl_easy_setopt(h, o, v) (or fn's, a curl_easy_setopt). On x86-64 (SysV) and arm64 (AAPCS64
 * as Linux uses it) a variadic argument of any of setopt's types (long,
 * pointer, function pointer, curl_off_t) travels in the same register
 * as a named 64-bit integer: v is passed as one, bit for bit what
 * libcurl reads. Elsewhere by the option's type range, as libcurl's own
 * setopt reads it. */
#if defined(__x86_64__) || defined(__aarch64__)
#define SHIM_SETOPT_ONE_REGISTER 1
#endif
typedef CURLcode (*shim_setopt_fn)(CURL *, CURLoption, ...);
static inline CURLcode shim_real_setopt_by(shim_setopt_fn fn, CURL *h, CURLoption o,
                                           union shim_optval v)
{
#ifdef SHIM_SETOPT_ONE_REGISTER
    return fn(h, o, v.off); /* the same register whatever the type */
#else
    if (o < CURLOPTTYPE_OBJECTPOINT)
        return fn(h, o, v.l);
    if (o < CURLOPTTYPE_FUNCTIONPOINT)
        return fn(h, o, v.p);
    if (o < CURLOPTTYPE_OFF_T)
        return fn(h, o, v.fn);
    if (o < CURLOPTTYPE_BLOB)
        return fn(h, o, v.off);
    return fn(h, o, v.p);
#endif
}
static inline CURLcode shim_real_setopt(const struct shim_curl_api *api, CURL *h, CURLoption o,
                                        union shim_optval v)
{
    return shim_real_setopt_by(api->easy_setopt, h, o, v);
}

/* Whether ret (a return address) lies in api's libcurl: a call into a
 * wrapper that libcurl made itself, not the program (nor a callback of
 * the program's that libcurl is running). */
static inline int shim_real_from_libcurl(const struct shim_curl_api *api, const void *ret)
{
    return (uintptr_t)ret - api->text_lo < api->text_len; /* one compare, unsigned */
}

/* Loads libcjson.so.1 (RTLD_LOCAL: it stays out of the host's global
 * symbol scope) and fills out[i] with its function names[i]; 0, or
 * -ENOENT when the library or one of the names is missing (then out is
 * left all NULL). For build/gen/cjson_lazy.c (shim/system/cjson_lazy.py). */
int shim_real_cjson(const char *const names[], void *out[], size_t n);

/* The libc dlopen (for the dlopen wrapper). */
typedef void *(*shim_dlopen_fn)(const char *, int);
shim_dlopen_fn shim_real_dlopen(void);

/* The real (absolute, symlinks resolved) directory of the file this
 * library was loaded from, found once when it was loaded, so a later
 * chdir() of the program changes nothing ("" if unknown): codeshim's
 * helper programs are installed next to it. */
void shim_real_self_dir(char *out, size_t outsz);

#endif
