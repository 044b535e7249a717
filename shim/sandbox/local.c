/* local.c - the local sandbox backend: one persistent Python worker
 * (worker.py, embedded by sandbox.mk) per sandbox.
 *
 * Owns the worker's life: a private directory tree
 *   <tmpdir>/codeshim-XXXXXX/  (0700, removed on close)
 *     data/  the cwd, listed in files[]     home/  HOME
 *     tmp/   TMPDIR                          run/   the output capture file
 * the spawn (posix_spawn: clean allowlisted environment, no host fds, own
 * session so one kill reaches every child), the frame protocol over a
 * socketpair, the per-execution wall-clock limit, and restarts after a
 * timeout or a crash. The worker is started at create (so Python's start-up
 * overlaps whatever the caller does before the first exec) and restarted
 * lazily by the next exec after it was lost. */
#include "buf.h"
#include "config.h"
#include "log.h"
#include "sandbox_int.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* build/gen/worker_py.c (sandbox.mk) */
extern const char shim_worker_py[];
extern const size_t shim_worker_py_len;

#define FRAME_MAX (16u << 20) /* worker caps images at 12 MiB of base64 */
#define CODE_MAX (64u << 20)
#define MAX_IMAGES 16
#define MAX_FILES 1000
#define OUT_SLACK 4096 /* read beyond output_cap so sandbox.c can cut */
#define RM_MAX_DEPTH 128
/* Must match TRUNC_NOTE in sandbox.c, which merges the counts. */
#define TRUNC_NOTE "\n[... %zu bytes of output truncated ...]\n"

#define LOST_NOTE                                                              \
    "[Note: the Python interpreter was restarted before this execution; "      \
    "its earlier state (variables, imports) was lost. Files in the working "   \
    "directory were kept.]\n"

struct local {
    char python[SHIM_PATH_MAX];
    char root[SHIM_PATH_MAX];
    int timeout_s;
    size_t output_cap;
    pid_t pid;    /* worker (leader of its own session), or -1 */
    int fd;       /* our end of the socketpair, non-blocking, or -1 */
    uint32_t seq; /* last request number */
    int lost;     /* a worker was lost: say so in the next execution */
};

/* ---- paths and the directory tree ---- */

