/* loop.h - the code-interpreter loop for one intercepted transfer.
 *
 * One skeleton for both APIs (the adapter in conv.h supplies the shapes):
 * call the upstream, run codeshim's tool calls in the sandbox in order,
 * feed the outputs back, repeat until the model answers, calls one of the
 * program's own tools, or reaches the execution cap; then hand the program
 * one answer. A program that asked for a stream gets one as the loop runs:
 * the upstream is asked to stream too and its events are relayed as they
 * arrive (live.h); an upstream that answers whole is synthesised from
 * (stream.h). Errors: an upstream error status reaches
 * the program as received, a network failure as the same CURLcode, a
 * sandbox failure as tool output. */
#ifndef SHIM_LOOP_H
#define SHIM_LOOP_H

#include "api/classify.h"
#include "curl/handles.h"
#include "system/real.h"

#include <cjson/cJSON.h>

/* Runs the loop and delivers the answer to the program's callbacks.
 * req is the program's parsed body (borrowed). t0: when perform began. */
CURLcode shim_loop_run(const struct shim_curl_api *api, CURL *h,
                       const struct shim_handle_view *v, enum shim_api kind,
                       const cJSON *req, double t0);

#endif
