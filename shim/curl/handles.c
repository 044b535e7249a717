/* handles.c - per-handle recorded options and synthetic answers; see
 * handles.h. A chained hash table keyed by the CURL* address, one global
 * mutex (socket_wrapper's lesson: per-entry locks multiply fork cost). */
#include "curl/handles.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct answer {
    int active;
    struct shim_answer_info info;
    char *content_type, *effective_url, *scheme;
};

struct entry {
    struct entry *next;
    CURL *h;
    enum shim_flavor flavor;
    char *url;
    /* the URL's classification, made by the first perform that needs it
     * (url_known 1), not at every perform nor when it is set: a transfer
     * whose method and body already say "not ours" never parses its URL */
    enum shim_api url_api;
    int url_known;
    char *custom_request;
    int method;
    const char *postfields; /* borrowed, or == copied */
    char *copied;
    size_t copied_len;
    curl_off_t postsize; /* -1: strlen(postfields) at perform time */
    struct shim_body_cb src; /* read, seek and ioctl callbacks, sizes */
    curl_off_t infilesize; /* -1: unknown */
    CURLU *curlu;          /* borrowed: CURLOPT_CURLU */
    void *giveback;        /* intercept.c's, see handles.h */
    const struct curl_slist *headers;
    shim_write_fn write_cb, header_cb;
    void *write_data, *header_data;
    int write_data_set;
    long failonerror, include_header;
    char *errorbuffer;
    struct shim_handle_limits lim; /* timeout and progress (limits.h) */
    struct shim_handle_cbs cbs;    /* connection callbacks (handles.h) */
    struct shim_creds creds; /* digests: a credential itself is never kept */
    int creds_set;           /* a credential option was ever set non-NULL */
    char *net[SHIM_HANDLE_NET]; /* CA file, CA path, proxy, no-proxy */
    struct answer ans;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The entry this thread last recorded an option into, found in O(1) and
 * without the lock by the next setopt on the same handle (a program sets
 * some thirty recorded options on a handle in a row): valid while no
 * entry was freed since (gen, bumped under the lock by every free).
 * Writing an entry without the lock is safe because only calls on its own
 * handle free it or read the fields setopt writes, and libcurl's rules
 * forbid using one handle from two threads at once; the table's chains
 * (e->next) are only ever changed under the lock. */
static unsigned long gen;
static __thread CURL *last_h;
static __thread struct entry *last_e;
static __thread unsigned long last_gen;
static struct entry **buckets;
static size_t nbuckets, nentries;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void prepare(void) { pthread_mutex_lock(&lock); }
static void parent(void) { pthread_mutex_unlock(&lock); }
static void child(void) { pthread_mutex_init(&lock, NULL); }
static void register_atfork(void) { pthread_atfork(prepare, parent, child); }

static size_t hash(CURL *h, size_t n)
{
    uintptr_t x = (uintptr_t)h;
    x ^= x >> 17;
    x *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(x >> 7) & (n - 1);
}

static struct entry *find(CURL *h)
{
    struct entry *e;

    if (!nbuckets)
        return NULL;
    for (e = buckets[hash(h, nbuckets)]; e; e = e->next)
        if (e->h == h)
            return e;
    return NULL;
}

static int grow(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 64, i;
    struct entry **nb = calloc(n, sizeof(*nb));

    if (!nb)
        return -ENOMEM;
    for (i = 0; i < nbuckets; i++) {
        struct entry *e = buckets[i], *next;
        for (; e; e = next) {
            size_t b = hash(e->h, n);
            next = e->next;
            e->next = nb[b];
            nb[b] = e;
        }
    }
    free(buckets);
    buckets = nb;
    nbuckets = n;
    return 0;
}

/* How many entries hold an active synthetic answer (changed under the
 * lock): while none does, as in a program codeshim only passes through,
 * curl_easy_getinfo asks libcurl without taking the lock. */
static unsigned long nanswers;

static void clear_answer(struct answer *a)
{
    if (a->active)
        __atomic_store_n(&nanswers, nanswers - 1, __ATOMIC_RELAXED);
    free(a->content_type);
    free(a->effective_url);
    free(a->scheme);
    memset(a, 0, sizeof(*a));
}

static void init_opts(struct entry *e)
{
    e->method = SHIM_METHOD_GET;
    e->postsize = -1;
    e->infilesize = -1;
    e->src.read_data = stdin;
    e->lim.noprogress = 1; /* libcurl's default */
}

static void free_opts(struct entry *e)
{
    size_t i;

    for (i = 0; i < SHIM_HANDLE_NET; i++)
        free(e->net[i]);
    free(e->url);
    free(e->custom_request);
    free(e->copied);
    free(e->giveback);
    e->giveback = NULL;
    clear_answer(&e->ans);
}

static struct entry *insert(CURL *h, enum shim_flavor f)
{
    struct entry *e;
    size_t b;

