/* chain.h - continuing, by id, a conversation codeshim answered.
 *
 * OpenAI SDK programs continue with previous_response_id = the id of the
 * answer they got. Two answers need help for that to work upstream: a
 * stream (its id is the first upstream response's, as OpenAI keeps one id
 * per stream, while the upstream's stored conversation ends at the last
 * one), and a turn where the model called a program tool next to
 * codeshim's tool (the upstream never got the output of codeshim's call).
 * For those, the answer id is remembered with the upstream's last id and
 * the outputs it still owes; a later request continuing from that id is
 * rewritten to continue from the right response, with the owed outputs
 * first. Entries live in the identity's private store directory as
 * r-<hash of the answer id>, are readable only by the user, and are
 * pruned after a day. */
#ifndef SHIM_CHAIN_H
#define SHIM_CHAIN_H

#include <cjson/cJSON.h>

struct shim_config;

/* identity: shim_identity_of() of the request's credentials. */
/* Remembers answer_id -> upstream_id + owed function_call_output items
 * (outputs may be NULL). 0 or -errno; best effort. */
int shim_chain_save(const struct shim_config *cfg, const char *identity,
                    const char *answer_id, const char *upstream_id, const cJSON *outputs);
/* Rewrites the upstream request up when its previous_response_id is a
 * remembered answer. Returns 1 when it did, 0 otherwise, or -ENOLINK when
 * up continues an answer but the runtime directory is not usable (whether
 * it is one of codeshim's cannot be told; shim_store_why() says why). */
int shim_chain_apply(const struct shim_config *cfg, const char *identity, cJSON *up);
/* An answer that needs no entry (its id is the upstream's, nothing owed)
 * drops any older entry of that id: an upstream that gives the same id
 * again (a test double's counter, a replayed recording) is never
 * continued from another answer's history. */
void shim_chain_forget(const struct shim_config *cfg, const char *identity,
                       const char *answer_id);

#endif
