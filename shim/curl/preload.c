/* preload.c - the boundary: the only file that defines curl_* and dlopen.
 *
 * Each libcurl build on Debian versions its symbols (CURL_OPENSSL_4,
 * CURL_GNUTLS_3, CURL_NSS_3), so every wrapper exists once per build, bound
 * to that version with a symver alias: a program linked against the
 * GnuTLS build reaches the GnuTLS wrapper, which calls the GnuTLS real
 * functions. The OpenSSL variant is the default version, which is also
 * what unversioned callers get. Wrappers only dispatch: real or ours.
 *
 * The curl_multi_* wrappers send everything to multi.c, which keeps the
 * transfers codeshim answers out of the real multi handle; libcurl's own
 * calls to them (inside curl_easy_perform, with the guard up) and a
 * disabled codeshim go straight to libcurl.
 *
 * dlopen is wrapped to clear RTLD_DEEPBIND (PHP loads its curl extension
 * with it, which would hide our wrappers); it ends in a tail call so glibc
 * still sees the program as the caller (RUNPATH, $ORIGIN). */
#include "base/guard.h"
#include "curl/handles.h"
#include "curl/intercept.h"
#include "curl/multi.h"
#include "curl/xfer.h"
#include "system/config.h"
#include "system/real.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>

#undef curl_easy_setopt
#undef curl_easy_getinfo

#define EXPORT __attribute__((visibility("default")))
/* Each wrapper body is inlined into its three per-build entry points, so
 * the flavour is a constant and the pass-through one call shallower. */
#define WRAPPER static inline __attribute__((always_inline))

/* Straight to libcurl, marked as libcurl's own call; with the guard already
 * up (libcurl calling itself), a tail call: nothing to raise. */
#define STRAIGHT(call)                                                         \
    do {                                                                       \
        if (shim_guard_active())                                               \
            return (call);                                                     \
        shim_guard_enter();                                                    \
        rc = (call);                                                           \
        shim_guard_leave();                                                    \
        return rc;                                                             \
    } while (0)

/* Whether a call into a wrapper is libcurl calling itself: the guard is
 * up on this thread (a real libcurl call is running) and the call comes
 * from libcurl's own code. A call from a callback of the program's that
 * libcurl is running comes from the program: it is the program's call
 * like any other (a handle made, set up or performed there is seen).
 * Where libcurl's code could not be located, the guard alone decides. */
static inline int from_libcurl(enum shim_flavor f, const void *ret)
{
    const struct shim_curl_api *a;

    if (!shim_guard_active())
        return 0;
    a = __atomic_load_n(&shim_real_ready[f], __ATOMIC_ACQUIRE);
    return !a || shim_real_from_libcurl(a, ret);
}

/* In an entry point: whether its caller is libcurl itself. */
#define FROM_LIBCURL(F) from_libcurl(F, __builtin_return_address(0))

/* CODESHIM_DISABLE=1: every wrapper goes straight to the real function,
 * recording nothing (cwrap's "loaded but disabled"). */
static int disabled(void)
{
    return shim_config()->disabled;
}

WRAPPER CURL *w_init(enum shim_flavor f, int in)
{
    const struct shim_curl_api *api = shim_real(f);
    CURL *h;

    if (!api)
        return NULL;
    shim_guard_enter();
    h = api->easy_init();
    shim_guard_leave();
    if (h && !in && !disabled())
        shim_handles_forget(h); /* a recycled address starts clean */
    return h;
}

/* curl_easy_setopt forwards the option and records it when it is one
 * codeshim needs (handles.h). Most options a program sets are not: those
 * go straight to libcurl after one table check, without the guard, the
 * disabled check or the table's entry; a recorded one in one call to
 * handles.c (shim_handles_setopt), also without the guard: libcurl's
 * setopt calls nothing of libcurl's public API (a callback of the
 * program's it runs, a share's lock, is the program's call either way).
 * The one argument after the option: where it travels in one 64-bit
 * register whatever its type (real.h, SHIM_SETOPT_ONE_REGISTER) the entry
 * point takes it as one (no va_list to set up) and an option codeshim
 * does not record is forwarded as it came, in a tail call. Elsewhere it
 * is read with va_arg by the option's type range, exactly as libcurl's
 * own setopt reads it. */
/* setopt's argument read from the variadic list, by the option's type
 * range as libcurl's own setopt reads it. */