    pthread_once(&atfork_once, register_atfork);
    if (nentries >= nbuckets && grow() < 0 && !nbuckets)
        return NULL;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->h = h;
    e->flavor = f;
    init_opts(e);
    b = hash(h, nbuckets);
    e->next = buckets[b];
    buckets[b] = e;
    nentries++;
    return e;
}

static void unlink_entry(CURL *h)
{
    struct entry **pp, *e;

    if (!nbuckets)
        return;
    for (pp = &buckets[hash(h, nbuckets)]; (e = *pp) != NULL; pp = &e->next) {
        if (e->h == h) {
            *pp = e->next;
            free_opts(e);
            free(e);
            nentries--;
            __atomic_store_n(&gen, gen + 1, __ATOMIC_RELEASE);
            return;
        }
    }
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* A CURLOPT_RESOLVE list as one string, its entries joined by '\n' (an
 * entry holding one is left out), at most RESOLVE_MAX bytes; NULL for an
 * empty list (or no memory: the option then does not apply). */
#define RESOLVE_MAX 16384
static char *joined(const struct curl_slist *l)
{
    char *out = NULL;
    size_t n = 0;

    for (; l; l = l->next) {
        size_t k = l->data ? strlen(l->data) : 0;
        char *t;

        if (!k || strchr(l->data, '\n') || n + k + 2 > RESOLVE_MAX)
            continue;
        if (!(t = realloc(out, n + k + 2))) {
            free(out);
            return NULL;
        }
        out = t;
        if (n)
            out[n++] = '\n';
        memcpy(out + n, l->data, k + 1);
        n += k;
    }
    return out;
}

/* e's URL's API, classified once for each URL set (under the lock, as
 * every libcurl call codeshim makes while recording). */
static enum shim_api url_api(struct entry *e)
{
    if (!e->url_known) {
        e->url_api = e->url ? shim_classify_url(e->url) : SHIM_API_NONE;
        e->url_known = 1;
    }
    return e->url_api;
}

/* Where the request goes and what it is called: URL, custom request,
 * headers. 1 when opt is one of these. */
static int apply_target(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_URL:
        free(e->url);
        e->url = dup_or_null(v.p);
        e->url_known = 0;
        break;
    case CURLOPT_CUSTOMREQUEST:
        free(e->custom_request);
        e->custom_request = dup_or_null(v.p);
        break;
    case CURLOPT_HTTPHEADER:
        e->headers = v.p;
        break;
    default:
        return 0;
    }
    return 1;
}

/* An in-memory body: POSTFIELDS (borrowed), COPYPOSTFIELDS (copied at
 * the size in force) and that size; either body makes the method POST. */
static int apply_postfields(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_POSTFIELDS:
        e->postfields = v.p;
        e->method = SHIM_METHOD_POST;
        break;
    case CURLOPT_COPYPOSTFIELDS: {
        const char *src = v.p;
        size_t n;
        free(e->copied);
        e->copied = NULL;
        e->copied_len = 0;
        e->postfields = NULL;
        if (src) {
            n = e->postsize >= 0 ? (size_t)e->postsize : strlen(src);
            e->copied = malloc(n + 1);
            if (e->copied) {
                memcpy(e->copied, src, n);
                e->copied[n] = '\0';
                e->copied_len = n;
                e->postfields = e->copied;
            }
        }
        e->method = SHIM_METHOD_POST;
        break;
    }
    case CURLOPT_POSTFIELDSIZE:
    case CURLOPT_POSTFIELDSIZE_LARGE: {
        curl_off_t n = opt == CURLOPT_POSTFIELDSIZE ? (curl_off_t)v.l : v.off;
        /* as libcurl: a size larger than the one in force drops an
         * earlier COPYPOSTFIELDS copy (any size, after an unsized copy) */
        if (e->copied && e->postfields == e->copied && n > e->postsize) {
            free(e->copied);
            e->copied = NULL;
            e->postfields = NULL;
        }
        e->postsize = n;
        break;
    }
    default:
        return 0;
    }
    return 1;
}

