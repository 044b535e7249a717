/* handles.h - what codeshim knows about each CURL* handle.
 *
 * libcurl has no option getter, so the options codeshim needs later (URL,
 * method, body, headers, callbacks, error buffer) are recorded as the
 * program sets them; credential options only as digests (identity.h).
 * The table also holds the answer of a synthetic
 * transfer so curl_easy_getinfo can report it. State follows
 * curl_easy_reset, curl_easy_duphandle and curl_easy_cleanup; one mutex
 * guards the whole table and is never held while calling out. Options
 * codeshim does not record cost the setopt wrapper one table compare
 * (shim_handles_optkey); a recorded one is one call here
 * (shim_handles_setopt), where a run of recorded options on one handle
 * finds its entry without the lock, as the pass-through check at perform
 * does (handles.c).
 *
 * Memory the program gave libcurl (POSTFIELDS, HTTPHEADER lists, userdata,
 * ERRORBUFFER) is borrowed, never freed or written except ERRORBUFFER on a
 * failed synthetic transfer, exactly as libcurl would. */
#ifndef SHIM_HANDLES_H
#define SHIM_HANDLES_H

#include "api/classify.h"
#include "api/identity.h"
#include "system/real.h"

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

enum shim_method {
    SHIM_METHOD_GET = 0,
    SHIM_METHOD_POST,      /* POSTFIELDS / COPYPOSTFIELDS / POST=1 */
    SHIM_METHOD_POST_FORM, /* HTTPPOST */
    SHIM_METHOD_POST_MIME, /* MIMEPOST */
    SHIM_METHOD_PUT,       /* UPLOAD */
    SHIM_METHOD_HEAD,      /* NOBODY */
};

typedef size_t (*shim_write_fn)(char *, size_t, size_t, void *);

/* A request body that libcurl would read through the program's read
 * callback (READFUNCTION; libcurl's fread on READDATA when none), with
 * the program's rewind callbacks (SEEKFUNCTION, IOCTLFUNCTION). */
struct shim_body_cb {
    curl_read_callback read_cb; /* NULL: fread(buf, 1, n, read_data) */
    void *read_data;            /* stdin unless set */
    curl_seek_callback seek_cb;
    void *seek_data;
    curl_ioctl_callback ioctl_cb;
    void *ioctl_data;
    curl_off_t size;            /* POSTFIELDSIZE or INFILESIZE; -1: unknown */
};

#define SHIM_HANDLE_NET 5

/* What bounds and reports a transfer (limits.h): CURLOPT_TIMEOUT(_MS)
 * as milliseconds (0: none), NOPROGRESS, XFERINFOFUNCTION or
 * PROGRESSFUNCTION and their data (XFERINFODATA is PROGRESSDATA). */
struct shim_handle_limits {
    long timeout_ms;
    int noprogress;
    curl_xferinfo_callback xferinfo;
    curl_progress_callback progress;
    void *progress_data;
};

/* The program's connection callbacks and their data: what libcurl calls
 * on the thread that drives a transfer while it connects (a multi
 * transfer's model calls reach them through relay.h, on the same). */
struct shim_handle_cbs {
    curl_opensocket_callback open;
    void *open_data;
    curl_sockopt_callback sockopt;
    void *sockopt_data;
    curl_closesocket_callback close;
    void *close_data;
    curl_prereq_callback prereq;
    void *prereq_data;
    curl_resolver_start_callback resolver;
    void *resolver_data;
    curl_ssl_ctx_callback ssl_ctx;
    void *ssl_ctx_data;
};

/* A copy of a handle's recorded options, taken at perform time. url and
 * custom_request (and net) are owned by the view (shim_handle_view_free); body and
 * headers are borrowed and valid while the perform that took the view
 * runs. */
struct shim_handle_view {
    enum shim_flavor flavor;
    char *url;
    char *custom_request;
    int method;
    const char *body; /* NULL when the body is not in memory */
    size_t body_len;
    /* body is codeshim's copy of a COPYPOSTFIELDS that had no size: all
     * libcurl knows of its length is strlen (upstream.c) */
    int body_copied_unsized;
    /* 1: libcurl would read the body through src (no POSTFIELDS); body
     * is then NULL until codeshim has read it (intercept.c) */
    int body_from_cb;
    struct shim_body_cb src;
    const struct curl_slist *headers;
    shim_write_fn write_cb; /* NULL = libcurl's default fwrite */
    void *write_data;       /* default stdout */
    shim_write_fn header_cb;
    void *header_data;
    long failonerror;
    long include_header;
    char *errorbuffer;
    struct shim_handle_limits lim;
    struct shim_handle_cbs cbs;
    struct shim_creds creds; /* credential options, as digests */
    /* CURLOPT_CAINFO, _CAPATH, _PROXY, _NOPROXY and _RESOLVE (its entries
     * joined by '\n') (owned; NULL: not set): what codeshim's own calls to
     * a sandbox backend honour (http.h) */
    char *net[SHIM_HANDLE_NET];
};

/* What a synthetic transfer answered; strings are copied in. */
struct shim_answer_info {
    long response_code;
    long http_version; /* CURL_HTTP_VERSION_* */
    const char *content_type;
    const char *effective_url;
    const char *scheme; /* "HTTP" / "HTTPS", as libcurl reports it */
    double total_time;  /* seconds */
    curl_off_t size_download;
    curl_off_t size_upload;
    long header_size;
    curl_off_t retry_after; /* Retry-After in seconds (0: none), as libcurl's */
    curl_off_t content_length; /* the answer's Content-Length, -1: none (SSE) */
    char method[16];        /* the request's, for CURLINFO_EFFECTIVE_METHOD */
};

