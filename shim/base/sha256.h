/* sha256.h - SHA-256 (FIPS 180-4), for record/replay keys and for the
 * session identity (a hash of the API key, never the key itself). A thin
 * wrapper over nettle's SHA-256 (sha256.c says why nettle). */
#ifndef SHIM_SHA256_H
#define SHIM_SHA256_H

#include <nettle/sha2.h>
#include <stddef.h>

struct shim_sha256 {
    struct sha256_ctx ctx;
};

void shim_sha256_init(struct shim_sha256 *s);
void shim_sha256_update(struct shim_sha256 *s, const void *p, size_t n);
void shim_sha256_final(struct shim_sha256 *s, unsigned char out[32]);
/* Finishes s and writes the first nbytes (at most 32) of the digest as
 * 2 * nbytes hex digits and a NUL: the names codeshim derives from hashes
 * (identities, sessions, cassette keys). */
void shim_sha256_final_hex(struct shim_sha256 *s, size_t nbytes, char *out);
/* The names codeshim derives from strings: 2 * nbytes hex digits (nbytes
 * at most 32) and a NUL of SHA-256 over tag and each of the n parts, every
 * one with its NUL (so no two lists of parts hash alike, and each tag
 * names its own space). */
void shim_sha256_tagged_hex(const char *tag, const char *const *parts, size_t n, size_t nbytes,
                            char *out);
/* Hex digest (65 bytes with NUL) of p[0..n). */
void shim_sha256_hex(const void *p, size_t n, char out[65]);

#endif
