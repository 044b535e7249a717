/* json.h - small cJSON helpers shared by the pure engines, and the one
 * strict reader for JSON that comes from the program or the upstream.
 * Ownership follows cJSON: functions that return cJSON * say so. */
#ifndef SHIM_JSON_H
#define SHIM_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The most values, and the deepest nesting, of any JSON text codeshim
 * reads (every parse goes through json.c, which measures the text before
 * building a tree): each value costs a cJSON node (64 bytes, about 80 with
 * malloc's overhead), so a few bytes of "0," cost forty times their size,
 * twice over where the tree is copied. 262,144 values bound that to tens of
 * MB whatever the text's shape; an API body of that many values is far
 * past any real one (a long conversation holds some tens of thousands). */
#define SHIM_JSON_MAX_VALUES 262144
#define SHIM_JSON_MAX_DEPTH 128

/* Parses exactly n bytes (no NUL needed); NULL on error or when the text
 * is past the budget above. Caller owns. Lenient: for codeshim's own
 * files and frames and the e2b server's answers; see shim_json_read. */
cJSON *shim_json_parse(const char *p, size_t n);
/* The same within a smaller budget (a frame of a channel). */
cJSON *shim_json_parse_within(const char *p, size_t n, size_t max_values, int max_depth);

/* Why shim_json_read refused a text. */
struct shim_json_flaw {
    int big;       /* past SHIM_JSON_MAX_VALUES or SHIM_JSON_MAX_DEPTH (-E2BIG) */
    int nul;       /* a string holds U+0000 (cJSON would cut it there) */
    char key[72];  /* else: the key found twice, cut on a UTF-8 boundary */
};

/* Reads JSON from the program or the upstream so that codeshim sees what
 * every other reader sees: refuses an object with a key twice (cJSON keeps
 * the first, most parsers the last; "a" and "\u0061" are the same key) and
 * a string holding U+0000 (cJSON stops the string there). Returns 0 with
 * *out (caller owns), -EINVAL when not JSON, -E2BIG past the budget above
 * (no tree built), -EEXIST when refused (*why filled when not NULL for
 * both), -ENOMEM. Linear in n up to a log factor. */
int shim_json_read(const char *p, size_t n, cJSON **out, struct shim_json_flaw *why);
/* The first key found twice in one object anywhere under root (borrowed
 * via *key): 1, 0 when none, -ENOMEM. O(k log k) per object of k keys. */
int shim_json_find_dup(const cJSON *root, const char **key);
/* 1 when the n bytes of JSON text hold a NUL byte or a \u0000 escape. */
int shim_json_has_nul(const char *p, size_t n);
/* {"error":{"message":..,"type":..,"param":..,"code":..}}, OpenAI's error
 * body; param and code may be NULL (JSON null). Caller owns. */
cJSON *shim_json_error(const char *message, const char *type, const char *param,
                       const char *code);
/* A message naming why a read was refused, for the error bodies. */
void shim_json_flaw_text(const struct shim_json_flaw *why, char *out, size_t outsz);

/* String member or NULL (borrowed). */
const char *shim_json_str(const cJSON *obj, const char *key);
/* Sets obj[key] = val, replacing any existing member; takes val (freed
 * when obj is not an object). */
void shim_json_set(cJSON *obj, const char *key, cJSON *val);
/* Integer member (0 when absent or not a number; clamped to +-9.2e18). */
long long shim_json_int(const cJSON *obj, const char *key);

/* Whether the JSON text p[0..n) makes at most max_values values nested at
 * most max_depth deep, counted on the text in one linear pass before any
 * cJSON tree is built (whether it is JSON at all is the parser's to say):
 * a frame from an untrusted peer is measured before it costs memory. */
int shim_json_fits(const char *p, size_t n, size_t max_values, int max_depth);

#endif
