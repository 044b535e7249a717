/* proto.c - see proto.h. */
#include "proto.h"

#include "json.h"

#include <errno.h>
#include <sys/un.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, long long deadline)
{
    for (;;) {
        struct pollfd p = {fd, ev, 0};
        long long left = deadline - now_ms();
        int rc;
        if (left <= 0)
            return -ETIMEDOUT;
        rc = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -errno;
    }
}

static int write_all(int fd, const char *p, size_t n, long long deadline)
{
    while (n) {
        ssize_t k;
        int rc = wait_fd(fd, POLLOUT, deadline);
        if (rc)
            return rc;
        k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n, long long deadline)
{
    while (n) {
        ssize_t k;
        int rc = wait_fd(fd, POLLIN, deadline);
        if (rc)
            return rc;
        k = recv(fd, p, n, MSG_DONTWAIT);
        if (k == 0)
            return -EPIPE;
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -EPIPE;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int shim_proto_socket(const char *dir, int listening)
{
    struct sockaddr_un a;
    int fd, dfd = -1, rc;

    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    if (strlen(dir) + sizeof("/sock") <= sizeof(a.sun_path)) {
        snprintf(a.sun_path, sizeof(a.sun_path), "%s/sock", dir);
    } else {
        dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -errno;
        snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/sock", dfd);
    }
    if (listening)
        unlink(a.sun_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        rc = -errno;
    else if (listening ? bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0
                       : connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        rc = -errno;
    else
        rc = fd;
    if (rc < 0 && fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

int shim_proto_send(int fd, const cJSON *msg, int timeout_ms)
{
    char *s = cJSON_PrintUnformatted(msg);
    unsigned char hdr[4];
    long long deadline = now_ms() + timeout_ms;
    size_t n;
    int rc;

    if (!s)
        return -ENOMEM;
    n = strlen(s);
    if (n > SHIM_PROTO_MAX) {
        free(s);
        return -E2BIG;
    }
    hdr[0] = (unsigned char)(n >> 24);
    hdr[1] = (unsigned char)(n >> 16);
    hdr[2] = (unsigned char)(n >> 8);
    hdr[3] = (unsigned char)n;
    rc = write_all(fd, (const char *)hdr, 4, deadline);
    if (!rc)
        rc = write_all(fd, s, n, deadline);
    free(s);
    return rc;
}

int shim_proto_recv(int fd, cJSON **out, int timeout_ms)
{
    unsigned char hdr[4];
    long long deadline = now_ms() + timeout_ms;
    uint32_t n;
    char *buf;
    int rc;

    *out = NULL;
    rc = read_all(fd, (char *)hdr, 4, deadline);
    if (rc)
        return rc;
    n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (n == 0 || n > SHIM_PROTO_MAX)
        return -EPROTO;
    buf = malloc(n);
    if (!buf)
        return -ENOMEM;
    rc = read_all(fd, buf, n, deadline);
    if (!rc) {
        *out = shim_json_parse(buf, n);
        if (!cJSON_IsObject(*out)) {
            cJSON_Delete(*out);
            *out = NULL;
            rc = -EPROTO;
        }
    }
    free(buf);
    return rc;
}

cJSON *shim_proto_result_to_json(const struct shim_exec_result *r)
{
    cJSON *j = cJSON_CreateObject(), *imgs, *files;
    size_t i;

    cJSON_AddNumberToObject(j, "status", r->status);
    cJSON_AddStringToObject(j, "logs", r->logs ? r->logs : "");
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    imgs = cJSON_AddArrayToObject(j, "images");
    for (i = 0; i < r->nimages; i++) {
        cJSON *im = cJSON_CreateObject();
        cJSON_AddStringToObject(im, "mime", r->images[i].mime ? r->images[i].mime : "image/png");
        cJSON_AddStringToObject(im, "base64", r->images[i].base64 ? r->images[i].base64 : "");
        cJSON_AddItemToArray(imgs, im);
    }
    files = cJSON_AddArrayToObject(j, "files");
    for (i = 0; i < r->nfiles; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(r->files[i] ? r->files[i] : ""));
    return j;
}

int shim_proto_result_from_json(const cJSON *j, struct shim_exec_result *r)
{
    const cJSON *it, *imgs = cJSON_GetObjectItemCaseSensitive(j, "images");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(j, "files");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(j, "seconds");
    const char *logs = shim_json_str(j, "logs");
    long long st = shim_json_int(j, "status");
    size_t n;

    memset(r, 0, sizeof(*r));
    if (!logs || st < SHIM_EXEC_OK || st > SHIM_EXEC_FAILED)
        return -EPROTO;
    r->status = (enum shim_exec_status)st;
    r->logs = strdup(logs);
    r->logs_len = strlen(logs);
    r->seconds = cJSON_IsNumber(secs) ? secs->valuedouble : 0;
    n = (size_t)cJSON_GetArraySize(imgs);
    if (n)
        r->images = calloc(n, sizeof(*r->images));
    cJSON_ArrayForEach(it, imgs)
    {
        const char *b = shim_json_str(it, "base64"), *m = shim_json_str(it, "mime");
        if (!r->images || !b)
            continue;
        r->images[r->nimages].mime = strdup(m ? m : "image/png");
        r->images[r->nimages].base64 = strdup(b);
        r->nimages++;
    }
    n = (size_t)cJSON_GetArraySize(files);
    if (n)
        r->files = calloc(n, sizeof(*r->files));
    cJSON_ArrayForEach(it, files)
    {
        if (r->files && cJSON_IsString(it))
            r->files[r->nfiles++] = strdup(it->valuestring);
    }
    if (!r->logs) {
        shim_exec_result_free(r);
        return -ENOMEM;
    }
    return 0;
}
