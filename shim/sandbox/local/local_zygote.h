/* local_zygote.h - what the local backend's fork server (local_zygote.c)
 * did in this process: counters for tests and benchmarks, the only part
 * of it visible outside the backend. */
#ifndef SHIM_LOCAL_ZYGOTE_H
#define SHIM_LOCAL_ZYGOTE_H

struct shim_local_zygote_stats {
    unsigned long servers_started; /* fork servers started */
    unsigned long forks;           /* sandboxes forked from one */
    unsigned long failed;          /* servers given up (cold starts then) */
    int up;                        /* servers up now (said hello) */
    long server_pid;               /* the first one's bwrap, or 0 */
};
/* Also notices servers that came up since the last start. */
void shim_local_zygote_stats(struct shim_local_zygote_stats *out);

#endif
