/* handles.c - per-handle recorded options and synthetic answers; see
 * handles.h. A chained hash table keyed by the CURL* address, one global
 * mutex (socket_wrapper's lesson: per-entry locks multiply fork cost). */
#include "curl/handles.h"
#include "base/guard.h"
#include "system/config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct answer {
    int active;
    struct shim_answer_info info;
    char *content_type, *effective_url, *scheme;
};

#define ENTRY_STRINGS 256
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
    /* digests (a credential itself is never kept), allocated when the
     * first one is set non-NULL: most handles carry none, and without
     * them an entry fits malloc's per-thread cache; creds_lost: that
     * allocation failed (the view then fails: no identity is guessed) */
    struct shim_creds *creds;
    int creds_lost;
    char *net[SHIM_HANDLE_NET]; /* CA file, CA path, proxy, no-proxy */
    struct answer ans;
    /* Room for the entry's own string copies (URL, custom request, net),
     * used from the start and never reclaimed before a reset; what does
     * not fit is malloc'd (entry_dup): a handle's URL and CA file cost no
     * allocation of their own. */
    size_t strings_used;
    char strings[ENTRY_STRINGS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The entry this thread last recorded an option into, found in O(1) and
 * without the lock by the next setopt on the same handle (a program sets
 * some thirty recorded options on a handle in a row): valid while no
 * entry was freed since (gen, bumped under the lock by every free).
 * Writing an entry without the lock is safe because only calls on its own
 * handle free it or read the fields setopt writes, and libcurl's rules
 * forbid using one handle from two threads at once; the table's chains
 * (e->next) are only ever changed under the lock. The pass-through
 * check at perform (shim_handles_begin) reads the entry the same way. */
static unsigned long gen;
static const char no_handle; /* last.h until an entry is cached: no handle's address */
static __thread struct {
    CURL *h;
    struct entry *e;
    unsigned long gen;
} last = {(CURL *)(uintptr_t)&no_handle, NULL, 0};
static struct entry **buckets;
static size_t nbuckets, nentries;
/* How many entries each of NCLASSES classes of handle addresses holds
 * (changed under the lock): a handle whose class holds none has no
 * entry, which shim_handles_forget tells without the lock (every handle
 * a program makes is forgotten when made, and libcurl's own, which have
 * none, when cleaned up). A handle with an entry was recorded before its
 * owner's call, so the count that call reads includes it. */
#define NCLASSES 64
static unsigned long nclass[NCLASSES];
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

unsigned long shim_handles_nanswers; /* see handles.h */

static void clear_answer(struct answer *a)
{
    if (a->active)
        __atomic_store_n(&shim_handles_nanswers, shim_handles_nanswers - 1, __ATOMIC_RELAXED);
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

/* A copy of s (NULL: none) that e owns, in its own room when it fits. */
static char *entry_dup(struct entry *e, const char *s)
{
    size_t n;

    if (!s)
        return NULL;
    n = strlen(s) + 1;
    if (n <= ENTRY_STRINGS - e->strings_used) {
        char *p = e->strings + e->strings_used;
        memcpy(p, s, n);
        e->strings_used += n;
        return p;
    }
    return strdup(s);
}

/* Frees a string e owns (entry_dup, or a malloc'd one). */
static void entry_free(struct entry *e, char *p)
{
    if (p && (uintptr_t)p - (uintptr_t)e->strings >= ENTRY_STRINGS)
        free(p);
}

/* free(p), without the call for NULL: most of an entry's are. */
static inline void free_set(void *p)
{
    if (p)
        free(p);
}

static void free_opts(struct entry *e)
{
    size_t i;

    for (i = 0; i < SHIM_HANDLE_NET; i++)
        entry_free(e, e->net[i]);
    entry_free(e, e->url);
    entry_free(e, e->custom_request);
    free_set(e->copied);
    free_set(e->creds);
    free_set(e->giveback);
    e->giveback = NULL;
    if (e->ans.active) /* an answer not active holds nothing */
        clear_answer(&e->ans);
}

/* Entries of handles cleaned up, kept (under the lock) for the next
 * handles, at most SPARE_MAX: a program that makes a handle a transfer
 * allocates no entry after its first. */
#define SPARE_MAX 4
static struct entry *spare;
static size_t nspare;

static struct entry *insert(CURL *h, enum shim_flavor f)
{
    struct entry *e;
    size_t b;

    pthread_once(&atfork_once, register_atfork);
    if (nentries >= nbuckets && grow() < 0 && !nbuckets)
        return NULL;
    if ((e = spare) != NULL) {
        spare = e->next;
        nspare--;
        memset(e, 0, offsetof(struct entry, strings)); /* its strings' room is unused */
    } else if (!(e = calloc(1, sizeof(*e)))) {
        return NULL;
    }
    e->h = h;
    e->flavor = f;
    init_opts(e);
    b = hash(h, nbuckets);
    e->next = buckets[b];
    buckets[b] = e;
    nentries++;
    b = hash(h, NCLASSES);
    __atomic_store_n(&nclass[b], nclass[b] + 1, __ATOMIC_RELAXED);
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
            if (nspare < SPARE_MAX) {
                e->next = spare;
                spare = e;
                nspare++;
            } else {
                free(e);
            }
            nentries--;
            __atomic_store_n(&nclass[hash(h, NCLASSES)], nclass[hash(h, NCLASSES)] - 1,
                             __ATOMIC_RELAXED);
            __atomic_store_n(&gen, gen + 1, __ATOMIC_RELEASE);
            return;
        }
    }
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* A string option's copy replaces the one before (NULL: unset). Out of
 * line, so that recording a plain value saves no registers. */
static __attribute__((noinline)) CURLcode set_string(struct entry *e, char **slot, const char *s)
{
    entry_free(e, *slot);
    *slot = entry_dup(e, s);
    return CURLE_OK;
}

/* A CURLOPT_RESOLVE list as one string, its entries joined by '\n' (an
 * entry holding one is left out), at most RESOLVE_MAX bytes; NULL for an
 * empty list (or no memory: the option then does not apply). */
#define RESOLVE_MAX 16384
static __attribute__((noinline)) char *joined(const struct curl_slist *l)
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

/* COPYPOSTFIELDS: src copied at the size in force (NULL: none); the
 * method becomes POST. */
static __attribute__((noinline)) CURLcode copy_postfields(struct entry *e, const char *src)
{
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
    return CURLE_OK;
}

/* POSTFIELDSIZE(_LARGE) n. As libcurl: a size larger than the one in
 * force drops an earlier COPYPOSTFIELDS copy (any size, after an unsized
 * copy). Out of line, as every call apply() makes: its stores need no
 * frame. */
static __attribute__((noinline)) CURLcode set_postsize(struct entry *e, curl_off_t n)
{
    if (e->copied && e->postfields == e->copied && n > e->postsize) {
        free(e->copied);
        e->copied = NULL;
        e->postfields = NULL;
    }
    e->postsize = n;
    return CURLE_OK;
}

/* CURLOPT_RESOLVE's list l, as net[4]. */
static __attribute__((noinline)) CURLcode set_resolve(struct entry *e, const struct curl_slist *l)
{
    entry_free(e, e->net[4]);
    e->net[4] = joined(l);
    return CURLE_OK;
}

/* The options codeshim records: SHIM_OPT_RECORD for the ones apply()
 * stores, by concern, SHIM_OPT_CRED for the credentials
 * (SHIM_CRED_OPTIONS: kept as digests, identity.h). */
#define RECORDED_OPTIONS(R)                                                   \
    /* where the request goes */                                              \
    R(CURLOPT_URL) R(CURLOPT_CUSTOMREQUEST) R(CURLOPT_HTTPHEADER)             \
    /* an in-memory body */                                                   \
    R(CURLOPT_POSTFIELDS) R(CURLOPT_COPYPOSTFIELDS) R(CURLOPT_POSTFIELDSIZE)  \
    R(CURLOPT_POSTFIELDSIZE_LARGE)                                            \
    /* the method */                                                          \
    R(CURLOPT_POST) R(CURLOPT_HTTPGET) R(CURLOPT_NOBODY) R(CURLOPT_UPLOAD)    \
    R(CURLOPT_HTTPPOST) R(CURLOPT_MIMEPOST)                                   \
    /* a body read through callbacks */                                       \
    R(CURLOPT_READFUNCTION) R(CURLOPT_READDATA) R(CURLOPT_SEEKFUNCTION)       \
    R(CURLOPT_SEEKDATA) R(CURLOPT_IOCTLFUNCTION) R(CURLOPT_IOCTLDATA)         \
    R(CURLOPT_INFILESIZE) R(CURLOPT_INFILESIZE_LARGE) R(CURLOPT_CURLU)        \
    /* delivery */                                                            \
    R(CURLOPT_WRITEFUNCTION) R(CURLOPT_WRITEDATA) R(CURLOPT_HEADERFUNCTION)   \
    R(CURLOPT_HEADERDATA) R(CURLOPT_FAILONERROR) R(CURLOPT_HEADER)            \
    R(CURLOPT_ERRORBUFFER)                                                    \
    /* limits and progress */                                                 \
    R(CURLOPT_TIMEOUT) R(CURLOPT_TIMEOUT_MS) R(CURLOPT_NOPROGRESS)            \
    R(CURLOPT_XFERINFOFUNCTION) R(CURLOPT_PROGRESSFUNCTION)                   \
    R(CURLOPT_XFERINFODATA)                                                   \
    /* what codeshim's own calls honour */                                    \
    R(CURLOPT_CAINFO) R(CURLOPT_CAPATH) R(CURLOPT_PROXY) R(CURLOPT_NOPROXY)   \
    R(CURLOPT_RESOLVE)                                                        \
    /* the connection callbacks relay.c runs on the program's thread */       \
    R(CURLOPT_OPENSOCKETFUNCTION) R(CURLOPT_OPENSOCKETDATA)                   \
    R(CURLOPT_SOCKOPTFUNCTION) R(CURLOPT_SOCKOPTDATA)                         \
    R(CURLOPT_CLOSESOCKETFUNCTION) R(CURLOPT_CLOSESOCKETDATA)                 \
    R(CURLOPT_PREREQFUNCTION) R(CURLOPT_PREREQDATA)                           \
    R(CURLOPT_RESOLVER_START_FUNCTION) R(CURLOPT_RESOLVER_START_DATA)         \
    R(CURLOPT_SSL_CTX_FUNCTION) R(CURLOPT_SSL_CTX_DATA)

/* The recorded options' numbers, 1 up in the list's order: what
 * shim_handles_optinfo holds above an option's kind, and what apply()
 * switches on (one jump). */
#define INDEX(o) I_##o,
enum { I_NONE, RECORDED_OPTIONS(INDEX) I_CRED, I_END }; /* I_CRED: every credential's */
#undef INDEX
_Static_assert(I_END <= 64, "a recorded option's number fits shim_handles_optinfo's six bits");
_Static_assert(I_CURLOPT_CAPATH == I_CURLOPT_CAINFO + 1 && I_CURLOPT_PROXY == I_CURLOPT_CAINFO + 2 &&
                   I_CURLOPT_NOPROXY == I_CURLOPT_CAINFO + 3,
               "CAINFO, CAPATH, PROXY and NOPROXY are net[0..3]");

/* Records the recorded option numbered idx into e: one switch over the
 * numbers, by concern. CURLE_OK (the setopt wrapper's answer
 * then) from every case, a string copied or a body dropped by a call out
 * of line that returns it: a tail call, storing needs no frame. */
static inline __attribute__((always_inline)) CURLcode apply(struct entry *e, unsigned idx,
                                                            union shim_optval v)
{
    switch (idx) {
    /* Where the request goes and what it is called: URL, custom request,
     * headers. */
    case I_CURLOPT_URL:
        e->url_known = 0;
        return set_string(e, &e->url, v.p);
    case I_CURLOPT_CUSTOMREQUEST:
        return set_string(e, &e->custom_request, v.p);
    case I_CURLOPT_HTTPHEADER:
        e->headers = v.p;
        return CURLE_OK;
    /* An in-memory body: POSTFIELDS (borrowed), COPYPOSTFIELDS (copied at
     * the size in force) and that size; either body makes the method POST. */
    case I_CURLOPT_POSTFIELDS:
        e->postfields = v.p;
        e->method = SHIM_METHOD_POST;
        return CURLE_OK;
    case I_CURLOPT_COPYPOSTFIELDS:
        return copy_postfields(e, v.p);
    case I_CURLOPT_POSTFIELDSIZE:
        return set_postsize(e, v.l);
    case I_CURLOPT_POSTFIELDSIZE_LARGE:
        return set_postsize(e, v.off);
    /* The method, moving between methods as libcurl's setopt.c does. */
    case I_CURLOPT_POST:
        e->method = v.l ? SHIM_METHOD_POST : SHIM_METHOD_GET;
        return CURLE_OK;
    case I_CURLOPT_HTTPGET:
        if (v.l)
            e->method = SHIM_METHOD_GET;
        return CURLE_OK;
    case I_CURLOPT_NOBODY:
        if (v.l)
            e->method = SHIM_METHOD_HEAD;
        else if (e->method == SHIM_METHOD_HEAD)
            e->method = SHIM_METHOD_GET;
        return CURLE_OK;
    case I_CURLOPT_UPLOAD:
        e->method = v.l ? SHIM_METHOD_PUT : SHIM_METHOD_GET;
        return CURLE_OK;
    case I_CURLOPT_HTTPPOST:
        e->method = SHIM_METHOD_POST_FORM;
        return CURLE_OK;
    case I_CURLOPT_MIMEPOST:
        e->method = SHIM_METHOD_POST_MIME;
        return CURLE_OK;
    /* A body libcurl would read through the program's callbacks, and a
     * CURLOPT_CURLU URL. */
    case I_CURLOPT_READFUNCTION:
        e->src.read_cb = (curl_read_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_READDATA:
        e->src.read_data = v.p;
        return CURLE_OK;
    case I_CURLOPT_SEEKFUNCTION:
        e->src.seek_cb = (curl_seek_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_SEEKDATA:
        e->src.seek_data = v.p;
        return CURLE_OK;
    case I_CURLOPT_IOCTLFUNCTION:
        e->src.ioctl_cb = (curl_ioctl_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_IOCTLDATA:
        e->src.ioctl_data = v.p;
        return CURLE_OK;
    case I_CURLOPT_INFILESIZE:
        e->infilesize = v.l;
        return CURLE_OK;
    case I_CURLOPT_INFILESIZE_LARGE:
        e->infilesize = v.off;
        return CURLE_OK;
    case I_CURLOPT_CURLU:
        e->curlu = v.p;
        return CURLE_OK;
    /* How the answer is handed to the program: write and header callbacks,
     * failure and header options, the error buffer. */
    case I_CURLOPT_WRITEFUNCTION:
        e->write_cb = (shim_write_fn)v.fn;
        return CURLE_OK;
    case I_CURLOPT_WRITEDATA:
        e->write_data = v.p;
        e->write_data_set = 1;
        return CURLE_OK;
    case I_CURLOPT_HEADERFUNCTION:
        e->header_cb = (shim_write_fn)v.fn;
        return CURLE_OK;
    case I_CURLOPT_HEADERDATA:
        e->header_data = v.p;
        return CURLE_OK;
    case I_CURLOPT_FAILONERROR:
        e->failonerror = v.l;
        return CURLE_OK;
    case I_CURLOPT_HEADER:
        e->include_header = v.l;
        return CURLE_OK;
    case I_CURLOPT_ERRORBUFFER:
        e->errorbuffer = v.p;
        return CURLE_OK;
    /* What bounds and reports the transfer (limits.h). */
    case I_CURLOPT_TIMEOUT:
        e->lim.timeout_ms = v.l > 0 && v.l < LONG_MAX / 1000 ? v.l * 1000 : v.l > 0 ? LONG_MAX : 0;
        return CURLE_OK;
    case I_CURLOPT_TIMEOUT_MS:
        e->lim.timeout_ms = v.l > 0 ? v.l : 0;
        return CURLE_OK;
    case I_CURLOPT_NOPROGRESS:
        e->lim.noprogress = v.l != 0;
        return CURLE_OK;
    case I_CURLOPT_XFERINFOFUNCTION:
        e->lim.xferinfo = (curl_xferinfo_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_PROGRESSFUNCTION:
        e->lim.progress = (curl_progress_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_XFERINFODATA: /* the same option as PROGRESSDATA */
        e->lim.progress_data = v.p;
        return CURLE_OK;
    /* What codeshim's own calls honour (CA, proxy, resolve) and the
     * connection callbacks relay.c runs on the program's thread. */
    case I_CURLOPT_CAINFO: case I_CURLOPT_CAPATH: case I_CURLOPT_PROXY: case I_CURLOPT_NOPROXY: {
        size_t i = idx - I_CURLOPT_CAINFO; /* net[]'s order (handles.h) */
        if (v.p || e->net[i]) /* the curl CLI unsets the proxy on every handle */
            return set_string(e, &e->net[i], v.p);
        return CURLE_OK;
    }
    case I_CURLOPT_OPENSOCKETFUNCTION: e->cbs.open = (curl_opensocket_callback)v.fn; return CURLE_OK;
    case I_CURLOPT_OPENSOCKETDATA: e->cbs.open_data = v.p; return CURLE_OK;
    case I_CURLOPT_SOCKOPTFUNCTION: e->cbs.sockopt = (curl_sockopt_callback)v.fn; return CURLE_OK;
    case I_CURLOPT_SOCKOPTDATA: e->cbs.sockopt_data = v.p; return CURLE_OK;
    case I_CURLOPT_CLOSESOCKETFUNCTION: e->cbs.close = (curl_closesocket_callback)v.fn; return CURLE_OK;
    case I_CURLOPT_CLOSESOCKETDATA: e->cbs.close_data = v.p; return CURLE_OK;
    case I_CURLOPT_PREREQFUNCTION: e->cbs.prereq = (curl_prereq_callback)v.fn; return CURLE_OK;
    case I_CURLOPT_PREREQDATA: e->cbs.prereq_data = v.p; return CURLE_OK;
    case I_CURLOPT_RESOLVER_START_FUNCTION:
        e->cbs.resolver = (curl_resolver_start_callback)v.fn;
        return CURLE_OK;
    case I_CURLOPT_RESOLVER_START_DATA: e->cbs.resolver_data = v.p; return CURLE_OK;
    case I_CURLOPT_SSL_CTX_FUNCTION: e->cbs.ssl_ctx = (curl_ssl_ctx_callback)v.fn; return CURLE_OK;
    case I_CURLOPT_SSL_CTX_DATA: e->cbs.ssl_ctx_data = v.p; return CURLE_OK;
    case I_CURLOPT_RESOLVE:
        return set_resolve(e, v.p);
    default:
        return CURLE_OK;
    }
}

/* Two constant tables with one slot per option (SHIM_OPT_SLOT: its low
 * ten bits mixed with those from the ninth up, where libcurl's type base,
 * a multiple of 10000, shows; no two recorded options share a slot): the
 * option that has the slot (0: none), and its kind and number. The check
 * in every setopt wrapper is one load and one compare (shim_handles_wants).
 * Two options in one slot would initialise it twice, which the compiler
 * rejects (-Werror=override-init, part of -Wextra). */
#define KEY(o) [SHIM_OPT_SLOT(o)] = (uint32_t)(o),
#define CRED_KEY(o, slot, second, blob) KEY(o)
const uint32_t shim_handles_optkey[SHIM_OPT_SLOTS] = {
    RECORDED_OPTIONS(KEY) SHIM_CRED_OPTIONS(CRED_KEY)
};
#define INFO(o) [SHIM_OPT_SLOT(o)] = (uint8_t)(I_##o << 2 | SHIM_OPT_RECORD),
#define CRED_INFO(o, slot, second, blob) [SHIM_OPT_SLOT(o)] = I_CRED << 2 | SHIM_OPT_CRED,
const uint8_t shim_handles_optinfo[SHIM_OPT_SLOTS] = {
    RECORDED_OPTIONS(INFO) SHIM_CRED_OPTIONS(CRED_INFO)
};
#undef KEY
#undef CRED_KEY
#undef INFO
#undef CRED_INFO

/* A credential's digest into e's, allocated by the first one. */
static void store_cred(struct entry *e, const struct shim_cred_update *cred)
{
    if (!e->creds && !(e->creds = calloc(1, sizeof(*e->creds)))) {
        e->creds_lost = 1;
        return;
    }
    shim_identity_apply(e->creds, cred);
}

/* A credential option into e, as a digest (a NULL clears). */
static __attribute__((noinline)) CURLcode record_cred(struct entry *e, CURLoption opt,
                                                      union shim_optval v)
{
    struct shim_cred_update cred;

    shim_identity_digest(&cred, opt, v.p);
    store_cred(e, &cred);
    return CURLE_OK;
}

/* The first recorded option of a run on h (another handle's, or an entry
 * freed since): its entry found, or made, under the lock. */
static __attribute__((noinline)) void record_locked(CURL *h, enum shim_flavor f, CURLoption opt,
                                                    union shim_optval v, int create, unsigned info)
{
    struct shim_cred_update cred;
    struct entry *e;
    int is_cred = (info & 3) == SHIM_OPT_CRED;

    /* disabled, codeshim makes no entry, so no setopt finds one in last */
    if (!h || shim_config()->disabled)
        return;
    if (is_cred && v.p)
        shim_identity_digest(&cred, opt, v.p); /* hashed before the lock, not under it */
    pthread_mutex_lock(&lock);
    e = nclass[hash(h, NCLASSES)] ? find(h) : NULL; /* a new handle's class is often empty */
    if (!e && create)
        e = insert(h, f);
    if (e) {
        last.h = h;
        last.e = e;
        last.gen = gen;
        if (!is_cred) {
            (void)apply(e, info >> 2, v);
        } else if (v.p || e->creds) {
            if (!v.p)
                shim_identity_digest(&cred, opt, NULL);
            store_cred(e, &cred);
        }
    }
    pthread_mutex_unlock(&lock);
}

/* The entry this thread recorded into last when it is h's (without the
 * lock), else NULL. */
static inline struct entry *last_entry(CURL *h)
{
    return h == last.h && __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == last.gen ? last.e : NULL;
}

/* The options whose zero (0 or NULL) stores zero into one field of an
 * entry and changes nothing else, by number: that field's offset + 1 (0:
 * not such an option; a credential's field is the pointer to the
 * digests, NULL until one was set). A zero set while the field is zero
 * changes nothing, and the setopt wrapper forwards it without storing:
 * the curl CLI sets ten of them on every handle (no credentials, no
 * proxy, no custom request, no timeout, ...). */
#define ZERO_FIELD(f) (uint16_t)(offsetof(struct entry, f) + 1)
static const uint16_t zero_field[I_END] = {
    [I_CURLOPT_CUSTOMREQUEST] = ZERO_FIELD(custom_request),
    [I_CURLOPT_HTTPHEADER] = ZERO_FIELD(headers),
    [I_CURLOPT_FAILONERROR] = ZERO_FIELD(failonerror),
    [I_CURLOPT_HEADER] = ZERO_FIELD(include_header),
    [I_CURLOPT_ERRORBUFFER] = ZERO_FIELD(errorbuffer),
    [I_CURLOPT_TIMEOUT] = ZERO_FIELD(lim.timeout_ms),
    [I_CURLOPT_TIMEOUT_MS] = ZERO_FIELD(lim.timeout_ms),
    [I_CURLOPT_CAINFO] = ZERO_FIELD(net[0]),
    [I_CURLOPT_CAPATH] = ZERO_FIELD(net[1]),
    [I_CURLOPT_PROXY] = ZERO_FIELD(net[2]),
    [I_CURLOPT_NOPROXY] = ZERO_FIELD(net[3]),
    [I_CRED] = ZERO_FIELD(creds),
};
#undef ZERO_FIELD
_Static_assert(sizeof(((struct entry *)0)->custom_request) == 8 &&
                   sizeof(((struct entry *)0)->headers) == 8 &&
                   sizeof(((struct entry *)0)->failonerror) == 8 &&
                   sizeof(((struct entry *)0)->include_header) == 8 &&
                   sizeof(((struct entry *)0)->errorbuffer) == 8 &&
                   sizeof(((struct entry *)0)->lim.timeout_ms) == 8 &&
                   sizeof(((struct entry *)0)->net[0]) == 8 &&
                   sizeof(((struct entry *)0)->creds) == 8,
               "zero_field's fields are read as 8 bytes");

/* Whether a zero for the option numbered idx changes nothing in e. */
static inline int zero_is_kept(const struct entry *e, unsigned idx)
{
    uint64_t x;
    unsigned off = zero_field[idx];

    if (!off)
        return 0;
    memcpy(&x, (const char *)e + off - 1, sizeof(x));
    return x == 0;
}

/* A recorded option (in its slot s of the tables) into h's entry e,
 * found without the lock; a NULL credential on a handle that never had
 * one changes nothing (the curl CLI clears five on every handle). Out of
 * line and ending in its calls (each returns CURLE_OK, the wrapper's
 * answer then): the setopt wrapper keeps only these three across its
 * call into libcurl, and storing needs no frame. */
static __attribute__((noinline)) CURLcode stored(struct entry *e, size_t s, union shim_optval v)
{
    unsigned idx = shim_handles_optinfo[s] >> 2;

    if (idx < I_CRED)
        return apply(e, idx, v);
    if (v.p || e->creds)
        return record_cred(e, (CURLoption)shim_handles_optkey[s], v);
    return CURLE_OK;
}

void shim_handles_record(CURL *h, enum shim_flavor f, CURLoption opt,
                         union shim_optval v, int create)
{
    unsigned s = SHIM_OPT_SLOT(opt), info = shim_handles_optinfo[s];
    struct entry *e;

    if (shim_handles_optkey[s] != (uint32_t)opt || !(info & 3))
        return;
    if ((e = last_entry(h)) != NULL)
        (void)stored(e, s, v);
    else
        record_locked(h, f, opt, v, create, info);
}

/* shim_handles_setopt for a handle whose entry is not in last. */
static __attribute__((noinline)) CURLcode setopt_locked(const struct shim_curl_api *api, CURL *h,
                                                        CURLoption opt, union shim_optval v,
                                                        const void *ret, unsigned info)
{
    CURLcode rc = shim_real_setopt(api, h, opt, v);

    if (rc == CURLE_OK)
        record_locked(h, api->flavor, opt, v,
                      !shim_guard_active() || !shim_real_from_libcurl(api, ret), info);
    return rc;
}

/* A run of recorded options on one handle (a program sets some thirty in
 * a row) finds its entry in last before libcurl is called (nothing there
 * changes: libcurl's setopt calls nothing of ours) and stores the value:
 * no lock, no table, no allocation, and across the call only the entry,
 * the value and the slot to keep. Whether a handle libcurl made itself
 * may get an entry (not: only one already known is recorded) is asked
 * only when one is to be made. */
CURLcode shim_handles_setopt(CURL *h, CURLoption opt, union shim_optval v,
                             const struct shim_curl_api *api, size_t s, const void *ret)
{
    struct entry *e;
    CURLcode rc;

    /* (option 0 matches an empty slot: libcurl refuses it, and apply()
     * stores nothing for its number, I_NONE) */
    if (h != last.h || __atomic_load_n(&gen, __ATOMIC_ACQUIRE) != last.gen)
        return setopt_locked(api, h, opt, v, ret, shim_handles_optinfo[s]);
    e = last.e; /* never NULL when last.h is a handle's */
    if (!v.off && zero_is_kept(e, shim_handles_optinfo[s] >> 2))
        return shim_real_setopt(api, h, opt, v); /* nothing to store: libcurl's answer */
    if ((rc = shim_real_setopt(api, h, opt, v)) != CURLE_OK)
        return rc;
    return stored(e, s, v);
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
        entry_free(e, e->url);
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
    int locked = 0;

    *read_body = 0;
    *stale = NULL;
    /* h's entry is in last when this thread just set h's options: read
     * without the lock, as setopt writes it. The lock for the table's
     * look-up, a CURLU's URL, or an answer to drop (their count is
     * every handle's). */
    e = last_entry(h);
    if (!e || e->curlu || e->ans.active) {
        locked = 1;
        pthread_mutex_lock(&lock);
        e = find(h);
        if (e && e->curlu) { /* read without the lock, then looked up again */
            pthread_mutex_unlock(&lock);
            refresh_curlu(h);
            pthread_mutex_lock(&lock);
            e = find(h);
        }
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
    if (locked)
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
    if (e->creds)
        out->creds = *e->creds;
    if (e->creds_lost)
        rc = -ENOMEM;
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
    __atomic_store_n(&shim_handles_nanswers, shim_handles_nanswers + 1, __ATOMIC_RELEASE);
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

    if (!out || !shim_handles_answering())
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
    if (!__atomic_load_n(&nclass[hash(h, NCLASSES)], __ATOMIC_RELAXED))
        return;
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
        dst->strings_used = 0; /* its strings are its own copies */
        for (size_t i = 0; i < SHIM_HANDLE_NET; i++)
            dst->net[i] = dup_or_null(src->net[i]);
        dst->creds = NULL;
        if (src->creds && (dst->creds = malloc(sizeof(*dst->creds))) != NULL)
            *dst->creds = *src->creds;
        dst->creds_lost = src->creds_lost || (src->creds && !dst->creds);
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
