/* yamljson.c - see yamljson.h. */
#include "base/yamljson.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct reader {
    yaml_parser_t p;
    yaml_event_t ev;
    size_t nodes;
    char *err;
    size_t errsz;
};

static int fail(struct reader *r, const char *what)
{
    if (!r->err[0])
        snprintf(r->err, r->errsz, "line %lu: %s", (unsigned long)r->ev.start_mark.line + 1,
                 what);
    return -EINVAL;
}

/* The next event into r->ev (the previous one deleted). */
static int next(struct reader *r)
{
    yaml_event_delete(&r->ev);
    if (!yaml_parser_parse(&r->p, &r->ev)) {
        snprintf(r->err, r->errsz, "line %lu: %s", (unsigned long)r->p.problem_mark.line + 1,
                 r->p.problem ? r->p.problem : "not YAML");
        memset(&r->ev, 0, sizeof(r->ev));
        return -EINVAL;
    }
    return 0;
}

static cJSON *scalar(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    char *end;
    long long x;

    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && n && n < 20) {
        if (!strcmp(v, "true") || !strcmp(v, "false"))
            return cJSON_CreateBool(v[0] == 't');
        if (!strcmp(v, "null") || !strcmp(v, "~"))
            return cJSON_CreateNull();
        x = strtoll(v, &end, 10);
        if (!*end && end != v)
            return cJSON_CreateNumber((double)x);
    }
    return cJSON_CreateString(v);
}

static int value(struct reader *r, int depth, cJSON **out);

static int mapping(struct reader *r, int depth, cJSON *o)
{
    for (;;) {
        cJSON *v = NULL;
        char *key;
        int rc;

        if (next(r) < 0)
            return -EINVAL;
        if (r->ev.type == YAML_MAPPING_END_EVENT)
            return 0;
        if (r->ev.type != YAML_SCALAR_EVENT)
            return fail(r, "a key that is not a plain word");
        key = strdup((const char *)r->ev.data.scalar.value);
        if (!key)
            return -ENOMEM;
        if (cJSON_GetObjectItemCaseSensitive(o, key)) {
            free(key);
            return fail(r, "a key given twice");
        }
        if (next(r) < 0 || (rc = value(r, depth + 1, &v)) < 0) {
            free(key);
            return -EINVAL;
        }
        cJSON_AddItemToObject(o, key, v);
        free(key);
    }
}

static int sequence(struct reader *r, int depth, cJSON *a)
{
    for (;;) {
        cJSON *v = NULL;

        if (next(r) < 0)
            return -EINVAL;
        if (r->ev.type == YAML_SEQUENCE_END_EVENT)
            return 0;
        if (value(r, depth + 1, &v) < 0)
            return -EINVAL;
        cJSON_AddItemToArray(a, v);
    }
}

/* The value that starts with r->ev. */
static int value(struct reader *r, int depth, cJSON **out)
{
    int rc;

    if (depth > SHIM_YAML_MAX_DEPTH)
        return fail(r, "nested too deep");
    if (++r->nodes > SHIM_YAML_MAX_NODES)
        return fail(r, "too many values");
    switch (r->ev.type) {
    case YAML_SCALAR_EVENT:
        *out = scalar(&r->ev);
        return *out ? 0 : -ENOMEM;
    case YAML_MAPPING_START_EVENT:
        if (!(*out = cJSON_CreateObject()))
            return -ENOMEM;
        rc = mapping(r, depth, *out);
        break;
    case YAML_SEQUENCE_START_EVENT:
        if (!(*out = cJSON_CreateArray()))
            return -ENOMEM;
        rc = sequence(r, depth, *out);
        break;
    case YAML_ALIAS_EVENT:
        return fail(r, "an alias (anchors are not supported)");
    default:
        return fail(r, "not a value");
    }
    if (rc < 0) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return rc;
}

cJSON *shim_yaml_to_json(const char *text, size_t len, char *err, size_t errsz)
{
    struct reader r;
    cJSON *doc = NULL;
    int rc = -EINVAL;

    memset(&r, 0, sizeof(r));
    r.err = err;
    r.errsz = errsz;
    err[0] = '\0';
    if (!yaml_parser_initialize(&r.p)) {
        snprintf(err, errsz, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&r.p, (const unsigned char *)text, len);
    /* stream start, document start, the value, document end, stream end */
    if (next(&r) == 0 && r.ev.type == YAML_STREAM_START_EVENT && next(&r) == 0) {
        if (r.ev.type != YAML_DOCUMENT_START_EVENT)
            fail(&r, "an empty file");
        else if (next(&r) == 0 && value(&r, 0, &doc) == 0 && next(&r) == 0 &&
                 r.ev.type == YAML_DOCUMENT_END_EVENT && next(&r) == 0)
            rc = r.ev.type == YAML_STREAM_END_EVENT ? 0 : fail(&r, "a second document");
    }
    if (rc < 0 && !err[0])
        snprintf(err, errsz, "not a YAML document");
    yaml_event_delete(&r.ev);
    yaml_parser_delete(&r.p);
    if (rc < 0) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}
