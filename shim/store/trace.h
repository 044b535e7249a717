/* trace.h - CODESHIM_TRACE=FILE: one JSON line per event, appended.
 *
 * Events (each line also has "ts", "pid", "req", "event"): request,
 * upstream (per call, with timing and tokens), exec (per sandbox run: code,
 * output, duration, status; on e2b also e2b_create_seconds and
 * e2b_execute_seconds), answer, error. `codeshim trace FILE` turns a
 * file into a summary. Nothing that could hold an API key is written:
 * request headers never reach a trace. Lines from several processes never
 * interleave (one write(2) per line, O_APPEND). */
#ifndef SHIM_TRACE_H
#define SHIM_TRACE_H

#include <cjson/cJSON.h>
#include <curl/curl.h>

struct shim_call;
struct shim_http_reply;

int shim_trace_enabled(void);
/* Writes one event; takes fields (an object, or NULL). */
void shim_trace_emit(const char *req_id, const char *event, cJSON *fields);

/* The loop's events, built here so the loop only says what happened.
 * Each is a no-op when tracing is off. url must already be redacted
 * (shim_url_redact). */
void shim_trace_request(const char *req_id, const char *api, const char *url,
                        const char *model, int stream);
/* One upstream call: its timing, and its status and token counts (chat:
 * the reply uses Chat Completions' usage names) or its failure. body: the
 * reply's body already parsed, or NULL to have it parsed here. */
void shim_trace_upstream(const char *req_id, int turn, int chat,
                         const struct shim_http_reply *rep, const cJSON *body, CURLcode rc,
                         const char *errbuf);
void shim_trace_exec(const char *req_id, const struct shim_call *c);
/* The program's answer; message: the failure text when rc is not OK. */
void shim_trace_answer(const char *req_id, long status, int executions, int upstream_calls,
                       double seconds, CURLcode rc, const char *message);

#endif
