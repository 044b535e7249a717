/* session_exec.c - the channel to a session's supervisor
 * (sessiond/serve.c): one connection per execution, its greeting checked,
 * the code sent at most once (only an execution that never reached the
 * supervisor is tried again, after starting the session anew), a failure
 * told to the model as a result; and the file calls of /mnt/data, in
 * chunks. See session_int.h. */
#include "session/session.h"
#include "session/session_int.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/frame.h"
#include "base/json.h"
#include "base/log.h"
#include "session/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How far an execution got: only one that never reached the supervisor
 * may be tried again. */
enum stage { NOT_REACHED, NOT_SENT, SENT };

/* The supervisor's greeting: the session must have our settings; a new
 * container id means the sandbox is not the one we attached to: adopted
 * (with a note) when adopt, else -ESTALE (files are not for it). */
static int greeting(struct shim_session *b, int fd, int timeout_ms, int adopt)
{
    cJSON *g = NULL;
    const char *set, *cid;
    char old[64];
    int rc = shim_proto_recv(fd, &g, timeout_ms);

    if (rc == 0) {
        set = shim_json_str(g, "settings");
        cid = shim_json_str(g, "container_id");
        if (!set || strcmp(set, b->settings) || !cid || strlen(cid) >= sizeof(b->cid)) {
            LOG_ERR("session %s answered with other settings or no container id", b->name);
            rc = -EPROTO;
        } else if (strcmp(cid, b->cid) && !adopt) {
            rc = -ESTALE;
        } else if (strcmp(cid, b->cid)) {
            snprintf(old, sizeof(old), "%s", b->cid);
            snprintf(b->cid, sizeof(b->cid), "%s", cid);
            b->fresh = b->renewed = 1;
            shim_session_note_lost(b, old);
        }
    }
    cJSON_Delete(g);
    return rc;
}

/* One execution in the session: one connection. *stage says how far it
 * got when it fails. While it waits (for its turn, then for the code),
 * stop is asked every tick; once it says so the connection is closed
 * (-ECANCELED), which the supervisor takes, while the code runs, as the
 * order to interrupt it. */
static int session_exec(struct shim_session *b, const char *code, struct shim_exec_result *out,
                        const struct shim_exec_stop *stop, enum stage *stage)
{
    int timeout = b->cfg->exec_timeout_s * 3000 + 30000; /* may queue behind another */
    int fd = shim_session_connect(b->dir), rc;
    cJSON *msg = NULL, *ans = NULL;

    *stage = NOT_REACHED;
    if (fd < 0)
        return fd;
    /* the greeting waits while another request's code runs */
    rc = stop ? shim_frame_wait(fd, shim_clock_ms() + timeout, SHIM_EXEC_STOP_TICK_MS,
                                stop->fn, stop->ctx)
              : 0;
    if (rc == 0)
        rc = greeting(b, fd, timeout, 1);
    if (rc != -ECONNRESET) /* closed before its greeting: the supervisor was ending */
        *stage = NOT_SENT;
    if (rc == 0) {
        msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "op", "exec");
        rc = cJSON_AddStringToObject(msg, "code", code) ? shim_proto_send(fd, msg, 10000)
                                                        : -ENOMEM;
    }
    if (rc == 0) {
        *stage = SENT;
        rc = stop ? shim_frame_wait(fd, shim_clock_ms() + timeout, SHIM_EXEC_STOP_TICK_MS,
                                    stop->fn, stop->ctx)
                  : 0;
        if (rc == 0)
            rc = shim_proto_recv(fd, &ans, timeout);
        if (rc == 0)
            rc = shim_proto_result_from_json(ans, out);
    }
    cJSON_Delete(msg);
    cJSON_Delete(ans);
    close(fd);
    if (!rc)
        utimensat(AT_FDCWD, b->dir, NULL, 0);
    return rc;
}

/* A failed result whose text tells the model what happened. */
static int failure(struct shim_exec_result *out, enum stage stage, int err)
{
    char text[512];

    memset(out, 0, sizeof(*out));
    if (stage == SENT && err == -ECANCELED)
        snprintf(text, sizeof(text), "Execution interrupted: the request that ran it was "
                 "stopped (its time limit, or its program); the session's Python interpreter "
                 "was restarted and its state was lost.\n");
    else if (stage == NOT_SENT && err == -ECANCELED)
        snprintf(text, sizeof(text), "Not run: the request was stopped (its time limit, or "
                 "its program) while the session's sandbox was busy with another "
                 "execution.\n");
    else if (stage == NOT_SENT && err == -E2BIG)
        snprintf(text, sizeof(text), "Error: the code is too large for the session's channel "
                 "(at most %u bytes as JSON); it was not run.\n", SHIM_PROTO_MAX);
    else if (stage == NOT_SENT && err == -ETIMEDOUT)
        snprintf(text, sizeof(text), "Error: the session's sandbox stayed busy with another "
                 "execution (%s); the code was not run.\n", strerror(-err));
    else if (stage != SENT)
        snprintf(text, sizeof(text), "Error: the session's sandbox could not be reached (%s); "
                 "the code was not run.\n", strerror(-err));
    else if (err == -EPROTO)
        snprintf(text, sizeof(text), "Error: the session's sandbox sent an answer codeshim "
                 "cannot use; the code may have run, but its output is lost. It was not run "
                 "again.\n");
    else
        snprintf(text, sizeof(text), "Error: the session's sandbox stopped answering after the "
                 "code was sent (%s); the code may have run, partly or fully. It was not run "
                 "again; a later execution starts a new sandbox if this one is gone.\n",
                 strerror(-err));
    LOG_WARN("%.*s", (int)strcspn(text, "\n"), text);
    out->status = SHIM_EXEC_FAILED;
    out->logs = strdup(text);
    if (!out->logs)
        return -ENOMEM;
    out->logs_len = strlen(text);
    return 0;
}

