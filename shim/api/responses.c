/* responses.c - the Responses API adapter (POST .../responses); pure.
 *
 * Request: every native code_interpreter tool becomes one flat function
 * tool with a "code" parameter; a tool_choice forcing the interpreter
 * forces that function instead; include "code_interpreter_call.outputs"
 * (meaningless upstream) and stream are taken out; code_interpreter_call
 * items the program replays as history become function_call +
 * function_call_output pairs the upstream understands.
 *
 * Answer: the last upstream Response, with every turn's items in order and
 * each executed call shown as a code_interpreter_call item, as OpenAI's own
 * container would have produced; tools, tool_choice and metadata echoed as
 * the program sent them; usage summed over all upstream calls. */
#include "api/responses.h"
#include "base/json.h"
#include "base/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drop_include_outputs(cJSON *up)
{
    cJSON *inc = cJSON_GetObjectItemCaseSensitive(up, "include"), *it, *next;

    if (!cJSON_IsArray(inc))
        return;
    for (it = inc->child; it; it = next) {
        next = it->next;
        if (cJSON_IsString(it) &&
            !strcmp(it->valuestring, "code_interpreter_call.outputs"))
            cJSON_Delete(cJSON_DetachItemViaPointer(inc, it));
    }
    if (!inc->child)
        cJSON_DeleteItemFromObjectCaseSensitive(up, "include");
}

/* The text the model saw for a replayed code_interpreter_call. */
static char *logs_of(const cJSON *item)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(item, "outputs"), *o;
    size_t n = 1;
    char *s;

    cJSON_ArrayForEach(o, outs)
    {
        const char *l = shim_json_str(o, "logs");
        if (l)
            n += strlen(l);
        else
            n += 32;
    }
    s = calloc(1, n);
    if (!s)
        return NULL;
    cJSON_ArrayForEach(o, outs)
    {
        const char *l = shim_json_str(o, "logs");
        strcat(s, l ? l : "[image]\n");
    }
    return s;
}

/* The call id a replayed code_interpreter_call gets: "call_" + its id
 * without "ci_" when that is short and plain, else a hash of the id (ids
 * come from the program: never cut one inside a UTF-8 character). */
static void history_call_id(const char *id, char *out, size_t n)
{
    const char *s = id ? (strncmp(id, "ci_", 3) ? id : id + 3) : "history";
    size_t len = strlen(s);

    if (len && len <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_-") == len) {
        snprintf(out, n, "call_%s", s);
    } else {
        char h[65];
        shim_sha256_hex(s, len, h);
        snprintf(out, n, "call_%.32s", h);
    }
}

/* code_interpreter_call history items -> function_call + output pairs.
 * (The array is rebuilt: cJSON 1.7.15's insert misbehaves after a replace.) */
static void convert_history(cJSON *up, const char *tool)
{
    cJSON *input = cJSON_GetObjectItemCaseSensitive(up, "input"), *it, *out;

    if (!cJSON_IsArray(input))
        return;
    out = cJSON_CreateArray();
    cJSON_ArrayForEach(it, input)
    {
        const char *type = shim_json_str(it, "type"), *id, *code;
        cJSON *fc, *fo, *args;
        char call_id[96], *argstr, *logs;

        if (!type || strcmp(type, "code_interpreter_call")) {
            cJSON_AddItemToArray(out, cJSON_Duplicate(it, 1));
            continue;
        }
        id = shim_json_str(it, "id");
        code = shim_json_str(it, "code");
        history_call_id(id, call_id, sizeof(call_id));
        args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "code", code ? code : "");
        argstr = cJSON_PrintUnformatted(args);
        cJSON_Delete(args);
        logs = logs_of(it);
        fc = cJSON_CreateObject();
        cJSON_AddStringToObject(fc, "type", "function_call");
        cJSON_AddStringToObject(fc, "call_id", call_id);
        cJSON_AddStringToObject(fc, "name", tool);
        cJSON_AddStringToObject(fc, "arguments", argstr ? argstr : "{}");
        fo = cJSON_CreateObject();
        cJSON_AddStringToObject(fo, "type", "function_call_output");
        cJSON_AddStringToObject(fo, "call_id", call_id);
        cJSON_AddStringToObject(fo, "output", logs ? logs : "");
        cJSON_AddItemToArray(out, fc);
        cJSON_AddItemToArray(out, fo);
        free(argstr);
        free(logs);
    }
    shim_json_set(up, "input", out);
}