/* The method, moving between methods as libcurl's setopt.c does. */
static int apply_method(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_POST:
        e->method = v.l ? SHIM_METHOD_POST : SHIM_METHOD_GET;
        break;
    case CURLOPT_HTTPGET:
        if (v.l)
            e->method = SHIM_METHOD_GET;
        break;
    case CURLOPT_NOBODY:
        if (v.l)
            e->method = SHIM_METHOD_HEAD;
        else if (e->method == SHIM_METHOD_HEAD)
            e->method = SHIM_METHOD_GET;
        break;
    case CURLOPT_UPLOAD:
        e->method = v.l ? SHIM_METHOD_PUT : SHIM_METHOD_GET;
        break;
    case CURLOPT_HTTPPOST:
        e->method = SHIM_METHOD_POST_FORM;
        break;
    case CURLOPT_MIMEPOST:
        e->method = SHIM_METHOD_POST_MIME;
        break;
    default:
        return 0;
    }
    return 1;
}

/* A body libcurl would read through the program's callbacks, and a
 * CURLOPT_CURLU URL. */
static int apply_body_cb(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_READFUNCTION:
        e->src.read_cb = (curl_read_callback)v.fn;
        break;
    case CURLOPT_READDATA:
        e->src.read_data = v.p;
        break;
    case CURLOPT_SEEKFUNCTION:
        e->src.seek_cb = (curl_seek_callback)v.fn;
        break;
    case CURLOPT_SEEKDATA:
        e->src.seek_data = v.p;
        break;
    case CURLOPT_IOCTLFUNCTION:
        e->src.ioctl_cb = (curl_ioctl_callback)v.fn;
        break;
    case CURLOPT_IOCTLDATA:
        e->src.ioctl_data = v.p;
        break;
    case CURLOPT_INFILESIZE:
        e->infilesize = v.l;
        break;
    case CURLOPT_INFILESIZE_LARGE:
        e->infilesize = v.off;
        break;
    case CURLOPT_CURLU:
        e->curlu = v.p;
        break;
    default:
        return 0;
    }
    return 1;
}

/* How the answer is handed to the program: write and header callbacks,
 * failure and header options, the error buffer. */
static int apply_delivery(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_WRITEFUNCTION:
        e->write_cb = (shim_write_fn)v.fn;
        break;
    case CURLOPT_WRITEDATA:
        e->write_data = v.p;
        e->write_data_set = 1;
        break;
    case CURLOPT_HEADERFUNCTION:
        e->header_cb = (shim_write_fn)v.fn;
        break;
    case CURLOPT_HEADERDATA:
        e->header_data = v.p;
        break;
    case CURLOPT_FAILONERROR:
        e->failonerror = v.l;
        break;
    case CURLOPT_HEADER:
        e->include_header = v.l;
        break;
    case CURLOPT_ERRORBUFFER:
        e->errorbuffer = v.p;
        break;
    default:
        return 0;
    }
    return 1;
}

/* What bounds and reports the transfer (limits.h). */
static int apply_limits(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_TIMEOUT:
        e->lim.timeout_ms = v.l > 0 && v.l < LONG_MAX / 1000 ? v.l * 1000 : v.l > 0 ? LONG_MAX : 0;
        break;
    case CURLOPT_TIMEOUT_MS:
        e->lim.timeout_ms = v.l > 0 ? v.l : 0;
        break;
    case CURLOPT_NOPROGRESS:
        e->lim.noprogress = v.l != 0;
        break;
    case CURLOPT_XFERINFOFUNCTION:
        e->lim.xferinfo = (curl_xferinfo_callback)v.fn;
        break;
    case CURLOPT_PROGRESSFUNCTION:
        e->lim.progress = (curl_progress_callback)v.fn;
        break;
    case CURLOPT_XFERINFODATA: /* the same option as PROGRESSDATA */
        e->lim.progress_data = v.p;
        break;
    default:
        return 0;
    }
    return 1;
}

/* What codeshim's own calls honour (CA, proxy, resolve) and the
 * connection callbacks relay.c runs on the program's thread. */