static int subpath(char *out, size_t outsz, const char *root, const char *sub)
{
    int n = snprintf(out, outsz, "%s/%s", root, sub);

    return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

static void rm_contents(int dfd, int depth);

/* Removes name in dfd, whatever it is, never following symlinks. */
static void rm_entry(int dfd, const char *name, int depth)
{
    int sub;

    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return;
    if (errno != EISDIR && errno != EPERM)
        return;
    if (depth >= RM_MAX_DEPTH)
        return;
    sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0 && errno == EACCES) {
        /* a directory the user's code made unreadable */
        fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW);
        sub = openat(dfd, name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (sub < 0)
        return;
    fchmod(sub, 0700); /* so its entries can be unlinked */
    rm_contents(sub, depth + 1);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Empties the directory dfd; takes ownership of dfd. */
static void rm_contents(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    struct dirent *e;

    if (!d) {
        close(dfd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rm_entry(dirfd(d), e->d_name, depth);
    }
    closedir(d);
}

static void rm_tree(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd >= 0)
        rm_contents(fd, 0);
    if (rmdir(path) != 0 && errno != ENOENT)
        LOG_WARN("could not remove sandbox directory %s: %s", path,
                 strerror(errno));
}

/* (Re)creates the subdirectories, and the root if user code removed it;
 * a root that is no longer our own directory is refused. */
static int ensure_tree(const struct local *l)
{
    static const char *const subs[] = {"data", "home", "tmp", "run"};
    char p[SHIM_PATH_MAX];
    struct stat st;
    size_t i;

    if (mkdir(l->root, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lstat(l->root, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return -EEXIST;
    chmod(l->root, 0700); /* whatever the host's umask */
    for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (subpath(p, sizeof(p), l->root, subs[i]))
            return -ENAMETOOLONG;
        if (mkdir(p, 0700) == 0)
            chmod(p, 0700);
        else if (errno != EEXIST)
            return -errno;
    }
    return 0;
}

static int make_tree(struct local *l, const char *tmpdir)
{
    int rc;

    if (subpath(l->root, sizeof(l->root), tmpdir, "codeshim-XXXXXX"))
        return -ENAMETOOLONG;
    if (!mkdtemp(l->root)) {
        rc = -errno;
        LOG_ERR("cannot create a sandbox directory in %s: %s", tmpdir,
                strerror(-rc));
        return rc;
    }
    rc = ensure_tree(l);
    if (rc) {
        LOG_ERR("cannot set up %s: %s", l->root, strerror(-rc));
        rm_tree(l->root);
    }
    return rc;
}

/* ---- the worker process ---- */

static int spawn_worker(struct local *l)
{
    char home[SHIM_PATH_MAX + 8], tmp[SHIM_PATH_MAX + 8],
        data[SHIM_PATH_MAX];
    char *const envp[] = {
        (char *)"PATH=/usr/local/bin:/usr/bin:/bin",
        home,
        (char *)"LANG=C.UTF-8",
        (char *)"MPLBACKEND=Agg",
        (char *)"PYTHONDONTWRITEBYTECODE=1",
        tmp,
        NULL,
    };
    char *const argv[] = {
        l->python, (char *)"-I", (char *)"-B", (char *)"-c",
        (char *)shim_worker_py, (char *)"3", l->root, NULL,
    };
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    int sv[2], rc;
    pid_t pid;

    if (snprintf(home, sizeof(home), "HOME=%s/home", l->root) >=
            (int)sizeof(home) ||
        snprintf(tmp, sizeof(tmp), "TMPDIR=%s/tmp", l->root) >=
            (int)sizeof(tmp) ||
        subpath(data, sizeof(data), l->root, "data"))
        return -ENAMETOOLONG;
    /* A socket, not a pipe: send(MSG_NOSIGNAL) means a dead worker can
     * never raise SIGPIPE in the host. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -errno;
    if (sv[1] <= 3) {
        /* the file actions below overwrite fds 0-3 before dup2(sv[1], 3) */
        int n = fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
        close(sv[1]);
        if (n < 0) {
            rc = -errno;
            close(sv[0]);
            return rc;
        }
        sv[1] = n;
    }
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0) {
        rc = -errno;
        close(sv[0]);
        close(sv[1]);
        return rc;
    }

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    posix_spawn_file_actions_addchdir_np(&fa, data);
    /* Own session (kill(-pid) reaches every child); the host's signal mask
     * and ignored signals are not inherited. */
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    if (strchr(l->python, '/'))
        rc = posix_spawn(&pid, l->python, &fa, &at, argv, envp);
    else
        rc = posix_spawnp(&pid, l->python, &fa, &at, argv, envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        return -rc;
    }
    l->pid = pid;
    l->fd = sv[0];
    return 0;
}

/* Kills the worker's whole process group, reaps the worker and closes the
 * channel. Returns the worker's wait status, or -1 if unknown. */
static int stop_worker(struct local *l)
{
    int st = -1;
    pid_t r;

    if (l->pid > 0) {
        kill(-l->pid, SIGKILL);
        kill(l->pid, SIGKILL);
        do
            r = waitpid(l->pid, &st, 0);
        while (r < 0 && errno == EINTR);
        if (r != l->pid)
            st = -1; /* the host reaped it (SIGCHLD handler or SIG_IGN) */
    }
    if (l->fd >= 0)
        close(l->fd);
    l->pid = -1;
    l->fd = -1;
    return st;
}

/* ---- framed I/O with a deadline ---- */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline: 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - now_ms();
        int n;

        if (left <= 0)
            return -ETIMEDOUT;
        n = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 0; /* readable, writable, HUP or ERR: the I/O call says */
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int send_all(int fd, const void *buf, size_t n, int64_t deadline)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc)
                return rc;
        } else if (w < 0 && errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* 0, -ECONNRESET at end of stream, -ETIMEDOUT or -errno. */
static int recv_all(int fd, void *buf, size_t n, int64_t deadline)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r == 0) {
            return -ECONNRESET;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc)
                return rc;
        } else if (errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

static int send_request(struct local *l, const char *code, size_t len,
                        int64_t deadline)
{
    unsigned char hdr[9];
    uint32_t n = (uint32_t)len + 5;
    int rc;

    l->seq++;
    hdr[0] = (unsigned char)(n >> 24);
    hdr[1] = (unsigned char)(n >> 16);
    hdr[2] = (unsigned char)(n >> 8);
    hdr[3] = (unsigned char)n;
    hdr[4] = 'E';
    hdr[5] = (unsigned char)(l->seq >> 24);
    hdr[6] = (unsigned char)(l->seq >> 16);
    hdr[7] = (unsigned char)(l->seq >> 8);
    hdr[8] = (unsigned char)l->seq;
    rc = send_all(l->fd, hdr, sizeof(hdr), deadline);
    if (rc == 0 && len)
        rc = send_all(l->fd, code, len, deadline);
    return rc;
}

/* Reads one frame into b (capped at FRAME_MAX): 0, -EPROTO for an
 * oversized frame, or a recv_all error. */
static int recv_frame(struct local *l, struct shim_buf *b, int64_t deadline)
{
    unsigned char hdr[4];
    char chunk[65536];
    size_t n;
    int rc = recv_all(l->fd, hdr, sizeof(hdr), deadline);

    if (rc)
        return rc;
    n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 |
        hdr[3];
    if (n > FRAME_MAX)
        return -EPROTO;
    shim_buf_init(b, n);
    while (n > 0) {
        size_t k = n < sizeof(chunk) ? n : sizeof(chunk);
        rc = recv_all(l->fd, chunk, k, deadline);
        if (rc == 0)
            rc = shim_buf_add(b, chunk, k);
        if (rc) {
            shim_buf_free(b);
            return rc;
        }
        n -= k;
    }
    if (!b->data)
        shim_buf_add(b, "", 0);
    return b->data ? 0 : -ENOMEM;
}

/* ---- results ---- */

static int is_base64(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '+' || *s == '/' || *s == '='))
            return 0;
    return 1;
}

