/* relay.c - see relay.h. Each call is packed into a struct op on the
 * worker's stack; the program's thread runs it (sinkq.h guarantees op
 * outlives the run). The relay is read-only once made. */
#include "curl/relay.h"

#include "base/clock.h"
#include "curl/sinkq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* Sockets of the model calls a relay knows at once (libcurl keeps one
 * or two open per handle). */
#define RELAY_FDS 8

struct shim_relay {
    struct shim_sinkq *q;
    CURL *h; /* the program's handle, as its SSL context callback knows it */
    struct shim_handle_cbs cbs;
    double t0;
    long timeout_ms;
    /* the model calls' open sockets, shut down once the program's side
     * stops so that a call waiting on the network ends at once; one
     * mutex over the list and every close, so a number is never shut
     * down after it was closed (and maybe reused) */
    pthread_mutex_t mu;
    curl_socket_t fds[RELAY_FDS];
    int nfds;
    int cancelled;
};

enum kind { OP_OPEN, OP_SOCKOPT, OP_CLOSE, OP_PREREQ, OP_RESOLVER, OP_SSL_CTX };

struct op {
    const struct shim_relay *r;
    enum kind kind;
    curlsocktype purpose;
    struct curl_sockaddr *addr;
    curl_socket_t fd;
    char *ip, *local_ip;
    int port, local_port;
    void *p1, *p2;
    long result;
};

/* The queue was stopped (the reader's thread, under the queue's lock). */
static void cancel(void *arg)
{
    struct shim_relay *r = arg;
    int i;

    pthread_mutex_lock(&r->mu);
    r->cancelled = 1;
    for (i = 0; i < r->nfds; i++)
        shutdown(r->fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&r->mu);
}

static void track(struct shim_relay *r, curl_socket_t fd)
{
    pthread_mutex_lock(&r->mu);
    if (r->cancelled)
        shutdown(fd, SHUT_RDWR);
    else if (r->nfds < RELAY_FDS)
        r->fds[r->nfds++] = fd;
    pthread_mutex_unlock(&r->mu);
}

/* Takes fd off the list; closes it too when close_it. */
static int untrack(struct shim_relay *r, curl_socket_t fd, int close_it)
{
    int i, rc = 0;

    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->nfds; i++)
        if (r->fds[i] == fd) {
            r->fds[i] = r->fds[--r->nfds];
            break;
        }
    if (close_it)
        rc = close(fd);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int shim_relay_new(struct shim_sinkq *q, CURL *h, const struct shim_handle_cbs *cbs,
                   double t0, long timeout_ms, struct shim_relay **out)
{
    struct shim_relay *r = calloc(1, sizeof(*r));

    if (!r)
        return -ENOMEM;
    shim_sinkq_ref(q);
    r->q = q;
    r->h = h;
    r->cbs = *cbs;
    r->t0 = t0;
    r->timeout_ms = timeout_ms;
    pthread_mutex_init(&r->mu, NULL);
    shim_sinkq_on_stop(q, cancel, r);
    *out = r;
    return 0;
}

void shim_relay_free(struct shim_relay *r)
{
    if (!r)
        return;
    shim_sinkq_on_stop(r->q, NULL, NULL);
    shim_sinkq_unref(r->q);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* On the program's thread. */
static void run(void *arg)
{
    struct op *o = arg;
    const struct shim_handle_cbs *c = &o->r->cbs;

    switch (o->kind) {
    case OP_OPEN:
        o->result = (long)c->open(c->open_data, o->purpose, o->addr);
        break;
    case OP_SOCKOPT:
        o->result = c->sockopt(c->sockopt_data, o->fd, o->purpose);
        break;
    case OP_CLOSE:
        o->result = c->close(c->close_data, o->fd);
        break;
    case OP_PREREQ:
        o->result = c->prereq(c->prereq_data, o->ip, o->local_ip, o->port, o->local_port);
        break;
    case OP_RESOLVER:
        o->result = c->resolver(o->p1, o->p2, c->resolver_data);
        break;
    case OP_SSL_CTX:
        o->result = (long)c->ssl_ctx(o->r->h, o->p1, c->ssl_ctx_data);
        break;
    }
}

/* 1 when the program's callback ran (o->result holds its answer). */
static int relay(const struct shim_relay *r, struct op *o)
{
    long left = 0;

    o->r = r;
    if (r->timeout_ms > 0) {
        double ms = (shim_clock_s() - r->t0) * 1000.0;
        if (ms >= (double)r->timeout_ms)
            return 0;
        left = r->timeout_ms - (long)ms;
        if (left < 1)
            left = 1;
    }
    return shim_sinkq_call(r->q, run, o, left) == 0;
}

static curl_socket_t tr_open(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct shim_relay *r = clientp;
    struct op o = {.kind = OP_OPEN, .purpose = purpose, .addr = addr};
    curl_socket_t fd;

    if (!r->cbs.open) /* libcurl's own way, close-on-exec */
        fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    else
        fd = relay(r, &o) ? (curl_socket_t)o.result : CURL_SOCKET_BAD;
    if (fd != CURL_SOCKET_BAD)
        track(r, fd);
    return fd;
}

static int tr_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    struct op o = {.kind = OP_SOCKOPT, .fd = fd, .purpose = purpose};
    return relay(clientp, &o) ? (int)o.result : CURL_SOCKOPT_ERROR;
}