static int apply_net(struct entry *e, CURLoption opt, union shim_optval v)
{
    switch (opt) {
    case CURLOPT_CAINFO: case CURLOPT_CAPATH: case CURLOPT_PROXY: case CURLOPT_NOPROXY: {
        size_t i = opt == CURLOPT_CAINFO ? 0 : opt == CURLOPT_CAPATH ? 1
                 : opt == CURLOPT_PROXY ? 2 : 3;
        free(e->net[i]);
        e->net[i] = dup_or_null(v.p);
        break;
    }
    case CURLOPT_OPENSOCKETFUNCTION: e->cbs.open = (curl_opensocket_callback)v.fn; break;
    case CURLOPT_OPENSOCKETDATA: e->cbs.open_data = v.p; break;
    case CURLOPT_SOCKOPTFUNCTION: e->cbs.sockopt = (curl_sockopt_callback)v.fn; break;
    case CURLOPT_SOCKOPTDATA: e->cbs.sockopt_data = v.p; break;
    case CURLOPT_CLOSESOCKETFUNCTION: e->cbs.close = (curl_closesocket_callback)v.fn; break;
    case CURLOPT_CLOSESOCKETDATA: e->cbs.close_data = v.p; break;
    case CURLOPT_PREREQFUNCTION: e->cbs.prereq = (curl_prereq_callback)v.fn; break;
    case CURLOPT_PREREQDATA: e->cbs.prereq_data = v.p; break;
    case CURLOPT_RESOLVER_START_FUNCTION:
        e->cbs.resolver = (curl_resolver_start_callback)v.fn;
        break;
    case CURLOPT_RESOLVER_START_DATA: e->cbs.resolver_data = v.p; break;
    case CURLOPT_SSL_CTX_FUNCTION: e->cbs.ssl_ctx = (curl_ssl_ctx_callback)v.fn; break;
    case CURLOPT_SSL_CTX_DATA: e->cbs.ssl_ctx_data = v.p; break;
    case CURLOPT_RESOLVE:
        free(e->net[4]);
        e->net[4] = joined(v.p);
        break;
    default:
        return 0;
    }
    return 1;
}

/* The concerns apply() hands an option to: its group in shim_handles_opt. */
enum { G_TARGET, G_POSTFIELDS, G_METHOD, G_BODY_CB, G_DELIVERY, G_LIMITS, G_NET };
static int (*const appliers[])(struct entry *, CURLoption, union shim_optval) = {
    [G_TARGET] = apply_target,     [G_POSTFIELDS] = apply_postfields,
    [G_METHOD] = apply_method,     [G_BODY_CB] = apply_body_cb,
    [G_DELIVERY] = apply_delivery, [G_LIMITS] = apply_limits,
    [G_NET] = apply_net,
};

/* Records one recorded option into e: one load finds its concern. */
static void apply(struct entry *e, CURLoption opt, union shim_optval v)
{
    (void)appliers[shim_handles_opt[SHIM_OPT_SLOT(opt)] >> 2 & 7](e, opt, v);
}

/* The options codeshim records: SHIM_OPT_RECORD for the ones apply()
 * reads, SHIM_OPT_CRED for the credentials (kept as digests, identity.h).
 * A constant table with one slot per option (SHIM_OPT_SLOT: its low ten
 * bits mixed with those from the ninth up, where libcurl's type base, a
 * multiple of 10000, shows; no two recorded options share a slot), holding
 * the option, its kind and the concern apply() hands it to: the check in
 * every setopt wrapper is one load and one compare (shim_handles_wants).
 * Two options in one slot would initialise it twice, which the compiler
 * rejects (-Werror=override-init, part of -Wextra). */
#define SLOT(o, kind, group) \
    [SHIM_OPT_SLOT(o)] = (uint32_t)(o) << SHIM_OPT_SHIFT | (uint32_t)(group) << 2 | (kind),
