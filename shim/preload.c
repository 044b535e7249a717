/* preload.c - the boundary: the only file that defines curl_* and dlopen.
 *
 * Each libcurl build on Debian versions its symbols (CURL_OPENSSL_4,
 * CURL_GNUTLS_3, CURL_NSS_3), so every wrapper exists once per build, bound
 * to that version with a symver alias: a program linked against the
 * GnuTLS build reaches the GnuTLS wrapper, which calls the GnuTLS real
 * functions. The OpenSSL variant is the default version, which is also
 * what unversioned callers get. Wrappers only dispatch: real or ours.
 *
 * dlopen is wrapped to clear RTLD_DEEPBIND (PHP loads its curl extension
 * with it, which would hide our wrappers); it ends in a tail call so glibc
 * still sees the program as the caller (RUNPATH, $ORIGIN). */
#include "config.h"
#include "guard.h"
#include "handles.h"
#include "intercept.h"
#include "real.h"

#include <dlfcn.h>
#include <stdarg.h>

#undef curl_easy_setopt
#undef curl_easy_getinfo

#define EXPORT __attribute__((visibility("default")))

/* CODESHIM_DISABLE=1: every wrapper goes straight to the real function,
 * recording nothing (cwrap's "loaded but disabled"). */
static int disabled(void)
{
    return shim_config()->disabled;
}

static CURL *w_init(enum shim_flavor f)
{
    const struct shim_curl_api *api = shim_real(f);
    CURL *h;

    if (!api)
        return NULL;
    shim_guard_enter();
    h = api->easy_init();
    shim_guard_leave();
    if (h && !shim_guard_active() && !disabled())
        shim_handles_forget(h); /* a recycled address starts clean */
    return h;
}

/* Re-packs the one variadic argument by the option's type range, exactly as
 * libcurl's own setopt reads it, records it, and forwards it. */
static CURLcode w_setopt(enum shim_flavor f, CURL *h, CURLoption o, va_list ap)
{
    const struct shim_curl_api *api = shim_real(f);
    union shim_optval v;
    CURLcode rc;

    if (!api)
        return CURLE_FAILED_INIT;
    shim_guard_enter();
    if (o < CURLOPTTYPE_OBJECTPOINT) {
        v.l = va_arg(ap, long);
        rc = api->easy_setopt(h, o, v.l);
    } else if (o < CURLOPTTYPE_FUNCTIONPOINT) {
        v.p = va_arg(ap, void *);
        rc = api->easy_setopt(h, o, v.p);
    } else if (o < CURLOPTTYPE_OFF_T) {
        v.fn = va_arg(ap, void (*)(void));
        rc = api->easy_setopt(h, o, v.fn);
    } else if (o < CURLOPTTYPE_BLOB) {
        v.off = va_arg(ap, curl_off_t);
        rc = api->easy_setopt(h, o, v.off);
    } else {
        v.p = va_arg(ap, void *); /* struct curl_blob * */
        rc = api->easy_setopt(h, o, v.p);
    }
    shim_guard_leave();
    if (rc == CURLE_OK && !disabled())
        shim_handles_record(h, f, o, v, !shim_guard_active());
    return rc;
}

static CURLcode w_perform(enum shim_flavor f, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLcode rc;

    if (!api)
        return CURLE_FAILED_INIT;
    if (shim_guard_active() || disabled()) {
        shim_guard_enter();
        rc = api->easy_perform(h);
        shim_guard_leave();
        return rc;
    }
    return shim_intercept_perform(api, h);
}

static CURLcode w_getinfo(enum shim_flavor f, CURL *h, CURLINFO info, va_list ap)
{
    const struct shim_curl_api *api = shim_real(f);
    void *out = va_arg(ap, void *);
    CURLcode rc;

    if (!api)
        return CURLE_FAILED_INIT;
    if (!disabled() && shim_handles_get_answer(h, info, out))
        return CURLE_OK;
    shim_guard_enter();
    rc = api->easy_getinfo(h, info, out);
    shim_guard_leave();
    return rc;
}

static void w_cleanup(enum shim_flavor f, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);

    if (!disabled())
        shim_handles_forget(h);
    if (!api)
        return;
    shim_guard_enter();
    api->easy_cleanup(h);
    shim_guard_leave();
}

static void w_reset(enum shim_flavor f, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);

    if (!disabled())
        shim_handles_reset(h);
    if (!api)
        return;
    shim_guard_enter();
    api->easy_reset(h);
    shim_guard_leave();
}

static CURL *w_duphandle(enum shim_flavor f, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);
    CURL *d;

    if (!api)
        return NULL;
    shim_guard_enter();
    d = api->easy_duphandle(h);
    shim_guard_leave();
    if (d && !shim_guard_active() && !disabled())
        shim_handles_dup(h, d);
    return d;
}

#define WRAPPERS(tag, F, VER)                                                  \
    EXPORT __attribute__((symver("curl_easy_init" VER))) CURL *tag##_init(void) \
    {                                                                          \
        return w_init(F);                                                      \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_setopt" VER))) CURLcode            \
        tag##_setopt(CURL *h, CURLoption o, ...)                               \
    {                                                                          \
        va_list ap;                                                            \
        CURLcode rc;                                                           \
        va_start(ap, o);                                                       \
        rc = w_setopt(F, h, o, ap);                                            \
        va_end(ap);                                                            \
        return rc;                                                             \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_perform" VER))) CURLcode           \
        tag##_perform(CURL *h)                                                 \
    {                                                                          \
        return w_perform(F, h);                                                \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_getinfo" VER))) CURLcode           \
        tag##_getinfo(CURL *h, CURLINFO i, ...)                                \
    {                                                                          \
        va_list ap;                                                            \
        CURLcode rc;                                                           \
        va_start(ap, i);                                                       \
        rc = w_getinfo(F, h, i, ap);                                           \
        va_end(ap);                                                            \
        return rc;                                                             \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_cleanup" VER))) void               \
        tag##_cleanup(CURL *h)                                                 \
    {                                                                          \
        w_cleanup(F, h);                                                       \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_reset" VER))) void tag##_reset(    \
        CURL *h)                                                               \
    {                                                                          \
        w_reset(F, h);                                                         \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_duphandle" VER))) CURL *           \
        tag##_duphandle(CURL *h)                                               \
    {                                                                          \
        return w_duphandle(F, h);                                              \
    }

/* The prototypes keep -Wmissing-prototypes quiet for the aliases. */
#define PROTOS(tag)                                                            \
    CURL *tag##_init(void);                                                    \
    CURLcode tag##_setopt(CURL *, CURLoption, ...);                            \
    CURLcode tag##_perform(CURL *);                                            \
    CURLcode tag##_getinfo(CURL *, CURLINFO, ...);                             \
    void tag##_cleanup(CURL *);                                                \
    void tag##_reset(CURL *);                                                  \
    CURL *tag##_duphandle(CURL *);

PROTOS(shim_openssl)
PROTOS(shim_gnutls)
PROTOS(shim_nss)
WRAPPERS(shim_openssl, SHIM_FLAVOR_OPENSSL, "@@CURL_OPENSSL_4")
WRAPPERS(shim_gnutls, SHIM_FLAVOR_GNUTLS, "@CURL_GNUTLS_3")
WRAPPERS(shim_nss, SHIM_FLAVOR_NSS, "@CURL_NSS_3")

EXPORT void *dlopen(const char *file, int flags)
{
    shim_dlopen_fn real = shim_real_dlopen();

    if (!real)
        return NULL;
    return real(file, flags & ~RTLD_DEEPBIND);
}
