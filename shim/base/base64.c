/* base64.c - see base64.h. */
#include "base/base64.h"

#include <errno.h>
#include <nettle/base64.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char *shim_base64_encode(const void *data, size_t n)
{
    char *out;

    if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
        return NULL;
    out = malloc(BASE64_ENCODE_RAW_LENGTH(n) + 1);
    if (!out)
        return NULL;
    base64_encode_raw(out, n, data);
    out[BASE64_ENCODE_RAW_LENGTH(n)] = '\0';
    return out;
}

int shim_base64_decode(const char *s, char **out, size_t *n)
{
    struct base64_decode_ctx ctx;
    size_t len = strlen(s), dl;
    uint8_t *buf;

    *out = NULL;
    *n = 0;
    if (len % 4)
        return -EINVAL;
    buf = malloc(BASE64_DECODE_LENGTH(len) + 1);
    if (!buf)
        return -ENOMEM;
    dl = BASE64_DECODE_LENGTH(len);
    base64_decode_init(&ctx);
    if (!base64_decode_update(&ctx, &dl, buf, len, s) || !base64_decode_final(&ctx)) {
        free(buf);
        return -EINVAL;
    }
    *out = (char *)buf;
    *n = dl;
    return 0;
}
