/* loop.c - see loop.h. */
#include "curl/loop.h"

#include "api/conv.h"
#include "api/identity.h"
#include "api/live.h"
#include "api/step.h"
#include "api/stream.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/json.h"
#include "base/log.h"
#include "curl/files.h"
#include "curl/sink.h"
#include "curl/upstream.h"
#include "sandbox/sandbox.h"
#include "session/session.h"
#include "store/chain.h"
#include "store/store.h"
#include "store/trace.h"
#include "system/config.h"
#include "system/url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct run {
    const struct shim_config *cfg;
    const struct shim_api_ops *ops;
    enum shim_api kind;
    const cJSON *req;
    struct shim_conv cv;
    const struct shim_handle_view *v;
    struct shim_session *box; /* opened at the first tool call */
    struct shim_files files;  /* its container's files (files.h) */
    struct shim_files_in in;  /* the files the request brings */
    struct shim_sink sink;
    struct shim_stream st;
    struct shim_live live; /* relays the upstream's own stream (live.h) */
    struct shim_http_reply *cur_rep; /* the reply being streamed in */
    int live_on;   /* upstream calls ask for a stream */
    int live_turn; /* the last upstream answer came as a stream */
    int streaming; /* SSE headers and first events sent */
    struct shim_step step; /* calls run, the cap (step.h) */
    int bound; /* the sandbox is a container tools[].container names */
    int turns;
    int matched;  /* the upstream matches calls on what they were (a cassette) */
    cJSON *calls; /* each call so far as a cassette matches on it (match.h) */
    char id[32]; /* request id in traces */
    char identity[65]; /* whose sessions and continuations (store.h) */
    /* a session refused (SHIM_SESSION_NO_STORE, _USER_CAP): the request
     * ends with an error answer saying why, once the calls are answered */
    int refused;
    char refusal[640];
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

/* Who is asking: a hash of every credential the request carries, in
 * headers, URL or options (identity.h; only ever hashed, never kept). */
static void identify(struct run *r)
{
    shim_identity_of(r->v->headers, r->v->url, &r->v->creds, r->identity);
}

/* Whether the request names a container (tools[].container, a string):
 * codeshim's containers live in the runtime directory. */
static int names_container(const cJSON *req)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *c = shim_json_str(it, "container");
        if (c && !strncmp(c, "cntr_", 5))
            return 1;
    }
    return 0;
}

/* The sandbox for this request: a session's, or a private one. */
static int open_box(struct run *r)
{
    const char *refs[16];
    struct shim_session_req rq;
    char root[SHIM_PATH_MAX];
    int rc;
    /* the program's CA, proxy and resolve settings, for a sandbox reached over HTTP */
    struct shim_http_net net = {r->v->flavor, r->v->net[0], r->v->net[1], r->v->net[2],
                                r->v->net[3], r->v->net[4]};

    memset(&rq, 0, sizeof(rq));
    rq.net = &net;
    rq.identity = r->identity;
    rq.session_id = shim_conv_session_id(r->req);
    rq.ncontainers = shim_conv_container_refs(r->req, refs, 16);
    rq.containers = refs;
    rq.bind_container = shim_files_bound(r->cfg, r->identity, r->req, rq.session_id != NULL);
    if (!rq.bind_container && names_container(r->req) && !shim_sandbox_keeps_sessions(r->cfg) &&
        shim_store_runtime(r->cfg, root, sizeof(root)) < 0)
        rc = SHIM_SESSION_NO_STORE; /* a named container cannot be looked up */
    else
        rc = shim_session_open(r->cfg, &rq, &r->box);
    r->bound = rq.bind_container != NULL;
    if ((rc == SHIM_SESSION_NO_STORE || rc == SHIM_SESSION_USER_CAP) && !r->refused) {
        r->refused = rc;
        snprintf(r->refusal, sizeof(r->refusal), "%s", shim_store_why());
    }
    if (rc == 0) {
        shim_files_opened(&r->files, r->cfg, r->identity, r->box, r->bound);
        shim_files_place(&r->files, r->cfg, r->identity, r->box, &r->in);
    }
    return rc;
}

/* The call as a cassette matches on it: the model's code (or arguments)
 * and what the sandbox gave, never codeshim's own notes about it. */
