/* conv.c - helpers shared by the API adapters; see conv.h. Pure but for
 * the warning a malformed usage object gets. */
#include "api/conv.h"

#include "base/json.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void shim_call_free(struct shim_call *c)
{
    if (!c)
        return;
    free(c->call_id);
    free(c->arguments);
    free(c->code);
    free(c->output);
    shim_exec_result_free(&c->res);
    memset(c, 0, sizeof(*c));
}

void shim_conv_free(struct shim_conv *cv)
{
    cJSON_Delete(cv->visible);
    cJSON_Delete(cv->usage);
    cv->visible = cv->usage = NULL;
}

static const char *tool_name_of(const cJSON *t, int chat)
{
    if (chat) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *n = shim_json_str(fn, "name");
        return n ? n : shim_json_str(t, "name");
    }
    return shim_json_str(t, "name");
}

static int name_taken(const cJSON *tools, int chat, const char *name)
{
    const cJSON *t;

    cJSON_ArrayForEach(t, tools)
    {
        const char *n = tool_name_of(t, chat);
        if (n && !strcmp(n, name))
            return 1;
    }
    return 0;
}

/* "python" is the name OpenAI's models know the code interpreter by; fall
 * back to codeshim-specific names when the program has its own "python". */
void shim_conv_pick_tool_name(const cJSON *tools, int chat, char *out, size_t outsz)
{
    int i;

    snprintf(out, outsz, "python");
    if (!name_taken(tools, chat, out))
        return;
    snprintf(out, outsz, "codeshim_python");
    for (i = 2; name_taken(tools, chat, out) && i < 1000; i++)
        snprintf(out, outsz, "codeshim_python_%d", i);
}

char *shim_conv_parse_code(const char *arguments, const char **why)
{
    cJSON *a = NULL;
    const char *code;
    char *out;
    int rc;

    *why = NULL;
    if (!arguments) {
        *why = "the tool call had no arguments";
        return NULL;
    }
    /* read as the upstream would: a "code" given twice runs neither */
    rc = shim_json_read(arguments, strlen(arguments), &a, NULL);
    if (rc == -EEXIST) {
        *why = "the tool arguments give a key twice or hold a U+0000 character";
        return NULL;
    }
    if (rc == -E2BIG) {
        *why = "the tool arguments hold more JSON values or levels than codeshim reads";
        return NULL;
    }
    if (!cJSON_IsObject(a)) {
        cJSON_Delete(a);
        *why = "the tool arguments are not a JSON object";
        return NULL;
    }
    code = shim_json_str(a, "code");
    if (!code) {
        cJSON_Delete(a);
        *why = "the tool arguments have no \"code\" string";
        return NULL;
    }
    out = strdup(code);
    cJSON_Delete(a);
    if (!out)
        *why = "out of memory";
    return out;
}

static int is_private_key(const char *k)
{
    return !strncasecmp(k, "codeshim", 8) || !strncasecmp(k, "_codeshim", 9);
}

static void strip_private_keys(cJSON *obj)
{
    cJSON *it = obj ? obj->child : NULL;

    while (it) {
        cJSON *next = it->next;
        if (it->string && is_private_key(it->string))
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, it));
        it = next;
    }
}

void shim_conv_strip_private(cJSON *up)
{
    cJSON *md;

    strip_private_keys(up);
    md = cJSON_GetObjectItemCaseSensitive(up, "metadata");
    if (cJSON_IsObject(md)) {
        cJSON_DeleteItemFromObjectCaseSensitive(md, "session_id");
        strip_private_keys(md);
        if (!md->child)
            cJSON_DeleteItemFromObjectCaseSensitive(up, "metadata");
    }
}

static size_t add_ref(const char **out, size_t n, size_t max, const char *id)
{
    size_t i;

    if (!id || strncmp(id, "cntr_", 5) || n >= max)
        return n;
    for (i = 0; i < n; i++)
        if (!strcmp(out[i], id))
            return n;
    out[n] = id;
    return n + 1;
}

size_t shim_conv_container_refs(const cJSON *req, const char **out, size_t max)
{
    const cJSON *it;
    size_t n = 0;

    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *type = shim_json_str(it, "type");
        if (type && !strcmp(type, "code_interpreter"))
            n = add_ref(out, n, max, shim_json_str(it, "container"));
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "input"))
    {
        const char *type = shim_json_str(it, "type");
        if (type && !strcmp(type, "code_interpreter_call"))
            n = add_ref(out, n, max, shim_json_str(it, "container_id"));
    }
    return n;
}

