/* ids.c - see ids.h. */
#include "base/ids.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

void shim_id_make(char *out, size_t outsz, const char *prefix, size_t nhex)
{
    static const char hex[] = "0123456789abcdef";
    static unsigned long counter;
    unsigned char raw[64];
    size_t plen = strlen(prefix), i;

    if (outsz == 0)
        return;
    if (nhex > 2 * sizeof(raw))
        nhex = 2 * sizeof(raw);
    if (plen + nhex + 1 > outsz)
        nhex = outsz > plen + 1 ? outsz - plen - 1 : 0;
    if (getrandom(raw, (nhex + 1) / 2, GRND_NONBLOCK) != (ssize_t)((nhex + 1) / 2)) {
        struct timespec ts;
        uint64_t x;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
            (uint64_t)__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * 0x9e3779b97f4a7c15ULL;
        for (i = 0; i < sizeof(raw); i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            raw[i] = (unsigned char)x;
        }
    }
    snprintf(out, outsz, "%s", plen < outsz ? prefix : "");
    if (plen >= outsz)
        return;
    for (i = 0; i < nhex; i++)
        out[plen + i] = hex[(raw[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    out[plen + nhex] = '\0';
}
