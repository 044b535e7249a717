/* match.c - see match.h. */
#include "api/match.h"

#include "base/json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 64 /* deeper parts compare as one value */

/* An id codeshim makes: a lowercase prefix, '_', then 24+ hex digits. */
static int codeshim_id(const char *s)
{
    size_t p = 0, h = 0;

    while (islower((unsigned char)s[p]))
        p++;
    if (!p || p > 8 || s[p] != '_')
        return 0;
    for (s += p + 1; isxdigit((unsigned char)s[h]); h++)
        ;
    return h >= 24 && !s[h];
}

static void neutralise(cJSON *n, int depth)
{
    cJSON *c;

    if (depth > DEPTH_MAX)
        return;
    if (cJSON_IsString(n) && codeshim_id(n->valuestring)) {
        cJSON_SetValuestring(n, "<id>");
        return;
    }
    cJSON_ArrayForEach(c, n)
        neutralise(c, depth + 1);
}

/* Removes the dot path p (p[0..n)) from o, e.g. "metadata.request_id". */
static void drop_path(cJSON *o, const char *p, size_t n)
{
    char key[128];
    size_t k = 0;

    while (k < n && p[k] != '.')
        k++;
    if (!k || k >= sizeof(key) || !cJSON_IsObject(o))
        return;
    memcpy(key, p, k);
    key[k] = '\0';
    if (k == n)
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    else
        drop_path(cJSON_GetObjectItemCaseSensitive(o, key), p + k + 1, n - k - 1);
}

cJSON *shim_match_doc(const cJSON *req, const cJSON *calls, const char *ignore)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *r = req ? cJSON_Duplicate(req, 1) : cJSON_CreateNull();
    cJSON *c = calls ? cJSON_Duplicate(calls, 1) : cJSON_CreateArray();
    const char *p = ignore ? ignore : "";

    if (!doc || !r || !c) {
        cJSON_Delete(doc);
        cJSON_Delete(r);
        cJSON_Delete(c);
        return NULL;
    }
    while (*p) {
        size_t n = strcspn(p, ",");
        size_t s = 0;
        while (s < n && p[s] == ' ')
            s++;
        drop_path(r, p + s, n - s);
        p += n + (p[n] == ',');
    }
    if (cJSON_GetObjectItemCaseSensitive(r, "previous_response_id"))
        shim_json_set(r, "previous_response_id", cJSON_CreateString("<continued>"));
    neutralise(r, 0);
    neutralise(c, 0);
    cJSON_AddItemToObject(doc, "request", r);
    cJSON_AddItemToObject(doc, "calls", c);
    return doc;
}

/* ---- the first difference ---- */

struct walk {
    long alike;
    char *path, *was, *is;
    size_t pathsz, vsz;
};

/* A value as one line of at most vsz - 1 bytes. */
static void one_line(const cJSON *v, char *out, size_t vsz)
{
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    size_t i;

    snprintf(out, vsz, "%s", v ? (t ? t : "?") : "(absent)");
    free(t);
    for (i = 0; out[i]; i++)
        if (out[i] == '\n' || out[i] == '\r')
            out[i] = ' ';
    if (strlen(out) == vsz - 1 && vsz > 4)
        memcpy(out + vsz - 4, "...", 3);
}

static int found(struct walk *w, const char *path, const cJSON *a, const cJSON *b)
{
    snprintf(w->path, w->pathsz, "%s", path);
    one_line(a, w->was, w->vsz);
    one_line(b, w->is, w->vsz);
    return 1;
}

static int scalar_same(const cJSON *a, const cJSON *b)
{
    if ((a->type & 0xFF) != (b->type & 0xFF))
        return 0;
    if (cJSON_IsString(a))
        return !strcmp(a->valuestring, b->valuestring);
    if (cJSON_IsNumber(a))
        return a->valuedouble == b->valuedouble;
    return 1;
}

/* 1 once a difference is found (w filled), else 0. */
static int walk(struct walk *w, const cJSON *a, const cJSON *b, const char *path, int depth)
{
    char sub[512];
    const cJSON *x;
    int i = 0;

    if (!a || !b || (a->type & 0xFF) != (b->type & 0xFF))
        return found(w, path, a, b);
    if (depth > DEPTH_MAX || !(cJSON_IsObject(a) || cJSON_IsArray(a))) {
        if (depth > DEPTH_MAX ? !cJSON_Compare(a, b, 1) : !scalar_same(a, b))
            return found(w, path, a, b);
        w->alike++;
        return 0;
    }
    cJSON_ArrayForEach(x, a)
    {
        const cJSON *y;
        if (cJSON_IsArray(a)) {
            snprintf(sub, sizeof(sub), "%s[%d]", path, i);
            y = cJSON_GetArrayItem(b, i);
        } else {
            snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", x->string);
            y = cJSON_GetObjectItemCaseSensitive(b, x->string);
        }
        i++;
        if (walk(w, x, y, sub, depth + 1))
            return 1;
    }
    i = 0;
    cJSON_ArrayForEach(x, b) /* what now has and recorded lacks */
    {
        int extra = cJSON_IsArray(b) ? i >= cJSON_GetArraySize(a)
                                     : !cJSON_GetObjectItemCaseSensitive(a, x->string);
        if (extra) {
            if (cJSON_IsArray(b))
                snprintf(sub, sizeof(sub), "%s[%d]", path, i);
            else
                snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", x->string);
            return found(w, sub, NULL, x);
        }
        i++;
    }
    return 0;
}

long shim_match_diff(const cJSON *recorded, const cJSON *now, char *path, size_t pathsz,
                     char *was, char *is, size_t vsz)
{
    struct walk w = {0, path, was, is, pathsz, vsz};

    path[0] = was[0] = is[0] = '\0';
    return walk(&w, recorded, now, "", 0) ? w.alike : -1;
}
