/* check.c - `codeshim --check`: what isolation this machine gives the
 * code the model writes. It asks the machine (bubblewrap, user
 * namespaces, the cgroup the library would make: cgroup.c), then starts a
 * real sandbox with the library's own code and settings and has it report
 * from inside (seccomp, capabilities, its tmpfs, its rlimits), and prints
 * which limits hold for the sandbox as a whole and which per process.
 * Exit 0 when code ran isolated, 1 otherwise. */
#include "check.h"

#include "base/fileio.h"
#include "sandbox/e2b/e2b_int.h"
#include "sandbox/local/cgroup.h"
#include "sandbox/sandbox.h"
#include "system/config.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the sandbox says about itself: one JSON line. */
#define PROBE_PY                                                               \
    "import json, os, resource, sys\n"                                         \
    "st = {}\n"                                                                \
    "for line in open('/proc/self/status'):\n"                                 \
    "    k, _, v = line.partition(':')\n"                                      \
    "    if k in ('Seccomp', 'NoNewPrivs', 'CapEff'):\n"                        \
    "        st[k] = v.strip()\n"                                              \
    "fs = {}\n"                                                                \
    "for d in ('/mnt/data', '/tmp', '/dev/shm'):\n"                            \
    "    v = os.statvfs(d)\n"                                                  \
    "    fs[d] = [v.f_blocks * v.f_frsize, v.f_files]\n"                        \
    "rl = {n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n))[0]\n"       \
    "      for n in ('AS', 'NPROC', 'NOFILE', 'FSIZE', 'CPU')}\n"              \
    "net = [l.split(':')[0].strip() for l in\n"                                \
    "       open('/proc/net/dev').read().splitlines()[2:]]\n"                   \
    "print(json.dumps({'status': st, 'fs': fs, 'rlimit': rl, 'net': net,\n"    \
    "                  'uid': os.getuid(), 'python': sys.version.split()[0]}))"

