/* classify.c - see classify.h. No I/O, no globals. */
#include "classify.h"

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
    const char *p, *path, *end;
    size_t n;

    if (!url)
        return SHIM_API_NONE;
    p = strstr(url, "://");
    p = p ? p + 3 : url;
    path = strchr(p, '/');
    if (!path)
        return SHIM_API_NONE;
    end = path + strcspn(path, "?#");
    n = (size_t)(end - path);
    if (n > 1 && path[n - 1] == '/')
        n--; /* tolerate one trailing slash */
    if (ends_with(path, n, "/responses"))
        return SHIM_API_RESPONSES;
    if (ends_with(path, n, "/chat/completions"))
        return SHIM_API_CHAT;
    return SHIM_API_NONE;
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
