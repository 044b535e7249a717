/* intercept.c - see intercept.h. The pass-through path costs one table
 * lookup and a few string checks; the body is parsed only when the URL,
 * method and a substring scan all say it may be ours. */
#include "intercept.h"

#include "classify.h"
#include "config.h"
#include "deliver.h"
#include "guard.h"
#include "handles.h"
#include "json.h"
#include "loop.h"

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
    enum shim_api kind;
    cJSON *req;
    CURLcode rc;
    double t0 = shim_now();

    shim_handles_clear_answer(h);
    if (cfg->disabled || shim_handles_view(h, &v) < 0)
        return real_perform(api, h);
    kind = shim_classify_transfer(v.method == SHIM_METHOD_POST, v.custom_request, v.url,
                                  v.body, v.body_len, cfg->max_request);
    req = kind != SHIM_API_NONE ? shim_json_parse(v.body, v.body_len) : NULL;
    if (!req || !shim_classify_body(req)) {
        cJSON_Delete(req);
        rc = (cfg->offline || cfg->replay_dir[0]) && shim_classify_url(v.url) != SHIM_API_NONE
                 ? refuse(h, &v, t0)
                 : real_perform(api, h);
        shim_handle_view_free(&v);
        return rc;
    }
    rc = shim_loop_run(api, h, &v, kind, req, t0);
    cJSON_Delete(req);
    shim_handle_view_free(&v);
    return rc;
}
