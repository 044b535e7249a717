/* local_int.h - what the files of the local backend share; nothing else
 * includes it (the dispatcher sees only shim_sandbox_local, sandbox_int.h).
 *
 * The backend, one concern a file:
 *   local.c        the ops table: create, exec, destroy; the overview
 *   local_exec.c   one execution: the request, the reply made a result
 *   local_proc.c   the sandbox's processes: start, hello, stop, reap
 *   local_jail.c   what is started: bwrap's command line, the start-up
 *                  shell and bootstrap, the tmpfs spawn.c mounts
 *   jail.def       the jail, the one description of it: namespaces, ids,
 *                  environment, mounts, limits (a table both paths read)
 *   local_layout.c that table as bubblewrap's arguments and as the fork
 *                  server's; tmpfs places; the interpreter seen
 *   local_root.c   the unsafe mode's host directory
 *   local_argv.h   a command line built in place (capped)
 *   local_chan.c   the control socket: frames with deadlines
 *   local_msg.c    every text the model or the log gets from this backend
 *   local_files.c  the files of /mnt/data, read and written between
 *                  executions
 *   local_zygote.c the fork server: sandboxes forked from a pre-imported,
 *                  isolated Python (worker.py's _zygote)
 * and, shared with the launcher's --check, each start's cgroup (cgroup.h):
 *   cgroup.c       the front: which version, names, create, kill, remove
 *   cgroup_v1.c    the v1 memory and pids hierarchies and their limits
 *   cgroup_v2.c    a delegated v2 subtree, its limits, cgroup.kill
 *   cgroup_fs.c    the cgroup filesystems' files, /proc/<pid>/cgroup
 *
 * A struct shim_local is one sandbox instance; it is used by one thread at a
 * time (sandbox.c's mutex). */
#ifndef SHIM_LOCAL_INT_H
#define SHIM_LOCAL_INT_H

#include "base/buf.h"
#include "base/clock.h"
#include "sandbox/local/cgroup.h"
#include "sandbox/sandbox_int.h"
#include "system/config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define OUT_SLACK 4096   /* read beyond output_cap so sandbox.c can cut */
#define GRACE_S 15       /* backstop beyond the supervisor's own limit */
/* The sandbox's descriptors: 0-2 stdio (2: setup errors), 3 control,
 * 4 seccomp, 5 passwd, 6 group (read and closed by bwrap), 7 and 8 the
 * supervisor's and the first worker's ends of their socketpair. */
#define NFDS 9
/* The private tmpfs (/dev/shm, /mnt/data, /tmp) spawn.c mounts arrive at
 * NFDS.. for bwrap --bind-fd, which closes them once bound. */
#define NTMPFS 3
/* Where a CODESHIM_PYTHON environment outside /usr is seen in a sandbox:
 * not below the private tmpfs that would hide it. */
#define SHIM_ENV_MNT "/opt/codeshim-python"

struct shim_local;

/* What a sandbox is made from: the configuration with its defaults
 * applied. Two sandboxes with equal params are interchangeable before
 * either ran code (one fork server serves both: local_zygote.c). */
struct shim_local_params {
    char python[SHIM_PATH_MAX];
    char bwrap[SHIM_PATH_MAX];
    char tmpdir[SHIM_PATH_MAX];
    int unsafe;
    int timeout_s;
    size_t output_cap;
    unsigned long long memory, file_size, disk, inodes;
    int procs, cpu_s, open_files;
    int fork_server;   /* started from a fork server (local_zygote.c) */
    char preload[512]; /* what the fork server imports */
    /* shim_local_zygote_fork when fork_server is set (local.c sets it:
     * local_proc.c calls it through this, below the fork server's layer) */
    int (*fork)(struct shim_local *l);
};

struct shim_local {
    struct shim_local_params p;
    char python_real[PATH_MAX]; /* sandbox mode: the python run inside */
    char env_prefix[PATH_MAX];  /* a virtualenv's or conda's prefix outside
                                   /usr, bound read-only at SHIM_ENV_MNT */
    char root[SHIM_PATH_MAX]; /* unsafe mode: our private host directory */
    pid_t pid;    /* bwrap (unsafe: the supervisor), or -1 */
    int fd;       /* our end of the control socket, non-blocking, or -1 */
    int errfd;    /* read end of the sandbox's stderr (setup errors), or -1 */
    int up;       /* the supervisor said hello */
    uint32_t seq; /* last request number */
    int used;     /* an execution ran in this sandbox instance */
    int lost_all; /* a used sandbox was ended: say so in the next execution */
    char why[1024]; /* why the last start failed */
    struct shim_cgroup cg; /* this start's cgroup (cgroup.c), or empty */
    int own_tmpfs; /* this start's tmpfs are spawn.c's (with inode limits),
                      not bwrap's */
    int zygote;   /* this is a fork server (local_zygote.c), no sandbox */
    int life;     /* forked from one: its life socket (pid is then the
                     sandbox's PID 1, not our child), or -1 */
    int lent;     /* lent by the sandbox host (its control socket only:
                     the host keeps its life socket and cgroup and ends
                     them once the socket is closed here) */
};


