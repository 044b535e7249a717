/* local_msg.c - every text the local sandbox backend gives the model (in
 * an execution's logs) or the log: why a sandbox could not be started
 * ("codeshim refused to run this code: ..." where the isolation is what
 * is missing), the notes on state lost before an execution, and what
 * ended an interpreter or the whole sandbox, with a hint when a limit did.
 * The model reads these: each says what happened and what was lost. */
#include "base/log.h"
#include "sandbox/local/local_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#define LOST_NOTE                                                              \
    "[Note: the Python interpreter was restarted before this execution; "      \
    "its earlier state (variables, imports) was lost. Files in the working "   \
    "directory were kept.]\n"
#define LOST_ALL_NOTE                                                          \
    "[Note: the sandbox was restarted before this execution; its earlier "     \
    "state (variables, imports) and the files in /mnt/data were lost.]\n"

void shim_local_fail(struct shim_local *l, enum shim_local_failure what,
                     const char *detail)
{
    char *w = l->why;
    size_t n = sizeof(l->why);

    switch (what) {
    case LF_PYTHON_MISSING:
        snprintf(w, n,
                 "The sandbox could not start the Python interpreter %.400s: %.400s",
                 l->p.python, detail);
        break;
    case LF_PYTHON_OUTSIDE:
        snprintf(w, n,
                 "codeshim refused to run this code: CODESHIM_PYTHON=%.400s "
                 "(%.400s) is outside /usr, the only part of the host the "
                 "sandbox shows; use a Python installed under /usr",
                 l->p.python, detail);
        break;
    case LF_TREE:
        snprintf(w, n,
                 "The sandbox directory %.400s could not be set up: %.400s",
                 l->root, detail);
        break;
    case LF_NO_BWRAP:
        snprintf(w, n,
                 "codeshim refused to run this code: bubblewrap (%.400s) is "
                 "not available (%.400s), so the sandbox's isolation cannot "
                 "be set up; install the Debian package bubblewrap",
                 l->p.bwrap, detail);
        break;
    case LF_SECCOMP:
        snprintf(w, n,
                 "codeshim refused to run this code: the sandbox's "
                 "seccomp filter could not be built (%.400s)",
                 detail);
        break;
    case LF_TOO_LONG:
        snprintf(w, n, "the sandbox command is too long");
        break;
    case LF_NO_SOCKET:
        snprintf(w, n, "no socket for the sandbox: %.400s", detail);
        break;
    case LF_NO_FDS:
        snprintf(w, n, "no descriptors left: %.400s", detail);
        break;
    case LF_SPAWN:
        if (l->p.unsafe)
            shim_local_fail(l, LF_PYTHON_MISSING, detail);
        else
            snprintf(w, n,
                     "codeshim refused to run this code: bubblewrap (%.400s) "
                     "could not be started (%.400s)",
                     l->p.bwrap, detail);
        break;
    case LF_PYTHON_FAILED:
        snprintf(w, n,
                 "The sandbox could not start the Python interpreter %.400s "
                 "(%.400s)",
                 l->p.python, detail);
        break;
    case LF_ISOLATION:
        snprintf(w, n,
                 "codeshim refused to run this code: the sandbox's isolation "
                 "could not be set up on this machine (%.400s)",
                 detail);
        break;
    }
}

int shim_local_refuse(struct shim_local *l, struct shim_buf *logs,
                      struct shim_exec_result *out)
{
    out->status = SHIM_EXEC_FAILED;
    shim_buf_addf(logs, "%s.\n", l->why);
    if (!strncmp(l->why, "codeshim refused", 16))
        shim_buf_adds(logs,
                      "Nothing was run. (For debugging only, "
                      "CODESHIM_UNSAFE_NO_ISOLATION=1 runs code without any "
                      "isolation.)\n");
    LOG_ERR("%s", l->why);
    out->logs = shim_buf_take(logs, &out->logs_len);
    return out->logs ? 0 : -ENOMEM;
}

int shim_local_too_large(size_t len, struct shim_buf *logs,
                         struct shim_exec_result *out)
{
    out->status = SHIM_EXEC_FAILED;
    shim_buf_addf(logs, "The code is too large (%zu bytes).\n", len);
    out->logs = shim_buf_take(logs, &out->logs_len);
    return out->logs ? 0 : -ENOMEM;
}

void shim_local_note_lost(struct shim_buf *logs, int all)
{
    shim_buf_adds(logs, all ? LOST_ALL_NOTE : LOST_NOTE);
}

static void end_line(struct shim_buf *logs)
{
    if (logs->len && logs->data[logs->len - 1] != '\n')
        shim_buf_adds(logs, "\n");
}

/* A hint for the model when a limit was what ended the interpreter. */
static const char *exit_hint(const char *exit_desc)
{
    if (strstr(exit_desc, "signal 24 "))
        return ": the CPU time limit (CODESHIM_CPU_TIME) was reached";
    if (strstr(exit_desc, "signal 25 "))
        return ": the file size limit (CODESHIM_FILE_SIZE) was reached";
    if (strstr(exit_desc, "signal 31 "))
        return ": the sandbox forbids that system call";
    return "";
}

void shim_local_ended(const struct shim_local *l, enum shim_local_reply_kind kind,
                      const char *exit_desc,
                      struct shim_buf *logs, struct shim_exec_result *out)
{
    end_line(logs);
    if (kind == SHIM_REPLY_TIMEOUT) {
        out->status = SHIM_EXEC_TIMEOUT;
        shim_buf_addf(logs,
                      "Execution timed out after %d s; the Python interpreter "
                      "was restarted and its state (variables, imports) was "
                      "lost.\n",
                      l->p.timeout_s);
    } else if (kind == SHIM_REPLY_DIED) {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(logs,
                      "The Python interpreter (%s) %.200s%s; it was restarted "
                      "and its state (variables, imports) was lost.\n",
                      l->p.python, exit_desc[0] ? exit_desc : "stopped",
                      exit_hint(exit_desc));
    } else {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_adds(logs, "The sandbox worker sent an invalid reply; it was "
                            "restarted and its state (variables, imports) was "
                            "lost.\n");
        LOG_WARN("sandbox worker sent an invalid reply; restarted it");
    }
}

void shim_local_lost(const struct shim_local *l, int rc, int st,
                     struct shim_buf *logs, struct shim_exec_result *out)
{
    end_line(logs);
    if (rc == -ETIMEDOUT) {
        out->status = SHIM_EXEC_TIMEOUT;
        shim_buf_addf(logs,
                      "Execution timed out after %d s and the sandbox did not "
                      "stop it; the sandbox was restarted: its state "
                      "(variables, imports) and the files in /mnt/data were "
                      "lost.\n",
                      l->p.timeout_s);
        LOG_WARN("sandbox did not answer within %d s; ended it",
                 l->p.timeout_s + GRACE_S);
    } else {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(logs,
                      "The sandbox %s (%s); it was restarted: its state "
                      "(variables, imports) and the files in /mnt/data were "
                      "lost.\n",
                      rc == -EPROTO ? "sent an invalid reply"
                                    : "stopped unexpectedly",
                      st != -1 && WIFSIGNALED(st) ? strsignal(WTERMSIG(st))
                                                  : strerror(-rc));
        LOG_WARN("sandbox failed (%s); ended it", strerror(-rc));
    }
}
