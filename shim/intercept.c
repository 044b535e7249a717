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

static CURLcode reject_ambiguous(CURL *h, const struct shim_handle_view *v, double t0,
                                 const struct shim_json_flaw *why)
{
    char flaw[128], msg[400];

    shim_json_flaw_text(why, flaw, sizeof(flaw));
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

CURLcode shim_intercept_perform(const struct shim_curl_api *api, CURL *h)
{
    const struct shim_config *cfg = shim_config();
    struct shim_handle_view v;
    struct shim_capi_route route;
    struct shim_json_flaw flaw;
    enum shim_api kind;
    const char *param, *why;
    cJSON *req;
    CURLcode rc;
    int err;
    double t0;

    /* the pass-through costs this one look, nothing copied; offline and
     * replay modes look closer (refuse() below) */
    kind = shim_handles_begin(h, cfg->max_request);
    if (cfg->disabled || (kind == SHIM_API_NONE && !cfg->offline && !cfg->replay_dir[0]) ||
        shim_handles_view(h, &v) < 0)
        return real_perform(api, h);
    t0 = shim_clock_s();
    if (kind == SHIM_API_CONTAINERS) { /* codeshim's own containers, or the upstream's */
        if (shim_containers_match(&v, &route) != SHIM_CAPI_NONE) {
            rc = shim_containers_serve(api, h, &v, &route, t0);
            shim_handle_view_free(&v);
            return rc;
        }
        kind = SHIM_API_NONE;
    }
    req = NULL;
    err = kind != SHIM_API_NONE ? shim_json_read(v.body, v.body_len, &req, &flaw) : -EINVAL;
    if (err == -EEXIST || err == -ENOMEM) {
        rc = err == -EEXIST ? reject_ambiguous(h, &v, t0, &flaw)
                            : fail_oom(h, &v, t0);
        shim_handle_view_free(&v);
        return rc;
    }
    if (!req || !shim_classify_body(req)) {
        cJSON_Delete(req);
        rc = (cfg->offline || cfg->replay_dir[0]) && shim_classify_url(v.url) != SHIM_API_NONE
                 ? refuse(h, &v, t0)
                 : real_perform(api, h);
        shim_handle_view_free(&v);
        return rc;
    }
    if ((param = shim_classify_unsupported(req, kind, &why)))
        rc = reject(h, &v, t0, why, param, "unsupported_value");
    else
        rc = shim_loop_run(api, h, &v, kind, req, t0);
    cJSON_Delete(req);
    shim_handle_view_free(&v);
    return rc;
}
