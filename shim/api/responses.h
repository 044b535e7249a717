/* responses.h - the Responses adapter's shapes that other engines build
 * with (the SSE synthesiser, stream.c): codeshim's calls as OpenAI's
 * container would show them, usage, the echoed tools. The adapter itself
 * is shim_responses_ops (conv.h). Pure; the caller owns what it gets. */
#ifndef SHIM_RESPONSES_H
#define SHIM_RESPONSES_H

#include "api/conv.h"

/* Whether a Responses output item is a call of codeshim's own tool: a
 * plain function_call (no namespace) with cv->tool_name as its name. */
int shim_responses_is_internal(const cJSON *item, const struct shim_conv *cv);
/* The code_interpreter_call item OpenAI's container would have produced
 * for c (caller owns). */
cJSON *shim_responses_ci_item(const struct shim_call *c);
/* {"type":"function_call_output","call_id":..,"output":..} for c (caller owns). */
cJSON *shim_responses_call_output(const struct shim_call *c);
/* The usage summed so far with every field the Response schema requires
 * (zeros when no reply had usage); caller owns. */
cJSON *shim_responses_usage(const struct shim_conv *cv);
/* The program's tools as OpenAI echoes them: function tools always carry
 * "parameters" and "strict", code_interpreter a "container" (caller owns). */
cJSON *shim_responses_echo_tools(const cJSON *req);

#endif
