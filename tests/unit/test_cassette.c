/* Unit tests: cassette.c, record/replay files (cassette.h): the key and
 * its occurrence numbers, save then load, what never reaches the file,
 * modes and atomic replacement, and the errors for files that are not
 * cassettes. Each test works in its own directory under TMPDIR, removed
 * afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json.h"
#include "scratch.h"
#include "store/cassette.h"

static char g_dir[512]; /* this test's directory */
static char g_rec[600]; /* g_dir/rec: the cassette directory, made by save */

static int setup(void **state)
{
    (void)state;
    if (scratch_make(g_dir, sizeof(g_dir), "cassette") < 0)
        return -1;
    snprintf(g_rec, sizeof(g_rec), "%s/rec", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return scratch_remove(g_dir);
}

/* A reply as the network transport fills it. */
static void reply(struct shim_http_reply *r, long status, const char *head, const char *body)
{
    shim_http_reply_init(r, 1 << 16, 1 << 20);
    r->status = status;
    r->http_version = CURL_HTTP_VERSION_2_0;
    snprintf(r->content_type, sizeof(r->content_type), "application/json");
    assert_int_equal(shim_buf_adds(&r->head, head), 0);
    assert_int_equal(shim_buf_adds(&r->body, body), 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

static void cassette_path(char *out, size_t n, const char *key, int occ)
{
    if (occ > 1)
        snprintf(out, n, "%s/%s-%d.json", g_rec, key, occ);
    else
        snprintf(out, n, "%s/%s.json", g_rec, key);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* ---- key and occurrences ---- */

static void key_is_sha256_of_post_path_and_body(void **state)
{
    const char *body = "{\"model\":\"m\"}";
    char k[65], k2[65];
    int occ;
    (void)state;

    /* hashlib.sha256(b'POST /v1/responses\n{"model":"m"}') */
    shim_cassette_key("http://127.0.0.1:8080/v1/responses", body, strlen(body), k, &occ);
    assert_string_equal(k, "e3c77768675a9ee6d1cab463604c661ddf25c507039639eacc9797736a3b298e");
    /* host, port, scheme, userinfo, query and fragment are not part of it */
    shim_cassette_key("https://user:pw@api.example/v1/responses?api-version=2&key=K#frag",
                      body, strlen(body), k2, &occ);
    assert_string_equal(k2, k);
    /* only len bytes of the body count */
    shim_cassette_key("http://h/v1/responses", "{\"model\":\"m\"}TRAILING", strlen(body), k2,
                      &occ);
    assert_string_equal(k2, k);
    /* another path or another body is another key */
    shim_cassette_key("http://h/v1/chat/completions", body, strlen(body), k2, &occ);
    assert_string_not_equal(k2, k);
    shim_cassette_key("http://h/v1/responses", "{\"model\":\"n\"}", strlen(body), k2, &occ);
    assert_string_not_equal(k2, k);
    /* no path at all is "/": hashlib.sha256(b'POST /\n') */
    shim_cassette_key("http://h", "", 0, k2, &occ);
    assert_string_equal(k2, "8c25aebf12d20b4f0dfe1f686d77615c0d84104484d15f07c1c7fd046d3075b3");
    /* the path libcurl sends, also for a URL without a scheme whose query
     * holds another URL */
    shim_cassette_key("h:8080/v1/responses?next=http://x/y", body, strlen(body), k2, &occ);
    assert_string_equal(k2, k);
}

static void occurrences_count_per_key(void **state)
{
    const char *a = "{\"occ\":\"a\"}", *b = "{\"occ\":\"b\"}";
    char ka[65], kb[65], k[65];
    int occ;
    (void)state;

    shim_cassette_key("http://h/v1/responses", a, strlen(a), ka, &occ);
    assert_int_equal(occ, 1);
    shim_cassette_key("http://h/v1/responses", a, strlen(a), k, &occ);
    assert_int_equal(occ, 2);
    assert_string_equal(k, ka);
    /* another key starts at 1 and does not disturb the first */
    shim_cassette_key("http://h/v1/responses", b, strlen(b), kb, &occ);
    assert_int_equal(occ, 1);
    /* the same request to another host is the same exchange */
    shim_cassette_key("http://other:1/v1/responses", a, strlen(a), k, &occ);
    assert_int_equal(occ, 3);
    shim_cassette_key("http://h/v1/responses", b, strlen(b), k, &occ);
    assert_int_equal(occ, 2);
}

enum { KEY_THREADS = 8, KEY_ROUNDS = 100 };

static int g_seen[KEY_THREADS * KEY_ROUNDS + 1];
static pthread_mutex_t g_seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void *key_worker(void *arg)
{
    const char *body = "{\"threads\":true}";
    char k[65];
    int i, occ;

    (void)arg;
    for (i = 0; i < KEY_ROUNDS; i++) {
        shim_cassette_key("http://h/v1/responses", body, strlen(body), k, &occ);
        pthread_mutex_lock(&g_seen_lock);
        if (occ >= 1 && occ <= KEY_THREADS * KEY_ROUNDS)
            g_seen[occ]++;
        pthread_mutex_unlock(&g_seen_lock);
    }
    return NULL;
}

/* Threads sending the same request each get their own number. */
static void occurrences_are_thread_safe(void **state)
{
    pthread_t t[KEY_THREADS];
    int i;
    (void)state;

    for (i = 0; i < KEY_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, key_worker, NULL), 0);
    for (i = 0; i < KEY_THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    for (i = 1; i <= KEY_THREADS * KEY_ROUNDS; i++)
        assert_int_equal(g_seen[i], 1);
}

/* ---- save and load ---- */

static void save_then_load_round_trips(void **state)
{
    const char *req = "{\"model\":\"m\",\"input\":\"round trip\"}";
    /* control characters, escapes and UTF-8 survive the JSON file */
    const char *body = "{\"id\":\"resp_1\",\"text\":\"tab\\t \\\"q\\\" \\\\ \u00e9\u2603\"}\n\x01";
    struct shim_http_reply r, got;
    char key[65], path[1024], *text;
    cJSON *doc;
    int occ;
    (void)state;

    reply(&r, 201, "HTTP/2 201\r\ncontent-type: application/json\r\nx-request-id: req_42\r\n"
                   "openai-processing-ms: 17\r\n\r\n", body);
    shim_cassette_key("http://h/v1/responses", req, strlen(req), key, &occ);
    assert_int_equal(shim_cassette_save(g_rec, key, 1, "http://h/v1/responses", req,
                                        strlen(req), &r), 0);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), 0);
    assert_int_equal(got.status, 201);
    assert_int_equal(got.http_version, CURL_HTTP_VERSION_2_0);
    assert_string_equal(got.content_type, "application/json");
    assert_string_equal(got.head.data, r.head.data);
    assert_int_equal(got.body.len, strlen(body));
    assert_string_equal(got.body.data, body);
    shim_http_reply_free(&got);

    /* the file names its key and holds the request body as JSON */
    cassette_path(path, sizeof(path), key, 1);
    text = slurp(path);
    doc = shim_json_parse(text, strlen(text));
    assert_non_null(doc);
    assert_string_equal(shim_json_str(doc, "key"), key);
    assert_string_equal(shim_json_str(cJSON_GetObjectItem(doc, "request"), "path"),
                        "/v1/responses");
    assert_string_equal(
        shim_json_str(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "request"), "body"), "input"),
        "round trip");
    cJSON_Delete(doc);
    free(text);
    shim_http_reply_free(&r);
}

