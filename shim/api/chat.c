/* chat.c - the Chat Completions adapter (POST .../chat/completions); pure.
 *
 * Chat has no hosted code interpreter, so the native tool becomes a nested
 * function tool; the loop appends an assistant message with codeshim's
 * tool_calls and one role:"tool" message per call. The program gets the
 * last chat.completion with codeshim's tool calls removed, finish_reason
 * made consistent, and usage summed over every upstream call. Earlier
 * turns in the program's own history pass through as they are. */
#include "api/conv.h"
#include "base/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static cJSON *c_prepare(const cJSON *req, struct shim_conv *cv)
{
    return shim_conv_prepare(req, cv, 1);
}

static const cJSON *first_message(const cJSON *reply)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reply, "choices"), 0);
    return cJSON_GetObjectItemCaseSensitive(ch, "message");
}

/* Only a function tool call (type "function", or no type as older
 * servers send) named as codeshim's tool is codeshim's; a custom tool
 * call or any other type is the program's whatever its fields say. */
static int is_internal(const cJSON *tc, const struct shim_conv *cv)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const char *name = shim_json_str(fn, "name");
    if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function")))
        return 0;
    return name && !strcmp(name, cv->tool_name);
}

/* A legacy function_call (the deprecated "functions" parameter) is always
 * the program's. */
static int has_legacy_call(const cJSON *msg)
{
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(msg, "function_call");
    return fc && !cJSON_IsNull(fc);
}

static int c_scan(const cJSON *reply, struct shim_conv *cv, struct shim_call **calls,
                  size_t *n, int *foreign)
{
    const cJSON *msg = first_message(reply), *tc;
    struct shim_call *v = NULL;
    size_t k = 0, cap;

    *calls = NULL;
    *n = 0;
    *foreign = 0;
    if (!cJSON_IsObject(reply) || !cJSON_IsObject(msg))
        return -EPROTO;
    cv->nreplies++;
    shim_conv_sum_usage(cv, cJSON_GetObjectItemCaseSensitive(reply, "usage"));
    *foreign = has_legacy_call(msg);
    cap = (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"));
    if (cap) {
        v = calloc(cap, sizeof(*v));
        if (!v)
            return -ENOMEM;
    }
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"))
    {
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(tc, "function"), "arguments");
        const char *id = shim_json_str(tc, "id");
        struct shim_call *c;

        if (!is_internal(tc, cv)) {
            *foreign = 1;
            continue;
        }
        c = &v[k++];
        c->call_id = strdup(id ? id : "call_missing");
        c->arguments = cJSON_IsString(args) ? strdup(args->valuestring)
                                            : cJSON_PrintUnformatted(args);
        if (!c->call_id) {
            while (k)
                shim_call_free(&v[--k]);
            free(v);
            return -ENOMEM;
        }
    }
    *calls = v;
    *n = k;
    return 0;
}

static int c_advance(cJSON *up, const cJSON *reply, const struct shim_call *calls,
                     size_t n, struct shim_conv *cv)
{
    const cJSON *msg = first_message(reply), *tc, *content;
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(up, "messages"), *am, *tcs;
    size_t i, k = 0;

    if (!cJSON_IsArray(msgs)) {
        msgs = cJSON_CreateArray();
        shim_json_set(up, "messages", msgs);
    }
    am = cJSON_CreateObject();
    cJSON_AddStringToObject(am, "role", "assistant");
    content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    cJSON_AddItemToObject(am, "content",
                          cJSON_IsString(content) ? cJSON_CreateString(content->valuestring)
                                                  : cJSON_CreateNull());
    tcs = cJSON_AddArrayToObject(am, "tool_calls");
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"))
    {
        const struct shim_call *c;
        cJSON *t, *fn;
        if (!is_internal(tc, cv))
            continue;
        c = shim_conv_nth_call(calls, n, &k);
        if (!c || !(c->executed || c->skipped))
            continue;
        t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "id", c->call_id);
        cJSON_AddStringToObject(t, "type", "function");
        fn = cJSON_AddObjectToObject(t, "function");
        cJSON_AddStringToObject(fn, "name", cv->tool_name);
        cJSON_AddStringToObject(fn, "arguments", c->arguments ? c->arguments : "");
        cJSON_AddItemToArray(tcs, t);
    }
    cJSON_AddItemToArray(msgs, am);
    for (i = 0; i < n; i++) {
        cJSON *tm;
        if (!(calls[i].executed || calls[i].skipped))
            continue;
        tm = cJSON_CreateObject();
        cJSON_AddStringToObject(tm, "role", "tool");
        cJSON_AddStringToObject(tm, "tool_call_id", calls[i].call_id);
        cJSON_AddStringToObject(tm, "content", calls[i].output ? calls[i].output : "");
        cJSON_AddItemToArray(msgs, tm);
    }
    if (cv->forced_choice)
        shim_conv_relax_choice(up, 1);
    return 0;
}

static cJSON *c_finish(const cJSON *req, const cJSON *last, const struct shim_call *calls,
                       size_t n, struct shim_conv *cv, int capped)
{
    cJSON *out = cJSON_Duplicate(last, 1), *ch, *msg, *tcs, *tc, *next;
    const char *fr;

    (void)req;
    (void)calls;
    (void)n;
    if (!out)
        return NULL;
    ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(out, "choices"), 0);
    msg = cJSON_GetObjectItemCaseSensitive(ch, "message");
    tcs = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    for (tc = tcs ? tcs->child : NULL; tc; tc = next) {
        next = tc->next;
        if (is_internal(tc, cv))
            cJSON_Delete(cJSON_DetachItemViaPointer(tcs, tc));
    }
    fr = shim_json_str(ch, "finish_reason");
    if (tcs && !tcs->child) {
        cJSON_DeleteItemFromObjectCaseSensitive(msg, "tool_calls");
        if (fr && !strcmp(fr, "tool_calls"))
            shim_json_set(ch, "finish_reason", cJSON_CreateString("stop"));
    }
    if (capped)
        shim_json_set(ch, "finish_reason", cJSON_CreateString("length"));
    /* fields the schema requires that some servers leave out */
    if (msg && !cJSON_GetObjectItemCaseSensitive(msg, "content"))
        cJSON_AddNullToObject(msg, "content");
    if (msg && !cJSON_GetObjectItemCaseSensitive(msg, "refusal"))
        cJSON_AddNullToObject(msg, "refusal");
    if (ch && !cJSON_GetObjectItemCaseSensitive(ch, "logprobs"))
        cJSON_AddNullToObject(ch, "logprobs");
    if (cv->usage)
        shim_json_set(out, "usage", cJSON_Duplicate(cv->usage, 1));
    return out;
}

const struct shim_api_ops shim_chat_ops = {
    .name = "chat",
    .prepare = c_prepare,
    .scan = c_scan,
    .advance = c_advance,
    .finish = c_finish,
    .call_output = NULL, /* no continuation by id in Chat */
};
