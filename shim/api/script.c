/* script.c - see script.h. */
#include "api/script.h"

#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TURNS 1000

static const char *const keys[] = {"match", "run", "say", "call", "status", "retry_after",
                                   "error", "cut", "delay_ms"};

static int bad(char *err, size_t errsz, size_t turn, const char *what)
{
    snprintf(err, errsz, "turn %zu: %s", turn + 1, what);
    return -EINVAL;
}

static int known_key(const char *k)
{
    size_t i;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (!strcmp(keys[i], k))
            return 1;
    return 0;
}

/* A whole number of t's key in lo..hi into *out (def when absent). */
static int number(const cJSON *t, const char *key, long lo, long hi, long def, long *out,
                  char *err, size_t errsz, size_t turn)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
    char msg[96];

    *out = def;
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        snprintf(msg, sizeof(msg), "%s must be a whole number in %ld..%ld", key, lo, hi);
        return bad(err, errsz, turn, msg);
    }
    *out = (long)v->valuedouble;
    return 0;
}

static int text(const cJSON *t, const char *key, char **out, char *err, size_t errsz,
                size_t turn)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, key);
    char msg[64];

    *out = NULL;
    if (!v)
        return 0;
    if (!cJSON_IsString(v)) {
        snprintf(msg, sizeof(msg), "%s must be text", key);
        return bad(err, errsz, turn, msg);
    }
    return (*out = strdup(v->valuestring)) ? 0 : -ENOMEM;
}

/* run: one code string, or a list of them. */
static int codes(const cJSON *t, struct shim_script_turn *x, char *err, size_t errsz,
                 size_t turn)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "run"), *c;

    x->codes = cJSON_CreateArray();
    if (!x->codes)
        return -ENOMEM;
    if (!v)
        return 0;
    if (cJSON_IsString(v)) {
        cJSON_AddItemToArray(x->codes, cJSON_CreateString(v->valuestring));
        return 0;
    }
    if (!cJSON_IsArray(v) || !v->child)
        return bad(err, errsz, turn, "run must be code, or a list of code");
    cJSON_ArrayForEach(c, v)
    {
        if (!cJSON_IsString(c))
            return bad(err, errsz, turn, "run must be code, or a list of code");
        cJSON_AddItemToArray(x->codes, cJSON_CreateString(c->valuestring));
    }
    return 0;
}

/* call: {name, arguments (a map, or JSON text)}. */
static int call(const cJSON *t, struct shim_script_turn *x, char *err, size_t errsz,
                size_t turn)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "call"), *a;
    const char *name = shim_json_str(v, "name");

    if (!v)
        return 0;
    if (!cJSON_IsObject(v) || !name || !*name)
        return bad(err, errsz, turn, "call must be a map with a name (and arguments)");
    a = cJSON_GetObjectItemCaseSensitive(v, "arguments");
    if (!(x->call_name = strdup(name)))
        return -ENOMEM;
    if (!a)
        x->call_args = strdup("{}");
    else if (cJSON_IsString(a))
        x->call_args = strdup(a->valuestring);
    else if (cJSON_IsObject(a))
        x->call_args = cJSON_PrintUnformatted(a);
    else
        return bad(err, errsz, turn, "call.arguments must be a map or JSON text");
    return x->call_args ? 0 : -ENOMEM;
}

static int turn_of(const cJSON *t, struct shim_script_turn *x, char *err, size_t errsz,
                   size_t turn)
{
    const cJSON *k, *m = cJSON_GetObjectItemCaseSensitive(t, "match");
    long cut = 0;
    int rc;

    if (!cJSON_IsObject(t))
        return bad(err, errsz, turn, "a turn must be a map");
    cJSON_ArrayForEach(k, t)
    {
        if (!known_key(k->string)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "unknown key \"%.64s\" (known: match, run, say, call, "
                     "status, retry_after, error, cut, delay_ms)", k->string);
            return bad(err, errsz, turn, msg);
        }
    }
    if (m) {
        char why[128];
        if (!cJSON_IsString(m))
            return bad(err, errsz, turn, "match must be a regular expression");
        rc = regcomp(&x->match, m->valuestring, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[200];
            regerror(rc, &x->match, why, sizeof(why));
            snprintf(msg, sizeof(msg), "match: %s", why);
            return bad(err, errsz, turn, msg);
        }
        x->has_match = 1;
    }
    if ((rc = codes(t, x, err, errsz, turn)) < 0 || (rc = call(t, x, err, errsz, turn)) < 0 ||
        (rc = text(t, "say", &x->say, err, errsz, turn)) < 0 ||
        (rc = text(t, "error", &x->error, err, errsz, turn)) < 0 ||
        (rc = number(t, "status", 400, 599, 0, &x->status, err, errsz, turn)) < 0 ||
        (rc = number(t, "retry_after", 0, 3600, -1, &x->retry_after, err, errsz, turn)) < 0 ||
        (rc = number(t, "delay_ms", 0, 60000, 0, &x->delay_ms, err, errsz, turn)) < 0)
        return rc;
    k = cJSON_GetObjectItemCaseSensitive(t, "cut");
    if (k && !cJSON_IsBool(k))
        return bad(err, errsz, turn, "cut must be true or false");
    cut = cJSON_IsTrue(k);
    x->cut = (int)cut;
    if (!x->codes->child && !x->say && !x->call_name && !x->status && !x->cut)
        return bad(err, errsz, turn, "says nothing: give it run, say, call, status or cut");
    if ((x->status || x->cut) && (x->codes->child || x->say || x->call_name))
        return bad(err, errsz, turn, "an error or a cut answers nothing else");
    return 0;
}

int shim_script_parse(const cJSON *doc, struct shim_script **out, char *err, size_t errsz)
{
    const cJSON *list = cJSON_IsArray(doc) ? doc : cJSON_GetObjectItemCaseSensitive(doc, "turns");
    struct shim_script *s;
    const cJSON *t;
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    int rc = 0;

    if (!cJSON_IsArray(list) || !n) {
        snprintf(err, errsz, "no turns: the file is a list of turns, or a map with \"turns\"");
        return -EINVAL;
    }
    if (n > MAX_TURNS) {
        snprintf(err, errsz, "more than %d turns", MAX_TURNS);
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (!s || !(s->turns = calloc(n, sizeof(*s->turns))) || !(s->taken = calloc(n, 1))) {
        shim_script_free(s);
        return -ENOMEM;
    }
    s->n = n;
    cJSON_ArrayForEach(t, list)
    {
        if ((rc = turn_of(t, &s->turns[i], err, errsz, i)) < 0)
            break;
        i++;
    }
    if (rc < 0) {
        shim_script_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int shim_script_take(struct shim_script *s, const char *user, size_t *index)
{
    size_t i;

    for (i = 0; i < s->n; i++) {
        const struct shim_script_turn *t = &s->turns[i];
        if (s->taken[i] || (t->has_match && regexec(&t->match, user, 0, NULL, 0)))
            continue;
        s->taken[i] = 1;
        *index = i;
        return 0;
    }
    return -ENOENT;
}

void shim_script_free(struct shim_script *s)
{
    size_t i;

    if (!s)
        return;
    for (i = 0; s->turns && i < s->n; i++) {
        struct shim_script_turn *t = &s->turns[i];
        if (t->has_match)
            regfree(&t->match);
        cJSON_Delete(t->codes);
        free(t->say);
        free(t->call_name);
        free(t->call_args);
        free(t->error);
    }
    free(s->turns);
    free(s->taken);
    free(s);
}
