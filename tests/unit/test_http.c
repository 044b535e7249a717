/* Unit tests: http.c, codeshim's own HTTP client, against a loopback
 * server this test runs on a thread of its own (127.0.0.1, an ephemeral
 * port): what the server received (method, path, headers, body, one
 * connection for two calls), and what the client made of each answer
 * (status, kept body, X-Next-Token, Retry-After, streamed lines, caps,
 * stop, refused and timed-out calls). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "system/http.h"

/* ---------------- the loopback server ---------------- */

#define MAX_ANSWERS 4

struct server {
    int listen_fd, port;
    const char *answers[MAX_ANSWERS]; /* one per request in order; NULL: never answer */
    int nanswers;
    char req[MAX_ANSWERS][8192]; /* each request as received, head and body */
    size_t req_len[MAX_ANSWERS];
    int nreq, accepts;
    pthread_t t;
};

/* One request (head, then Content-Length bytes of body) into s->req,
 * its first sizeof(s->req[0]) - 1 bytes kept, all counted in req_len;
 * 0, or -1 when the peer closed first. */
static int read_one(struct server *s, int fd)
{
    char *b = s->req[s->nreq], sink[65536];
    size_t n = 0, kept = 0, want = 0;

    for (;;) {
        size_t room = sizeof(s->req[0]) - 1 - kept;
        ssize_t k;
        char *end;

        if (!want && (end = memmem(b, kept, "\r\n\r\n", 4)) != NULL) {
            const char *cl = memmem(b, (size_t)(end - b), "Content-Length: ", 16);
            want = (size_t)(end - b) + 4 + (cl ? strtoul(cl + 16, NULL, 10) : 0);
        }
        if (want && n >= want)
            break;
        k = room ? read(fd, b + kept, room) : read(fd, sink, sizeof(sink));
        if (k <= 0)
            return -1;
        n += (size_t)k;
        if (room)
            kept += (size_t)k;
    }
    b[kept] = '\0';
    s->req_len[s->nreq] = n;
    return 0;
}

static void *serve(void *arg)
{
    struct server *s = arg;

    while (s->nreq < s->nanswers) {
        int fd = accept(s->listen_fd, NULL, NULL);
        char sink[256];

        if (fd < 0)
            return NULL;
        s->accepts++;
        while (s->nreq < s->nanswers && read_one(s, fd) == 0) {
            const char *a = s->answers[s->nreq++];
            if (!a) { /* never answers: waits for the client to give up */
                while (read(fd, sink, sizeof(sink)) > 0)
                    ;
                break;
            }
            if (write(fd, a, strlen(a)) != (ssize_t)strlen(a))
                break;
            if (strstr(a, "Connection: close"))
                break;
        }
        close(fd);
    }
    return NULL;
}

static void start(struct server *s, int n, ...)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    va_list ap;
    int i;

    memset(s, 0, sizeof(*s));
    va_start(ap, n);
    for (i = 0; i < n; i++)
        s->answers[i] = va_arg(ap, const char *);
    va_end(ap);
    s->nanswers = n;
    s->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->listen_fd >= 0);
    assert_int_equal(bind(s->listen_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->listen_fd, 4), 0);
    assert_int_equal(getsockname(s->listen_fd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->t, NULL, serve, s), 0);
}

static void stop(struct server *s)
{
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->t, NULL);
    close(s->listen_fd);
}

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

#define OK_HEAD "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"

static void post_sends_headers_and_body_and_keeps_the_answer(void **state)
{
    static const char *const hdrs[] = {"X-API-Key: k1", "Content-Type: application/json", NULL};
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    start(&s, 2, OK_HEAD "X-Next-Token:  tok-2 \r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
          "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno");
    c = client();
    rq = req(&s, url, "POST", "/sandboxes?x=1");
    rq.headers = hdrs;
    rq.body = "{\"a\":\"\0b\"}";
    rq.body_len = 10; /* a NUL inside: sent by length */
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 11);
    assert_string_equal(r.body, "{\"ok\":true}");
    assert_string_equal(r.next_token, "tok-2");
    assert_int_equal(r.retry_after_s, -1);
    assert_false(r.truncated || r.incomplete || r.timed_out || r.stopped);
    assert_string_equal(r.error, "");
    shim_http_resp_free(&r);

    rq = req(&s, url, "DELETE", "/sandboxes/abc");
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 404); /* any status is an answer */
    assert_string_equal(r.body, "no");
    assert_string_equal(r.next_token, "");
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);

    assert_int_equal(s.nreq, 2);
    assert_int_equal(s.accepts, 1); /* the second call reused the connection */
    assert_true(!strncmp(s.req[0], "POST /sandboxes?x=1 HTTP/1.1\r\n", 30));
    assert_non_null(strstr(s.req[0], "\r\nX-API-Key: k1\r\n"));
    assert_non_null(strstr(s.req[0], "\r\nContent-Length: 10\r\n"));
    assert_null(strstr(s.req[0], "Expect:")); /* no 100-continue wait */
    assert_memory_equal(s.req[0] + s.req_len[0] - 10, "{\"a\":\"\0b\"}", 10);
    assert_true(!strncmp(s.req[1], "DELETE /sandboxes/abc HTTP/1.1\r\n", 32));
    assert_null(strstr(s.req[1], "X-API-Key")); /* headers are per call */
}

