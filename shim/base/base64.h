/* base64.h - standard base64 (RFC 4648, padded) through nettle, for file
 * bytes carried in JSON (the session channel). */
#ifndef SHIM_BASE64_H
#define SHIM_BASE64_H

#include <stddef.h>

/* A new NUL-terminated string (caller frees), or NULL when out of memory. */
char *shim_base64_encode(const void *data, size_t n);
/* Decodes s into a new buffer (caller frees; *n its length): 0, -EINVAL for
 * anything but padded base64, -ENOMEM. */
int shim_base64_decode(const char *s, char **out, size_t *n);

#endif
