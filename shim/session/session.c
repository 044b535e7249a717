/* session.c - see session.h. The library side of sessions: naming, the
 * private runtime directory, attach-or-start under a per-identity lock,
 * LRU eviction, and one connection per execution to the supervisor
 * (sessiond/serve.c), sent at most once. A process is started here only
 * for the identity's session host (codeshim-sessiond, sessiond/host.c),
 * which forks each supervisor; the sandbox itself is sandbox/'s
 * business. */
#include "session/session.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "base/frame.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sha256.h"
#include "session/proto.h"
#include "session/quota.h"
#include "store/cstore.h"
#include "store/store.h"
#include "system/config.h"

#include <dirent.h>
#include <poll.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NAME_HEX 32 /* 128 bits of SHA-256 per path component */
#define LOCK_WAIT_MS 30000
#define HOST_OPEN_MS 60000 /* a session's sandbox started the cold way */

struct shim_session {
    const struct shim_config *cfg;
    struct shim_sandbox *sb; /* a private sandbox; NULL for a session */
    char iddir[SHIM_PATH_MAX];
    char dir[SHIM_PATH_MAX]; /* the session's directory */
    char name[65];
    char settings[65]; /* shim_session_settings(cfg) */
    char cid[64];
    char bind[64]; /* the explicit container this session is, or "" */
    char identity[65];
    int fresh;     /* its sandbox started with this open, or since */
    int renewed;   /* a new sandbox since the open (shim_session_take_renewed) */
    char note[512];
};

/* ---------------- names ---------------- */

/* e2b's settings, the key only as a hash ("" for other backends). */
static void e2b_settings(const struct shim_config *cfg, char *out, size_t n)
{
    char key[65];

    out[0] = '\0';
    if (strcmp(cfg->sandbox, "e2b"))
        return;
    shim_sha256_hex(cfg->e2b_api_key, strlen(cfg->e2b_api_key), key);
    snprintf(out, n, "%s\n%s\n%s\n%s\n%d\n%s", cfg->e2b_api_url, cfg->e2b_domain,
             cfg->e2b_sandbox_url, cfg->e2b_template, cfg->e2b_internet != 0, key);
}

void shim_session_settings(const struct shim_config *cfg, char out[65])
{
    char nums[256], e2b[2600];
    const char *parts[5] = {cfg->sandbox, nums, cfg->python, cfg->bwrap, e2b};

    snprintf(nums, sizeof(nums), "unsafe=%d memory=%llu procs=%d disk=%llu fsize=%llu "
             "cpu=%d timeout=%d output=%zu inodes=%llu files=%d", cfg->unsafe_no_isolation != 0,
             cfg->memory_limit, cfg->procs_limit, cfg->disk_limit, cfg->file_size_limit,
             cfg->cpu_time_s, cfg->exec_timeout_s, cfg->output_cap,
             (unsigned long long)cfg->inodes_limit, cfg->open_files_limit);
    e2b_settings(cfg, e2b, sizeof(e2b));
    shim_sha256_tagged_hex("codeshim-settings-v1", parts, e2b[0] ? 5 : 4, 16, out);
}

void shim_session_name(const char *identity, const char *session_id, const char *settings,
                       char out[65])
{
    const char *parts[3] = {identity, settings, session_id};

    shim_sha256_tagged_hex("codeshim-session-v2", parts, 3, 16, out);
}

/* The session a request's code runs in: an explicit container's own
 * (bind, keyed by its id) when there is one, else its session id's. */
static void keyed_name(const char *identity, const char *session_id, const char *bind,
                       const char *settings, char out[65])
{
    char key[80];

    if (bind && bind[0]) {
        snprintf(key, sizeof(key), "container:%.63s", bind);
        session_id = key;
    }
    shim_session_name(identity, session_id, settings, out);
}

/* The map entry naming the session of container cid, under settings. */
static void container_file(const char *iddir, const char *cid, const char *settings,
                           char *out, size_t n)
{
    const char *parts[2] = {cid, settings};
    char h[68] = "c-";

    shim_sha256_tagged_hex("codeshim-container-v2", parts, 2, 16, h + 2);
    shim_fileio_join(out, n, iddir, h);
}

/* ---------------- the supervisor's socket ---------------- */

static int connect_dir(const char *dir)
{
    return shim_proto_socket(dir, 0);
}