/* Fills status, images and files from the worker's JSON; -EPROTO if it is
 * not a well-formed answer to request l->seq. */
static int parse_response(struct local *l, const char *json, size_t len,
                          struct shim_exec_result *out)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *seq, *status, *images, *files, *it;
    int rc = -EPROTO;

    if (!cJSON_IsObject(root))
        goto done;
    seq = cJSON_GetObjectItemCaseSensitive(root, "seq");
    status = cJSON_GetObjectItemCaseSensitive(root, "status");
    images = cJSON_GetObjectItemCaseSensitive(root, "images");
    files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!cJSON_IsNumber(seq) || seq->valuedouble != (double)l->seq ||
        !cJSON_IsString(status) || !cJSON_IsArray(images) ||
        !cJSON_IsArray(files))
        goto done;
    if (!strcmp(status->valuestring, "ok"))
        out->status = SHIM_EXEC_OK;
    else if (!strcmp(status->valuestring, "error"))
        out->status = SHIM_EXEC_ERROR;
    else
        goto done;

    rc = -ENOMEM;
    out->images = calloc(MAX_IMAGES, sizeof(*out->images));
    out->files = calloc(MAX_FILES, sizeof(*out->files));
    if (!out->images || !out->files)
        goto done;
    cJSON_ArrayForEach(it, images)
    {
        const cJSON *mime = cJSON_GetObjectItemCaseSensitive(it, "mime");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(it, "data");
        struct shim_exec_image *img;

        if (out->nimages >= MAX_IMAGES)
            break;
        if (!cJSON_IsString(mime) || strcmp(mime->valuestring, "image/png") ||
            !cJSON_IsString(data) || !is_base64(data->valuestring))
            continue;
        img = &out->images[out->nimages];
        img->mime = strdup("image/png");
        img->base64 = strdup(data->valuestring);
        if (!img->mime || !img->base64) {
            free(img->mime);
            free(img->base64);
            img->mime = img->base64 = NULL;
            goto done;
        }
        out->nimages++;
    }
    cJSON_ArrayForEach(it, files)
    {
        if (out->nfiles >= MAX_FILES)
            break;
        if (!cJSON_IsString(it) || !it->valuestring[0] ||
            strlen(it->valuestring) >= SHIM_PATH_MAX)
            continue;
        out->files[out->nfiles] = strdup(it->valuestring);
        if (!out->files[out->nfiles])
            goto done;
        out->nfiles++;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

static void add_range(struct shim_buf *b, int fd, off_t off, size_t n)
{
    char chunk[65536];

    while (n > 0) {
        ssize_t r = pread(fd, chunk, n < sizeof(chunk) ? n : sizeof(chunk),
                          off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || shim_buf_add(b, chunk, (size_t)r) != 0)
            return;
        off += r;
        n -= (size_t)r;
    }
}

/* Appends the execution's output (run/out) to b: all of it, or its head
 * and tail around a TRUNC_NOTE. The file is the user's to tamper with:
 * never follow a symlink, never block on a FIFO, never read it whole. */
static void read_output(const struct local *l, struct shim_buf *b)
{
    char p[SHIM_PATH_MAX];
    size_t keep = l->output_cap + OUT_SLACK, size;
    struct stat st;
    int fd;

    if (subpath(p, sizeof(p), l->root, "run/out"))
        return;
    fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        size = (size_t)st.st_size;
        if (size <= 2 * keep) {
            add_range(b, fd, 0, size);
        } else {
            add_range(b, fd, 0, keep);
            shim_buf_addf(b, TRUNC_NOTE, size - 2 * keep);
            add_range(b, fd, (off_t)(size - keep), keep);
        }
    }
    close(fd);
}

