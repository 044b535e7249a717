/* serve.c - one session of codeshim-sessiond: a process of its own
 * (started by the host, host.c, with a sandbox lent from its pool, or by
 * the library alone, cold), which owns the session's sandbox and serves
 * DIR/sock (protocol: proto.h): one request at a time, so executions
 * from several programs sharing the session are serialised; connections
 * are greeted as they come and wait (accept.c) until their request begins
 * to arrive, so one that sends nothing blocks no other. Every
 * execution gets an answer (and {"op":"get"} / {"op":"put"} move a file of
 * /mnt/data as base64, at most FILE_CHUNK bytes a request: a get names an
 * offset; a put with "first" starts the file, the one with "last" ends
 * it; the chunks of one put together at most CODESHIM_FILE_MAX bytes, or
 * it is refused with EFBIG and forgotten; {"op":"rm"} removes one). A result too large for a frame is cut (with a note), and one that
 * still cannot be sent becomes an error saying so; the connection is
 * never just closed on a result. It ends after CODESHIM_SESSION_TTL
 * seconds without a request, on {"op":"close"} or on SIGTERM, closing the
 * sandbox (every sandbox process ends) and removing DIR unless a successor
 * holds it (its own socket is not there any more). It touches DIR on
 * every use: the library's LRU cap reads that; DIR/pid is this process,
 * the one to signal for this session alone; DIR/ttl its idle limit. */
#include "base/base64.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/sandbox.h"
#include "session/proto.h"
#include "session/session.h"
#include "sessiond.h"
#include "store/store.h"
#include "system/config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long long now_s(void)
{
    return shim_clock_ms() / 1000;
}

/* The session's small files (container id, pid), written atomically: a
 * library reading them at the same moment sees the old text or the new. */
static void write_file(const char *dir, const char *name, const char *text)
{
    char p[SHIM_PATH_MAX + 16];

    if (shim_fileio_join(p, sizeof(p), dir, name) < 0 || shim_store_write(p, text) < 0)
        LOG_WARN("cannot write %s/%s", dir, name);
}

/* Answer fields every frame carries. */
static cJSON *envelope(cJSON *ans, const char *cid, const char *settings)
{
    if (!ans)
        return NULL;
    cJSON_AddTrueToObject(ans, "ok");
    cJSON_AddStringToObject(ans, "container_id", cid);
    cJSON_AddStringToObject(ans, "settings", settings);
    return ans;
}

static cJSON *error_answer(const char *text)
{
    cJSON *ans = cJSON_CreateObject();

    cJSON_AddNumberToObject(ans, "status", SHIM_EXEC_FAILED);
    cJSON_AddStringToObject(ans, "logs", text);
    return ans;
}

/* Sends an exec answer; one that cannot be sent (too large, no memory) is
 * replaced by a small error, so the program learns what happened. */
static void send_answer(int fd, cJSON *ans, const char *cid, const char *settings)
{
    char text[256];
    int rc = ans ? shim_proto_send(fd, ans, 10000) : -ENOMEM;

    if (rc != -E2BIG && rc != -ENOMEM)
        return;
    LOG_WARN("session %s: cannot send a result (%s)", cid, strerror(-rc));
    snprintf(text, sizeof(text), "Error: the session could not send this execution's result "
             "(%s); the code ran, but its output is lost.\n", strerror(-rc));
    ans = envelope(error_answer(text), cid, settings);
    if (ans)
        shim_proto_send(fd, ans, 10000);
    cJSON_Delete(ans);
}

#define FILE_CHUNK (16u << 20)

/* A put in progress: chunks accumulate until the last one, at most
 * CODESHIM_FILE_MAX bytes together (the cap on one file into a container). */
static struct {
    char name[256];
    char *data;
    size_t len;
} pending;

static void forget_pending(void)
{
    free(pending.data);
    memset(&pending, 0, sizeof(pending));
}

static cJSON *file_answer(int rc)
{
    cJSON *ans = cJSON_CreateObject();

    if (ans && rc < 0)
        cJSON_AddNumberToObject(ans, "errno", -rc);
    return ans;
}

static cJSON *get_file(struct shim_sandbox *sb, const cJSON *req)
{
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(req, "name"));
    double max = cJSON_GetNumberValue(cJSON_GetObjectItem(req, "max"));
    double off = cJSON_GetNumberValue(cJSON_GetObjectItem(req, "offset"));
    char *data = NULL, *b64;
    size_t len = 0, n;
    cJSON *ans;
    int rc;

    if (!name || !(max >= 0 && max <= 4e9) || !(off >= 0 && off <= 4e9))
        return file_answer(-EINVAL);
    rc = shim_sandbox_file_get(sb, name, (size_t)max, &data, &len);
    if (rc < 0 || (size_t)off > len) {
        free(data);
        return file_answer(rc < 0 ? rc : -EINVAL);
    }
    n = len - (size_t)off < FILE_CHUNK ? len - (size_t)off : FILE_CHUNK;
    b64 = shim_base64_encode(data + (size_t)off, n);
    free(data);
    ans = file_answer(b64 ? 0 : -ENOMEM);
    if (ans && b64) {
        cJSON_AddStringToObject(ans, "data", b64);
        cJSON_AddNumberToObject(ans, "size", (double)len);
    }
    free(b64);
    return ans;
}

