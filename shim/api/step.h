/* step.h - what the code-interpreter loop does next, decided without I/O.
 *
 * The loop (curl/loop.c) calls the upstream, reads each reply here, runs
 * the calls it is told to run and asks here what follows: call the
 * upstream again (the next request already written), call it once more
 * with no tool allowed (the execution cap), or give the program its answer
 * (the model answered, the cap was reached, or the reply holds a call of
 * one of the program's own tools, which the program answers). Which error
 * ends a conversation is decided here too: a reply without the API's
 * shape, a program that stopped reading, a session refused. Nothing here
 * runs code, sends or delivers: the fuzzer (tests/fuzz) drives the same
 * decisions with a faked sandbox. */
#ifndef SHIM_STEP_H
#define SHIM_STEP_H

#include "api/conv.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* One conversation's progress, kept between its upstream calls. */
struct shim_step {
    const struct shim_api_ops *ops;
    struct shim_conv *cv; /* the conversation (conv.h); cv->max_exec is the cap */
    int executed;         /* calls run so far (shim_step_ran) */
    int capped;           /* the last upstream call, with no tool allowed, is under way */
};

/* One upstream reply's calls of codeshim's tool, in order. */
struct shim_turn {
    struct shim_call *calls;
    size_t n;
    size_t nrun;  /* calls[0, nrun) are to be run, in order; the rest were over the
                   * cap: skipped, with their output telling the model so */
    int foreign;  /* the reply waits for the program (one of its tools, or an
                   * item codeshim does not know) */
    int capped;   /* set by shim_step_next: the answer says the cap stopped the loop */
};

/* What comes next (shim_step_next). */
enum shim_step_next {
    SHIM_STEP_AGAIN,    /* call the upstream again: up holds the next request */
    SHIM_STEP_FINAL,    /* the cap was reached: one last call, up holding the
                         * unrun calls' outputs and tool_choice "none", so a
                         * conversation stored upstream stays consistent */
    SHIM_STEP_ANSWER,   /* the model answered: deliver the answer */
    SHIM_STEP_CAPPED,   /* deliver the answer; the cap stopped the loop */
    SHIM_STEP_HANDBACK, /* deliver the reply's call of a program tool (with
                         * whatever codeshim ran), for the program to answer */
    SHIM_STEP_STOPPED,  /* the program stopped reading: end the transfer */
    SHIM_STEP_REFUSED,  /* a session was refused: the error answer saying why */
};

#define SHIM_STEP_STOP 1u   /* the program no longer reads the answer */
#define SHIM_STEP_REFUSE 2u /* a session was refused while the calls ran */

void shim_step_init(struct shim_step *s, const struct shim_api_ops *ops, struct shim_conv *cv);
/* Whether another call may still run (the cap not reached). */
int shim_step_room(const struct shim_step *s);
/* Reads one upstream reply (borrowed; NULL when it was not JSON) into t:
 * its calls, which of them run, and the skipped ones' outputs. 0, or
 * -EPROTO when the reply has not the API's shape (t then empty: the loop
 * fails with "the model server's answer could not be read"). Skipped calls
 * whose note could not be allocated keep a NULL output. */
int shim_step_read(struct shim_step *s, const cJSON *reply, struct shim_turn *t);
/* Counts one call as run (whatever its outcome). */
void shim_step_ran(struct shim_step *s);
/* After the calls t->calls[0, nrun) ran (or some did: SHIM_STEP_STOP): what
 * follows. up is the upstream request, written for the next call on
 * SHIM_STEP_AGAIN and SHIM_STEP_FINAL; flags: SHIM_STEP_STOP, _REFUSE. */
enum shim_step_next shim_step_next(struct shim_step *s, cJSON *up, const cJSON *reply,
                                   struct shim_turn *t, unsigned flags);
/* Whether next delivers the program's answer from the last reply. */
int shim_step_answers(enum shim_step_next next);
void shim_turn_free(struct shim_turn *t);

#endif