#define RECORD(o, group) SLOT(o, SHIM_OPT_RECORD, group)
#define CRED(o, slot, second, blob) SLOT(o, SHIM_OPT_CRED, 0)
const uint32_t shim_handles_opt[SHIM_OPT_SLOTS] = {
    /* where the request goes */
    RECORD(CURLOPT_URL, G_TARGET) RECORD(CURLOPT_CUSTOMREQUEST, G_TARGET)
    RECORD(CURLOPT_HTTPHEADER, G_TARGET)
    /* an in-memory body */
    RECORD(CURLOPT_POSTFIELDS, G_POSTFIELDS) RECORD(CURLOPT_COPYPOSTFIELDS, G_POSTFIELDS)
    RECORD(CURLOPT_POSTFIELDSIZE, G_POSTFIELDS)
    RECORD(CURLOPT_POSTFIELDSIZE_LARGE, G_POSTFIELDS)
    /* the method */
    RECORD(CURLOPT_POST, G_METHOD) RECORD(CURLOPT_HTTPGET, G_METHOD)
    RECORD(CURLOPT_NOBODY, G_METHOD) RECORD(CURLOPT_UPLOAD, G_METHOD)
    RECORD(CURLOPT_HTTPPOST, G_METHOD) RECORD(CURLOPT_MIMEPOST, G_METHOD)
    /* a body read through callbacks */
    RECORD(CURLOPT_READFUNCTION, G_BODY_CB) RECORD(CURLOPT_READDATA, G_BODY_CB)
    RECORD(CURLOPT_SEEKFUNCTION, G_BODY_CB) RECORD(CURLOPT_SEEKDATA, G_BODY_CB)
    RECORD(CURLOPT_IOCTLFUNCTION, G_BODY_CB) RECORD(CURLOPT_IOCTLDATA, G_BODY_CB)
    RECORD(CURLOPT_INFILESIZE, G_BODY_CB) RECORD(CURLOPT_INFILESIZE_LARGE, G_BODY_CB)
    RECORD(CURLOPT_CURLU, G_BODY_CB)
    /* delivery */
    RECORD(CURLOPT_WRITEFUNCTION, G_DELIVERY) RECORD(CURLOPT_WRITEDATA, G_DELIVERY)
    RECORD(CURLOPT_HEADERFUNCTION, G_DELIVERY) RECORD(CURLOPT_HEADERDATA, G_DELIVERY)
    RECORD(CURLOPT_FAILONERROR, G_DELIVERY) RECORD(CURLOPT_HEADER, G_DELIVERY)
    RECORD(CURLOPT_ERRORBUFFER, G_DELIVERY)
    /* limits and progress */
    RECORD(CURLOPT_TIMEOUT, G_LIMITS) RECORD(CURLOPT_TIMEOUT_MS, G_LIMITS)
    RECORD(CURLOPT_NOPROGRESS, G_LIMITS) RECORD(CURLOPT_XFERINFOFUNCTION, G_LIMITS)
    RECORD(CURLOPT_PROGRESSFUNCTION, G_LIMITS) RECORD(CURLOPT_XFERINFODATA, G_LIMITS)
    /* what codeshim's own calls honour */
    RECORD(CURLOPT_CAINFO, G_NET) RECORD(CURLOPT_CAPATH, G_NET) RECORD(CURLOPT_PROXY, G_NET)
    RECORD(CURLOPT_NOPROXY, G_NET) RECORD(CURLOPT_RESOLVE, G_NET)
    /* the connection callbacks relay.c runs on the program's thread */
    RECORD(CURLOPT_OPENSOCKETFUNCTION, G_NET) RECORD(CURLOPT_OPENSOCKETDATA, G_NET)
    RECORD(CURLOPT_SOCKOPTFUNCTION, G_NET) RECORD(CURLOPT_SOCKOPTDATA, G_NET)
    RECORD(CURLOPT_CLOSESOCKETFUNCTION, G_NET) RECORD(CURLOPT_CLOSESOCKETDATA, G_NET)
    RECORD(CURLOPT_PREREQFUNCTION, G_NET) RECORD(CURLOPT_PREREQDATA, G_NET)
    RECORD(CURLOPT_RESOLVER_START_FUNCTION, G_NET) RECORD(CURLOPT_RESOLVER_START_DATA, G_NET)
    RECORD(CURLOPT_SSL_CTX_FUNCTION, G_NET) RECORD(CURLOPT_SSL_CTX_DATA, G_NET)
    SHIM_CRED_OPTIONS(CRED)
};
#undef CRED
#undef RECORD
#undef SLOT

void shim_handles_record(CURL *h, enum shim_flavor f, CURLoption opt,
                         union shim_optval v, int create)
{
    struct shim_cred_update cred;
    struct entry *e;
    int kind = shim_handles_wants(opt), locked = 0;

