/* local_exec.c - one execution in a local sandbox: the sandbox is checked
 * (nothing may arrive between executions), started again if it was lost
 * and waited for; the code goes out as one request frame; the reply, with
 * a backstop deadline of the time limit plus GRACE_S, becomes the result:
 * status, output, images, the files in /mnt/data. A supervisor that does
 * not answer as it must ends the whole sandbox (the next execution starts
 * a new one and says so). The texts are local_msg.c's. */
#include "sandbox/local/local_int.h"

#include "base/text.h"

#include "base/frame.h"
#include "sandbox/sandbox.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define CODE_MAX (64u << 20)

static int take_images(const cJSON *worker, struct shim_exec_result *out)
{
    const cJSON *images = cJSON_GetObjectItemCaseSensitive(worker, "images");
    const cJSON *it;

    if (!cJSON_IsArray(images))
        return -EPROTO;
    cJSON_ArrayForEach(it, images)
    {
        const cJSON *mime = cJSON_GetObjectItemCaseSensitive(it, "mime");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(it, "data");
        int rc;

        if (!cJSON_IsString(mime) || strcmp(mime->valuestring, "image/png") ||
            !cJSON_IsString(data))
            continue;
        if ((rc = shim_exec_image_add(&out->images, &out->nimages, "image/png",
                                      data->valuestring)) < 0)
            return rc;
    }
    return 0;
}

static int take_files(const cJSON *meta, struct shim_exec_result *out)
{
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(meta, "files");
    const cJSON *it;

    if (!cJSON_IsArray(files))
        return -EPROTO;
    out->files_changed =
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "changed"));
    out->files = calloc(SHIM_RESULT_MAX_FILES, sizeof(*out->files));
    if (!out->files)
        return -ENOMEM;
    cJSON_ArrayForEach(it, files)
    {
        if (out->nfiles >= SHIM_RESULT_MAX_FILES)
            break;
        if (!cJSON_IsString(it) || !it->valuestring[0] ||
            strlen(it->valuestring) >= SHIM_PATH_MAX)
            continue;
        out->files[out->nfiles] = strdup(it->valuestring);
        if (!out->files[out->nfiles])
            return -ENOMEM;
        out->nfiles++;
    }
    return 0;
}

/* Builds *out from a well-formed reply; logs holds the notes so far. */
static int fill_result(const struct shim_local *l, const struct shim_local_reply *r,
                       struct shim_buf *logs, struct shim_exec_result *out)
{
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(r->meta, "exit");
    const char *exit_desc = cJSON_IsString(ex) ? ex->valuestring : "";
    int rc;

    if (r->kind == SHIM_REPLY_DONE) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(r->worker, "status");
        if (!cJSON_IsString(s) ||
            (strcmp(s->valuestring, "ok") && strcmp(s->valuestring, "error")))
            return -EPROTO;
        out->status = strcmp(s->valuestring, "ok") ? SHIM_EXEC_ERROR
                                                   : SHIM_EXEC_OK;
        rc = take_images(r->worker, out);
        if (rc)
            return rc;
    }
    rc = take_files(r->meta, out);
    if (rc)
        return rc;
    shim_buf_add(logs, r->out, r->out_len);
    if (r->kind != SHIM_REPLY_DONE)
        shim_local_ended(l, r->kind, exit_desc, logs, out);
    return 0;
}

/* How long an interrupted request may take to be answered (the
 * supervisor kills the interpreter and lists the files) before the whole
 * sandbox is ended instead. */
#define STOP_GRACE_MS 3000

/* Waits for the reply to begin, asking stop between ticks; once stop
 * says so, asks the supervisor to interrupt the code and gives it
 * STOP_GRACE_MS. Then reads the reply frame. */
static int wait_reply(struct shim_local *l, const struct shim_exec_stop *stop,
                      int64_t deadline, struct shim_buf *frame, int *stopped)
{
    if (stop && shim_frame_wait(l->fd, deadline, SHIM_EXEC_STOP_TICK_MS, stop->fn,
                                stop->ctx) == -ECANCELED) {
        int64_t grace = shim_clock_ms() + STOP_GRACE_MS;
        *stopped = 1;
        if (grace < deadline)
            deadline = grace;
        shim_local_send_interrupt(l, deadline);
    }
    return shim_local_recv_frame(l, frame, deadline);
}

/* The result of an execution its request stopped: the code's output is
 * nobody's now; what the sandbox knows is that its state is gone. */
static int interrupted(struct shim_exec_result *out)
{
    static const char text[] = "Execution interrupted: the request that ran it was stopped "
                               "(its time limit, or its program); the Python interpreter "
                               "was restarted and its state (variables, imports) was lost.\n";

    shim_exec_result_free(out);
    memset(out, 0, sizeof(*out));
    out->status = SHIM_EXEC_FAILED;
    out->logs = strdup(text);
    out->logs_len = out->logs ? sizeof(text) - 1 : 0;
    return out->logs ? 0 : -ENOMEM;
}

static int exec_once(struct shim_local *l, const char *code, size_t len,
                     const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    struct shim_buf logs, frame;
    struct shim_local_reply r;
    int64_t deadline;
    int rc, st, stopped = 0;

    shim_buf_init(&logs, 2 * (l->p.output_cap + OUT_SLACK) + 4096);
    if (len > CODE_MAX)
        return shim_local_too_large(len, &logs, out);
    if (l->pid > 0 && l->up && l->fd >= 0) {
        /* nothing may arrive between executions */
        struct pollfd p = {.fd = l->fd, .events = POLLIN | POLLRDHUP};
        if (poll(&p, 1, 0) != 0)
            shim_local_stop(l, NULL, 0);
    }
    if (l->pid <= 0 && shim_local_start(l) != 0)
        return shim_local_refuse(l, &logs, out);
    if (!l->up && shim_local_wait_up(l) != 0)
        return shim_local_refuse(l, &logs, out);
    if (l->lost_all) {
        shim_local_note_lost(&logs, 1);
        l->lost_all = 0;
    }
    l->used = 1;
    deadline = shim_clock_ms() + ((int64_t)l->p.timeout_s + GRACE_S) * 1000;
    rc = shim_local_send_request(l, code, len, deadline);
    if (rc == 0)
        rc = wait_reply(l, stop, deadline, &frame, &stopped);
    if (rc == 0) {
        rc = shim_local_split_reply(l, &frame, &r);
        if (rc == 0) {
            if (r.restarted)
                shim_local_note_lost(&logs, 0);
            rc = fill_result(l, &r, &logs, out);
            shim_local_reply_free(&r);
        }
        shim_buf_free(&frame);
    }
    if (rc == -ENOMEM) {
        shim_exec_result_free(out);
        shim_buf_free(&logs);
        return -ENOMEM;
    }
    if (rc == 0 && stopped) {
        shim_buf_free(&logs);
        return interrupted(out);
    }
    if (rc == 0) {
        out->logs = shim_buf_take(&logs, &out->logs_len);
        return out->logs ? 0 : -ENOMEM;
    }

    /* The supervisor did not answer as it must: end the whole sandbox. */
    shim_exec_result_free(out);
    st = shim_local_stop(l, NULL, 0);
    l->lost_all = 0; /* said right here */
    shim_local_lost(l, rc, st, &logs, out);
    out->logs = shim_buf_take(&logs, &out->logs_len);
    return out->logs ? 0 : -ENOMEM;
}

int shim_local_exec(struct shim_local *l, const char *code, size_t len,
                    const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    return exec_once(l, code, len, stop, out);
}
