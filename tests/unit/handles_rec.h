/* handles_rec.h - for unit suites that drive handles.c's table: one
 * curl_easy_setopt as preload.c records it (the OpenSSL flavour), by the
 * kind of its value. Handles are fake pointer values (H): the table never
 * dereferences them. Header-only. */
#ifndef TEST_HANDLES_REC_H
#define TEST_HANDLES_REC_H

#include <stdint.h>

#include "curl/handles.h"

#define H(x) ((CURL *)(uintptr_t)(x))

static inline void rec_p(CURL *h, CURLoption opt, const void *p)
{
    union shim_optval v;
    v.p = (void *)p;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, opt, v, 1);
}

static inline void rec_l(CURL *h, CURLoption opt, long l)
{
    union shim_optval v;
    v.l = l;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, opt, v, 1);
}

static inline void rec_off(CURL *h, CURLoption opt, curl_off_t off)
{
    union shim_optval v;
    v.off = off;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, opt, v, 1);
}

static inline void rec_fn(CURL *h, CURLoption opt, shim_write_fn fn)
{
    union shim_optval v;
    v.fn = (void (*)(void))fn;
    shim_handles_record(h, SHIM_FLAVOR_OPENSSL, opt, v, 1);
}

#endif