static inline void shim_local_close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* local_proc.c: are sandboxes made from a and b interchangeable before
 * they ran code? */
int shim_local_same_params(const struct shim_local_params *a,
                           const struct shim_local_params *b);

/* local_proc.c: a new instance (nothing started); NULL when out of memory. */
struct shim_local *shim_local_new(const struct shim_local_params *p);

/* local_proc.c: this process lets go of l, whose processes another one
 * owns (a fork of ours, or, in a forked child, the parent): its
 * descriptors here are closed, its cgroup forgotten, l freed; nothing is
 * stopped. */
void shim_local_forget(struct shim_local *l);

/* local_proc.c: start() launches the sandbox (it is up once it said
 * hello: wait_up); both leave the reason of a failure in l->why. stop()
 * ends every process of the sandbox, started or still starting, and
 * reaps bwrap; err, if not NULL, receives what the sandbox wrote on its
 * stderr; it returns bwrap's wait status, or -1. */
int shim_local_start(struct shim_local *l);
/* start() from the fork server only: -EAGAIN (or -errno) when none is up
 * or the fork failed, and nothing is started the cold way. */
int shim_local_start_forked(struct shim_local *l);
int shim_local_wait_up(struct shim_local *l);
int shim_local_stop(struct shim_local *l, char *err, size_t errsz);

/* local_zygote.c: starts l (cgroup made, nothing started) as a fork of
 * the fork server made from l->p, if this process has one up (warm
 * below). 0 (l->fd, errfd, life and pid set, hello to come), or -errno:
 * none is up or it failed, the caller starts l as without one. Called by
 * shim_local_start through l->p.fork. */
int shim_local_zygote_fork(struct shim_local *l);
/* local_zygote.c: starts p's fork server now if there is none (the only
 * way one starts: for a process that opens sandboxes for others, the
 * sandbox and session hosts). 1 when it is up, 0 while it starts,
 * -ENOTSUP when p has none or it failed. */
int shim_local_zygote_warm(const struct shim_local_params *p);

/* local_jail.c */
/* A uid no account uses, a new one at each call (root hosts). */
uid_t shim_local_fresh_uid(void);
/* Fills *sp (path, argv, envp, cwd, credentials; not fds) and, isolated,
 * fds[4..6] (seccomp, passwd, group: the caller closes them) to start the
 * sandbox; *mem owns what sp points to (free() it after the spawn). On
 * failure l->why says why. 0 or -errno. */
int shim_local_command(struct shim_local *l, struct shim_spawn *sp, int fds[NFDS],
                       void **mem);

/* local_root.c: the unsafe mode's private host directory l->root: made
 * (mkdtemp in the params' tmpdir; 0 or -errno, logged), and removed with
 * all in it. */
int shim_local_make_root(struct shim_local *l);
void shim_local_rm_root(const struct shim_local *l);
/* (Re)creates root/{data,home,tmp}; a root that is no longer our own
 * directory is refused. */
int shim_local_refresh_root(const struct shim_local *l);

/* local_layout.c: the jail's layout, into a command line
 * (local_argv.h). */
struct cmd;
/* The size and file count of private tmpfs place i (NTMPFS of them:
 * /dev/shm, /mnt/data, /tmp). */
unsigned long long shim_local_layout_tmpfs_size(const struct shim_local *l, int i);
unsigned long long shim_local_layout_tmpfs_inodes(const struct shim_local *l, int i);
/* Tmpfs place i's mount options (mode, size, file count), then extra;
 * 0 or -ENAMETOOLONG. */
int shim_local_layout_tmpfs_opts(const struct shim_local *l, int i,
                                 const char *extra, char *out, size_t outsz);
/* The fork server's own arguments (worker/zygote.py's _zygote): what each
 * sandbox it forks makes its own (JAIL, from jail.def), and its limits. */
void shim_local_layout_zygote(struct cmd *c, const struct shim_local *l);
/* The jail (jail.def) as bubblewrap's arguments: a sandbox's, or
 * (l->zygote) the fork server's. */
