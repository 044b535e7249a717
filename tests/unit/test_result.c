/* Unit tests: sandbox/result.c, the one way an image joins a result
 * (the local backend's worker answer, e2b's result lines and the session
 * channel all add theirs through it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "api/result.h"

static void images_join_a_result(void **state)
{
    struct shim_exec_result r;
    int i;
    (void)state;

    memset(&r, 0, sizeof(r));
    assert_int_equal(shim_exec_image_add(&r.images, &r.nimages, "image/png", "iVBORw0KGgo="), 0);
    assert_int_equal(r.nimages, 1);
    assert_string_equal(r.images[0].mime, "image/png");
    assert_string_equal(r.images[0].base64, "iVBORw0KGgo=");
    /* nothing to add: no data, empty, not base64 */
    assert_int_equal(shim_exec_image_add(&r.images, &r.nimages, "image/png", NULL), 0);
    assert_int_equal(shim_exec_image_add(&r.images, &r.nimages, "image/png", ""), 0);
    assert_int_equal(shim_exec_image_add(&r.images, &r.nimages, "image/png", "not base64!"), 0);
    assert_int_equal(r.nimages, 1);
    /* at most SHIM_RESULT_MAX_IMAGES, the rest dropped */
    for (i = 0; i < SHIM_RESULT_MAX_IMAGES + 3; i++)
        assert_int_equal(shim_exec_image_add(&r.images, &r.nimages, "image/jpeg", "/9j/"), 0);
    assert_int_equal(r.nimages, SHIM_RESULT_MAX_IMAGES);
    assert_string_equal(r.images[SHIM_RESULT_MAX_IMAGES - 1].mime, "image/jpeg");
    shim_exec_result_free(&r);
    assert_null(r.images);
    assert_int_equal(r.nimages, 0);
    shim_exec_result_free(&r); /* twice is harmless */
}

static void no_images_no_array(void **state)
{
    struct shim_exec_image *im = NULL;
    size_t n = 0;
    (void)state;

    assert_int_equal(shim_exec_image_add(&im, &n, "image/png", "%%%"), 0);
    assert_null(im);
    shim_exec_images_free(im, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(images_join_a_result),
        cmocka_unit_test(no_images_no_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
