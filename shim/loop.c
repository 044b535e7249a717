/* loop.c - see loop.h. */
#include "loop.h"

#include "config.h"
#include "conv.h"
#include "deliver.h"
#include "ids.h"
#include "json.h"
#include "log.h"
#include "sandbox.h"
#include "upstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run {
    const struct shim_config *cfg;
    const struct shim_api_ops *ops;
    struct shim_conv cv;
    struct shim_sandbox *sb;
    struct shim_sink sink;
    int executed;
};

/* a + b + c in a new string (NULL when out of memory). */
static char *join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* Runs one call of codeshim's tool; every outcome becomes tool output. */
static void run_call(struct run *r, struct shim_call *c)
{
    const char *why = NULL;
    int rc;

    c->executed = 1;
    shim_id_make(c->ci_id, sizeof(c->ci_id), "ci_", 48);
    c->code = shim_conv_parse_code(c->arguments, &why);
    if (!c->code) {
        c->output = join3("Error: ", why,
                          ". Call the tool again with a JSON object such as "
                          "{\"code\": \"print(1 + 1)\"}.");
        c->status = "failed";
        goto id;
    }
    if (!r->sb && (rc = shim_sandbox_open(r->cfg, &r->sb)) < 0) {
        c->output = join3("Error: the sandbox could not be started (",
                          strerror(-rc), "); the code was not run.");
        c->status = "failed";
        r->sb = NULL;
        goto id;
    }
    rc = shim_sandbox_exec(r->sb, c->code, strlen(c->code), &c->res);
    if (rc < 0) {
        c->output = join3("Error: the sandbox failed (", strerror(-rc),
                          "); the code may not have run.");
        c->status = "failed";
        goto id;
    }
    c->output = strdup(c->res.logs ? c->res.logs : "");
    switch (c->res.status) {
    case SHIM_EXEC_TIMEOUT: c->status = "incomplete"; break;
    case SHIM_EXEC_FAILED: c->status = "failed"; break;
    default: c->status = "completed"; break;
    }
    LOG_INFO("execution %d: %s, %zu bytes of output, %.3f s", r->executed + 1,
             c->status, c->res.logs_len, c->res.seconds);
id:
    if (r->sb)
        snprintf(c->container_id, sizeof(c->container_id), "%s",
                 shim_sandbox_container_id(r->sb));
    else
        shim_id_make(c->container_id, sizeof(c->container_id), "cntr_", 48);
    r->executed++;
}

