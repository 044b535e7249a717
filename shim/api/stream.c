/* stream.c - see stream.h. Builds events with cJSON and frames them; the
 * only effect is the write function the loop hands in. */
#include "api/stream.h"

#include "api/argcode.h"
#include "api/responses.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/json.h"
#include "base/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DELTA_BYTES 24 /* text deltas: small pieces, as a model streams */
#define FRAME_COPY_MAX 65536 /* larger events are not copied to be framed */

int shim_sse_frame(struct shim_buf *out, const char *name, const char *data)
{
    int rc = 0;

    if (name)
        rc |= shim_buf_addf(out, "event: %s\n", name);
    rc |= shim_buf_adds(out, "data: ");
    rc |= shim_buf_adds(out, data);
    rc |= shim_buf_adds(out, "\n\n");
    return rc ? -1 : 0;
}

void shim_stream_init(struct shim_stream *s, enum shim_api api,
                      const struct shim_conv *cv, shim_stream_write_fn write, void *ctx)
{
    memset(s, 0, sizeof(*s));
    s->api = api;
    s->cv = cv;
    s->write = write;
    s->ctx = ctx;
}

void shim_stream_free(struct shim_stream *s)
{
    cJSON_Delete(s->chunk);
    cJSON_Delete(s->snap);
    cJSON_Delete(s->done);
    s->chunk = s->snap = s->done = NULL;
    free(s->id);
    s->id = NULL;
    shim_buf_free(&s->live_code);
    cJSON_Delete(s->live_ann);
    s->live_ann = NULL;
}

static int send_raw(struct shim_stream *s, const char *p, size_t n)
{
    if (s->failed)
        return -1;
    if (s->write(s->ctx, p, n) != 0)
        s->failed = 1;
    return s->failed ? -1 : 0;
}

/* Sends one SSE frame of json: in one write when it is small, else its
 * head, json and end in three (no copy of a large event, such as the
 * final response with its images). */
static int send_frame(struct shim_stream *s, const char *name, const char *json)
{
    struct shim_buf b;
    size_t n = strlen(json);
    int rc;

    shim_buf_init(&b, (name ? strlen(name) : 0) + FRAME_COPY_MAX + 32);
    rc = name ? shim_buf_addf(&b, "event: %s\n", name) : 0;
    if (rc == 0 && n > FRAME_COPY_MAX) {
        rc = shim_buf_adds(&b, "data: ") || send_raw(s, b.data, b.len) ||
             send_raw(s, json, n) || send_raw(s, "\n\n", 2);
        shim_buf_free(&b);
        return rc ? -1 : 0;
    }
    if (rc == 0)
        rc = shim_sse_frame(&b, NULL, json);
    if (rc == 0)
        rc = send_raw(s, b.data, b.len);
    shim_buf_free(&b);
    return rc ? -1 : 0;
}

/* Frames and sends ev (taken). Responses events get their type as the
 * event name and the next sequence_number. */
static int send(struct shim_stream *s, cJSON *ev)
{
    char *json;
    int rc;

    if (!ev)
        return -1;
    if (s->api == SHIM_API_RESPONSES)
        shim_json_set(ev, "sequence_number", cJSON_CreateNumber((double)s->seq++));
    json = cJSON_PrintUnformatted(ev);
    rc = json ? send_frame(s, s->api == SHIM_API_RESPONSES ? shim_json_str(ev, "type") : NULL,
                           json)
              : -1;
    free(json);
    cJSON_Delete(ev);
    return rc;
}

static cJSON *event(const char *type)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    return e;
}

static cJSON *item_event(const char *type, int index, const char *item_id)
{
    cJSON *e = event(type);
    if (item_id)
        cJSON_AddStringToObject(e, "item_id", item_id);
    cJSON_AddNumberToObject(e, "output_index", index);
    return e;
}