static void note_call(struct run *r, const struct shim_call *c)
{
    cJSON *o;

    if (!r->matched || (!r->calls && !(r->calls = cJSON_CreateArray())))
        return;
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "code", c->code ? c->code : c->arguments ? c->arguments : "");
    cJSON_AddStringToObject(o, "status", c->skipped ? "skipped" : c->status ? c->status : "");
    if (c->executed && c->res.logs)
        cJSON_AddStringToObject(o, "logs", c->res.logs);
    cJSON_AddItemToArray(r->calls, o);
}

/* The sandbox is new since the request opened it: its container's files
 * as for a sandbox just opened (files.h). */
static void files_again(struct run *r)
{
    shim_files_free(&r->files);
    shim_files_opened(&r->files, r->cfg, r->identity, r->box, r->bound);
}

/* While code runs: the transfer's limits (xfer.h) and whether the program
 * still reads; the code is interrupted once it is over. */
static int exec_stop(void *ctx)
{
    struct run *r = ctx;
    return !shim_sink_ok(&r->sink);
}

/* Runs one call of codeshim's tool; every outcome becomes tool output.
 * A streaming program sees the call start before the sandbox runs. */
static void run_call(struct run *r, struct shim_call *c)
{
    const char *why = NULL, *note, *fnote;
    struct shim_exec_stop stop = {exec_stop, r};
    int rc = 0, renewed;

    c->executed = 1;
    shim_step_ran(&r->step);
    if (!c->ci_id[0]) /* else announced while the model wrote it */
        shim_id_make(c->ci_id, sizeof(c->ci_id), "ci_", 48);
    c->code = shim_conv_parse_code(c->arguments, &why);
    if (c->code && !r->box && (rc = open_box(r)) < 0) {
        shim_session_close(r->box);
        r->box = NULL;
    }
    if (r->box)
        snprintf(c->container_id, sizeof(c->container_id), "%s",
                 shim_session_container_id(r->box));
    else if (!c->container_id[0])
        shim_id_make(c->container_id, sizeof(c->container_id), "cntr_", 48);
    if (r->streaming)
        shim_stream_exec_begin(&r->st, c);
    if (!c->code) {
        c->output = join3("Error: ", why,
                          ". Call the tool again with a JSON object such as "
                          "{\"code\": \"print(1 + 1)\"}.");
        c->status = "failed";
    } else if (r->refused && !r->box) { /* the request ends with the refusal */
        c->output = join3("Error: ", r->refusal, " The code was not run.");
        c->status = "failed";
    } else if (rc < 0) {
        c->output = join3("Error: the sandbox could not be started (", strerror(-rc),
                          "); the code was not run.");
        c->status = "failed";
    } else if ((rc = shim_session_exec(r->box, c->code, strlen(c->code), &stop,
                                       &c->res)) < 0) {
        c->output = join3("Error: the sandbox failed (", strerror(-rc),
                          "); the code may not have run.");
        c->status = "failed";
    } else {
        /* the sandbox may have been restarted: report the container used,
         * keep its files there (the old one's are not this sandbox's), and
         * put a bound container's back (after what the new one wrote is
         * kept) */
        snprintf(c->container_id, sizeof(c->container_id), "%s",
                 shim_session_container_id(r->box));
        renewed = shim_session_take_renewed(r->box) || strcmp(c->container_id, r->files.cid);
        if (renewed && !r->bound)
            files_again(r);
        if (c->res.files_changed)
            shim_files_sync(&r->files, r->cfg, r->identity, r->box, c->res.files, c->res.nfiles);
        if (renewed && r->bound)
            files_again(r);
        note = shim_session_take_note(r->box);
        fnote = shim_files_take_note(&r->files);
        c->output = join3(note ? note : "", fnote ? fnote : "", c->res.logs ? c->res.logs : "");
        c->status = c->res.status == SHIM_EXEC_TIMEOUT  ? "incomplete"
                    : c->res.status == SHIM_EXEC_FAILED ? "failed"
                                                        : "completed";
        LOG_INFO("execution %d: %s, %zu bytes of output, %.3f s", r->step.executed,
                 c->status, c->res.logs_len, c->res.seconds);
    }
    if (r->streaming)
        shim_stream_exec_end(&r->st, c);
    shim_trace_exec(r->id, c);
    note_call(r, c);
}

