/* offline.c - see offline.h. */
#include "api/offline.h"

#include "api/conv.h"
#include "base/clock.h"
#include "base/ids.h"
#include "base/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* 1 when t is exactly the tool conv.c makes for codeshim under name. */
static int is_codeshim_tool(const cJSON *t, const char *name, int chat)
{
    cJSON *mine = name ? shim_conv_code_tool(name, chat) : NULL;
    int same = mine && cJSON_Compare(t, mine, 1);

    cJSON_Delete(mine);
    return same;
}

/* The name of codeshim's tool: a program tool may take a "code"
 * parameter too, so the exact copy of codeshim's wins; else the first
 * function tool with a "code" parameter. */
static const char *code_tool(const cJSON *req, enum shim_api api)
{
    const cJSON *t;
    const char *first = NULL;
    int chat = api == SHIM_API_CHAT;

    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const cJSON *fn = chat ? cJSON_GetObjectItemCaseSensitive(t, "function") : t;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(fn, "parameters"), "properties");
        const char *name = shim_json_str(fn, "name");
        if (!cJSON_GetObjectItemCaseSensitive(props, "code"))
            continue;
        if (is_codeshim_tool(t, name, chat))
            return name;
        if (!first)
            first = name;
    }
    return first;
}

/* Text of a message's content: a string or an array of text parts. */
static void content_text(const cJSON *content, char *out, size_t outsz)
{
    const cJSON *p;
    size_t n = 0;

    out[0] = '\0';
    if (cJSON_IsString(content)) {
        snprintf(out, outsz, "%s", content->valuestring);
        return;
    }
    cJSON_ArrayForEach(p, content)
    {
        const char *t = shim_json_str(p, "text");
        if (t && n < outsz)
            n += (size_t)snprintf(out + n, outsz - n, "%s", t);
    }
}

struct convo {
    char user[65536];      /* last user message text */
    int outputs;           /* tool outputs after it */
    const char *last_output;
    size_t items;          /* conversation length, for usage */
};

static void read_convo(const cJSON *req, enum shim_api api, struct convo *c)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(req, api == SHIM_API_CHAT ? "messages" : "input");
    const cJSON *it;

    memset(c, 0, sizeof(*c));
    if (cJSON_IsString(list)) {
        snprintf(c->user, sizeof(c->user), "%s", list->valuestring);
        c->items = 1;
        return;
    }
    cJSON_ArrayForEach(it, list)
    {
        const char *role = shim_json_str(it, "role");
        const char *type = shim_json_str(it, "type");
        c->items++;
        if (role && !strcmp(role, "user")) {
            content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), c->user, sizeof(c->user));
            c->outputs = 0;
            c->last_output = NULL;
        } else if ((role && !strcmp(role, "tool")) ||
                   (type && !strcmp(type, "function_call_output"))) {
            const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, role ? "content" : "output");
            c->outputs++;
            c->last_output = cJSON_IsString(o) ? o->valuestring : NULL;
        }
    }
}

/* The k-th ```python block of text (malloc'd), or NULL. */
static char *python_block(const char *text, int k)
{
    const char *p = text;

    while ((p = strstr(p, "```python")) != NULL) {
        const char *start = strchr(p, '\n'), *end;
        if (!start)
            return NULL;
        start++;
        end = strstr(start, "```");
        if (!end)
            return NULL;
        if (k-- == 0)
            return strndup(start, (size_t)(end - start));
        p = end + 3;
    }
    return NULL;
}

static cJSON *args_json(const char *code)
{
    cJSON *a = cJSON_CreateObject();
    char *s;
    cJSON *str;

    cJSON_AddStringToObject(a, "code", code);
    s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    str = cJSON_CreateString(s ? s : "{}");
    free(s);
    return str;
}

/* What the last tool output says happened, as a model reading it would
 * tell: the lead of the answer. The texts it looks for are the ones
 * codeshim's tool gives (loop.c, the sandboxes). */
static const char *outcome(const char *out)
{
    if (!strncmp(out, "Error: ", 7))
        return "The code could not be run. The tool said:\n";
    if (!strncmp(out, "Not run: ", 9))
        return "The code was not run. The tool said:\n";
    if (strstr(out, "Execution timed out after "))
        return "The code did not finish: it hit the time limit. Output:\n";
    if (strstr(out, "Traceback (most recent call last):"))
        return "The code ran and raised an exception. Output:\n";
    if (!*out)
        return "The code ran and printed nothing.";
    return "The code ran. Output:\n";
}