#define SETOPT_VA(o, v)                                                        \
    do {                                                                       \
        va_list ap;                                                            \
        va_start(ap, o);                                                       \
        if ((o) < CURLOPTTYPE_OBJECTPOINT)                                     \
            (v).l = va_arg(ap, long);                                          \
        else if ((o) < CURLOPTTYPE_FUNCTIONPOINT)                              \
            (v).p = va_arg(ap, void *);                                        \
        else if ((o) < CURLOPTTYPE_OFF_T)                                      \
            (v).fn = va_arg(ap, void (*)(void));                               \
        else if ((o) < CURLOPTTYPE_BLOB)                                       \
            (v).off = va_arg(ap, curl_off_t);                                  \
        else                                                                   \
            (v).p = va_arg(ap, void *); /* struct curl_blob * */               \
        va_end(ap);                                                            \
    } while (0)
#ifdef SHIM_SETOPT_ONE_REGISTER
#define SETOPT_PARAM uint64_t arg
#define SETOPT_GET(o, v) ((v).off = (curl_off_t)arg)
#define SETOPT_TO(fn, h, o, v) (fn)(h, o, arg)
/* curl_easy_getinfo's one argument, a pointer, the same way */
#define GETINFO_PARAM void *out
#define GETINFO_GET(i, o) ((o) = out)
_Static_assert(sizeof(long) == 8 && sizeof(void *) == 8 && sizeof(curl_off_t) == 8,
               "setopt's argument types are one 64-bit register");
#else
#define SETOPT_PARAM ...
#define SETOPT_GET(o, v) SETOPT_VA(o, v)
#define SETOPT_TO(fn, h, o, v) shim_real_setopt_by(fn, h, o, v)
#define GETINFO_PARAM ...
#define GETINFO_GET(i, o)                                                      \
    do {                                                                       \
        va_list ap;                                                            \
        va_start(ap, i);                                                       \
        (o) = va_arg(ap, void *);                                              \
        va_end(ap);                                                            \
    } while (0)
#endif

/* Where each flavour's setopt wrapper sends an option codeshim does not
 * record: the flavour's unbound stub until a setopt has bound the build
 * (w_setopt_slow), then libcurl's curl_easy_setopt, one load and no check
 * on the way. */
static CURLcode shim_openssl_unbound(CURL *h, CURLoption o, ...);
static CURLcode shim_gnutls_unbound(CURL *h, CURLoption o, ...);
static CURLcode shim_nss_unbound(CURL *h, CURLoption o, ...);
static shim_setopt_fn setopt_to[SHIM_NFLAVORS] = {shim_openssl_unbound, shim_gnutls_unbound,
                                                  shim_nss_unbound};

/* The build's setopt, found (and published to setopt_to) by the first
 * setopt of the flavour: forwarded or recorded as the wrapper would. */
static __attribute__((noinline)) CURLcode w_setopt_slow(enum shim_flavor f, CURL *h, CURLoption o,
                                                        union shim_optval v, const void *ret)
{
    const struct shim_curl_api *api = shim_real(f);

    if (!api)
        return CURLE_FAILED_INIT;
    __atomic_store_n(&setopt_to[f], api->easy_setopt, __ATOMIC_RELAXED);
    if (!shim_handles_wants(o))
        return shim_real_setopt(api, h, o, v);
    return shim_handles_setopt(h, o, v, api, SHIM_OPT_SLOT(o), ret);
}

/* setopt_to's start, per flavour: what the wrapper would do, by the slow
 * way (reached by its tail call: the return address is its caller's). */
#define UNBOUND(tag, F)                                                        \
    static CURLcode tag##_unbound(CURL *h, CURLoption o, ...)                  \
    {                                                                          \
        union shim_optval v;                                                   \
        SETOPT_VA(o, v);                                                       \
        return w_setopt_slow(F, h, o, v, __builtin_return_address(0));         \
    }
UNBOUND(shim_openssl, SHIM_FLAVOR_OPENSSL)
UNBOUND(shim_gnutls, SHIM_FLAVOR_GNUTLS)
UNBOUND(shim_nss, SHIM_FLAVOR_NSS)

WRAPPER CURLcode w_perform(enum shim_flavor f, int in, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLcode rc;

    if (!api)
        return CURLE_FAILED_INIT;
    if (in || disabled())
        STRAIGHT(api->easy_perform(h));
    if (shim_multi_owns(h)) /* libcurl's answer for a handle in a multi */
        return CURLE_FAILED_INIT;
    return shim_intercept_perform(api, h, shim_multi_run_easy);
}