    if (!h || !kind)
        return;
    if (kind == SHIM_OPT_CRED && v.p)
        shim_identity_digest(&cred, opt, v.p); /* hashed before the lock, not under it */
    if (h == last_h && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == last_gen) {
        e = last_e;
    } else {
        pthread_mutex_lock(&lock);
        locked = 1;
        e = find(h);
        if (!e && create)
            e = insert(h, f);
        if (e) {
            last_h = h;
            last_e = e;
            last_gen = gen;
        }
    }
    if (e && kind == SHIM_OPT_CRED) {
        /* a NULL clears (no hashing); on a handle that never had a
         * credential, whose slots are all empty, it changes nothing (the
         * curl CLI clears five on every handle) */
        if (!v.p && e->creds_set)
            shim_identity_digest(&cred, opt, NULL);
        if (v.p || e->creds_set)
            shim_identity_apply(&e->creds, &cred);
        e->creds_set |= v.p != NULL;
    } else if (e)
        apply(e, opt, v);
    if (locked)
        pthread_mutex_unlock(&lock);
}

static size_t body_len(const struct entry *e)
{
    return e->postsize >= 0 ? (size_t)e->postsize : strlen(e->postfields);
}

/* Whether libcurl sends e's body as a POST ("POST" spelt by the custom
 * request when UPLOAD set the method, as curl -X POST -T does). */
static int is_post(const struct entry *e)
{
    if (e->method == SHIM_METHOD_POST)
        return 1;
    return e->method == SHIM_METHOD_PUT && e->custom_request &&
           !strcasecmp(e->custom_request, "POST");
}

/* Whether libcurl reads e's body through the read callback, and its size
 * as libcurl knows it (-1: chunked). */
static int body_from_cb(const struct entry *e, curl_off_t *size)
{
    if (e->method == SHIM_METHOD_POST && !e->postfields) {
        *size = e->postsize;
        return 1;
    }
    if (e->method == SHIM_METHOD_PUT) {
        *size = e->infilesize;
        return 1;
    }
    return 0;
}

/* A CURLOPT_CURLU handle's URL, read from it as libcurl does when a
 * transfer starts (which also makes it the handle's CURLOPT_URL). Called
 * without the lock: curl_url_get is libcurl's. */
static void refresh_curlu(CURL *h)
{
    const struct shim_curl_api *api;
    enum shim_flavor f;
    struct entry *e;
    CURLU *u;
    char *s = NULL, *copy;

    pthread_mutex_lock(&lock);
    e = find(h);
    u = e ? e->curlu : NULL;
    f = e ? e->flavor : SHIM_FLAVOR_OPENSSL;
    pthread_mutex_unlock(&lock);
    if (!u || !(api = shim_real(f)) || !api->url_get)
        return;
    if (api->url_get(u, CURLUPART_URL, &s, 0) != CURLUE_OK || !s)
        return;
    copy = strdup(s);
    if (api->free)
        api->free(s);
    pthread_mutex_lock(&lock);
    e = find(h);
    if (copy && e && e->curlu == u) {
        free(e->url);
        e->url = copy;
        copy = NULL;
        e->url_known = 0;
    }
    pthread_mutex_unlock(&lock);
    free(copy);
}

enum shim_api shim_handles_begin(CURL *h, size_t max_body, int *read_body, void **stale)
{
    enum shim_api kind = SHIM_API_NONE;
    struct entry *e;
    curl_off_t size;
    int curlu;

    *read_body = 0;
    *stale = NULL;
    pthread_mutex_lock(&lock);
    e = find(h);
    curlu = e && e->curlu;
    if (curlu) { /* read without the lock, then looked up again */
        pthread_mutex_unlock(&lock);
        refresh_curlu(h);
        pthread_mutex_lock(&lock);
        e = find(h);
    }
    if (e) {
        if (e->ans.active)
            clear_answer(&e->ans);
        *stale = e->giveback;
        e->giveback = NULL;
        if (is_post(e) && body_from_cb(e, &size)) {
            /* known to be too large or empty: libcurl's, unread */
            if ((size < 0 || (size > 0 && (uint64_t)size <= max_body)) &&
                url_api(e) != SHIM_API_NONE) {
                kind = e->url_api;
                *read_body = 1;
            }
        } else if (shim_classify_may_be_ours(is_post(e), e->custom_request, e->postfields,
                                             e->postsize >= 0 ? (size_t)e->postsize
                                                              : SHIM_BODY_STRING,
                                             max_body)) {
            kind = url_api(e); /* its URL's, classified once */
        }
        if (kind == SHIM_API_NONE && shim_classify_maybe_containers(e->url)) {
            kind = SHIM_API_CONTAINERS;
            *read_body = is_post(e) && body_from_cb(e, &size) && size != 0 &&
                         (size < 0 || (uint64_t)size <= max_body);
        }
    }
    pthread_mutex_unlock(&lock);
    return kind;
}