/* Length of the next delta: at most DELTA_BYTES, never splitting UTF-8. */
static size_t piece(const char *p, size_t left)
{
    return shim_text_cut_forward(p, left < DELTA_BYTES ? left : DELTA_BYTES, left);
}

/* The stream keeps the first reply's id whole (a cut could split a UTF-8
 * character), or mints one when the reply has none. */
static void set_id(struct shim_stream *s, const char *id, const char *prefix, size_t nhex)
{
    char minted[80];

    free(s->id);
    if (!id) {
        shim_id_make(minted, sizeof(minted), prefix, nhex);
        id = minted;
    }
    s->id = strdup(id);
    if (!s->id)
        s->id = strdup(prefix); /* out of memory: still a string */
}

/* ---------------- Responses ---------------- */

static cJSON *empty_logprobs(void) { return cJSON_CreateArray(); }

static int text_events(struct shim_stream *s, const char *item_id, int index, int ci,
                       const cJSON *part)
{
    const char *ptype = shim_json_str(part, "type");
    int refusal = ptype && !strcmp(ptype, "refusal");
    const char *text = shim_json_str(part, refusal ? "refusal" : "text");
    const cJSON *ann;
    cJSON *e, *p0;
    size_t left = text ? strlen(text) : 0;
    int k = 0;

    e = item_event("response.content_part.added", index, item_id);
    cJSON_AddNumberToObject(e, "content_index", ci);
    p0 = cJSON_AddObjectToObject(e, "part");
    if (refusal) {
        cJSON_AddStringToObject(p0, "type", "refusal");
        cJSON_AddStringToObject(p0, "refusal", "");
    } else {
        cJSON_AddStringToObject(p0, "type", ptype ? ptype : "output_text");
        cJSON_AddItemToObject(p0, "annotations", cJSON_CreateArray());
        cJSON_AddItemToObject(p0, "logprobs", empty_logprobs());
        cJSON_AddStringToObject(p0, "text", "");
    }
    send(s, e);
    while (left) {
        size_t n = piece(text, left);
        char *d = strndup(text, n);
        e = item_event(refusal ? "response.refusal.delta" : "response.output_text.delta",
                       index, item_id);
        cJSON_AddNumberToObject(e, "content_index", ci);
        cJSON_AddStringToObject(e, "delta", d ? d : "");
        if (!refusal)
            cJSON_AddItemToObject(e, "logprobs", empty_logprobs());
        free(d);
        send(s, e);
        text += n;
        left -= n;
    }
    text = shim_json_str(part, refusal ? "refusal" : "text");
    cJSON_ArrayForEach(ann, cJSON_GetObjectItemCaseSensitive(part, "annotations"))
    {
        e = item_event("response.output_text.annotation.added", index, item_id);
        cJSON_AddNumberToObject(e, "content_index", ci);
        cJSON_AddNumberToObject(e, "annotation_index", k++);
        cJSON_AddItemToObject(e, "annotation", cJSON_Duplicate(ann, 1));
        send(s, e);
    }
    e = item_event(refusal ? "response.refusal.done" : "response.output_text.done", index,
                   item_id);
    cJSON_AddNumberToObject(e, "content_index", ci);
    cJSON_AddStringToObject(e, refusal ? "refusal" : "text", text ? text : "");
    if (!refusal)
        cJSON_AddItemToObject(e, "logprobs", empty_logprobs());
    send(s, e);
    e = item_event("response.content_part.done", index, item_id);
    cJSON_AddNumberToObject(e, "content_index", ci);
    cJSON_AddItemToObject(e, "part", cJSON_Duplicate(part, 1));
    if (!refusal && !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "part"),
                                                      "logprobs"))
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(e, "part"), "logprobs",
                              empty_logprobs());
    return send(s, e);
}

static int item_added(struct shim_stream *s, int index, cJSON *item)
{
    cJSON *e = event("response.output_item.added");
    cJSON_AddNumberToObject(e, "output_index", index);
    cJSON_AddItemToObject(e, "item", item);
    return send(s, e);
}

