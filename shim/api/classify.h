/* classify.h - pure: is this transfer one codeshim takes over?
 *
 * Ours: a POST whose URL path ends in /responses or /chat/completions (any
 * host), with an in-memory JSON object body whose tools contain an entry of
 * type "code_interpreter". Everything else goes to libcurl untouched. The
 * cheap checks (method, URL, a substring scan) run before any parsing, so
 * pass-through costs next to nothing.
 *
 * A request that is ours but asks for something codeshim cannot do inside
 * the program's transfer (a Responses "background": true: the loop would
 * have to outlive the transfer, and a later poll would show the internal
 * tool) is answered with an OpenAI-style 400 instead. */
#ifndef SHIM_CLASSIFY_H
#define SHIM_CLASSIFY_H

#include <cjson/cJSON.h>
#include <stddef.h>

enum shim_api {
    SHIM_API_NONE = 0,
    SHIM_API_RESPONSES,
    SHIM_API_CHAT,
    SHIM_API_CONTAINERS, /* may be the Containers API (containers.h) */
};

/* Which API the URL's path names (query and fragment ignored). */
enum shim_api shim_classify_url(const char *url);
/* The method, size and needle pre-check, without the URL: 1 when a
 * transfer to an API path may be ours. len SHIM_BODY_STRING: body is
 * NUL-terminated (libcurl's POSTFIELDS without a size), measured only
 * once the needle is in it. */
#define SHIM_BODY_STRING ((size_t)-1)
int shim_classify_may_be_ours(int is_post, const char *custom_request, const char *body,
                              size_t len, size_t max_body);
/* That and the URL's API; SHIM_API_NONE means "pass through". */
enum shim_api shim_classify_transfer(int is_post, const char *custom_request,
                                     const char *url, const char *body,
                                     size_t len, size_t max_body);
/* Whether url may name the Containers API (a "/containers" in it): the
 * cheap look before containers.h decides. */
int shim_classify_maybe_containers(const char *url);
/* 1 when req is an object whose tools hold a code_interpreter entry. */
int shim_classify_body(const cJSON *req);
/* Why a transfer to a model path goes to libcurl, for the debug log. */
enum shim_pass {
    SHIM_PASS_OURS = 0,           /* none found: by these checks it is ours */
    SHIM_PASS_NOT_POST,           /* detail: the method */
    SHIM_PASS_NO_BODY,            /* no JSON body in memory (none, MIME, read callback) */
    SHIM_PASS_EMPTY_BODY,
    SHIM_PASS_TOO_LARGE,          /* detail: sizes */
    SHIM_PASS_NOT_JSON,
    SHIM_PASS_NOT_OBJECT,         /* detail: what it is */
    SHIM_PASS_NO_TOOLS,
    SHIM_PASS_TOOLS_NOT_ARRAY,    /* detail: what tools is */
    SHIM_PASS_NO_CODE_INTERPRETER, /* detail: a near miss, if any */
};
struct shim_pass_why {
    enum shim_pass code;
    char text[192]; /* one line, no body text but a near-miss tool type */
};
/* Tells why the transfer (as shim_classify_may_be_ours sees it, method
 * its name: the custom request or the one libcurl would use) is not
 * ours; reads the body only up to max_body. Returns out->code. */
enum shim_pass shim_classify_explain(int is_post, const char *method, const char *body,
                                     size_t len, size_t max_body, struct shim_pass_why *out);

/* For a request that is ours: NULL when codeshim can run it, else the
 * parameter it cannot honour, with *why a message for the 400 (both
 * static). */
const char *shim_classify_unsupported(const cJSON *req, enum shim_api kind, const char **why);

#endif