static CURLcode oom(struct run *r)
{
    return shim_sink_fail(&r->sink, CURLE_OUT_OF_MEMORY, "codeshim: out of memory");
}

/* An OpenAI-shaped error answer of codeshim's own, whole (the caller
 * logs it as fits). */
static CURLcode send_error(struct run *r, long status, const char *msg, const char *type,
                           const char *param, const char *code)
{
    cJSON *err = shim_json_error(msg, type, param, code);
    char *body = err ? cJSON_PrintUnformatted(err) : NULL;
    CURLcode rc;

    rc = body ? shim_sink_whole(&r->sink, status, CURL_HTTP_VERSION_1_1, NULL, 0,
                                "application/json", body, strlen(body))
              : oom(r);
    free(body);
    cJSON_Delete(err);
    return rc;
}

/* The settings this request's code runs under (a named sandbox of
 * CODESHIM_CONFIG, or the environment's); NULL once the program has an
 * OpenAI-shaped error saying why it cannot have them. */
static const struct shim_config *pick_settings(struct run *r, const cJSON *req)
{
    int named, status;
    const char *name = shim_conv_sandbox_name(req, &named);
    char why[1024];
    const struct shim_config *cfg = shim_config_sandbox(name, named, why, sizeof(why), &status);

    if (cfg)
        return cfg;
    /* a configuration error (500) was logged once by config.c; a request's
     * own mistake (400) is told each time */
    if (status == 500)
        LOG_INFO("answered 500 without sending the request: %s", why);
    else
        LOG_WARN("answered %d without sending the request: %s", status, why);
    send_error(r, status, why, status == 500 ? "server_error" : "invalid_request_error",
               status == 500 ? NULL : named ? "metadata.codeshim_sandbox" : "tools.container",
               status == 500 ? "codeshim_config" : "unknown_sandbox");
    return NULL;
}

/* The upstream's own answer, as received (errors, unknown shapes). */
static CURLcode deliver_raw(struct run *r, const struct shim_http_reply *rep)
{
    return shim_sink_whole(&r->sink, rep->status, rep->http_version, rep->head.data,
                           rep->head.len, rep->content_type[0] ? rep->content_type : NULL,
                           rep->body.data ? rep->body.data : "", rep->body.len);
}

static CURLcode deliver_json(struct run *r, const struct shim_http_reply *rep,
                             const cJSON *answer)
{
    char *json = cJSON_PrintUnformatted(answer);
    CURLcode rc;

    if (!json)
        return oom(r);
    rc = shim_sink_whole(&r->sink, rep->status, rep->http_version, rep->head.data,
                         rep->head.len, "application/json", json, strlen(json));
    free(json);
    return rc;
}

static int sink_write(void *ctx, const char *p, size_t n)
{
    struct run *r = ctx;
    return shim_sink_body(&r->sink, p, n) == CURLE_OK ? 0 : -1;
}

static cJSON *annotate_live(void *ctx, const char *text)
{
    struct run *r = ctx;
    return shim_files_annotations(&r->files, text);
}

/* SSE starts once the first upstream reply is known to be good, so an
 * upstream error still reaches the program as that status and body. */
static void start_stream(struct run *r, const struct shim_http_reply *rep,
                         const cJSON *reply)
{
    if (shim_sink_begin(&r->sink, rep->status, rep->http_version, rep->head.data,
                        rep->head.len, "text/event-stream", -1) != CURLE_OK)
        return;
    shim_stream_init(&r->st, r->kind, &r->cv, sink_write, r);
    r->st.annotate = annotate_live;
    r->st.annotate_ctx = r;
    r->streaming = 1;
    shim_stream_start(&r->st, r->req, reply);
}

/* A failure after the stream began ends it with a failure event. */
static CURLcode fail_stream(struct run *r, const char *code, const char *message)
{
    shim_stream_fail(&r->st, code, message);
    return shim_sink_end(&r->sink);
}

/* An upstream answer codeshim cannot act on: a clear error, as a failed
 * stream once the stream began, else as a 502 with OpenAI's error body. */
static CURLcode broken_reply(struct run *r, const char *msg)
{
    LOG_WARN("%s", msg);
    if (r->streaming)
        return fail_stream(r, "upstream_error", msg);
    return send_error(r, 502, msg, "server_error", NULL, "upstream_error");
}

