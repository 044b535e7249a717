/* match.h - what a recorded upstream exchange is matched on (cassettes).
 *
 * Not the body codeshim sent, which holds codeshim's own rewrite (its
 * function tool's name, description and schema) and so changes with
 * codeshim: the request as the program sent it, plus where the loop is
 * (each call of the code tool made so far, with its code and output).
 * Values that differ on every run for reasons of codeshim's own are made
 * neutral: the ids codeshim makes (ci_, cntr_, resp_, ... with 24 or more
 * hex digits) and the value of previous_response_id. The program's own
 * volatile fields are left out by the user's list (CODESHIM_MATCH_IGNORE:
 * comma-separated dot paths, "user,metadata.request_id"). Pure. */
#ifndef SHIM_MATCH_H
#define SHIM_MATCH_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The match document {"request": ..., "calls": [...]} (caller frees), or
 * NULL when out of memory. req and calls are not changed; calls may be
 * NULL (no call yet). */
cJSON *shim_match_doc(const cJSON *req, const cJSON *calls, const char *ignore);

/* The first place where recorded and now differ, walking both in order:
 * its dot path into path ("request.input[0].content"), both values as
 * one-line text cut to vsz bytes ("(absent)" where one has none). Returns
 * the number of values alike before it (a larger one is a nearer miss),
 * or -1 when the two are alike throughout. */
long shim_match_diff(const cJSON *recorded, const cJSON *now, char *path, size_t pathsz,
                     char *was, char *is, size_t vsz);

#endif
