/* pool.c - see pool.h. One mutex guards the FIFO and the thread count. */
#include "curl/pool.h"

#include "base/log.h"
#include "system/config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct shim_pool_job *head, *tail;
static size_t waiting;
static int threads;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void prepare(void) { pthread_mutex_lock(&mu); }
static void parent(void) { pthread_mutex_unlock(&mu); }

/* The child has only the forking thread: no worker runs, none waits. */
static void child(void)
{
    pthread_mutex_init(&mu, NULL);
    head = tail = NULL;
    waiting = 0;
    threads = 0;
}

static void register_atfork(void) { pthread_atfork(prepare, parent, child); }

/* Called locked. */
static struct shim_pool_job *dequeue(void)
{
    struct shim_pool_job *j = head;

    if (j) {
        head = j->next;
        if (!head)
            tail = NULL;
        waiting--;
    }
    return j;
}

/* Called locked. */
static void enqueue(struct shim_pool_job *j)
{
    if (tail)
        tail->next = j;
    else
        head = j;
    tail = j;
    waiting++;
}

static void *worker(void *arg)
{
    struct shim_pool_job *j = arg;

    while (j) {
        j->run(j); /* j belongs to its owner again */
        pthread_mutex_lock(&mu);
        j = dequeue();
        if (!j)
            threads--;
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

/* A detached thread with every signal blocked (the mask is inherited). */
static int start(struct shim_pool_job *j)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t t;
    int err;

    if (pthread_attr_init(&attr))
        return -ENOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&t, &attr, worker, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return -err;
}

int shim_pool_submit(struct shim_pool_job *j)
{
    int max = shim_config()->max_inflight, err;

    pthread_once(&atfork_once, register_atfork);
    j->next = NULL;
    pthread_mutex_lock(&mu);
    if (threads >= max) {
        enqueue(j);
        pthread_mutex_unlock(&mu);
        return 0;
    }
    threads++;
    pthread_mutex_unlock(&mu);
    err = start(j);
    if (!err)
        return 0;
    pthread_mutex_lock(&mu);
    threads--;
    if (threads > 0) { /* a running worker will take it */
        enqueue(j);
        err = 0;
    }
    pthread_mutex_unlock(&mu);
    if (err)
        LOG_ERR("cannot start a worker thread: %s", strerror(-err));
    return err;
}

size_t shim_pool_busy(void)
{
    size_t n;

    pthread_mutex_lock(&mu);
    n = (size_t)threads + waiting;
    pthread_mutex_unlock(&mu);
    return n;
}
