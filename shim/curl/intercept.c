/* intercept.c - see intercept.h. The pass-through path costs one table
 * lookup and a few string checks; the body is parsed only when the URL,
 * method and a substring scan all say it may be ours. A body that may be
 * ours but that JSON readers would read differently (a key twice, U+0000)
 * gets a 400 and is never sent: which reading makes it "ours" is the very
 * question. */
#include "curl/intercept.h"

#include "api/classify.h"
#include "base/clock.h"
#include "base/guard.h"
#include "base/json.h"
#include "base/log.h"
#include "curl/containers.h"
#include "curl/handles.h"
#include "curl/loop.h"
#include "curl/relay.h"
#include "curl/sink.h"
#include "curl/xfer.h"
#include "store/upload.h"
#include "system/config.h"
#include "system/url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>

/* In offline and replay modes nothing may reach the network: a request to
 * a model endpoint that codeshim does not take over gets a clear error. */
static CURLcode refuse(CURL *h, const struct shim_handle_view *v, double t0)
{
    static const char body[] =
        "{\"error\":{\"message\":\"codeshim is in offline or replay mode "
        "(CODESHIM_OFFLINE / CODESHIM_REPLAY) and answers only requests that carry "
        "the code_interpreter tool; this request was not sent.\",\"type\":"
        "\"invalid_request_error\",\"param\":null,\"code\":\"codeshim_offline\"}}";
    struct shim_sink sink;

    shim_sink_init(&sink, h, v, t0);
    return shim_sink_whole(&sink, 400, CURL_HTTP_VERSION_1_1, NULL, 0, "application/json",
                           body, sizeof(body) - 1);
}