const char *shim_conv_sandbox_name(const cJSON *req, int *named)
{
    const char *s = shim_json_str(cJSON_GetObjectItemCaseSensitive(req, "metadata"),
                                  "codeshim_sandbox");
    const cJSON *it;

    *named = 1;
    if (s)
        return s;
    *named = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "tools"))
    {
        const char *type = shim_json_str(it, "type");
        if (type && !strcmp(type, "code_interpreter") &&
            (s = shim_json_str(it, "container")) != NULL && strncmp(s, "cntr_", 5))
            return s;
    }
    return NULL;
}

const char *shim_conv_session_id(const cJSON *req)
{
    const char *s = shim_json_str(cJSON_GetObjectItemCaseSensitive(req, "metadata"), "session_id");
    return s && *s ? s : NULL;
}

static const char tool_description[] =
    "Run Python 3 code in a stateful, Jupyter-notebook-like sandbox. "
    "Variables, imports and files persist between calls. The working "
    "directory is /mnt/data. The result shows stdout and stderr, the value "
    "of the last expression, or the traceback of an exception. The sandbox "
    "has no internet access.";

cJSON *shim_conv_code_tool(const char *name, int chat)
{
    cJSON *t = cJSON_CreateObject(), *fn, *params, *props, *code, *req;

    cJSON_AddStringToObject(t, "type", "function");
    fn = chat ? cJSON_AddObjectToObject(t, "function") : t;
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "description", tool_description);
    params = cJSON_AddObjectToObject(fn, "parameters");
    cJSON_AddStringToObject(params, "type", "object");
    props = cJSON_AddObjectToObject(params, "properties");
    code = cJSON_AddObjectToObject(props, "code");
    cJSON_AddStringToObject(code, "type", "string");
    cJSON_AddStringToObject(code, "description", "The Python code to run.");
    req = cJSON_AddArrayToObject(params, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("code"));
    cJSON_AddFalseToObject(params, "additionalProperties");
    if (!chat)
        cJSON_AddFalseToObject(t, "strict");
    return t;
}

int shim_conv_is_ci(const cJSON *o)
{
    const char *type = shim_json_str(o, "type");
    const char *name = shim_json_str(o, "name");
    const char *fname = shim_json_str(cJSON_GetObjectItemCaseSensitive(o, "function"), "name");
    return (type && !strcmp(type, "code_interpreter")) ||
           (name && !strcmp(name, "code_interpreter")) ||
           (fname && !strcmp(fname, "code_interpreter"));
}

/* {"type":"function","name":N} (Responses) or
 * {"type":"function","function":{"name":N}} (Chat). */
static cJSON *forced_function(const char *name, int chat)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(chat ? cJSON_AddObjectToObject(c, "function") : c, "name", name);
    return c;
}

/* The allowed_tools body: Chat nests it under "allowed_tools". */
static cJSON *allowed_tools_of(cJSON *tc, int chat)
{
    return chat ? cJSON_GetObjectItemCaseSensitive(tc, "allowed_tools") : tc;
}

void shim_conv_rewrite_choice(cJSON *up, struct shim_conv *cv, int chat)
{
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(up, "tool_choice");
    const char *type;

    if (cJSON_IsString(tc)) {
        cv->forced_choice = !strcmp(tc->valuestring, "required");
        return;
    }
    if (!cJSON_IsObject(tc))
        return;
    type = shim_json_str(tc, "type");
    if (shim_conv_is_ci(tc)) {
        shim_json_set(up, "tool_choice", forced_function(cv->tool_name, chat));
        cv->forced_choice = 1;
    } else if (type && !strcmp(type, "allowed_tools")) {
        cJSON *at = allowed_tools_of(tc, chat);
        cJSON *tools = cJSON_GetObjectItemCaseSensitive(at, "tools"), *t;
        const char *mode = shim_json_str(at, "mode");
        cJSON_ArrayForEach(t, tools)
        {
            if (shim_conv_is_ci(t)) {
                cJSON *f = forced_function(cv->tool_name, chat);
                cJSON_ReplaceItemViaPointer(tools, t, f);
                t = f;
            }
        }
        cv->forced_choice = mode && !strcmp(mode, "required");
    } else {
        cv->forced_choice = 1; /* a named tool */
    }
}

void shim_conv_relax_choice(cJSON *up, int chat)
{
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(up, "tool_choice");
    const char *type = shim_json_str(tc, "type");

    if (type && !strcmp(type, "allowed_tools"))
        shim_json_set(allowed_tools_of(tc, chat), "mode", cJSON_CreateString("auto"));
    else if (tc)
        shim_json_set(up, "tool_choice", cJSON_CreateString("auto"));
}

const struct shim_call *shim_conv_nth_call(const struct shim_call *calls, size_t n,
                                           size_t *k)
{
    return *k < n ? &calls[(*k)++] : NULL;
}

