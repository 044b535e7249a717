/* json.c - see json.h. */
#include "json.h"

const char *shim_json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

cJSON *shim_json_parse(const char *p, size_t n)
{
    if (!p)
        return NULL;
    /* require_null_terminated=0 with an explicit length: the body may not
     * be NUL-terminated (POSTFIELDS with POSTFIELDSIZE). */
    return cJSON_ParseWithLengthOpts(p, n, NULL, 0);
}

void shim_json_set(cJSON *obj, const char *key, cJSON *val)
{
    if (!val)
        return;
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, val);
    else
        cJSON_AddItemToObject(obj, key, val);
}

long long shim_json_int(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

void shim_json_add_int(cJSON *dst, const cJSON *src, const char *key)
{
    long long sum = shim_json_int(dst, key) + shim_json_int(src, key);
    shim_json_set(dst, key, cJSON_CreateNumber((double)sum));
}