/* An upstream answer that JSON readers would read differently (a key
 * twice, U+0000): codeshim acts on none of it, and does not hand it over
 * either (the program would read it its own way, perhaps as a call of
 * codeshim's tool): a clear error instead. */
static CURLcode ambiguous_reply(struct run *r, const struct shim_json_flaw *why)
{
    char flaw[128], msg[400];

    shim_json_flaw_text(why, flaw, sizeof(flaw));
    snprintf(msg, sizeof(msg),
             "codeshim could not read the model server's answer: %s, and JSON readers "
             "disagree about what that says; nothing in it was run or passed on.", flaw);
    return broken_reply(r, msg);
}

/* An upstream answer past the values codeshim reads of a body (no tree was
 * built for it): the transfer fails as for a body past
 * CODESHIM_MAX_RESPONSE, saying why in the program's error buffer. */
static CURLcode unread_reply(struct run *r, const struct shim_json_flaw *why)
{
    char flaw[128], msg[CURL_ERROR_SIZE];

    shim_json_flaw_text(why, flaw, sizeof(flaw));
    snprintf(msg, sizeof(msg), "codeshim: the model server's answer was not read: %s; "
             "nothing in it was run or passed on", flaw);
    LOG_WARN("%s", msg);
    if (r->streaming)
        return fail_stream(r, "upstream_error", msg);
    return shim_sink_fail(&r->sink, CURLE_FILESIZE_EXCEEDED, msg);
}

/* What a later request continuing from this answer (previous_response_id)
 * will need: see chain.h. Only APIs that continue by id (ops->call_output), and only when stored upstream. */
static void remember(struct run *r, const cJSON *reply, const struct shim_call *calls,
                     size_t n, int foreign)
{
    const char *up_id = shim_json_str(reply, "id");
    const char *ans_id = r->streaming ? r->st.id : up_id;
    cJSON *owed = cJSON_CreateArray();
    size_t i;

    if (!r->ops->call_output || !up_id || !ans_id ||
        cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r->req, "store"))) {
        cJSON_Delete(owed);
        return;
    }
    for (i = 0; foreign && i < n; i++)
        if (calls[i].executed || calls[i].skipped)
            cJSON_AddItemToArray(owed, r->ops->call_output(&calls[i]));
    if (strcmp(ans_id, up_id) || owed->child)
        shim_chain_save(r->cfg, r->identity, ans_id, up_id, owed);
    else
        shim_chain_forget(r->cfg, r->identity, ans_id);
    cJSON_Delete(owed);
}

static int exec_cap(const struct shim_config *cfg, const cJSON *req)
{
    /* The request may lower the cap (Responses max_tool_calls), never raise it. */
    long long m = shim_json_int(req, "max_tool_calls");
    return m > 0 && m < cfg->max_loops ? (int)m : cfg->max_loops;
}

/* The program's transfer fails for lack of memory, in whichever form
 * it has taken (a stream already begun, or not). */
static CURLcode stop_oom(struct run *r)
{
    return r->streaming ? fail_stream(r, "server_error", "codeshim: out of memory") : oom(r);
}

/* The trace of this turn's upstream call (body: its parsed reply, if any). */
static void trace_turn(struct run *r, const struct shim_http_reply *rep, const cJSON *body,
                       CURLcode rc, const char *errbuf)
{
    shim_trace_upstream(r->id, r->turns, r->kind == SHIM_API_CHAT, rep, body, rc, errbuf);
}

/* The live relay's hooks (live.h) and the upstream's event callback. */
static int live_begin(void *ctx, const cJSON *first)
{
    struct run *r = ctx;

    if (!r->streaming)
        start_stream(r, r->cur_rep, first);
    return r->streaming ? 0 : -1;
}

static void live_container(void *ctx, char *out, size_t outsz)
{
    struct run *r = ctx;

    if (!r->box && open_box(r) < 0) {
        shim_session_close(r->box);
        r->box = NULL;
    }
    if (r->box)
        snprintf(out, outsz, "%s", shim_session_container_id(r->box));
    else
        shim_id_make(out, outsz, "cntr_", 48);
}