static char *answer_text(const struct convo *c)
{
    const char *out = c->last_output;
    size_t n = (out ? strlen(out) : 0) + 128;
    char *s = malloc(n);

    if (!s)
        return NULL;
    if (out)
        snprintf(s, n, "%s%s", outcome(out), out);
    else if (c->outputs)
        snprintf(s, n, "The tool answered, but with nothing this offline model can read.");
    else
        snprintf(s, n, "This is codeshim's offline model: put Python code in a "
                       "```python block and it will run it.");
    return s;
}

/* The code the model sends its tool this turn: the next ```python block,
 * or all the remaining ones with [parallel]; none left means it answers
 * in text. A string array (caller owns). */
static cJSON *plan(const char *tool, const struct convo *c, int parallel)
{
    cJSON *todo = cJSON_CreateArray();
    char *code;
    int k;

    for (k = c->outputs; tool && (code = python_block(c->user, k)) != NULL; k++) {
        cJSON_AddItemToArray(todo, cJSON_CreateString(code));
        free(code);
        if (!parallel)
            break;
    }
    return todo;
}

/* A function call item of a Response: name with arguments (a string). */
static cJSON *responses_call(const char *name, cJSON *arguments)
{
    cJSON *fc = cJSON_CreateObject();
    char fid[64], cid[64];

    shim_id_make(fid, sizeof(fid), "fc_", 48);
    shim_id_make(cid, sizeof(cid), "call_", 24);
    cJSON_AddStringToObject(fc, "id", fid);
    cJSON_AddStringToObject(fc, "type", "function_call");
    cJSON_AddStringToObject(fc, "status", "completed");
    cJSON_AddStringToObject(fc, "call_id", cid);
    cJSON_AddStringToObject(fc, "name", name);
    cJSON_AddItemToObject(fc, "arguments", arguments);
    return fc;
}