/* While some handle holds a synthetic answer (handles.h): it, else
 * libcurl's (whose getinfo calls nothing of its public API). */
static __attribute__((noinline)) CURLcode w_getinfo(enum shim_flavor f, CURL *h, CURLINFO info,
                                                    void *out)
{
    const struct shim_curl_api *api = shim_real(f);

    if (!api)
        return CURLE_FAILED_INIT;
    if (!disabled() && shim_handles_get_answer(h, info, out))
        return CURLE_OK;
    return api->easy_getinfo(h, info, out);
}

WRAPPER void w_cleanup(enum shim_flavor f, int in, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);

    if (!disabled() && !in) {
        shim_multi_forget_easy(h); /* libcurl removes it from its multi too */
        shim_handles_forget(h);
    } else if (!disabled()) {
        shim_handles_forget(h);
    }
    if (!api)
        return;
    shim_guard_enter();
    api->easy_cleanup(h);
    shim_guard_leave();
}

WRAPPER void w_reset(enum shim_flavor f, int in, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);
    (void)in;

    if (!disabled())
        shim_handles_reset(h);
    if (!api)
        return;
    shim_guard_enter();
    api->easy_reset(h);
    shim_guard_leave();
}

/* A transfer that this thread's curl_easy_perform answers is paused by
 * codeshim (xfer.h, sink.h); any other by libcurl. Asked before the
 * guard: the program pauses from its callbacks, which may run inside
 * libcurl's call for the model (a relayed stream). */
WRAPPER CURLcode w_pause(enum shim_flavor f, int in, CURL *h, int bits)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLcode rc;
    (void)in;

    if (!disabled() && shim_multi_pause(h, bits))
        return CURLE_OK;
    if (!api)
        return CURLE_FAILED_INIT;
    STRAIGHT(api->easy_pause(h, bits));
}

WRAPPER CURL *w_duphandle(enum shim_flavor f, int in, CURL *h)
{
    const struct shim_curl_api *api = shim_real(f);
    CURL *d;

    if (!api)
        return NULL;
    shim_guard_enter();
    d = api->easy_duphandle(h);
    shim_guard_leave();
    if (d && !in && !disabled()) {
        shim_handles_dup(h, d);
        shim_intercept_duphandle(api, h, d);
    }
    return d;
}

/* ---- multi ---- */

/* Out of line, so that the entry points' fast path (INNER) saves no
 * registers. */
#define MULTI_BODY static __attribute__((noinline))

/* A multi wrapper goes straight to libcurl when libcurl itself calls, or
 * codeshim is disabled; else to multi.c. */
static int direct(int in)
{
    return in || disabled();
}

MULTI_BODY CURLMcode w_madd(enum shim_flavor f, int in, CURLM *m, CURL *e)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_add_handle)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_add_handle(m, e));
    return shim_multi_add(api, m, e);
}

MULTI_BODY CURLMcode w_mremove(enum shim_flavor f, int in, CURLM *m, CURL *e)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_remove_handle)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_remove_handle(m, e));
    return shim_multi_remove(api, m, e);
}

MULTI_BODY CURLMcode w_mperform(enum shim_flavor f, int in, CURLM *m, int *running)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_perform)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_perform(m, running));
    return shim_multi_perform(api, m, running);
}

MULTI_BODY CURLMcode w_msocket(enum shim_flavor f, int in, CURLM *m, curl_socket_t s, int ev, int *running)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_socket_action)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_socket_action(m, s, ev, running));
    return shim_multi_socket_action(api, m, s, ev, running);
}

MULTI_BODY CURLMcode w_msocket_all(enum shim_flavor f, int in, CURLM *m, int *running)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_socket_all)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_socket_all(m, running));
    return shim_multi_socket_all(api, m, running);
}

MULTI_BODY CURLMcode w_mwait(enum shim_flavor f, int in, CURLM *m, struct curl_waitfd *x, unsigned int n,
                         int ms, int *ret, int poll)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode (*fn)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode rc;

    if (!api)
        return CURLM_INTERNAL_ERROR;
    fn = poll ? api->multi_poll : api->multi_wait;
    if (!fn)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(fn(m, x, n, ms, ret));
    return shim_multi_wait(api, m, x, n, ms, ret, poll);
}