static int on_event(void *ctx, const char *name, const char *data, size_t len)
{
    struct run *r = ctx;
    return shim_live_event(&r->live, name, data, len);
}

/* Sends one upstream request, streamed when the program's is: events are
 * relayed while they arrive. */
static CURLcode post(struct run *r, struct shim_upstream *u, const char *body,
                     struct shim_http_reply *rep, char *errbuf)
{
    CURLcode rc;

    r->live_turn = 0;
    if (!r->live_on)
        return shim_upstream_post(u, body, strlen(body), rep, errbuf);
    shim_live_turn_begin(&r->live, shim_step_room(&r->step));
    r->cur_rep = rep;
    rc = shim_upstream_post_stream(u, body, strlen(body), rep, errbuf, on_event, r,
                                   &r->live_turn);
    r->cur_rep = NULL;
    return rc;
}

/* Makes one upstream call and reads its answer into *reply (NULL when
 * it is not JSON). Returns 1, or 0 when the program's answer has been
 * delivered instead (*rc set): the call failed, the upstream answered an
 * error status, or its body must not be acted on. */
static int call_upstream(struct run *r, struct shim_upstream *u, const cJSON *up,
                         struct shim_http_reply *rep, cJSON **reply, CURLcode *rc)
{
    char errbuf[CURL_ERROR_SIZE], msg[160];
    char *body = cJSON_PrintUnformatted(up);
    struct shim_json_flaw flaw;
    int err;

    *reply = NULL;
    if (!body) {
        *rc = stop_oom(r);
        return 0;
    }
    shim_http_reply_free(rep);
    r->turns++;
    shim_upstream_set_match(u, r->req, r->calls);
    *rc = post(r, u, body, rep, errbuf);
    free(body);
    if (r->sink.rc != CURLE_OK) { /* the program stopped reading the stream */
        trace_turn(r, rep, NULL, *rc, errbuf);
        *rc = shim_sink_end(&r->sink);
        return 0;
    }
    if (*rc != CURLE_OK) {
        trace_turn(r, rep, NULL, *rc, errbuf);
        if (r->live.err[0]) /* an event the relay could not read */
            *rc = broken_reply(r, r->live.err);
        else
            *rc = r->streaming ? fail_stream(r, "upstream_unreachable", errbuf)
                               : shim_sink_fail(&r->sink, *rc, errbuf);
        return 0;
    }
    if (rep->status < 200 || rep->status >= 300) {
        trace_turn(r, rep, NULL, CURLE_OK, errbuf);
        LOG_INFO("upstream answered %ld; handing it to the program", rep->status);
        snprintf(msg, sizeof(msg), "the model server answered HTTP %ld", rep->status);
        *rc = r->streaming ? fail_stream(r, "upstream_error", msg) : deliver_raw(r, rep);
        return 0;
    }
    if (r->live_turn) {
        *reply = shim_live_take_reply(&r->live);
        trace_turn(r, rep, *reply, CURLE_OK, errbuf);
        if (!*reply)
            *rc = broken_reply(r, r->live.err);
        return *reply != NULL;
    }
    err = shim_json_read(rep->body.data, rep->body.len, reply, &flaw);
    trace_turn(r, rep, *reply, CURLE_OK, errbuf); /* the tree the loop reads */
    if (err == -ENOMEM)
        *rc = stop_oom(r);
    else if (err == -EEXIST)
        *rc = ambiguous_reply(r, &flaw);
    else if (err == -E2BIG)
        *rc = unread_reply(r, &flaw);
    return err != -ENOMEM && err != -EEXIST && err != -E2BIG;
}

/* Runs the calls the step picked (step.h), in order, while the program
 * still reads; the skipped ones are noted after them, as the cassette
 * saw them. */
static void run_calls(struct run *r, struct shim_turn *t)
{
    size_t i;

    for (i = 0; i < t->nrun && shim_sink_ok(&r->sink); i++)
        run_call(r, &t->calls[i]);
    for (i = t->nrun; i < t->n && shim_sink_ok(&r->sink); i++)
        note_call(r, &t->calls[i]);
}

