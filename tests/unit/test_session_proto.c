/* Unit tests: session naming and settings fingerprints (session.c), the
 * runtime-dir and sessiond defaults (config.c), and the session socket
 * protocol (proto.c), including forged, oversized and hostile frames and
 * results cut to fit a frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/frame.h"
#include "api/identity.h"
#include "session/proto.h"
#include "session/session.h"
#include "store/store.h"
#include "system/config.h"

/* ---- configuration from a list of "NAME=value" ---- */

static const char *list_env(const char *name, void *ctx)
{
    const char *const *e = ctx;
    size_t n = strlen(name);

    for (; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static void parse(struct shim_config *c, const char *const *env)
{
    shim_config_parse(c, list_env, NULL, (void *)env);
}

static void identities(void **state)
{
    char a[65], b[65], c[65], n1[65], n2[65], n3[65];
    (void)state;

    shim_identity_key("sk-one", a);
    shim_identity_key("sk-two", b);
    shim_identity_key(NULL, c);
    assert_int_equal(strlen(a), 32);
    assert_string_not_equal(a, b);
    assert_string_equal(c, "anonymous"); /* not hex: never a key's hash */
    shim_identity_key("", c);
    assert_string_equal(c, "anonymous");
    assert_null(strstr(a, "one"));
    shim_identity_key("sk-one", b);
    assert_string_equal(a, b); /* stable across runs */
    shim_session_name(a, "s1", "f00d", n1);
    shim_session_name(a, "s2", "f00d", n2);
    shim_identity_key("sk-two", b);
    shim_session_name(b, "s1", "f00d", n3);
    assert_string_not_equal(n1, n2);
    assert_string_not_equal(n1, n3); /* same id, other key: other session */
    assert_int_equal(strlen(n1), 32);
    shim_session_name(a, "s1", "beef", n2);
    assert_string_not_equal(n1, n2); /* same key and id, other settings */
    shim_session_name(a, "s1", "f00d", n2);
    assert_string_equal(n1, n2);
}

/* Every setting that decides what the sandbox is changes the fingerprint;
 * the others do not. */
static void settings_fingerprint(void **state)
{
    static const char *const sandbox_vars[] = {
        "CODESHIM_UNSAFE_NO_ISOLATION=1", "CODESHIM_PYTHON=/usr/local/bin/python3",
        "CODESHIM_BWRAP=/opt/bwrap", "CODESHIM_MEMORY=512M", "CODESHIM_PROCS=64",
        "CODESHIM_DISK=2G", "CODESHIM_FILE_SIZE=64M", "CODESHIM_CPU_TIME=60",
        "CODESHIM_EXEC_TIMEOUT=5", "CODESHIM_OUTPUT_CAP=4096", "CODESHIM_INODES=1000",
        "CODESHIM_OPEN_FILES=100",
    };
    static const char *const other_vars[] = {
        "CODESHIM_SESSION_TTL=5", "CODESHIM_SESSION_CAP=3", "CODESHIM_LOG=debug",
        "CODESHIM_MAX_LOOPS=3",
    };
    const char *none[] = {NULL}, *one[2] = {NULL, NULL};
    struct shim_config c;
    char base[65], fp[65], seen[12][65];
    size_t i, j;
    (void)state;

    parse(&c, none);
    shim_session_settings(&c, base);
    assert_int_equal(strlen(base), 32);
    shim_session_settings(&c, fp);
    assert_string_equal(base, fp);
    for (i = 0; i < sizeof(sandbox_vars) / sizeof(sandbox_vars[0]); i++) {
        one[0] = sandbox_vars[i];
        parse(&c, one);
        shim_session_settings(&c, seen[i]);
        assert_string_not_equal(seen[i], base);
        for (j = 0; j < i; j++)
            assert_string_not_equal(seen[i], seen[j]);
    }
    for (i = 0; i < sizeof(other_vars) / sizeof(other_vars[0]); i++) {
        one[0] = other_vars[i];
        parse(&c, one);
        shim_session_settings(&c, fp);
        assert_string_equal(fp, base);
    }
    parse(&c, none);
    snprintf(c.sandbox, sizeof(c.sandbox), "e2b"); /* another backend */
    shim_session_settings(&c, fp);
    assert_string_not_equal(fp, base);
}

/* Defaults no other user can take (settings.c): /run/codeshim for root;
 * else $XDG_RUNTIME_DIR/codeshim only when it is the user's own 0700
 * directory, else the user's cache directory; never TMPDIR. */
static void runtime_dir_and_sessiond_defaults(void **state)
{
    char own[64] = "/tmp/codeshim-xdg-XXXXXX", xdg_own[96], want[160];
    const char *tmp[] = {"TMPDIR=/var/tmp/me", "HOME=/home/me", NULL};
    const char *xdg[] = {"TMPDIR=/var/tmp/me", "HOME=/home/me", "XDG_RUNTIME_DIR=/", NULL};
    const char *cache[] = {"HOME=/home/me", "XDG_CACHE_HOME=/var/cache/me", NULL};
    const char *mine_xdg[] = {"HOME=/home/me", xdg_own, NULL};
    const char *mine[] = {"CODESHIM_RUNTIME_DIR=/srv/rt", "XDG_RUNTIME_DIR=/run/user/7", NULL};
    const char *sd_rel[] = {"CODESHIM_SESSIOND=build/codeshim-sessiond", NULL};
    const char *sd_abs[] = {"CODESHIM_SESSIOND=/opt/codeshim-sessiond", NULL};
    int root = geteuid() == 0;
    struct shim_config c;
    (void)state;

    assert_non_null(mkdtemp(own)); /* 0700, this user's */
    snprintf(xdg_own, sizeof(xdg_own), "XDG_RUNTIME_DIR=%s", own);
    parse(&c, tmp);
    assert_string_equal(c.runtime_dir, root ? "/run/codeshim" : "/home/me/.cache/codeshim/run");
    assert_true(c.runtime_dir_default);
    parse(&c, xdg); /* "/" is not this user's own 0700 directory */
    assert_string_equal(c.runtime_dir, root ? "/run/codeshim" : "/home/me/.cache/codeshim/run");
    parse(&c, cache);
    assert_string_equal(c.runtime_dir, root ? "/run/codeshim" : "/var/cache/me/codeshim/run");
    parse(&c, mine_xdg);
    snprintf(want, sizeof(want), "%s/codeshim", own);
    assert_string_equal(c.runtime_dir, root ? "/run/codeshim" : want);
    assert_true(c.runtime_dir_default);
    rmdir(own);
    parse(&c, mine);
    assert_string_equal(c.runtime_dir, "/srv/rt");
    assert_false(c.runtime_dir_default); /* the user's choice */
    parse(&c, sd_rel);
    assert_string_equal(c.sessiond, ""); /* never relative to the cwd */
    parse(&c, sd_abs);
    assert_string_equal(c.sessiond, "/opt/codeshim-sessiond");
}

static void frames_roundtrip(void **state)
{
    int sv[2];
    cJSON *m = cJSON_CreateObject(), *got = NULL;
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cJSON_AddStringToObject(m, "op", "exec");
    cJSON_AddStringToObject(m, "code", "print('\\u00e9')");
    assert_int_equal(shim_proto_send(sv[0], m, 1000), 0);
    assert_int_equal(shim_proto_recv(sv[1], &got, 1000), 0);
    assert_string_equal(cJSON_GetObjectItem(got, "code")->valuestring, "print('\\u00e9')");
    cJSON_Delete(got);
    cJSON_Delete(m);
    /* nothing arrives: a deadline, not a hang */
    assert_int_equal(shim_proto_recv(sv[1], &got, 50), -ETIMEDOUT);
    close(sv[0]);
    assert_int_equal(shim_proto_recv(sv[1], &got, 1000), -ECONNRESET);
    close(sv[1]);
}

static void forged_frames(void **state)
{
    int sv[2];
    cJSON *got = (cJSON *)1;
    unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff}, zero[4] = {0, 0, 0, 0};
    unsigned char arr[4] = {0, 0, 0, 3};
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal(write(sv[0], huge, 4), 4);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_null(got);
    assert_int_equal(write(sv[0], zero, 4), 4);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_int_equal(write(sv[0], arr, 4), 4);
    assert_int_equal(write(sv[0], "[1]", 3), 3); /* JSON, but not an object */
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_int_equal(write(sv[0], arr, 4), 4);
    assert_int_equal(write(sv[0], "{\"", 2), 2); /* truncated, then closed */
    close(sv[0]);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -ECONNRESET);
    close(sv[1]);
}

