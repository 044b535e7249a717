/* clock.h - the monotonic clock, the one every deadline and duration in
 * codeshim is measured on (wall-clock jumps never shorten a timeout). */
#ifndef SHIM_CLOCK_H
#define SHIM_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t shim_clock_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline double shim_clock_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
