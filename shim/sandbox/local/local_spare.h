/* local_spare.h - what the local backend's warm spare (local_spare.c) did
 * in this process: counters for tests and benchmarks, the only part of
 * the spare visible outside the backend. */
#ifndef SHIM_LOCAL_SPARE_H
#define SHIM_LOCAL_SPARE_H

/* What the local backend did in this process, for tests and benchmarks
 * (a forked child starts from zero). */
struct shim_local_spare_stats {
    unsigned long opened;         /* local sandboxes opened */
    unsigned long spares_started; /* warm spares started (local_spare.c) */
    unsigned long spares_taken;   /* opens that got a warm spare */
    unsigned long spares_dropped; /* spares ended unused: other settings,
                                     or not healthy */
    long spare_pid; /* the waiting spare's first process (bwrap), or 0 */
    int spare_starting; /* a spare is being started */
};
void shim_local_spare_stats(struct shim_local_spare_stats *out);

#endif