/* Summing usage: one upstream reply's usage is walked for at most
 * SHIM_USAGE_MAX_FIELDS fields (all levels together) down to
 * SHIM_USAGE_MAX_DEPTH levels, and the sum holds at most as many fields, so
 * every lookup is in an object of bounded size and a reply with 100,000
 * fields costs no more than one with 256. What lies beyond is malformed:
 * not summed, with one warning per conversation. */
struct usage_walk {
    int seen;  /* fields of this reply's usage looked at */
    int room;  /* fields the sum may still gain */
    int clipped;
};

static int count_fields(const cJSON *o)
{
    const cJSON *it;
    int n = 0;

    cJSON_ArrayForEach(it, o)
        n += 1 + (cJSON_IsObject(it) ? count_fields(it) : 0);
    return n;
}

/* Adds a new member to dst if the sum has room for it. */
static cJSON *add_field(cJSON *dst, const char *key, cJSON *v, struct usage_walk *w)
{
    if (!v)
        return NULL;
    if (w->room <= 0) {
        w->clipped = 1;
        cJSON_Delete(v);
        return NULL;
    }
    if (!cJSON_AddItemToObject(dst, key, v)) {
        cJSON_Delete(v);
        return NULL;
    }
    w->room--;
    return v;
}

/* dst[k] += src[k] for every number, recursing into objects; a field whose
 * type differs from the sum's is left out. */
static void add_numbers(cJSON *dst, const cJSON *src, int depth, struct usage_walk *w)
{
    const cJSON *it;

    for (it = src->child; it; it = it->next) {
        cJSON *d;
        if (++w->seen > SHIM_USAGE_MAX_FIELDS) {
            w->clipped = 1;
            return;
        }
        if (!it->string || !(cJSON_IsNumber(it) || cJSON_IsObject(it)))
            continue;
        d = cJSON_GetObjectItemCaseSensitive(dst, it->string);
        if (cJSON_IsNumber(it)) {
            if (cJSON_IsNumber(d))
                cJSON_SetNumberValue(d, d->valuedouble + it->valuedouble);
            else if (!d)
                add_field(dst, it->string, cJSON_CreateNumber(it->valuedouble), w);
        } else if (depth >= SHIM_USAGE_MAX_DEPTH) {
            w->clipped = 1;
        } else {
            if (!d)
                d = add_field(dst, it->string, cJSON_CreateObject(), w);
            if (cJSON_IsObject(d))
                add_numbers(d, it, depth + 1, w);
        }
    }
}

void shim_conv_sum_usage(struct shim_conv *cv, const cJSON *usage)
{
    struct usage_walk w = {0, 0, 0};

    if (!cJSON_IsObject(usage))
        return;
    if (!cv->usage && !(cv->usage = cJSON_CreateObject()))
        return;
    w.room = SHIM_USAGE_MAX_FIELDS - count_fields(cv->usage);
    add_numbers(cv->usage, usage, 1, &w);
    if (w.clipped && !cv->usage_warned) {
        cv->usage_warned = 1;
        LOG_WARN("the upstream's usage has more than %d fields or more than %d "
                 "levels; the rest of it is not summed",
                 SHIM_USAGE_MAX_FIELDS, SHIM_USAGE_MAX_DEPTH);
    }
}

cJSON *shim_conv_prepare(const cJSON *req, struct shim_conv *cv, int chat)
{
    cJSON *up = cJSON_Duplicate(req, 1), *tools, *nt, *t, *so;
    int inserted = 0;

    if (!up)
        return NULL;
    tools = cJSON_GetObjectItemCaseSensitive(up, "tools");
    shim_conv_pick_tool_name(tools, chat, cv->tool_name, sizeof(cv->tool_name));
    nt = cJSON_CreateArray();
    cJSON_ArrayForEach(t, tools)
    {
        if (!shim_conv_is_ci(t))
            cJSON_AddItemToArray(nt, cJSON_Duplicate(t, 1));
        else if (!inserted++) /* several native entries: one function tool */
            cJSON_AddItemToArray(nt, shim_conv_code_tool(cv->tool_name, chat));
    }
    shim_json_set(up, "tools", nt);
    shim_conv_rewrite_choice(up, cv, chat);
    cv->stream = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(up, "stream"));
    so = cJSON_GetObjectItemCaseSensitive(up, "stream_options");
    cv->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    cJSON_DeleteItemFromObjectCaseSensitive(up, "stream");
    cJSON_DeleteItemFromObjectCaseSensitive(up, "stream_options");
    shim_conv_strip_private(up);
    return up;
}
