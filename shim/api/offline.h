/* offline.h - the built-in offline model (CODESHIM_OFFLINE=1): pure.
 *
 * A small deterministic stand-in for the model, so codeshim runs with no
 * network and no API key: it reads the ```python blocks of the last user
 * message and calls codeshim's tool with them, one block per turn (all at
 * once when the message contains "[parallel]"); when none are left it
 * answers with a short text quoting the last tool output. Replies have
 * the shape of OpenAI's (Response or chat.completion), with usage
 * counted in rough tokens (4 bytes each). */
#ifndef SHIM_OFFLINE_H
#define SHIM_OFFLINE_H

#include "api/classify.h"

#include <cjson/cJSON.h>

/* The reply to upstream request req (caller owns), or NULL. */
cJSON *shim_offline_reply(enum shim_api api, const cJSON *req);

/* One turn of a model that says what to answer (the scripted model):
 * calls of codeshim's tool with each of codes (strings; none when req
 * offers no such tool), a call of the program's tool call_name with
 * call_args (JSON text; "{}" when NULL), and a message of text (also when
 * there is nothing else to answer). */
struct shim_offline_turn {
    const cJSON *codes;
    const char *text;
    const char *call_name, *call_args;
};
/* That turn as a reply of req's API (caller owns), or NULL. */
cJSON *shim_offline_shape(enum shim_api api, const cJSON *req, const struct shim_offline_turn *t);
/* The text of the last user message of upstream request req, into out. */
const char *shim_offline_user_text(const cJSON *req, enum shim_api api, char *out, size_t outsz);

#endif