static void occurrences_have_their_own_files(void **state)
{
    const char *req = "{\"same\":\"request\"}";
    struct shim_http_reply r1, r2, got;
    char key[65], path[1024];
    struct stat st;
    int occ;
    (void)state;

    shim_cassette_key("http://h/v1/responses", req, strlen(req), key, &occ);
    reply(&r1, 200, "HTTP/1.1 200 OK\r\n\r\n", "{\"turn\":1}");
    reply(&r2, 200, "HTTP/1.1 200 OK\r\n\r\n", "{\"turn\":2}");
    assert_int_equal(shim_cassette_save(g_rec, key, 1, "http://h/v1/responses", req,
                                        strlen(req), &r1), 0);
    assert_int_equal(shim_cassette_save(g_rec, key, 2, "http://h/v1/responses", req,
                                        strlen(req), &r2), 0);
    cassette_path(path, sizeof(path), key, 1);
    assert_int_equal(stat(path, &st), 0);
    cassette_path(path, sizeof(path), key, 2); /* <key>-2.json */
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(count_entries(g_rec), 2);

    assert_int_equal(shim_cassette_load(g_rec, key, 2, &got, 1 << 20), 0);
    assert_string_equal(got.body.data, "{\"turn\":2}");
    shim_http_reply_free(&got);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), 0);
    assert_string_equal(got.body.data, "{\"turn\":1}");
    shim_http_reply_free(&got);
    assert_int_equal(shim_cassette_load(g_rec, key, 3, &got, 1 << 20), -ENOENT);
    shim_http_reply_free(&r1);
    shim_http_reply_free(&r2);
}

