/* live.c - see live.h. */
#include "api/live.h"

#include "api/responses.h"
#include "base/ids.h"
#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INDEX 1000000 /* an output_index beyond is not relayed */

static const char ended_early[] =
    "the model server's stream ended before its answer was complete";

static void turn_reset(struct shim_live *l)
{
    int i;

    cJSON_Delete(l->reply);
    cJSON_Delete(l->first);
    cJSON_Delete(l->usage);
    l->reply = l->first = l->usage = NULL;
    shim_buf_free(&l->content);
    shim_buf_free(&l->refusal);
    free(l->finish);
    l->finish = NULL;
    for (i = 0; i < l->ncalls; i++) {
        struct shim_live_call *c = &l->calls[i];
        free(c->id);
        free(c->type);
        free(c->name);
        shim_buf_free(&c->args);
        memset(c, 0, sizeof(*c));
    }
    l->ncalls = l->events = l->ended = l->held = l->nfwd = 0;
    l->open_up = l->open_ours = l->ci_up = -1;
    l->ci_id[0] = l->cntr[0] = l->err[0] = '\0';
}

void shim_live_init(struct shim_live *l, enum shim_api api, const struct shim_conv *cv,
                    struct shim_stream *st, const struct shim_live_hooks *hooks, size_t cap)
{
    memset(l, 0, sizeof(*l));
    l->api = api;
    l->cv = cv;
    l->st = st;
    l->hooks = *hooks;
    l->cap = cap;
    turn_reset(l);
}

void shim_live_free(struct shim_live *l)
{
    turn_reset(l);
}

void shim_live_turn_begin(struct shim_live *l, int may_exec)
{
    turn_reset(l);
    l->may_exec = may_exec;
    shim_buf_init(&l->content, l->cap);
    shim_buf_init(&l->refusal, l->cap);
}

static int begin(struct shim_live *l, const cJSON *first)
{
    if (l->started)
        return 0;
    if (l->hooks.begin(l->hooks.ctx, first) != 0)
        return -1; /* the program's transfer failed: the loop knows */
    l->started = 1;
    return 0;
}

/* -1 once the program stopped taking the stream. */
static int program_ok(const struct shim_live *l)
{
    return l->started && l->st->failed ? -1 : 0;
}

static const cJSON *nth(const cJSON *arr, int k)
{
    const cJSON *it = cJSON_IsArray(arr) ? arr->child : NULL;

    while (it && k-- > 0)
        it = it->next;
    return it;
}

/* ---------------- Responses ---------------- */

static int is_terminal(const char *type)
{
    return !strcmp(type, "response.completed") || !strcmp(type, "response.incomplete") ||
           !strcmp(type, "response.failed");
}

static void note_error(struct shim_live *l, const cJSON *ev)
{
    const char *m = shim_json_str(ev, "message");

    if (!m)
        m = shim_json_str(cJSON_GetObjectItemCaseSensitive(ev, "error"), "message");
    snprintf(l->err, sizeof(l->err), "the model server reported an error: %s",
             m ? m : "(no message)");
}

/* An item starts. Only the next one in order is relayed, and only while
 * no other is open; codeshim's call is announced in its own shape. */
static int r_added(struct shim_live *l, int idx, cJSON *ev)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(ev, "item");
    int rc = 0;

    if (l->held || l->open_up >= 0 || idx != l->nfwd || !cJSON_IsObject(item)) {
        l->held = 1;
    } else if (shim_responses_is_internal(item, l->cv)) {
        l->held = 1; /* what follows waits for the execution */
        if (l->may_exec) {
            l->hooks.container(l->hooks.ctx, l->cntr, sizeof(l->cntr));
            shim_id_make(l->ci_id, sizeof(l->ci_id), "ci_", 48);
            shim_argcode_init(&l->dec);
            l->ci_up = idx;
            rc = shim_stream_ci_open(l->st, l->ci_id, l->cntr, l->cap);
        }
    } else {
        l->open_up = idx;
        l->open_ours = l->st->next_index++;
        return shim_stream_forward(l->st, ev, l->open_ours);
    }
    cJSON_Delete(ev);
    return rc;
}

