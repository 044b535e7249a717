/* result.c - see result.h. */
#include "api/result.h"

#include "base/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void shim_exec_images_free(struct shim_exec_image *images, size_t n)
{
    size_t i;

    for (i = 0; images && i < n; i++) {
        free(images[i].mime);
        free(images[i].base64);
    }
    free(images);
}

int shim_exec_image_add(struct shim_exec_image **images, size_t *n, const char *mime,
                        const char *data)
{
    struct shim_exec_image *img;

    if (!data || !*data || !shim_text_is_base64(data) || *n >= SHIM_RESULT_MAX_IMAGES)
        return 0;
    if (!*images && !(*images = calloc(SHIM_RESULT_MAX_IMAGES, sizeof(**images))))
        return -ENOMEM;
    img = &(*images)[*n];
    img->mime = strdup(mime);
    img->base64 = strdup(data);
    if (!img->mime || !img->base64) {
        free(img->mime);
        free(img->base64);
        img->mime = img->base64 = NULL;
        return -ENOMEM;
    }
    (*n)++;
    return 0;
}

void shim_exec_result_free(struct shim_exec_result *r)
{
    size_t i;

    if (!r)
        return;
    free(r->logs);
    shim_exec_images_free(r->images, r->nimages);
    if (r->files)
        for (i = 0; i < r->nfiles; i++)
            free(r->files[i]);
    free(r->files);
    memset(r, 0, sizeof(*r));
}