static int item_done(struct shim_stream *s, int index, const cJSON *item)
{
    cJSON *e = event("response.output_item.done");

    if (!s->done)
        s->done = cJSON_CreateArray();
    cJSON_AddItemToArray(s->done, cJSON_Duplicate(item, 1));
    cJSON_AddNumberToObject(e, "output_index", index);
    cJSON_AddItemToObject(e, "item", cJSON_Duplicate(item, 1));
    return send(s, e);
}

/* One finished output item with the event sequence its type has. */
static int emit_item(struct shim_stream *s, const cJSON *item)
{
    const char *type = shim_json_str(item, "type");
    const char *id = shim_json_str(item, "id");
    int index = s->next_index++;
    cJSON *start = cJSON_Duplicate(item, 1), *e;

    if (type && !strcmp(type, "message")) {
        const cJSON *part;
        int ci = 0;
        shim_json_set(start, "status", cJSON_CreateString("in_progress"));
        shim_json_set(start, "content", cJSON_CreateArray());
        item_added(s, index, start);
        cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(item, "content"))
            text_events(s, id, index, ci++, part);
    } else if (type && !strcmp(type, "function_call")) {
        const char *args = shim_json_str(item, "arguments");
        shim_json_set(start, "status", cJSON_CreateString("in_progress"));
        shim_json_set(start, "arguments", cJSON_CreateString(""));
        item_added(s, index, start);
        e = item_event("response.function_call_arguments.delta", index, id);
        cJSON_AddStringToObject(e, "delta", args ? args : "");
        send(s, e);
        e = item_event("response.function_call_arguments.done", index, id);
        cJSON_AddStringToObject(e, "arguments", args ? args : "");
        cJSON_AddStringToObject(e, "name", shim_json_str(item, "name") ? shim_json_str(item, "name") : "");
        send(s, e);
    } else if (type && !strcmp(type, "reasoning")) {
        shim_json_set(start, "summary", cJSON_CreateArray());
        item_added(s, index, start);
    } else {
        item_added(s, index, start);
    }
    return item_done(s, index, item);
}

static int is_internal_item(const struct shim_stream *s, const cJSON *item)
{
    return shim_responses_is_internal(item, s->cv);
}

/* Sends the current reply's items up to (not including) the item whose
 * call_id is stop_at (NULL: to the end), skipping codeshim's own calls. */
static void emit_until(struct shim_stream *s, const char *stop_at)
{
    for (; s->cursor; s->cursor = s->cursor->next) {
        if (is_internal_item(s, s->cursor)) {
            const char *cid = shim_json_str(s->cursor, "call_id");
            if (stop_at && cid && !strcmp(cid, stop_at)) {
                s->cursor = s->cursor->next;
                return;
            }
            continue;
        }
        emit_item(s, s->cursor);
    }
}

static cJSON *snapshot(const struct shim_stream *s, const cJSON *req, const cJSON *first)
{
    cJSON *r = cJSON_Duplicate(first, 1);
    static const char *const echo[] = {"tool_choice", "metadata"};
    size_t i;

    shim_json_set(r, "id", cJSON_CreateString(s->id));
    shim_json_set(r, "status", cJSON_CreateString("in_progress"));
    shim_json_set(r, "output", cJSON_CreateArray());
    shim_json_set(r, "usage", cJSON_CreateNull());
    shim_json_set(r, "error", cJSON_CreateNull());
    shim_json_set(r, "incomplete_details", cJSON_CreateNull());
    if (cJSON_GetObjectItemCaseSensitive(r, "completed_at"))
        shim_json_set(r, "completed_at", cJSON_CreateNull());
    if (cJSON_GetObjectItemCaseSensitive(req, "tools"))
        shim_json_set(r, "tools", shim_responses_echo_tools(req));
    for (i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, echo[i]);
        if (v)
            shim_json_set(r, echo[i], cJSON_Duplicate(v, 1));
    }
    return r;
}

