/* session_host.c - the hosts a program asks for sandboxes: the
 * identity's session host (codeshim-sessiond, sessiond/host.c), started
 * here when none answers and asked to start a session's supervisor; and
 * the user's sandbox host (sessiond/pool.c), which lends a ready sandbox
 * to a private request (started again when it does not answer). A
 * private request's sandbox is opened here: lent, else cold. See
 * session_int.h. */
#include "session/session.h"
#include "session/session_int.h"

#include "base/fileio.h"
#include "base/frame.h"
#include "base/json.h"
#include "base/log.h"
#include "session/proto.h"
#include "session/quota.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
    if (!shim_session_alive(dir)) {
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
int shim_session_start(struct shim_session *b)
{
    char hd[SHIM_PATH_MAX];
    int fd, rc;

    if ((rc = host_dir(b, hd, sizeof(hd))) < 0)
        return rc;
    fd = shim_session_connect(hd);
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
        if ((fd = shim_session_connect(hd)) < 0)
            return fd;
    }
    rc = ask_host(fd, b);
    close(fd);
    return rc;
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
    if ((fd = shim_session_connect(hd)) >= 0)
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
    if ((s = shim_session_connect(hd)) < 0) {
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
    if (user_host_dir(cfg, settings, hd, sizeof(hd), build) < 0 || (s = shim_session_connect(hd)) < 0)
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

int shim_session_open_private(struct shim_session *b, const struct shim_session_req *rq)
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
    if ((old = shim_session_stale_ref(b, rq)) != NULL)
        shim_session_note_expired(b, old);
    return 0;
}
