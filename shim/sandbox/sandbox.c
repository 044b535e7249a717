/* sandbox.c - the sandbox dispatcher: implements sandbox.h over a backend
 * ops table (sandbox_int.h) and applies the policy common to all backends:
 * container ids, one execution at a time per sandbox, timing, and logs
 * that are valid UTF-8 text capped at cfg->output_cap with a visible note
 * (head and tail kept), followed by one line per image produced and, when
 * the execution changed the working directory and it is not empty, one
 * line listing its files ("[files in /mnt/data: a.csv, plot.png]", at most
 * FILES_LINE bytes), so the model can refer to them. These lines come
 * after the cut: the model always learns of them. */
#include "base/clock.h"
#include "base/ids.h"
#include "base/log.h"
#include "base/text.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_int.h"
#include "system/config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Backends may insert the same note when they cut output themselves;
 * cap_logs() adds the counts of the notes it drops into its own. */
#define TRUNC_NOTE "\n[... %zu bytes of output truncated ...]\n"
#define TRUNC_HEAD "\n[... "
#define TRUNC_TAIL " bytes of output truncated ...]\n"
#define TRUNC_NOTE_MAX 64

struct shim_sandbox {
    const struct shim_sandbox_ops *ops;
    void *state;
    size_t output_cap;
    pthread_mutex_t mu; /* the backends are not reentrant */
    char id[64];
};

static const struct shim_sandbox_ops *const backends[] = {
    &shim_sandbox_local,
    &shim_sandbox_e2b,
};

static const struct shim_sandbox_ops *backend_of(const struct shim_config *cfg)
{
    size_t i;

    for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (!strcmp(cfg->sandbox, backends[i]->name))
            return backends[i];
    return NULL;
}

int shim_sandbox_keeps_sessions(const struct shim_config *cfg)
{
    const struct shim_sandbox_ops *ops = cfg ? backend_of(cfg) : NULL;
    return ops && ops->create_at;
}

int shim_sandbox_open(const struct shim_config *cfg, struct shim_sandbox **out)
{
    return shim_sandbox_open_at(cfg, NULL, NULL, out);
}

/* How open_with makes it. */
enum how { CREATE, FORKED, LENT };
struct lent {
    int fd;
    long pid;
};

/* A sandbox of cfg's backend: made by create_at (with net and tag), by
 * create_forked (forked), by create_lent (of a lent socket), or by
 * create. */
static int open_with(const struct shim_config *cfg, const struct shim_http_net *net,
                     const struct shim_sandbox_tag *tag, enum how forked,
                     const struct lent *lent, struct shim_sandbox **out)
{
    const struct shim_sandbox_ops *ops;
    struct shim_sandbox *sb;
    int rc;

    if (!out)
        return -EINVAL;
    *out = NULL;
    if (!cfg)
        return -EINVAL;
    ops = backend_of(cfg);
    if (!ops) {
        LOG_ERR("unknown sandbox backend \"%.32s\" (known: local, e2b)",
                cfg->sandbox);
        return -EINVAL;
    }
    if ((forked == FORKED && !ops->create_forked) || (forked == LENT && !ops->create_lent))
        return -EAGAIN;
    sb = calloc(1, sizeof(*sb));
    if (!sb)
        return -ENOMEM;
    sb->ops = ops;
    sb->output_cap = cfg->output_cap ? cfg->output_cap : 20000;
    shim_id_make(sb->id, sizeof(sb->id), "cntr_", 48);
    rc = pthread_mutex_init(&sb->mu, NULL);
    if (rc) {
        free(sb);
        return -rc;
    }
    if (forked == FORKED)
        rc = ops->create_forked(cfg, &sb->state);
    else if (forked == LENT)
        rc = ops->create_lent(cfg, lent->fd, lent->pid, &sb->state);
    else
        rc = ops->create_at ? ops->create_at(cfg, net, tag, &sb->state)
                            : ops->create(cfg, &sb->state);
    if (rc) {
        pthread_mutex_destroy(&sb->mu);
        free(sb);
        return rc;
    }
    *out = sb;
    return 0;
}

int shim_sandbox_open_at(const struct shim_config *cfg, const struct shim_http_net *net,
                         const struct shim_sandbox_tag *tag, struct shim_sandbox **out)
{
    return open_with(cfg, net, tag, CREATE, NULL, out);
}

/* ---- handing a sandbox to a fork of this process ---- */

void shim_sandbox_tidy(const struct shim_config *cfg)
{
    const struct shim_sandbox_ops *ops = cfg ? backend_of(cfg) : NULL;

    if (ops && ops->tidy)
        ops->tidy(cfg);
}