static int r_start(struct shim_stream *s, const cJSON *req, const cJSON *first)
{
    const char *id = shim_json_str(first, "id");
    cJSON *e;

    set_id(s, id, "resp_", 48);
    s->snap = snapshot(s, req, first);
    e = event("response.created");
    cJSON_AddItemToObject(e, "response", cJSON_Duplicate(s->snap, 1));
    send(s, e);
    e = event("response.in_progress");
    cJSON_AddItemToObject(e, "response", cJSON_Duplicate(s->snap, 1));
    return send(s, e);
}

static int code_delta(struct shim_stream *s, int index, const char *ci_id, const char *p,
                      size_t n)
{
    char *d = strndup(p, n);
    cJSON *e = item_event("response.code_interpreter_call_code.delta", index, ci_id);

    cJSON_AddStringToObject(e, "delta", d ? d : "");
    free(d);
    return send(s, e);
}

/* The rest of a call announced live: what the whole parse found beyond
 * the deltas already sent (all of it when the decoder gave up early; none
 * when the parse disagrees with them, which only odd arguments such as a
 * "code" key given twice can cause), then done and interpreting. */
static int live_exec_begin(struct shim_stream *s, const struct shim_call *c)
{
    const char *code = c->code ? c->code : "";
    size_t n = strlen(code), sent = s->live_sent;
    int index = s->next_index;
    cJSON *e;

    if (n > sent && !memcmp(code, s->live_code.data ? s->live_code.data : "", sent))
        code_delta(s, index, c->ci_id, code + sent, n - sent);
    e = item_event("response.code_interpreter_call_code.done", index, c->ci_id);
    cJSON_AddStringToObject(e, "code", code);
    send(s, e);
    s->live_ci[0] = '\0';
    shim_buf_free(&s->live_code);
    s->live_sent = 0;
    return send(s, item_event("response.code_interpreter_call.interpreting", index, c->ci_id));
}

static int r_exec_begin(struct shim_stream *s, const struct shim_call *c)
{
    cJSON *item, *e;
    int index;

    if (s->live_ci[0] && !strcmp(c->ci_id, s->live_ci))
        return live_exec_begin(s, c);
    emit_until(s, c->call_id);
    index = s->next_index;
    item = shim_responses_ci_item(c);
    shim_json_set(item, "status", cJSON_CreateString("in_progress"));
    shim_json_set(item, "code", cJSON_CreateString(""));
    shim_json_set(item, "outputs", cJSON_CreateArray());
    item_added(s, index, item);
    send(s, item_event("response.code_interpreter_call.in_progress", index, c->ci_id));
    e = item_event("response.code_interpreter_call_code.delta", index, c->ci_id);
    cJSON_AddStringToObject(e, "delta", c->code ? c->code : "");
    send(s, e);
    e = item_event("response.code_interpreter_call_code.done", index, c->ci_id);
    cJSON_AddStringToObject(e, "code", c->code ? c->code : "");
    send(s, e);
    return send(s, item_event("response.code_interpreter_call.interpreting", index, c->ci_id));
}

static int r_exec_end(struct shim_stream *s, const struct shim_call *c)
{
    int index = s->next_index++;
    cJSON *item = shim_responses_ci_item(c);
    int rc;

    send(s, item_event("response.code_interpreter_call.completed", index, c->ci_id));
    rc = item_done(s, index, item);
    cJSON_Delete(item);
    return rc;
}

