/* Unit tests: http.c, codeshim's own HTTP client, against a loopback
 * server this test runs on a thread of its own (127.0.0.1, an ephemeral
 * port): what the server received (method, path, headers, body, one
 * connection for two calls), and what the client made of each answer
 * (status, kept body, X-Next-Token, Retry-After, streamed lines, caps,
 * stop, a stop hook, refused and timed-out calls); and the transfer core under them
 * on a handle of the test's own (final head, pass, cap, stop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "system/http.h"

/* ---------------- the client ---------------- */

static struct shim_http *client(void)
{
    struct shim_http_net net = {.flavor = SHIM_FLAVOR_OPENSSL};
    struct shim_http *c;

    assert_int_equal(shim_http_open(&net, &c), 0);
    return c;
}

static struct shim_http_req req(const struct server *s, char url[128], const char *method,
                                const char *path)
{
    struct shim_http_req rq = {.method = method, .url = url, .connect_ms = 5000,
                               .total_ms = 20000, .max_body = 1 << 16};

    snprintf(url, 128, "http://127.0.0.1:%d%s", s->port, path);
    return rq;
}

/* One test's server, client, call and answer. */
static struct {
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    struct shim_http_resp r;
    char url[128];
} F;

/* F.rq set up for method and path on F.s (the client opened once). */
static void call(const char *method, const char *path)
{
    if (!F.c)
        F.c = client();
    F.rq = req(&F.s, F.url, method, path);
}

static void done(void)
{
    shim_http_close(F.c);
    F.c = NULL;
    stop(&F.s);
}

#define OK_HEAD "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

static void post_sends_headers_and_body_and_keeps_the_answer(void **state)
{
    static const char *const hdrs[] = {"X-API-Key: k1", "Content-Type: application/json", NULL};
    (void)state;

    start(&F.s, 2, OK_HEAD "X-Next-Token:  tok-2 \r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
          "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno");
    call("POST", "/sandboxes?x=1");
    F.rq.headers = hdrs;
    F.rq.body = "{\"a\":\"\0b\"}";
    F.rq.body_len = 10; /* a NUL inside: sent by length */
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 200);
    assert_int_equal(F.r.len, 11);
    assert_string_equal(F.r.body, "{\"ok\":true}");
    assert_string_equal(F.r.next_token, "tok-2");
    assert_int_equal(F.r.retry_after_s, -1);
    assert_false(F.r.truncated || F.r.incomplete || F.r.timed_out || F.r.stopped);
    assert_string_equal(F.r.error, "");
    shim_http_resp_free(&F.r);

    call("DELETE", "/sandboxes/abc");
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 404); /* any status is an answer */
    assert_string_equal(F.r.body, "no");
    assert_string_equal(F.r.next_token, "");
    shim_http_resp_free(&F.r);
    done();

    assert_int_equal(F.s.nreq, 2);
    assert_int_equal(F.s.accepts, 1); /* the second call reused the connection */
    assert_true(!strncmp(F.s.req[0], "POST /sandboxes?x=1 HTTP/1.1\r\n", 30));
    assert_non_null(strstr(F.s.req[0], "\r\nX-API-Key: k1\r\n"));
    assert_non_null(strstr(F.s.req[0], "\r\nContent-Length: 10\r\n"));
    assert_null(strstr(F.s.req[0], "Expect:")); /* no 100-continue wait */
    assert_memory_equal(F.s.req[0] + F.s.req_len[0] - 10, "{\"a\":\"\0b\"}", 10);
    assert_true(!strncmp(F.s.req[1], "DELETE /sandboxes/abc HTTP/1.1\r\n", 32));
    assert_null(strstr(F.s.req[1], "X-API-Key")); /* headers are per call */
}

/* A large body goes at once: no "Expect: 100-continue" (libcurl adds it
 * past 1 MiB and then waits for an interim answer that e2b never sends). */
