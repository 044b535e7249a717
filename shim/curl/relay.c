/* relay.c - see relay.h. The relay is read-only once made; it is used
 * only on the thread that drives the transfer. */
#include "curl/relay.h"

#include "curl/sinkq.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

struct shim_relay {
    struct shim_sinkq *q;
    CURL *h; /* the program's handle, as its SSL context callback knows it */
    struct shim_handle_cbs cbs;
};

int shim_relay_new(struct shim_sinkq *q, CURL *h, const struct shim_handle_cbs *cbs,
                   struct shim_relay **out)
{
    struct shim_relay *r = calloc(1, sizeof(*r));

    if (!r)
        return -ENOMEM;
    shim_sinkq_ref(q);
    r->q = q;
    r->h = h;
    r->cbs = *cbs;
    *out = r;
    return 0;
}

void shim_relay_free(struct shim_relay *r)
{
    if (!r)
        return;
    shim_sinkq_unref(r->q);
    free(r);
}

/* 1 while the program's callbacks may be called. */
static int live(const struct shim_relay *r)
{
    return !shim_sinkq_stopped(r->q);
}

static curl_socket_t tr_open(void *clientp, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct shim_relay *r = clientp;
    return live(r) ? r->cbs.open(r->cbs.open_data, purpose, addr) : CURL_SOCKET_BAD;
}

static int tr_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    struct shim_relay *r = clientp;
    return live(r) ? r->cbs.sockopt(r->cbs.sockopt_data, fd, purpose) : CURL_SOCKOPT_ERROR;
}

static int tr_close(void *clientp, curl_socket_t fd)
{
    struct shim_relay *r = clientp;
    return live(r) ? r->cbs.close(r->cbs.close_data, fd) : close(fd);
}

static int tr_prereq(void *clientp, char *ip, char *local_ip, int port, int local_port)
{
    struct shim_relay *r = clientp;
    return live(r) ? r->cbs.prereq(r->cbs.prereq_data, ip, local_ip, port, local_port)
                   : CURL_PREREQFUNC_ABORT;
}

static int tr_resolver(void *state, void *reserved, void *userdata)
{
    struct shim_relay *r = userdata;
    return live(r) ? r->cbs.resolver(state, reserved, r->cbs.resolver_data) : 1;
}

static CURLcode tr_ssl_ctx(CURL *curl, void *ctx, void *userptr)
{
    struct shim_relay *r = userptr;

    (void)curl;
    return live(r) ? r->cbs.ssl_ctx(r->h, ctx, r->cbs.ssl_ctx_data) : CURLE_ABORTED_BY_CALLBACK;
}

#define SET(opt, val) api->easy_setopt(d, opt, val)

void shim_relay_install(const struct shim_curl_api *api, struct shim_relay *r, CURL *d)
{
    const struct shim_handle_cbs *c = &r->cbs;

    if (c->open) {
        SET(CURLOPT_OPENSOCKETFUNCTION, tr_open);
        SET(CURLOPT_OPENSOCKETDATA, (void *)r);
    }
    if (c->close) {
        SET(CURLOPT_CLOSESOCKETFUNCTION, tr_close);
        SET(CURLOPT_CLOSESOCKETDATA, (void *)r);
    }
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
