/* loopback.h - an HTTP/1.1 server on 127.0.0.1 (an ephemeral port) on a
 * thread of the test's own, for the suites of codeshim's HTTP clients
 * (test_http, test_e2b_api): it answers each request with the next of
 * the answers it was started with (NULL: reads on and never answers) and
 * keeps every request as received. Include after cmocka.h. */
#ifndef TESTS_UNIT_LOOPBACK_H
#define TESTS_UNIT_LOOPBACK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_ANSWERS 6

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

/* The body of request i (after its head), or NULL. */
static inline const char *body_of(const struct server *s, int i)
{
    const char *e = strstr(s->req[i], "\r\n\r\n");
    return e ? e + 4 : NULL;
}

#endif