void *shim_handles_set_giveback(CURL *h, void *p)
{
    struct entry *e;
    void *old = p;

    pthread_mutex_lock(&lock);
    e = find(h);
    if (e) {
        old = e->giveback;
        e->giveback = p;
    }
    pthread_mutex_unlock(&lock);
    return old;
}

int shim_handles_body_cb(CURL *h, struct shim_body_cb *out)
{
    struct entry *e;

    pthread_mutex_lock(&lock);
    e = find(h);
    if (e)
        *out = e->src;
    pthread_mutex_unlock(&lock);
    return e ? 0 : -ENOENT;
}

int shim_handles_view(CURL *h, struct shim_handle_view *out)
{
    struct entry *e;
    size_t i;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&lock);
    e = find(h);
    if (!e) {
        rc = -ENOENT;
        goto out;
    }
    out->flavor = e->flavor;
    out->url = dup_or_null(e->url);
    out->custom_request = dup_or_null(e->custom_request);
    if ((e->url && !out->url) || (e->custom_request && !out->custom_request)) {
        rc = -ENOMEM;
        goto out;
    }
    out->method = e->method;
    out->body = e->postfields;
    if (e->postfields)
        out->body_len = body_len(e);
    out->body_copied_unsized = e->postfields && e->postfields == e->copied && e->postsize < 0;
    out->src = e->src;
    out->body_from_cb = body_from_cb(e, &out->src.size);
    out->headers = e->headers;
    out->write_cb = e->write_cb;
    out->write_data = e->write_data_set ? e->write_data : stdout;
    out->header_cb = e->header_cb;
    out->header_data = e->header_data;
    out->failonerror = e->failonerror;
    out->include_header = e->include_header;
    out->errorbuffer = e->errorbuffer;
    out->lim = e->lim;
    out->cbs = e->cbs;
    out->creds = e->creds;
    for (i = 0; i < SHIM_HANDLE_NET; i++)
        if (e->net[i] && !(out->net[i] = strdup(e->net[i])))
            rc = -ENOMEM;
out:
    pthread_mutex_unlock(&lock);
    if (rc)
        shim_handle_view_free(out);
    return rc;
}

void shim_handle_view_free(struct shim_handle_view *v)
{
    size_t i;

    for (i = 0; i < SHIM_HANDLE_NET; i++) {
        free(v->net[i]);
        v->net[i] = NULL;
    }
    free(v->url);
    free(v->custom_request);
    v->url = v->custom_request = NULL;
}

const char *shim_handle_view_method(const struct shim_handle_view *v)
{
    if (v->custom_request)
        return v->custom_request;
    switch (v->method) {
    case SHIM_METHOD_POST:
    case SHIM_METHOD_POST_FORM:
    case SHIM_METHOD_POST_MIME: return "POST";
    case SHIM_METHOD_PUT: return "PUT";
    case SHIM_METHOD_HEAD: return "HEAD";
    default: return "GET";
    }
}

int shim_handles_set_answer(CURL *h, const struct shim_answer_info *a)
{
    struct entry *e;
    int rc = 0;

    pthread_mutex_lock(&lock);
    e = find(h);
    if (!e)
        e = insert(h, SHIM_FLAVOR_OPENSSL);
    if (!e) {
        rc = -ENOMEM;
        goto out;
    }
    clear_answer(&e->ans);
    e->ans.info = *a;
    e->ans.content_type = dup_or_null(a->content_type);
    e->ans.effective_url = dup_or_null(a->effective_url);
    e->ans.scheme = dup_or_null(a->scheme);
    e->ans.info.content_type = e->ans.content_type;
    e->ans.info.effective_url = e->ans.effective_url;
    e->ans.info.scheme = e->ans.scheme;
    e->ans.active = 1;
    __atomic_store_n(&nanswers, nanswers + 1, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&lock);
    return rc;
}

void shim_handles_clear_answer(CURL *h)
{
    struct entry *e;

    pthread_mutex_lock(&lock);
    e = find(h);
    if (e && e->ans.active)
        clear_answer(&e->ans);
    pthread_mutex_unlock(&lock);
}

