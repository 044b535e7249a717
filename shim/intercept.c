/* intercept.c - see intercept.h. The pass-through path costs one table
 * lookup and a few string checks; the body is parsed only when the URL,
 * method and a substring scan all say it may be ours. A body that may be
 * ours but that JSON readers would read differently (a key twice, U+0000)
 * gets a 400 and is never sent: which reading makes it "ours" is the very
 * question. */
#include "intercept.h"

#include "classify.h"
#include "clock.h"
#include "config.h"
#include "containers.h"
#include "sink.h"
#include "guard.h"
#include "handles.h"
#include "json.h"
#include "log.h"
#include "loop.h"
#include "xfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (!why) {
        /* a form or MIME post is a POST whose body codeshim cannot read */
        int post = v->method == SHIM_METHOD_POST || v->method == SHIM_METHOD_POST_FORM ||
                   v->method == SHIM_METHOD_POST_MIME;
        if (shim_classify_explain(post, method, v->method == SHIM_METHOD_POST ? v->body : NULL,
                                  v->body_len, max_body, &w) == SHIM_PASS_OURS)
            snprintf(w.text, sizeof(w.text),
                     "the body does not spell \"code_interpreter\" out literally (JSON "
                     "escapes?), which codeshim's first check looks for");
        why = w.text;
    }
    shim_log_url(v->url, url, sizeof(url));
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

enum action { ACT_LOOP, ACT_REFUSE, ACT_OOM, ACT_UNREAD, ACT_UNSUPPORTED, ACT_CONTAINERS };

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
    free(j->body);
    free(j);
}

int shim_intercept_decide(CURL *h, double t0, struct shim_intercept_job **out)
{
    const struct shim_config *cfg = shim_config();
    struct shim_intercept_job *j;
    enum shim_api kind;
    int err;

    /* the pass-through costs this one look, nothing copied; offline and
     * replay modes look closer (ACT_REFUSE) */
    kind = shim_handles_begin(h, cfg->max_request);
    if (cfg->disabled)
        return 0;
    if (kind == SHIM_API_NONE && !cfg->offline && !cfg->replay_dir[0])
        return pass_handle(h, cfg->max_request);
    j = calloc(1, sizeof(*j));
    if (!j)
        return 0; /* nothing recorded can be read either: libcurl's */
    j->h = h;
    j->t0 = t0 < 0 ? shim_clock_s() : t0;
    if (shim_handles_view(h, &j->v) < 0) {
        free(j);
        return 0;
    }
    j->kind = kind;
    if (kind == SHIM_API_CONTAINERS) { /* codeshim's own containers, or the upstream's */
        if (shim_containers_match(&j->v, &j->route) != SHIM_CAPI_NONE) {
            j->act = ACT_CONTAINERS;
            *out = j;
            return 1;
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
            shim_intercept_job_free(j);
            return 0;
        }
        j->act = ACT_REFUSE;
    } else if ((j->param = shim_classify_unsupported(j->req, j->kind, &j->why))) {
        j->act = ACT_UNSUPPORTED;
    } else {
        j->act = ACT_LOOP;
    }
    *out = j;
    return 1;
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
    if (j->body) { /* else the program's own body stays (a MIME post: upload.c) */
        api->easy_setopt(d, CURLOPT_POSTFIELDS, j->body);
        api->easy_setopt(d, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->v.body_len);
    }
    api->easy_setopt(d, CURLOPT_VERBOSE, 0L);
    api->easy_setopt(d, CURLOPT_NOPROGRESS, 1L);
    return d;
}

int shim_intercept_detach(const struct shim_curl_api *api, struct shim_intercept_job *j)
{
    int oom = 0;

    j->api = api;
    if (j->v.body) {
        j->body = malloc(j->v.body_len + 1);
        if (!j->body)
            return -ENOMEM;
        memcpy(j->body, j->v.body, j->v.body_len);
        j->body[j->v.body_len] = '\0';
    }
    shim_guard_enter();
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

CURLcode shim_intercept_perform(const struct shim_curl_api *api, CURL *h)
{
    struct shim_intercept_job *j;
    CURLcode rc;

    if (!shim_intercept_decide(h, -1, &j))
        return real_perform(api, h);
    rc = shim_intercept_answer(api, j);
    shim_intercept_job_free(j);
    return rc;
}