void shim_local_layout_args(struct cmd *c, const struct shim_local *l);
/* The sandbox's uid and gid inside its user namespace (jail.def). */
unsigned shim_local_jail_id(void);
/* Its working directory, the data directory (jail.def). */
const char *shim_local_jail_cwd(void);
/* Is the interpreter inside the part of the host the sandbox sees? Sets
 * l->python_real, what the sandbox runs: python with its links resolved
 * (a link outside /usr would not be seen), or, for an environment (see
 * env_prefix), python as the environment names it, so that Python finds
 * the environment (pyvenv.cfg, its lib) from it: at SHIM_ENV_MNT when the
 * prefix is outside /usr (l->env_prefix, bound there read-only). */
int shim_local_layout_python(struct shim_local *l);

/* local_chan.c: framed I/O on l->fd with an absolute deadline (ms,
 * shim_clock_ms()); errors are -ETIMEDOUT, -ECONNRESET at the end of
 * the stream, -EPROTO for a frame that cannot be ours, or -errno. */
/* How an execution ended, as worker.py's reply frame says it (one byte). */
enum shim_local_reply_kind {
    SHIM_REPLY_DONE = 'D',     /* the cell ran to its end */
    SHIM_REPLY_TIMEOUT = 'T',  /* the time limit: interpreter restarted */
    SHIM_REPLY_DIED = 'X',     /* the interpreter died: restarted */
    SHIM_REPLY_INVALID = 'I',  /* it said something invalid: restarted */
};
struct shim_local_reply {
    enum shim_local_reply_kind kind;
    int restarted;
    struct cJSON *meta, *worker; /* owned; worker only for D */
    const char *out;             /* borrowed from the frame */
    size_t out_len;
};
int shim_local_recv_frame(struct shim_local *l, struct shim_buf *b,
                          int64_t deadline);
int shim_local_send_request(struct shim_local *l, const char *code, size_t len,
                            int64_t deadline);
/* Splits an 'R' frame answering request l->seq. */
int shim_local_split_reply(const struct shim_local *l, const struct shim_buf *b,
                           struct shim_local_reply *r);
void shim_local_reply_free(struct shim_local_reply *r);

/* local_exec.c: one execution (local.c's ops table wraps it). */
struct shim_exec_stop;
int shim_local_exec(struct shim_local *l, const char *code, size_t len,
                    const struct shim_exec_stop *stop, struct shim_exec_result *out);
/* local_chan.c: asks the supervisor to interrupt the running request
 * l->seq (a 'K' frame; worker.py answers it as a timed-out one). */
int shim_local_send_interrupt(struct shim_local *l, int64_t deadline);

/* local_msg.c: the why of a failed start (into l->why), and the texts of
 * an execution (appended to logs; out->status set where it says so). */
enum shim_local_failure {
    LF_PYTHON_MISSING,  /* detail: strerror */
    LF_PYTHON_OUTSIDE,  /* detail: the resolved path */
    LF_TREE,            /* detail: strerror */
    LF_NO_BWRAP,        /* detail: strerror */
    LF_SECCOMP,         /* detail: strerror */
    LF_TOO_LONG,
    LF_NO_SOCKET,       /* detail: strerror */
    LF_NO_FDS,          /* detail: strerror */
    LF_SPAWN,           /* detail: strerror */
    LF_PYTHON_FAILED,   /* detail: what the sandbox said */
    LF_ISOLATION,       /* detail: what bwrap said */
};
void shim_local_fail(struct shim_local *l, enum shim_local_failure what,
                     const char *detail);
/* Fills out with l->why: nothing was run. 0 or -ENOMEM. */
int shim_local_refuse(struct shim_local *l, struct shim_buf *logs,
                      struct shim_exec_result *out);
int shim_local_too_large(size_t len, struct shim_buf *logs,
                         struct shim_exec_result *out);
void shim_local_note_lost(struct shim_buf *logs, int all);
/* The interpreter ended (reply kind T, X or I), the sandbox kept. */
void shim_local_ended(const struct shim_local *l, enum shim_local_reply_kind kind,
                      const char *exit_desc,
                      struct shim_buf *logs, struct shim_exec_result *out);
/* The supervisor did not answer as it must (rc) and was ended (st: bwrap's
 * wait status or -1). */
void shim_local_lost(const struct shim_local *l, int rc, int st,
                     struct shim_buf *logs, struct shim_exec_result *out);

/* local_files.c: a file of /mnt/data (name relative to it) into a new
 * buffer of at most max bytes (-EFBIG beyond, -ENOENT when it is not a
 * regular file), and a file written whole as name (no "/"), replacing one
 * of that name atomically, and a regular file removed (-ENOENT when there
 * is none). 0 or -errno. */
int shim_local_file_get(struct shim_local *l, const char *name, size_t max, char **out,
                        size_t *len);
int shim_local_file_put(struct shim_local *l, const char *name, const void *data, size_t len);
int shim_local_file_remove(struct shim_local *l, const char *name);

#endif
