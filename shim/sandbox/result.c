/* result.c - see result.h. */
#include "result.h"

#include <stdlib.h>
#include <string.h>

void shim_exec_result_free(struct shim_exec_result *r)
{
    size_t i;

    if (!r)
        return;
    free(r->logs);
    if (r->images)
        for (i = 0; i < r->nimages; i++) {
            free(r->images[i].mime);
            free(r->images[i].base64);
        }
    free(r->images);
    if (r->files)
        for (i = 0; i < r->nfiles; i++)
            free(r->files[i]);
    free(r->files);
    memset(r, 0, sizeof(*r));
}
