/* confile.h - the shape of codeshim's config file (CODESHIM_CONFIG), read
 * with libyaml; no meaning is given to the values here (config.c does).
 *
 *   default: small            # the sandbox used when a request names none
 *   sandboxes:
 *     small:                  # a name a request may pick (if selectable)
 *       backend: local
 *       memory: 512M
 *     cloud:
 *       backend: e2b
 *       api_key: os.environ/E2B_API_KEY
 *       selectable: true
 *
 * Every value is a plain scalar; anything else (a list, a nested map, an
 * alias, a second document, a duplicate key) is an error with its line.
 * Pure: parses bytes already read. */
#ifndef SHIM_CONFILE_H
#define SHIM_CONFILE_H

#include <stddef.h>

#define SHIM_CONFILE_MAX_BYTES (256 * 1024)
#define SHIM_CONFILE_MAX_SANDBOXES 16
#define SHIM_CONFILE_MAX_KEYS 32
#define SHIM_CONFILE_NAME_MAX 64
#define SHIM_CONFILE_VALUE_MAX 1024

struct shim_confile_pair {
    char key[SHIM_CONFILE_NAME_MAX];
    char value[SHIM_CONFILE_VALUE_MAX];
    int line; /* 1-based, for messages */
};

struct shim_confile_sandbox {
    char name[SHIM_CONFILE_NAME_MAX];
    int line;
    size_t npairs;
    struct shim_confile_pair pairs[SHIM_CONFILE_MAX_KEYS];
};

struct shim_confile {
    char default_name[SHIM_CONFILE_NAME_MAX]; /* "" when not given */
    size_t nsandboxes;
    struct shim_confile_sandbox sandboxes[SHIM_CONFILE_MAX_SANDBOXES];
};

/* Parses text[0..len) into *out. 0, or -EINVAL with a message naming the
 * line in err (errsz bytes), or -ENOMEM. */
int shim_confile_parse(const char *text, size_t len, struct shim_confile *out, char *err,
                       size_t errsz);

/* The value of key in s, or NULL. */
const char *shim_confile_get(const struct shim_confile_sandbox *s, const char *key);

#endif