MULTI_BODY CURLMcode w_mfdset(enum shim_flavor f, int in, CURLM *m, fd_set *r, fd_set *w, fd_set *x,
                          int *max_fd)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_fdset)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_fdset(m, r, w, x, max_fd));
    return shim_multi_fdset(api, m, r, w, x, max_fd);
}

MULTI_BODY CURLMcode w_mtimeout(enum shim_flavor f, int in, CURLM *m, long *ms)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_timeout)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_timeout(m, ms));
    return shim_multi_timeout(api, m, ms);
}

MULTI_BODY CURLMsg *w_minfo(enum shim_flavor f, int in, CURLM *m, int *left)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMsg *rc;

    if (!api || !api->multi_info_read) {
        if (left)
            *left = 0;
        return NULL;
    }
    if (direct(in))
        STRAIGHT(api->multi_info_read(m, left));
    return shim_multi_info_read(api, m, left);
}

/* The one argument v (read by the entry point as setopt's is): to
 * multi.c, or to libcurl by the option's type, as curl_multi_setopt
 * reads it. */
MULTI_BODY CURLMcode w_msetopt(enum shim_flavor f, int in, CURLM *m, CURLMoption o,
                               union shim_optval v)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_setopt)
        return CURLM_INTERNAL_ERROR;
    if (!direct(in))
        return shim_multi_setopt(api, m, o, v);
    if (o < CURLOPTTYPE_OBJECTPOINT)
        STRAIGHT(api->multi_setopt(m, o, v.l));
    else if (o < CURLOPTTYPE_FUNCTIONPOINT)
        STRAIGHT(api->multi_setopt(m, o, v.p));
    else if (o < CURLOPTTYPE_OFF_T)
        STRAIGHT(api->multi_setopt(m, o, v.fn));
    STRAIGHT(api->multi_setopt(m, o, v.off));
}

MULTI_BODY CURLMcode w_massign(enum shim_flavor f, int in, CURLM *m, curl_socket_t s, void *p)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_assign)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_assign(m, s, p));
    return shim_multi_assign(api, m, s, p);
}

MULTI_BODY CURLMcode w_mcleanup(enum shim_flavor f, int in, CURLM *m)
{
    const struct shim_curl_api *api = shim_real(f);
    CURLMcode rc;

    if (!api || !api->multi_cleanup)
        return CURLM_INTERNAL_ERROR;
    if (direct(in))
        STRAIGHT(api->multi_cleanup(m));
    return shim_multi_cleanup(api, m);
}

/* libcurl calling itself (inside curl_easy_perform, the guard up, the
 * caller in libcurl's code) once the build is bound: the entry point tail-calls the real function before
 * anything else, since this happens thousands of times a second; the
 * wrapper bodies handle every other case. */
#define INNER(F, field, args)                                                  \
    do {                                                                       \
        const struct shim_curl_api *a_;                                        \
        if (shim_guard_active() &&                                             \
            (a_ = __atomic_load_n(&shim_real_ready[F], __ATOMIC_ACQUIRE)) &&   \
            shim_real_from_libcurl(a_, __builtin_return_address(0)) && a_->field) \
            return a_->field args;                                             \
    } while (0)

/* curl_multi_setopt's INNER, where its argument is one register as it
 * came (SETOPT_PARAM); elsewhere libcurl's own calls take the body's
 * way (read by type, then straight to libcurl). */
#ifdef SHIM_SETOPT_ONE_REGISTER
#define MULTI_SETOPT_INNER(F, m, o) INNER(F, multi_setopt, (m, o, arg))
#else
#define MULTI_SETOPT_INNER(F, m, o) ((void)0)
#endif