static void clear_output(const struct local *l)
{
    char p[SHIM_PATH_MAX];

    if (subpath(p, sizeof(p), l->root, "run/out") == 0)
        unlink(p);
}

static void describe_exit(struct shim_buf *b, int st)
{
    if (st != -1 && WIFEXITED(st)) {
        shim_buf_addf(b, "exited with status %d", WEXITSTATUS(st));
    } else if (st != -1 && WIFSIGNALED(st)) {
        const char *d = sigdescr_np(WTERMSIG(st));
        shim_buf_addf(b, "was killed by signal %d (%s)", WTERMSIG(st),
                      d ? d : "unknown");
    } else {
        shim_buf_adds(b, "stopped");
    }
}

/* A worker with something to say while idle (a stray frame, or the end of
 * the stream because it died) cannot be trusted with the next request. */
static int worker_idle_ok(const struct local *l)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN | POLLRDHUP};
    int n;

    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n == 0;
}

static int local_exec(void *state, const char *code, size_t len,
                      struct shim_exec_result *out)
{
    struct local *l = state;
    struct shim_buf logs, frame;
    int64_t deadline = now_ms() + (int64_t)l->timeout_s * 1000;
    int rc, st;

    shim_buf_init(&logs, 2 * (l->output_cap + OUT_SLACK) + 4096);
    if (l->pid > 0 && !worker_idle_ok(l)) {
        stop_worker(l);
        l->lost = 1;
    }
    if (l->lost) {
        shim_buf_adds(&logs, LOST_NOTE);
        l->lost = 0;
    }
    if (l->pid <= 0) {
        rc = ensure_tree(l); /* the lost worker's code may have removed it */
        if (rc == 0)
            rc = spawn_worker(l);
        if (rc) {
            out->status = SHIM_EXEC_FAILED;
            shim_buf_addf(&logs,
                          "The sandbox could not start the Python "
                          "interpreter %s: %s\n",
                          l->python, strerror(-rc));
            LOG_ERR("cannot start %s: %s", l->python, strerror(-rc));
            out->logs = shim_buf_take(&logs, &out->logs_len);
            return 0;
        }
    }
    if (len > CODE_MAX) {
        out->status = SHIM_EXEC_FAILED;
        shim_buf_addf(&logs, "The code is too large (%zu bytes).\n", len);
        out->logs = shim_buf_take(&logs, &out->logs_len);
        return 0;
    }

