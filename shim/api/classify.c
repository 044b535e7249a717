/* classify.c - see classify.h. No I/O, no globals; URLs are read by
 * url.c (libcurl's own parser). */
#include "api/classify.h"

#include "base/text.h"
#include "system/url.h"

#include "base/json.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

/* memmem for the pass-through's one needle: glibc's memmem first builds
 * a shift table, several times the cost of scanning a small body. memchr
 * to each place the needle's byte at index pivot could be instead (its
 * '_', rarer in JSON and prose than its 'c'), at most n * k work. */
static int contains(const char *s, size_t n, const char *needle, size_t k, size_t pivot)
{
    const char *end = s + n, *p = s + pivot;

    if (n < k)
        return 0;
    while ((size_t)(end - p) >= k - pivot &&
           (p = memchr(p, needle[pivot], (size_t)(end - p) - (k - pivot) + 1)) != NULL) {
        if (!memcmp(p - pivot, needle, k))
            return 1;
        p++;
    }
    return 0;
}

enum shim_api shim_classify_url(const char *url)
{
    struct shim_url u;
    enum shim_api api = SHIM_API_NONE;
    size_t n;

    if (shim_url_parse(url, 0, &u) < 0)
        return SHIM_API_NONE; /* libcurl cannot read it either */
    n = strlen(u.path);
    if (n > 1 && u.path[n - 1] == '/')
        n--; /* tolerate one trailing slash */
    if (ends_with(u.path, n, "/responses"))
        api = SHIM_API_RESPONSES;
    else if (ends_with(u.path, n, "/chat/completions"))
        api = SHIM_API_CHAT;
    shim_url_free(&u);
    return api;
}

/* contains() for a NUL-terminated s, which needs no length first. */
static int contains_str(const char *s, const char *needle, size_t k, size_t pivot)
{
    const char *p;
    size_t i;

    for (i = 0; i < pivot; i++)
        if (!s[i])
            return 0;
    for (p = s + pivot; (p = strchr(p, needle[pivot])) != NULL; p++)
        if (!strncmp(p - pivot, needle, k))
            return 1;
    return 0;
}

int shim_classify_may_be_ours(int is_post, const char *custom_request, const char *body,
                              size_t len, size_t max_body)
{
    static const char needle[] = "code_interpreter";

    if (!is_post || !body || len == 0)
        return 0;
    if (custom_request && strcasecmp(custom_request, "POST") != 0)
        return 0;
    if (len == SHIM_BODY_STRING) {
        if (!contains_str(body, needle, sizeof(needle) - 1, 4))
            return 0;
        len = strlen(body);
    } else if (len <= max_body && !contains(body, len, needle, sizeof(needle) - 1, 4)) {
        return 0;
    }
    return len > 0 && len <= max_body;
}

enum shim_api shim_classify_transfer(int is_post, const char *custom_request,
                                     const char *url, const char *body,
                                     size_t len, size_t max_body)
{
    return shim_classify_may_be_ours(is_post, custom_request, body, len, max_body)
               ? shim_classify_url(url)
               : SHIM_API_NONE;
}

int shim_classify_maybe_containers(const char *url)
{
    return url && strstr(url, "/containers") != NULL;
}

int shim_classify_body(const cJSON *req)
{
    const cJSON *tools, *t;

    if (!cJSON_IsObject(req))
        return 0;
    tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!cJSON_IsArray(tools))
        return 0;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        if (cJSON_IsString(type) && !strcmp(type->valuestring, "code_interpreter"))
            return 1;
    }
    return 0;
}

const char *shim_classify_unsupported(const cJSON *req, enum shim_api kind, const char **why)
{
    if (kind == SHIM_API_RESPONSES &&
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "background"))) {
        *why = "codeshim runs the code_interpreter tool inside this request and cannot "
               "run it in the background; send the request without \"background\": true.";
        return "background";
    }
    return NULL;
}

static const char *kind_of(const cJSON *j)
{
    if (cJSON_IsArray(j))
        return "an array";
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsNull(j))
        return "null";
    return "an object";
}

/* A tool type that looks like a misspelt code_interpreter: a few edits
 * away, or the same but for case, '-' or ' ' for '_'. */