/* The program's answer from the last reply. */
static CURLcode answer(struct run *r, const struct shim_http_reply *rep, const cJSON *reply,
                       const struct shim_call *calls, size_t n, int foreign, int capped)
{
    cJSON *ans = r->ops->finish(r->req, reply, calls, n, &r->cv, capped);
    CURLcode rc;

    if (!ans)
        return stop_oom(r);
    remember(r, reply, calls, n, foreign);
    if (r->kind == SHIM_API_RESPONSES)
        shim_files_annotate(&r->files, ans);
    if (r->streaming) {
        shim_stream_finish(&r->st, ans);
        rc = shim_sink_end(&r->sink);
    } else {
        rc = deliver_json(r, rep, ans);
    }
    cJSON_Delete(ans);
    return rc;
}

/* A session refused (r->refused): 429 for a per-user cap (OpenAI's
 * rate-limit shape: the program may retry later), 500 for a runtime
 * directory that is not private; a failure event once streaming. */
static CURLcode refusal(struct run *r)
{
    int cap = r->refused == SHIM_SESSION_USER_CAP;

    LOG_WARN("%s", r->refusal);
    if (r->streaming)
        return fail_stream(r, cap ? "rate_limit_exceeded" : "server_error", r->refusal);
    return send_error(r, cap ? 429 : 500, r->refusal, cap ? "requests" : "server_error", NULL,
                      cap ? "rate_limit_exceeded" : "codeshim_runtime_dir");
}

/* One upstream round trip and what follows from it (step.h decides).
 * Returns 1 to go on (up holds the next request), 0 when the program's
 * answer has been delivered (*rc set). */
static int step(struct run *r, struct shim_upstream *u, cJSON *up,
                struct shim_http_reply *rep, CURLcode *rc)
{
    struct shim_turn t;
    enum shim_step_next next;
    cJSON *reply;

    if (!call_upstream(r, u, up, rep, &reply, rc))
        return 0;
    if (shim_step_read(&r->step, reply, &t) < 0) {
        LOG_WARN("upstream answer is not a %s object; handing it over as is", r->ops->name);
        *rc = r->streaming ? fail_stream(r, "upstream_error",
                                         "the model server's answer could not be read")
                           : deliver_raw(r, rep);
        cJSON_Delete(reply);
        return 0;
    }
    if (r->cv.stream && !r->streaming)
        start_stream(r, rep, reply);
    if (r->streaming && r->live_turn)
        shim_live_turn_end(&r->live, reply, t.calls, t.n);
    else if (r->streaming)
        shim_stream_turn(&r->st, reply);
    run_calls(r, &t);
    next = shim_step_next(&r->step, up, reply, &t,
                          (r->sink.rc != CURLE_OK ? SHIM_STEP_STOP : 0) |
                              (r->refused ? SHIM_STEP_REFUSE : 0));
    if (next == SHIM_STEP_STOPPED)
        *rc = shim_sink_end(&r->sink);
    else if (next == SHIM_STEP_REFUSED)
        *rc = refusal(r);
    else if (next == SHIM_STEP_FINAL)
        LOG_WARN("execution cap (%d) reached; asking for a final answer", r->cv.max_exec);
    else if (shim_step_answers(next))
        *rc = answer(r, rep, reply, t.calls, t.n, t.foreign, t.capped);
    cJSON_Delete(reply);
    shim_turn_free(&t);
    return next == SHIM_STEP_AGAIN || next == SHIM_STEP_FINAL;
}

/* The request's own files (files.h): fetched now, so a file the upstream
 * does not have is the program's 400 before anything runs; the model is
 * told where they will be. 0 once that 400 is delivered. */
static int bring_files(struct run *r, struct shim_upstream *u, cJSON *up, CURLcode *rc)
{
    const char *param = NULL;
    char why[600];
    int err = shim_files_inputs(&r->in, r->cfg, r->req, u, why, sizeof(why), &param);

    if (err == 0) {
        shim_files_describe(up, r->cv.tool_name, &r->in);
        return 1;
    }
    if (err == -ENOMEM) {
        *rc = oom(r);
        return 0;
    }
    LOG_WARN("answered 400 without sending the request: %s", why);
    *rc = send_error(r, 400, why, "invalid_request_error", param, "invalid_file");
    return 0;
}

/* The upstream is asked to stream too: with usage for Chat (codeshim sums
 * it whatever the program asked for), and with the program's choice of
 * obfuscation padding, the one stream option that is the program's. */