static int responses_stream_finish(struct shim_stream *s, const cJSON *answer)
{
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(answer, "output");
    const char *status = shim_json_str(answer, "status");
    const char *type = "response.completed";
    const cJSON *it = cJSON_IsArray(out) ? out->child : NULL;
    cJSON *e, *final;
    int i;

    /* one walk: cJSON_GetArrayItem(out, i) in the loop would be O(n^2) */
    for (i = 0; it && i < s->next_index; i++)
        it = it->next;
    for (; it; it = it->next)
        emit_item(s, it);
    if (status && !strcmp(status, "incomplete"))
        type = "response.incomplete";
    else if (status && !strcmp(status, "failed"))
        type = "response.failed";
    final = cJSON_Duplicate(answer, 1);
    shim_json_set(final, "id", cJSON_CreateString(s->id));
    if (cJSON_GetObjectItemCaseSensitive(s->snap, "created_at")) /* one response */
        shim_json_set(final, "created_at",
                      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(s->snap, "created_at"), 1));
    e = event(type);
    cJSON_AddItemToObject(e, "response", final);
    return send(s, e);
}

/* ---------------- Chat ---------------- */

static int chat_stream_end(struct shim_stream *s, const cJSON *answer);

static cJSON *chunk(struct shim_stream *s, cJSON *delta, const char *finish)
{
    cJSON *c = cJSON_Duplicate(s->chunk, 1), *choices = cJSON_AddArrayToObject(c, "choices");
    cJSON *ch = cJSON_CreateObject();

    cJSON_AddNumberToObject(ch, "index", 0);
    cJSON_AddItemToObject(ch, "delta", delta);
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(choices, ch);
    if (s->cv->include_usage)
        cJSON_AddNullToObject(c, "usage");
    return c;
}

static int c_start(struct shim_stream *s, const cJSON *first)
{
    const char *id = shim_json_str(first, "id");
    const char *model = shim_json_str(first, "model");
    const char *fp = shim_json_str(first, "system_fingerprint");
    const cJSON *created = cJSON_GetObjectItemCaseSensitive(first, "created");
    cJSON *d;

    set_id(s, id, "chatcmpl-", 29);
    s->chunk = cJSON_CreateObject();
    cJSON_AddStringToObject(s->chunk, "id", s->id);
    cJSON_AddStringToObject(s->chunk, "object", "chat.completion.chunk");
    cJSON_AddNumberToObject(s->chunk, "created",
                            cJSON_IsNumber(created) ? created->valuedouble : (double)shim_clock_wall_s());
    cJSON_AddStringToObject(s->chunk, "model", model ? model : "");
    if (fp)
        cJSON_AddStringToObject(s->chunk, "system_fingerprint", fp);
    d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(d, "refusal");
    return send(s, chunk(s, d, NULL));
}

static int chat_stream_finish(struct shim_stream *s, const cJSON *answer)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(answer, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ch, "message"), *tc;
    const char *text = shim_json_str(msg, "content");
    const char *refusal = shim_json_str(msg, "refusal");
    size_t left = text ? strlen(text) : 0;
    int i = 0;
    cJSON *d;

    if (s->live) /* text and the program's calls went out as they came */
        return chat_stream_end(s, answer);
    while (left) {
        size_t n = piece(text, left);
        char *p = strndup(text, n);
        d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "content", p ? p : "");
        free(p);
        send(s, chunk(s, d, NULL));
        text += n;
        left -= n;
    }
    if (refusal) {
        d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "refusal", refusal);
        send(s, chunk(s, d, NULL));
    }
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"))
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const char *type = shim_json_str(tc, "type");
        cJSON *arr, *t, *f;
        d = cJSON_CreateObject();
        arr = cJSON_AddArrayToObject(d, "tool_calls");
        if (type && strcmp(type, "function")) { /* a custom call: as it came */
            t = cJSON_Duplicate(tc, 1);
            shim_json_set(t, "index", cJSON_CreateNumber(i++));
            cJSON_AddItemToArray(arr, t);
            send(s, chunk(s, d, NULL));
            continue;
        }
        t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "index", i++);
        cJSON_AddStringToObject(t, "id", shim_json_str(tc, "id") ? shim_json_str(tc, "id") : "");
        cJSON_AddStringToObject(t, "type", "function");
        f = cJSON_AddObjectToObject(t, "function");
        cJSON_AddStringToObject(f, "name", shim_json_str(fn, "name") ? shim_json_str(fn, "name") : "");
        cJSON_AddStringToObject(f, "arguments",
                                shim_json_str(fn, "arguments") ? shim_json_str(fn, "arguments") : "");
        cJSON_AddItemToArray(arr, t);
        send(s, chunk(s, d, NULL));
    }
    return chat_stream_end(s, answer);
}