#define MULTI_WRAPPERS(tag, F, VER)                                            \
    EXPORT __attribute__((symver("curl_multi_add_handle" VER))) CURLMcode      \
        tag##_multi_add_handle(CURLM *m, CURL *e)                              \
    {                                                                          \
        INNER(F, multi_add_handle, (m, e));                                    \
        return w_madd(F, FROM_LIBCURL(F), m, e);                               \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_remove_handle" VER))) CURLMcode   \
        tag##_multi_remove_handle(CURLM *m, CURL *e)                           \
    {                                                                          \
        INNER(F, multi_remove_handle, (m, e));                                 \
        return w_mremove(F, FROM_LIBCURL(F), m, e);                            \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_perform" VER))) CURLMcode         \
        tag##_multi_perform(CURLM *m, int *r)                                  \
    {                                                                          \
        INNER(F, multi_perform, (m, r));                                       \
        return w_mperform(F, FROM_LIBCURL(F), m, r);                           \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_socket_action" VER))) CURLMcode   \
        tag##_multi_socket_action(CURLM *m, curl_socket_t s, int ev, int *r)   \
    {                                                                          \
        INNER(F, multi_socket_action, (m, s, ev, r));                          \
        return w_msocket(F, FROM_LIBCURL(F), m, s, ev, r);                     \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_socket" VER))) CURLMcode          \
        tag##_multi_socket(CURLM *m, curl_socket_t s, int *r)                  \
    {                                                                          \
        INNER(F, multi_socket_action, (m, s, 0, r));                           \
        return w_msocket(F, FROM_LIBCURL(F), m, s, 0, r);                      \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_socket_all" VER))) CURLMcode      \
        tag##_multi_socket_all(CURLM *m, int *r)                               \
    {                                                                          \
        INNER(F, multi_socket_all, (m, r));                                    \
        return w_msocket_all(F, FROM_LIBCURL(F), m, r);                        \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_wait" VER))) CURLMcode            \
        tag##_multi_wait(CURLM *m, struct curl_waitfd *x, unsigned int n, int ms, \
                    int *ret)                                                  \
    {                                                                          \
        INNER(F, multi_wait, (m, x, n, ms, ret));                              \
        return w_mwait(F, FROM_LIBCURL(F), m, x, n, ms, ret, 0);               \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_poll" VER))) CURLMcode            \
        tag##_multi_poll(CURLM *m, struct curl_waitfd *x, unsigned int n, int ms, \
                    int *ret)                                                  \
    {                                                                          \
        INNER(F, multi_poll, (m, x, n, ms, ret));                              \
        return w_mwait(F, FROM_LIBCURL(F), m, x, n, ms, ret, 1);               \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_fdset" VER))) CURLMcode           \
        tag##_multi_fdset(CURLM *m, fd_set *r, fd_set *w, fd_set *x, int *mx)  \
    {                                                                          \
        INNER(F, multi_fdset, (m, r, w, x, mx));                               \
        return w_mfdset(F, FROM_LIBCURL(F), m, r, w, x, mx);                   \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_timeout" VER))) CURLMcode         \
        tag##_multi_timeout(CURLM *m, long *ms)                                \
    {                                                                          \
        INNER(F, multi_timeout, (m, ms));                                      \
        return w_mtimeout(F, FROM_LIBCURL(F), m, ms);                          \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_info_read" VER))) CURLMsg *       \
        tag##_multi_info_read(CURLM *m, int *left)                             \
    {                                                                          \
        INNER(F, multi_info_read, (m, left));                                  \
        return w_minfo(F, FROM_LIBCURL(F), m, left);                           \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_setopt" VER))) CURLMcode          \
        tag##_multi_setopt(CURLM *m, CURLMoption o, SETOPT_PARAM)              \
    {                                                                          \
        union shim_optval v;                                                   \
        MULTI_SETOPT_INNER(F, m, o);                                           \
        SETOPT_GET(o, v);                                                      \
        return w_msetopt(F, FROM_LIBCURL(F), m, o, v);                         \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_assign" VER))) CURLMcode          \
        tag##_multi_assign(CURLM *m, curl_socket_t s, void *p)                 \
    {                                                                          \
        INNER(F, multi_assign, (m, s, p));                                     \
        return w_massign(F, FROM_LIBCURL(F), m, s, p);                         \
    }                                                                          \
    EXPORT __attribute__((symver("curl_multi_cleanup" VER))) CURLMcode         \
        tag##_multi_cleanup(CURLM *m)                                          \
    {                                                                          \
        INNER(F, multi_cleanup, (m));                                          \
        return w_mcleanup(F, FROM_LIBCURL(F), m);                              \
    }

