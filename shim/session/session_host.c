/* session_host.c - the user's sandbox host (codeshim-sessiond,
 * sessiond/host.c) as a program sees it: started here when none answers,
 * asked for a ready sandbox for a private request (lent: its control
 * socket passed over the connection) and for a session's process (which
 * then answers on the same connection); where no host can be had, a
 * private request's sandbox starts the cold way here and a session's
 * process is started alone, cold. See session_int.h. */
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
#include <sys/socket.h>
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

pid_t shim_session_spawn(const struct shim_config *cfg, char *const argv[], const int *fds,
                         int nfds, int own_session)
{
    char tmpenv[SHIM_PATH_MAX + 8];
    char **own, **envp;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    size_t n = 0, i;
    int hi[SHIM_SPAWN_FDS], k, rc;
    pid_t pid = -1;

    if (nfds < 0 || nfds > SHIM_SPAWN_FDS)
        return -EINVAL;
    own = shim_config_own_env();
    for (i = 0; own && own[i]; i++)
        n++;
    envp = calloc(n + 3, sizeof(*envp));
    for (k = 0; k < nfds; k++) /* out of the way of 3.. first: a source may be one of them */
        hi[k] = fcntl(fds[k], F_DUPFD_CLOEXEC, 3 + SHIM_SPAWN_FDS);
    for (k = 0, rc = own && envp ? 0 : -ENOMEM; k < nfds; k++)
        if (hi[k] < 0)
            rc = -EMFILE;
    if (rc == 0) {
        for (i = 0; i < n; i++)
            envp[i] = own[i];
        snprintf(tmpenv, sizeof(tmpenv), "TMPDIR=%s", cfg->tmpdir);
        envp[n] = (char *)"PATH=/usr/bin:/bin";
        envp[n + 1] = tmpenv;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        for (k = 0; k < nfds; k++)
            posix_spawn_file_actions_adddup2(&fa, hi[k], 3 + k);
        posix_spawn_file_actions_addclosefrom_np(&fa, 3 + nfds); /* no other fd leaks */
        posix_spawnattr_init(&at);
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                          (own_session ? POSIX_SPAWN_SETSID : 0));
        rc = -posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        if (rc)
            LOG_ERR("cannot start %s: %s", argv[0], strerror(-rc));
    }
    for (k = 0; k < nfds; k++)
        if (hi[k] >= 0)
            close(hi[k]);
    for (i = 0; own && own[i]; i++)
        free(own[i]);
    free(own);
    free(envp);
    return rc ? rc : pid;
}

/* Runs codeshim-sessiond with argv[1..] (argv[0] is filled in) and fds as
 * 3.., in a session of its own, and waits for its first process, which
 * exits once it has daemonised. 0 or -errno. */