/* The closing chunks: finish_reason, usage when asked for, [DONE]. */
static int chat_stream_end(struct shim_stream *s, const cJSON *answer)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(answer, "choices"), 0);
    const char *fr = shim_json_str(ch, "finish_reason");
    cJSON *u;

    send(s, chunk(s, cJSON_CreateObject(), fr ? fr : "stop"));
    if (s->cv->include_usage) {
        u = cJSON_Duplicate(s->chunk, 1);
        cJSON_AddArrayToObject(u, "choices");
        cJSON_AddItemToObject(u, "usage",
                              cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(answer, "usage"), 1));
        if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(u, "usage")))
            shim_json_set(u, "usage", cJSON_CreateNull());
        send(s, u);
    }
    return send_raw(s, "data: [DONE]\n\n", 14);
}

/* ---------------- dispatch ---------------- */

int shim_stream_start(struct shim_stream *s, const cJSON *req, const cJSON *first)
{
    return s->api == SHIM_API_RESPONSES ? r_start(s, req, first) : c_start(s, first);
}

void shim_stream_turn(struct shim_stream *s, const cJSON *reply)
{
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(reply, "output");

    s->live = 0;
    s->cursor = s->api == SHIM_API_RESPONSES && out ? out->child : NULL;
}

int shim_stream_exec_begin(struct shim_stream *s, const struct shim_call *c)
{
    return s->api == SHIM_API_RESPONSES ? r_exec_begin(s, c) : (s->failed ? -1 : 0);
}

int shim_stream_exec_end(struct shim_stream *s, const struct shim_call *c)
{
    return s->api == SHIM_API_RESPONSES ? r_exec_end(s, c) : (s->failed ? -1 : 0);
}

int shim_stream_finish(struct shim_stream *s, const cJSON *answer)
{
    if (s->api == SHIM_API_RESPONSES)
        return responses_stream_finish(s, answer);
    return chat_stream_finish(s, answer);
}

int shim_stream_fail(struct shim_stream *s, const char *code, const char *message)
{
    cJSON *e;

    if (s->api == SHIM_API_RESPONSES) {
        cJSON *resp, *err;
        e = event("error");
        cJSON_AddStringToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", message);
        cJSON_AddNullToObject(e, "param");
        send(s, e);
        e = event("response.failed");
        resp = s->snap ? cJSON_Duplicate(s->snap, 1) : cJSON_CreateObject();
        shim_json_set(resp, "status", cJSON_CreateString("failed"));
        /* a finished Response: the items already done, usage so far */
        shim_json_set(resp, "output", s->done ? cJSON_Duplicate(s->done, 1) : cJSON_CreateArray());
        shim_json_set(resp, "usage", shim_responses_usage(s->cv));
        err = cJSON_CreateObject();
        cJSON_AddStringToObject(err, "code", "server_error");
        cJSON_AddStringToObject(err, "message", message);
        shim_json_set(resp, "error", err);
        cJSON_AddItemToObject(e, "response", resp);
        return send(s, e);
    }
    e = cJSON_CreateObject();
    {
        cJSON *err = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(err, "message", message);
        cJSON_AddStringToObject(err, "type", "server_error");
        cJSON_AddNullToObject(err, "param");
        cJSON_AddStringToObject(err, "code", code);
    }
    return send(s, e);
}

/* ---------------- the live relay's entry points ---------------- */

int shim_stream_send(struct shim_stream *s, cJSON *ev)
{
    return send(s, ev);
}

