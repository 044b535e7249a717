/* containers.h - OpenAI's Containers API for the containers codeshim
 * issued: answered from the container store (cstore.h) through the same
 * synthetic-transfer path as the loop's answers (sink.h), so a program
 * sees headers, body (or a file with curl -o) and getinfo as from the
 * network. Requests that name ids codeshim did not issue are not
 * answered here (the caller sends them to the upstream untouched). */
#ifndef SHIM_CONTAINERS_H
#define SHIM_CONTAINERS_H

#include "api/capi.h"
#include "curl/handles.h"
#include "system/real.h"

#include <curl/curl.h>

/* Which Containers API call the transfer is, if codeshim answers it:
 * SHIM_CAPI_NONE for every other transfer, and for ids it did not issue. */
enum shim_capi_op shim_containers_match(const struct shim_handle_view *v,
                                        struct shim_capi_route *r);
/* Answers the call (r from shim_containers_match). */
CURLcode shim_containers_serve(const struct shim_curl_api *api, CURL *h,
                               const struct shim_handle_view *v,
                               const struct shim_capi_route *r, double t0);

#endif
