/* url.h - the one URL parser: libcurl's own (curl_url), so every part of
 * codeshim reads a URL exactly as the program's libcurl does.
 *
 * A URL is parsed with the flags libcurl gives CURLOPT_URL
 * (CURLU_GUESS_SCHEME: "host/path" is http://host/path, and a "://" later
 * in the query is only query; CURLU_NON_SUPPORT_SCHEME). libcurl is found
 * through real.c: the first bound build of it in the process, else the
 * OpenSSL build (shim_real). Where none can be found (or it lacks
 * curl_url, before 7.62) every function fails with -ENOSYS, and callers
 * treat the URL as one they cannot read.
 *
 * Nothing here logs a URL or a part of it. */
#ifndef SHIM_URL_H
#define SHIM_URL_H

#include <stddef.h>

/* The parts of a URL; NULL where absent (path is at least "/"). Strings
 * are libcurl's allocations: shim_url_free releases them. */
struct shim_url {
    const void *api; /* the libcurl that allocated them */
    char *scheme, *user, *password, *host, *port, *path, *query, *fragment;
};

/* SHIM_URL_DECODE: user and password percent-decoded (CURLU_URLDECODE;
 * one that holds an escaped control byte, which libcurl will not decode,
 * stays as sent); path, query and fragment always stay as sent. */
#define SHIM_URL_DECODE 1u

/* Parses url into *u (zeroed on failure); 0, -EINVAL when libcurl would
 * refuse it too, -ENOMEM, -ENOSYS without a usable libcurl. */
int shim_url_parse(const char *url, unsigned flags, struct shim_url *u);
void shim_url_free(struct shim_url *u);

/* The URL for a log line: scheme, host, port and path only (no userinfo,
 * query or fragment, where credentials travel), at most n - 1 bytes and
 * a NUL. A URL that cannot be parsed becomes "(unreadable URL)", NULL
 * "". */
void shim_url_redact(const char *url, char *out, size_t n);

/* The URL with its path, query and fragment replaced by path (which
 * starts with '/' and may carry its own "?query"): out of n bytes; 0,
 * -ENAMETOOLONG, or shim_url_parse's errors. */
int shim_url_with_path(const char *url, const char *path, char *out, size_t n);

/* p[0..n) percent-decoded (curl_easy_unescape) into a malloc'ed buffer
 * of *outlen bytes and a NUL (the result may hold NULs); NULL on failure.
 * plus: '+' is a space first (an HTML form's encoding, "%2B" stays '+'). */
char *shim_url_unescape(const char *p, size_t n, int plus, size_t *outlen);

/* s percent-encoded (curl_easy_escape: every byte outside
 * [A-Za-z0-9-._~]) into out of n bytes; 0, -ENAMETOOLONG, -ENOMEM or
 * -ENOSYS. */
int shim_url_escape(const char *s, char *out, size_t n);

#endif
