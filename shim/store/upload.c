/* upload.c - see upload.h. libcurl writes an HTTP/1.1 request to an
 * abstract Unix socket with a random name (CURLOPT_ABSTRACT_UNIX_SOCKET);
 * the reader thread accepts only a connection from this very process
 * (SO_PEERCRED), takes the head (capped), the body by Content-Length or
 * chunked (capped at max), answers an empty 200 and closes. Every wait
 * has a deadline. */
#include "store/upload.h"

#include "base/buf.h"
#include "base/guard.h"
#include "base/ids.h"
#include "base/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define HEAD_MAX 65536
#define WAIT_MS 60000

struct reader {
    int listen_fd;
    int fd;
    size_t max;
    struct shim_buf raw; /* head and body as sent */
    struct shim_upload *out;
    int rc;
};

static int fill(struct reader *r, size_t want)
{
    char chunk[65536];

    while (r->raw.len < want) {
        struct pollfd p = {r->fd, POLLIN, 0};
        ssize_t k;

        if (poll(&p, 1, WAIT_MS) <= 0)
            return -ETIMEDOUT;
        k = read(r->fd, chunk, sizeof(chunk));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -ECONNRESET;
        if (shim_buf_add(&r->raw, chunk, (size_t)k))
            return -EFBIG;
    }
    return 0;
}

static const char *find(const struct shim_buf *b, size_t from, const char *s)
{
    /* an empty buffer has no data pointer, and memmem may not be given NULL */
    return b->data && from <= b->len ? memmem(b->data + from, b->len - from, s, strlen(s))
                                     : NULL;
}

/* A header's value in the head [0, n), or NULL. */
static const char *header(const char *head, size_t n, const char *name, size_t *vlen)
{
    size_t nl = strlen(name), i = 0;

    while (i < n) {
        const char *eol = memmem(head + i, n - i, "\r\n", 2);
        size_t ll = eol ? (size_t)(eol - head - i) : n - i;
        if (ll > nl && !strncasecmp(head + i, name, nl) && head[i + nl] == ':') {
            const char *v = head + i + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            *vlen = (size_t)(head + i + ll - v);
            return v;
        }
        i += ll + 2;
    }
    return NULL;
}

/* Undoes chunked encoding from raw[at..] into body; 0 or -errno. */
static int dechunk(struct reader *r, size_t at, struct shim_buf *body)
{
    for (;;) {
        const char *eol;
        unsigned long long n;
        char *end;
        int rc;

        while (!(eol = find(&r->raw, at, "\r\n")))
            if ((rc = fill(r, r->raw.len + 1)) < 0)
                return rc;
        n = strtoull(r->raw.data + at, &end, 16);
        if (end == r->raw.data + at || n > r->max)
            return n > r->max ? -EFBIG : -EPROTO;
        at = (size_t)(eol - r->raw.data) + 2;
        if ((rc = fill(r, at + n + 2)) < 0)
            return rc;
        if (!n)
            return 0; /* no trailers from libcurl's MIME posts */
        if (shim_buf_add(body, r->raw.data + at, n))
            return -EFBIG;
        at += n + 2;
    }
}

/* The first connection from this process (another process that found the
 * name is turned away). */
static int accept_ours(struct reader *r)
{
    int tries;

    for (tries = 0; tries < 16; tries++) {
        struct pollfd p = {r->listen_fd, POLLIN, 0};
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        int fd;

        if (poll(&p, 1, WAIT_MS) <= 0)
            return -ETIMEDOUT;
        fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid == getpid()) {
            r->fd = fd;
            return 0;
        }
        close(fd);
    }
    return -EPERM;
}

static void *read_request(void *arg)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    struct reader *r = arg;
    struct shim_buf body;
    const char *end, *v;
    size_t head_len, vlen;
    int rc;

    shim_buf_init(&body, r->max);
    if ((rc = accept_ours(r)) < 0)
        goto out;
    while (!(end = find(&r->raw, 0, "\r\n\r\n")) && r->raw.len < HEAD_MAX)
        if ((rc = fill(r, r->raw.len + 1)) < 0)
            goto out;
    rc = -EPROTO;
    if (!end)
        goto out;
    head_len = (size_t)(end - r->raw.data) + 4;
    if ((v = header(r->raw.data, head_len, "Content-Type", &vlen)) != NULL &&
        vlen < sizeof(r->out->content_type)) {
        memcpy(r->out->content_type, v, vlen);
        r->out->content_type[vlen] = '\0';
    }
    if ((v = header(r->raw.data, head_len, "Transfer-Encoding", &vlen)) != NULL &&
        vlen >= 7 && !strncasecmp(v, "chunked", 7)) {
        rc = dechunk(r, head_len, &body);
    } else if ((v = header(r->raw.data, head_len, "Content-Length", &vlen)) != NULL) {
        unsigned long long n = strtoull(v, NULL, 10);
        rc = n > r->max ? -EFBIG : fill(r, head_len + (size_t)n);
        if (rc == 0 && shim_buf_add(&body, r->raw.data + head_len, (size_t)n))
            rc = -EFBIG;
    }
    if (rc == 0 && write(r->fd, ok, sizeof(ok) - 1) != (ssize_t)(sizeof(ok) - 1))
        rc = -EIO;