/* The supervisor is gone (idle TTL, evicted): start the session anew. */
static int reattach(struct shim_session *b)
{
    char old[64];
    int rc, created = 0, lk = shim_session_lock(b->iddir, LOCK_WAIT_MS);

    snprintf(old, sizeof(old), "%s", b->cid);
    rc = lk < 0 ? lk : shim_session_attach(b, &created);
    if (lk >= 0)
        close(lk);
    if (rc == 0 && created) {
        b->fresh = b->renewed = 1;
        shim_session_note_lost(b, old);
    }
    return rc;
}

int shim_session_exec(struct shim_session *b, const char *code, size_t len,
                      const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    enum stage stage;
    char *c;
    int rc;

    if (!b)
        return -EINVAL;
    if (b->sb) {
        rc = shim_sandbox_exec_until(b->sb, code, len, stop, out);
        shim_session_remote_after(b);
        return rc;
    }
    c = strndup(code, len);
    if (!c)
        return -ENOMEM;
    rc = session_exec(b, c, out, stop, &stage);
    if (rc < 0 && stage == NOT_REACHED && (rc = reattach(b)) == 0)
        rc = session_exec(b, c, out, stop, &stage);
    free(c);
    return rc < 0 ? failure(out, stage, rc) : 0;
}

#define FILE_CHUNK (16u << 20) /* sessiond's */

/* One file request in the session: one connection; *ans the answer. */
static int file_call(struct shim_session *b, cJSON *msg, cJSON **ans)
{
    int fd = shim_session_connect(b->dir), rc;

    *ans = NULL;
    if (fd < 0) {
        cJSON_Delete(msg);
        return fd;
    }
    rc = greeting(b, fd, 30000, 0);
    if (rc == 0)
        rc = msg ? shim_proto_send(fd, msg, 30000) : -ENOMEM;
    if (rc == 0)
        rc = shim_proto_recv(fd, ans, 60000);
    cJSON_Delete(msg);
    close(fd);
    if (rc == 0 && cJSON_GetObjectItem(*ans, "errno")) {
        rc = -(int)cJSON_GetNumberValue(cJSON_GetObjectItem(*ans, "errno"));
        if (rc >= 0)
            rc = -EPROTO;
    }
    if (rc < 0) {
        cJSON_Delete(*ans);
        *ans = NULL;
    }
    return rc;
}

int shim_session_file_get(struct shim_session *b, const char *name, size_t max, char **out,
                          size_t *len)
{
    struct shim_buf acc;
    double size = 0;
    int rc = 0;

    *out = NULL;
    *len = 0;
    if (b->sb)
        return shim_sandbox_file_get(b->sb, name, max, out, len);
    shim_buf_init(&acc, max + 1);
    do {
        cJSON *msg = cJSON_CreateObject(), *ans;
        const char *b64;
        char *chunk;
        size_t n;

        cJSON_AddStringToObject(msg, "op", "get");
        cJSON_AddStringToObject(msg, "name", name);
        cJSON_AddNumberToObject(msg, "max", (double)max);
        cJSON_AddNumberToObject(msg, "offset", (double)acc.len);
        if ((rc = file_call(b, msg, &ans)) < 0)
            break;
        b64 = shim_json_str(ans, "data");
        size = cJSON_GetNumberValue(cJSON_GetObjectItem(ans, "size"));
        rc = b64 && size >= 0 && size <= (double)max ? shim_base64_decode(b64, &chunk, &n) : -EPROTO;
        cJSON_Delete(ans);
        if (rc < 0)
            break;
        rc = !n && (double)acc.len < size ? -EIO : n ? shim_buf_add(&acc, chunk, n) : 0;
        free(chunk);
    } while (rc == 0 && (double)acc.len < size);
    if (rc < 0) {
        shim_buf_free(&acc);
        return rc == -E2BIG ? -EFBIG : rc;
    }
    if (!acc.data && !(acc.data = calloc(1, 1)))
        return -ENOMEM;
    *out = shim_buf_take(&acc, len);
    return *out ? 0 : -ENOMEM;
}

int shim_session_file_put(struct shim_session *b, const char *name, const void *data,
                          size_t len)
{
    const char *p = data;
    size_t off = 0;
    int rc;

    if (b->sb)
        return shim_sandbox_file_put(b->sb, name, data, len);
    do {
        size_t n = len - off < FILE_CHUNK ? len - off : FILE_CHUNK;
        char *b64 = shim_base64_encode(p + off, n);
        cJSON *msg = cJSON_CreateObject(), *ans = NULL;

        if (!b64 || !msg) {
            free(b64);
            cJSON_Delete(msg);
            return -ENOMEM;
        }
        cJSON_AddStringToObject(msg, "op", "put");
        cJSON_AddStringToObject(msg, "name", name);
        cJSON_AddStringToObject(msg, "data", b64);
        free(b64);
        cJSON_AddBoolToObject(msg, "first", off == 0);
        cJSON_AddBoolToObject(msg, "last", off + n == len);
        rc = file_call(b, msg, &ans);
        cJSON_Delete(ans);
        if (rc < 0)
            return rc;
        off += n;
    } while (off < len);
    return 0;
}

int shim_session_file_remove(struct shim_session *b, const char *name)
{
    cJSON *msg, *ans = NULL;
    int rc;

    if (b->sb)
        return shim_sandbox_file_remove(b->sb, name);
    if (!(msg = cJSON_CreateObject()))
        return -ENOMEM;
    cJSON_AddStringToObject(msg, "op", "rm");
    cJSON_AddStringToObject(msg, "name", name);
    rc = file_call(b, msg, &ans);
    cJSON_Delete(ans);
    return rc;
}