static void large_post_does_not_expect_100_continue(void **state)
{
    size_t big = (1u << 20) + 4096;
    char *body = malloc(big);
    (void)state;

    assert_non_null(body);
    memset(body, 'b', big);
    start(&F.s, 1, OK_HEAD "Content-Length: 2\r\n\r\n{}");
    call("POST", "/files");
    F.rq.body = body;
    F.rq.body_len = big;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 200);
    shim_http_resp_free(&F.r);
    done();
    free(body);
    assert_null(strstr(F.s.req[0], "Expect:"));
    assert_non_null(strstr(F.s.req[0], "\r\nContent-Length: 1052672\r\n"));
    assert_true(F.s.req_len[0] > big);
}

static void retry_after_is_seconds(void **state)
{
    (void)state;

    start(&F.s, 1, "HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n");
    call("GET", "/x");
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 429);
    assert_int_equal(F.r.retry_after_s, 7);
    assert_string_equal(F.r.body, "");
    shim_http_resp_free(&F.r);
    done();
    assert_true(!strncmp(F.s.req[0], "GET /x HTTP/1.1\r\n", 17));
}

struct lines {
    char got[8][64];
    int n, stop_at; /* on_line returns 1 at line stop_at (-1: never) */
};

static int on_line(void *ud, const char *line, size_t len)
{
    struct lines *l = ud;

    if (l->n < 8 && len < 64) {
        memcpy(l->got[l->n], line, len);
        l->got[l->n][len] = '\0';
    }
    return l->n++ == l->stop_at;
}

static void stream_hands_out_lines_the_last_without_newline(void **state)
{
    struct lines l = {.stop_at = -1};
    (void)state;

    start(&F.s, 2, OK_HEAD "Content-Length: 11\r\n\r\na\nbb\n\nccc\nd",
          "HTTP/1.1 500 Oops\r\nContent-Length: 6\r\n\r\nx\ny\nz\n");
    call("POST", "/execute");
    F.rq.on_line = on_line;
    F.rq.ud = &l;
    F.rq.max_line = 16;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 200);
    assert_int_equal(l.n, 5);
    assert_string_equal(l.got[0], "a");
    assert_string_equal(l.got[1], "bb");
    assert_string_equal(l.got[2], "");
    assert_string_equal(l.got[3], "ccc");
    assert_string_equal(l.got[4], "d");
    assert_null(F.r.body); /* streamed, not kept */
    shim_http_resp_free(&F.r);

    /* not a 2xx: kept as a body, no line handed out */
    l.n = 0;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 500);
    assert_int_equal(l.n, 0);
    assert_string_equal(F.r.body, "x\ny\nz\n");
    shim_http_resp_free(&F.r);
    done();
}

static void stream_stops_when_asked_and_cuts_a_long_line(void **state)
{
    struct lines l = {.stop_at = 1};
    (void)state;

    start(&F.s, 2, OK_HEAD "Connection: close\r\nContent-Length: 9\r\n\r\none\ntwo\nx",
          OK_HEAD "Connection: close\r\nContent-Length: 24\r\n\r\nshort\nthis line is too long");
    call("POST", "/execute");
    F.rq.on_line = on_line;
    F.rq.ud = &l;
    F.rq.max_line = 8;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(l.n, 2); /* "two" said stop: nothing after it */
    assert_true(F.r.stopped);
    assert_true(F.r.incomplete);
    shim_http_resp_free(&F.r);

    l = (struct lines){.stop_at = -1};
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.got[0], "short");
    assert_true(F.r.truncated);
    assert_true(F.r.incomplete);
    assert_false(F.r.stopped);
    shim_http_resp_free(&F.r);
    done();
}

/* The stop hook: asked all along; says stop once l has a line (l NULL:
 * once the server has the request), and counts the calls from then on. */
struct asked {
    int n, said;
    struct lines *l;
    const struct server *s;
};

static int ask_stop(void *ud)
{
    struct asked *a = ud;

    a->n++;
    if (a->l ? a->l->n >= 1 : __atomic_load_n(&a->s->nreq, __ATOMIC_ACQUIRE) >= 2)
        a->said++;
    return a->said > 0;
}

