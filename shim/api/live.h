/* live.h - relays the upstream's own stream to the program's while it
 * arrives ("stream": true on both sides): pure but for the hooks the loop
 * supplies.
 *
 * Each upstream SSE event goes in as it is parsed; what the program may
 * see goes out through the program stream (stream.h) at once:
 * Responses: one response.created / in_progress (from the first upstream
 * stream), the items of each upstream turn in order with output_index
 * renumbered (sequence_number is the program stream's own), and a call of
 * codeshim's tool announced as a code_interpreter_call whose code is
 * decoded out of the arguments as the model writes them (argcode.h). Once
 * that call is announced, or when the upstream interleaves items, the rest
 * of the turn waits for its end and is synthesised from the final
 * Response, as for a non-streaming upstream (stream.h). Chat: content and
 * refusal deltas at once, the program's tool calls with their index
 * renumbered, codeshim's withheld. The turn's answer is rebuilt (Chat) or
 * taken from the terminal event (Responses) so the loop reads it as it
 * would a JSON reply. Everything kept is bounded by cap bytes. */
#ifndef SHIM_LIVE_H
#define SHIM_LIVE_H

#include "api/argcode.h"
#include "api/classify.h"
#include "api/conv.h"
#include "api/stream.h"
#include "base/buf.h"

#include <cjson/cJSON.h>

#define SHIM_LIVE_MAX_CALLS 128 /* Chat tool calls in one turn */

struct shim_live_hooks {
    /* The first upstream event is in: start the program's stream with
     * first (the Response snapshot, or the first chat chunk). 0 when the
     * stream runs. */
    int (*begin)(void *ctx, const cJSON *first);
    /* A call of codeshim's tool is about to be announced: the container it
     * will run in (out holds outsz bytes). */
    void (*container)(void *ctx, char *out, size_t outsz);
    void *ctx;
};

struct shim_live_call { /* Chat: one tool call by upstream index */
    char *id, *type, *name;
    struct shim_buf args;
    int seen;
    int state; /* 0 unnamed yet, 1 the program's (sent), 2 codeshim's */
    int index; /* the program's index for it */
};

struct shim_live {
    enum shim_api api;
    const struct shim_conv *cv;
    struct shim_stream *st;
    struct shim_live_hooks hooks;
    size_t cap;
    int started; /* begin succeeded */
    int nprog;   /* Chat: the program's calls sent in this request */
    /* this upstream turn */
    int may_exec;
    int events;  /* events seen */
    int ended;   /* a terminal event or [DONE] */
    int held;    /* Responses: nothing more is forwarded this turn */
    int nfwd;    /* Responses: upstream items forwarded whole (a prefix) */
    int open_up, open_ours; /* the item being forwarded, -1 none */
    int ci_up;   /* upstream index of the code call announced, -1 none */
    char ci_id[64], cntr[64]; /* its ids */
    struct shim_argcode dec;
    cJSON *reply;   /* Responses: the terminal event's response */
    char err[400];  /* why the stream could not be relayed */
    /* Chat */
    cJSON *first;
    struct shim_buf content, refusal;
    char *finish;
    cJSON *usage;
    struct shim_live_call calls[SHIM_LIVE_MAX_CALLS];
    int ncalls;
};

void shim_live_init(struct shim_live *l, enum shim_api api, const struct shim_conv *cv,
                    struct shim_stream *st, const struct shim_live_hooks *hooks, size_t cap);
void shim_live_free(struct shim_live *l);
/* A new upstream call; may_exec: a call of codeshim's tool in it would
 * run (else it is never announced). */
void shim_live_turn_begin(struct shim_live *l, int may_exec);
/* One upstream event (name may be NULL). 0, or -1 to stop the transfer:
 * l->err says why, or the program's stream failed. */
int shim_live_event(struct shim_live *l, const char *name, const char *data, size_t len);
/* The turn's answer (caller owns), NULL when the stream ended without
 * one (l->err set). Chat: the program's calls never named are sent now. */
cJSON *shim_live_take_reply(struct shim_live *l);
/* The answer the loop read: the program stream goes on from the first
 * item not relayed, and calls[0] takes the id of the call announced. */
void shim_live_turn_end(struct shim_live *l, const cJSON *reply, struct shim_call *calls,
                        size_t n);

#endif