static int r_item_event(struct shim_live *l, const char *type, int idx, cJSON *ev)
{
    if (!strcmp(type, "response.output_item.added"))
        return r_added(l, idx, ev);
    if (idx == l->ci_up) { /* the model writing codeshim's call */
        const char *d = shim_json_str(ev, "delta");
        if (d && !strcmp(type, "response.function_call_arguments.delta") &&
            !shim_argcode_feed(&l->dec, d, strlen(d), &l->st->live_code))
            shim_stream_ci_code(l->st);
        cJSON_Delete(ev);
        return 0;
    }
    if (idx == l->open_up) {
        int done = !strcmp(type, "response.output_item.done");
        int rc = shim_stream_forward(l->st, ev, l->open_ours);
        if (done) {
            l->open_up = -1;
            l->nfwd++;
        }
        return rc;
    }
    if (idx >= l->nfwd)
        l->held = 1; /* an item not relayed: the turn's end shows it */
    cJSON_Delete(ev);
    return 0;
}

static int r_event(struct shim_live *l, cJSON *ev)
{
    const char *type = shim_json_str(ev, "type");
    const cJSON *oi = cJSON_GetObjectItemCaseSensitive(ev, "output_index");
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(ev, "response");
    int rc = 0;

    if (!type) {
        /* nothing to relay */
    } else if (!strcmp(type, "response.created") || !strcmp(type, "response.in_progress") ||
               !strcmp(type, "response.queued")) {
        if (cJSON_IsObject(resp))
            rc = begin(l, resp);
    } else if (is_terminal(type)) {
        if (cJSON_IsObject(resp)) {
            cJSON_Delete(l->reply);
            l->reply = cJSON_DetachItemViaPointer(ev, (cJSON *)resp);
            l->ended = 1;
        }
    } else if (!strcmp(type, "error")) {
        note_error(l, ev);
    } else if (!l->started || !cJSON_IsNumber(oi) || oi->valuedouble < 0 ||
               oi->valuedouble > MAX_INDEX) {
        l->held = 1;
    } else {
        rc = r_item_event(l, type, (int)oi->valuedouble, ev);
        return rc ? rc : program_ok(l);
    }
    cJSON_Delete(ev);
    return rc ? rc : program_ok(l);
}

/* The call announced is not in the final answer (an upstream whose stream
 * and answer disagree): it ends as failed, never run, so the stream stays
 * well formed. */
static void abandon_call(struct shim_live *l)
{
    struct shim_call c;

    memset(&c, 0, sizeof(c));
    snprintf(c.ci_id, sizeof(c.ci_id), "%s", l->ci_id);
    snprintf(c.container_id, sizeof(c.container_id), "%s", l->cntr);
    c.status = "failed";
    c.output = (char *)"codeshim: the model server's final answer does not hold this call; "
                       "it was not run";
    shim_stream_exec_begin(l->st, &c);
    shim_stream_exec_end(l->st, &c);
}

static void r_turn_end(struct shim_live *l, const cJSON *reply, struct shim_call *calls,
                       size_t n)
{
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(reply, "output"), *it;

    if (l->open_up >= 0) { /* never finished upstream: its final form */
        it = nth(out, l->nfwd);
        if (it) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", "response.output_item.done");
            cJSON_AddItemToObject(e, "item", cJSON_Duplicate(it, 1));
            shim_stream_forward(l->st, e, l->open_ours);
        }
        l->open_up = -1;
        l->nfwd++;
    }
    it = nth(out, l->nfwd);
    if (l->ci_up >= 0 && it && n && shim_responses_is_internal(it, l->cv)) {
        it = it->next; /* calls[0] is that item's: scan keeps the reply's order */
        snprintf(calls[0].ci_id, sizeof(calls[0].ci_id), "%s", l->ci_id);
        snprintf(calls[0].container_id, sizeof(calls[0].container_id), "%s", l->cntr);
    } else if (l->ci_up >= 0) {
        abandon_call(l);
    }
    l->st->cursor = it;
}

/* ---------------- Chat ---------------- */

static int too_big(struct shim_live *l)
{
    snprintf(l->err, sizeof(l->err), "the model server's streamed answer is larger than "
             "%zu bytes (CODESHIM_MAX_RESPONSE)", l->cap);
    return -1;
}

