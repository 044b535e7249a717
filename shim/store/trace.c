/* trace.c - see trace.h. */
#include "store/trace.h"

#include "api/conv.h"
#include "api/reply.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "system/config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_fd = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void open_trace(void)
{
    const char *path = shim_config()->trace_file;

    if (!*path)
        return;
    g_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (g_fd < 0)
        LOG_WARN("cannot open trace file %s", path);
}

int shim_trace_enabled(void)
{
    pthread_once(&g_once, open_trace);
    return g_fd >= 0;
}

void shim_trace_emit(const char *req_id, const char *event, cJSON *fields)
{
    cJSON *line;
    char *s;

    if (!shim_trace_enabled()) {
        cJSON_Delete(fields);
        return;
    }
    line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "ts", (double)shim_clock_wall_us() / 1e6);
    cJSON_AddNumberToObject(line, "pid", (double)getpid());
    cJSON_AddStringToObject(line, "req", req_id ? req_id : "");
    cJSON_AddStringToObject(line, "event", event);
    if (fields) {
        cJSON *it = fields->child, *next;
        for (; it; it = next) {
            next = it->next;
            cJSON_AddItemToObject(line, it->string, cJSON_DetachItemViaPointer(fields, it));
        }
        cJSON_Delete(fields);
    }
    s = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n'; /* replaces the NUL: one write for the whole line */
        if (write(g_fd, s, n + 1) < 0)
            LOG_DEBUG("trace write failed");
        free(s);
    }
}

void shim_trace_request(const char *req_id, const char *api, const char *url,
                        const char *model, int stream)
{
    cJSON *f;

    if (!shim_trace_enabled())
        return;
    f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "api", api);
    cJSON_AddStringToObject(f, "url", url);
    cJSON_AddStringToObject(f, "model", model ? model : "");
    cJSON_AddBoolToObject(f, "stream", stream);
    shim_trace_emit(req_id, "request", f);
}

void shim_trace_upstream(const char *req_id, int turn, int chat,
                         const struct shim_http_reply *rep, const cJSON *body, CURLcode rc,
                         const char *errbuf)
{
    cJSON *f, *own = NULL;
    const cJSON *u;

    if (!shim_trace_enabled())
        return;
    f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "turn", turn);
    cJSON_AddNumberToObject(f, "seconds", rep->seconds);
    if (rep->source[0])
        cJSON_AddStringToObject(f, "source", rep->source);
    if (rc != CURLE_OK) {
        cJSON_AddStringToObject(f, "error", errbuf);
        cJSON_AddNumberToObject(f, "curl_code", rc);
        shim_trace_emit(req_id, "upstream", f);
        return;
    }
    cJSON_AddNumberToObject(f, "status", rep->status);
    cJSON_AddNumberToObject(f, "bytes", (double)rep->body.len);
    if (!body)
        body = own = shim_json_parse(rep->body.data, rep->body.len);
    u = cJSON_GetObjectItemCaseSensitive(body, "usage");
    if (cJSON_IsObject(u)) {
        cJSON_AddNumberToObject(f, "input_tokens",
                                (double)shim_json_int(u, chat ? "prompt_tokens" : "input_tokens"));
        cJSON_AddNumberToObject(f, "output_tokens",
                                (double)shim_json_int(u, chat ? "completion_tokens" : "output_tokens"));
    }
    cJSON_Delete(own);
    shim_trace_emit(req_id, "upstream", f);
}

void shim_trace_exec(const char *req_id, const struct shim_call *c)
{
    cJSON *f;

    if (!shim_trace_enabled())
        return;
    f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "call", c->ci_id);
    cJSON_AddStringToObject(f, "container_id", c->container_id);
    cJSON_AddStringToObject(f, "status", c->status);
    cJSON_AddNumberToObject(f, "seconds", c->res.seconds);
    if (c->res.remote) { /* e2b: what creating the sandbox and the call cost */
        cJSON_AddNumberToObject(f, "e2b_create_seconds", c->res.create_seconds);
        cJSON_AddNumberToObject(f, "e2b_execute_seconds", c->res.remote_seconds);
    }
    cJSON_AddStringToObject(f, "code", c->code ? c->code : "");
    cJSON_AddStringToObject(f, "output", c->output ? c->output : "");
    shim_trace_emit(req_id, "exec", f);
}

void shim_trace_answer(const char *req_id, long status, int executions, int upstream_calls,
                       double seconds, CURLcode rc, const char *message)
{
    cJSON *f;

    if (!shim_trace_enabled())
        return;
    f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "status", status);
    cJSON_AddNumberToObject(f, "executions", executions);
    cJSON_AddNumberToObject(f, "upstream_calls", upstream_calls);
    cJSON_AddNumberToObject(f, "seconds", seconds);
    cJSON_AddNumberToObject(f, "curl_code", rc);
    shim_trace_emit(req_id, "answer", f);
    if (rc != CURLE_OK) {
        f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "message", message);
        shim_trace_emit(req_id, "error", f);
    }
}