/* Writes one frame of text to fd. */
static void put_frame(int fd, const char *text)
{
    size_t n = strlen(text);
    unsigned char hdr[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};

    assert_int_equal(write(fd, hdr, 4), 4);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
}

static char *repeat(const char *head, const char *unit, size_t times, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail), i;
    char *s = malloc(hl + ul * times + tl + 1), *p = s;

    assert_non_null(s);
    memcpy(p, head, hl);
    p += hl;
    for (i = 0; i < times; i++, p += ul)
        memcpy(p, unit, ul);
    memcpy(p, tail, tl + 1);
    return s;
}

/* A frame whose JSON is a long array or deeply nested is refused before
 * cJSON builds a tree of it (a tree costs ~64 bytes per value). */
static void hostile_frames(void **state)
{
    char *wide = repeat("{\"logs\":\"x\",\"status\":0,\"files\":[1", ",1", 5000, "]}");
    char *deep = repeat("{\"a\":", "[", 20, "");
    char *ok = repeat("{\"a\":[1", ",1", 1000, "]}");
    char *big = repeat("{\"a\":[1", ",1", 4u << 20, "]}");
    char *strs = repeat("{\"a\":\"", "[,{", 100000, "\"}"); /* inside a string: fine */
    int sv[2];
    cJSON *got = NULL;
    (void)state;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    put_frame(sv[0], wide);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    assert_null(got);
    put_frame(sv[0], deep);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), -EPROTO);
    put_frame(sv[0], ok);
    assert_int_equal(shim_proto_recv(sv[1], &got, 500), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(got, "a")), 1001);
    cJSON_Delete(got);
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(shim_proto_check_shape(big, strlen(big)), -EPROTO);
    assert_int_equal(shim_proto_check_shape(strs, strlen(strs)), 0);
    assert_int_equal(shim_proto_check_shape("{\"a\":\"\\\"[[[[[[[[[[\"}", 17), 0);
    free(wide);
    free(deep);
    free(ok);
    free(big);
    free(strs);
}

