/* json.c - see json.h. */
#include "base/json.h"

#include "base/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *shim_json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The one call of cJSON's parser: every text is measured first, so no
 * shape of it costs more than its budget of values (a cJSON node each, 64
 * bytes and malloc's overhead, whatever the value's few bytes of text). */
static cJSON *parse(const char *p, size_t n, size_t max_values, int max_depth,
                    const char **end, int *big)
{
    if (big)
        *big = 0;
    if (!p)
        return NULL;
    if (!shim_json_fits(p, n, max_values, max_depth)) {
        if (big)
            *big = 1;
        return NULL;
    }
    /* require_null_terminated=0 with an explicit length: the body may not
     * be NUL-terminated (POSTFIELDS with POSTFIELDSIZE). */
    return cJSON_ParseWithLengthOpts(p, n, end, 0);
}

cJSON *shim_json_parse(const char *p, size_t n)
{
    return parse(p, n, SHIM_JSON_MAX_VALUES, SHIM_JSON_MAX_DEPTH, NULL, NULL);
}

cJSON *shim_json_parse_within(const char *p, size_t n, size_t max_values, int max_depth)
{
    return parse(p, n, max_values, max_depth, NULL, NULL);
}

/* ---------------- one reading for everyone ---------------- */

/* Scratch for sorting one object's keys; reused across objects, so the
 * whole tree costs one buffer the size of its largest object. */
struct keyset {
    const char **a, **tmp;
    size_t cap;
};

static const char *key_of(const cJSON *c)
{
    return c->string ? c->string : "";
}

/* Bottom-up merge sort: O(k log k) comparisons whatever the keys (a
 * quicksort has inputs that make it quadratic). Returns the sorted array
 * (a or tmp). */
