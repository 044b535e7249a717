/* conv.c - helpers shared by the API adapters; see conv.h. Pure. */
#include "conv.h"

#include "json.h"

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
    cJSON *a;
    const char *code;
    char *out;

    *why = NULL;
    if (!arguments) {
        *why = "the tool call had no arguments";
        return NULL;
    }
    a = cJSON_Parse(arguments);
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

const char *shim_conv_session_id(const cJSON *req)
{
    const char *s = shim_json_str(cJSON_GetObjectItemCaseSensitive(req, "metadata"), "session_id");
    return s && *s ? s : NULL;
}
