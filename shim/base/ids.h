/* ids.h - OpenAI-style identifiers ("ci_" + 48 hex) from getrandom(2). */
#ifndef SHIM_IDS_H
#define SHIM_IDS_H

#include <stddef.h>

/* Writes prefix + nhex lowercase hex digits + NUL into out (outsz bytes).
 * Falls back to a time/counter mix if getrandom fails. */
void shim_id_make(char *out, size_t outsz, const char *prefix, size_t nhex);

#endif