#define WRAPPERS(tag, F, VER)                                                  \
    EXPORT __attribute__((symver("curl_easy_init" VER))) CURL *tag##_easy_init(void) \
    {                                                                          \
        return w_init(F, FROM_LIBCURL(F));                                     \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_setopt" VER))) CURLcode            \
        tag##_easy_setopt(CURL *h, CURLoption o, SETOPT_PARAM)                 \
    {                                                                          \
        size_t s_ = SHIM_OPT_SLOT(o);                                          \
        const struct shim_curl_api *api;                                       \
        union shim_optval v;                                                   \
        SETOPT_GET(o, v);                                                      \
        if (__builtin_expect(shim_handles_optkey[s_] != (uint32_t)o, 1))       \
            return SETOPT_TO(__atomic_load_n(&setopt_to[F], __ATOMIC_RELAXED), h, o, v); \
        if (!(api = __atomic_load_n(&shim_real_ready[F], __ATOMIC_ACQUIRE)))   \
            return w_setopt_slow(F, h, o, v, __builtin_return_address(0));     \
        return shim_handles_setopt(h, o, v, api, s_, __builtin_return_address(0)); \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_perform" VER))) CURLcode           \
        tag##_easy_perform(CURL *h)                                            \
    {                                                                          \
        return w_perform(F, FROM_LIBCURL(F), h);                               \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_getinfo" VER))) CURLcode           \
        tag##_easy_getinfo(CURL *h, CURLINFO i, GETINFO_PARAM)                 \
    {                                                                          \
        const struct shim_curl_api *api =                                      \
            __atomic_load_n(&shim_real_ready[F], __ATOMIC_ACQUIRE);            \
        void *o_;                                                              \
        GETINFO_GET(i, o_);                                                    \
        if (api && !shim_handles_answering())                                  \
            return api->easy_getinfo(h, i, o_);                                \
        return w_getinfo(F, h, i, o_);                                         \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_cleanup" VER))) void               \
        tag##_easy_cleanup(CURL *h)                                            \
    {                                                                          \
        w_cleanup(F, FROM_LIBCURL(F), h);                                      \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_reset" VER))) void tag##_easy_reset( \
        CURL *h)                                                               \
    {                                                                          \
        w_reset(F, FROM_LIBCURL(F), h);                                        \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_duphandle" VER))) CURL *           \
        tag##_easy_duphandle(CURL *h)                                          \
    {                                                                          \
        return w_duphandle(F, FROM_LIBCURL(F), h);                             \
    }                                                                          \
    EXPORT __attribute__((symver("curl_easy_pause" VER))) CURLcode             \
        tag##_easy_pause(CURL *h, int bits)                                    \
    {                                                                          \
        return w_pause(F, FROM_LIBCURL(F), h, bits);                           \
    }

/* The wrappers' prototypes (they keep -Wmissing-prototypes quiet for the
 * aliases), one per function of symbols.h and flavour: tag_field. */
#undef SHIM_SETOPT_ARG
#define SHIM_SETOPT_ARG SETOPT_PARAM
#undef SHIM_GETINFO_ARG
#define SHIM_GETINFO_ARG GETINFO_PARAM
#define PROTO(tag, field, ret, params) ret tag##_##field params;
#define PROTO_OPENSSL(name, field, ret, params) PROTO(shim_openssl, field, ret, params)
#define PROTO_GNUTLS(name, field, ret, params) PROTO(shim_gnutls, field, ret, params)
#define PROTO_NSS(name, field, ret, params) PROTO(shim_nss, field, ret, params)
SHIM_EASY_SYMBOLS(PROTO_OPENSSL)
SHIM_EASY_SYMBOLS(PROTO_GNUTLS)
SHIM_EASY_SYMBOLS(PROTO_NSS)
SHIM_MULTI_SYMBOLS(PROTO_OPENSSL)
SHIM_MULTI_SYMBOLS(PROTO_GNUTLS)
SHIM_MULTI_SYMBOLS(PROTO_NSS)
WRAPPERS(shim_openssl, SHIM_FLAVOR_OPENSSL, "@@CURL_OPENSSL_4")
WRAPPERS(shim_gnutls, SHIM_FLAVOR_GNUTLS, "@CURL_GNUTLS_3")
WRAPPERS(shim_nss, SHIM_FLAVOR_NSS, "@CURL_NSS_3")
MULTI_WRAPPERS(shim_openssl, SHIM_FLAVOR_OPENSSL, "@@CURL_OPENSSL_4")
MULTI_WRAPPERS(shim_gnutls, SHIM_FLAVOR_GNUTLS, "@CURL_GNUTLS_3")
MULTI_WRAPPERS(shim_nss, SHIM_FLAVOR_NSS, "@CURL_NSS_3")

EXPORT void *dlopen(const char *file, int flags)
{
    shim_dlopen_fn real = shim_real_dlopen();

    if (!real)
        return NULL;
    return real(file, flags & ~RTLD_DEEPBIND);
}