int shim_sandbox_keep_warm(const struct shim_config *cfg)
{
    const struct shim_sandbox_ops *ops = cfg ? backend_of(cfg) : NULL;

    return ops && ops->warm ? ops->warm(cfg) : -ENOTSUP;
}

int shim_sandbox_open_forked(const struct shim_config *cfg, struct shim_sandbox **out)
{
    return open_with(cfg, NULL, NULL, FORKED, NULL, out);
}

int shim_sandbox_lend(struct shim_sandbox *sb, int *fd, long *pid)
{
    int rc;

    if (!sb || !sb->ops->lend)
        return -ENOTSUP;
    pthread_mutex_lock(&sb->mu);
    rc = sb->ops->lend(sb->state, fd, pid);
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

int shim_sandbox_life_fd(const struct shim_sandbox *sb)
{
    return sb && sb->ops->life_fd ? sb->ops->life_fd(sb->state) : -1;
}

int shim_sandbox_open_lent(const struct shim_config *cfg, int fd, long pid,
                           struct shim_sandbox **out)
{
    struct lent l = {fd, pid};
    int rc = open_with(cfg, NULL, NULL, LENT, &l, out);

    if (rc && fd >= 0)
        close(fd); /* create_lent leaves it open when it fails */
    return rc;
}

int shim_sandbox_file_get(struct shim_sandbox *sb, const char *name, size_t max, char **out,
                          size_t *len)
{
    int rc;

    *out = NULL;
    *len = 0;
    if (!sb->ops->file_get)
        return -ENOTSUP;
    pthread_mutex_lock(&sb->mu);
    rc = sb->ops->file_get(sb->state, name, max, out, len);
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

int shim_sandbox_file_put(struct shim_sandbox *sb, const char *name, const void *data,
                          size_t len)
{
    int rc;

    if (!sb->ops->file_put)
        return -ENOTSUP;
    pthread_mutex_lock(&sb->mu);
    rc = sb->ops->file_put(sb->state, name, data, len);
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

int shim_sandbox_file_remove(struct shim_sandbox *sb, const char *name)
{
    int rc;

    if (!sb->ops->file_remove)
        return -ENOTSUP;
    pthread_mutex_lock(&sb->mu);
    rc = sb->ops->file_remove(sb->state, name);
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

int shim_sandbox_is_new(const struct shim_sandbox *sb)
{
    return !sb || !sb->ops->is_new || sb->ops->is_new(sb->state);
}

const char *shim_sandbox_container_id(const struct shim_sandbox *sb)
{
    const char *own;

    if (!sb)
        return "";
    own = sb->ops->container_id ? sb->ops->container_id(sb->state) : NULL;
    return own ? own : sb->id;
}

const char *shim_sandbox_take_note(struct shim_sandbox *sb)
{
    return sb && sb->ops->take_note ? sb->ops->take_note(sb->state) : NULL;
}

void shim_sandbox_close(struct shim_sandbox *sb)
{
    if (!sb)
        return;
    pthread_mutex_lock(&sb->mu); /* let a running execution finish */
    sb->ops->destroy(sb->state);
    pthread_mutex_unlock(&sb->mu);
    pthread_mutex_destroy(&sb->mu);
    free(sb);
}

void shim_sandbox_end(struct shim_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->ops->end) {
        pthread_mutex_lock(&sb->mu);
        sb->ops->end(sb->state);
        pthread_mutex_unlock(&sb->mu);
    }
    shim_sandbox_close(sb);
}

/* How many bytes of the original output the dropped text s[0..n) stands
 * for: its own length, with each note in it replaced by its count. */
static size_t dropped_weight(const char *s, size_t n)
{
    size_t hl = strlen(TRUNC_HEAD), tl = strlen(TRUNC_TAIL), w = n, i;

    for (i = 0; i + hl <= n; i++) {
        size_t j = i + hl, v = 0, digits = 0;

        if (memcmp(s + i, TRUNC_HEAD, hl))
            continue;
        while (j < n && s[j] >= '0' && s[j] <= '9' && digits < 18) {
            v = v * 10 + (size_t)(s[j++] - '0');
            digits++;
        }
        if (!digits || j + tl > n || memcmp(s + j, TRUNC_TAIL, tl))
            continue;
        w = w - (j + tl - i) + v; /* the note's bytes are part of w */
        i = j + tl - 1;
    }
    return w;
}

/* Cuts r->logs to at most cap bytes: head and tail on UTF-8 boundaries
 * around one TRUNC_NOTE. */
static int cap_text(struct shim_exec_result *r, size_t cap)
{
    const unsigned char *s = (const unsigned char *)r->logs;
    size_t n = r->logs_len, keep, head, tail, dropped;
    char note[TRUNC_NOTE_MAX];
    char *t;
    int nl;

    if (n <= cap)
        return 0;
    keep = cap > TRUNC_NOTE_MAX ? cap - TRUNC_NOTE_MAX : 0;
    head = shim_text_cut_back((const char *)s, keep / 2);
    tail = shim_text_cut_forward((const char *)s, n - (keep - keep / 2), n);
    dropped = dropped_weight(r->logs + head, tail - head);
    nl = snprintf(note, sizeof(note), TRUNC_NOTE, dropped);
    t = malloc(head + (size_t)nl + (n - tail) + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t, r->logs, head);
    memcpy(t + head, note, (size_t)nl);
    memcpy(t + head + (size_t)nl, r->logs + tail, n - tail);
    r->logs_len = head + (size_t)nl + (n - tail);
    t[r->logs_len] = '\0';
    free(r->logs);
    r->logs = t;
    return 0;
}

/* "[files in /mnt/data: a.csv, plot.png]\n" into buf (at most FILES_LINE
 * bytes; names beyond that are counted, not listed; control characters
 * become '?'), or "" when there is nothing new to say: no file, or the
 * same listing as after the previous execution. */
#define FILES_LINE 1024
static void files_line(const struct shim_exec_result *r, char *buf)
{
    static const char head[] = "[files in /mnt/data: ";
    size_t n = sizeof(head) - 1, i, j;

    buf[0] = '\0';
    if (!r->nfiles || !r->files_changed)
        return;
    memcpy(buf, head, n);
    for (i = 0; i < r->nfiles; i++) {
        const char *f = r->files[i];
        size_t len = strlen(f);

        /* room for ", ", the name, and " ... and 1000 more]\n" */
        if (n + 2 + len + 32 >= FILES_LINE) {
            n += (size_t)snprintf(buf + n, FILES_LINE - n, "%s... and %zu more",
                                  i ? ", " : "", r->nfiles - i);
            break;
        }
        if (i) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        for (j = 0; j < len; j++)
            buf[n++] = (unsigned char)f[j] < 0x20 || f[j] == 0x7f ? '?' : f[j];
    }
    memcpy(buf + n, "]\n", 3);
}

static const char *image_kind(const struct shim_exec_image *im)
{
    return im->mime && !strcmp(im->mime, "image/jpeg") ? "JPEG" : "PNG";
}

static int finish_logs(struct shim_exec_result *r, size_t cap)
{
    char line[64], files[FILES_LINE];
    size_t notes = 0, i, body_cap, room;
    char *t;
    int rc;

    if (!r->logs) {
        r->logs = strdup("");
        r->logs_len = 0;
        if (!r->logs)
            return -ENOMEM;
    }
    shim_text_sanitize_utf8(r->logs, r->logs_len);
    /* image lines come after the cut so the model always learns of them */
    for (i = 0; i < r->nimages; i++)
        notes += (size_t)snprintf(line, sizeof(line),
                                  "[image produced: figure %zu (%s)]\n",
                                  i + 1, image_kind(&r->images[i])) + 1;
    files_line(r, files);
    notes += strlen(files);
    body_cap = notes < cap / 2 ? cap - notes : cap / 2;
    rc = cap_text(r, body_cap);
    if (rc || !notes)
        return rc;
    room = r->logs_len + notes + 2;
    t = realloc(r->logs, room);
    if (!t)
        return -ENOMEM;
    r->logs = t;
    if (r->logs_len && t[r->logs_len - 1] != '\n')
        t[r->logs_len++] = '\n';
    for (i = 0; i < r->nimages; i++)
        r->logs_len += (size_t)snprintf(t + r->logs_len, room - r->logs_len,
                                        "[image produced: figure %zu (%s)]\n",
                                        i + 1, image_kind(&r->images[i]));
    r->logs_len += (size_t)snprintf(t + r->logs_len, room - r->logs_len, "%s",
                                    files);
    return 0;
}

int shim_sandbox_exec(struct shim_sandbox *sb, const char *code, size_t len,
                      struct shim_exec_result *out)
{
    return shim_sandbox_exec_until(sb, code, len, NULL, out);
}

int shim_sandbox_exec_until(struct shim_sandbox *sb, const char *code, size_t len,
                            const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    double t0, t1;
    int rc;

    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    if (!sb || (!code && len))
        return -EINVAL;
    if (!code)
        code = "";
    pthread_mutex_lock(&sb->mu);
    t0 = shim_clock_s();
    rc = stop && sb->ops->exec_until ? sb->ops->exec_until(sb->state, code, len, stop, out)
                                     : sb->ops->exec(sb->state, code, len, out);
    t1 = shim_clock_s();
    pthread_mutex_unlock(&sb->mu);
    if (rc == 0)
        rc = finish_logs(out, sb->output_cap);
    if (rc) {
        shim_exec_result_free(out);
        return rc;
    }
    out->seconds = t1 - t0;
    return 0;
}
