/* upstream.c - see upstream.h. */
#include "curl/upstream.h"

#include "api/match.h"
#include "api/offline.h"
#include "api/script.h"
#include "api/sse.h"
#include "base/clock.h"
#include "base/frame.h"
#include "base/guard.h"
#include "base/json.h"
#include "base/log.h"
#include "base/yamljson.h"
#include "curl/xfer.h"
#include "store/cassette.h"
#include "store/store.h"
#include "system/config.h"
#include "system/http.h"
#include "system/url.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HEAD_CAP SHIM_HTTP_HEAD_CAP

struct shim_upstream;

/* Where a call goes (curl's lib/ backend pattern): the network through the
 * program's libcurl, the offline model, or a recording. post fills r,
 * already initialised, and returns a CURLcode with errbuf on failure. */
struct transport {
    const char *name;
    CURLcode (*post)(struct shim_upstream *u, const char *body, size_t len,
                     struct shim_http_reply *r, char *errbuf);
    /* NULL: the transport answers whole (the loop then synthesises) */
    CURLcode (*post_stream)(struct shim_upstream *u, const char *body, size_t len,
                            struct shim_http_reply *r, char *errbuf);
};

/* A streamed answer being read (network_post_stream, replay). */
enum { SM_OFF, SM_UNDECIDED, SM_SSE, SM_WHOLE };
enum { SW_NONE, SW_TOTAL, SW_EVENT, SW_STOPPED };

struct shim_upstream {
    const struct transport *t;
    enum shim_api kind;
    const struct shim_config *cfg;
    char *url;
    const struct shim_curl_api *api;
    CURL *h;
    struct curl_slist *headers;
    size_t max_response;
    struct shim_http_reply *cur; /* reply being filled by the network call */
    struct shim_http_sink sink;  /* that call's capture (http.h) */
    /* streaming */
    int smode;   /* SM_*: how the body of the current reply is read */
    int swhy;    /* SW_*: why reading a stream stopped */
    struct shim_sse sse;
    shim_upstream_event_fn fn;
    void *fn_ctx;
    int keep_stream;  /* a stream's bytes are kept in the reply: recording */
    cJSON *match;     /* what a cassette matches the next call on (match.h) */
    struct shim_xfer *x; /* the program's limits on its transfer (xfer.h), or NULL */
};

static int is_sse_type(const char *ct)
{
    return !strncasecmp(ct, "text/event-stream", 17);
}

static int sse_event(void *ctx, const char *name, const char *data, size_t len)
{
    struct shim_upstream *u = ctx;
    return u->fn(u->fn_ctx, name, data, len) ? -ECANCELED : 0;
}

/* Stream bytes (the core counted them against the cap): kept only when
 * recording, parsed at once. 0 or -1 (u->swhy says why). */
static int stream_bytes(void *ud, const char *p, size_t n)
{
    struct shim_upstream *u = ud;
    int rc;

    if (u->keep_stream && shim_buf_add(u->sink.body, p, n)) {
        u->swhy = SW_TOTAL;
        return -1;
    }
    rc = shim_sse_feed(&u->sse, p, n);
    if (rc)
        u->swhy = rc == -ECANCELED ? SW_STOPPED : SW_EVENT;
    return rc ? -1 : 0;
}

/* At the first body byte of a streaming request: an SSE answer (2xx,
 * text/event-stream) is parsed as it comes, anything else kept whole. */
