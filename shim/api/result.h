/* result.h - what one execution gave: the value the sandbox backends
 * produce, the session channel carries (proto.c) and the loop and the
 * adapters read (conv.h). Below all of them, so none depends on the
 * sandbox to hold a result. Fields are owned by the result and released
 * by shim_exec_result_free. */
#ifndef SHIM_RESULT_H
#define SHIM_RESULT_H

#include <stddef.h>

/* What one result holds at most: worker.py's own limits, which every
 * reader of a result (sandbox/local_*.c, proto.c) also enforces. */
#define SHIM_RESULT_MAX_IMAGES 16
#define SHIM_RESULT_MAX_FILES 1000

enum shim_exec_status {
    SHIM_EXEC_OK = 0,      /* ran to the end */
    SHIM_EXEC_ERROR = 1,   /* the code raised; logs hold the traceback */
    SHIM_EXEC_TIMEOUT = 2, /* wall-clock limit hit; interpreter restarted */
    SHIM_EXEC_FAILED = 3,  /* the sandbox itself failed; logs say why */
};

struct shim_exec_image {
    char *mime;   /* "image/png" */
    char *base64; /* payload, no data: prefix */
};

struct shim_exec_result {
    enum shim_exec_status status;
    char *logs; /* NUL-terminated text for the model and outputs[].logs,
                   already capped (with a visible truncation note) */
    size_t logs_len;
    struct shim_exec_image *images;
    size_t nimages;
    char **files; /* names of files in the working directory after the run
                     (relative to it, sorted; regular files only) */
    size_t nfiles;
    int files_changed; /* the listing (names, sizes or times) differs from
                          the one after the previous execution */
    double seconds; /* wall-clock duration of the execution */
    /* Remote backends (e2b; remote=1): seconds this execution spent
     * creating the sandbox (0: none) and in the execute call itself. */
    int remote;
    double create_seconds, remote_seconds;
};

void shim_exec_result_free(struct shim_exec_result *r);
/* The one way an image joins a result's (or a parser's) list *images of
 * *n: mime and data (base64, no data: prefix) copied into it, the array
 * made on first use with room for SHIM_RESULT_MAX_IMAGES. 0, also when
 * data is empty or not base64 or the list is full (nothing added);
 * -ENOMEM (nothing added). */
int shim_exec_image_add(struct shim_exec_image **images, size_t *n, const char *mime,
                        const char *data);
/* Frees the n images of images and the array. */
void shim_exec_images_free(struct shim_exec_image *images, size_t n);

#endif