static CURLcode fail_oom(CURL *h, const struct shim_handle_view *v, double t0)
{
    struct shim_sink sink;

    shim_sink_init(&sink, h, v, t0);
    return shim_sink_fail(&sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
}

/* A request codeshim answers itself: 400 invalid_request_error. */
static CURLcode reject(CURL *h, const struct shim_handle_view *v, double t0,
                       const char *message, const char *param, const char *code)
{
    cJSON *err = shim_json_error(message, "invalid_request_error", param, code);
    char *body = err ? cJSON_PrintUnformatted(err) : NULL;
    struct shim_sink sink;
    CURLcode rc;

    LOG_WARN("answered 400 without sending the request: %s", message);
    if (body) {
        shim_sink_init(&sink, h, v, t0);
        rc = shim_sink_whole(&sink, 400, CURL_HTTP_VERSION_1_1, NULL, 0, "application/json",
                             body, strlen(body));
    } else {
        rc = fail_oom(h, v, t0);
    }
    free(body);
    cJSON_Delete(err);
    return rc;
}

/* A request codeshim will not read: one JSON readers read differently (a
 * key twice, U+0000), or one past the values it reads of a body. */
static CURLcode reject_unread(CURL *h, const struct shim_handle_view *v, double t0,
                             const struct shim_json_flaw *why)
{
    char flaw[128], msg[400];

    shim_json_flaw_text(why, flaw, sizeof(flaw));
    if (why->big)
        snprintf(msg, sizeof(msg),
                 "codeshim refused this request: %s, past what codeshim reads of one "
                 "body; it was neither run nor forwarded.", flaw);
    else
        snprintf(msg, sizeof(msg),
                 "codeshim refused this request: %s. JSON readers disagree about what such "
                 "a body says, so codeshim neither runs nor forwards it; send each key once "
                 "and no U+0000 characters.", flaw);
    return reject(h, v, t0, msg, NULL, NULL);
}

static CURLcode real_perform(const struct shim_curl_api *api, CURL *h)
{
    CURLcode rc;

    shim_guard_enter();
    rc = api->easy_perform(h);
    shim_guard_leave();
    return rc;
}

/* CODESHIM_LOG=debug: the one line for a transfer to a model path that
 * goes to libcurl, saying why (why NULL: the classifier tells). The URL
 * without its query, never the body or a header. */
static void log_pass(const struct shim_handle_view *v, const char *why, size_t max_body)
{
    struct shim_pass_why w;
    char url[256];
    const char *method = shim_handle_view_method(v);

    if (!shim_log_enabled(SHIM_LOG_DEBUG) ||
        (shim_classify_url(v->url) == SHIM_API_NONE && !shim_classify_maybe_containers(v->url)))
        return;
    if (!why && v->body_from_cb && !v->body && v->src.size > 0 &&
        (uint64_t)v->src.size > max_body) {
        snprintf(w.text, sizeof(w.text),
                 "the body its read callback sends is over CODESHIM_MAX_REQUEST (%lld bytes, "
                 "more than %zu); codeshim did not read it", (long long)v->src.size, max_body);
        why = w.text;
    }
    if (!why) {
        /* a form or MIME post is a POST whose body codeshim cannot read */
        int post = v->method == SHIM_METHOD_POST || v->method == SHIM_METHOD_POST_FORM ||
                   v->method == SHIM_METHOD_POST_MIME ||
                   (v->method == SHIM_METHOD_PUT && !strcasecmp(method, "POST"));
        if (shim_classify_explain(post, method,
                                  v->method == SHIM_METHOD_POST || v->body_from_cb ? v->body
                                                                                   : NULL,
                                  v->body_len, max_body, &w) == SHIM_PASS_OURS)
            snprintf(w.text, sizeof(w.text),
                     "the body does not spell \"code_interpreter\" out literally (JSON "
                     "escapes?), which codeshim's first check looks for");
        why = w.text;
    }
    shim_url_redact(v->url, url, sizeof(url));
    LOG_DEBUG("passed through %.16s %s: %s", method, url, why);
}

/* The same for a transfer of which only the handle is known yet: costs a
 * view only when the debug log is on. */
static int pass_handle(CURL *h, size_t max_body)
{
    struct shim_handle_view v;

    if (shim_log_enabled(SHIM_LOG_DEBUG) && shim_handles_view(h, &v) == 0) {
        log_pass(&v, NULL, max_body);
        shim_handle_view_free(&v);
    }
    return 0;
}

/* ---- request bodies from the program's read callback ----
 *
 * libcurl reads such a body while it sends it; codeshim must know it
 * before anything is sent. So it is read once, whole, here, on the
 * program's thread inside the call that drives the transfer, up to
 * CODESHIM_MAX_REQUEST. A transfer that then goes to libcurl gets the
 * same bytes: the program's seek or ioctl callback rewinds (as libcurl's
 * own rewinds do: offset 0), libcurl's default fread rewinds its FILE;
 * else the give-back below hands libcurl the bytes already read, then
 * whatever the program's callback gives, and the program's callback is
 * set back once the transfer is over. A callback that pauses
 * (CURL_READFUNC_PAUSE) before the end of its body sends the transfer to
 * libcurl that way: libcurl asks the program's callback again once the
 * bytes before the pause are sent, and a program still without data
 * pauses it there, to resume it as it would have (curl_easy_pause). */

#define READ_CHUNK 65536

struct giveback {
    const struct shim_curl_api *api;
    struct shim_body_cb src; /* the program's, at the time of reading */
    long pos;                /* libcurl's default fread: ftell before (-1: none) */
    int eof;                 /* ...said its body ended: not asked again */
    size_t len, off, cap;
    char data[];
};

enum rd { RD_DONE, RD_BIG, RD_PAUSE, RD_SHORT, RD_OOM, RD_ABORT, RD_FUNNY };

static size_t program_read(const struct shim_body_cb *src, char *buf, size_t n)
{
    if (src->read_cb)
        return src->read_cb(buf, 1, n, src->read_data);
    return src->read_data ? fread(buf, 1, n, (FILE *)src->read_data) : 0;
}

/* Reads the body of v (a known size, or until its end, at most max + 1
 * bytes) into *out (always set unless RD_OOM before any byte). */
static enum rd read_body(const struct shim_curl_api *api, const struct shim_handle_view *v,
                         size_t max, struct giveback **out)
{
    size_t want = v->src.size >= 0 ? (size_t)v->src.size : max + 1, ask, n;
    struct giveback *gb, *g2;
    size_t cap;

    *out = NULL;
    cap = want < READ_CHUNK ? want : READ_CHUNK;
    gb = calloc(1, sizeof(*gb) + cap + 1);
    if (!gb)
        return RD_OOM;
    gb->api = api;
    gb->src = v->src;
    gb->cap = cap;
    gb->pos = !v->src.read_cb && v->src.read_data ? ftell((FILE *)v->src.read_data) : -1;
    *out = gb;
    while (gb->len < want) {
        if (gb->len == gb->cap) {
            cap = gb->cap * 2 < want ? gb->cap * 2 : want;
            g2 = realloc(gb, sizeof(*gb) + cap + 1);
            if (!g2)
                return RD_OOM;
            *out = gb = g2;
            gb->cap = cap;
        }
        ask = gb->cap - gb->len < READ_CHUNK ? gb->cap - gb->len : READ_CHUNK;
        n = program_read(&gb->src, gb->data + gb->len, ask);
        if (n == CURL_READFUNC_ABORT)
            return RD_ABORT;
        if (n == CURL_READFUNC_PAUSE)
            return RD_PAUSE;
        if (n > ask)
            return RD_FUNNY;
        if (n == 0) {
            gb->eof = 1;
            break;
        }
        gb->len += n;
    }
    gb->data[gb->len] = '\0';
    if (v->src.size >= 0)
        return gb->len == want ? RD_DONE : RD_SHORT;
    return gb->eof ? RD_DONE : RD_BIG;
}

/* libcurl's read callback while a body codeshim read goes to libcurl. */
static size_t giveback_read(char *buf, size_t size, size_t n, void *arg)
{
    struct giveback *gb = arg;
    size_t want = size * n, k;

    if (gb->off < gb->len) {
        k = gb->len - gb->off < want ? gb->len - gb->off : want;
        memcpy(buf, gb->data + gb->off, k);
        gb->off += k;
        return k;
    }
    if (gb->eof)
        return 0;
    return program_read(&gb->src, buf, want);
}

/* Rewinds the program's body as libcurl would (0, or -EIO). */
static int rewind_program(CURL *h, const struct giveback *gb)
{
    const struct shim_body_cb *src = &gb->src;

    if (gb->len == 0 && !gb->eof)
        return 0; /* nothing was taken from it */
    if (src->seek_cb && src->seek_cb(src->seek_data, 0, SEEK_SET) == CURL_SEEKFUNC_OK)
        return 0;
    if (!src->seek_cb && src->ioctl_cb &&
        src->ioctl_cb(h, CURLIOCMD_RESTARTREAD, src->ioctl_data) == CURLIOE_OK)
        return 0;
    if (!src->read_cb && gb->pos >= 0 && src->read_data &&
        fseek((FILE *)src->read_data, gb->pos, SEEK_SET) == 0)
        return 0;
    return -EIO;
}

/* Sets the program's read callback, as it stands in the record now, back
 * on h, and frees gb. */
static void restore(CURL *h, struct giveback *gb)
{
    struct shim_body_cb src;

    if (!gb)
        return;
    if (shim_handles_body_cb(h, &src) < 0)
        src = gb->src;
    shim_guard_enter();
    gb->api->easy_setopt(h, CURLOPT_READFUNCTION, src.read_cb);
    gb->api->easy_setopt(h, CURLOPT_READDATA, src.read_data);
    shim_guard_leave();
    free(gb);
}

/* A body read for a transfer that goes to libcurl after all: rewound, or
 * given back through codeshim's read callback (1: installed, restore
 * after the transfer). */
static int pass_back(CURL *h, struct giveback *gb)
{
    struct giveback *old;
    CURLcode a, b;

    if (!gb || rewind_program(h, gb) == 0) {
        free(gb);
        return 0;
    }
    shim_guard_enter();
    a = gb->api->easy_setopt(h, CURLOPT_READFUNCTION, giveback_read);
    b = gb->api->easy_setopt(h, CURLOPT_READDATA, (void *)gb);
    shim_guard_leave();
    if (a != CURLE_OK || b != CURLE_OK) {
        LOG_ERR("libcurl refused codeshim's read callback: the body it read is lost");
        restore(h, gb);
        return 0;
    }
    old = shim_handles_set_giveback(h, gb);
    if (old == gb) { /* h is not in the table: cannot be (a view was made) */
        restore(h, gb);
        return 0;
    }
    free(old);
    return 1;
}

void shim_intercept_restore(CURL *h)
{
    restore(h, shim_handles_set_giveback(h, NULL));
}

void shim_intercept_duphandle(const struct shim_curl_api *api, CURL *from, CURL *to)
{
    struct giveback *gb = shim_handles_set_giveback(from, NULL);
    struct shim_body_cb src;

    if (!gb)
        return;
    shim_handles_set_giveback(from, gb);
    if (shim_handles_body_cb(to, &src) < 0)
        src = gb->src;
    shim_guard_enter();
    api->easy_setopt(to, CURLOPT_READFUNCTION, src.read_cb);
    api->easy_setopt(to, CURLOPT_READDATA, src.read_data);
    shim_guard_leave();
}

enum action { ACT_LOOP, ACT_REFUSE, ACT_OOM, ACT_UNREAD, ACT_UNSUPPORTED, ACT_CONTAINERS,
              ACT_FAIL };

struct shim_intercept_job {
    enum action act;
    CURL *h;                  /* the program's handle */
    CURL *own;                /* detached: the private duplicate */
    const struct shim_curl_api *api; /* detached: whose functions free it */
    struct shim_handle_view v;
    enum shim_api kind;
    cJSON *req;
    struct shim_json_flaw flaw;
    struct shim_capi_route route; /* ACT_CONTAINERS */
    const char *param, *why;
    char pass_why[128];       /* a Containers API call that is not codeshim's */
    char *body;               /* detached: the copy v.body points to */
    struct curl_slist *headers; /* detached: the copy v.headers is */
    struct giveback *gb;      /* a body read from the program's callback */
    struct shim_relay *relay; /* detached: the program's connection callbacks */
    CURLcode fail_rc;         /* ACT_FAIL: libcurl's code and message */
    const char *fail_msg;
    double t0;
};

void shim_intercept_job_free(struct shim_intercept_job *j)
{
    if (!j)
        return;
    cJSON_Delete(j->req);
    shim_handle_view_free(&j->v);
    if (j->api) {
        shim_guard_enter();
        if (j->own)
            j->api->easy_cleanup(j->own);
        if (j->headers)
            j->api->slist_free_all(j->headers);
        shim_guard_leave();
    }
    shim_relay_free(j->relay); /* after the handles that call it */
    free(j->body);
    free(j->gb);
    free(j);
}

/* Reads v's body from the program's callback into j (see above): 0, or
 * 1 when the transfer ends here (ACT_FAIL). A body that is not whole,
 * too large or paused leaves j->kind SHIM_API_NONE. */
static int take_body(struct shim_intercept_job *j, size_t max)
{
    const struct shim_curl_api *api = shim_real(j->v.flavor);
    enum rd r;

    if (!api)
        return 0;
    r = read_body(api, &j->v, max, &j->gb);
    switch (r) {
    case RD_ABORT:
        j->act = ACT_FAIL;
        j->fail_rc = CURLE_ABORTED_BY_CALLBACK;
        j->fail_msg = "operation aborted by callback";
        return 1;
    case RD_FUNNY:
        j->act = ACT_FAIL;
        j->fail_rc = CURLE_READ_ERROR;
        j->fail_msg = "read function returned funny value";
        return 1;
    case RD_DONE:
        j->v.body = j->gb->data;
        j->v.body_len = j->gb->len;
        if (j->kind != SHIM_API_CONTAINERS &&
            !shim_classify_may_be_ours(1, NULL, j->v.body, j->v.body_len, max))
            j->kind = SHIM_API_NONE;
        return 0;
    default:
        snprintf(j->pass_why, sizeof(j->pass_why), "%s",
                 r == RD_PAUSE ? "its read callback paused before the end of the body"
                 : r == RD_BIG ? "the body its read callback sends is over "
                                 "CODESHIM_MAX_REQUEST"
                 : r == RD_SHORT ? "its read callback ended the body before the size it set"
                                 : "out of memory reading the body");
        j->kind = SHIM_API_NONE;
        return 0;
    }
}

static int decide(CURL *h, double t0, int may_read, struct shim_intercept_job **out,
                  int *gave)
{
    const struct shim_config *cfg = shim_config();
    struct shim_intercept_job *j;
    enum shim_api kind;
    void *stale;
    int err, read;

    /* the pass-through costs this one look, nothing copied; offline and
     * replay modes look closer (ACT_REFUSE) */
    kind = shim_handles_begin(h, cfg->max_request, &read, &stale);
    if (stale)
        restore(h, stale);
    if (cfg->disabled)
        return SHIM_DECIDE_PASS;
    if (kind == SHIM_API_NONE && !cfg->offline && !cfg->replay_dir[0])
        return pass_handle(h, cfg->max_request);
    if (read && !may_read)
        return SHIM_DECIDE_LATER;
    j = calloc(1, sizeof(*j));
    if (!j)
        return SHIM_DECIDE_PASS; /* nothing recorded can be read either: libcurl's */
    j->h = h;
    j->t0 = t0 < 0 ? shim_clock_s() : t0;
    if (shim_handles_view(h, &j->v) < 0) {
        free(j);
        return SHIM_DECIDE_PASS;
    }
    j->kind = kind;
    if (read && take_body(j, cfg->max_request)) {
        *out = j;
        return SHIM_DECIDE_OURS;
    }
    if (j->kind == SHIM_API_CONTAINERS) { /* codeshim's own containers, or the upstream's */
        if (shim_containers_match(&j->v, &j->route) != SHIM_CAPI_NONE) {
            j->act = ACT_CONTAINERS;
            *out = j;
            return SHIM_DECIDE_OURS;
        }
        j->kind = SHIM_API_NONE;
        if (j->route.cid[0])
            snprintf(j->pass_why, sizeof(j->pass_why),
                     "container %s is not one codeshim made", j->route.cid);
        else
            snprintf(j->pass_why, sizeof(j->pass_why),
                     "not a Containers API call codeshim answers");
    }
    err = j->kind != SHIM_API_NONE ? shim_json_read(j->v.body, j->v.body_len, &j->req, &j->flaw)
                                   : -EINVAL;
    if (err == -EEXIST || err == -E2BIG || err == -ENOMEM) {
        j->act = err == -ENOMEM ? ACT_OOM : ACT_UNREAD;
    } else if (!j->req || !shim_classify_body(j->req)) {
        if (!((cfg->offline || cfg->replay_dir[0]) &&
              shim_classify_url(j->v.url) != SHIM_API_NONE)) {
            log_pass(&j->v, j->pass_why[0] ? j->pass_why : NULL, cfg->max_request);
            *gave = pass_back(h, j->gb);
            j->gb = NULL;
            shim_intercept_job_free(j);
            return SHIM_DECIDE_PASS;
        }
        j->act = ACT_REFUSE;
    } else if ((j->param = shim_classify_unsupported(j->req, j->kind, &j->why))) {
        j->act = ACT_UNSUPPORTED;
    } else {
        j->act = ACT_LOOP;
    }
    *out = j;
    return SHIM_DECIDE_OURS;
}

int shim_intercept_decide(CURL *h, double t0, int may_read, struct shim_intercept_job **out)
{
    int gave = 0;

    return decide(h, t0, may_read, out, &gave);
}

static struct curl_slist *copy_list(const struct shim_curl_api *api,
                                    const struct curl_slist *l, int *oom)
{
    struct curl_slist *out = NULL, *t;

    for (; l; l = l->next) {
        t = api->slist_append(out, l->data);
        if (!t) {
            api->slist_free_all(out);
            *oom = 1;
            return NULL;
        }
        out = t;
    }
    return out;
}

/* The duplicate the model calls inherit from: nothing in it points into
 * the program's memory that codeshim knows of (body, header list, error
 * buffer) and it shares nothing with the program's other transfers. A
 * COPYPOSTFIELDS without size cannot be duplicated by libcurl 7.88 (see
 * upstream.c): for that moment the body is a plain pointer to codeshim's
 * record of it, set back as the program set it right after. */
static CURL *dup_detached(const struct shim_curl_api *api, struct shim_intercept_job *j)
{
    CURL *d;

    if (j->v.body_copied_unsized) {
        if (api->easy_setopt(j->h, CURLOPT_POSTFIELDS, j->v.body) != CURLE_OK)
            return NULL;
        d = api->easy_duphandle(j->h);
        if (api->easy_setopt(j->h, CURLOPT_COPYPOSTFIELDS, j->v.body) != CURLE_OK)
            api->easy_setopt(j->h, CURLOPT_POSTFIELDS, "");
    } else {
        d = api->easy_duphandle(j->h);
    }
    if (!d)
        return NULL;
    api->easy_setopt(d, CURLOPT_SHARE, (CURLSH *)NULL);
    api->easy_setopt(d, CURLOPT_ERRORBUFFER, (char *)NULL);
    api->easy_setopt(d, CURLOPT_HTTPHEADER, j->headers);
    if (j->body) { /* a MIME post was read on the program's thread: see detach */
        if (j->v.method == SHIM_METHOD_POST_MIME)
            api->easy_setopt(d, CURLOPT_MIMEPOST, (curl_mime *)NULL);
        api->easy_setopt(d, CURLOPT_POSTFIELDS, j->body);
        api->easy_setopt(d, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->v.body_len);
    }
    api->easy_setopt(d, CURLOPT_VERBOSE, 0L);
    api->easy_setopt(d, CURLOPT_NOPROGRESS, 1L);
    /* the body is codeshim's copy: the program's body callbacks, which
     * only its own thread may run, stay with its handle */
    api->easy_setopt(d, CURLOPT_READFUNCTION, (curl_read_callback)NULL);
    api->easy_setopt(d, CURLOPT_SEEKFUNCTION, (curl_seek_callback)NULL);
    api->easy_setopt(d, CURLOPT_IOCTLFUNCTION, (curl_ioctl_callback)NULL);
    if (j->relay)
        shim_relay_install(api, j->relay, d);
    return d;
}

/* A MIME post codeshim answers (a Containers API upload): libcurl reads
 * its parts through the program's callbacks, so it is read here, on the
 * program's thread, into j->body with its Content-Type first in
 * j->headers. 0, or -errno. */
static int take_mime(const struct shim_curl_api *api, struct shim_intercept_job *j, int *oom)
{
    struct shim_upload up;
    struct curl_slist *l, *t;
    char line[300];
    int err;

    memset(&up, 0, sizeof(up));
    err = shim_upload_capture(api, j->h, shim_config()->file_max + 65536, &up);
    if (err < 0)
        return err;
    snprintf(line, sizeof(line), "Content-Type: %s", up.content_type);
    shim_guard_enter();
    l = api->slist_append(NULL, line);
    t = l ? copy_list(api, j->v.headers, oom) : NULL;
    if (l && t) {
        struct curl_slist *e = l;
        e->next = t;
    }
    shim_guard_leave();
    if (!l || *oom) {
        shim_upload_free(&up);
        *oom = 1;
        return -ENOMEM;
    }
    j->headers = l;
    j->body = up.body;
    j->v.body_len = up.len;
    return 0;
}

int shim_intercept_reads_program(const struct shim_intercept_job *j)
{
    return j->act == ACT_CONTAINERS && j->v.method == SHIM_METHOD_POST_MIME && !j->v.body;
}

int shim_intercept_detach(const struct shim_curl_api *api, struct shim_intercept_job *j,
                          struct shim_sinkq *q)
{
    int oom = 0, err;

    j->api = api;
    if (q && shim_relay_new(q, j->h, &j->v.cbs, &j->relay) < 0)
        return -ENOMEM;
    if (shim_intercept_reads_program(j)) {
        if ((err = take_mime(api, j, &oom)) < 0) {
            j->act = ACT_FAIL;
            j->fail_rc = oom ? CURLE_OUT_OF_MEMORY : CURLE_READ_ERROR;
            j->fail_msg = oom ? "codeshim: out of memory"
                              : "codeshim could not read this upload's MIME body";
            if (oom)
                return -ENOMEM;
        }
    } else if (j->v.body) {
        j->body = malloc(j->v.body_len + 1);
        if (!j->body)
            return -ENOMEM;
        memcpy(j->body, j->v.body, j->v.body_len);
        j->body[j->v.body_len] = '\0';
    }
    shim_guard_enter();
    if (!j->headers)
        j->headers = copy_list(api, j->v.headers, &oom);
    j->own = oom ? NULL : dup_detached(api, j);
    shim_guard_leave();
    if (oom)
        return -ENOMEM;
    if (!j->own)
        return -ENOTSUP;
    j->v.body = j->body;
    j->v.headers = j->headers;
    j->v.body_copied_unsized = 0; /* a sized POSTFIELDS on the duplicate */
    j->v.write_cb = NULL;
    j->v.write_data = NULL;
    j->v.header_cb = NULL;
    j->v.header_data = NULL;
    j->v.errorbuffer = NULL;
    j->v.lim.noprogress = 1; /* the deadline holds; no callback of the program's */
    j->v.lim.xferinfo = NULL;
    j->v.lim.progress = NULL;
    return 0;
}

/* Under the program's limits (xfer.h): its deadline always, its
 * callbacks when on its thread (a detached view keeps none). */
static CURLcode answer(const struct shim_curl_api *api, struct shim_intercept_job *j, CURL *h)
{
    switch (j->act) {
    case ACT_REFUSE:
        return refuse(h, &j->v, j->t0);
    case ACT_OOM:
        return fail_oom(h, &j->v, j->t0);
    case ACT_UNREAD:
        return reject_unread(h, &j->v, j->t0, &j->flaw);
    case ACT_UNSUPPORTED:
        return reject(h, &j->v, j->t0, j->why, j->param, "unsupported_value");
    case ACT_CONTAINERS:
        return shim_containers_serve(api, h, &j->v, &j->route, j->t0);
    case ACT_FAIL: {
        struct shim_sink sink;
        shim_sink_init(&sink, h, &j->v, j->t0);
        return shim_sink_fail(&sink, j->fail_rc, j->fail_msg);
    }
    case ACT_LOOP:
    default:
        return shim_loop_run(api, h, &j->v, j->kind, j->req, j->t0);
    }
}

CURLcode shim_intercept_answer(const struct shim_curl_api *api, struct shim_intercept_job *j)
{
    CURL *h = j->own ? j->own : j->h;
    struct shim_xfer x;
    CURLcode rc;

    shim_xfer_begin(&x, h, &j->v, j->t0);
    rc = answer(api, j, h);
    shim_xfer_end(&x);
    return rc;
}

CURLcode shim_intercept_perform(const struct shim_curl_api *api, CURL *h,
                                shim_intercept_run_fn run)
{
    struct shim_intercept_job *j;
    CURLcode rc;

    int gave = 0;

    if (decide(h, -1, 1, &j, &gave) == SHIM_DECIDE_PASS) {
        rc = real_perform(api, h);
        if (gave) /* the program's read callback back, as it set it */
            shim_intercept_restore(h);
        return rc;
    }
    return run(api, h, j, j->t0);
}
