/* identity.h - whose request this is: the one owner of identity.
 *
 * Sessions and continuations (store.h) live per identity, a hash of every
 * credential a request carries, wherever it travels: request headers whose
 * name looks like a credential (Authorization with any scheme, api-key,
 * Ocp-Apim-Subscription-Key, x-goog-api-key, Cookie, ...), query
 * parameters likewise (?api-key=, ?key=, ?sig=, ?access_token=, ...), URL
 * userinfo, and the credential options (CURLOPT_XOAUTH2_BEARER, USERPWD,
 * USERNAME, PASSWORD, COOKIE, client certificates, ...). Only a request
 * with no credential at all is "anonymous"; anything credential-like that
 * codeshim does not specifically recognise still goes into the hash, so it
 * never falls into a shared identity. A key is only ever hashed, never
 * kept: options are reduced to digests when they are set. */
#ifndef SHIM_IDENTITY_H
#define SHIM_IDENTITY_H

#include <curl/curl.h>
#include <stddef.h>

#define SHIM_IDENTITY_SIZE 65 /* 32 hex digits or "anonymous", NUL included */

/* The credential options, one digest each ("" = not set). */
enum shim_cred_slot {
    SHIM_CRED_XOAUTH2 = 0, /* XOAUTH2_BEARER */
    SHIM_CRED_USER,        /* USERPWD before ':', USERNAME */
    SHIM_CRED_PASSWORD,    /* USERPWD after ':', PASSWORD */
    SHIM_CRED_COOKIE,
    SHIM_CRED_PROXY_USER,     /* PROXYUSERPWD before ':', PROXYUSERNAME */
    SHIM_CRED_PROXY_PASSWORD, /* PROXYUSERPWD after ':', PROXYPASSWORD */
    SHIM_CRED_SSLCERT,        /* SSLCERT or SSLCERT_BLOB */
    SHIM_CRED_SSLKEY,         /* SSLKEY or SSLKEY_BLOB */
    SHIM_CRED_KEYPASSWD,
    SHIM_CRED_TLSAUTH_USER,
    SHIM_CRED_TLSAUTH_PASSWORD,
    SHIM_CRED_NSLOTS
};

struct shim_creds {
    char d[SHIM_CRED_NSLOTS][SHIM_IDENTITY_SIZE];
};

/* The identity of a request whose only credential is api_key: 32 hex
 * digits of its SHA-256, or "anonymous" without a key ("anonymous" is not
 * hex, so it never equals a key's hash). The same for the key sent as
 * "Authorization: Bearer", "api-key", "x-api-key" or XOAUTH2_BEARER. */
void shim_identity_key(const char *api_key, char out[SHIM_IDENTITY_SIZE]);

/* The options that carry a credential: X(option, slot, second slot (the
 * part after ':' of "user:password", else -1), is a struct curl_blob).
 * identity.c's table and handles.c's table of recorded options are made
 * from this one list. */
#define SHIM_CRED_OPTIONS(X)                                                   \
    X(CURLOPT_XOAUTH2_BEARER, SHIM_CRED_XOAUTH2, -1, 0)                         \
    X(CURLOPT_USERPWD, SHIM_CRED_USER, SHIM_CRED_PASSWORD, 0)                   \
    X(CURLOPT_USERNAME, SHIM_CRED_USER, -1, 0)                                  \
    X(CURLOPT_PASSWORD, SHIM_CRED_PASSWORD, -1, 0)                              \
    X(CURLOPT_COOKIE, SHIM_CRED_COOKIE, -1, 0)                                  \
    X(CURLOPT_PROXYUSERPWD, SHIM_CRED_PROXY_USER, SHIM_CRED_PROXY_PASSWORD, 0)  \
    X(CURLOPT_PROXYUSERNAME, SHIM_CRED_PROXY_USER, -1, 0)                       \
    X(CURLOPT_PROXYPASSWORD, SHIM_CRED_PROXY_PASSWORD, -1, 0)                   \
    X(CURLOPT_SSLCERT, SHIM_CRED_SSLCERT, -1, 0)                                \
    X(CURLOPT_SSLCERT_BLOB, SHIM_CRED_SSLCERT, -1, 1)                           \
    X(CURLOPT_SSLKEY, SHIM_CRED_SSLKEY, -1, 0)                                  \
    X(CURLOPT_SSLKEY_BLOB, SHIM_CRED_SSLKEY, -1, 1)                             \
    X(CURLOPT_KEYPASSWD, SHIM_CRED_KEYPASSWD, -1, 0)                            \
    X(CURLOPT_TLSAUTH_USERNAME, SHIM_CRED_TLSAUTH_USER, -1, 0)                  \
    X(CURLOPT_TLSAUTH_PASSWORD, SHIM_CRED_TLSAUTH_PASSWORD, -1, 0)

/* 1 when opt carries a credential (one of SHIM_CRED_OPTIONS), else 0. */
int shim_identity_is_option(CURLoption opt);
/* What setting option opt to arg (a string, or a struct curl_blob * for
 * the _BLOB options; NULL clears) changes in a shim_creds: the digests of
 * at most two slots (USERPWD sets user and password). Computed apart from
 * applying it, so handles.c hashes outside its table lock. */
struct shim_cred_update {
    int n;
    int slot[2];
    char d[2][SHIM_IDENTITY_SIZE];
};
void shim_identity_digest(struct shim_cred_update *u, CURLoption opt, const void *arg);
void shim_identity_apply(struct shim_creds *c, const struct shim_cred_update *u);
/* Both at once: records opt set to arg into c as digests. */
void shim_identity_option(struct shim_creds *c, CURLoption opt, const void *arg);

/* 1 when a header or query parameter called name (n bytes, any case) looks
 * like it carries a credential. */
int shim_identity_credential_name(const char *name, size_t n);

/* The identity of a request: headers (the program's list, may be NULL),
 * url (may be NULL) and the recorded options (may be NULL). Same
 * credentials in any order give the same identity; one recognised API key
 * alone gives shim_identity_key(key). Linear in the input. */
void shim_identity_of(const struct curl_slist *headers, const char *url,
                      const struct shim_creds *opts, char out[SHIM_IDENTITY_SIZE]);

#endif