static cJSON *r_prepare(const cJSON *req, struct shim_conv *cv)
{
    cJSON *up = shim_conv_prepare(req, cv, 0);

    if (!up)
        return NULL;
    drop_include_outputs(up);
    convert_history(up, cv->tool_name);
    cv->visible = cJSON_CreateArray();
    return up;
}

/* Only a plain function_call to the tool codeshim made for this request
 * is codeshim's: a call inside a namespace belongs to the program's
 * namespace tool, even when the names match. */
int shim_responses_is_internal(const cJSON *item, const struct shim_conv *cv)
{
    const char *type = shim_json_str(item, "type");
    const char *name = shim_json_str(item, "name");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(item, "namespace");
    return type && !strcmp(type, "function_call") && name &&
           !strcmp(name, cv->tool_name) && (!ns || cJSON_IsNull(ns));
}

/* Items the upstream finished by itself (text, reasoning, hosted tools it
 * ran with their results inside): the loop may go on past them. Every
 * other item, of a type known or not, waits for the program (its function,
 * custom, computer, shell, patch calls, MCP approvals...): the loop ends
 * and the program gets it as it came. */
static int needs_nothing(const cJSON *item)
{
    static const char *const done[] = {
        "message", "reasoning", "web_search_call", "file_search_call",
        "image_generation_call", "mcp_call", "mcp_list_tools", "compaction"};
    const char *type = shim_json_str(item, "type"), *exec;
    size_t i;

    if (!type)
        return 0;
    for (i = 0; i < sizeof(done) / sizeof(done[0]); i++)
        if (!strcmp(type, done[i]))
            return 1;
    /* a tool search runs on the server or asks the program to run it */
    exec = shim_json_str(item, "execution");
    return (!strcmp(type, "tool_search_call") || !strcmp(type, "tool_search_output")) &&
           exec && !strcmp(exec, "server");
}

static int r_scan(const cJSON *reply, struct shim_conv *cv, struct shim_call **calls,
                  size_t *n, int *foreign)
{
    const cJSON *output = cJSON_GetObjectItemCaseSensitive(reply, "output"), *it;
    struct shim_call *v = NULL;
    size_t k = 0, want = 0;

    *calls = NULL;
    *n = 0;
    *foreign = 0;
    if (!cJSON_IsObject(reply) || !cJSON_IsArray(output))
        return -EPROTO;
    cv->nreplies++;
    shim_conv_sum_usage(cv, cJSON_GetObjectItemCaseSensitive(reply, "usage"));
    cJSON_ArrayForEach(it, output) /* counted first: one allocation, no growth */
        want += shim_responses_is_internal(it, cv) ? 1 : 0;
    if (want && !(v = calloc(want, sizeof(*v))))
        return -ENOMEM;
    cJSON_ArrayForEach(it, output)
    {
        const cJSON *args;
        struct shim_call *c;

        if (!shim_responses_is_internal(it, cv)) {
            if (!needs_nothing(it))
                *foreign = 1;
            continue;
        }
        c = &v[k++];
        c->call_id = strdup(shim_json_str(it, "call_id") ? shim_json_str(it, "call_id")
                                                         : "call_missing");
        args = cJSON_GetObjectItemCaseSensitive(it, "arguments");
        c->arguments = cJSON_IsString(args) ? strdup(args->valuestring)
                                            : cJSON_PrintUnformatted(args);
        if (!c->call_id)
            goto nomem;
    }
    *calls = v;
    *n = k;
    return 0;
nomem:
    while (k)
        shim_call_free(&v[--k]);
    free(v);
    return -ENOMEM;
}