/* Request headers never reach the file (save is not even given them);
 * the URL's query and userinfo, where keys may live, neither; response
 * headers that could carry credentials are dropped. */
static void credentials_are_never_written(void **state)
{
    const char *req = "{\"creds\":1}";
    struct shim_http_reply r, got;
    char key[65], path[1024], *text;
    int occ;
    (void)state;

    reply(&r, 200,
          "HTTP/1.1 200 OK\r\n"
          "Set-Cookie: __cf_bm=SECRET-COOKIE; path=/\r\n"
          "x-request-id: req_7\r\n"
          "Authorization: Bearer SECRET-AUTH\r\n"
          "Proxy-Authorization: Basic SECRET-PROXY\r\n"
          "X-Session-Token: SECRET-TOKEN\r\n"
          "x-api-key: SECRET-KEY\r\n"
          "Ocp-Apim-Subscription-Key: SECRET-APIM\r\n"
          "Content-Type: application/json\r\n"
          "\r\n",
          "{}");
    shim_cassette_key("http://h/v1/responses", req, strlen(req), key, &occ);
    assert_int_equal(shim_cassette_save(g_rec, key, 1,
                                        "https://bob:SECRET-PW@h/v1/responses?api-key=SECRET-Q",
                                        req, strlen(req), &r), 0);
    cassette_path(path, sizeof(path), key, 1);
    text = slurp(path);
    assert_null(strstr(text, "SECRET"));
    assert_non_null(strstr(text, "x-request-id: req_7"));
    assert_non_null(strstr(text, "Content-Type: application/json"));
    free(text);

    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), 0);
    assert_string_equal(got.head.data, "HTTP/1.1 200 OK\r\nx-request-id: req_7\r\n"
                                       "Content-Type: application/json\r\n\r\n");
    shim_http_reply_free(&got);
    shim_http_reply_free(&r);
}

static void files_are_private_and_replaced_atomically(void **state)
{
    const char *req = "{\"modes\":1}";
    struct shim_http_reply r1, r2, got;
    char key[65], path[1024], victim[1024], *text;
    struct stat st;
    mode_t old;
    int occ, rc;
    (void)state;

    shim_cassette_key("http://h/v1/responses", req, strlen(req), key, &occ);
    reply(&r1, 200, "HTTP/1.1 200 OK\r\n\r\n", "{\"v\":1}");
    reply(&r2, 200, "HTTP/1.1 200 OK\r\n\r\n", "{\"v\":2}");
    old = umask(0); /* even a permissive umask gives 0700 / 0600 */
    rc = shim_cassette_save(g_rec, key, 1, "http://h/v1/responses", req, strlen(req), &r1);
    umask(old);
    assert_int_equal(rc, 0);
    assert_int_equal(lstat(g_rec, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    cassette_path(path, sizeof(path), key, 1);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);

    /* a second save replaces the file whole; a link planted at its name
     * is replaced, never written through; no temporary file is left */
    snprintf(victim, sizeof(victim), "%s/victim", g_dir);
    spit(victim, "untouched");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(victim, path), 0);
    assert_int_equal(shim_cassette_save(g_rec, key, 1, "http://h/v1/responses", req,
                                        strlen(req), &r2), 0);
    text = slurp(victim);
    assert_string_equal(text, "untouched");
    free(text);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(count_entries(g_rec), 1);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), 0);
    assert_string_equal(got.body.data, "{\"v\":2}");
    shim_http_reply_free(&got);
    shim_http_reply_free(&r1);
    shim_http_reply_free(&r2);
}