/* Answers that are JSON objects but not a result's shape. */
static void results_of_the_wrong_shape(void **state)
{
    static const char *const bad[] = {
        "{\"status\":\"0\",\"logs\":\"x\"}",
        "{\"status\":0,\"logs\":\"x\",\"images\":{}}",
        "{\"status\":0,\"logs\":\"x\",\"images\":[{\"base64\":\"not base64!\"}]}",
        "{\"status\":0,\"logs\":\"x\",\"images\":[{\"base64\":\"QQ==\",\"mime\":\"text/html\"}]}",
        "{\"status\":0,\"logs\":\"x\",\"images\":[7]}",
        "{\"status\":0,\"logs\":\"x\",\"files\":[\"a\",2]}",
        "{\"status\":0,\"logs\":\"x\",\"seconds\":\"soon\"}",
    };
    struct shim_exec_result r;
    cJSON *j;
    char *many;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = cJSON_Parse(bad[i]);
        assert_non_null(j);
        assert_int_equal(shim_proto_result_from_json(j, &r), -EPROTO);
        assert_null(r.logs);
        cJSON_Delete(j);
    }
    many = repeat("{\"status\":0,\"logs\":\"x\",\"images\":[{\"base64\":\"QQ==\"}", ",{\"base64\":\"QQ==\"}",
                  SHIM_PROTO_MAX_IMAGES, "]}");
    j = cJSON_Parse(many);
    assert_int_equal(shim_proto_result_from_json(j, &r), -EPROTO);
    cJSON_Delete(j);
    free(many);
    many = repeat("{\"status\":0,\"logs\":\"x\",\"files\":[\"f\"", ",\"f\"", SHIM_PROTO_MAX_FILES, "]}");
    j = cJSON_Parse(many);
    assert_int_equal(shim_proto_result_from_json(j, &r), -EPROTO);
    cJSON_Delete(j);
    free(many);
}

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        int n = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2
                : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0)
            return 0;
        for (p++; n > 0; n--, p++)
            if ((*p & 0xC0) != 0x80)
                return 0;
    }
    return 1;
}

static size_t printed(const cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    size_t n = strlen(s);

    free(s);
    return n;
}

/* A result larger than a frame is cut to fit, never refused: the images
 * go first, then the middle of the logs, and a note says what is gone. */
static void results_cut_to_fit(void **state)
{
    const size_t max = 64u << 10;
    struct shim_exec_image imgs[2];
    char *files[] = {(char *)"a.csv", (char *)"b.png", (char *)"c.txt"};
    struct shim_exec_result r, back;
    char *b64 = repeat("", "A", 50000, ""), *logs;
    const char *units[] = {"a", "\x01", "\xc3\xa9", "\"\\"};
    cJSON *j;
    size_t i;
    (void)state;

    imgs[0].mime = imgs[1].mime = (char *)"image/png";
    imgs[0].base64 = imgs[1].base64 = b64;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        logs = repeat("START", units[i], 300000, "THE END\n[image produced: figure 1 (PNG)]\n");
        memset(&r, 0, sizeof(r));
        r.status = SHIM_EXEC_OK;
        r.logs = logs;
        r.images = imgs;
        r.nimages = 2;
        r.files = files;
        r.nfiles = 3;
        j = shim_proto_result_capped(&r, max);
        assert_non_null(j);
        assert_true(printed(j) <= max);
        assert_int_equal(shim_proto_result_from_json(j, &back), 0);
        assert_int_equal(back.nimages, 0);
        assert_int_equal(back.nfiles, 3);
        assert_true(valid_utf8(back.logs));
        assert_int_equal(strncmp(back.logs, "START", 5), 0);
        assert_non_null(strstr(back.logs, "THE END\n[image produced: figure 1 (PNG)]\n"));
        assert_non_null(strstr(back.logs, "too large for the session channel"));
        assert_non_null(strstr(back.logs, "2 of 2 images"));
        assert_true(strlen(back.logs) > max / 8); /* most of the room went to the logs */
        shim_exec_result_free(&back);
        cJSON_Delete(j);
        free(logs);
    }
    /* only the images do not fit: the logs stay whole, the note at the end */
    memset(&r, 0, sizeof(r));
    r.logs = (char *)"hello\n";
    r.images = imgs;
    r.nimages = 2;
    j = shim_proto_result_capped(&r, 80000);
    assert_true(printed(j) <= 80000);
    assert_int_equal(shim_proto_result_from_json(j, &back), 0);
    assert_int_equal(back.nimages, 1);
    assert_int_equal(strncmp(back.logs, "hello\n\n[... codeshim: this result", 33), 0);
    assert_non_null(strstr(back.logs, "1 of 2 images"));
    shim_exec_result_free(&back);
    cJSON_Delete(j);
    /* what fits is left alone */
    j = shim_proto_result_capped(&r, 1u << 20);
    assert_int_equal(shim_proto_result_from_json(j, &back), 0);
    assert_string_equal(back.logs, "hello\n");
    assert_int_equal(back.nimages, 2);
    shim_exec_result_free(&back);
    cJSON_Delete(j);
    free(b64);
}

