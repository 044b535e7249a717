/* json.h - small cJSON helpers shared by the pure engines.
 * Ownership follows cJSON: functions that return cJSON * say so. */
#ifndef SHIM_JSON_H
#define SHIM_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Parses exactly n bytes (no NUL needed); NULL on error. Caller owns. */
cJSON *shim_json_parse(const char *p, size_t n);
/* String member or NULL (borrowed). */
const char *shim_json_str(const cJSON *obj, const char *key);
/* Sets obj[key] = val, replacing any existing member; takes val. */
void shim_json_set(cJSON *obj, const char *key, cJSON *val);
/* Integer member (0 when absent or not a number). */
long long shim_json_int(const cJSON *obj, const char *key);
/* Adds the integer at src[key] to dst[key] (creating it as needed). */
void shim_json_add_int(cJSON *dst, const cJSON *src, const char *key);

#endif