static void stop_hook_drops_a_call_that_waits(void **state)
{
    struct lines l = {.stop_at = -1};
    struct asked a = {.l = &l};
    (void)state;

    /* a stream that sends one line and then nothing (no last chunk) */
    start(&F.s, 2, OK_HEAD "Transfer-Encoding: chunked\r\n\r\n4\r\none\n\r\n",
          (const char *)NULL);
    call("POST", "/execute");
    F.rq.on_line = on_line;
    F.rq.ud = &l;
    F.rq.max_line = 16;
    F.rq.stop = ask_stop;
    F.rq.stop_ud = &a;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 200);
    assert_true(F.r.interrupted);
    assert_true(F.r.incomplete);
    assert_false(F.r.timed_out);
    assert_false(F.r.stopped);
    assert_int_equal(a.said, 1); /* asked no more once it said stop */
    assert_int_equal(l.n, 1);
    assert_string_equal(l.got[0], "one");
    assert_true(F.r.seconds < 10); /* not the 20 s total timeout */
    shim_http_resp_free(&F.r);

    /* stopped before any answer, on a new connection: no status, an error */
    a = (struct asked){.s = &F.s};
    F.rq.on_line = NULL;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), -EIO);
    assert_true(F.r.interrupted);
    assert_int_equal(F.r.status, 0);
    assert_true(F.r.error[0] != '\0');
    assert_true(F.r.seconds < 10);
    shim_http_resp_free(&F.r);
    done();
    assert_int_equal(F.s.accepts, 2); /* the first connection was dropped */
    assert_int_equal(F.s.nreq, 2);
}

static void body_past_max_is_cut(void **state)
{
    (void)state;

    start(&F.s, 1, OK_HEAD "Content-Length: 20\r\n\r\n0123456789abcdefghij");
    call("GET", "/big");
    F.rq.max_body = 8;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), 0);
    assert_int_equal(F.r.status, 200);
    assert_true(F.r.truncated);
    assert_true(F.r.incomplete);
    assert_true(F.r.len <= 8);
    assert_true(F.r.error[0] != '\0');
    shim_http_resp_free(&F.r);
    done();
}

static void refused_and_timed_out_calls_are_errors(void **state)
{
    int port;
    (void)state;

    /* a port nobody listens on: the server's, once it is closed */
    start(&F.s, 0);
    port = F.s.port;
    stop(&F.s);
    F.s.port = port;
    call("GET", "/");
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), -ECONNREFUSED);
    assert_int_equal(F.r.status, 0);
    assert_true(F.r.error[0] != '\0');
    shim_http_resp_free(&F.r);

    start(&F.s, 1, (const char *)NULL); /* reads the request, never answers */
    call("GET", "/slow");
    F.rq.total_ms = 300;
    assert_int_equal(shim_http_do(F.c, &F.rq, &F.r), -ETIMEDOUT);
    assert_true(F.r.timed_out);
    assert_int_equal(F.r.status, 0);
    shim_http_resp_free(&F.r);
    done(); /* closes the connection: the server's read ends */
    assert_int_equal(F.s.nreq, 1);
}

/* ---------------- the transfer core, on a handle set up here ---------------- */

struct core {
    long pass_status[4];
    int npass, keep;    /* keep: pass says keep the body */
    char got[64];
    size_t ngot;
    int stop_at;        /* on_bytes says stop at its call stop_at (-1: never) */
    int nbytes;
};

static int core_pass(void *ud, long status)
{
    struct core *c = ud;

    if (c->npass < 4)
        c->pass_status[c->npass] = status;
    c->npass++;
    return !c->keep;
}

static int core_bytes(void *ud, const char *p, size_t n)
{
    struct core *c = ud;

    if (c->ngot + n < sizeof(c->got)) {
        memcpy(c->got + c->ngot, p, n);
        c->ngot += n;
        c->got[c->ngot] = '\0';
    }
    return c->nbytes++ == c->stop_at;
}

/* One core transfer of GET url on h into head and body (body capped at
 * max), its sink's result in *s. */