/* A relayed text's annotations: announced before its output_text.done,
 * then set in the content part and the item that close it. */
static void annotate_relayed(struct shim_stream *s, const char *type, cJSON *ev, int index)
{
    const cJSON *a;
    int k = 0;

    if (!strcmp(type, "response.output_text.done")) {
        cJSON_Delete(s->live_ann);
        s->live_ann = s->annotate(s->annotate_ctx, shim_json_str(ev, "text") ? shim_json_str(ev, "text") : "");
        cJSON_ArrayForEach(a, s->live_ann)
        {
            cJSON *e = item_event("response.output_text.annotation.added", index,
                                  shim_json_str(ev, "item_id"));
            cJSON_AddNumberToObject(e, "content_index",
                                    (double)shim_json_int(ev, "content_index"));
            cJSON_AddNumberToObject(e, "annotation_index", k++);
            cJSON_AddItemToObject(e, "annotation", cJSON_Duplicate(a, 1));
            send(s, e);
        }
    } else if (s->live_ann && cJSON_GetArraySize(s->live_ann) &&
               !strcmp(type, "response.content_part.done")) {
        shim_json_set(cJSON_GetObjectItemCaseSensitive(ev, "part"), "annotations",
                      cJSON_Duplicate(s->live_ann, 1));
    } else if (s->live_ann && !strcmp(type, "response.output_item.done")) {
        cJSON *part;
        cJSON_ArrayForEach(part, cJSON_GetObjectItemCaseSensitive(
                                     cJSON_GetObjectItemCaseSensitive(ev, "item"), "content"))
        {
            const char *pt = shim_json_str(part, "type");
            if (pt && !strcmp(pt, "output_text") && cJSON_GetArraySize(s->live_ann))
                shim_json_set(part, "annotations", cJSON_Duplicate(s->live_ann, 1));
        }
        cJSON_Delete(s->live_ann);
        s->live_ann = NULL;
    }
}

int shim_stream_forward(struct shim_stream *s, cJSON *ev, int index)
{
    const char *type = shim_json_str(ev, "type");

    if (!ev)
        return -1;
    if (type && s->annotate && s->api == SHIM_API_RESPONSES)
        annotate_relayed(s, type, ev, index);
    shim_json_set(ev, "output_index", cJSON_CreateNumber(index));
    if (type && !strcmp(type, "response.output_item.done")) {
        if (!s->done)
            s->done = cJSON_CreateArray();
        cJSON_AddItemToArray(s->done,
                             cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(ev, "item"), 1));
    }
    return send(s, ev);
}

int shim_stream_ci_open(struct shim_stream *s, const char *ci_id, const char *container_id,
                        size_t code_cap)
{
    struct shim_call c;
    cJSON *item;
    int index = s->next_index;

    memset(&c, 0, sizeof(c));
    snprintf(c.ci_id, sizeof(c.ci_id), "%s", ci_id);
    snprintf(c.container_id, sizeof(c.container_id), "%s", container_id);
    c.status = "in_progress";
    snprintf(s->live_ci, sizeof(s->live_ci), "%s", ci_id);
    shim_buf_free(&s->live_code);
    shim_buf_init(&s->live_code, code_cap);
    s->live_sent = 0;
    item = shim_responses_ci_item(&c);
    item_added(s, index, item);
    return send(s, item_event("response.code_interpreter_call.in_progress", index, ci_id));
}

int shim_stream_ci_code(struct shim_stream *s)
{
    size_t whole = shim_argcode_whole(s->live_code.data, s->live_code.len);
    size_t from = s->live_sent;

    if (whole <= from)
        return s->failed ? -1 : 0;
    s->live_sent = whole;
    return code_delta(s, s->next_index, s->live_ci, s->live_code.data + from, whole - from);
}

int shim_stream_chat_delta(struct shim_stream *s, cJSON *delta)
{
    return delta ? send(s, chunk(s, delta, NULL)) : -1;
}
