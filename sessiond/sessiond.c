/* sessiond.c - codeshim-sessiond, the supervisor of one session.
 *
 *   codeshim-sessiond DIR SETTINGS [CONTAINER_ID]
 *
 * Started by the library (shim/session.c) when a request names a session
 * that has no supervisor yet. It refuses to start unless the program's
 * CODESHIM_* settings it inherited have the fingerprint SETTINGS (the one
 * the session is named after, session.h). It daemonises (its first process
 * exits once the socket listens, so the program never holds a zombie),
 * opens one sandbox through sandbox.h with those settings, and serves
 * DIR/sock (protocol: proto.h): one connection at a time, so executions
 * from several programs sharing the session are serialised. Every
 * execution gets an answer (and {"op":"get"} / {"op":"put"} move a file of
 * /mnt/data as base64, at most FILE_CHUNK bytes a request: a get names an
 * offset; a put with "first" starts the file, the one with "last" ends
 * it). CONTAINER_ID, when given (an explicit container, cstore.h), is the
 * id the session reports. A result too large for a frame is cut (with a
 * note), and one that still cannot be sent becomes an error saying so; the
 * connection is never just closed on a result. It exits by itself after
 * CODESHIM_SESSION_TTL seconds without a request, or on {"op":"close"} or
 * SIGTERM, closing the sandbox (every sandbox process ends) and removing
 * DIR. It touches DIR on every use: the library's LRU cap reads that. */
#include "base64.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "proto.h"
#include "sandbox.h"
#include "session.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static long long now_s(void)
{
    return shim_clock_ms() / 1000;
}


/* The session's small files (container id, pid), written atomically: a
 * library reading them at the same moment sees the old text or the new. */
static void write_file(const char *dir, const char *name, const char *text)
{
    char p[SHIM_PATH_MAX + 16];

    if (shim_store_join(p, sizeof(p), dir, name) < 0 || shim_store_write(p, text) < 0)
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

/* A put in progress: chunks accumulate until the last one. */
static struct {
    char name[256];
    char *data;
    size_t len;
} pending;

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

static cJSON *put_file(struct shim_sandbox *sb, const cJSON *req)
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
        free(pending.data);
        memset(&pending, 0, sizeof(pending));
        snprintf(pending.name, sizeof(pending.name), "%s", name);
    } else if (strcmp(pending.name, name)) {
        return file_answer(-EPROTO);
    }
    if ((rc = shim_base64_decode(b64, &chunk, &n)) < 0)
        return file_answer(rc);
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
    free(pending.data);
    memset(&pending, 0, sizeof(pending));
    return file_answer(rc);
}

/* One connection: our greeting, then one request. Returns 1 when the
 * session must end. */
static int serve(int fd, struct shim_sandbox *sb, const char *cid, const char *settings)
{
    cJSON *req = NULL, *ans;
    const char *op, *code;
    int end = 0;

    ans = envelope(cJSON_CreateObject(), cid, settings);
    if (!ans || shim_proto_send(fd, ans, 10000) < 0 || shim_proto_recv(fd, &req, 10000) < 0) {
        cJSON_Delete(ans);
        return 0;
    }
    cJSON_Delete(ans);
    op = cJSON_GetStringValue(cJSON_GetObjectItem(req, "op"));
    code = cJSON_GetStringValue(cJSON_GetObjectItem(req, "code"));
    if (op && !strcmp(op, "exec") && code) {
        struct shim_exec_result r;
        if (shim_sandbox_exec(sb, code, strlen(code), &r) == 0) {
            ans = shim_proto_result_to_json(&r);
            shim_exec_result_free(&r);
        } else {
            ans = error_answer("Error: the session's sandbox failed.");
        }
        send_answer(fd, envelope(ans, cid, settings), cid, settings);
    } else if (op && (!strcmp(op, "get") || !strcmp(op, "put"))) {
        ans = envelope(!strcmp(op, "get") ? get_file(sb, req) : put_file(sb, req), cid, settings);
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

int main(int argc, char **argv)
{
    const struct shim_config *cfg;
    struct shim_config sb_cfg;
    struct shim_sandbox *sb = NULL;
    struct sigaction sa;
    int ready[2], lfd;
    char cid[64] = "", pidtxt[32], mine[65], c;
    const char *dir, *settings;
    long long last;
    pid_t pid;

    if ((argc != 3 && argc != 4) || argv[1][0] != '/' ||
        (argc == 4 && (strncmp(argv[3], "cntr_", 5) || strlen(argv[3]) >= sizeof(cid)))) {
        fprintf(stderr, "usage: %s /path/to/session-dir SETTINGS [CONTAINER_ID] (started by "
                "libcodeshim)\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    settings = argv[2];
    cfg = shim_config();
    shim_session_settings(cfg, mine);
    if (strcmp(mine, settings)) { /* the environment changed since the program read it */
        LOG_ERR("refusing to start session %s: its sandbox settings are not the ones "
                "this program uses", dir);
        return 1;
    }
    if (pipe(ready) < 0)
        return 1;
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid > 0) { /* the first process: report readiness, then go */
        close(ready[1]);
        return read(ready[0], &c, 1) == 1 && c == 'R' ? 0 : 1;
    }
    close(ready[0]);
    setsid();
    umask(077);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    /* One sandbox for the daemon's whole life: a fork server of its own
     * would cost a second Python and its imports for nothing (it forks
     * only when the sandbox is lost), so it starts the cold way. */
    sb_cfg = *cfg;
    sb_cfg.fork_server = 0;
    if (shim_sandbox_open(&sb_cfg, &sb) < 0)
        return 1;
    snprintf(cid, sizeof(cid), "%s", argc == 4 ? argv[3] : shim_sandbox_container_id(sb));
    write_file(dir, "cntr", cid);
    snprintf(pidtxt, sizeof(pidtxt), "%ld", (long)getpid());
    write_file(dir, "pid", pidtxt);
    lfd = shim_proto_socket(dir, 1);
    if (lfd < 0) {
        shim_sandbox_close(sb);
        shim_session_remove(dir, cid, settings);
        return 1;
    }
    if (write(ready[1], "R", 1) != 1)
        LOG_WARN("readiness pipe closed");
    close(ready[1]);
    LOG_INFO("session %s up, idle limit %d s", cid, cfg->session_ttl_s);
    last = now_s();
    while (!stop) {
        struct pollfd p = {lfd, POLLIN, 0};
        long long left = last + cfg->session_ttl_s - now_s();
        int fd, rc;
        if (left <= 0)
            break;
        rc = poll(&p, 1, left > 3600 ? 3600000 : (int)left * 1000);
        if (rc <= 0)
            continue;
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        rc = serve(fd, sb, cid, settings);
        close(fd);
        last = now_s();
        utimensat(AT_FDCWD, dir, NULL, 0);
        if (rc)
            break;
    }
    LOG_INFO("session %s ends", cid);
    close(lfd);
    shim_sandbox_close(sb);
    shim_session_remove(dir, cid, settings);
    return 0;
}