static int alive(const char *dir)
{
    int fd = connect_dir(dir);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void remove_dir(const char *dir)
{
    static const char *const files[] = {"sock", "cntr", "pid", "ttl"};
    char p[SHIM_PATH_MAX + 8];
    size_t i;

    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (shim_fileio_join(p, sizeof(p), dir, files[i]) == 0)
            unlink(p);
    rmdir(dir);
}

void shim_session_remove(const char *dir, const char *cid, const char *settings)
{
    char iddir[SHIM_PATH_MAX], cf[SHIM_PATH_MAX + 80];
    const char *slash = strrchr(dir, '/');

    remove_dir(dir);
    if (!cid || !*cid || !slash || (size_t)(slash - dir) >= sizeof(iddir))
        return;
    memcpy(iddir, dir, (size_t)(slash - dir));
    iddir[slash - dir] = '\0';
    container_file(iddir, cid, settings, cf, sizeof(cf));
    if (cf[0])
        unlink(cf);
}

/* Asks a supervisor to end its session; falls back to SIGTERM by pid. */
static void close_session(const char *dir, int timeout_ms)
{
    int fd = connect_dir(dir);
    char pidtxt[32], p[SHIM_PATH_MAX + 8];
    cJSON *msg, *ans = NULL;
    int ok = 0;

    if (fd >= 0 && shim_proto_recv(fd, &ans, timeout_ms) == 0) { /* the greeting */
        cJSON_Delete(ans);
        ans = NULL;
        msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "op", "close");
        ok = shim_proto_send(fd, msg, timeout_ms) == 0 &&
             shim_proto_recv(fd, &ans, timeout_ms) == 0;
        cJSON_Delete(msg);
        cJSON_Delete(ans);
    }
    if (fd >= 0)
        close(fd);
    if (!ok && shim_fileio_join(p, sizeof(p), dir, "pid") == 0 && shim_store_read(p, pidtxt, sizeof(pidtxt), 1) == 0) {
        long pid = strtol(pidtxt, NULL, 10);
        if (pid > 1)
            kill((pid_t)pid, SIGTERM);
    }
}

/* Ends the session in dir and waits (boundedly) until it no longer
 * answers: nothing attaches to it afterwards. */
static void end_session(const char *dir)
{
    int waited = 0;

    close_session(dir, 5000);
    while (alive(dir) && waited < 5000) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
        waited += 10;
    }
}

/* ---------------- deleted containers ---------------- */

/* iddir/d-<session>: the container of that session a deletion ended, so
 * that the session's next sandbox can tell the model. */
static int deleted_file(const char *iddir, const char *name, char *out, size_t n)
{
    char f[80];

    if (!iddir[0] || !shim_session_is_name(name))
        return -ENOENT;
    snprintf(f, sizeof(f), "d-%s", name);
    return shim_fileio_join(out, n, iddir, f);
}

/* The container a deletion ended for b's session, taken (""/-ENOENT if
 * none). */
static int take_deleted(struct shim_session *b, char out[64])
{
    char p[SHIM_PATH_MAX + 80];

    out[0] = '\0';
    if (deleted_file(b->iddir, b->name, p, sizeof(p)) < 0 || shim_store_read(p, out, 64, 1) < 0) {
        out[0] = '\0';
        return -ENOENT;
    }
    unlink(p);
    return 0;
}

void shim_session_stop(const char *dir)
{
    end_session(dir);
}

/* ---------------- starting a session host ---------------- */

/* CODESHIM_SESSIOND, or the file next to the library's real path (both
 * absolute: config.c); never anything relative to the current directory. */
static int sessiond_path(const struct shim_config *cfg, char *out, size_t n)
{
    if (!cfg->sessiond[0]) {
        LOG_ERR("cannot tell where libcodeshim was loaded from; set CODESHIM_SESSIOND "
                "to the absolute path of codeshim-sessiond");
        return -ENOENT;
    }
    snprintf(out, n, "%s", cfg->sessiond);
    return 0;
}

/* Starts codeshim-sessiond, the session host, for dir; it daemonises and
 * its first process exits once the socket listens, so waiting for it
 * costs no zombie. */
static int spawn_host(const struct shim_config *cfg, const char *dir, const char *settings,
                      const char *build)
{
    char path[SHIM_PATH_MAX], tmpenv[SHIM_PATH_MAX + 8];
    char *argv[] = {path, (char *)dir, (char *)settings, (char *)build, NULL};
    char **own, **envp;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    size_t n = 0, i;
    pid_t pid;
    int rc, status;

    if ((rc = sessiond_path(cfg, path, sizeof(path))) < 0)
        return rc;
    own = shim_config_own_env();
    for (i = 0; own && own[i]; i++)
        n++;
    envp = calloc(n + 3, sizeof(*envp));
    if (!own || !envp) {
        rc = -ENOMEM;
        goto out;
    }
    for (i = 0; i < n; i++)
        envp[i] = own[i];
    snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", cfg->tmpdir);
    envp[n] = (char *)"PATH=/usr/bin:/bin";
    envp[n + 1] = tmpenv;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* no host fd leaks */
    posix_spawnattr_init(&at);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF);
    rc = -posix_spawn(&pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc) {
        LOG_ERR("cannot start %s: %s", path, strerror(-rc));
        goto out;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!alive(dir)) {
        LOG_ERR("%s did not start a session host (status %d)", path, status);
        rc = -ECHILD;
    }