static int near_miss(const char *type)
{
    char folded[65];
    size_t i, n = strlen(type);

    if (n >= sizeof(folded))
        return 0;
    for (i = 0; i <= n; i++)
        folded[i] = (type[i] == '-' || type[i] == ' ') ? '_'
                    : (type[i] >= 'A' && type[i] <= 'Z') ? (char)(type[i] + 32)
                                                         : type[i];
    return shim_text_distance(folded, "code_interpreter", 3) <= 3;
}

/* The tools array holds no code_interpreter entry: says so, naming the
 * first near miss. */
static void no_tool(const cJSON *tools, struct shim_pass_why *out)
{
    const cJSON *t;
    int i = 0, n = cJSON_GetArraySize(tools);

    out->code = SHIM_PASS_NO_CODE_INTERPRETER;
    snprintf(out->text, sizeof(out->text), "no code_interpreter tool (\"tools\" has %d %s)", n,
             n == 1 ? "entry" : "entries");
    cJSON_ArrayForEach(t, tools)
    {
        const char *type = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "type"))
                               ? cJSON_GetObjectItemCaseSensitive(t, "type")->valuestring
                               : NULL;
        if (type && near_miss(type)) {
            /* at most 40 bytes of it, no control character or quote */
            char shown[48];
            size_t k;
            snprintf(shown, sizeof(shown), "%.40s", type);
            for (k = 0; shown[k]; k++)
                if ((unsigned char)shown[k] < 0x20 || shown[k] == '"' || shown[k] == '\\')
                    shown[k] = '?';
            snprintf(out->text, sizeof(out->text),
                     "no code_interpreter tool: tools[%d] has type \"%s\"; did you mean "
                     "\"code_interpreter\"?", i, shown);
            return;
        }
        i++;
    }
}

enum shim_pass shim_classify_explain(int is_post, const char *method, const char *body,
                                     size_t len, size_t max_body, struct shim_pass_why *out)
{
    const cJSON *tools;
    cJSON *req;

    out->code = SHIM_PASS_OURS;
    out->text[0] = '\0';
    if (!is_post || !method || strcasecmp(method, "POST") != 0) {
        out->code = SHIM_PASS_NOT_POST;
        snprintf(out->text, sizeof(out->text), "not a POST (%.16s)",
                 method && *method ? method : "no method");
        return out->code;
    }
    if (!body) {
        out->code = SHIM_PASS_NO_BODY;
        snprintf(out->text, sizeof(out->text),
                 "no body codeshim can read: it reads a JSON body set with "
                 "CURLOPT_POSTFIELDS (curl -d) or sent by a read callback, not a form "
                 "or MIME post");
        return out->code;
    }
    if (len == SHIM_BODY_STRING)
        len = strnlen(body, max_body + 1);
    if (len == 0) {
        out->code = SHIM_PASS_EMPTY_BODY;
        snprintf(out->text, sizeof(out->text), "the body is empty");
        return out->code;
    }
    if (len > max_body) {
        out->code = SHIM_PASS_TOO_LARGE;
        snprintf(out->text, sizeof(out->text),
                 "the body is over CODESHIM_MAX_REQUEST (more than %zu bytes)", max_body);
        return out->code;
    }
    req = shim_json_parse(body, len);
    if (!req) {
        out->code = SHIM_PASS_NOT_JSON;
        snprintf(out->text, sizeof(out->text), "the body is not JSON");
        return out->code;
    }
    tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    if (!cJSON_IsObject(req)) {
        out->code = SHIM_PASS_NOT_OBJECT;
        snprintf(out->text, sizeof(out->text), "the body is JSON but %s, not an object",
                 kind_of(req));
    } else if (!tools) {
        out->code = SHIM_PASS_NO_TOOLS;
        snprintf(out->text, sizeof(out->text), "no code_interpreter tool (no \"tools\")");
    } else if (!cJSON_IsArray(tools)) {
        out->code = SHIM_PASS_TOOLS_NOT_ARRAY;
        snprintf(out->text, sizeof(out->text), "\"tools\" is %s, not an array",
                 kind_of(tools));
    } else if (!shim_classify_body(req)) {
        no_tool(tools, out);
    }
    cJSON_Delete(req);
    return out->code;
}