static void results_roundtrip(void **state)
{
    struct shim_exec_result r, back;
    struct shim_exec_image img = {(char *)"image/png", (char *)"iVBORw0KGgo="};
    char *files[] = {(char *)"a.csv", (char *)"sub/b.png"};
    cJSON *j, *bad;
    (void)state;

    memset(&r, 0, sizeof(r));
    r.status = SHIM_EXEC_ERROR;
    r.logs = (char *)"Traceback...\nValueError: x\n";
    r.images = &img;
    r.nimages = 1;
    r.files = files;
    r.nfiles = 2;
    r.seconds = 0.25;
    j = shim_proto_result_to_json(&r);
    assert_int_equal(shim_proto_result_from_json(j, &back), 0);
    assert_int_equal(back.status, SHIM_EXEC_ERROR);
    assert_string_equal(back.logs, r.logs);
    assert_int_equal(back.nimages, 1);
    assert_string_equal(back.images[0].base64, "iVBORw0KGgo=");
    assert_int_equal(back.nfiles, 2);
    assert_string_equal(back.files[1], "sub/b.png");
    shim_exec_result_free(&back);
    cJSON_Delete(j);
    bad = cJSON_Parse("{\"status\":9,\"logs\":\"x\"}");
    assert_int_equal(shim_proto_result_from_json(bad, &back), -EPROTO);
    cJSON_Delete(bad);
    bad = cJSON_Parse("{\"status\":0}");
    assert_int_equal(shim_proto_result_from_json(bad, &back), -EPROTO);
    cJSON_Delete(bad);
}

/* ---- the build a sandbox host is of ---- */

static void a_build_is_its_file_and_its_imports(void **state)
{
    static struct shim_config c;
    char a[65], b[65], d[65], e[65], f1[] = "/tmp/codeshim-build-XXXXXX",
         f2[] = "/tmp/codeshim-build-XXXXXX";
    int x = mkstemp(f1), y = mkstemp(f2);

    (void)state;
    assert_true(x >= 0 && y >= 0);
    close(x);
    close(y);
    snprintf(c.preload_modules, sizeof(c.preload_modules), "numpy");
    assert_int_equal(shim_session_build(&c, f1, a), 0);
    assert_int_equal(strlen(a), 16);
    assert_int_equal(shim_session_build(&c, f1, b), 0);
    assert_string_equal(a, b); /* the same file: the same build */
    assert_int_equal(shim_session_build(&c, f2, d), 0);
    assert_string_not_equal(a, d); /* another file (a copy, a new build) */
    snprintf(c.preload_modules, sizeof(c.preload_modules), "pandas");
    assert_int_equal(shim_session_build(&c, f1, e), 0);
    assert_string_not_equal(a, e); /* another fork server's imports */
    unlink(f1);
    unlink(f2);
    assert_int_equal(shim_session_build(&c, f1, e), -ENOENT);
    assert_string_equal(e, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(identities),
        cmocka_unit_test(settings_fingerprint),
        cmocka_unit_test(runtime_dir_and_sessiond_defaults),
        cmocka_unit_test(frames_roundtrip),
        cmocka_unit_test(forged_frames),
        cmocka_unit_test(hostile_frames),
        cmocka_unit_test(results_of_the_wrong_shape),
        cmocka_unit_test(results_cut_to_fit),
        cmocka_unit_test(results_roundtrip),
        cmocka_unit_test(a_build_is_its_file_and_its_imports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
