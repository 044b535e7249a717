/* sha256.c - see sha256.h. SHA-256 comes from nettle (Debian's
 * nettle-dev), not from code of our own.
 *
 * Why nettle: OpenSSL's SHA256_* would tie us to one TLS flavour of
 * libcurl, and libmd's SHA256Init / SHA256Update are names other code
 * defines too (BSD compatibility layers, embedded copies). The library
 * links nettle's static PIC archive with its symbols made local (Makefile,
 * SO_LIBS): our calls are bound when the library is linked, so they cannot
 * pick up a host program's function of the same name, and a program that
 * never makes an intercepted request loads no libnettle.so for it. The
 * programs built from libcodeshim_core.a link -lnettle. */
#include "base/sha256.h"

#include "base/text.h"

#include <nettle/version.h>
#include <string.h>

void shim_sha256_init(struct shim_sha256 *s)
{
    sha256_init(&s->ctx);
}

void shim_sha256_update(struct shim_sha256 *s, const void *p, size_t n)
{
    if (n)
        sha256_update(&s->ctx, n, p);
}

void shim_sha256_final(struct shim_sha256 *s, unsigned char out[32])
{
    /* nettle 3.10 dropped the length argument of the digest functions */
#if NETTLE_VERSION_MAJOR > 3 || (NETTLE_VERSION_MAJOR == 3 && NETTLE_VERSION_MINOR >= 10)
    sha256_digest(&s->ctx, out);
#else
    sha256_digest(&s->ctx, SHA256_DIGEST_SIZE, out);
#endif
}

void shim_sha256_final_hex(struct shim_sha256 *s, size_t nbytes, char *out)
{
    unsigned char d[32];

    shim_sha256_final(s, d);
    shim_text_hex(d, nbytes < 32 ? nbytes : 32, out);
}

void shim_sha256_hex(const void *p, size_t n, char out[65])
{
    struct shim_sha256 s;

    shim_sha256_init(&s);
    shim_sha256_update(&s, p, n);
    shim_sha256_final_hex(&s, 32, out);
}

void shim_sha256_tagged_hex(const char *tag, const char *const *parts, size_t n, size_t nbytes,
                            char *out)
{
    struct shim_sha256 s;
    size_t i;

    shim_sha256_init(&s);
    shim_sha256_update(&s, tag, strlen(tag) + 1);
    for (i = 0; i < n; i++)
        shim_sha256_update(&s, parts[i], strlen(parts[i]) + 1);
    shim_sha256_final_hex(&s, nbytes, out);
}
