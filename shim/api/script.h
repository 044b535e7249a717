/* script.h - the scripted model (CODESHIM_SCRIPT): a deterministic model
 * for tests, told turn by turn what to answer. The loop, the sandbox and
 * the answer the program gets are the real ones; only the model is
 * scripted. The file (YAML, read by yamljson.h) is a list of turns, or a
 * map whose "turns" is one:
 *
 *   turns:
 *     - match: "weather in \\w+"   # regex on the last user text (optional)
 *       call: {name: get_weather, arguments: {city: Paris}}  # program's tool
 *     - run: "print(6 * 7)"        # code for the code tool (or a list)
 *       say: "Running it."         # text (alone: the final answer)
 *     - status: 429                # an error answer: 400..599,
 *       retry_after: 1             #   with Retry-After (seconds),
 *       error: "Slow down"         #   and this message
 *     - cut: true                  # the connection drops: no answer
 *     - delay_ms: 300              # waits before answering (any turn)
 *
 * Each upstream call takes the first turn not yet taken in this process
 * whose match (when it has one) finds the last user text: unmatched turns
 * are taken in order. Pure: the tree is given, the state is the caller's. */
#ifndef SHIM_SCRIPT_H
#define SHIM_SCRIPT_H

#include <cjson/cJSON.h>
#include <regex.h>
#include <stddef.h>

struct shim_script_turn {
    int has_match;
    regex_t match;
    cJSON *codes;       /* strings, for codeshim's tool (an array, maybe empty) */
    char *say;          /* NULL: none */
    char *call_name;    /* the program's tool, NULL: none */
    char *call_args;    /* its arguments as JSON text */
    long status;        /* 0: a 200 answer */
    long retry_after;   /* -1: no Retry-After */
    char *error;        /* the error answer's message */
    int cut;
    long delay_ms;
};

struct shim_script {
    struct shim_script_turn *turns;
    size_t n;
    unsigned char *taken;
};

/* The script in doc (a yamljson tree): 0 with *out (free with
 * shim_script_free), or -EINVAL with err naming the turn and the key. */
int shim_script_parse(const cJSON *doc, struct shim_script **out, char *err, size_t errsz);
/* Takes the next turn for user (the last user text): 0 with *index (from
 * 0), or -ENOENT when every turn that could answer is taken. */
int shim_script_take(struct shim_script *s, const char *user, size_t *index);
void shim_script_free(struct shim_script *s);

#endif