/* The chunk fields every chunk repeats, from the first. */
static cJSON *chunk_head(const cJSON *ev)
{
    static const char *const keep[] = {"id", "created", "model", "system_fingerprint",
                                       "service_tier"};
    cJSON *h = cJSON_CreateObject();
    size_t i;

    for (i = 0; h && i < sizeof(keep) / sizeof(keep[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, keep[i]);
        if (v)
            cJSON_AddItemToObject(h, keep[i], cJSON_Duplicate(v, 1));
    }
    return h;
}

static int is_codeshims(const struct shim_live_call *c, const struct shim_conv *cv)
{
    return (!c->type || !strcmp(c->type, "function")) && !strcmp(c->name, cv->tool_name);
}

/* A delta for the program's call c: everything so far when whole, else
 * the piece (arguments, or a custom call's input). */
static int send_call(struct shim_live *l, const struct shim_live_call *c, const char *piece)
{
    int custom = c->type && strcmp(c->type, "function");
    cJSON *d = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(d, "tool_calls");
    cJSON *t = cJSON_CreateObject(), *f;

    cJSON_AddNumberToObject(t, "index", c->index);
    if (!piece) {
        cJSON_AddStringToObject(t, "id", c->id ? c->id : "");
        cJSON_AddStringToObject(t, "type", c->type ? c->type : "function");
    }
    f = cJSON_AddObjectToObject(t, custom ? "custom" : "function");
    if (!piece)
        cJSON_AddStringToObject(f, "name", c->name ? c->name : "");
    cJSON_AddStringToObject(f, custom ? "input" : "arguments",
                            piece ? piece : c->args.data ? c->args.data : "");
    cJSON_AddItemToArray(arr, t);
    return shim_stream_chat_delta(l->st, d);
}

static char *dup_if(char *have, const char *s)
{
    return have || !s || !*s ? have : strdup(s);
}

static int c_tool(struct shim_live *l, const cJSON *tc)
{
    const cJSON *ix = cJSON_GetObjectItemCaseSensitive(tc, "index");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *src = fn ? fn : cJSON_GetObjectItemCaseSensitive(tc, "custom");
    const char *piece = shim_json_str(src, fn ? "arguments" : "input");
    struct shim_live_call *c;

    if (!cJSON_IsNumber(ix) || ix->valuedouble < 0 || ix->valuedouble >= SHIM_LIVE_MAX_CALLS) {
        snprintf(l->err, sizeof(l->err), "the model server's stream has a tool call index "
                 "outside 0..%d", SHIM_LIVE_MAX_CALLS - 1);
        return -1;
    }
    c = &l->calls[(int)ix->valuedouble];
    if ((int)ix->valuedouble >= l->ncalls)
        l->ncalls = (int)ix->valuedouble + 1;
    if (!c->seen) {
        c->seen = 1;
        shim_buf_init(&c->args, l->cap);
    }
    c->id = dup_if(c->id, shim_json_str(tc, "id"));
    c->type = dup_if(c->type, shim_json_str(tc, "type"));
    c->name = dup_if(c->name, shim_json_str(src, "name"));
    if (piece && shim_buf_adds(&c->args, piece))
        return too_big(l);
    if (c->state == 0 && c->name) {
        if (is_codeshims(c, l->cv)) {
            c->state = 2; /* withheld: the program never sees codeshim's tool */
            return 0;
        }
        c->state = 1;
        c->index = l->nprog++;
        return send_call(l, c, NULL);
    }
    return c->state == 1 && piece && *piece ? send_call(l, c, piece) : 0;
}

/* Content or refusal text: kept for the answer, sent at once. */
static int c_text(struct shim_live *l, struct shim_buf *b, const char *key, const char *s)
{
    cJSON *d;

    if (!s || !*s)
        return 0;
    if (shim_buf_adds(b, s))
        return too_big(l);
    d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, key, s);
    return shim_stream_chat_delta(l->st, d);
}

static int c_event(struct shim_live *l, cJSON *ev)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ev, "choices"), 0);
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(ch, "delta"), *tc;
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(ev, "usage");
    const char *fr = shim_json_str(ch, "finish_reason");
    int rc = 0;

    if (!l->first)
        l->first = chunk_head(ev);
    rc = begin(l, l->first);
    if (!rc && cJSON_IsObject(usage)) {
        cJSON_Delete(l->usage);
        l->usage = cJSON_Duplicate(usage, 1);
    }
    if (!rc && fr && !l->finish)
        l->finish = strdup(fr);
    if (!rc)
        rc = c_text(l, &l->content, "content", shim_json_str(delta, "content"));
    if (!rc)
        rc = c_text(l, &l->refusal, "refusal", shim_json_str(delta, "refusal"));
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(delta, "tool_calls"))
    {
        if (rc)
            break;
        rc = c_tool(l, tc);
    }
    cJSON_Delete(ev);
    return rc ? rc : program_ok(l);
}

