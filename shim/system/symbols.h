/* symbols.h - the one list of the libcurl functions codeshim interposes.
 *
 * X(name, field, ret, params): the libcurl function, its field in struct
 * shim_curl_api (real.h), its return type and parameter types. Made from
 * this list: the fields of the real-function table (real.h), their
 * binding (real.c; the easy ones are required, the multi ones optional),
 * the prototypes of preload.c's wrappers, the version script
 * (build/gen/codeshim.map, from shim/system/codeshim.map.in) and the export
 * list `make exports` checks (tests/tools/check_exports.sh). Each wrapper's
 * body is written out in preload.c; a function added here without one is
 * missing from the exports, which `make exports` reports.
 *
 * Only macros (no types are needed until a list is expanded), so the
 * version script can be made from it by the C preprocessor alone. */
#ifndef SHIM_SYMBOLS_H
#define SHIM_SYMBOLS_H

/* curl_easy_setopt's (and curl_multi_setopt's) argument after the option
 * and curl_easy_getinfo's after the info: "..." as libcurl declares them;
 * preload.c redefines them for its wrappers' prototypes. */
#define SHIM_SETOPT_ARG ...
#define SHIM_GETINFO_ARG ...

#define SHIM_EASY_SYMBOLS(X)                                                   \
    X(curl_easy_init, easy_init, CURL *, (void))                               \
    X(curl_easy_setopt, easy_setopt, CURLcode, (CURL *, CURLoption, SHIM_SETOPT_ARG)) \
    X(curl_easy_perform, easy_perform, CURLcode, (CURL *))                     \
    X(curl_easy_getinfo, easy_getinfo, CURLcode, (CURL *, CURLINFO, SHIM_GETINFO_ARG)) \
    X(curl_easy_cleanup, easy_cleanup, void, (CURL *))                         \
    X(curl_easy_reset, easy_reset, void, (CURL *))                             \
    X(curl_easy_duphandle, easy_duphandle, CURL *, (CURL *))                   \
    X(curl_easy_pause, easy_pause, CURLcode, (CURL *, int))

#define SHIM_MULTI_SYMBOLS(X)                                                  \
    X(curl_multi_add_handle, multi_add_handle, CURLMcode, (CURLM *, CURL *))   \
    X(curl_multi_remove_handle, multi_remove_handle, CURLMcode, (CURLM *, CURL *)) \
    X(curl_multi_perform, multi_perform, CURLMcode, (CURLM *, int *))          \
    X(curl_multi_socket_action, multi_socket_action, CURLMcode,                \
      (CURLM *, curl_socket_t, int, int *))                                    \
    X(curl_multi_socket, multi_socket, CURLMcode, (CURLM *, curl_socket_t, int *)) \
    X(curl_multi_socket_all, multi_socket_all, CURLMcode, (CURLM *, int *))    \
    X(curl_multi_wait, multi_wait, CURLMcode,                                  \
      (CURLM *, struct curl_waitfd *, unsigned int, int, int *))               \
    X(curl_multi_poll, multi_poll, CURLMcode,                                  \
      (CURLM *, struct curl_waitfd *, unsigned int, int, int *))               \
    X(curl_multi_fdset, multi_fdset, CURLMcode, (CURLM *, fd_set *, fd_set *, fd_set *, int *)) \
    X(curl_multi_timeout, multi_timeout, CURLMcode, (CURLM *, long *))         \
    X(curl_multi_info_read, multi_info_read, CURLMsg *, (CURLM *, int *))      \
    X(curl_multi_setopt, multi_setopt, CURLMcode, (CURLM *, CURLMoption, SHIM_SETOPT_ARG)) \
    X(curl_multi_assign, multi_assign, CURLMcode, (CURLM *, curl_socket_t, void *)) \
    X(curl_multi_cleanup, multi_cleanup, CURLMcode, (CURLM *))

#endif
