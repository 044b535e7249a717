/* yamljson.h - one YAML document as a cJSON tree, read with libyaml, for
 * files a person writes (the scripted model's, CODESHIM_SCRIPT). Plain
 * scalars that read as whole numbers, true/false or null become those;
 * every other scalar, and every quoted one, is a string. Anchors and
 * aliases, a second document, duplicate keys and non-scalar keys are
 * errors. Bounded: at most SHIM_YAML_MAX_NODES values nested at most
 * SHIM_YAML_MAX_DEPTH deep. Pure: parses bytes already read. */
#ifndef SHIM_YAMLJSON_H
#define SHIM_YAMLJSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#define SHIM_YAML_MAX_NODES 20000
#define SHIM_YAML_MAX_DEPTH 32

/* The tree (caller frees), or NULL with err saying what and on which
 * line. */
cJSON *shim_yaml_to_json(const char *text, size_t len, char *err, size_t errsz);

#endif
