/* spawn.c - starts the sandbox's first process from a possibly
 * multi-threaded host: like posix_spawn (a CLONE_VM|CLONE_VFORK child on
 * its own stack, so nothing of the host is copied and nothing of it runs
 * in the child), plus what posix_spawn cannot do: switch to another user
 * id before exec when the host runs as root.
 *
 * The clone is made by one long-lived thread of the host (started on
 * first use, all signals blocked, restarted in a forked child): bubblewrap
 * --die-with-parent ties the sandbox to the thread that created it, so a
 * sandbox opened by a short-lived thread would otherwise die with that
 * thread. This thread lives as long as the process, so the sandbox dies
 * exactly when the host process does.
 *
 * The child: every signal handler back to default and no signal blocked,
 * a new session (the host's terminal signals never reach the sandbox),
 * exactly the descriptors given (fds[i] becomes i, all else closed), the
 * directory given, then, if asked, no supplementary groups and the given
 * real, effective and saved uid and gid, and execve. Credentials change
 * through raw system calls: the C library's setuid family would try to
 * change every thread of the (shared-memory) host. Before all that the
 * child joins the sandbox's cgroups (cgroup.c opened them; "0" is the
 * writer itself), so nothing of the sandbox ever runs outside them; after
 * the credentials change it lowers RLIMIT_NOFILE; for the isolated mode
 * it mounts the sandbox's tmpfs (private_tmpfs below). */
#include "sandbox/local/spawn_child.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILD_STACK (64 * 1024)

/* ThreadSanitizer's runtime keeps each thread's state in its TLS, which a
 * CLONE_VM child would share with this thread (its interceptors in the
 * child's close and dup2 rewrite that state, and TSan then reports races
 * that are not). Its build (make tsan) does what TSan does with vfork:
 * the child gets a copy of the memory, and its report (c) comes back
 * through a shared page. */
#ifdef __SANITIZE_THREAD__
#define SPAWN_VM 0
#else
#define SPAWN_VM CLONE_VM
#endif

static int spawn_here(const struct shim_spawn *s, pid_t *pid)
{
    struct shim_spawn_child c = {.s = s, .err = 0, .step = SHIM_SPAWN_OTHER}, *cp = &c;
    unsigned uid = s->setid ? (unsigned)s->uid : (unsigned)geteuid();
    unsigned gid = s->setid ? (unsigned)s->gid : (unsigned)getegid();
    sigset_t all, old;
    void *stack;
    pid_t p;
    int i, st;

    if (s->failed)
        *s->failed = SHIM_SPAWN_OTHER;
    for (i = 0; i < s->nfds; i++)
        if (s->fds[i] < s->nfds)
            return -EINVAL; /* dup2 would clobber a source */
    for (i = 0; i < s->ntmpfs; i++)
        if (s->tmpfs[i].fd < s->nfds)
            return -EINVAL;
    snprintf(c.uid_map, sizeof(c.uid_map), "%u %u 1\n", uid, uid);
    snprintf(c.gid_map, sizeof(c.gid_map), "%u %u 1\n", gid, gid);
    if (s->oom_score_adj)
        snprintf(c.oom, sizeof(c.oom), "%d", s->oom_score_adj);
    c.root = geteuid() == 0;
    stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -errno;
    if (!SPAWN_VM) {
        cp = mmap(NULL, sizeof(c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (cp == MAP_FAILED) {
            munmap(stack, CHILD_STACK);
            return -errno;
        }
        *cp = c;
    }
    /* No host signal handler may run in the child before it resets them. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p = clone(shim_spawn_child_main, (char *)stack + CHILD_STACK,
              SPAWN_VM | CLONE_VFORK | SIGCHLD, cp);
    i = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    munmap(stack, CHILD_STACK);
    if (cp != &c) {
        c.err = cp->err;
        c.step = cp->step;
        munmap(cp, sizeof(c));
    }
    if (p < 0)
        return -i;
    if (c.err) {
        while (waitpid(p, &st, 0) < 0 && errno == EINTR)
            ;
        if (s->failed)
            *s->failed = (enum shim_spawn_step)c.step;
        return -c.err;
    }
    *pid = p;
    return 0;
}

/* ---- the spawning thread ---- */

static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER; /* one caller */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;      /* the rest */
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int running;                      /* the thread exists (this process) */
static const struct shim_spawn *request; /* set by a caller, cleared by it */
static int done, result;
static pid_t result_pid;

static void *spawner(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        const struct shim_spawn *s;
        pid_t pid = -1;
        int rc;

        while (!request || done)
            pthread_cond_wait(&cv, &mu);
        s = request;
        pthread_mutex_unlock(&mu);
        rc = spawn_here(s, &pid);
        pthread_mutex_lock(&mu);
        result = rc;
        result_pid = pid;
        done = 1;
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

/* fork() keeps only the calling thread: the child starts its own. */
static void before_fork(void)
{
    pthread_mutex_lock(&call_mu);
    pthread_mutex_lock(&mu);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&call_mu);
}

static void after_fork_child(void)
{
    /* The parent's thread may have been waiting on cv: a copy of a
     * condition variable with waiters that do not exist here is not to be
     * trusted. Start from fresh ones. */
    running = 0;
    request = NULL;
    done = 0;
    pthread_mutex_init(&mu, NULL);
    pthread_mutex_init(&call_mu, NULL);
    pthread_cond_init(&cv, NULL);
}

static void register_atfork(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Starts the thread; call with mu held. 0 or -errno. */
static int start_thread(void)
{
    pthread_attr_t at;
    sigset_t all, old;
    pthread_t t;
    int rc;

    if (pthread_attr_init(&at) != 0)
        return -ENOMEM;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited: no host signal
                                                 handler ever runs on it */
    rc = pthread_create(&t, &at, spawner, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc)
        return -rc;
    pthread_setname_np(t, "codeshim-spawn");
    running = 1;
    return 0;
}

int shim_sandbox_spawn(const struct shim_spawn *s, pid_t *pid)
{
    int rc;

    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&call_mu);
    pthread_mutex_lock(&mu);
    if (!running && start_thread() != 0) {
        /* no thread to be had: the sandbox then lives with this one */
        pthread_mutex_unlock(&mu);
        rc = spawn_here(s, pid);
        pthread_mutex_unlock(&call_mu);
        return rc;
    }
    request = s;
    done = 0;
    pthread_cond_broadcast(&cv);
    while (!done)
        pthread_cond_wait(&cv, &mu);
    rc = result;
    if (rc == 0)
        *pid = result_pid;
    request = NULL;
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&call_mu);
    return rc;
}
