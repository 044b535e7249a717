/* sessions.c - the `codeshim sessions [stop ID|--all]` subcommand (see
 * sessions.h). The layout it reads is session.h's:
 *   <runtime>/<identity>/<32 hex>/{pid,cntr,ttl}   a session's supervisor
 *   <runtime>/hosts/<settings>-<build>/pid         the user's sandbox host
 * A session's socket is never connected to for the listing (a session
 * serves one connection at a time: a look would delay its program); a
 * host is asked {"op":"status"} for its count of sessions. Memory is the
 * proportional set size (PSS) of the process and its descendants, but a
 * host's leaves out its sessions' supervisors (listed on their own); it
 * includes its fork server and the sandboxes forked from it, the
 * sandboxes it lent to sessions among them (a session started alone, with
 * no host, counts its own). */
#include "sessions.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "session/proto.h"
#include "session/session.h"
#include "store/store.h"
#include "system/config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_ENTRIES 4096
#define MAX_PROCS 65536
#define STOP_WAIT_MS 20000

struct entry {
    int host;           /* the user's sandbox host, else a session */
    char ident[9];      /* the identity directory's first 8 characters ("-": a host) */
    char name[33];      /* a session's directory name / a host's settings */
    char cid[64];       /* a session's container id */
    char dir[SHIM_PATH_MAX];
    long pid;
    long idle_s, ttl_s; /* -1: unknown */
    int sessions;       /* a host's, -1: did not answer */
    unsigned long long pss_kb;
};

static struct entry entries[MAX_ENTRIES];
static size_t nentries;

/* The process table's parent links, read once, for descendants. */
static struct {
    long pid, ppid;
} procs[MAX_PROCS];
static size_t nprocs;

static void read_procs(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;

    nprocs = 0;
    while (d && (e = readdir(d)) != NULL && nprocs < MAX_PROCS) {
        char p[64], buf[512], *rp;
        FILE *f;
        long ppid;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%.32s/stat", e->d_name);
        if (!(f = fopen(p, "r")))
            continue;
        rp = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL; /* comm may hold spaces */
        fclose(f);
        if (rp && sscanf(rp + 1, " %*c %ld", &ppid) == 1) {
            procs[nprocs].pid = atol(e->d_name);
            procs[nprocs++].ppid = ppid;
        }
    }
    if (d)
        closedir(d);
}