static cJSON *put_file(struct shim_sandbox *sb, const cJSON *req, size_t max)
{
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(req, "name"));
    const char *b64 = cJSON_GetStringValue(cJSON_GetObjectItem(req, "data"));
    int first = cJSON_IsTrue(cJSON_GetObjectItem(req, "first"));
    int last = cJSON_IsTrue(cJSON_GetObjectItem(req, "last"));
    char *chunk, *grown;
    size_t n;
    int rc;

    if (!name || !b64 || strlen(name) >= sizeof(pending.name))
        return file_answer(-EINVAL);
    if (first) {
        forget_pending();
        snprintf(pending.name, sizeof(pending.name), "%s", name);
    } else if (strcmp(pending.name, name)) {
        return file_answer(-EPROTO);
    }
    /* a chunk larger than the library sends, or past the cap (told from
     * the base64 text's length before decoding it): the put is refused and
     * what it had sent is freed */
    if (strlen(b64) / 4 * 3 > FILE_CHUNK + 2) {
        forget_pending();
        return file_answer(-EMSGSIZE);
    }
    if (strlen(b64) / 4 * 3 > max - pending.len + 2) {
        LOG_WARN("a put of %s is larger than %zu bytes (CODESHIM_FILE_MAX): refused",
                 pending.name, max);
        forget_pending();
        return file_answer(-EFBIG);
    }
    if ((rc = shim_base64_decode(b64, &chunk, &n)) < 0)
        return file_answer(rc);
    if (n > max - pending.len) {
        free(chunk);
        forget_pending();
        return file_answer(-EFBIG);
    }
    grown = realloc(pending.data, pending.len + n + 1);
    if (!grown) {
        free(chunk);
        return file_answer(-ENOMEM);
    }
    memcpy(grown + pending.len, chunk, n);
    free(chunk);
    pending.data = grown;
    pending.len += n;
    if (!last)
        return file_answer(0);
    rc = shim_sandbox_file_put(sb, pending.name, pending.data, pending.len);
    forget_pending();
    return file_answer(rc);
}

static cJSON *remove_file(struct shim_sandbox *sb, const cJSON *req)
{
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(req, "name"));

    return file_answer(name ? shim_sandbox_file_remove(sb, name) : -EINVAL);
}

/* What a connection is greeted with when it is accepted. */
struct greeting {
    const char *cid, *settings;
};

static int greet(int fd, void *ctx)
{
    const struct greeting *g = ctx;
    cJSON *ans = envelope(cJSON_CreateObject(), g->cid, g->settings);
    int rc = ans ? shim_proto_send(fd, ans, SESSIOND_REQUEST_MS) : -ENOMEM;

    cJSON_Delete(ans);
    return rc;
}

/* The client says nothing while its code runs: anything it sends, or its
 * end of the connection closing, means its request is over and the code
 * is interrupted (session.c closes it to say so). */
static int client_gone(void *ctx)
{
    struct pollfd p = {.fd = *(const int *)ctx, .events = POLLIN | POLLRDHUP};

    return poll(&p, 1, 0) != 0;
}

/* One connection, greeted: one request. Returns 1 when the session must
 * end. */
static int serve(int fd, struct shim_sandbox *sb, const struct shim_config *cfg,
                 const char *cid, const char *settings)
{
    cJSON *req = NULL, *ans;
    const char *op, *code;
    int end = 0;

    if (shim_proto_recv(fd, &req, SESSIOND_REQUEST_MS) < 0)
        return 0;
    op = cJSON_GetStringValue(cJSON_GetObjectItem(req, "op"));
    code = cJSON_GetStringValue(cJSON_GetObjectItem(req, "code"));
    if (op && !strcmp(op, "exec") && code) {
        struct shim_exec_result r;
        struct shim_exec_stop stop = {client_gone, &fd};
        if (shim_sandbox_exec_until(sb, code, strlen(code), &stop, &r) == 0) {
            ans = shim_proto_result_to_json(&r);
            shim_exec_result_free(&r);
        } else {
            ans = error_answer("Error: the session's sandbox failed.");
        }
        send_answer(fd, envelope(ans, cid, settings), cid, settings);
    } else if (op && (!strcmp(op, "get") || !strcmp(op, "put") || !strcmp(op, "rm"))) {
        ans = envelope(!strcmp(op, "get")   ? get_file(sb, req)
                       : !strcmp(op, "put") ? put_file(sb, req, (size_t)cfg->file_max)
                                            : remove_file(sb, req), cid, settings);
        send_answer(fd, ans, cid, settings);
    } else {
        end = op && !strcmp(op, "close");
        ans = envelope(cJSON_CreateObject(), cid, settings);
        if (ans)
            shim_proto_send(fd, ans, 10000);
    }
    cJSON_Delete(ans);
    cJSON_Delete(req);
    return end;
}