static const char **sort_keys(const char **a, const char **tmp, size_t k)
{
    size_t w, lo;

    for (w = 1; w < k; w *= 2) {
        const char **t;
        for (lo = 0; lo < k; lo += 2 * w) {
            size_t mid = lo + w < k ? lo + w : k, hi = lo + 2 * w < k ? lo + 2 * w : k;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = strcmp(a[j], a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid)
                tmp[o++] = a[i++];
            while (j < hi)
                tmp[o++] = a[j++];
        }
        t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* A key found twice among obj's members: 1 (*key set), 0, -ENOMEM. */
static int dup_here(const cJSON *obj, struct keyset *ks, const char **key)
{
    const cJSON *c, *d;
    const char **s;
    size_t k = 0, i;

    for (c = obj->child; c; c = c->next)
        k++;
    if (k <= 8) { /* small objects (nearly all): no sorting */
        for (c = obj->child; c; c = c->next)
            for (d = c->next; d; d = d->next)
                if (!strcmp(key_of(c), key_of(d))) {
                    *key = key_of(c);
                    return 1;
                }
        return 0;
    }
    if (k > ks->cap) {
        const char **a = realloc(ks->a, k * sizeof(*a)), **t;
        if (!a)
            return -ENOMEM;
        ks->a = a;
        t = realloc(ks->tmp, k * sizeof(*t));
        if (!t)
            return -ENOMEM;
        ks->tmp = t;
        ks->cap = k;
    }
    for (i = 0, c = obj->child; c; c = c->next)
        ks->a[i++] = key_of(c);
    s = sort_keys(ks->a, ks->tmp, k);
    for (i = 1; i < k; i++)
        if (!strcmp(s[i - 1], s[i])) {
            *key = s[i];
            return 1;
        }
    return 0;
}

/* Recursion depth is bounded by SHIM_JSON_MAX_DEPTH. */
static int dup_in(const cJSON *node, struct keyset *ks, const char **key)
{
    const cJSON *c;
    int rc;

    if (cJSON_IsObject(node) && (rc = dup_here(node, ks, key)) != 0)
        return rc;
    for (c = node->child; c; c = c->next)
        if ((cJSON_IsObject(c) || cJSON_IsArray(c)) && (rc = dup_in(c, ks, key)) != 0)
            return rc;
    return 0;
}

int shim_json_find_dup(const cJSON *root, const char **key)
{
    struct keyset ks = {NULL, NULL, 0};
    const char *k = NULL;
    int rc;

    if (!root || !(cJSON_IsObject(root) || cJSON_IsArray(root)))
        return 0;
    rc = dup_in(root, &ks, &k);
    free(ks.a);
    free(ks.tmp);
    if (rc == 1)
        *key = k;
    return rc;
}

int shim_json_has_nul(const char *p, size_t n)
{
    const char *end = p + n, *q;

    if (memchr(p, '\0', n))
        return 1;
    /* In valid JSON a backslash only starts an escape inside a string, so
     * skipping the escaped character is enough to tell "\u0000" from
     * "\\u0000" (a backslash, then the text u0000). memchr from one
     * backslash to the next: a body is scanned at memchr's speed, not a
     * byte at a time (a tenth of a loop step's CPU before). */
    for (q = p; (q = memchr(q, '\\', (size_t)(end - q))) != NULL && end - q > 1; q += 2)
        if (q[1] == 'u' && end - q > 5 && !memcmp(q + 2, "0000", 4))
            return 1;
    return 0;
}

static void copy_key(char *out, size_t outsz, const char *key)
{
    size_t len = strlen(key);

    if (len >= outsz) {
        len = shim_text_cut_back(key, outsz - 1);
    }
    memcpy(out, key, len);
    out[len] = '\0';
}

int shim_json_read(const char *p, size_t n, cJSON **out, struct shim_json_flaw *why)
{
    const char *end = NULL, *key = NULL;
    cJSON *j;
    int rc = 0, big;

    if (why)
        memset(why, 0, sizeof(*why));
    j = parse(p, n, SHIM_JSON_MAX_VALUES, SHIM_JSON_MAX_DEPTH, &end, &big);
    if (big && why)
        why->big = 1;
    if (!j)
        return big ? -E2BIG : -EINVAL;
    if (!end || end < p || end > p + n)
        end = p + n;
    if (shim_json_has_nul(p, (size_t)(end - p))) {
        if (why)
            why->nul = 1;
        rc = -EEXIST;
    } else if ((rc = shim_json_find_dup(j, &key)) == 1) {
        if (why)
            copy_key(why->key, sizeof(why->key), key);
        rc = -EEXIST;
    }
    if (rc < 0) {
        cJSON_Delete(j);
        return rc;
    }
    *out = j;
    return 0;
}

void shim_json_flaw_text(const struct shim_json_flaw *why, char *out, size_t outsz)
{
    if (why->big)
        snprintf(out, outsz, "it holds more than %d JSON values or nests them more than %d "
                 "levels deep", SHIM_JSON_MAX_VALUES, SHIM_JSON_MAX_DEPTH);
    else if (why->nul)
        snprintf(out, outsz, "a string holds the character U+0000");
    else
        snprintf(out, outsz, "an object has the key \"%s\" more than once", why->key);
}

cJSON *shim_json_error(const char *message, const char *type, const char *param,
                       const char *code)
{
    cJSON *body = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(body, "error");

    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    if (param)
        cJSON_AddStringToObject(e, "param", param);
    else
        cJSON_AddNullToObject(e, "param");
    if (code)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    return body;
}

/* ---------------- members ---------------- */

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

/* Whether the JSON text p[0..n) makes at most max_values values nested at
 * most max_depth deep, counted on the text in one pass: outside strings,
 * one value, plus at most one more per ',' '[' and '{'. (Whether it is
 * JSON at all is cJSON's to say.) */
int shim_json_fits(const char *p, size_t n, size_t max_values, int max_depth)
{
    size_t i, values = 1;
    int depth = 0, in_str = 0;

    for (i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return 0;
            values++;
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',') {
            values++;
        }
        if (values > max_values)
            return 0;
    }
    return 1;
}