out:
    for (i = 0; own && own[i]; i++)
        free(own[i]);
    free(own);
    free(envp);
    return rc;
}

/* ---------------- the identity's session host ---------------- */

/* iddir/hosts/<settings>: the host of this identity's sessions under
 * these settings (sessiond/host.c), made private if needed. */
static int host_dir(const struct shim_session *b, char *out, size_t n)
{
    char hosts[SHIM_PATH_MAX];
    int rc;

    if ((rc = shim_fileio_join(hosts, sizeof(hosts), b->iddir, "hosts")) < 0 ||
        (rc = shim_store_private_dir(hosts)) < 0)
        return rc;
    if ((rc = shim_fileio_join(out, n, hosts, b->settings)) < 0)
        return rc;
    return shim_store_private_dir(out);
}

/* Has the host start b's session (b->dir made); it answers once the
 * session's socket listens, or why it could not. */
static int ask_host(int fd, const struct shim_session *b)
{
    cJSON *msg = cJSON_CreateObject(), *ans = NULL;
    const char *why;
    int rc;

    if (!msg)
        return -ENOMEM;
    cJSON_AddStringToObject(msg, "op", "open");
    cJSON_AddStringToObject(msg, "name", b->name);
    if (b->bind[0])
        cJSON_AddStringToObject(msg, "bind", b->bind);
    cJSON_AddNumberToObject(msg, "ttl", b->cfg->session_ttl_s);
    rc = shim_proto_send(fd, msg, 5000);
    cJSON_Delete(msg);
    if (rc == 0)
        rc = shim_proto_recv(fd, &ans, HOST_OPEN_MS);
    if (rc == 0 && !cJSON_IsTrue(cJSON_GetObjectItem(ans, "ok"))) {
        why = cJSON_GetStringValue(cJSON_GetObjectItem(ans, "error"));
        LOG_ERR("the session host could not start a session: %.200s", why ? why : "?");
        rc = -ECHILD;
    }
    cJSON_Delete(ans);
    return rc;
}

/* Starts b's session in its host, starting the host first if none
 * answers. Called with the identity locked (a host ends only under it). */
static int start_session(struct shim_session *b)
{
    char hd[SHIM_PATH_MAX];
    int fd, rc;

    if ((rc = host_dir(b, hd, sizeof(hd))) < 0)
        return rc;
    fd = connect_dir(hd);
    if ((rc = shim_quota_session(b->cfg, b->dir, fd < 0 ? hd : NULL)) < 0) { /* all keys' */
        if (fd >= 0)
            close(fd);
        if (fd < 0) /* the host directory made for nothing */
            rmdir(hd);
        return rc == -EUSERS ? SHIM_SESSION_USER_CAP : rc;
    }
    if (fd < 0) {
        if ((rc = spawn_host(b->cfg, hd, b->settings, NULL)) < 0)
            return rc;
        if ((fd = connect_dir(hd)) < 0)
            return fd;
    }
    rc = ask_host(fd, b);
    close(fd);
    return rc;
}

/* ---------------- the per-identity set of sessions ---------------- */

int shim_session_lock(const char *iddir, int wait_ms)
{
    return shim_store_lock(iddir, wait_ms);
}

int shim_session_is_name(const char *n)
{
    size_t i;

    for (i = 0; i < NAME_HEX; i++)
        if (!n[i] || !strchr("0123456789abcdef", n[i]))
            return 0;
    return n[NAME_HEX] == '\0';
}

/* Clears dead sessions and, when the identity is at its cap, closes the
 * least recently used live one (supervisors touch their dir on use). */
static void make_room(const struct shim_config *cfg, const char *iddir, const char *keep)
{
    DIR *d = opendir(iddir);
    struct dirent *e;
    char oldest[SHIM_PATH_MAX] = "", p[SHIM_PATH_MAX];
    time_t oldest_t = 0;
    long oldest_ns = 0;
    int live = 0;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!shim_session_is_name(e->d_name) || !strcmp(e->d_name, keep))
            continue;
        if (shim_fileio_join(p, sizeof(p), iddir, e->d_name) < 0 || lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (!alive(p)) {
            remove_dir(p);
            continue;
        }
        live++;
        if (!oldest[0] || st.st_mtim.tv_sec < oldest_t ||
            (st.st_mtim.tv_sec == oldest_t && st.st_mtim.tv_nsec < oldest_ns)) {
            snprintf(oldest, sizeof(oldest), "%s", p);
            oldest_t = st.st_mtim.tv_sec;
            oldest_ns = st.st_mtim.tv_nsec;
        }
    }
    closedir(d);
    if (live >= cfg->session_cap && oldest[0]) {
        LOG_INFO("session cap (%d) reached: closing the least recently used session",
                 cfg->session_cap);
        close_session(oldest, 5000);
    }
}

