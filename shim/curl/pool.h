/* pool.h - codeshim's worker threads, for loops that must run off the
 * program's thread (the multi interface).
 *
 * At most cfg->max_inflight jobs run at once, the rest wait in FIFO
 * order. Threads start on demand and exit as soon as nothing waits, so an
 * idle process holds none; they are detached and block every signal (the
 * program's handlers stay on the program's threads). A fork child has no
 * workers: the jobs that were running or waiting in the parent are
 * forgotten there (their owners notice through their own atfork handler). */
#ifndef SHIM_POOL_H
#define SHIM_POOL_H

#include <stddef.h>

struct shim_pool_job {
    struct shim_pool_job *next; /* the pool's */
    void (*run)(struct shim_pool_job *j); /* owns j from then on */
};

/* Queues j. 0, or -errno when no thread could be started and none runs
 * to take it (j was not queued: the caller still owns it). */
int shim_pool_submit(struct shim_pool_job *j);
/* Jobs running and waiting now (tests, logs). */
size_t shim_pool_busy(void);

#endif