/* A large body goes at once: no "Expect: 100-continue" (libcurl adds it
 * past 1 MiB and then waits for an interim answer that e2b never sends). */
static void large_post_does_not_expect_100_continue(void **state)
{
    size_t big = (1u << 20) + 4096;
    char *body = malloc(big);
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    assert_non_null(body);
    memset(body, 'b', big);
    start(&s, 1, OK_HEAD "Content-Length: 2\r\n\r\n{}");
    c = client();
    rq = req(&s, url, "POST", "/files");
    rq.body = body;
    rq.body_len = big;
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 200);
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);
    free(body);
    assert_null(strstr(s.req[0], "Expect:"));
    assert_non_null(strstr(s.req[0], "\r\nContent-Length: 1052672\r\n"));
    assert_true(s.req_len[0] > big);
}

static void retry_after_is_seconds(void **state)
{
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    start(&s, 1, "HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n");
    c = client();
    rq = req(&s, url, "GET", "/x");
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 429);
    assert_int_equal(r.retry_after_s, 7);
    assert_string_equal(r.body, "");
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);
    assert_true(!strncmp(s.req[0], "GET /x HTTP/1.1\r\n", 17));
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
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    start(&s, 2, OK_HEAD "Content-Length: 11\r\n\r\na\nbb\n\nccc\nd",
          "HTTP/1.1 500 Oops\r\nContent-Length: 6\r\n\r\nx\ny\nz\n");
    c = client();
    rq = req(&s, url, "POST", "/execute");
    rq.on_line = on_line;
    rq.ud = &l;
    rq.max_line = 16;
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(l.n, 5);
    assert_string_equal(l.got[0], "a");
    assert_string_equal(l.got[1], "bb");
    assert_string_equal(l.got[2], "");
    assert_string_equal(l.got[3], "ccc");
    assert_string_equal(l.got[4], "d");
    assert_null(r.body); /* streamed, not kept */
    shim_http_resp_free(&r);

    /* not a 2xx: kept as a body, no line handed out */
    l.n = 0;
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 500);
    assert_int_equal(l.n, 0);
    assert_string_equal(r.body, "x\ny\nz\n");
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);
}

static void stream_stops_when_asked_and_cuts_a_long_line(void **state)
{
    struct lines l = {.stop_at = 1};
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    start(&s, 2, OK_HEAD "Connection: close\r\nContent-Length: 9\r\n\r\none\ntwo\nx",
          OK_HEAD "Connection: close\r\nContent-Length: 24\r\n\r\nshort\nthis line is too long");
    c = client();
    rq = req(&s, url, "POST", "/execute");
    rq.on_line = on_line;
    rq.ud = &l;
    rq.max_line = 8;
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(l.n, 2); /* "two" said stop: nothing after it */
    assert_true(r.stopped);
    assert_true(r.incomplete);
    shim_http_resp_free(&r);

    l = (struct lines){.stop_at = -1};
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.got[0], "short");
    assert_true(r.truncated);
    assert_true(r.incomplete);
    assert_false(r.stopped);
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);
}

static void body_past_max_is_cut(void **state)
{
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    (void)state;

    start(&s, 1, OK_HEAD "Content-Length: 20\r\n\r\n0123456789abcdefghij");
    c = client();
    rq = req(&s, url, "GET", "/big");
    rq.max_body = 8;
    assert_int_equal(shim_http_do(c, &rq, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.truncated);
    assert_true(r.incomplete);
    assert_true(r.len <= 8);
    assert_true(r.error[0] != '\0');
    shim_http_resp_free(&r);
    shim_http_close(c);
    stop(&s);
}

static void refused_and_timed_out_calls_are_errors(void **state)
{
    struct shim_http_resp r;
    struct server s;
    struct shim_http *c;
    struct shim_http_req rq;
    char url[128];
    int port;
    (void)state;

    /* a port nobody listens on: the server's, once it is closed */
    start(&s, 0);
    port = s.port;
    stop(&s);
    c = client();
    s.port = port;
    rq = req(&s, url, "GET", "/");
    assert_int_equal(shim_http_do(c, &rq, &r), -ECONNREFUSED);
    assert_int_equal(r.status, 0);
    assert_true(r.error[0] != '\0');
    shim_http_resp_free(&r);

    start(&s, 1, (const char *)NULL); /* reads the request, never answers */
    rq = req(&s, url, "GET", "/slow");
    rq.total_ms = 300;
    assert_int_equal(shim_http_do(c, &rq, &r), -ETIMEDOUT);
    assert_true(r.timed_out);
    assert_int_equal(r.status, 0);
    shim_http_resp_free(&r);
    shim_http_close(c); /* closes the connection: the server's read ends */
    stop(&s);
    assert_int_equal(s.nreq, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(post_sends_headers_and_body_and_keeps_the_answer),
        cmocka_unit_test(large_post_does_not_expect_100_continue),
        cmocka_unit_test(retry_after_is_seconds),
        cmocka_unit_test(stream_hands_out_lines_the_last_without_newline),
        cmocka_unit_test(stream_stops_when_asked_and_cuts_a_long_line),
        cmocka_unit_test(body_past_max_is_cut),
        cmocka_unit_test(refused_and_timed_out_calls_are_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