int shim_handles_get_answer(CURL *h, CURLINFO info, void *out)
{
    struct entry *e;
    const struct shim_answer_info *a;
    int hit = 1;

    if (!out || !__atomic_load_n(&nanswers, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&lock);
    e = find(h);
    if (!e || !e->ans.active) {
        pthread_mutex_unlock(&lock);
        return 0;
    }
    a = &e->ans.info;
    switch (info) {
    case CURLINFO_RESPONSE_CODE:
        *(long *)out = a->response_code;
        break;
    case CURLINFO_HTTP_VERSION:
        *(long *)out = a->http_version;
        break;
    case CURLINFO_CONTENT_TYPE:
        *(const char **)out = a->content_type;
        break;
    case CURLINFO_EFFECTIVE_URL:
        *(const char **)out = a->effective_url;
        break;
    case CURLINFO_SCHEME:
        *(const char **)out = a->scheme;
        break;
    case CURLINFO_EFFECTIVE_METHOD:
        *(const char **)out = a->method;
        break;
    case CURLINFO_PROTOCOL:
        *(long *)out = a->scheme && !strcmp(a->scheme, "HTTPS") ? CURLPROTO_HTTPS
                                                                : CURLPROTO_HTTP;
        break;
    case CURLINFO_TOTAL_TIME:
        *(double *)out = a->total_time;
        break;
    case CURLINFO_TOTAL_TIME_T:
        *(curl_off_t *)out = (curl_off_t)(a->total_time * 1e6);
        break;
    case CURLINFO_SIZE_DOWNLOAD:
        *(double *)out = (double)a->size_download;
        break;
    case CURLINFO_SIZE_DOWNLOAD_T:
        *(curl_off_t *)out = a->size_download;
        break;
    case CURLINFO_CONTENT_LENGTH_DOWNLOAD:
        *(double *)out = (double)a->content_length;
        break;
    case CURLINFO_CONTENT_LENGTH_DOWNLOAD_T:
        *(curl_off_t *)out = a->content_length;
        break;
    case CURLINFO_SIZE_UPLOAD:
        *(double *)out = (double)a->size_upload;
        break;
    case CURLINFO_SIZE_UPLOAD_T:
        *(curl_off_t *)out = a->size_upload;
        break;
    case CURLINFO_HEADER_SIZE:
        *(long *)out = a->header_size;
        break;
    case CURLINFO_REDIRECT_COUNT:
        *(long *)out = 0;
        break;
    case CURLINFO_RETRY_AFTER:
        *(curl_off_t *)out = a->retry_after;
        break;
    default:
        hit = 0;
    }
    pthread_mutex_unlock(&lock);
    return hit;
}

void shim_handles_forget(CURL *h)
{
    pthread_mutex_lock(&lock);
    unlink_entry(h);
    pthread_mutex_unlock(&lock);
}

void shim_handles_reset(CURL *h)
{
    struct entry *e;

    pthread_mutex_lock(&lock);
    e = find(h);
    if (e) {
        enum shim_flavor f = e->flavor;
        struct entry *next = e->next;
        free_opts(e);
        memset(e, 0, sizeof(*e));
        e->h = h;
        e->next = next;
        e->flavor = f;
        init_opts(e);
    }
    pthread_mutex_unlock(&lock);
}

void shim_handles_dup(CURL *from, CURL *to)
{
    struct entry *src, *dst;

    pthread_mutex_lock(&lock);
    src = find(from);
    unlink_entry(to); /* a recycled address must not keep stale state */
    if (src && (dst = insert(to, src->flavor)) != NULL) {
        struct entry *next = dst->next;
        src = find(from); /* insert may have grown the table */
        *dst = *src;
        dst->next = next;
        dst->h = to;
        memset(&dst->ans, 0, sizeof(dst->ans));
        dst->giveback = NULL; /* the source's; preload.c sets the dup's callback back */
        dst->url = dup_or_null(src->url); /* the same URL: its class too */
        dst->url_known = src->url_known && (dst->url || !src->url);
        dst->custom_request = dup_or_null(src->custom_request);
        for (size_t i = 0; i < SHIM_HANDLE_NET; i++)
            dst->net[i] = dup_or_null(src->net[i]);
        dst->copied = NULL;
        if (src->copied) {
            dst->copied = malloc(src->copied_len + 1);
            if (dst->copied)
                memcpy(dst->copied, src->copied, src->copied_len + 1);
        }
        if (src->postfields == src->copied)
            dst->postfields = dst->copied;
    }
    pthread_mutex_unlock(&lock);
}

size_t shim_handles_count(void)
{
    size_t n;

    pthread_mutex_lock(&lock);
    n = nentries;
    pthread_mutex_unlock(&lock);
    return n;
}
