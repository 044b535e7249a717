/* sessiond.c - codeshim-sessiond, the host of one identity's sessions.
 *
 *   codeshim-sessiond DIR SETTINGS [BUILD]
 *
 * With BUILD it is the user's sandbox host (DIR = <runtime>/hosts/
 * <SETTINGS>-<BUILD>, sessiond/pool.c), which refuses to start unless
 * BUILD is its own (shim_session_build of its executable).
 *
 * Started by the library (shim/session/session_host.c) when a session is to start and
 * no host answers in DIR (<identity dir>/hosts/<settings>). It refuses to
 * start unless the program's CODESHIM_* settings it inherited have the
 * fingerprint SETTINGS (the one its sessions are named after, session.h).
 * It daemonises (its first process exits once the socket listens, so the
 * program never holds a zombie) and runs the host (host.c), which forks a
 * process for each session (serve.c). */
#include "base/log.h"
#include "session/session.h"
#include "sessiond.h"
#include "system/config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

volatile sig_atomic_t sessiond_stop;

static void on_term(int sig)
{
    (void)sig;
    sessiond_stop = 1;
}

int main(int argc, char **argv)
{
    const struct shim_config *cfg;
    struct sigaction sa;
    char mine[65], build[65], c;
    int user = argc == 4;
    int ready[2];
    pid_t pid;

    if ((argc != 3 && argc != 4) || argv[1][0] != '/') {
        fprintf(stderr, "usage: %s /path/to/host-dir SETTINGS [BUILD] (started by libcodeshim)\n",
                argv[0]);
        return 2;
    }
    cfg = shim_config();
    shim_session_settings(cfg, mine);
    if (strcmp(mine, argv[2])) { /* the environment changed since the program read it */
        LOG_ERR("refusing to start the session host %s: its sandbox settings are not "
                "the ones this program uses", argv[1]);
        return 1;
    }
    if (user && (shim_session_build(cfg, "/proc/self/exe", build) < 0 || strcmp(build, argv[3]))) {
        LOG_ERR("refusing to start the sandbox host %s: it is not of this build", argv[1]);
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
    return sessiond_host(cfg, argv[1], argv[2], user, ready[1]);
}