static void ask_stream(struct run *r, cJSON *up)
{
    static const struct shim_live_hooks hooks = {live_begin, live_container, NULL};
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(r->req, "stream_options"), "include_obfuscation");
    struct shim_live_hooks h = hooks;
    cJSON *so = cJSON_CreateObject();

    h.ctx = r;
    shim_json_set(up, "stream", cJSON_CreateTrue());
    if (r->kind == SHIM_API_CHAT)
        cJSON_AddTrueToObject(so, "include_usage");
    if (cJSON_IsBool(ob))
        cJSON_AddItemToObject(so, "include_obfuscation", cJSON_Duplicate(ob, 0));
    if (so && so->child)
        shim_json_set(up, "stream_options", so);
    else
        cJSON_Delete(so);
    shim_live_init(&r->live, r->kind, &r->cv, &r->st, &h, r->cfg->max_response);
    r->live_on = 1;
}

CURLcode shim_loop_run(const struct shim_curl_api *api, CURL *h,
                       const struct shim_handle_view *v, enum shim_api kind,
                       const cJSON *req, double t0)
{
    struct run r;
    struct shim_upstream *u = NULL;
    struct shim_http_reply rep;
    cJSON *up;
    CURLcode rc = CURLE_OK;
    int orc = 0;

    memset(&r, 0, sizeof(r));
    memset(&rep, 0, sizeof(rep));
    shim_id_make(r.id, sizeof(r.id), "req_", 16);
    shim_sink_init(&r.sink, h, v, t0);
    if (!(r.cfg = pick_settings(&r, req)))
        return r.sink.rc;
    r.kind = kind;
    r.req = req;
    r.v = v;
    r.ops = kind == SHIM_API_CHAT ? &shim_chat_ops : &shim_responses_ops;
    r.cv.max_exec = exec_cap(r.cfg, req);
    shim_step_init(&r.step, r.ops, &r.cv);
    up = r.ops->prepare(req, &r.cv);
    identify(&r);
    if (up && kind == SHIM_API_RESPONSES && shim_chain_apply(r.cfg, r.identity, up) < 0) {
        rc = send_error(&r, 500, shim_store_why(), "server_error", "previous_response_id",
                        "codeshim_runtime_dir");
        goto out;
    }
    if (!up || (orc = shim_upstream_open(api, h, v, kind, &u)) < 0) {
        rc = orc == -ENOTSUP ? shim_sink_fail(&r.sink, CURLE_FAILED_INIT, SHIM_UPSTREAM_NODUP)
                             : oom(&r);
        goto out;
    }
    r.matched = shim_upstream_matches(u);
    if (!bring_files(&r, u, up, &rc))
        goto out;
    if (r.cv.stream && shim_upstream_streams(u))
        ask_stream(&r, up);
    if (shim_log_enabled(SHIM_LOG_INFO)) {
        char url[1024];
        shim_url_redact(v->url, url, sizeof(url));
        LOG_INFO("intercepted %s request to %s (tool \"%s\"%s)", r.ops->name, url,
                 r.cv.tool_name, r.cv.stream ? ", streaming" : "");
    }
    if (shim_trace_enabled()) {
        char url[1024];
        shim_url_redact(v->url, url, sizeof(url));
        shim_trace_request(r.id, r.ops->name, url, shim_json_str(req, "model"), r.cv.stream);
    }
    while (step(&r, u, up, &rep, &rc) && shim_sink_ok(&r.sink))
        ;
out:
    LOG_INFO("%s request done: %d upstream calls, %d executions, result %d", r.ops->name,
             r.turns, r.step.executed, (int)rc);
    shim_trace_answer(r.id, r.sink.info.response_code, r.step.executed, r.turns,
                      shim_clock_s() - t0, rc, r.sink.message);
    if (r.streaming)
        shim_stream_free(&r.st);
    if (r.live_on)
        shim_live_free(&r.live);
    shim_http_reply_free(&rep);
    shim_upstream_close(u);
    shim_files_free(&r.files);
    shim_files_inputs_free(&r.in);
    shim_session_close(r.box);
    shim_conv_free(&r.cv);
    cJSON_Delete(r.calls);
    cJSON_Delete(up);
    return rc;
}