/* The host's request answered: the session listens, or it could not. */
static void reply_host(int reply, const char *cid, const char *settings, const char *error)
{
    cJSON *ans = cJSON_CreateObject();

    if (ans && error) {
        cJSON_AddFalseToObject(ans, "ok");
        cJSON_AddStringToObject(ans, "error", error);
    } else {
        ans = envelope(ans, cid, settings);
    }
    if (!ans || shim_proto_send(reply, ans, 10000) < 0)
        LOG_WARN("session %s: the request that started it is gone", cid);
    cJSON_Delete(ans);
    close(reply);
}

/* The sandbox: the one the host lent, or, when it had none (its fork
 * server still imports, or there is no host), one opened here the cold
 * way. */
static struct shim_sandbox *own_sandbox(const struct shim_config *cfg, const struct sessiond_open *o)
{
    struct shim_config sb_cfg;
    struct shim_sandbox *sb = NULL;

    if (o->lent_pid > 0)
        return shim_sandbox_open_lent(cfg, o->lent_fd, o->lent_pid, &sb) == 0 ? sb : NULL;
    sb_cfg = *cfg;
    sb_cfg.fork_server = 0; /* a fork server for one sandbox: a second Python */
    return shim_sandbox_open(&sb_cfg, &sb) == 0 ? sb : NULL;
}

/* Removes the session's directory if it is still this session's: once
 * its socket closed, a library may have started a successor in it (under
 * the identity's lock, taken here too), whose files stay. */
static void leave(const char *dir, const char *cid, const char *settings,
                  const struct shim_store_own *own)
{
    char iddir[SHIM_PATH_MAX];
    const char *slash = strrchr(dir, '/');
    int lock = -1;

    if (slash && (size_t)(slash - dir) < sizeof(iddir)) {
        memcpy(iddir, dir, (size_t)(slash - dir));
        iddir[slash - dir] = '\0';
        lock = shim_session_lock(iddir, 2000);
    }
    if (shim_store_is_own(dir, "sock", own))
        shim_session_remove(dir, cid, settings);
    else
        LOG_INFO("session %s: its directory is a successor's now; left to it", cid);
    if (lock >= 0)
        close(lock);
}

int sessiond_session(const struct shim_config *cfg, const struct sessiond_open *o,
                     const char *settings, int reply)
{
    struct shim_sandbox *sb;
    const char *dir = o->dir;
    char cid[64], pidtxt[32];
    struct sessiond_waiting w = {.n = 0};
    struct greeting g;
    struct shim_store_own own;
    long long last;
    int lfd;

    if (!(sb = own_sandbox(cfg, o))) {
        reply_host(reply, "", settings, "the session's sandbox could not be opened");
        return 1;
    }
    snprintf(cid, sizeof(cid), "%s", o->bind[0] ? o->bind : shim_sandbox_container_id(sb));
    write_file(dir, "cntr", cid);
    snprintf(pidtxt, sizeof(pidtxt), "%ld", (long)getpid());
    write_file(dir, "pid", pidtxt);
    snprintf(pidtxt, sizeof(pidtxt), "%d", o->ttl_s); /* for `codeshim sessions` */
    write_file(dir, "ttl", pidtxt);
    lfd = shim_proto_socket(dir, 1);
    if (lfd < 0) {
        reply_host(reply, cid, settings, "the session's socket could not be made");
        shim_sandbox_close(sb);
        shim_session_remove(dir, cid, settings);
        return 1;
    }
    shim_store_mark(dir, "sock", &own);
    reply_host(reply, cid, settings, NULL);
    LOG_INFO("session %s up, idle limit %d s", cid, o->ttl_s);
    last = now_s();
    g.cid = cid;
    g.settings = settings;
    while (!sessiond_stop) {
        long long left = last + o->ttl_s - now_s();
        int fd, rc;
        if (left <= 0)
            break;
        fd = sessiond_next(&w, lfd, left > 3600 ? 3600000 : (int)left * 1000, greet, &g);
        if (fd < 0)
            continue;
        rc = serve(fd, sb, cfg, cid, settings);
        close(fd);
        last = now_s();
        utimensat(AT_FDCWD, dir, NULL, 0);
        if (rc)
            break;
    }
    LOG_INFO("session %s ends", cid);
    sessiond_waiting_close(&w);
    close(lfd);
    shim_sandbox_close(sb);
    leave(dir, cid, settings, &own);
    return 0;
}