    clear_output(l); /* never report an earlier execution's output */
    rc = send_request(l, code, len, deadline);
    if (rc == 0) {
        rc = recv_frame(l, &frame, deadline);
        if (rc == 0) {
            rc = parse_response(l, frame.data, frame.len, out);
            shim_buf_free(&frame);
        }
    }
    if (rc == -ENOMEM) {
        /* the host is out of memory: the worker is fine, the result not */
        shim_exec_result_free(out);
        shim_buf_free(&logs);
        return -ENOMEM;
    }
    if (rc == 0) {
        read_output(l, &logs);
        out->logs = shim_buf_take(&logs, &out->logs_len);
        return 0;
    }

    /* Timeout, death or protocol breach: the interpreter is gone. */
    shim_exec_result_free(out);
    st = stop_worker(l);
    l->lost = 1;
    read_output(l, &logs);
    if (logs.len && logs.data[logs.len - 1] != '\n')
        shim_buf_adds(&logs, "\n");
    if (rc == -ETIMEDOUT) {
        out->status = SHIM_EXEC_TIMEOUT;
        shim_buf_addf(&logs,
                      "Execution timed out after %d s; the Python interpreter "
                      "was restarted and its state (variables, imports) was "
                      "lost.\n",
                      l->timeout_s);
    } else {
        out->status = SHIM_EXEC_FAILED;
        if (rc == -EPROTO) {
            shim_buf_adds(&logs, "The sandbox worker sent an invalid reply");
            LOG_WARN("sandbox worker sent an invalid reply; restarting it");
        } else {
            shim_buf_addf(&logs, "The Python interpreter (%s) ", l->python);
            describe_exit(&logs, st);
        }
        shim_buf_adds(&logs, "; it was restarted and its state (variables, "
                             "imports) was lost.\n");
    }
    out->logs = shim_buf_take(&logs, &out->logs_len);
    return 0;
}

static int local_create(const struct shim_config *cfg, void **state)
{
    struct local *l = calloc(1, sizeof(*l));
    int rc;

    if (!l)
        return -ENOMEM;
    if (strlen(cfg->python) >= sizeof(l->python)) {
        free(l);
        return -ENAMETOOLONG;
    }
    memcpy(l->python, cfg->python, strlen(cfg->python) + 1);
    l->timeout_s = cfg->exec_timeout_s > 0 ? cfg->exec_timeout_s : 60;
    l->output_cap = cfg->output_cap ? cfg->output_cap : 20000;
    l->pid = -1;
    l->fd = -1;
    rc = make_tree(l, cfg->tmpdir[0] ? cfg->tmpdir : "/tmp");
    if (rc) {
        free(l);
        return rc;
    }
    rc = spawn_worker(l);
    if (rc)
        LOG_WARN("cannot start %s: %s (retried on first execution)",
                 l->python, strerror(-rc));
    *state = l;
    return 0;
}

static void local_destroy(void *state)
{
    struct local *l = state;

    if (!l)
        return;
    stop_worker(l);
    rm_tree(l->root);
    free(l);
}

const struct shim_sandbox_ops shim_sandbox_local = {
    .name = "local",
    .create = local_create,
    .exec = local_exec,
    .destroy = local_destroy,
};