/* What libcurl says of the answer so far: status, HTTP version, type. */
static void take_info(struct shim_upstream *u, struct shim_http_reply *r)
{
    const char *ct = NULL;

    u->api->easy_getinfo(u->h, CURLINFO_RESPONSE_CODE, &r->status);
    u->api->easy_getinfo(u->h, CURLINFO_HTTP_VERSION, &r->http_version);
    u->api->easy_getinfo(u->h, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        snprintf(r->content_type, sizeof(r->content_type), "%s", ct);
}

/* The core's question at the first body byte: pass it to the SSE
 * parser? Only when streaming was asked for and the answer is SSE. */
static int decide(void *ud, long status)
{
    struct shim_upstream *u = ud;
    struct shim_http_reply *r = u->cur;

    (void)status; /* libcurl's, as recorded */
    if (u->smode != SM_UNDECIDED)
        return 0;
    take_info(u, r);
    u->smode = r->status >= 200 && r->status < 300 && is_sse_type(r->content_type) ? SM_SSE
                                                                                    : SM_WHOLE;
    return u->smode == SM_SSE;
}

/* One transfer of the duplicate through the core (http.h): the final
 * head and the body into r under its caps, an SSE answer to the parser,
 * the stop or cut said in u->swhy. Guard up. */
static CURLcode perform(struct shim_upstream *u, struct shim_http_reply *r)
{
    CURLcode rc;

    memset(&u->sink, 0, sizeof(u->sink));
    u->cur = r;
    u->sink.head = &r->head;
    u->sink.body = &r->body;
    u->sink.max_body = r->body.cap;
    u->sink.pass = decide;
    u->sink.on_bytes = stream_bytes;
    u->sink.ud = u;
    rc = shim_http_perform(u->api, u->h, &u->sink);
    if (u->smode == SM_SSE && u->sink.cut == SHIM_HTTP_CUT_CAP)
        u->swhy = SW_TOTAL;
    u->cur = NULL;
    return rc;
}

static int header_is(const char *line, const char *name)
{
    size_t n = strlen(name);
    return !strncasecmp(line, name, n) && line[n] == ':';
}

/* The program's headers, minus those that describe its body (ours differs)
 * plus "Expect:" (no 100-continue round trip on big bodies). */
static int copy_headers(struct shim_upstream *u, const struct curl_slist *src)
{
    static const char *const drop[] = {"Content-Length", "Transfer-Encoding", "Expect"};
    struct curl_slist *l = NULL, *t;
    int has_ctype = 0;
    size_t i;

    for (; src; src = src->next) {
        int skip = 0;
        if (!src->data)
            continue;
        for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
            skip |= header_is(src->data, drop[i]);
        has_ctype |= header_is(src->data, "Content-Type");
        if (skip)
            continue;
        t = u->api->slist_append(l, src->data);
        if (!t)
            goto nomem;
        l = t;
    }
    if (!has_ctype) {
        t = u->api->slist_append(l, "Content-Type: application/json");
        if (!t)
            goto nomem;
        l = t;
    }
    t = u->api->slist_append(l, "Expect:");
    if (!t)
        goto nomem;
    u->headers = t;
    return 0;
nomem:
    u->api->slist_free_all(l);
    return -ENOMEM;
}

/* libcurl 7.88 cannot duplicate a handle whose COPYPOSTFIELDS had no size
 * (it copies (size_t)-1 bytes). For the duplication only, the body becomes
 * a plain POSTFIELDS pointer to codeshim's copy of the same bytes; then the
 * program's COPYPOSTFIELDS is set again as the program set it, so its
 * handle ends as it was: libcurl's own copy of the string, no size, POST.
 * Called with the guard up: nothing here is recorded. */
static CURL *dup_unsized_copy(const struct shim_curl_api *api, CURL *h,
                              const struct shim_handle_view *v)
{
    CURL *d;

    if (api->easy_setopt(h, CURLOPT_POSTFIELDS, v->body) != CURLE_OK)
        return NULL;
    d = api->easy_duphandle(h);
    if (api->easy_setopt(h, CURLOPT_COPYPOSTFIELDS, v->body) != CURLE_OK) {
        /* never leave libcurl pointing at memory codeshim frees */
        api->easy_setopt(h, CURLOPT_POSTFIELDS, "");
        LOG_ERR("out of memory restoring the program's request body");
    }
    return d;
}

/* The private handle: a duplicate of the program's, so upstream calls keep
 * every transport setting it has (resolve, connect-to, proxy, Unix socket,
 * TLS, timeouts, protocols, auth). There is no fallback to a fresh handle:
 * that would send the key without them. */
static CURL *dup_program_handle(const struct shim_curl_api *api, CURL *h,
                                const struct shim_handle_view *v)
{
    CURL *d;

    shim_guard_enter();
    d = v->body_copied_unsized ? dup_unsized_copy(api, h, v) : api->easy_duphandle(h);
    shim_guard_leave();
    if (!d)
        LOG_ERR("libcurl cannot duplicate the program's handle: the request is not sent");
    return d;
}

/* An OpenAI-shaped error answer that codeshim makes (the offline model's
 * failure, a replay's or a cassette's miss, the script's). */
static void error_reply(struct shim_http_reply *r, long status, const char *type,
                        const char *code, const char *message)
{
    cJSON *e = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(e, "error");
    char *text;

    cJSON_AddStringToObject(o, "message", message);
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNullToObject(o, "param");
    if (code)
        cJSON_AddStringToObject(o, "code", code);
    else
        cJSON_AddNullToObject(o, "code");
    text = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    shim_http_reply_local(r, status, text ? text : "{}");
    free(text);
}

/* A model made in-process (offline, script) answers rep as a 200, or
 * failure as a 500 when rep is NULL or cannot be written; rep is freed. */
static void local_answer(struct shim_http_reply *r, cJSON *rep, const char *failure)
{
    char *text = rep ? cJSON_PrintUnformatted(rep) : NULL;

    if (text)
        shim_http_reply_local(r, 200, text);
    else
        error_reply(r, 500, "server_error", NULL, failure);
    free(text);
    cJSON_Delete(rep);
}

static CURLcode offline_post(struct shim_upstream *u, const char *body, size_t len,
                             struct shim_http_reply *r, char *errbuf)
{
    cJSON *req = shim_json_parse(body, len);

    (void)errbuf;
    snprintf(r->source, sizeof(r->source), "offline");
    local_answer(r, req ? shim_offline_reply(u->kind, req) : NULL,
                 "codeshim offline model failed");
    cJSON_Delete(req);
    return CURLE_OK;
}

static CURLcode replay_post(struct shim_upstream *u, const char *body, size_t len,
                            struct shim_http_reply *r, char *errbuf)
{
    char key[65], msg[512];
    int occ, rc;

    (void)errbuf;
    shim_cassette_key(u->url, body, len, key, &occ);
    rc = shim_cassette_load(u->cfg->replay_dir, key, occ, r, u->max_response);
    if (rc == 0) {
        snprintf(r->source, sizeof(r->source), "replay %.140s", u->cfg->replay_dir);
        return CURLE_OK;
    }
    shim_http_reply_init(r, HEAD_CAP, u->max_response);
    LOG_ERR("replay: no recorded exchange %s (occurrence %d) in %s", key, occ,
            u->cfg->replay_dir);
    snprintf(msg, sizeof(msg), "codeshim replay: no recorded exchange matches this request "
             "(key %s, occurrence %d)", key, occ);
    error_reply(r, 500, "codeshim_replay_miss", "replay_miss", msg);
    return CURLE_OK;
}

/* CODESHIM_RECORD: what the network answered, saved as a cassette. */
static void record(struct shim_upstream *u, const char *body, size_t len,
                   const struct shim_http_reply *r)
{
    char key[65];
    int occ, rc;

    shim_cassette_key(u->url, body, len, key, &occ);
    rc = shim_cassette_save(u->cfg->record_dir, key, occ, u->url, body, len, r);
    if (rc < 0)
        LOG_WARN("record: cannot save exchange %s: %s", key, strerror(-rc));
}

/* Why reading the stream stopped, as the transfer's result. */
static CURLcode stream_failure(struct shim_upstream *u, char *errbuf)
{
    if (u->swhy == SW_STOPPED) { /* the loop stopped it and knows why */
        snprintf(errbuf, CURL_ERROR_SIZE, "codeshim: the stream was stopped");
        return CURLE_WRITE_ERROR;
    }
    snprintf(errbuf, CURL_ERROR_SIZE,
             u->swhy == SW_TOTAL ? "codeshim: upstream response larger than %zu bytes "
                                   "(CODESHIM_MAX_RESPONSE)"
                                 : "codeshim: an upstream stream line or event larger than "
                                   "%zu bytes (CODESHIM_MAX_RESPONSE), or malformed",
             u->max_response);
    return CURLE_FILESIZE_EXCEEDED;
}

/* The duplicate's progress: the program's transfer's (xfer.h), whose
 * deadline or callback may stop the call. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    struct shim_upstream *u = ud;

    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return shim_xfer_check(u->x) != CURLE_OK;
}

/* Each call gets the time left of the program's CURLOPT_TIMEOUT(_MS) (the
 * duplicate inherited the whole of it); CURLE_OPERATION_TIMEDOUT without
 * a call when none is left. Guard up. */
static CURLcode bound_call(struct shim_upstream *u, char *errbuf)
{
    long left = shim_xfer_left_ms(u->x);

    if (!u->x || !u->x->lim.timeout_ms)
        return CURLE_OK;
    if (left < 0 || shim_xfer_check(u->x) != CURLE_OK) {
        snprintf(errbuf, CURL_ERROR_SIZE, "%s", u->x->message[0] ? u->x->message
                 : "Operation timed out");
        return u->x->rc != CURLE_OK ? u->x->rc : CURLE_OPERATION_TIMEDOUT;
    }
    u->api->easy_setopt(u->h, CURLOPT_TIMEOUT_MS, left);
    return CURLE_OK;
}

static CURLcode network_post(struct shim_upstream *u, const char *body, size_t len,
                             struct shim_http_reply *r, char *errbuf)
{
    CURLcode rc;

    snprintf(r->source, sizeof(r->source), "network");
    if ((rc = bound_call(u, errbuf)) != CURLE_OK)
        return rc;
    shim_guard_enter();
    u->api->easy_setopt(u->h, CURLOPT_ERRORBUFFER, errbuf);
    u->api->easy_setopt(u->h, CURLOPT_POSTFIELDS, body);
    u->api->easy_setopt(u->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    rc = perform(u, r);
    if (rc == CURLE_OK)
        take_info(u, r);
    u->api->easy_setopt(u->h, CURLOPT_ERRORBUFFER, (char *)NULL);
    shim_guard_leave();
    if (rc == CURLE_WRITE_ERROR && u->smode == SM_SSE)
        rc = stream_failure(u, errbuf);
    else if (rc == CURLE_WRITE_ERROR && u->sink.cut == SHIM_HTTP_CUT_CAP) {
        snprintf(errbuf, CURL_ERROR_SIZE,
                 "codeshim: upstream response larger than %zu bytes "
                 "(CODESHIM_MAX_RESPONSE)", r->body.cap);
        rc = CURLE_FILESIZE_EXCEEDED;
    }
    if (rc != CURLE_OK) {
        LOG_WARN("upstream call failed: %s (%d)", errbuf, (int)rc);
        return rc;
    }
    LOG_DEBUG("upstream answered %ld, %zu bytes", r->status, r->body.len);
    if (u->cfg->record_dir[0])
        record(u, body, len, r);
    return CURLE_OK;
}

/* The answer arrives through on_body, which parses it as SSE when it is. */
static CURLcode network_post_stream(struct shim_upstream *u, const char *body, size_t len,
                                    struct shim_http_reply *r, char *errbuf)
{
    CURLcode rc = network_post(u, body, len, r, errbuf);

    if (rc == CURLE_OK && u->smode == SM_SSE && shim_sse_end(&u->sse)) {
        u->swhy = SW_STOPPED; /* only the last event's handler can fail here */
        rc = stream_failure(u, errbuf);
    }
    return rc;
}

/* A recorded stream is parsed from the file as the network's would be. */
static CURLcode feed_recorded(struct shim_upstream *u, CURLcode rc, struct shim_http_reply *r,
                              char *errbuf)
{
    if (rc != CURLE_OK || r->status < 200 || r->status >= 300 || !is_sse_type(r->content_type))
        return rc;
    u->smode = SM_SSE;
    if (r->body.len > u->max_response) {
        u->swhy = SW_TOTAL;
        return stream_failure(u, errbuf);
    }
    if (shim_sse_feed(&u->sse, r->body.data ? r->body.data : "", r->body.len) ||
        shim_sse_end(&u->sse)) {
        u->swhy = u->sse.err == -ECANCELED ? SW_STOPPED : SW_EVENT;
        return stream_failure(u, errbuf);
    }
    return CURLE_OK;
}

static CURLcode replay_post_stream(struct shim_upstream *u, const char *body, size_t len,
                                   struct shim_http_reply *r, char *errbuf)
{
    return feed_recorded(u, replay_post(u, body, len, r, errbuf), r, errbuf);
}

/* CODESHIM_CASSETTE: replay what matches; past that, by the record mode,
 * ask the network and record its answer, or answer the near miss. */
static void cassette_miss(struct shim_upstream *u, const char *why, struct shim_http_reply *r)
{
    char msg[900];

    snprintf(msg, sizeof(msg), "codeshim cassette (record mode %s): %s", u->cfg->record_mode,
             why);
    LOG_ERR("%s", msg);
    shim_http_reply_init(r, HEAD_CAP, u->max_response);
    error_reply(r, 500, "codeshim_replay_miss", "replay_miss", msg);
}

static CURLcode cassette_call(struct shim_upstream *u, const char *body, size_t len,
                              struct shim_http_reply *r, char *errbuf, int stream)
{
    const char *path = u->cfg->cassette, *mode = u->cfg->record_mode;
    char why[700];
    int idx = 0, rc = -ENOENT, all = !strcmp(mode, "all");
    int may_record = all || !strcmp(mode, "new") ||
                     (!strcmp(mode, "once") && !shim_cassette_existed(path));
    CURLcode crc;

    if (!u->match && !(u->match = shim_match_doc(NULL, NULL, NULL)))
        return CURLE_OUT_OF_MEMORY;
    if (!all)
        rc = shim_cassette_find(path, u->url, u->match, r, u->max_response, &idx, why,
                                sizeof(why));
    if (rc == 0) {
        snprintf(r->source, sizeof(r->source), "cassette %.120s #%d", path, idx);
        LOG_INFO("upstream call answered from the cassette %s, exchange %d", path, idx);
        return stream ? feed_recorded(u, CURLE_OK, r, errbuf) : CURLE_OK;
    }
    if (rc == -EPROTO || !may_record) {
        cassette_miss(u, why, r);
        return CURLE_OK;
    }
    u->keep_stream = 1;
    crc = stream ? network_post_stream(u, body, len, r, errbuf)
                 : network_post(u, body, len, r, errbuf);
    u->keep_stream = u->cfg->record_dir[0] != '\0';
    if (crc != CURLE_OK)
        return crc;
    if ((rc = shim_cassette_add(path, u->url, u->match, body, len, r, &idx)) < 0)
        LOG_WARN("cassette %s: cannot record the exchange: %s", path, strerror(-rc));
    else {
        snprintf(r->source, sizeof(r->source), "network, recorded as cassette %.100s #%d",
                 path, idx);
        LOG_INFO("upstream call recorded in the cassette %s as exchange %d", path, idx);
    }
    return CURLE_OK;
}

static CURLcode cassette_post(struct shim_upstream *u, const char *body, size_t len,
                              struct shim_http_reply *r, char *errbuf)
{
    return cassette_call(u, body, len, r, errbuf, 0);
}

static CURLcode cassette_post_stream(struct shim_upstream *u, const char *body, size_t len,
                                     struct shim_http_reply *r, char *errbuf)
{
    return cassette_call(u, body, len, r, errbuf, 1);
}

/* ---- CODESHIM_SCRIPT: the scripted model (script.h) ---- */

static struct {
    pthread_mutex_t lock;
    int loaded;
    struct shim_script *s;
    char err[560];
} g_script = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, ""};

#define SCRIPT_MAX_BYTES (4u << 20)

/* The script, read and parsed once per process (lock held). */
static struct shim_script *script_load(const char *path)
{
    char *text = NULL, why[400] = "";
    size_t len = 0;
    cJSON *doc = NULL;
    int rc;

    if (g_script.loaded)
        return g_script.s;
    g_script.loaded = 1;
    rc = shim_store_read_all(path, SCRIPT_MAX_BYTES, &text, &len);
    if (rc < 0)
        snprintf(why, sizeof(why), "cannot read it: %s", strerror(-rc));
    else if (!(doc = shim_yaml_to_json(text, len, why, sizeof(why))))
        ;
    else if (shim_script_parse(doc, &g_script.s, why, sizeof(why)) < 0)
        g_script.s = NULL;
    free(text);
    cJSON_Delete(doc);
    if (!g_script.s) {
        snprintf(g_script.err, sizeof(g_script.err), "CODESHIM_SCRIPT=%.128s: %.400s", path,
                 why);
        LOG_ERR("%s", g_script.err);
    }
    return g_script.s;
}

/* A scripted turn's delay, as a slow server's: the program's limits
 * (xfer.h) are checked every 50 ms, and end it as they end a network
 * call. CURLE_OK, or their code (errbuf says why). */
static CURLcode script_delay(struct shim_upstream *u, long ms, char *errbuf)
{
    double end = shim_clock_s() + ms / 1000.0, now;

    while ((now = shim_clock_s()) < end) {
        long left = (long)((end - now) * 1000) + 1;
        if (shim_xfer_check(u->x) != CURLE_OK) {
            snprintf(errbuf, CURL_ERROR_SIZE, "%s", u->x->message);
            return u->x->rc;
        }
        shim_frame_tick(-1, u->x && left > 50 ? 50 : (int)left); /* a loop yields here */
    }
    return CURLE_OK;
}

/* A turn that fails: an error status (with Retry-After), or a cut. */
static CURLcode script_fail(const struct shim_script_turn *t, size_t i,
                            struct shim_http_reply *r, char *errbuf)
{
    char line[64];

    if (t->cut) {
        snprintf(errbuf, CURL_ERROR_SIZE, "codeshim script: turn %zu cuts the connection", i + 1);
        return CURLE_PARTIAL_FILE;
    }
    error_reply(r, t->status, t->status == 429 ? "requests" : t->status >= 500
                ? "server_error" : "invalid_request_error",
                t->status == 429 ? "rate_limit_exceeded" : NULL,
                t->error ? t->error : "codeshim script: an error answer");
    if (t->retry_after >= 0) {
        snprintf(line, sizeof(line), "Retry-After: %ld", t->retry_after);
        shim_http_reply_header(r, line);
    }
    return CURLE_OK;
}

static CURLcode script_post(struct shim_upstream *u, const char *body, size_t len,
                            struct shim_http_reply *r, char *errbuf)
{
    cJSON *req = shim_json_parse(body, len), *rep = NULL;
    const struct shim_script_turn *t = NULL;
    struct shim_script *s;
    char user[2048], msg[2400];
    size_t i = 0;
    int rc = -ENOENT;

    shim_offline_user_text(req, u->kind, user, sizeof(user));
    pthread_mutex_lock(&g_script.lock);
    s = script_load(u->cfg->script);
    if (s && (rc = shim_script_take(s, user, &i)) == 0)
        t = &s->turns[i]; /* the script lives as long as the process */
    pthread_mutex_unlock(&g_script.lock);
    if (!t) {
        if (!s)
            snprintf(msg, sizeof(msg), "codeshim script: %s", g_script.err);
        else
            snprintf(msg, sizeof(msg), "codeshim script: no turn is left for this request "
                     "(%zu turns, each taken or not matching the last user text \"%.200s\")",
                     s->n, user);
        if (s)
            LOG_ERR("%s", msg);
        error_reply(r, 500, "codeshim_script", "script_miss", msg);
        cJSON_Delete(req);
        return CURLE_OK;
    }
    snprintf(r->source, sizeof(r->source), "script %.130s #%zu", u->cfg->script, i + 1);
    LOG_INFO("upstream call answered by turn %zu of the script %s", i + 1, u->cfg->script);
    if (t->delay_ms) {
        CURLcode drc = script_delay(u, t->delay_ms, errbuf);
        if (drc != CURLE_OK) {
            cJSON_Delete(req);
            return drc;
        }
    }
    if (t->status || t->cut) {
        cJSON_Delete(req);
        return script_fail(t, i, r, errbuf);
    }
    {
        struct shim_offline_turn ot = {t->codes, t->say, t->call_name, t->call_args};
        rep = req ? shim_offline_shape(u->kind, req, &ot) : NULL;
    }
    local_answer(r, rep, "codeshim script: out of memory");
    cJSON_Delete(req);
    return CURLE_OK;
}

static const struct transport network = {"network", network_post, network_post_stream};
static const struct transport script = {"script", script_post, NULL};
static const struct transport offline = {"offline", offline_post, NULL};
static const struct transport replay = {"replay", replay_post, replay_post_stream};
static const struct transport cassette = {"cassette", cassette_post, cassette_post_stream};

static const struct transport *choose(const struct shim_config *cfg)
{
    if (cfg->offline)
        return &offline;
    if (cfg->script[0])
        return &script;
    if (cfg->cassette[0])
        return &cassette;
    return cfg->replay_dir[0] ? &replay : &network;
}

/* A cassette that replays only needs no network handle. */
static int needs_network(const struct shim_upstream *u)
{
    if (u->t == &network)
        return 1;
    if (u->t != &cassette)
        return 0;
    return strcmp(u->cfg->record_mode, "none") &&
           (strcmp(u->cfg->record_mode, "once") || !shim_cassette_existed(u->cfg->cassette));
}

int shim_upstream_matches(const struct shim_upstream *u)
{
    return u->t == &cassette;
}

void shim_upstream_set_match(struct shim_upstream *u, const cJSON *req, const cJSON *calls)
{
    if (u->t != &cassette)
        return;
    cJSON_Delete(u->match);
    u->match = shim_match_doc(req, calls, u->cfg->match_ignore);
}

int shim_upstream_open(const struct shim_curl_api *api, CURL *h,
                       const struct shim_handle_view *v, enum shim_api kind,
                       struct shim_upstream **out)
{
    struct shim_upstream *u = calloc(1, sizeof(*u));
    int rc;

    if (!u)
        return -ENOMEM;
    u->cfg = shim_config();
    u->api = api;
    u->kind = kind;
    u->max_response = u->cfg->max_response;
    u->url = strdup(v->url ? v->url : "");
    u->t = choose(u->cfg);
    u->x = shim_xfer_find(h);
    u->keep_stream = u->cfg->record_dir[0] != '\0';
    if (!u->url) {
        free(u);
        return -ENOMEM;
    }
    if (!needs_network(u)) { /* no handle: nothing goes on the network */
        *out = u;
        return 0;
    }
    u->h = dup_program_handle(api, h, v);
    if (!u->h) {
        free(u->url);
        free(u);
        return -ENOTSUP;
    }
    shim_guard_enter();
    api->easy_setopt(u->h, CURLOPT_CURLU, (CURLU *)NULL); /* else it, not the URL, counts */
    api->easy_setopt(u->h, CURLOPT_URL, u->url);
    shim_guard_leave();
    rc = copy_headers(u, v->headers);
    if (rc) {
        shim_upstream_close(u);
        return rc;
    }
    shim_guard_enter();
    api->easy_setopt(u->h, CURLOPT_HTTPHEADER, u->headers);
    /* the header and body callbacks are http.c's, set at each call */
    api->easy_setopt(u->h, CURLOPT_HEADER, 0L);
    api->easy_setopt(u->h, CURLOPT_NOBODY, 0L);
    api->easy_setopt(u->h, CURLOPT_UPLOAD, 0L);
    api->easy_setopt(u->h, CURLOPT_FAILONERROR, 0L);
    /* never the program's progress callback: with limits to watch, ours */
    api->easy_setopt(u->h, CURLOPT_XFERINFOFUNCTION, on_progress);
    api->easy_setopt(u->h, CURLOPT_XFERINFODATA, u);
    api->easy_setopt(u->h, CURLOPT_NOPROGRESS, u->x ? 0L : 1L);
    api->easy_setopt(u->h, CURLOPT_VERBOSE, 0L);
    shim_guard_leave();
    *out = u;
    return 0;
}

CURLcode shim_upstream_post(struct shim_upstream *u, const char *body, size_t len,
                            struct shim_http_reply *r, char *errbuf)
{
    double t0 = shim_clock_s();
    CURLcode rc;

    shim_http_reply_init(r, HEAD_CAP, u->max_response);
    errbuf[0] = '\0';
    rc = u->t->post(u, body, len, r, errbuf);
    r->seconds = shim_clock_s() - t0;
    return rc;
}

/* The program's URL up to its API path (".../v1/responses" -> ".../v1",
 * ".../v1/containers/x/files" -> ".../v1"), then path (url.c reads and
 * rebuilds it: the program's query and fragment are dropped). */
static int sibling_url(const char *url, const char *path, char *out, size_t n)
{
    static const char *const tails[] = {"/chat/completions", "/responses"};
    struct shim_url u;
    char p[2048];
    size_t i, end, cut;
    int rc;

    if ((rc = shim_url_parse(url, 0, &u)) < 0)
        return rc;
    end = cut = strlen(u.path);
    for (i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        size_t tl = strlen(tails[i]);
        if (end >= tl && !memcmp(u.path + end - tl, tails[i], tl)) {
            cut = end - tl;
            break;
        }
    }
    if (cut == end) { /* a Containers API URL: .../v1/containers/... */
        const char *c = NULL, *q = u.path;
        while ((q = strstr(q, "/containers")) != NULL)
            c = q++;
        if (c)
            cut = (size_t)(c - u.path);
    }
    rc = snprintf(p, sizeof(p), "%.*s%s", (int)cut, u.path, path) < (int)sizeof(p)
             ? shim_url_with_path(url, p, out, n)
             : -ENAMETOOLONG;
    shim_url_free(&u);
    return rc;
}

CURLcode shim_upstream_get(struct shim_upstream *u, const char *path, size_t max,
                           struct shim_http_reply *r, char *errbuf)
{
    char url[4096];
    CURLcode rc;

    shim_http_reply_init(r, HEAD_CAP, max);
    errbuf[0] = '\0';
    if (!u->h) {
        shim_http_reply_local(r, 404, "{\"error\":{\"message\":\"codeshim is offline or "
                                      "replaying: no Files API to fetch from\",\"type\":"
                                      "\"invalid_request_error\",\"param\":null,\"code\":null}}");
        return CURLE_OK;
    }
    if (sibling_url(u->url, path, url, sizeof(url)) < 0) {
        snprintf(errbuf, CURL_ERROR_SIZE, "codeshim: the Files API URL is too long");
        return CURLE_URL_MALFORMAT;
    }
    if ((rc = bound_call(u, errbuf)) != CURLE_OK)
        return rc;
    u->smode = SM_WHOLE;
    shim_guard_enter();
    u->api->easy_setopt(u->h, CURLOPT_ERRORBUFFER, errbuf);
    u->api->easy_setopt(u->h, CURLOPT_URL, url);
    u->api->easy_setopt(u->h, CURLOPT_HTTPGET, 1L);
    rc = perform(u, r);
    if (rc == CURLE_OK)
        take_info(u, r);
    u->api->easy_setopt(u->h, CURLOPT_URL, u->url); /* the next POST goes where it did */
    u->api->easy_setopt(u->h, CURLOPT_ERRORBUFFER, (char *)NULL);
    shim_guard_leave();
    u->smode = SM_OFF;
    if (rc == CURLE_WRITE_ERROR) {
        snprintf(errbuf, CURL_ERROR_SIZE, "codeshim: the file is larger than %zu bytes", max);
        rc = CURLE_FILESIZE_EXCEEDED;
    }
    return rc;
}

int shim_upstream_streams(const struct shim_upstream *u)
{
    return u->t->post_stream != NULL;
}

CURLcode shim_upstream_post_stream(struct shim_upstream *u, const char *body, size_t len,
                                   struct shim_http_reply *r, char *errbuf,
                                   shim_upstream_event_fn fn, void *ctx, int *streamed)
{
    double t0 = shim_clock_s();
    CURLcode rc;

    *streamed = 0;
    if (!u->t->post_stream)
        return shim_upstream_post(u, body, len, r, errbuf);
    shim_http_reply_init(r, HEAD_CAP, u->max_response);
    errbuf[0] = '\0';
    u->smode = SM_UNDECIDED;
    u->swhy = SW_NONE;
    u->fn = fn;
    u->fn_ctx = ctx;
    shim_sse_init(&u->sse, u->max_response, u->max_response, sse_event, u);
    rc = u->t->post_stream(u, body, len, r, errbuf);
    *streamed = u->smode == SM_SSE;
    shim_sse_free(&u->sse);
    u->smode = SM_OFF;
    r->seconds = shim_clock_s() - t0;
    return rc;
}

void shim_upstream_close(struct shim_upstream *u)
{
    if (!u)
        return;
    shim_guard_enter();
    if (u->h)
        u->api->easy_cleanup(u->h);
    if (u->headers)
        u->api->slist_free_all(u->headers);
    shim_guard_leave();
    cJSON_Delete(u->match);
    free(u->url);
    free(u);
}
