/* step.c - see step.h. */
#include "api/step.h"

#include "base/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shim_step_init(struct shim_step *s, const struct shim_api_ops *ops, struct shim_conv *cv)
{
    memset(s, 0, sizeof(*s));
    s->ops = ops;
    s->cv = cv;
}

int shim_step_room(const struct shim_step *s)
{
    return !s->capped && s->executed < s->cv->max_exec;
}

void shim_step_ran(struct shim_step *s)
{
    s->executed++;
}

void shim_turn_free(struct shim_turn *t)
{
    while (t->n)
        shim_call_free(&t->calls[--t->n]);
    free(t->calls);
    memset(t, 0, sizeof(*t));
}

/* A call over the cap: never run; the model is told why. */
static void skip(const struct shim_step *s, struct shim_call *c)
{
    char msg[200];

    snprintf(msg, sizeof(msg),
             "Not run: this request reached its limit of %d code executions. "
             "Answer with the results you already have.", s->cv->max_exec);
    c->skipped = 1;
    c->output = strdup(msg);
}

int shim_step_read(struct shim_step *s, const cJSON *reply, struct shim_turn *t)
{
    size_t i, room;

    memset(t, 0, sizeof(*t));
    if (!reply || s->ops->scan(reply, s->cv, &t->calls, &t->n, &t->foreign) < 0) {
        shim_turn_free(t); /* whatever a failed scan left */
        return -EPROTO;
    }
    room = shim_step_room(s) ? (size_t)(s->cv->max_exec - s->executed) : 0;
    t->nrun = t->n < room ? t->n : room;
    for (i = t->nrun; i < t->n; i++)
        skip(s, &t->calls[i]);
    return 0;
}

enum shim_step_next shim_step_next(struct shim_step *s, cJSON *up, const cJSON *reply,
                                   struct shim_turn *t, unsigned flags)
{
    int skipped = t->nrun < t->n;

    if (flags & SHIM_STEP_STOP)
        return SHIM_STEP_STOPPED;
    if (flags & SHIM_STEP_REFUSE)
        return SHIM_STEP_REFUSED;
    if (skipped && !s->capped && !t->foreign) {
        s->capped = 1;
        s->ops->advance(up, reply, t->calls, t->n, s->cv);
        shim_json_set(up, "tool_choice", cJSON_CreateString("none"));
        return SHIM_STEP_FINAL;
    }
    t->capped = skipped || s->capped;
    if (t->foreign)
        return SHIM_STEP_HANDBACK;
    if (t->capped)
        return SHIM_STEP_CAPPED;
    if (t->n == 0)
        return SHIM_STEP_ANSWER;
    s->ops->advance(up, reply, t->calls, t->n, s->cv);
    return SHIM_STEP_AGAIN;
}

int shim_step_answers(enum shim_step_next next)
{
    return next == SHIM_STEP_ANSWER || next == SHIM_STEP_CAPPED || next == SHIM_STEP_HANDBACK;
}