static void save_fails_cleanly(void **state)
{
    struct shim_http_reply r;
    char nowhere[700];
    (void)state;

    reply(&r, 200, "HTTP/1.1 200 OK\r\n\r\n", "{}");
    /* the parent of the directory does not exist */
    snprintf(nowhere, sizeof(nowhere), "%s/missing/rec", g_dir);
    assert_int_equal(shim_cassette_save(nowhere, "00", 1, "http://h/v1/responses", "{}", 2, &r),
                     -ENOENT);
    shim_http_reply_free(&r);
}

/* ---- files that are not cassettes ---- */

static void bad_files_are_documented_errors(void **state)
{
    struct shim_http_reply got;
    char path[1024];
    const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    int fd;
    (void)state;

    memset(&got, 0, sizeof(got));
    /* nothing recorded: no directory, then no file */
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -ENOENT);
    assert_int_equal(mkdir(g_rec, 0700), 0);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -ENOENT);

    cassette_path(path, sizeof(path), key, 1);
    spit(path, "");
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    spit(path, "{\"response\":{\"status\":200,\"body\":\"{}\""); /* cut short */
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    spit(path, "not json at all");
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    spit(path, "{\"response\":{\"status\":200,\"headers\":[]}}"); /* no body */
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    spit(path, "{\"response\":{\"status\":200,\"body\":{\"not\":\"a string\"}}}");
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    spit(path, "[1,2,3]");
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);

    /* a directory in its place */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1 << 20), -EPROTO);
    assert_int_equal(rmdir(path), 0);

    /* oversized (a sparse file: cheap): refused before reading it */
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)(257u << 20)), 0);
    close(fd);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, (size_t)1 << 30), -EPROTO);
}

/* A recorded body larger than CODESHIM_MAX_RESPONSE is not replayed. */
static void max_response_is_honoured(void **state)
{
    static char body[1001];
    const char *req = "{\"big\":1}";
    struct shim_http_reply r, got;
    char key[65];
    int occ;
    (void)state;

    memset(body, 'b', 1000);
    reply(&r, 200, "HTTP/1.1 200 OK\r\n\r\n", body);
    shim_cassette_key("http://h/v1/responses", req, strlen(req), key, &occ);
    assert_int_equal(shim_cassette_save(g_rec, key, 1, "http://h/v1/responses", req,
                                        strlen(req), &r), 0);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 999), -E2BIG);
    assert_int_equal(shim_cassette_load(g_rec, key, 1, &got, 1000), 0);
    assert_int_equal(got.body.len, 1000);
    assert_memory_equal(got.body.data, body, 1000);
    assert_int_equal(got.body.cap, 1000);
    shim_http_reply_free(&got);
    shim_http_reply_free(&r);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(key_is_sha256_of_post_path_and_body),
        T(occurrences_count_per_key),
        T(occurrences_are_thread_safe),
        T(save_then_load_round_trips),
        T(occurrences_have_their_own_files),
        T(credentials_are_never_written),
        T(files_are_private_and_replaced_atomically),
        T(save_fails_cleanly),
        T(bad_files_are_documented_errors),
        T(max_response_is_honoured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