/* Attaches to the session in b->dir, starting it when needed. Sets
 * *created when the sandbox is new. Called with the identity locked. */
static int attach(struct shim_session *b, int *created)
{
    char p[SHIM_PATH_MAX + 8], cf[SHIM_PATH_MAX + 80];
    int rc;

    *created = 0;
    if (!alive(b->dir)) {
        remove_dir(b->dir);
        make_room(b->cfg, b->iddir, b->name);
        if ((rc = shim_store_private_dir(b->dir)) < 0)
            return rc;
        if ((rc = start_session(b)) < 0) {
            remove_dir(b->dir);
            return rc;
        }
        *created = 1;
    }
    if ((rc = shim_fileio_join(p, sizeof(p), b->dir, "cntr")) < 0 ||
        (rc = shim_store_read(p, b->cid, sizeof(b->cid), 1)) < 0)
        return rc;
    container_file(b->iddir, b->cid, b->settings, cf, sizeof(cf));
    if (*created)
        shim_store_write(cf, b->name);
    return 0;
}

/* The session that owns container cid under this request's settings, if
 * it is alive (a container made under other settings is not found). */
static int find_container(struct shim_session *b, const char *cid)
{
    char cf[SHIM_PATH_MAX + 80], name[65];

    container_file(b->iddir, cid, b->settings, cf, sizeof(cf));
    if (shim_store_read(cf, name, sizeof(name), 1) < 0 || !shim_session_is_name(name))
        return 0;
    snprintf(b->name, sizeof(b->name), "%s", name);
    return shim_fileio_join(b->dir, sizeof(b->dir), b->iddir, name) == 0 && alive(b->dir);
}

static void expired_note(struct shim_session *b, const char *old)
{
    snprintf(b->note, sizeof(b->note),
             "[Note: the earlier sandbox %.64s has expired (or was started with other "
             "sandbox settings); its variables, imports and files are not here. This is "
             "a new sandbox (%s).]\n", old, b->cid);
}

static void deleted_note(struct shim_session *b, const char *gone)
{
    snprintf(b->note, sizeof(b->note),
             "[Note: container %.64s was deleted; its variables, imports and files are "
             "gone. This is a new sandbox (%s).]\n", gone, b->cid);
}

/* b's sandbox is new and the one before it (old, or NULL if unknown) is
 * gone: the model is told why, when a deletion ended it, else that it
 * expired (nothing when old is unknown and nothing was deleted). */
static void lost_note(struct shim_session *b, const char *old)
{
    char gone[64];

    if (take_deleted(b, gone) == 0 && gone[0] && strcmp(gone, b->cid))
        deleted_note(b, gone);
    else if (old && old[0] && strcmp(old, b->cid))
        expired_note(b, old);
}

/* A referred-to container that is not the one in use, if any. */
static const char *stale_ref(const struct shim_session *b, const struct shim_session_req *rq)
{
    size_t i;

    for (i = 0; i < rq->ncontainers; i++)
        if (rq->containers[i] && strcmp(rq->containers[i], b->cid))
            return rq->containers[i];
    return NULL;
}

/* ---------------- the user's sandbox host ---------------- */

