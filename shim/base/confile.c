/* confile.c - see confile.h. libyaml's document loader builds the tree;
 * this file walks it at a fixed depth (top map, "sandboxes" map, one map
 * per sandbox), so aliases or deep nesting cannot make the work grow. */
#include "base/confile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

struct walk {
    yaml_document_t *doc;
    struct shim_confile *out;
    char *err;
    size_t errsz;
};

static int fail(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct walk *w, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errsz, "line %lu: %s", n ? (unsigned long)n->start_mark.line + 1 : 0UL,
             msg);
    return -EINVAL;
}

/* A plain scalar copied into out (outsz bytes), or an error. */
static int scalar(struct walk *w, const yaml_node_t *n, const char *what, char *out,
                  size_t outsz)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return fail(w, n, "%s must be a single value", what);
    if (n->data.scalar.length >= outsz)
        return fail(w, n, "%s is longer than %zu bytes", what, outsz - 1);
    if (memchr(n->data.scalar.value, '\0', n->data.scalar.length))
        return fail(w, n, "%s contains a NUL byte", what);
    memcpy(out, n->data.scalar.value, n->data.scalar.length);
    out[n->data.scalar.length] = '\0';
    return 0;
}

static yaml_node_t *node(struct walk *w, int index)
{
    return yaml_document_get_node(w->doc, index);
}

static int sandbox_entry(struct walk *w, const yaml_node_t *keyn, const yaml_node_t *map)
{
    struct shim_confile_sandbox *s;
    yaml_node_pair_t *p;
    size_t i;
    int rc;

    if (w->out->nsandboxes >= SHIM_CONFILE_MAX_SANDBOXES)
        return fail(w, keyn, "more than %d sandboxes", SHIM_CONFILE_MAX_SANDBOXES);
    s = &w->out->sandboxes[w->out->nsandboxes];
    memset(s, 0, sizeof(*s));
    if ((rc = scalar(w, keyn, "a sandbox name", s->name, sizeof(s->name))) < 0)
        return rc;
    if (!s->name[0])
        return fail(w, keyn, "a sandbox name is empty");
    for (i = 0; i < w->out->nsandboxes; i++)
        if (!strcmp(w->out->sandboxes[i].name, s->name))
            return fail(w, keyn, "sandbox \"%s\" is defined twice", s->name);
    s->line = (int)keyn->start_mark.line + 1;
    if (!map || map->type != YAML_MAPPING_NODE)
        return fail(w, map, "sandbox \"%s\" must be a map of settings", s->name);
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        struct shim_confile_pair *kv;
        yaml_node_t *k = node(w, p->key), *v = node(w, p->value);

        if (s->npairs >= SHIM_CONFILE_MAX_KEYS)
            return fail(w, k, "sandbox \"%s\" has more than %d settings", s->name,
                        SHIM_CONFILE_MAX_KEYS);
        kv = &s->pairs[s->npairs];
        if ((rc = scalar(w, k, "a setting's name", kv->key, sizeof(kv->key))) < 0)
            return rc;
        if (shim_confile_get(s, kv->key))
            return fail(w, k, "setting \"%s\" is given twice in sandbox \"%s\"", kv->key,
                        s->name);
        if ((rc = scalar(w, v, kv->key, kv->value, sizeof(kv->value))) < 0)
            return rc;
        kv->line = (int)k->start_mark.line + 1;
        s->npairs++;
    }
    w->out->nsandboxes++;
    return 0;
}

static int sandboxes(struct walk *w, const yaml_node_t *map)
{
    yaml_node_pair_t *p;
    int rc;

    if (!map || map->type != YAML_MAPPING_NODE)
        return fail(w, map, "\"sandboxes\" must be a map of named sandboxes");
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
        if ((rc = sandbox_entry(w, node(w, p->key), node(w, p->value))) < 0)
            return rc;
    return 0;
}

static int top(struct walk *w, const yaml_node_t *root)
{
    int seen_default = 0, seen_sandboxes = 0, rc;
    yaml_node_pair_t *p;
    char key[SHIM_CONFILE_NAME_MAX];

    if (!root || root->type != YAML_MAPPING_NODE)
        return fail(w, root, "the file must be a map with \"default\" and \"sandboxes\"");
    for (p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(w, p->key), *v = node(w, p->value);

        if ((rc = scalar(w, k, "a top-level key", key, sizeof(key))) < 0)
            return rc;
        if (!strcmp(key, "default") && !seen_default++)
            rc = scalar(w, v, "default", w->out->default_name, sizeof(w->out->default_name));
        else if (!strcmp(key, "sandboxes") && !seen_sandboxes++)
            rc = sandboxes(w, v);
        else if (!strcmp(key, "default") || !strcmp(key, "sandboxes"))
            rc = fail(w, k, "\"%s\" is given twice", key);
        else
            rc = fail(w, k, "unknown top-level key \"%s\" (known: default, sandboxes)", key);
        if (rc < 0)
            return rc;
    }
    if (!seen_sandboxes)
        return fail(w, root, "no \"sandboxes\" map");
    return 0;
}

/* libyaml loads aliases as shared nodes; this format has no use for them,
 * and refusing them keeps every node visited at most once. */
static int has_alias(const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int found = 0, done = 0;

    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    while (!done && !found) {
        if (!yaml_parser_parse(&parser, &ev))
            break; /* the loader reports the syntax error */
        found = ev.type == YAML_ALIAS_EVENT;
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return found;
}

int shim_confile_parse(const char *text, size_t len, struct shim_confile *out, char *err,
                       size_t errsz)
{
    struct walk w = {NULL, out, err, errsz};
    yaml_parser_t parser;
    yaml_document_t doc, extra;
    int rc;

    memset(out, 0, sizeof(*out));
    err[0] = '\0';
    if (len > SHIM_CONFILE_MAX_BYTES) {
        snprintf(err, errsz, "the file is larger than %d bytes", SHIM_CONFILE_MAX_BYTES);
        return -EINVAL;
    }
    if ((rc = has_alias(text, len)) != 0) {
        if (rc > 0)
            snprintf(err, errsz, "YAML aliases (*name) are not supported here");
        return rc > 0 ? -EINVAL : rc;
    }
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL;
        snprintf(err, errsz, "line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "not valid YAML");
        yaml_parser_delete(&parser);
        return rc;
    }
    w.doc = &doc;
    rc = top(&w, yaml_document_get_root_node(&doc));
    if (rc == 0) { /* one document only */
        if (!yaml_parser_load(&parser, &extra)) {
            snprintf(err, errsz, "not valid YAML after the first document");
            rc = -EINVAL;
        } else {
            if (yaml_document_get_root_node(&extra)) {
                snprintf(err, errsz, "more than one YAML document");
                rc = -EINVAL;
            }
            yaml_document_delete(&extra);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

const char *shim_confile_get(const struct shim_confile_sandbox *s, const char *key)
{
    size_t i;

    for (i = 0; i < s->npairs; i++)
        if (!strcmp(s->pairs[i].key, key))
            return s->pairs[i].value;
    return NULL;
}