static void row(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void row(const char *what, const char *fmt, ...)
{
    va_list ap;

    printf("  %-17s ", what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* "1.5 GiB", "64 MiB", "512 KiB" */
static const char *size_text(unsigned long long n, char *buf, size_t bufsz)
{
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0 || v == (double)(unsigned long long)v)
        snprintf(buf, bufsz, "%.0f %s", v, unit[u]);
    else
        snprintf(buf, bufsz, "%.1f %s", v, unit[u]);
    return buf;
}

/* The first line bwrap --version prints, or "" (0, or -errno). */
static int bwrap_version(const char *bwrap, char *out, size_t outsz)
{
    char *argv[] = {(char *)bwrap, (char *)"--version", NULL};
    posix_spawn_file_actions_t fa;
    int p[2], st, rc;
    pid_t pid;
    ssize_t n;

    out[0] = '\0';
    if (pipe2(p, O_CLOEXEC) != 0)
        return -errno;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    rc = posix_spawn(&pid, bwrap, &fa, NULL, argv, NULL);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc) {
        close(p[0]);
        return -rc;
    }
    n = read(p[0], out, outsz - 1);
    out[n > 0 ? n : 0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    close(p[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Can this user make a user namespace? (A child tries; 0 or -errno.) */
static int userns_ok(void)
{
    pid_t pid = fork();
    int st;

    if (pid < 0)
        return -errno;
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno & 0xff);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -WEXITSTATUS(st);
}

/* The value of name in this process's (only) sandbox cgroup in base. */
static unsigned long long cgroup_value(const char *base, const char *name)
{
    char prefix[96], sub[SHIM_CG_PATH + 300], path[SHIM_CG_PATH + 400], buf[64] = "";
    unsigned long long v = 0;
    DIR *d = opendir(base);
    struct dirent *e;
    FILE *f;

    shim_cgroup_prefix(prefix, sizeof(prefix));
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        if (shim_fileio_join(sub, sizeof(sub), base, e->d_name) < 0 ||
            shim_fileio_join(path, sizeof(path), sub, name) < 0)
            break;
        f = fopen(path, "r");
        if (f && fgets(buf, sizeof(buf), f))
            v = strncmp(buf, "max", 3) ? strtoull(buf, NULL, 10) : ~0ULL;
        if (f)
            fclose(f);
        break;
    }
    if (d)
        closedir(d);
    return v;
}

static double num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsString(v) ? v->valuestring : "";
}

/* What the sandbox reported: isolated (seccomp filter, no_new_privs, no
 * capabilities, no network interface but loopback)? */
static int isolated(const cJSON *rep)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(rep, "status");
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(rep, "net");
    const cJSON *n;

    cJSON_ArrayForEach(n, net) if (!cJSON_IsString(n) ||
                                   strcmp(n->valuestring, "lo")) return 0;
    return !strcmp(str(st, "Seccomp"), "2") &&
           !strcmp(str(st, "NoNewPrivs"), "1") &&
           !strcmp(str(st, "CapEff"), "0000000000000000");
}

/* Runs the probe in a sandbox; *out the report (caller frees) or NULL,
 * why the reason then. While it is open, the sandbox's cgroup values are
 * read into mem/pids (0 when none). */
static int run_probe(const struct shim_config *cfg,
                     const struct shim_cgroup_info *cg, cJSON **out,
                     unsigned long long *mem, unsigned long long *pids,
                     char *why, size_t whysz)
{
    struct shim_sandbox *sb = NULL;
    struct shim_exec_result r;
    int rc = shim_sandbox_open(cfg, &sb);

    *out = NULL;
    *mem = *pids = 0;
    if (rc) {
        snprintf(why, whysz, "cannot open a sandbox: %s", strerror(-rc));
        return rc;
    }
    rc = shim_sandbox_exec(sb, PROBE_PY, strlen(PROBE_PY), &r);
    if (rc == 0 && r.status == SHIM_EXEC_OK)
        *out = cJSON_Parse(r.logs);
    if (rc == 0 && !*out)
        snprintf(why, whysz, "%.*s", (int)strcspn(r.logs, "\n"), r.logs);
    else if (rc)
        snprintf(why, whysz, "%s", strerror(-rc));
    if (cg->mem.version)
        *mem = cgroup_value(cg->mem.base, cg->mem.version == 2
                                              ? "memory.max"
                                              : "memory.limit_in_bytes");
    if (cg->pids.version)
        *pids = cgroup_value(cg->pids.base, "pids.max");
    if (rc == 0)
        shim_exec_result_free(&r);
    shim_sandbox_close(sb);
    return *out ? 0 : -EIO;
}

static void print_cgroup(const struct shim_cgroup_info *in, int usable)
{
    char how[2 * SHIM_CG_PATH + 64];

    if (!usable) {
        row("cgroup", "none (%s): memory is limited per process only",
            in->why[0] ? in->why : "cannot make one");
        return;
    }
    snprintf(how, sizeof(how), "%s%s%s", in->mem.version ? "memory" : "",
             in->mem.version && in->pids.version ? " and " : "",
             in->pids.version ? "pids" : "");
    if (in->mem.version && in->pids.version &&
        in->mem.version == in->pids.version)
        row("cgroup", "v%d, %s (in %s%s%s)", in->mem.version, how,
            in->mem.base, strcmp(in->mem.base, in->pids.base) ? ", " : "",
            strcmp(in->mem.base, in->pids.base) ? in->pids.base : "");
    else if (in->mem.version && in->pids.version)
        row("cgroup", "v%d memory (in %s), v%d pids (in %s)", in->mem.version,
            in->mem.base, in->pids.version, in->pids.base);
    else
        row("cgroup", "v%d, %s only (in %s)",
            in->mem.version ? in->mem.version : in->pids.version, how,
            in->mem.version ? in->mem.base : in->pids.base);
}

static void print_fs(const cJSON *rep, const char *dir, const char *label,
                     unsigned long long want_files)
{
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(rep, "fs");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(fs, dir);
    double size = cJSON_GetArraySize(d) == 2
                      ? cJSON_GetArrayItem(d, 0)->valuedouble : -1;
    double files = cJSON_GetArraySize(d) == 2
                       ? cJSON_GetArrayItem(d, 1)->valuedouble : -1;
    char b[32];

    if (size < 0) {
        row(label, "unknown");
        return;
    }
    if ((unsigned long long)files == want_files)
        row(label, "%s and %.0f files (tmpfs)",
            size_text((unsigned long long)size, b, sizeof(b)), files);
    else
        row(label, "%s, no file-count limit of its own (tmpfs: %.0f files)",
            size_text((unsigned long long)size, b, sizeof(b)), files);
}

static void print_limits(const struct shim_config *cfg, const cJSON *rep,
                         const struct shim_cgroup_info *in,
                         unsigned long long mem, unsigned long long pids)
{
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(rep, "rlimit");
    char a[32], b[32];
    double nofile = num(rl, "NOFILE"), nproc = num(rl, "NPROC");

    printf("\nlimits that hold per sandbox (all its processes together):\n");
    if (mem)
        row("memory", "%s (cgroup: page cache, tmpfs, memfd%s%s)",
            size_text(mem, a, sizeof(a)),
            in->kmem ? " and kernel memory" : "",
            in->swap ? "; no swap" : "; swap not limited");
    else
        row("memory", "none (no cgroup): only per process, below");
    if (pids)
        row("tasks", "%llu (cgroup pids.max: processes and threads, "
                     "bubblewrap's own included)", pids);
    else
        row("tasks", "%.0f (RLIMIT_NPROC, counted in the sandbox's own user "
                     "namespace)", nproc);
    if (mem && in->kmem)
        row("open files", "their kernel memory counts in the memory limit");
    else
        row("open files", "at most %.0f per process x %.0f tasks", nofile,
            pids ? (double)pids : nproc);
    print_fs(rep, "/mnt/data", "/mnt/data", cfg->inodes_limit);
    print_fs(rep, "/tmp", "/tmp", cfg->inodes_limit);
    print_fs(rep, "/dev/shm", "/dev/shm", 1024);
    printf("limits per process:\n");
    row("address space", "%s", size_text((unsigned long long)num(rl, "AS"),
                                         a, sizeof(a)));
    row("file size", "%s", size_text((unsigned long long)num(rl, "FSIZE"),
                                     b, sizeof(b)));
    row("CPU time", "%.0f s", num(rl, "CPU"));
    row("open files", "%.0f", nofile);
    printf("per execution:\n");
    row("wall clock", "%d s", cfg->exec_timeout_s);
    row("output", "%zu bytes", cfg->output_cap);
}

/* CODESHIM_CONFIG's sandboxes, or why the file cannot be used (-1). */
static int print_named(void)
{
    const char *names[16], *unusable[16], *err = shim_config_file_error();
    int sel[16];
    size_t n, i, def;

    if (err) {
        row("config file", "BROKEN: %s", err);
        printf("\nresult: requests that would run code get this error\n");
        return -1;
    }
    n = shim_config_sandbox_list(names, sel, unusable, 16, &def);
    for (i = 0; i < n && i < 16; i++)
        row(i ? "" : "named sandboxes", "%s%s%s%s%s", names[i], i == def ? " (default)" : "",
            sel[i] ? "" : " (not selectable by requests)", unusable[i] ? " UNUSABLE: " : "",
            unusable[i] ? unusable[i] : "");
    if (n)
        printf("  (the checks below use the environment's settings)\n");
    return 0;
}

/* The e2b backend, step by step as a request would meet it: the key,
 * the control plane (a list of sandboxes, which needs the key), the
 * template (a sandbox made from it, killed after), code run in it. The
 * key is never printed; e2b's texts (a->why) never hold it. 0 when code
 * ran, 1 otherwise. */
static int check_e2b(const struct shim_config *cfg)
{
    static const char *const meta[] = {"codeshim_check", "1", NULL};
    struct shim_http_net net = {0};
    struct shim_e2b_api api;
    struct shim_e2b_box box[1];
    struct shim_exec_result res;
    enum shim_e2b_exec_end end;
    const char *fail = NULL;
    double secs;
    size_t n;
    int rc;

    printf("codeshim --check: the e2b sandbox backend (CODESHIM_SANDBOX=e2b)\n\n");
    if (print_named() < 0)
        return 1;
    if (!cfg->e2b_api_key[0]) {
        row("API key", "MISSING: set E2B_API_KEY (or CODESHIM_E2B_API_KEY)");
        printf("\nresult: e2b cannot be used: no API key\n");
        return 1;
    }
    row("API key", "set (%s)", getenv("CODESHIM_E2B_API_KEY") && *getenv("CODESHIM_E2B_API_KEY")
                                  ? "CODESHIM_E2B_API_KEY" : "E2B_API_KEY");
    /* the library uses the program's libcurl; the launcher links none */
    if (!dlopen("libcurl.so.4", RTLD_NOW | RTLD_GLOBAL)) {
        row("control plane", "FAILED: libcurl cannot be loaded (%s)", dlerror());
        printf("\nresult: e2b cannot be reached from here\n");
        return 1;
    }
    rc = shim_e2b_api_init(&api, cfg, &net);
    if (rc < 0) {
        row("control plane", "FAILED: %s", strerror(-rc));
        printf("\nresult: e2b cannot be reached from here\n");
        return 1;
    }
    api.retry_cap_s = 0; /* a check reports a rate limit, it does not wait one out */
    rc = shim_e2b_list(&api, meta[0], meta[1], box, 0, &n);
    if (rc < 0) {
        row("control plane", "FAILED: %s", api.why);
        fail = rc == -EACCES ? "e2b refused the API key" : "e2b's API cannot be reached";
        goto out;
    }
    row("control plane", "reachable at %s%s, the key accepted",
        cfg->e2b_api_url[0] ? cfg->e2b_api_url : "https://api.",
        cfg->e2b_api_url[0] ? "" : cfg->e2b_domain);
    rc = shim_e2b_create(&api, meta, 60, &box[0]);
    if (rc < 0) {
        row("template", "FAILED: %s: %s", cfg->e2b_template, api.why);
        fail = api.status == 400 || api.status == 404 || api.status == 403
                   ? "the template cannot be used"
                   : "no sandbox could be created";
        goto out;
    }
    row("template", "%s: sandbox %s created", cfg->e2b_template, box[0].id);
    memset(&res, 0, sizeof(res));
    rc = shim_e2b_execute(&api, &box[0], "print(6 * 7)", 12, NULL, &res, &end, &secs);
    if (rc < 0 || end != SHIM_E2B_RAN || !res.logs || !strstr(res.logs, "42")) {
        row("code", "FAILED: %s", rc < 0 ? strerror(-rc)
                                  : end != SHIM_E2B_RAN ? api.why
                                                        : "print(6 * 7) did not print 42");
        fail = "code does not run in the sandbox";
    } else {
        row("code", "ran: print(6 * 7) printed 42 (%.1f s)", secs);
    }
    shim_exec_result_free(&res);
    if (shim_e2b_kill(&api, box[0].id) < 0)
        row("", "(the sandbox could not be ended: %s; e2b ends it in 60 s)", api.why);
out:
    shim_e2b_api_free(&api);
    if (fail)
        printf("\nresult: e2b does NOT work: %s\n", fail);
    else
        printf("\nresult: code runs on e2b\n");
    return fail ? 1 : 0;
}

/* The CODESHIM_* names that are no setting, and a backend that is none:
 * 1 when requests that would run code cannot. */
static int print_mistakes(const struct shim_config *cfg)
{
    char (*msgs)[128] = calloc(16, sizeof(*msgs));
    size_t n = msgs ? shim_config_misspelt(msgs, 16) : 0, i;

    for (i = 0; i < n; i++)
        printf("warning: %s\n", msgs[i]);
    if (n)
        printf("\n");
    free(msgs);
    if (cfg->sandbox[0])
        return 0;
    printf("result: CODESHIM_SANDBOX=%s is not one of local, e2b: requests that would run "
           "code get this error\n", getenv("CODESHIM_SANDBOX") ? getenv("CODESHIM_SANDBOX") : "");
    return 1;
}

int cli_check_main(void)
{
    const struct shim_config *cfg = shim_config();
    struct shim_cgroup_info cg;
    struct shim_cgroup trial;
    unsigned long long mem, pids;
    char ver[128], why[512];
    cJSON *rep = NULL;
    int rc, cg_ok, ok;

    if (print_mistakes(cfg))
        return 1;
    if (!strcmp(cfg->sandbox, "e2b"))
        return check_e2b(cfg);
    printf("codeshim --check: the isolation this machine gives model-written "
           "code\n\n");
    if (print_named() < 0)
        return 1;
    if (cfg->unsafe_no_isolation) {
        row("isolation", "NONE: CODESHIM_UNSAFE_NO_ISOLATION=1 runs code as "
                         "this user, without any sandbox");
        printf("\nresult: code does NOT run isolated\n");
        return 1;
    }
    rc = bwrap_version(cfg->bwrap, ver, sizeof(ver));
    if (rc)
        row("bubblewrap", "MISSING: %s (%s)", cfg->bwrap, strerror(-rc));
    else
        row("bubblewrap", "found: %s (%s)", cfg->bwrap, ver);
    rc = userns_ok();
    row("user namespaces", "%s", rc ? strerror(-rc) : "yes");
    cg_ok = shim_cgroup_probe(&cg) == 0 &&
            shim_cgroup_create(&trial, cfg->memory_limit, 16) == 0;
    if (cg_ok)
        shim_cgroup_destroy(&trial);
    print_cgroup(&cg, cg_ok);
    rc = run_probe(cfg, &cg, &rep, &mem, &pids, why, sizeof(why));
    ok = rc == 0 && isolated(rep);
    row("seccomp", "%s", rep ? (strcmp(str(cJSON_GetObjectItemCaseSensitive(
                                                rep, "status"), "Seccomp"),
                                       "2") ? "NOT in force in the sandbox"
                                            : "filter in force, no_new_privs")
                              : "unknown");
    if (rep)
        row("sandbox", "%s: Python %s, uid %.0f in its own user namespace, "
                       "network: %s",
            ok ? "code ran isolated" : "code ran but NOT isolated",
            str(rep, "python"), num(rep, "uid"),
            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rep, "net"))
                ? "loopback only" : "none");
    else
        row("sandbox", "FAILED: %s", why);
    if (rep)
        print_limits(cfg, rep, &cg, mem, pids);
    cJSON_Delete(rep);
    printf("\nresult: %s\n", ok ? "code runs isolated"
                                : "code does NOT run isolated here");
    return ok ? 0 : 1;
}
