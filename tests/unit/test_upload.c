/* Unit tests: upload.c, a libcurl MIME post read back as the bytes
 * libcurl sends (the process's own libcurl serialises it into upload.c's
 * abstract socket; nothing reaches the network): the multipart body with
 * its boundary, one sent chunked (a part of unknown size), the cap, and
 * the program's handle left as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/upload.h"

static const struct shim_curl_api api = {
    .flavor = SHIM_FLAVOR_OPENSSL,
    .easy_init = curl_easy_init,
    .easy_setopt = curl_easy_setopt,
    .easy_perform = curl_easy_perform,
    .easy_cleanup = curl_easy_cleanup,
    .easy_duphandle = curl_easy_duphandle,
    .slist_append = curl_slist_append,
    .slist_free_all = curl_slist_free_all,
};

static int has(const struct shim_upload *u, const char *s)
{
    return memmem(u->body, u->len, s, strlen(s)) != NULL;
}

/* A handle with a two-part MIME post: a field and a file-like part. */
static CURL *form(curl_mime **mime, const char *file_data, size_t file_len)
{
    CURL *h = curl_easy_init();
    curl_mimepart *p;

    assert_non_null(h);
    *mime = curl_mime_init(h);
    p = curl_mime_addpart(*mime);
    curl_mime_name(p, "purpose");
    curl_mime_data(p, "assistants", CURL_ZERO_TERMINATED);
    p = curl_mime_addpart(*mime);
    curl_mime_name(p, "file");
    curl_mime_filename(p, "data.csv");
    curl_mime_type(p, "text/csv");
    curl_mime_data(p, file_data, file_len);
    curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:9/v1/files");
    curl_easy_setopt(h, CURLOPT_MIMEPOST, *mime);
    return h;
}

static void mime_post_read_back_with_its_boundary(void **state)
{
    static const char csv[] = "a,b\r\n1,2\r\n\0binary\xff";
    struct shim_upload u;
    curl_mime *mime;
    CURL *h = form(&mime, csv, sizeof(csv) - 1);
    const char *b;
    char delim[300], last[300];
    (void)state;

    assert_int_equal(shim_upload_capture(&api, h, 1 << 20, &u), 0);
    b = strstr(u.content_type, "boundary=");
    assert_true(!strncmp(u.content_type, "multipart/form-data;", 20));
    assert_non_null(b);
    snprintf(delim, sizeof(delim), "--%s\r\n", b + 9);
    snprintf(last, sizeof(last), "\r\n--%s--\r\n", b + 9);
    assert_true(u.len > strlen(delim) + strlen(last));
    assert_memory_equal(u.body, delim, strlen(delim));
    assert_memory_equal(u.body + u.len - strlen(last), last, strlen(last));
    assert_true(has(&u, "Content-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n"));
    assert_true(has(&u, "Content-Disposition: form-data; name=\"file\"; filename=\"data.csv\""));
    assert_true(has(&u, "Content-Type: text/csv\r\n"));
    /* the file's bytes as given, NUL and 0xff included */
    assert_non_null(memmem(u.body, u.len, csv, sizeof(csv) - 1));
    shim_upload_free(&u);
    assert_null(u.body);
    curl_easy_cleanup(h);
    curl_mime_free(mime);
}

struct src {
    const char *data;
    size_t len, at;
};

static size_t read_src(char *buf, size_t size, size_t n, void *arg)
{
    struct src *s = arg;
    size_t k = s->len - s->at < size * n ? s->len - s->at : size * n;

    if (k > 7)
        k = 7; /* small reads: several chunks */
    memcpy(buf, s->data + s->at, k);
    s->at += k;
    return k;
}

static int seek_src(void *arg, curl_off_t off, int origin)
{
    struct src *s = arg;

    if (origin != SEEK_SET || off < 0 || (size_t)off > s->len)
        return CURL_SEEKFUNC_FAIL;
    s->at = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* A part of unknown size makes libcurl send the post chunked: read back
 * with the chunked encoding undone. */
static void chunked_post_read_back_dechunked(void **state)
{
    static const char text[] = "streamed part, read seven bytes at a time\n";
    struct src s = {text, sizeof(text) - 1, 0};
    struct shim_upload u;
    curl_mimepart *p;
    curl_mime *mime;
    CURL *h = curl_easy_init();
    (void)state;

    mime = curl_mime_init(h);
    p = curl_mime_addpart(mime);
    curl_mime_name(p, "file");
    curl_mime_filename(p, "s.txt");
    curl_mime_data_cb(p, -1, read_src, seek_src, NULL, &s);
    curl_easy_setopt(h, CURLOPT_URL, "http://127.0.0.1:9/v1/files");
    curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
    assert_int_equal(shim_upload_capture(&api, h, 1 << 20, &u), 0);
    assert_true(has(&u, "\r\n\r\nstreamed part, read seven bytes at a time\n\r\n--"));
    /* no chunk-size line left in the body */
    assert_false(has(&u, "\r\n7\r\n"));
    shim_upload_free(&u);
    curl_easy_cleanup(h);
    curl_mime_free(mime);
}

static void larger_than_the_cap_is_efbig(void **state)
{
    char big[4096];
    struct shim_upload u;
    curl_mime *mime;
    CURL *h;
    (void)state;

    memset(big, 'x', sizeof(big));
    h = form(&mime, big, sizeof(big));
    assert_int_equal(shim_upload_capture(&api, h, 1024, &u), -EFBIG);
    assert_null(u.body);
    assert_int_equal(u.len, 0);
    /* just under the whole body's size: still too large; well over: read */
    assert_int_equal(shim_upload_capture(&api, h, sizeof(big), &u), -EFBIG);
    assert_int_equal(shim_upload_capture(&api, h, 2 * sizeof(big), &u), 0);
    assert_true(u.len > sizeof(big));
    shim_upload_free(&u);
    curl_easy_cleanup(h);
    curl_mime_free(mime);
}

/* The capture runs on a duplicate: the program's handle still sends to
 * its own URL afterwards (here: a closed port, so it fails to connect,
 * as it would have before). */
static void program_handle_is_not_changed(void **state)
{
    struct shim_upload u;
    curl_mime *mime;
    CURL *h = form(&mime, "x", 1);
    char *url = NULL;
    (void)state;

    assert_int_equal(shim_upload_capture(&api, h, 1 << 20, &u), 0);
    shim_upload_free(&u);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    assert_int_equal(curl_easy_perform(h), CURLE_COULDNT_CONNECT);
    assert_int_equal(curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url), CURLE_OK);
    assert_string_equal(url, "http://127.0.0.1:9/v1/files");
    curl_easy_cleanup(h);
    curl_mime_free(mime);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mime_post_read_back_with_its_boundary),
        cmocka_unit_test(chunked_post_read_back_dechunked),
        cmocka_unit_test(larger_than_the_cap_is_efbig),
        cmocka_unit_test(program_handle_is_not_changed),
    };
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