out:
    if (r->fd >= 0)
        shutdown(r->fd, SHUT_RDWR);
    r->rc = rc;
    if (rc == 0) {
        r->out->body = body.data ? body.data : calloc(1, 1);
        r->out->len = body.len;
        if (!r->out->body)
            r->rc = -ENOMEM;
    } else {
        shim_buf_free(&body);
    }
    return NULL;
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* The duplicate libcurl serialises into fd: nothing of the program's own
 * transport, output or callbacks but the body's sources. */
static void point_at(const struct shim_curl_api *api, CURL *d, const char *name,
                     struct curl_slist *headers)
{
    api->easy_setopt(d, CURLOPT_URL, "http://localhost/codeshim-upload");
    api->easy_setopt(d, CURLOPT_PROXY, "");
    api->easy_setopt(d, CURLOPT_PRE_PROXY, (char *)NULL);
    api->easy_setopt(d, CURLOPT_ABSTRACT_UNIX_SOCKET, name);
    api->easy_setopt(d, CURLOPT_CONNECT_TO, (struct curl_slist *)NULL);
    api->easy_setopt(d, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    api->easy_setopt(d, CURLOPT_HTTPHEADER, headers);
    api->easy_setopt(d, CURLOPT_OPENSOCKETFUNCTION, (void *)NULL);
    api->easy_setopt(d, CURLOPT_SOCKOPTFUNCTION, (void *)NULL);
    api->easy_setopt(d, CURLOPT_CLOSESOCKETFUNCTION, (void *)NULL);
    api->easy_setopt(d, CURLOPT_WRITEFUNCTION, discard);
    api->easy_setopt(d, CURLOPT_HEADERFUNCTION, discard);
    api->easy_setopt(d, CURLOPT_HEADER, 0L);
    api->easy_setopt(d, CURLOPT_NOPROGRESS, 1L);
    api->easy_setopt(d, CURLOPT_VERBOSE, 0L);
    api->easy_setopt(d, CURLOPT_FOLLOWLOCATION, 0L);
    api->easy_setopt(d, CURLOPT_FAILONERROR, 0L);
    api->easy_setopt(d, CURLOPT_TIMEOUT_MS, (long)WAIT_MS);
    api->easy_setopt(d, CURLOPT_ERRORBUFFER, (char *)NULL);
}

/* A listening abstract socket with a random name (name: its text form
 * for libcurl, without the leading NUL). fd or -errno. */
static int listen_abstract(char name[40])
{
    struct sockaddr_un a;
    char id[40];
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    shim_id_make(id, sizeof(id), "codeshim-upload-", 20);
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, id, strlen(id));
    if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                                   strlen(id))) < 0 ||
        listen(fd, 4) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    snprintf(name, 40, "%s", id);
    return fd;
}

int shim_upload_capture(const struct shim_curl_api *api, CURL *h, size_t max,
                        struct shim_upload *out)
{
    struct reader r;
    struct curl_slist *headers;
    char name[40];
    pthread_t t;
    CURL *d;
    int rc;
    CURLcode cc = CURLE_OK;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    r.fd = -1;
    if ((r.listen_fd = listen_abstract(name)) < 0)
        return r.listen_fd;
    r.max = max;
    r.out = out;
    shim_buf_init(&r.raw, max + HEAD_MAX);
    shim_guard_enter();
    d = api->easy_duphandle(h);
    headers = d ? api->slist_append(NULL, "Expect:") : NULL;
    if (!d || !headers) {
        if (d)
            api->easy_cleanup(d);
        shim_guard_leave();
        close(r.listen_fd);
        shim_buf_free(&r.raw);
        return d ? -ENOMEM : -ENOTSUP;
    }
    point_at(api, d, name, headers);
    if ((rc = -pthread_create(&t, NULL, read_request, &r)) == 0) {
        cc = api->easy_perform(d);
        shutdown(r.listen_fd, SHUT_RDWR); /* a reader still waiting to accept gives up */
        pthread_join(t, NULL);
        rc = r.rc;
        if (rc == 0 && cc != CURLE_OK)
            rc = -EIO;
    }
    if (rc < 0)
        LOG_DEBUG("upload capture: %s (libcurl %d)", strerror(-rc), (int)cc);
    api->easy_cleanup(d);
    api->slist_free_all(headers);
    shim_guard_leave();
    close(r.listen_fd);
    if (r.fd >= 0)
        close(r.fd);
    shim_buf_free(&r.raw);
    if (rc < 0)
        shim_upload_free(out);
    return rc;
}

void shim_upload_free(struct shim_upload *u)
{
    free(u->body);
    u->body = NULL;
    u->len = 0;
}
