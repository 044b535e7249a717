/* upload.h - the bytes of a libcurl MIME post (CURLOPT_MIMEPOST: curl -F,
 * curl_mime_*), whose body libcurl keeps opaque: libcurl itself
 * serialises it, on a duplicate of the program's handle, into a
 * socketpair that a thread of codeshim's reads. Nothing reaches the
 * network; the program's handle is not changed. */
#ifndef SHIM_UPLOAD_H
#define SHIM_UPLOAD_H

#include "system/real.h"

#include <curl/curl.h>
#include <stddef.h>

struct shim_upload {
    char *body; /* the request body, chunked encoding undone */
    size_t len;
    char content_type[256]; /* with libcurl's boundary */
};

/* 0 with *out filled (shim_upload_free), -EFBIG past max bytes, -ENOTSUP
 * when libcurl cannot duplicate the handle, or -errno. */
int shim_upload_capture(const struct shim_curl_api *api, CURL *h, size_t max,
                        struct shim_upload *out);
void shim_upload_free(struct shim_upload *u);

#endif
