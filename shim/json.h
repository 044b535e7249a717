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
/* Sets obj[key] = val, replacing any existing member; takes val (freed
 * when obj is not an object). */
void shim_json_set(cJSON *obj, const char *key, cJSON *val);
/* Integer member (0 when absent or not a number; clamped to +-9.2e18). */
long long shim_json_int(const cJSON *obj, const char *key);

#endif