static int tr_close(void *clientp, curl_socket_t fd)
{
    struct shim_relay *r = clientp;
    struct op o = {.kind = OP_CLOSE, .fd = fd};

    if (!r->cbs.close)
        return untrack(r, fd, 1);
    untrack(r, fd, 0);
    if (relay(r, &o))
        return (int)o.result;
    return close(fd);
}

static int tr_prereq(void *clientp, char *ip, char *local_ip, int port, int local_port)
{
    struct op o = {.kind = OP_PREREQ, .ip = ip, .local_ip = local_ip, .port = port,
                   .local_port = local_port};
    return relay(clientp, &o) ? (int)o.result : CURL_PREREQFUNC_ABORT;
}

static int tr_resolver(void *state, void *reserved, void *userdata)
{
    struct op o = {.kind = OP_RESOLVER, .p1 = state, .p2 = reserved};
    return relay(userdata, &o) ? (int)o.result : 1;
}

static CURLcode tr_ssl_ctx(CURL *curl, void *ctx, void *userptr)
{
    struct op o = {.kind = OP_SSL_CTX, .p1 = ctx};

    (void)curl;
    return relay(userptr, &o) ? (CURLcode)o.result : CURLE_ABORTED_BY_CALLBACK;
}

#define SET(opt, val) api->easy_setopt(d, opt, val)

void shim_relay_install(const struct shim_curl_api *api, struct shim_relay *r, CURL *d)
{
    const struct shim_handle_cbs *c = &r->cbs;

    /* always: the relay knows the model calls' sockets (cancel) */
    SET(CURLOPT_OPENSOCKETFUNCTION, tr_open);
    SET(CURLOPT_OPENSOCKETDATA, (void *)r);
    SET(CURLOPT_CLOSESOCKETFUNCTION, tr_close);
    SET(CURLOPT_CLOSESOCKETDATA, (void *)r);
    if (c->sockopt) {
        SET(CURLOPT_SOCKOPTFUNCTION, tr_sockopt);
        SET(CURLOPT_SOCKOPTDATA, (void *)r);
    }
    if (c->prereq) {
        SET(CURLOPT_PREREQFUNCTION, tr_prereq);
        SET(CURLOPT_PREREQDATA, (void *)r);
    }
    if (c->resolver) {
        SET(CURLOPT_RESOLVER_START_FUNCTION, tr_resolver);
        SET(CURLOPT_RESOLVER_START_DATA, (void *)r);
    }
    if (c->ssl_ctx) {
        SET(CURLOPT_SSL_CTX_FUNCTION, tr_ssl_ctx);
        SET(CURLOPT_SSL_CTX_DATA, (void *)r);
    }
    SET(CURLOPT_DEBUGFUNCTION, (curl_debug_callback)NULL);
    SET(CURLOPT_HSTSREADFUNCTION, (curl_hstsread_callback)NULL);
    SET(CURLOPT_HSTSWRITEFUNCTION, (curl_hstswrite_callback)NULL);
    SET(CURLOPT_TRAILERFUNCTION, (curl_trailer_callback)NULL);
    SET(CURLOPT_SSH_KEYFUNCTION, (curl_sshkeycallback)NULL);
    SET(CURLOPT_SSH_HOSTKEYFUNCTION, (curl_sshhostkeycallback)NULL);
    SET(CURLOPT_CHUNK_BGN_FUNCTION, (curl_chunk_bgn_callback)NULL);
    SET(CURLOPT_CHUNK_END_FUNCTION, (curl_chunk_end_callback)NULL);
    SET(CURLOPT_FNMATCH_FUNCTION, (curl_fnmatch_callback)NULL);
    SET(CURLOPT_INTERLEAVEFUNCTION, (curl_write_callback)NULL);
}