static int run_sessiond(const struct shim_config *cfg, char **argv, const int *fds, int nfds)
{
    char path[SHIM_PATH_MAX];
    pid_t pid;
    int rc, status = 0;

    if ((rc = sessiond_path(cfg, path, sizeof(path))) < 0)
        return rc;
    argv[0] = path;
    if ((pid = shim_session_spawn(cfg, argv, fds, nfds, 1)) < 0)
        return pid;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

/* Starts the user's sandbox host in dir. */
static int spawn_host(const struct shim_config *cfg, const char *dir, const char *settings,
                      const char *build)
{
    char *argv[] = {NULL, (char *)dir, (char *)settings, (char *)build, NULL};

    if (run_sessiond(cfg, argv, NULL, 0) < 0 || !shim_session_alive(dir)) {
        LOG_ERR("codeshim-sessiond did not start a sandbox host");
        return -ECHILD;
    }
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
    if ((fd = shim_session_connect(hd)) >= 0)
        close(fd);
    else if (spawn_host(cfg, hd, settings, build) == 0)
        LOG_INFO("sandbox host started");
    close(lk);
}

/* Whether cfg's sandboxes come from the user's sandbox host: local,
 * isolated, with a fork server, the host not turned off. */
static int host_usable(const struct shim_config *cfg)
{
    return !strcmp(cfg->sandbox, "local") && !cfg->unsafe_no_isolation && cfg->fork_server &&
           cfg->sandbox_host;
}

/* A connection to the user's sandbox host of settings, or -errno; when
 * none answers, the host is started again, and with wait connected to
 * once it listens (else this request goes without). */
static int connect_host(const struct shim_config *cfg, const char *settings, int wait)
{
    char hd[SHIM_PATH_MAX], build[65];
    int s, rc;

    if ((rc = user_host_dir(cfg, settings, hd, sizeof(hd), build)) < 0) {
        LOG_INFO("no sandbox host (its runtime directory: %s); this sandbox starts the cold way",
                 strerror(-rc));
        return rc;
    }
    if ((s = shim_session_connect(hd)) >= 0)
        return s;
    LOG_INFO("no sandbox host answers; it is started again%s",
             wait ? "" : ", and this sandbox starts the cold way");
    restart_user_host(cfg, hd, settings, build);
    return wait ? shim_session_connect(hd) : s;
}

/* A sandbox lent by the user's sandbox host (*fd its control socket, *pid
 * its supervisor), or -errno: none could be had now (the host is started
 * again when it did not answer). */
static int take_lent(const struct shim_config *cfg, const char *settings, int *fd, long *pid)
{
    char why[96];
    cJSON *msg, *ans = NULL;
    int s, rc;

    *fd = -1;
    if (!host_usable(cfg))
        return -ENOTSUP;
    if ((s = connect_host(cfg, settings, 0)) < 0)
        return s;
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

/* The answer to a session's start on fd (its process's, once the
 * session listens, or the host's refusal): 0; -ECONNRESET when nothing
 * answered and nothing holds the connection any more (so no session was
 * started); -ECHILD when refused; -ETIMEDOUT. */
static int started(int fd)
{
    cJSON *ans = NULL;
    const char *why;
    int rc = shim_proto_recv(fd, &ans, HOST_OPEN_MS);

    if (rc == 0 && !cJSON_IsTrue(cJSON_GetObjectItem(ans, "ok"))) {
        why = cJSON_GetStringValue(cJSON_GetObjectItem(ans, "error"));
        LOG_ERR("the session could not start: %.200s", why ? why : "?");
        rc = -ECHILD;
    }
    cJSON_Delete(ans);
    return rc;
}

/* Asks the host on fd to start b's session; as started(), and -EPIPE
 * when the request could not be sent (nothing was started). */
static int ask_open(int fd, const struct shim_session *b)
{
    cJSON *msg = cJSON_CreateObject();
    int rc;

    if (!msg)
        return -ENOMEM;
    cJSON_AddStringToObject(msg, "op", "open");
    cJSON_AddStringToObject(msg, "identity", b->identity[0] ? b->identity : "anonymous");
    cJSON_AddStringToObject(msg, "name", b->name);
    if (b->bind[0])
        cJSON_AddStringToObject(msg, "bind", b->bind);
    cJSON_AddNumberToObject(msg, "ttl", b->cfg->session_ttl_s);
    rc = shim_proto_send(fd, msg, 5000);
    cJSON_Delete(msg);
    return rc == 0 ? started(fd) : rc;
}

/* Starts b's session process alone (no host to be had): it opens its
 * sandbox the cold way and answers on a socket pair. */
static int start_alone(struct shim_session *b)
{
    char ttl[16];
    char *argv[] = {NULL, (char *)"--session-alone", b->dir, b->settings, ttl,
                    b->bind[0] ? b->bind : (char *)"-", (char *)"0", NULL};
    int sp[2], rc;

    snprintf(ttl, sizeof(ttl), "%d", b->cfg->session_ttl_s);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return -errno;
    rc = run_sessiond(b->cfg, argv, &sp[1], 1);
    close(sp[1]);
    if (rc == 0)
        rc = started(sp[0]);
    close(sp[0]);
    return rc;
}

/* Starts b's session: a process the user's sandbox host starts with a
 * sandbox of its pool, else one started here alone, cold. Called with
 * the identity locked. */
int shim_session_start(struct shim_session *b)
{
    int fd, rc;

    if ((rc = shim_quota_session(b->cfg, b->dir)) < 0) /* all keys' */
        return rc == -EUSERS ? SHIM_SESSION_USER_CAP : rc;
    if (host_usable(b->cfg)) {
        fd = connect_host(b->cfg, b->settings, 1);
        rc = fd < 0 ? fd : ask_open(fd, b);
        if (fd >= 0)
            close(fd);
        if (rc != -ECONNRESET && rc != -EPIPE && fd >= 0)
            return rc;
        LOG_INFO("the sandbox host did not take the session (%s); it starts alone, cold",
                 strerror(-rc));
    }
    return start_alone(b);
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