/* A tool call of a chat message. */
static cJSON *chat_call(const char *name, cJSON *arguments)
{
    cJSON *t = cJSON_CreateObject(), *fn;
    char cid[64];

    shim_id_make(cid, sizeof(cid), "call_", 24);
    cJSON_AddStringToObject(t, "id", cid);
    cJSON_AddStringToObject(t, "type", "function");
    fn = cJSON_AddObjectToObject(t, "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddItemToObject(fn, "arguments", arguments);
    return t;
}

/* A rough input token count: 12 an item and a byte in 4 of the user's text. */
static long long input_tokens(const struct convo *c)
{
    return (long long)(c->items * 12 + strlen(c->user) / 4);
}

static cJSON *responses_reply(const cJSON *req, const char *tool,
                              const struct shim_offline_turn *t, long long in_tok)
{
    cJSON *r = cJSON_CreateObject(), *out, *u, *d;
    const cJSON *code, *codes = tool ? t->codes : NULL;
    char id[64];
    const char *model = shim_json_str(req, "model");

    shim_id_make(id, sizeof(id), "resp_", 48);
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", "response");
    cJSON_AddNumberToObject(r, "created_at", (double)shim_clock_wall_s());
    cJSON_AddStringToObject(r, "status", "completed");
    cJSON_AddNullToObject(r, "error");
    cJSON_AddNullToObject(r, "incomplete_details");
    {
        const cJSON *ins = cJSON_GetObjectItemCaseSensitive(req, "instructions");
        cJSON_AddItemToObject(r, "instructions", ins ? cJSON_Duplicate(ins, 1) : cJSON_CreateNull());
    }
    cJSON_AddStringToObject(r, "model", model ? model : "codeshim-offline");
    out = cJSON_AddArrayToObject(r, "output");
    cJSON_ArrayForEach(code, codes)
        cJSON_AddItemToArray(out, responses_call(tool, args_json(code->valuestring)));
    if (t->call_name)
        cJSON_AddItemToArray(out, responses_call(t->call_name,
                                                 cJSON_CreateString(t->call_args ? t->call_args
                                                                                 : "{}")));
    if (t->text || !out->child) {
        cJSON *m = cJSON_CreateObject(), *content, *part;
        char mid[64];
        const char *text = t->text;
        shim_id_make(mid, sizeof(mid), "msg_", 48);
        cJSON_AddStringToObject(m, "id", mid);
        cJSON_AddStringToObject(m, "type", "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "status", "completed");
        content = cJSON_AddArrayToObject(m, "content");
        part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "output_text");
        cJSON_AddStringToObject(part, "text", text ? text : "");
        cJSON_AddArrayToObject(part, "annotations");
        cJSON_AddArrayToObject(part, "logprobs");
        cJSON_AddItemToArray(content, part);
        cJSON_AddItemToArray(out, m);
    }
    cJSON_AddTrueToObject(r, "parallel_tool_calls");
    cJSON_AddNumberToObject(r, "temperature", 1);
    cJSON_AddNumberToObject(r, "top_p", 1);
    cJSON_AddStringToObject(r, "tool_choice", "auto");
    {
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
        cJSON_AddItemToObject(r, "tools", tools ? cJSON_Duplicate(tools, 1) : cJSON_CreateArray());
    }
    cJSON_AddObjectToObject(r, "metadata");
    u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", (double)in_tok);
    d = cJSON_AddObjectToObject(u, "input_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", 0);
    cJSON_AddNumberToObject(d, "cache_write_tokens", 0);
    cJSON_AddNumberToObject(u, "output_tokens", 16);
    d = cJSON_AddObjectToObject(u, "output_tokens_details");
    cJSON_AddNumberToObject(d, "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(in_tok + 16));
    return r;
}

static cJSON *chat_reply(const cJSON *req, const char *tool, const struct shim_offline_turn *t,
                         long long in_tok)
{
    cJSON *r = cJSON_CreateObject(), *choices, *ch, *msg, *tcs = cJSON_CreateArray(), *u;
    const cJSON *code, *codes = tool ? t->codes : NULL;
    char id[64];
    const char *model = shim_json_str(req, "model");
    int made;

    shim_id_make(id, sizeof(id), "chatcmpl-", 29);
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", "chat.completion");
    cJSON_AddNumberToObject(r, "created", (double)shim_clock_wall_s());
    cJSON_AddStringToObject(r, "model", model ? model : "codeshim-offline");
    choices = cJSON_AddArrayToObject(r, "choices");
    ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", 0);
    msg = cJSON_AddObjectToObject(ch, "message");
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_ArrayForEach(code, codes)
        cJSON_AddItemToArray(tcs, chat_call(tool, args_json(code->valuestring)));
    if (t->call_name)
        cJSON_AddItemToArray(tcs, chat_call(t->call_name, cJSON_CreateString(t->call_args ?
                                                                             t->call_args : "{}")));
    made = tcs->child != NULL;
    if (t->text || !made)
        cJSON_AddStringToObject(msg, "content", t->text ? t->text : "");
    else
        cJSON_AddNullToObject(msg, "content");
    cJSON_AddNullToObject(msg, "refusal");
    if (made)
        cJSON_AddItemToObject(msg, "tool_calls", tcs);
    else
        cJSON_Delete(tcs);
    cJSON_AddNullToObject(ch, "logprobs");
    cJSON_AddStringToObject(ch, "finish_reason", made ? "tool_calls" : "stop");
    cJSON_AddItemToArray(choices, ch);
    u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)in_tok);
    cJSON_AddNumberToObject(u, "completion_tokens", 16);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(in_tok + 16));
    return r;
}

cJSON *shim_offline_reply(enum shim_api api, const cJSON *req)
{
    struct convo *c = malloc(sizeof(*c));
    struct shim_offline_turn t;
    const char *tool;
    cJSON *todo, *r;
    char *text = NULL;

    if (!c)
        return NULL;
    read_convo(req, api, c);
    tool = code_tool(req, api);
    todo = plan(tool, c, strstr(c->user, "[parallel]") != NULL);
    memset(&t, 0, sizeof(t));
    t.codes = todo;
    if (!todo->child)
        t.text = text = answer_text(c);
    r = api == SHIM_API_CHAT ? chat_reply(req, tool, &t, input_tokens(c))
                             : responses_reply(req, tool, &t, input_tokens(c));
    free(text);
    cJSON_Delete(todo);
    free(c);
    return r;
}

cJSON *shim_offline_shape(enum shim_api api, const cJSON *req, const struct shim_offline_turn *t)
{
    struct convo *c = malloc(sizeof(*c));
    cJSON *r;

    if (!c)
        return NULL;
    read_convo(req, api, c);
    r = api == SHIM_API_CHAT ? chat_reply(req, code_tool(req, api), t, input_tokens(c))
                             : responses_reply(req, code_tool(req, api), t, input_tokens(c));
    free(c);
    return r;
}

const char *shim_offline_user_text(const cJSON *req, enum shim_api api, char *out, size_t outsz)
{
    struct convo *c = malloc(sizeof(*c));

    out[0] = '\0';
    if (!c)
        return out;
    read_convo(req, api, c);
    snprintf(out, outsz, "%s", c->user);
    free(c);
    return out;
}