/* The upstream's own answer, as received (errors, unknown shapes). */
static CURLcode deliver_raw(struct run *r, const struct shim_http_reply *rep)
{
    struct shim_buf head;
    CURLcode rc;

    shim_buf_init(&head, 1 << 20);
    if (shim_deliver_head(&head, rep->status, rep->http_version, rep->head.data,
                          rep->head.len, rep->content_type[0] ? rep->content_type : NULL,
                          (long long)rep->body.len) < 0) {
        shim_buf_free(&head);
        return shim_sink_fail(&r->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    }
    rc = shim_sink_begin(&r->sink, rep->status, rep->http_version, head.data, head.len,
                         rep->content_type[0] ? rep->content_type : NULL,
                         (long long)rep->body.len);
    if (rc == CURLE_OK)
        shim_sink_body(&r->sink, rep->body.data ? rep->body.data : "", rep->body.len);
    shim_buf_free(&head);
    return shim_sink_end(&r->sink);
}

static CURLcode deliver_json(struct run *r, const struct shim_http_reply *rep,
                             const cJSON *answer)
{
    struct shim_buf head;
    char *json = cJSON_PrintUnformatted(answer);
    size_t len;

    if (!json)
        return shim_sink_fail(&r->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    len = strlen(json);
    shim_buf_init(&head, 1 << 20);
    if (shim_deliver_head(&head, rep->status, rep->http_version, rep->head.data,
                          rep->head.len, "application/json", (long long)len) == 0 &&
        shim_sink_begin(&r->sink, rep->status, rep->http_version, head.data, head.len,
                        "application/json", (long long)len) == CURLE_OK)
        shim_sink_body(&r->sink, json, len);
    else if (r->sink.rc == CURLE_OK)
        shim_sink_fail(&r->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
    shim_buf_free(&head);
    free(json);
    return shim_sink_end(&r->sink);
}

static void free_calls(struct shim_call *calls, size_t n)
{
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
}

static int exec_cap(const struct shim_config *cfg, const cJSON *req)
{
    /* The request may lower the cap (Responses max_tool_calls), never raise it. */
    long long m = shim_json_int(req, "max_tool_calls");
    return m > 0 && m < cfg->max_loops ? (int)m : cfg->max_loops;
}

CURLcode shim_loop_run(const struct shim_curl_api *api, CURL *h,
                       const struct shim_handle_view *v, enum shim_api kind,
                       const cJSON *req, double t0)
{
    struct run r;
    struct shim_upstream *u = NULL;
    struct shim_http_reply rep;
    cJSON *up;
    char errbuf[CURL_ERROR_SIZE];
    CURLcode rc;
    int turns = 0;

    memset(&r, 0, sizeof(r));
    memset(&rep, 0, sizeof(rep));
    r.cfg = shim_config();
    r.ops = &shim_responses_ops;
    (void)kind;
    r.cv.max_exec = exec_cap(r.cfg, req);
    shim_sink_init(&r.sink, h, v, t0);
    up = r.ops->prepare(req, &r.cv);
    if (!up || shim_upstream_open(api, h, v, r.cfg->max_response, &u) < 0) {
        rc = shim_sink_fail(&r.sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
        goto out;
    }
    LOG_INFO("intercepted %s request to %s (tool \"%s\")", r.ops->name, v->url,
             r.cv.tool_name);
    for (;;) {
        char *body = cJSON_PrintUnformatted(up);
        struct shim_call *calls = NULL;
        cJSON *reply;
        size_t n = 0, i;
        int foreign = 0, capped = 0;

        if (!body) {
            rc = shim_sink_fail(&r.sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
            goto out;
        }
        shim_http_reply_free(&rep);
        rc = shim_upstream_post(u, body, strlen(body), &rep, errbuf);
        free(body);
        turns++;
        if (rc != CURLE_OK) {
            rc = shim_sink_fail(&r.sink, rc, errbuf);
            goto out;
        }
        if (rep.status < 200 || rep.status >= 300) {
            LOG_INFO("upstream answered %ld; handing it to the program", rep.status);
            rc = deliver_raw(&r, &rep);
            goto out;
        }
        reply = shim_json_parse(rep.body.data, rep.body.len);
        if (!reply || r.ops->scan(reply, &r.cv, &calls, &n, &foreign) < 0) {
            LOG_WARN("upstream answer is not a %s object; handing it over as is",
                     r.ops->name);
            cJSON_Delete(reply);
            rc = deliver_raw(&r, &rep);
            goto out;
        }
        for (i = 0; i < n; i++) {
            if (r.executed >= r.cv.max_exec) {
                capped = 1;
                LOG_WARN("execution cap (%d) reached; answering incomplete",
                         r.cv.max_exec);
                break;
            }
            run_call(&r, &calls[i]);
        }
        if (n == 0 || capped || foreign) {
            cJSON *answer = r.ops->finish(req, reply, calls, n, &r.cv, capped);
            if (answer)
                rc = deliver_json(&r, &rep, answer);
            else
                rc = shim_sink_fail(&r.sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
            cJSON_Delete(answer);
            cJSON_Delete(reply);
            free_calls(calls, n);
            goto out;
        }
        r.ops->advance(up, reply, calls, n, &r.cv);
        cJSON_Delete(reply);
        free_calls(calls, n);
    }
out:
    LOG_INFO("%s request done: %d upstream calls, %d executions, result %d",
             r.ops->name, turns, r.executed, (int)rc);
    shim_http_reply_free(&rep);
    shim_upstream_close(u);
    shim_sandbox_close(r.sb);
    shim_conv_free(&r.cv);
    cJSON_Delete(up);
    return rc;
}