static unsigned long long pss_of(long pid)
{
    char p[64], line[256];
    unsigned long long kb = 0;
    FILE *f;

    snprintf(p, sizeof(p), "/proc/%ld/smaps_rollup", pid);
    if (!(f = fopen(p, "r")))
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Pss: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static int is_session(long pid);

/* PSS of pid and every descendant but the sessions listed on their own,
 * in kB (bounded depth: the table may change while it is read). */
static unsigned long long tree_pss(long pid, int depth)
{
    unsigned long long kb = pss_of(pid);
    size_t i;

    for (i = 0; depth < 16 && i < nprocs; i++)
        if (procs[i].ppid == pid && !is_session(procs[i].pid))
            kb += tree_pss(procs[i].pid, depth + 1);
    return kb;
}

static int is_session(long pid)
{
    size_t i;

    for (i = 0; i < nentries; i++)
        if (!entries[i].host && entries[i].pid == pid)
            return 1;
    return 0;
}

static long read_num(const char *dir, const char *name)
{
    char p[SHIM_PATH_MAX + 16], text[32];

    if (shim_fileio_join(p, sizeof(p), dir, name) < 0 || shim_store_read(p, text, sizeof(text), 1) < 0)
        return -1;
    return strtol(text, NULL, 10);
}

static int live(long pid)
{
    return pid > 1 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* 1 when pid is a live sandbox host or session supervisor, by its command
 * line: a host's is `codeshim-sessiond <runtime>/hosts/<name> ...`, a
 * session's `codeshim-sessiond --session[-alone] <runtime>/<ident>/<name>
 * ...` (want: "/hosts/" or "/<ident>/"), so a pid file left behind whose
 * number now names another process is never signalled. */
static int ours(long pid, const char *want)
{
    char p[64], cmd[SHIM_PATH_MAX + 128];
    size_t n, arg;
    ssize_t k;

    if (!live(pid))
        return 0;
    snprintf(p, sizeof(p), "/proc/%ld/cmdline", pid);
    k = shim_fileio_read(p, 0, cmd, sizeof(cmd)); /* a longer one is cut */
    if (k < 0 && k != -EFBIG)
        return 0;
    n = k < 0 ? sizeof(cmd) - 1 : (size_t)k;
    arg = strlen(cmd) + 1; /* argv[1] follows argv[0] */
    if (arg < n && !strncmp(cmd + arg, "--session", 9))
        arg += strlen(cmd + arg) + 1; /* a session's directory is argv[2] */
    return arg < n && strstr(cmd + arg, want) != NULL;
}

/* A host's count of sessions ({"op":"status"}), or -1. */
static int host_sessions(const char *dir)
{
    int fd = shim_proto_socket(dir, 0), n = -1;
    cJSON *msg = cJSON_CreateObject(), *ans = NULL;

    if (fd >= 0 && msg && cJSON_AddStringToObject(msg, "op", "status") &&
        shim_proto_send(fd, msg, 2000) == 0 && shim_proto_recv(fd, &ans, 5000) == 0 &&
        cJSON_IsNumber(cJSON_GetObjectItem(ans, "sessions")))
        n = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(ans, "sessions"));
    cJSON_Delete(msg);
    cJSON_Delete(ans);
    if (fd >= 0)
        close(fd);
    return n;
}

static struct entry *add(int host, const char *ident, const char *name, const char *dir,
                         long pid)
{
    struct entry *e;

    if (nentries == MAX_ENTRIES)
        return NULL;
    e = &entries[nentries++];
    memset(e, 0, sizeof(*e));
    e->host = host;
    snprintf(e->ident, sizeof(e->ident), "%.8s", ident);
    snprintf(e->name, sizeof(e->name), "%.32s", name);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    e->pid = pid;
    e->idle_s = e->ttl_s = -1;
    e->sessions = -1;
    return e;
}

static void scan_identity(const char *root, const char *ident)
{
    char id[SHIM_PATH_MAX], p[SHIM_PATH_MAX], cp[SHIM_PATH_MAX + 8], want[80];
    struct dirent *e;
    struct stat st;
    DIR *d;

    if (shim_fileio_join(id, sizeof(id), root, ident) < 0 || !(d = opendir(id)))
        return;
    snprintf(want, sizeof(want), "/%.64s/", ident);
    while ((e = readdir(d)) != NULL) {
        struct entry *en;
        long pid;
        if (!shim_session_is_name(e->d_name) || shim_fileio_join(p, sizeof(p), id, e->d_name) < 0 ||
            lstat(p, &st) < 0 || !S_ISDIR(st.st_mode) || !ours(pid = read_num(p, "pid"), want))
            continue;
        if (!(en = add(0, ident, e->d_name, p, pid)))
            break;
        if (shim_fileio_join(cp, sizeof(cp), p, "cntr") == 0)
            shim_store_read(cp, en->cid, sizeof(en->cid), 1);
        en->idle_s = (long)(shim_clock_wall_s() - st.st_mtime);
        en->ttl_s = read_num(p, "ttl");
    }
    closedir(d);
}

/* The user's sandbox hosts, <runtime>/hosts/<settings>-<build>. */
static void scan_hosts(const char *root)
{
    char hosts[SHIM_PATH_MAX], p[SHIM_PATH_MAX];
    struct dirent *e;
    DIR *d;

    if (shim_fileio_join(hosts, sizeof(hosts), root, "hosts") < 0 || !(d = opendir(hosts)))
        return;
    while ((e = readdir(d)) != NULL) {
        struct entry *en;
        long pid;
        if (e->d_name[0] == '.' || shim_fileio_join(p, sizeof(p), hosts, e->d_name) < 0 ||
            !ours(pid = read_num(p, "pid"), "/hosts/"))
            continue;
        if (!(en = add(1, "-", e->d_name, p, pid)))
            break;
        en->sessions = host_sessions(p);
    }
    closedir(d);
}

/* Every host and session under the runtime directory; 0, or 1 (said
 * why) when it is not private. */
static int scan(const struct shim_config *cfg, char *root, size_t n)
{
    struct dirent *e;
    struct stat st;
    size_t i;
    DIR *d;

    nentries = 0;
    snprintf(root, n, "%s", cfg->runtime_dir);
    if (!root[0] || lstat(root, &st) < 0)
        return 0; /* nothing was ever started here */
    if (shim_store_runtime(cfg, root, n) < 0) {
        fprintf(stderr, "codeshim sessions: %s\n", shim_store_why());
        return 1;
    }
    if (!(d = opendir(root)))
        return 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && strcmp(e->d_name, "containers") && strcmp(e->d_name, "hosts"))
            scan_identity(root, e->d_name);
    closedir(d);
    scan_hosts(root);
    read_procs();
    for (i = 0; i < nentries; i++)
        entries[i].pss_kb = tree_pss(entries[i].pid, 0);
    return 0;
}

static void fmt_secs(long s, char *out, size_t n)
{
    if (s < 0)
        snprintf(out, n, "-");
    else if (s < 3600)
        snprintf(out, n, "%ldm%02lds", s / 60, s % 60);
    else
        snprintf(out, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
}

static void list(const char *root)
{
    size_t i;

    printf("runtime directory: %s\n", root[0] ? root : "(none)");
    if (!nentries) {
        printf("no sandbox hosts or sessions\n");
        return;
    }
    printf("%-8s  %-7s  %-12s  %-53s  %7s  %7s  %8s  %9s\n", "IDENTITY", "KIND", "ID",
           "CONTAINER", "PID", "IDLE", "TTL LEFT", "MEMORY");
    for (i = 0; i < nentries; i++) {
        const struct entry *e = &entries[i];
        char idle[32], left[32], what[48];
        fmt_secs(e->idle_s, idle, sizeof(idle));
        fmt_secs(e->ttl_s < 0 || e->idle_s < 0 ? -1 : e->ttl_s > e->idle_s ? e->ttl_s - e->idle_s : 0,
                 left, sizeof(left));
        if (e->host)
            snprintf(what, sizeof(what), "sessions:%d", e->sessions);
        printf("%-8s  %-7s  %-12.12s  %-53s  %7ld  %7s  %8s  %6.1f MiB\n", e->ident,
               e->host ? "host" : "session", e->name, e->host ? what : e->cid, e->pid, idle,
               left, (double)e->pss_kb / 1024.0);
    }
}

/* Sends the stop, then waits (bounded) for every pid to be gone. */
static void stop(struct entry *const *v, size_t n)
{
    struct timespec ts = {0, 20 * 1000000};
    int waited = 0;
    size_t i, left;

    for (i = 0; i < n; i++) {
        if (v[i]->host)
            kill((pid_t)v[i]->pid, SIGTERM); /* it ends its sessions first */
        else
            shim_session_stop(v[i]->dir);
    }
    do {
        for (i = 0, left = 0; i < n; i++)
            left += live(v[i]->pid);
        if (left)
            nanosleep(&ts, NULL);
    } while (left && (waited += 20) < STOP_WAIT_MS);
    for (i = 0; i < n; i++)
        printf("stopped %s %s%s\n", v[i]->host ? "host" : "session", v[i]->name,
               live(v[i]->pid) ? " (still ending)" : "");
}

/* A session by its ID (4 or more of its first characters) or container
 * id; with ident, every session of the identity whose first characters
 * (4 to 8) id is. Hosts are stopped only with --all. */
static int matches(const struct entry *e, const char *id, int ident)
{
    size_t n = strlen(id);

    if (e->host)
        return 0;
    if (ident)
        return n >= 4 && n <= 8 && !strncmp(e->ident, id, n);
    return (n >= 4 && !strncmp(e->name, id, n)) || !strcmp(e->cid, id);
}

static void usage(FILE *out)
{
    fprintf(out, "usage: codeshim sessions                 list this user's sandbox hosts "
                 "and sessions\n"
                 "       codeshim sessions stop ID|--all   end a session (ID: its ID or "
                 "container id),\n"
                 "                                         an identity's sessions (ID: the "
                 "IDENTITY),\n"
                 "                                         or every session and host\n");
}

int cli_sessions_main(int argc, char **argv)
{
    static struct entry *pick[MAX_ENTRIES];
    const struct shim_config *cfg = shim_config();
    char root[SHIM_PATH_MAX];
    size_t i, n = 0;
    int all, ident;

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc > 3 || (argc > 1 && strcmp(argv[1], "stop")) || argc == 2) {
        usage(stderr);
        return 2;
    }
    if (scan(cfg, root, sizeof(root)))
        return 1;
    if (argc == 1) {
        list(root);
        return 0;
    }
    all = !strcmp(argv[2], "--all");
    for (i = 0; i < nentries; i++)
        if (all || matches(&entries[i], argv[2], 0))
            pick[n++] = &entries[i];
    for (i = 0, ident = !all && !n; ident && i < nentries; i++)
        if (matches(&entries[i], argv[2], 1))
            pick[n++] = &entries[i];
    if (!all && !n) {
        fprintf(stderr, "codeshim sessions: no session or identity %s\n", argv[2]);
        return 1;
    }
    if (!all && !ident && n > 1) {
        fprintf(stderr, "codeshim sessions: %s names %zu sessions; give more of its ID\n",
                argv[2], n);
        return 2;
    }
    stop(pick, n);
    if (!n)
        printf("no sandbox hosts or sessions\n");
    return 0;
}