int shim_session_build(const struct shim_config *cfg, const char *exe, char out[65])
{
    char id[160];
    struct stat st;

    out[0] = '\0';
    if (stat(exe, &st) < 0)
        return -errno;
    snprintf(id, sizeof(id), "%llu:%llu:%lld:%lld.%09ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec);
    shim_store_hash("codeshim-sandbox-host-v1", id, cfg->preload_modules, out);
    out[16] = '\0';
    return 0;
}

/* <runtime>/hosts/<settings>-<build>: the user's sandbox host of these
 * settings and this build (sessiond/pool.c), made private if needed. */
static int user_host_dir(const struct shim_config *cfg, const char *settings, char *out,
                         size_t n, char build[65])
{
    char hosts[SHIM_PATH_MAX], name[160];
    int rc;

    if (!cfg->sessiond[0] || (rc = shim_session_build(cfg, cfg->sessiond, build)) < 0)
        return -ENOENT;
    snprintf(name, sizeof(name), "%s-%s", settings, build);
    if ((rc = shim_store_root(cfg, "hosts", hosts, sizeof(hosts))) < 0 ||
        (rc = shim_fileio_join(out, n, hosts, name)) < 0)
        return rc;
    return shim_store_private_dir(out);
}

/* The host's first byte and, with b"S", the descriptor it carries. */
static int recv_lent(int fd, int *out, int timeout_ms)
{
    int fds[1], n = 0, rc;
    char c = 0;

    *out = -1;
    rc = shim_frame_recv_byte(fd, &c, fds, 1, &n, NULL, timeout_ms);
    if (rc < 0)
        return rc;
    if (c == 'S' && n == 1) {
        *out = fds[0];
        return 0;
    }
    if (n == 1)
        close(fds[0]);
    return c == 'N' ? -EAGAIN : -EPROTO;
}

/* Starts the user's sandbox host in hd unless another program is doing
 * so (the lock of <runtime>/hosts is taken: hd itself goes with its host)
 * or one answers by now. */
static void restart_user_host(const struct shim_config *cfg, const char *hd,
                              const char *settings, const char *build)
{
    char hosts[SHIM_PATH_MAX];
    char *cut;
    int lk, fd;

    snprintf(hosts, sizeof(hosts), "%s", hd);
    if (!(cut = strrchr(hosts, '/')) || cut == hosts)
        return;
    *cut = '\0';
    if ((lk = shim_store_lock(hosts, 0)) < 0)
        return;
    if ((fd = connect_dir(hd)) >= 0)
        close(fd);
    else if (spawn_host(cfg, hd, settings, build) == 0)
        LOG_INFO("sandbox host started");
    close(lk);
}

/* A sandbox lent by the user's sandbox host (*fd its control socket, *pid
 * its supervisor), or -errno: none could be had now (the host is started
 * again when it did not answer). */
static int take_lent(const struct shim_config *cfg, const char *settings, int *fd, long *pid)
{
    char hd[SHIM_PATH_MAX], build[65], why[96];
    cJSON *msg, *ans = NULL;
    int s, rc;

    *fd = -1;
    if (strcmp(cfg->sandbox, "local") || cfg->unsafe_no_isolation || !cfg->fork_server ||
        !cfg->sandbox_host)
        return -ENOTSUP;
    if ((rc = user_host_dir(cfg, settings, hd, sizeof(hd), build)) < 0) {
        LOG_INFO("no sandbox host (its runtime directory: %s); this sandbox starts the cold way",
                 strerror(-rc));
        return rc;
    }
    if ((s = connect_dir(hd)) < 0) {
        LOG_INFO("no sandbox host answers; this sandbox starts the cold way, and the host again");
        restart_user_host(cfg, hd, settings, build);
        return s;
    }
    msg = cJSON_CreateObject();
    rc = msg ? 0 : -ENOMEM;
    if (rc == 0)
        cJSON_AddStringToObject(msg, "op", "take");
    if (rc == 0)
        rc = shim_proto_send(s, msg, 1000);
    cJSON_Delete(msg);
    if (rc == 0)
        rc = recv_lent(s, fd, 5000);
    if (rc == 0 || rc == -EAGAIN) {
        int r2 = shim_proto_recv(s, &ans, 1000);
        const cJSON *jp = cJSON_GetObjectItem(ans, "pid");
        if (rc == 0 && (r2 < 0 || !cJSON_IsTrue(cJSON_GetObjectItem(ans, "ok")) ||
                        !cJSON_IsNumber(jp) || jp->valuedouble < 1))
            rc = -EPROTO;
        if (rc == 0)
            *pid = (long)jp->valuedouble;
        snprintf(why, sizeof(why), "%.80s",
                 cJSON_GetStringValue(cJSON_GetObjectItem(ans, "error")) ?: "?");
        cJSON_Delete(ans);
    }
    close(s);
    if (rc < 0 && *fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    if (rc == -EAGAIN)
        LOG_INFO("the sandbox host has no sandbox ready (%s); this one starts the cold way", why);
    else if (rc < 0)
        LOG_INFO("the sandbox host did not lend a sandbox (%s); this one starts the cold way",
                 strerror(-rc));
    else
        LOG_DEBUG("sandbox lent by the sandbox host (pid %ld)", *pid);
    return rc;
}

int shim_session_lent_ready(const struct shim_config *cfg)
{
    char hd[SHIM_PATH_MAX], build[65], settings[65];
    cJSON *msg, *ans = NULL;
    int s, ready = 0;

    if (strcmp(cfg->sandbox, "local") || cfg->unsafe_no_isolation || !cfg->fork_server ||
        !cfg->sandbox_host)
        return 0;
    shim_session_settings(cfg, settings);
    if (user_host_dir(cfg, settings, hd, sizeof(hd), build) < 0 || (s = connect_dir(hd)) < 0)
        return 0;
    if ((msg = cJSON_CreateObject()) != NULL) {
        cJSON_AddStringToObject(msg, "op", "status");
        if (shim_proto_send(s, msg, 1000) == 0 && shim_proto_recv(s, &ans, 1000) == 0)
            ready = cJSON_GetNumberValue(cJSON_GetObjectItem(ans, "pool")) >= 1;
    }
    cJSON_Delete(msg);
    cJSON_Delete(ans);
    close(s);
    return ready;
}

int shim_session_lent(const struct shim_config *cfg, struct shim_sandbox **out)
{
    char settings[65];
    long pid = 0;
    int fd, rc;

    *out = NULL;
    shim_session_settings(cfg, settings);
    if ((rc = take_lent(cfg, settings, &fd, &pid)) < 0)
        return rc;
    return shim_sandbox_open_lent(cfg, fd, pid, out);
}

static int open_private(struct shim_session *b, const struct shim_session_req *rq)
{
    int fd, rc;
    long pid = 0;
    const char *old;

    rc = take_lent(b->cfg, b->settings, &fd, &pid) == 0
             ? shim_sandbox_open_lent(b->cfg, fd, pid, &b->sb)
             : -1;
    if (rc < 0)
        rc = shim_sandbox_open_at(b->cfg, rq->net, NULL, &b->sb);

    if (rc < 0)
        return rc;
    b->fresh = 1;
    snprintf(b->cid, sizeof(b->cid), "%s", shim_sandbox_container_id(b->sb));
    if ((old = stale_ref(b, rq)) != NULL)
        expired_note(b, old);
    return 0;
}

/* ---------------- sessions the backend keeps (e2b) ---------------- */

/* Opens the sandbox of rq's session (found again, or made), or of the
 * first container rq refers to that the backend still runs: 0 with *sb;
 * 1 when rq has no session id and none of its containers is there. The
 * backend finds and tags its sandboxes (sandbox/e2b.c); here they are
 * named with hashes that reveal neither the key nor the session id:
 *   owner   = H(identity)               the per-identity cap counts these
 *   salt    = H(identity, settings)     container ids derive from it
 *   session = shim_session_name(identity, session id, settings)
 * (shim_sha256_tagged_hex, 32 digits). */

/* One lookup (or, unless find_only, a sandbox made) in the backend:
 * by session name when session is set, else by container cid. */
static int remote_open(const struct shim_config *cfg, const struct shim_session_req *rq,
                       const char *settings, const char *session, const char *cid,
                       int find_only, struct shim_sandbox **sb)
{
    const char *owned[] = {rq->identity, ""}, *salted[] = {rq->identity, settings};
    char owner[65], salt[65];
    struct shim_sandbox_tag tag;

    shim_sha256_tagged_hex("codeshim-e2b-owner-v1", owned, 2, 16, owner);
    shim_sha256_tagged_hex("codeshim-e2b-salt-v1", salted, 2, 16, salt);
    memset(&tag, 0, sizeof(tag));
    tag.owner = owner;
    tag.salt = salt;
    tag.cap = cfg->session_cap;
    tag.ttl_s = cfg->session_ttl_s;
    tag.find_only = find_only || !session;
    tag.session = session;
    tag.container = session ? NULL : cid;
    return shim_sandbox_open_at(cfg, rq->net, &tag, sb);
}

/* name: the session's name when rq is keyed by one (else ""). An
 * explicit container rq names is first looked for as the container of
 * some session (one named later in tools[].container), then as its own
 * session. */
static int remote_sandbox(const struct shim_config *cfg, const struct shim_session_req *rq,
                          const char *settings, int find_only, struct shim_sandbox **sb,
                          char name[65])
{
    size_t i;
    int rc;

    name[0] = '\0';
    if (rq->bind_container &&
        (rc = remote_open(cfg, rq, settings, NULL, rq->bind_container, 1, sb)) != -ENOENT)
        return rc;
    if (rq->session_id || rq->bind_container) {
        keyed_name(rq->identity, rq->session_id, rq->bind_container, settings, name);
        return remote_open(cfg, rq, settings, name, NULL, find_only, sb);
    }
    for (i = 0; i < rq->ncontainers; i++) {
        if (!rq->containers[i] || strncmp(rq->containers[i], "cntr_", 5))
            continue;
        rc = remote_open(cfg, rq, settings, NULL, rq->containers[i], 1, sb);
        if (rc != -ENOENT)
            return rc;
    }
    return 1;
}

static void remote_cid(struct shim_session *b)
{
    /* an explicit container keeps its own id, whatever the backend calls it */
    snprintf(b->cid, sizeof(b->cid), "%s", b->bind[0] ? b->bind : shim_sandbox_container_id(b->sb));
}

/* A session kept by the backend itself (e2b): no supervisor, no lock. A
 * sandbox of a container deleted (or expired) meanwhile is ended, and
 * another one had. */
static int open_remote(struct shim_session *b, const struct shim_session_req *rq)
{
    int rc = remote_sandbox(b->cfg, rq, b->settings, 0, &b->sb, b->name);
    const char *old;
    char dead[64] = "";

    if (rc == 0) {
        remote_cid(b);
        if (shim_cstore_gone(b->cfg, rq->identity, b->cid)) {
            LOG_INFO("e2b sandbox %s: its container is gone; ending it", b->cid);
            snprintf(dead, sizeof(dead), "%s", b->cid);
            shim_sandbox_end(b->sb);
            b->sb = NULL;
            rc = remote_sandbox(b->cfg, rq, b->settings, 0, &b->sb, b->name);
            if (rc == 0) {
                remote_cid(b);
                if (!strcmp(b->cid, dead)) { /* it could not be ended: not this one */
                    shim_sandbox_close(b->sb);
                    b->sb = NULL;
                    rc = 1;
                }
            }
        }
    }
    if (rc == 1)
        return open_private(b, rq);
    if (rc < 0)
        return rc;
    b->fresh = shim_sandbox_is_new(b->sb);
    if (b->fresh || dead[0])
        lost_note(b, dead[0] ? dead : NULL);
    else
        take_deleted(b, dead); /* of an earlier container: this one lives */
    if (!b->note[0] && (old = stale_ref(b, rq)) != NULL)
        expired_note(b, old);
    return 0;
}

/* After an execution in a backend's own sandbox: it may have replaced a
 * vanished one (a new container id, and a note for the model). */
static void remote_after(struct shim_session *b)
{
    const char *note = shim_sandbox_take_note(b->sb);
    char old[64], gone[64];
    size_t n;

    snprintf(old, sizeof(old), "%s", b->cid);
    remote_cid(b);
    if (note)
        b->fresh = b->renewed = 1;
    if (note && b->bind[0])
        return; /* the container's own note says it (files.h), under its id */
    if (note && strcmp(old, b->cid) && take_deleted(b, gone) == 0 && !strcmp(gone, old)) {
        deleted_note(b, old); /* not vanished: a deletion ended it */
        return;
    }
    n = strlen(b->note);
    if (note)
        snprintf(b->note + n, sizeof(b->note) - n, "%s", note);
}

/* The attached session's container was deleted (or expired) meanwhile:
 * its sandbox is ended, and one is had again (1 when rq is keyed by
 * neither a session nor a container: a private sandbox then). Called
 * with the identity locked. */
static int replace_gone(struct shim_session *b, int keyed, int *created, char dead[64])
{
    int rc;

    dead[0] = '\0';
    if (!shim_cstore_gone(b->cfg, b->identity, b->cid))
        return 0;
    LOG_INFO("session sandbox %s: its container is gone; ending it", b->cid);
    snprintf(dead, 64, "%s", b->cid);
    end_session(b->dir);
    rc = keyed ? attach(b, created) : 1;
    return rc == 0 && !strcmp(b->cid, dead) ? 1 : rc; /* not ended yet: not this one */
}

int shim_session_open(const struct shim_config *cfg, const struct shim_session_req *rq,
                  struct shim_session **out)
{
    struct shim_session *b = calloc(1, sizeof(*b));
    int lk, rc = 0, created = 0, found = 0, keyed;
    char dead[64] = "";
    size_t i;

    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    shim_session_settings(cfg, b->settings);
    *out = b;
    snprintf(b->identity, sizeof(b->identity), "%s", rq->identity ? rq->identity : "");
    if (rq->bind_container && strlen(rq->bind_container) < sizeof(b->bind))
        snprintf(b->bind, sizeof(b->bind), "%s", rq->bind_container);
    if ((rq->session_id || rq->ncontainers || b->bind[0]) && shim_sandbox_keeps_sessions(cfg)) {
        if (shim_store_identity_dir(cfg, rq->identity, b->iddir, sizeof(b->iddir)) < 0)
            b->iddir[0] = '\0'; /* no note of deletions then */
        return open_remote(b, rq);
    }
    if (!rq->session_id && !rq->ncontainers && !b->bind[0])
        return open_private(b, rq);
    if (shim_store_identity_dir(cfg, rq->identity, b->iddir, sizeof(b->iddir)) < 0)
        return rq->session_id || b->bind[0] ? SHIM_SESSION_NO_STORE : open_private(b, rq);
    lk = shim_session_lock(b->iddir, LOCK_WAIT_MS);
    if (lk < 0) {
        LOG_WARN("session lock: %s; using a private sandbox", strerror(-lk));
        return open_private(b, rq);
    }
    keyed = b->bind[0] || rq->session_id;
    if (b->bind[0] && find_container(b, b->bind)) {
        rc = attach(b, &created); /* a container of a session, named later */
    } else if (keyed) {
        keyed_name(rq->identity, rq->session_id, b->bind, b->settings, b->name);
        rc = shim_fileio_join(b->dir, sizeof(b->dir), b->iddir, b->name);
        if (rc == 0)
            rc = attach(b, &created);
    } else {
        for (i = 0; i < rq->ncontainers && !found; i++)
            found = rq->containers[i] && find_container(b, rq->containers[i]);
        rc = found ? attach(b, &created) : 1;
    }
    if (rc == 0 && !created)
        rc = replace_gone(b, keyed, &created, dead);
    if (rc == 0) /* mark as recently used, for the LRU cap */
        utimensat(AT_FDCWD, b->dir, NULL, 0);
    close(lk);
    if (rc == SHIM_SESSION_USER_CAP || rc == SHIM_SESSION_NO_STORE)
        return rc;
    if (rc != 0) {
        if (rc < 0)
            LOG_WARN("session unavailable (%s); using a private sandbox", strerror(-rc));
        b->dir[0] = '\0';
        b->name[0] = '\0';
        return open_private(b, rq);
    }
    b->fresh = created;
    if (created)
        lost_note(b, dead[0] ? dead : stale_ref(b, rq));
    else
        take_deleted(b, dead); /* of an earlier container: this one lives */
    LOG_INFO("%s session sandbox %s", created ? "started" : "attached to", b->cid);
    return 0;
}

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
            lost_note(b, old);
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
    int fd = connect_dir(b->dir), rc;
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
    rc = lk < 0 ? lk : attach(b, &created);
    if (lk >= 0)
        close(lk);
    if (rc == 0 && created) {
        b->fresh = b->renewed = 1;
        lost_note(b, old);
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
        remote_after(b);
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

const char *shim_session_container_id(const struct shim_session *b)
{
    return b ? b->cid : "";
}

const char *shim_session_key(const struct shim_session *b)
{
    return b && shim_session_is_name(b->name) ? b->name : "";
}

const char *shim_session_take_note(struct shim_session *b)
{
    static __thread char note[512];

    if (!b || !b->note[0])
        return NULL;
    snprintf(note, sizeof(note), "%s", b->note);
    b->note[0] = '\0';
    return note;
}

void shim_session_close(struct shim_session *b)
{
    if (!b)
        return;
    shim_sandbox_close(b->sb); /* a session lives on in its supervisor */
    free(b);
}

/* ---------------- files ---------------- */

#define FILE_CHUNK (16u << 20) /* sessiond's */

/* One file request in the session: one connection; *ans the answer. */
static int file_call(struct shim_session *b, cJSON *msg, cJSON **ans)
{
    int fd = connect_dir(b->dir), rc;

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

int shim_session_find_container(const struct shim_config *cfg, const char *identity,
                                const char *cid, const struct shim_http_net *net,
                                struct shim_session **out)
{
    struct shim_session *b = calloc(1, sizeof(*b));

    *out = NULL;
    if (!b)
        return -ENOMEM;
    if (!cid || strncmp(cid, "cntr_", 5) || strlen(cid) >= sizeof(b->bind)) {
        free(b);
        return -ENOENT;
    }
    b->cfg = cfg;
    shim_session_settings(cfg, b->settings);
    snprintf(b->identity, sizeof(b->identity), "%s", identity);
    snprintf(b->bind, sizeof(b->bind), "%s", cid);
    if (shim_sandbox_keeps_sessions(cfg)) { /* e2b: found in e2b, never made here */
        struct shim_session_req rq;
        memset(&rq, 0, sizeof(rq));
        rq.net = net;
        rq.identity = identity;
        rq.bind_container = b->bind;
        if (remote_sandbox(cfg, &rq, b->settings, 1, &b->sb, b->name) != 0) {
            free(b);
            return -ENOENT;
        }
        snprintf(b->cid, sizeof(b->cid), "%s", b->bind);
        *out = b;
        return 0;
    }
    if (shim_store_identity_dir(cfg, identity, b->iddir, sizeof(b->iddir)) < 0 ||
        !find_container(b, cid)) { /* whichever session's container it is */
        free(b);
        return -ENOENT;
    }
    snprintf(b->cid, sizeof(b->cid), "%s", cid);
    *out = b;
    return 0;
}

void shim_session_drop(const struct shim_config *cfg, const char *identity, const char *cid,
                       const char *session, const struct shim_http_net *net)
{
    struct shim_session *live;
    char iddir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 80];
    int lk = -1;

    if (shim_store_identity_dir(cfg, identity, iddir, sizeof(iddir)) == 0) {
        if (session && deleted_file(iddir, session, p, sizeof(p)) == 0 &&
            shim_store_write(p, cid) < 0)
            LOG_WARN("container %s: its session will not be told of its deletion", cid);
        if (!shim_sandbox_keeps_sessions(cfg))
            lk = shim_session_lock(iddir, LOCK_WAIT_MS); /* no open attaches meanwhile */
    }
    if (shim_session_find_container(cfg, identity, cid, net, &live) == 0) {
        LOG_INFO("container %s deleted: its sandbox is ended", cid);
        shim_session_end(live);
    }
    if (lk >= 0)
        close(lk);
}

int shim_session_is_new(const struct shim_session *b)
{
    return b && b->fresh;
}

void shim_session_end(struct shim_session *b)
{
    if (!b)
        return;
    if (!b->sb && b->dir[0])
        end_session(b->dir);
    if (b->sb) {
        shim_sandbox_end(b->sb);
        b->sb = NULL;
    }
    shim_session_close(b);
}

int shim_session_take_renewed(struct shim_session *b)
{
    int r = b && b->renewed;

    if (b)
        b->renewed = 0;
    return r;
}
