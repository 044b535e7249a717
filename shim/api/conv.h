/* conv.h - the state of one intercepted conversation, shared by the loop
 * (loop.c) and the API adapters (responses.c, chat.c).
 *
 * An adapter is a set of pure functions over cJSON: it rewrites the
 * program's request for the upstream, finds codeshim's tool calls in an
 * upstream reply, extends the upstream request with a turn and its tool
 * outputs, and shapes the final answer. No I/O happens here. */
#ifndef SHIM_CONV_H
#define SHIM_CONV_H

#include "api/result.h"

#include <cjson/cJSON.h>
#include <stddef.h>

#define SHIM_TOOL_NAME_MAX 64

/* One call of codeshim's own tool, and what running it gave. */
struct shim_call {
    char *call_id;   /* the model's call id (owned) */
    char *arguments; /* raw arguments string (owned) */
    char *code;      /* the code, NULL when the arguments were unusable */
    char *output;    /* text handed back to the model (owned) */
    const char *status; /* code_interpreter_call status */
    struct shim_exec_result res;
    char ci_id[64];        /* "ci_..." */
    char container_id[64]; /* "cntr_..." */
    int executed;
    int skipped; /* over the cap: answered "not run", never executed */
};

struct shim_conv {
    char tool_name[SHIM_TOOL_NAME_MAX]; /* the function tool codeshim made */
    int forced_choice;   /* tool_choice forces a call: never replay it */
    int stream;          /* the program asked for SSE */
    int include_usage;   /* chat stream_options.include_usage */
    int max_exec;        /* executions allowed for this request */
    cJSON *visible;      /* Responses: output items the program will see */
    cJSON *usage;        /* usage summed over every upstream reply */
    int nreplies;        /* upstream replies seen */
    int usage_warned;    /* a usage object over the caps was logged */
};

void shim_call_free(struct shim_call *c);
void shim_conv_free(struct shim_conv *cv);

struct shim_api_ops {
    const char *name;
    /* Upstream request for the first call (caller owns), or NULL. */
    cJSON *(*prepare)(const cJSON *req, struct shim_conv *cv);
    /* Collects codeshim's calls in reply into *calls (caller frees each
     * with shim_call_free, then the array); *foreign = 1 when the reply
     * also holds anything that waits for the program (a call of one of its
     * tools of any kind, or an item codeshim does not know): the loop then
     * ends there. 0, or -EPROTO when the reply has not the shape of a
     * successful answer. Also sums usage. */
    int (*scan)(const cJSON *reply, struct shim_conv *cv,
                struct shim_call **calls, size_t *n, int *foreign);
    /* Adds reply's turn and the outputs of the executed (and skipped)
     * calls to up (the next upstream request) and to cv->visible. */
    int (*advance)(cJSON *up, const cJSON *reply, const struct shim_call *calls,
                   size_t n, struct shim_conv *cv);
    /* The program's answer built from the last reply (caller owns).
     * capped: the execution cap stopped the loop. */
    cJSON *(*finish)(const cJSON *req, const cJSON *last, const struct shim_call *calls,
                     size_t n, struct shim_conv *cv, int capped);
    /* The tool output item the upstream would need for c when a later
     * request continues this conversation by id (caller owns); NULL for an
     * API without continuation by id (Chat). */
    cJSON *(*call_output)(const struct shim_call *c);
};

extern const struct shim_api_ops shim_responses_ops;
extern const struct shim_api_ops shim_chat_ops;

/* Shared helpers (conv.c); chat selects the Chat Completions shapes. */
/* What both adapters' prepare do first: a copy of req with the native
 * tool(s) replaced by codeshim's function tool, tool_choice rewritten,
 * stream and stream_options taken out (noted in cv), and codeshim-private
 * fields and metadata.session_id removed. Caller owns; NULL on failure. */
cJSON *shim_conv_prepare(const cJSON *req, struct shim_conv *cv, int chat);
/* The function tool codeshim offers in place of code_interpreter. */
cJSON *shim_conv_code_tool(const char *name, int chat);
/* Rewrites tool_choice in place for the first call (a choice forcing the
 * code interpreter forces codeshim's function) and notes in cv whether it
 * forces a call at all. */
void shim_conv_rewrite_choice(cJSON *up, struct shim_conv *cv, int chat);
/* Follow-up turns never force a call: that would loop to the cap. */
void shim_conv_relax_choice(cJSON *up, int chat);
/* Whether a tool or tool_choice entry names the code interpreter. */
int shim_conv_is_ci(const cJSON *o);
/* The call of the next internal item of a reply, in the order scan
 * collected them (one per item, so the k-th internal item is calls[k]
 * whatever its call_id says: linear, and duplicate ids cannot confuse
 * it); advances *k. NULL past the end. */
const struct shim_call *shim_conv_nth_call(const struct shim_call *calls, size_t n,
                                           size_t *k);
/* Adds every number of usage (and of its detail objects) into cv->usage.
 * Bounded: at most SHIM_USAGE_MAX_FIELDS fields of usage (all levels
 * together, in order) nested at most SHIM_USAGE_MAX_DEPTH levels deep are
 * summed, and the sum never holds more fields; the rest is left out (one
 * warning per conversation). A field whose type (number or object) differs from the sum's so
 * far is left out too. */
#define SHIM_USAGE_MAX_FIELDS 256
#define SHIM_USAGE_MAX_DEPTH 4
void shim_conv_sum_usage(struct shim_conv *cv, const cJSON *usage);
/* Picks a tool name that none of the program's tools uses. */
void shim_conv_pick_tool_name(const cJSON *tools, int chat, char *out, size_t outsz);
/* Parses {"code": "..."} arguments; NULL (and *why) when unusable. */
char *shim_conv_parse_code(const char *arguments, const char **why);
/* The container ids a Responses request refers to (tools[].container
 * strings, code_interpreter_call items in its input), borrowed from req;
 * at most max, duplicates left out. Returns the count. */
size_t shim_conv_container_refs(const cJSON *req, const char **out, size_t max);
/* metadata.session_id when it is a non-empty string (borrowed), or NULL. */
/* The named sandbox configuration a request asks for (config.h):
 * metadata.codeshim_sandbox (*named = 1), else a code_interpreter tool's
 * container string that is not a "cntr_" id (*named = 0: it may still be
 * a container id of another form); NULL when neither. Borrowed. */
const char *shim_conv_sandbox_name(const cJSON *req, int *named);
const char *shim_conv_session_id(const cJSON *req);
/* Removes codeshim-private fields and metadata.session_id from a request
 * copy; drops metadata when that empties it. */
void shim_conv_strip_private(cJSON *up);

#endif