cJSON *shim_responses_call_output(const struct shim_call *c)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "type", "function_call_output");
    cJSON_AddStringToObject(o, "call_id", c->call_id ? c->call_id : "");
    cJSON_AddStringToObject(o, "output", c->output ? c->output : "");
    return o;
}

cJSON *shim_responses_ci_item(const struct shim_call *c)
{
    cJSON *it = cJSON_CreateObject(), *outs;
    size_t i;

    cJSON_AddStringToObject(it, "id", c->ci_id);
    cJSON_AddStringToObject(it, "type", "code_interpreter_call");
    cJSON_AddStringToObject(it, "status", c->status ? c->status : "completed");
    cJSON_AddStringToObject(it, "code", c->code ? c->code : "");
    cJSON_AddStringToObject(it, "container_id", c->container_id);
    outs = cJSON_AddArrayToObject(it, "outputs");
    if (c->output && *c->output) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "type", "logs");
        cJSON_AddStringToObject(l, "logs", c->output);
        cJSON_AddItemToArray(outs, l);
    }
    for (i = 0; i < c->res.nimages; i++) {
        const struct shim_exec_image *im = &c->res.images[i];
        size_t n = strlen(im->base64) + 64;
        char *url = malloc(n);
        cJSON *o;
        if (!url)
            continue;
        snprintf(url, n, "data:%s;base64,%s", im->mime ? im->mime : "image/png",
                 im->base64);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "image");
        cJSON_AddStringToObject(o, "url", url);
        cJSON_AddItemToArray(outs, o);
        free(url);
    }
    return it;
}

/* Adds a turn's items to cv->visible, executed internal calls shown as
 * code_interpreter_call items and unexecuted ones dropped. */
static void add_visible(const cJSON *reply, const struct shim_call *calls, size_t n,
                        struct shim_conv *cv)
{
    const cJSON *it;
    size_t k = 0;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "output"))
    {
        if (shim_responses_is_internal(it, cv)) {
            const struct shim_call *c = shim_conv_nth_call(calls, n, &k);
            if (c && c->executed)
                cJSON_AddItemToArray(cv->visible, shim_responses_ci_item(c));
        } else {
            cJSON_AddItemToArray(cv->visible, cJSON_Duplicate(it, 1));
        }
    }
}

/* Whether an upstream reasoning item can be sent back: with store=false
 * only when it carries its encrypted content. */
static int reasoning_replayable(const cJSON *up, const cJSON *item)
{
    const cJSON *store = cJSON_GetObjectItemCaseSensitive(up, "store");
    return !cJSON_IsFalse(store) ||
           cJSON_IsString(cJSON_GetObjectItemCaseSensitive(item, "encrypted_content"));
}

static int r_advance(cJSON *up, const cJSON *reply, const struct shim_call *calls,
                     size_t n, struct shim_conv *cv)
{
    cJSON *input = cJSON_GetObjectItemCaseSensitive(up, "input");
    const cJSON *it;
    size_t i, k = 0;

    if (cJSON_IsString(input)) {
        cJSON *arr = cJSON_CreateArray(), *msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "role", "user");
        cJSON_AddStringToObject(msg, "content", input->valuestring);
        cJSON_AddItemToArray(arr, msg);
        shim_json_set(up, "input", arr);
        input = arr;
    } else if (!cJSON_IsArray(input)) {
        input = cJSON_CreateArray();
        shim_json_set(up, "input", input);
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "output"))
    {
        const char *type = shim_json_str(it, "type");
        if (shim_responses_is_internal(it, cv)) {
            const struct shim_call *c = shim_conv_nth_call(calls, n, &k);
            cJSON *fc;
            if (!c || !(c->executed || c->skipped))
                continue;
            fc = cJSON_CreateObject();
            cJSON_AddStringToObject(fc, "type", "function_call");
            cJSON_AddStringToObject(fc, "call_id", c->call_id);
            cJSON_AddStringToObject(fc, "name", cv->tool_name);
            cJSON_AddStringToObject(fc, "arguments", c->arguments ? c->arguments : "");
            cJSON_AddItemToArray(input, fc);
        } else if (type && !strcmp(type, "reasoning")) {
            if (reasoning_replayable(up, it))
                cJSON_AddItemToArray(input, cJSON_Duplicate(it, 1));
        } else {
            cJSON_AddItemToArray(input, cJSON_Duplicate(it, 1));
        }
    }
    for (i = 0; i < n; i++)
        if (calls[i].executed || calls[i].skipped)
            cJSON_AddItemToArray(input, shim_responses_call_output(&calls[i]));
    if (cv->forced_choice)
        shim_conv_relax_choice(up, 0);
    add_visible(reply, calls, n, cv);
    return 0;
}

