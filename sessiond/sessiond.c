/* sessiond.c - codeshim-sessiond: the user's sandbox host, and each
 * session's process.
 *
 *   codeshim-sessiond DIR SETTINGS BUILD
 *     the user's sandbox host in DIR = <runtime>/hosts/<SETTINGS>-<BUILD>
 *     (host.c); it refuses to start unless BUILD is its own
 *     (shim_session_build of its executable). It daemonises: its first
 *     process exits once the socket listens, so the program that started
 *     it never holds a zombie.
 *   codeshim-sessiond --session|--session-alone DIR SETTINGS TTL BIND PID
 *     one session in DIR (serve.c), answering on fd 3 the request that
 *     started it; with PID (not 0) it runs in the sandbox whose control
 *     socket is fd 4 (lent by the host, which spawns it with --session),
 *     else it opens one the cold way. --session-alone is a library's own
 *     start where no host can be had: it daemonises the same way.
 *
 * Both refuse to start unless the CODESHIM_* settings they inherited have
 * the fingerprint SETTINGS (the one the library named them after). */
#include "base/log.h"
#include "session/session.h"
#include "sessiond.h"
#include "system/config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

volatile sig_atomic_t sessiond_stop;

static void on_term(int sig)
{
    (void)sig;
    sessiond_stop = 1;
}

/* The session's arguments (argv[2..6]) into o, checked. 0 or -1. */
static int session_args(char **argv, struct sessiond_open *o)
{
    char *end;
    long ttl = strtol(argv[4], &end, 10), pid;

    if (*end || ttl < 1 || ttl > SHIM_SESSION_TTL_MAX || strlen(argv[2]) >= sizeof(o->dir))
        return -1;
    pid = strtol(argv[6], &end, 10);
    if (*end || pid < 0)
        return -1;
    snprintf(o->dir, sizeof(o->dir), "%s", argv[2]);
    o->bind = strcmp(argv[5], "-") ? argv[5] : "";
    o->ttl_s = (int)ttl;
    o->lent_pid = pid;
    o->lent_fd = pid ? 4 : -1;
    return 0;
}

/* Forks. The first process exits: at once, or with wait once "R" came on
 * the pipe whose end *ready the second gets (1 if it never does). The
 * second returns 0, leading a session of its own; 2 if there is none. */
static int daemonise(int wait, int *ready)
{
    int pp[2];
    pid_t pid;
    char c;

    if (pipe(pp) < 0)
        return 2;
    pid = fork();
    if (pid < 0)
        return 2;
    if (pid > 0) {
        close(pp[1]);
        exit(!wait || (read(pp[0], &c, 1) == 1 && c == 'R') ? 0 : 1);
    }
    close(pp[0]);
    setsid();
    if (wait)
        *ready = pp[1];
    else
        close(pp[1]);
    return 0;
}

static void handle_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

int main(int argc, char **argv)
{
    const struct shim_config *cfg;
    char mine[65], build[65];
    int session = argc == 7 && (!strcmp(argv[1], "--session") || !strcmp(argv[1], "--session-alone"));
    int ready = -1;
    struct sessiond_open o;

    if (!session && (argc != 4 || argv[1][0] != '/')) {
        fprintf(stderr, "usage: %s /path/to/host-dir SETTINGS BUILD (started by libcodeshim)\n",
                argv[0]);
        return 2;
    }
    cfg = shim_config();
    shim_session_settings(cfg, mine);
    if (strcmp(mine, argv[session ? 3 : 2])) { /* the environment changed since the program read it */
        LOG_ERR("refusing to start %s: its sandbox settings are not the ones this program uses",
                argv[session ? 2 : 1]);
        return 1;
    }
    umask(077);
    if (session) {
        if (argv[2][0] != '/' || session_args(argv, &o) < 0) {
            LOG_ERR("refusing to start a session: bad arguments");
            return 2;
        }
        if (!strcmp(argv[1], "--session-alone") && daemonise(0, NULL))
            return 1;
        handle_signals();
        return sessiond_session(cfg, &o, argv[3], 3);
    }
    if (shim_session_build(cfg, "/proc/self/exe", build) < 0 || strcmp(build, argv[3])) {
        LOG_ERR("refusing to start the sandbox host %s: it is not of this build", argv[1]);
        return 1;
    }
    if (daemonise(1, &ready))
        return 1;
    handle_signals();
    return sessiond_host(cfg, argv[1], argv[2], ready);
}
