/* clock.h - codeshim's clocks, the one home of each: the monotonic clock,
 * the one every deadline and duration is measured on (wall-clock jumps
 * never shorten a timeout), and the wall clock, only for dates codeshim
 * shows or stores (created_at, a trace line's ts, a file's age). */
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

/* The wall clock: seconds, and microseconds, since the epoch. */
static inline int64_t shim_clock_wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

static inline int64_t shim_clock_wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* *ts = ms from now on the wall clock: the absolute deadline
 * pthread_cond_timedwait takes on a condition variable of the default
 * clock. */
static inline void shim_clock_wall_deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

#endif
