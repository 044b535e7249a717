/* multipart.h - multipart/form-data bodies (RFC 7578), as programs upload
 * files to the Containers API (curl -F file=@data.csv). Pure: parts point
 * into the body; nothing is copied. Linear in the body; bounded parts and
 * header sizes; anything malformed is -EINVAL, never a guess. */
#ifndef SHIM_MULTIPART_H
#define SHIM_MULTIPART_H

#include <stddef.h>

#define SHIM_MULTIPART_BOUNDARY_MAX 70 /* RFC 2046 */
#define SHIM_MULTIPART_HEAD_MAX 8192   /* one part's headers */

struct shim_part {
    char name[128];      /* the form field ("file") */
    char filename[1024]; /* "" when the part is not a file */
    int has_filename;
    char content_type[128];
    const char *data;
    size_t len;
};

/* The boundary of a "multipart/form-data; boundary=..." content type, into
 * out (SHIM_MULTIPART_BOUNDARY_MAX + 1 bytes). 0 or -EINVAL. */
int shim_multipart_boundary(const char *content_type, char *out);
/* Splits body into at most max parts (-E2BIG beyond). 0 with *n set, or
 * -EINVAL. */
int shim_multipart_parse(const char *body, size_t len, const char *boundary,
                         struct shim_part *parts, size_t max, size_t *n);

#endif