static cJSON *c_call_json(const struct shim_live_call *c)
{
    int custom = c->type && strcmp(c->type, "function");
    cJSON *t = cJSON_CreateObject(), *f;

    cJSON_AddStringToObject(t, "id", c->id ? c->id : "");
    cJSON_AddStringToObject(t, "type", c->type ? c->type : "function");
    f = cJSON_AddObjectToObject(t, custom ? "custom" : "function");
    cJSON_AddStringToObject(f, "name", c->name ? c->name : "");
    cJSON_AddStringToObject(f, custom ? "input" : "arguments", c->args.data ? c->args.data : "");
    return t;
}

/* The chat.completion the chunks add up to. */
static cJSON *c_reply(struct shim_live *l)
{
    cJSON *r, *ch, *msg, *tcs = NULL;
    int i;

    if (!l->first || (!l->ended && !l->finish)) {
        snprintf(l->err, sizeof(l->err), "%s", ended_early);
        return NULL;
    }
    r = cJSON_Duplicate(l->first, 1);
    shim_json_set(r, "object", cJSON_CreateString("chat.completion"));
    ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", 0);
    msg = cJSON_AddObjectToObject(ch, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    for (i = 0; i < l->ncalls; i++) {
        struct shim_live_call *c = &l->calls[i];
        if (!c->seen)
            continue;
        if (c->state == 0) { /* never named: the program's, as chat.c reads it */
            c->state = 1;
            c->index = l->nprog++;
            send_call(l, c, NULL);
        }
        if (!tcs)
            tcs = cJSON_CreateArray();
        cJSON_AddItemToArray(tcs, c_call_json(c));
    }
    cJSON_AddItemToObject(msg, "content", l->content.len || !tcs
                                              ? cJSON_CreateString(l->content.data ? l->content.data : "")
                                              : cJSON_CreateNull());
    cJSON_AddItemToObject(msg, "refusal", l->refusal.len ? cJSON_CreateString(l->refusal.data)
                                                         : cJSON_CreateNull());
    if (tcs)
        cJSON_AddItemToObject(msg, "tool_calls", tcs);
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", l->finish ? l->finish : "stop");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "choices"), ch);
    if (l->usage)
        cJSON_AddItemToObject(r, "usage", cJSON_Duplicate(l->usage, 1));
    return r;
}

/* ---------------- both ---------------- */

int shim_live_event(struct shim_live *l, const char *name, const char *data, size_t len)
{
    struct shim_json_flaw flaw;
    cJSON *ev = NULL;
    int rc;

    (void)name; /* Responses events carry their type; Chat's have none */
    l->events++;
    if (l->ended)
        return 0;
    if (l->api == SHIM_API_CHAT && len == 6 && !memcmp(data, "[DONE]", 6)) {
        l->ended = 1;
        return 0;
    }
    rc = shim_json_read(data, len, &ev, &flaw);
    if (rc == -EEXIST) {
        char f[128];
        shim_json_flaw_text(&flaw, f, sizeof(f));
        snprintf(l->err, sizeof(l->err), "codeshim could not read the model server's "
                 "stream: %s, and JSON readers disagree about what that says; nothing "
                 "more of it was run or passed on", f);
        return -1;
    }
    if (rc == -E2BIG) {
        char f[128];
        shim_json_flaw_text(&flaw, f, sizeof(f));
        snprintf(l->err, sizeof(l->err), "codeshim did not read an event of the model "
                 "server's stream: %s; nothing more of it was run or passed on", f);
        return -1;
    }
    if (rc < 0 || !cJSON_IsObject(ev)) {
        cJSON_Delete(ev);
        snprintf(l->err, sizeof(l->err), "%s", rc == -ENOMEM ? "codeshim: out of memory"
                 : "the model server's stream holds an event that is not a JSON object");
        return -1;
    }
    return l->api == SHIM_API_CHAT ? c_event(l, ev) : r_event(l, ev);
}

cJSON *shim_live_take_reply(struct shim_live *l)
{
    cJSON *r;

    if (l->api == SHIM_API_CHAT)
        return l->err[0] ? NULL : c_reply(l);
    r = l->reply;
    l->reply = NULL;
    if (!r && !l->err[0])
        snprintf(l->err, sizeof(l->err), "%s", ended_early);
    return r;
}

void shim_live_turn_end(struct shim_live *l, const cJSON *reply, struct shim_call *calls,
                        size_t n)
{
    if (l->api == SHIM_API_RESPONSES)
        r_turn_end(l, reply, calls, n);
    l->st->live = 1;
}
