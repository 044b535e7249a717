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
    if (!cJSON_IsObject(obj)) { /* nowhere to put it: it was ours to free */
        cJSON_Delete(val);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, val);
    else
        cJSON_AddItemToObject(obj, key, val);
}

long long shim_json_int(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    double d;

    if (!cJSON_IsNumber(v))
        return 0;
    d = v->valuedouble; /* untrusted: clamp before converting (UB otherwise) */
    if (d != d)
        return 0;
    if (d >= 9.2e18)
        return 9200000000000000000LL;
    if (d <= -9.2e18)
        return -9200000000000000000LL;
    return (long long)d;
}
