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

#include "classify.h"

#include <cjson/cJSON.h>

/* The reply to upstream request req (caller owns), or NULL. */
cJSON *shim_offline_reply(enum shim_api api, const cJSON *req);

#endif
