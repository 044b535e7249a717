/* local.c - the local sandbox backend's ops table (create, exec, destroy):
 * one isolated Python process tree per sandbox, built from standard parts.
 * The other files of the backend are listed in local_int.h; what the
 * sandbox is (namespaces, filesystem, limits), how it starts and how it
 * ends is told in doc/ARCHITECTURE.md, "The local sandbox". */
#include "base/log.h"
#include "sandbox/local/local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cfg with the defaults applied. */
static void params_init(struct shim_local_params *p,
                        const struct shim_config *cfg)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->python, sizeof(p->python), "%s", cfg->python);
    snprintf(p->bwrap, sizeof(p->bwrap), "%s",
             cfg->bwrap[0] ? cfg->bwrap : "/usr/bin/bwrap");
    snprintf(p->tmpdir, sizeof(p->tmpdir), "%s",
             cfg->tmpdir[0] ? cfg->tmpdir : "/tmp");
    p->unsafe = cfg->unsafe_no_isolation;
    p->timeout_s = cfg->exec_timeout_s > 0 ? cfg->exec_timeout_s : 60;
    p->output_cap = cfg->output_cap ? cfg->output_cap : 20000;
    p->memory = cfg->memory_limit ? cfg->memory_limit : 1ULL << 30;
    p->file_size = cfg->file_size_limit ? cfg->file_size_limit : 512ULL << 20;
    p->disk = cfg->disk_limit ? cfg->disk_limit : 1ULL << 30;
    p->inodes = cfg->inodes_limit ? cfg->inodes_limit : 65536;
    p->open_files = cfg->open_files_limit > 0 ? cfg->open_files_limit : 1024;
    p->procs = cfg->procs_limit > 0 ? cfg->procs_limit : 256;
    p->cpu_s = cfg->cpu_time_s > 0 ? cfg->cpu_time_s : 3600;
    p->fork_server = cfg->fork_server && !p->unsafe;
    p->fork = p->fork_server ? shim_local_zygote_fork : NULL;
    snprintf(p->preload, sizeof(p->preload), "%s", cfg->preload_modules);
}

static int local_create(const struct shim_config *cfg, void **state)
{
    const char *tmpdir = cfg->tmpdir[0] ? cfg->tmpdir : "/tmp";
    struct shim_local_params p;
    struct shim_local *l;
    int rc;

    if (strlen(cfg->python) >= sizeof(p.python) ||
        strlen(cfg->bwrap) >= sizeof(p.bwrap) ||
        strlen(tmpdir) >= sizeof(p.tmpdir))
        return -ENAMETOOLONG;
    params_init(&p, cfg);
    l = shim_local_new(&p);
    if (!l)
        return -ENOMEM;
    rc = l->p.unsafe ? shim_local_make_root(l) : 0;
    if (rc) {
        free(l);
        return rc;
    }
    if (shim_local_start(l) != 0)
        LOG_DEBUG("sandbox not started: %s (retried on first execution)",
                  l->why);
    *state = l;
    return 0;
}

static void local_destroy(void *state)
{
    struct shim_local *l = state;

    if (!l)
        return;
    /* Even when it is still starting: no SIGKILL before stop()'s own
     * deadline (local_proc.c says why). */
    shim_local_stop(l, NULL, 0);
    if (l->p.unsafe && l->root[0])
        shim_local_rm_root(l);
    free(l);
}

static int local_exec_until(void *state, const char *code, size_t len,
                            const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    return shim_local_exec(state, code, len, stop, out);
}

static int local_exec(void *state, const char *code, size_t len,
                      struct shim_exec_result *out)
{
    return local_exec_until(state, code, len, NULL, out);
}

static int local_file_get(void *state, const char *name, size_t max, char **out, size_t *len)
{
    return shim_local_file_get(state, name, max, out, len);
}

static int local_file_put(void *state, const char *name, const void *data, size_t len)
{
    return shim_local_file_put(state, name, data, len);
}

static int local_file_remove(void *state, const char *name)
{
    return shim_local_file_remove(state, name);
}

/* ---- handing a sandbox to a fork of this process (sandbox.h) ---- */

static int local_warm(const struct shim_config *cfg)
{
    struct shim_local_params p;

    params_init(&p, cfg);
    return shim_local_zygote_warm(&p);
}

/* Only a sandbox forked from the fork server: its processes are the
 * server's children, not ours, so a fork of ours can own it. */
static int local_create_forked(const struct shim_config *cfg, void **state)
{
    struct shim_local_params p;
    struct shim_local *l;
    int rc;

    params_init(&p, cfg);
    if (!p.fork_server)
        return -ENOTSUP;
    if (!(l = shim_local_new(&p)))
        return -ENOMEM;
    if ((rc = shim_local_start_forked(l)) != 0) {
        free(l);
        return rc == -ENOTSUP ? -EAGAIN : rc;
    }
    *state = l;
    return 0;
}

/* ---- lending a sandbox to another process (sandbox.h) ---- */

/* In the sandbox host: only a forked sandbox that never ran code, up,
 * with nothing said since its hello. */
static int local_lend(void *state, int *fd, long *pid)
{
    struct shim_local *l = state;
    struct pollfd pf;

    if (l->life < 0 || l->fd < 0 || l->used || l->lent)
        return -EINVAL;
    if (!l->up && shim_local_wait_up(l) != 0)
        return -ECHILD;
    pf = (struct pollfd){.fd = l->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pf, 1, 0) != 0)
        return -ECONNRESET;
    *fd = l->fd;
    *pid = (long)l->pid;
    l->fd = -1;
    return 0;
}

static int local_life_fd(void *state)
{
    const struct shim_local *l = state;

    return l->fd < 0 ? l->life : -1;
}

/* In the borrower: the lent control socket, the supervisor up (the host
 * read its hello). Its processes, cgroup and end are the host's. */
static int local_create_lent(const struct shim_config *cfg, int fd, long pid, void **state)
{
    struct shim_local_params p;
    struct shim_local *l;

    params_init(&p, cfg);
    if (p.unsafe || fd < 0 || pid <= 0)
        return -EINVAL;
    p.fork = NULL; /* a lost one restarts the cold way */
    p.fork_server = 0;
    if (!(l = shim_local_new(&p)))
        return -ENOMEM;
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
        free(l);
        return -errno;
    }
    l->fd = fd;
    l->pid = (pid_t)pid;
    l->up = 1;
    l->lent = 1;
    *state = l;
    return 0;
}

/* cgroup.c removes the leftovers of processes that are gone whenever it
 * makes a cgroup: one made and removed at once does just that. */
static void local_tidy(const struct shim_config *cfg)
{
    struct shim_cgroup cg;

    if (cfg->unsafe_no_isolation ||
        shim_cgroup_create(&cg, cfg->memory_limit ? cfg->memory_limit : 1ULL << 30, 16) != 0)
        return;
    shim_cgroup_destroy(&cg);
}

const struct shim_sandbox_ops shim_sandbox_local = {
    .name = "local",
    .create = local_create,
    .exec = local_exec,
    .exec_until = local_exec_until,
    .destroy = local_destroy,
    .file_get = local_file_get,
    .file_put = local_file_put,
    .file_remove = local_file_remove,
    .warm = local_warm,
    .create_forked = local_create_forked,
    .lend = local_lend,
    .life_fd = local_life_fd,
    .create_lent = local_create_lent,
    .tidy = local_tidy,
};