static CURLcode core_get(const struct shim_curl_api *a, CURL *h, const char *url,
                         struct shim_buf *head, struct shim_buf *body, size_t max,
                         struct core *c, struct shim_http_sink *s)
{
    memset(s, 0, sizeof(*s));
    s->head = head;
    s->body = body;
    s->max_body = max;
    s->pass = core_pass;
    s->on_bytes = core_bytes;
    s->ud = c;
    a->easy_setopt(h, CURLOPT_URL, url);
    return shim_http_perform(a, h, s);
}

static void core_keeps_the_final_head_and_passes_stops_or_cuts_the_body(void **state)
{
    const struct shim_curl_api *a = shim_real(SHIM_FLAVOR_OPENSSL);
    struct shim_buf head, body;
    struct shim_http_sink s;
    struct core c = {.stop_at = -1};
    char url[128];
    CURL *h;
    (void)state;

    assert_non_null(a);
    h = a->easy_init();
    assert_non_null(h);
    start(&F.s, 3,
          "HTTP/1.1 100 Continue\r\n\r\n" OK_HEAD "X-A: 1\r\nContent-Length: 10\r\n\r\n0123456789",
          OK_HEAD "Content-Length: 10\r\n\r\n0123456789",
          OK_HEAD "Connection: close\r\nContent-Length: 3\r\n\r\nabc");
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/core", F.s.port);
    shim_buf_init(&head, 4096);
    shim_buf_init(&body, 64);

    /* passed: the bytes go to on_bytes, nothing is kept; only the final
     * answer's head is, and pass is asked once, with its status */
    assert_int_equal(core_get(a, h, url, &head, &body, 64, &c, &s), CURLE_OK);
    assert_int_equal(s.status, 200);
    assert_int_equal(c.npass, 1);
    assert_int_equal(c.pass_status[0], 200);
    assert_true(s.passing);
    assert_string_equal(c.got, "0123456789");
    assert_int_equal(body.len, 0);
    assert_int_equal(s.total, 10);
    assert_int_equal(s.cut, SHIM_HTTP_CUT_NONE);
    assert_true(!strncmp(head.data, "HTTP/1.1 200 OK\r\n", 17));
    assert_null(strstr(head.data, "100 Continue"));
    assert_non_null(strstr(head.data, "\r\nX-A: 1\r\n"));

    /* kept, past the cap: cut, the transfer fails, no more than the cap kept */
    c = (struct core){.stop_at = -1, .keep = 1};
    assert_int_equal(core_get(a, h, url, &head, &body, 4, &c, &s), CURLE_WRITE_ERROR);
    assert_int_equal(s.cut, SHIM_HTTP_CUT_CAP);
    assert_false(s.passing);
    assert_true(body.len <= 4);
    assert_int_equal(c.ngot, 0);

    /* passed, and on_bytes asks to stop */
    c = (struct core){.stop_at = 0};
    assert_int_equal(core_get(a, h, url, &head, &body, 64, &c, &s), CURLE_WRITE_ERROR);
    assert_int_equal(s.cut, SHIM_HTTP_CUT_STOPPED);
    assert_int_equal(c.nbytes, 1);
    assert_int_equal(s.status, 200);

    a->easy_cleanup(h);
    shim_buf_free(&head);
    shim_buf_free(&body);
    stop(&F.s);
    assert_int_equal(F.s.nreq, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(post_sends_headers_and_body_and_keeps_the_answer),
        cmocka_unit_test(large_post_does_not_expect_100_continue),
        cmocka_unit_test(retry_after_is_seconds),
        cmocka_unit_test(stream_hands_out_lines_the_last_without_newline),
        cmocka_unit_test(stream_stops_when_asked_and_cuts_a_long_line),
        cmocka_unit_test(stop_hook_drops_a_call_that_waits),
        cmocka_unit_test(body_past_max_is_cut),
        cmocka_unit_test(refused_and_timed_out_calls_are_errors),
        cmocka_unit_test(core_keeps_the_final_head_and_passes_stops_or_cuts_the_body),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
