/* trace.h - CODESHIM_TRACE=FILE: one JSON line per event, appended.
 *
 * Events (each line also has "ts", "pid", "req", "event"): request,
 * upstream (per call, with timing and tokens), exec (per sandbox run: code,
 * output, duration, status), answer, error. `codeshim trace FILE` turns a
 * file into a summary. Nothing that could hold an API key is written:
 * request headers never reach a trace. Lines from several processes never
 * interleave (one write(2) per line, O_APPEND). */
#ifndef SHIM_TRACE_H
#define SHIM_TRACE_H

#include <cjson/cJSON.h>

int shim_trace_enabled(void);
/* Writes one event; takes fields (an object, or NULL). */
void shim_trace_emit(const char *req_id, const char *event, cJSON *fields);

#endif