/* u[key] made a number (0 when it is missing or something else). */
static void want_number(cJSON *u, const char *key)
{
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(u, key)))
        shim_json_set(u, key, cJSON_CreateNumber(0));
}

/* u[key] made an object (empty when it is missing or something else). */
static cJSON *want_object(cJSON *u, const char *key)
{
    cJSON *d = cJSON_GetObjectItemCaseSensitive(u, key);

    if (cJSON_IsObject(d))
        return d;
    d = cJSON_CreateObject();
    shim_json_set(u, key, d);
    return cJSON_GetObjectItemCaseSensitive(u, key);
}

cJSON *shim_responses_usage(const struct shim_conv *cv)
{
    cJSON *u = cv->usage ? cJSON_Duplicate(cv->usage, 1) : cJSON_CreateObject(), *d;

    if (!u)
        return NULL;
    want_number(u, "input_tokens");
    want_number(u, "output_tokens");
    want_number(u, "total_tokens");
    d = want_object(u, "input_tokens_details");
    want_number(d, "cached_tokens");
    want_number(d, "cache_write_tokens");
    d = want_object(u, "output_tokens_details");
    want_number(d, "reasoning_tokens");
    return u;
}

static void echo_from_request(cJSON *out, const cJSON *req, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, key);
    if (v)
        shim_json_set(out, key, cJSON_Duplicate(v, 1));
}

cJSON *shim_responses_echo_tools(const cJSON *req)
{
    cJSON *tools = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(req, "tools"), 1), *t;

    cJSON_ArrayForEach(t, tools)
    {
        const char *type = shim_json_str(t, "type");
        if (type && !strcmp(type, "function")) {
            if (!cJSON_GetObjectItemCaseSensitive(t, "parameters"))
                cJSON_AddNullToObject(t, "parameters");
            if (!cJSON_GetObjectItemCaseSensitive(t, "strict"))
                cJSON_AddTrueToObject(t, "strict");
        } else if (type && !strcmp(type, "code_interpreter") &&
                   !cJSON_GetObjectItemCaseSensitive(t, "container")) {
            cJSON_AddStringToObject(cJSON_AddObjectToObject(t, "container"), "type", "auto");
        }
    }
    return tools;
}

static cJSON *r_finish(const cJSON *req, const cJSON *last, const struct shim_call *calls,
                       size_t n, struct shim_conv *cv, int capped)
{
    cJSON *out = cJSON_Duplicate(last, 1);

    if (!out)
        return NULL;
    add_visible(last, calls, n, cv);
    shim_json_set(out, "output", cJSON_Duplicate(cv->visible, 1));
    if (cJSON_GetObjectItemCaseSensitive(req, "tools"))
        shim_json_set(out, "tools", shim_responses_echo_tools(req));
    echo_from_request(out, req, "tool_choice");
    echo_from_request(out, req, "metadata");
    if (cv->usage)
        shim_json_set(out, "usage", shim_responses_usage(cv));
    if (capped) {
        shim_json_set(out, "status", cJSON_CreateString("incomplete"));
        shim_json_set(out, "incomplete_details", cJSON_CreateNull());
        if (cJSON_GetObjectItemCaseSensitive(out, "completed_at"))
            shim_json_set(out, "completed_at", cJSON_CreateNull());
    }
    return out;
}

const struct shim_api_ops shim_responses_ops = {
    .name = "responses",
    .prepare = r_prepare,
    .scan = r_scan,
    .advance = r_advance,
    .finish = r_finish,
    .call_output = shim_responses_call_output,
};