/* Whether codeshim records option opt: 0 (most options a program sets:
 * the setopt wrapper then does nothing more), SHIM_OPT_RECORD or
 * SHIM_OPT_CRED (a credential, kept as a digest). Two constant tables
 * with one slot per option (handles.c says how they are laid out): the
 * check in every setopt wrapper is one load and one compare, and one
 * more load for an option that is recorded. */
#define SHIM_OPT_SLOTS 1024
/* in 64 bits: an index the wrapper uses as it is */
#define SHIM_OPT_SLOT(o) \
    (((uint64_t)(uint32_t)(o) ^ (uint64_t)(uint32_t)(o) >> 9) & (SHIM_OPT_SLOTS - 1))
enum { SHIM_OPT_RECORD = 1, SHIM_OPT_CRED = 2 };
/* [slot]: the recorded option that has it, 0 when none does */
extern const uint32_t shim_handles_optkey[SHIM_OPT_SLOTS];
/* [slot]: its kind (the low 2 bits) and handles.c's concern (above) */
extern const uint8_t shim_handles_optinfo[SHIM_OPT_SLOTS];
static inline int shim_handles_wants(CURLoption opt)
{
    unsigned s = SHIM_OPT_SLOT(opt);

    return shim_handles_optkey[s] == (uint32_t)opt ? shim_handles_optinfo[s] & 3 : 0;
}

/* curl_easy_setopt of an option in the tables' slot s (SHIM_OPT_SLOT(opt),
 * whose shim_handles_optkey is opt: one the setopt wrapper found there):
 * forwards it to api's libcurl and, when libcurl took it and codeshim is
 * not disabled, records it for h as shim_handles_record does; libcurl's
 * answer. ret is the setopt wrapper's return address: a call from
 * libcurl's own code (shim_real_from_libcurl, with the guard up) records
 * only for a handle already known. The whole recorded setopt in one call
 * (handles.c), its first three libcurl's own, in the registers they came
 * in. */
CURLcode shim_handles_setopt(CURL *h, CURLoption opt, union shim_optval v,
                             const struct shim_curl_api *api, size_t s, const void *ret);
/* Records option opt for h if it is one codeshim needs. create=0 records
 * only for a handle already in the table (used while the guard is up). */
void shim_handles_record(CURL *h, enum shim_flavor f, CURLoption opt,
                         union shim_optval v, int create);
/* The start of every perform: drops h's last synthetic answer and tells
 * whether the transfer may be ours, by shim_classify_may_be_ours and the
 * URL's class kept when it was set (SHIM_API_NONE for a handle with no
 * options recorded), under one lock
 * and copying nothing: the whole pass-through check. A POST whose body
 * libcurl would get from the program's read callback may be ours until
 * read: then *read_body is 1 (else 0). A CURLOPT_CURLU handle's URL is
 * read from it here, as libcurl reads it when a transfer starts.
 * *stale receives a give-back (shim_handles_set_giveback) still on h
 * from a transfer that ended without the program's calls restoring it,
 * which the caller restores and frees; NULL when none. */
enum shim_api shim_handles_begin(CURL *h, size_t max_body, int *read_body, void **stale);

/* intercept.c's record of a body it read and gave back to libcurl through
 * its own read callback on h (one allocation, freed with free() by the
 * table when h is cleaned up or reset): stores p (NULL: none, which
 * takes it out) and returns the one it replaces (p itself when h is not
 * in the table). */
void *shim_handles_set_giveback(CURL *h, void *p);
/* The body callbacks recorded for h now (0), or -ENOENT. */
int shim_handles_body_cb(CURL *h, struct shim_body_cb *out);
/* Fills *out (0) or -ENOENT when nothing was recorded for h; -ENOMEM. */
int shim_handles_view(CURL *h, struct shim_handle_view *out);
void shim_handle_view_free(struct shim_handle_view *v);
/* The method libcurl will send for v: its custom request, else the one
 * its options set ("GET", "POST", "PUT", "HEAD"). */
const char *shim_handle_view_method(const struct shim_handle_view *v);

/* Synthetic answers for curl_easy_getinfo. set copies a; clear drops it
 * (every new perform); get returns 1 and writes *out when info is one
 * codeshim answers for h, else 0 (the caller asks real libcurl). */
int shim_handles_set_answer(CURL *h, const struct shim_answer_info *a);
void shim_handles_clear_answer(CURL *h);
int shim_handles_get_answer(CURL *h, CURLINFO info, void *out);
/* How many handles hold a synthetic answer (changed under the table's
 * lock): while none does, as in a program codeshim only passes through,
 * the getinfo wrapper asks libcurl at once, one load. */
extern unsigned long shim_handles_nanswers;
static inline int shim_handles_answering(void)
{
    return __atomic_load_n(&shim_handles_nanswers, __ATOMIC_ACQUIRE) != 0;
}

void shim_handles_forget(CURL *h);            /* cleanup, or a fresh init */
void shim_handles_reset(CURL *h);             /* curl_easy_reset */
void shim_handles_dup(CURL *from, CURL *to);  /* curl_easy_duphandle */
size_t shim_handles_count(void);              /* for tests */

#endif
