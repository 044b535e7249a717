/* codeshim.c - the launcher: `codeshim [options] [--] PROGRAM [ARGS...]`
 * runs PROGRAM with libcodeshim.so preloaded and its options turned into
 * CODESHIM_* variables; `codeshim trace FILE` summarizes a trace (trace.c);
 * `codeshim [options] --check` reports the isolation this machine gives
 * (check.c).
 *
 * Everything is validated before anything is changed, so a mistake costs a
 * clear message and exit status 2 instead of a library that silently falls
 * back to its defaults (the library never fails on bad configuration). */
#include "check.h"
#include "libpath.h"
#include "reach.h"
#include "sessions.h"
#include "trace.h"

#include "fileio.h"
#include "settings.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CODESHIM_VERSION
#define CODESHIM_VERSION "0.1.0"
#endif

#define EXIT_USAGE 2
#define EXIT_NOLIB 1
#define EXIT_NOEXEC 126
#define EXIT_NOTFOUND 127

enum kind {
    K_FLAG,     /* no value; sets "1" */
    K_NUM,      /* whole number in [lo, hi] */
    K_WORD,     /* one of words (case-insensitive), passed in lower case */
    K_PATH,     /* a file or directory; made absolute */
    K_PROG,     /* a program: made absolute only when it holds a '/' */
};

struct option_def {
    const char *name;      /* without the leading "--" */
    const char *env;       /* CODESHIM_* variable it sets; NULL = --lib */
    enum kind kind;
    long long lo, hi;
    const char *const *words;
    const char *arg;       /* placeholder in messages and --help */
};

static const char *const log_words[] = {"error", "warn", "info", "debug", NULL};
static const char *const sandbox_words[] = {"local", "e2b", NULL};

static const struct option_def options[] = {
    {"offline", "CODESHIM_OFFLINE", K_FLAG, 0, 0, NULL, NULL},
    {"max-loops", "CODESHIM_MAX_LOOPS", K_NUM, 1, 1000, NULL, "N"},
    {"timeout", "CODESHIM_EXEC_TIMEOUT", K_NUM, 1, 86400, NULL, "SECONDS"},
    {"output-cap", "CODESHIM_OUTPUT_CAP", K_NUM, 256, 10485760, NULL, "BYTES"},
    {"log", "CODESHIM_LOG", K_WORD, 0, 0, log_words, "LEVEL"},
    {"log-file", "CODESHIM_LOG_FILE", K_PATH, 0, 0, NULL, "FILE"},
    {"trace", "CODESHIM_TRACE", K_PATH, 0, 0, NULL, "FILE"},
    {"record", "CODESHIM_RECORD", K_PATH, 0, 0, NULL, "DIR"},
    {"replay", "CODESHIM_REPLAY", K_PATH, 0, 0, NULL, "DIR"},
    {"sandbox", "CODESHIM_SANDBOX", K_WORD, 0, 0, sandbox_words, "NAME"},
    {"python", "CODESHIM_PYTHON", K_PROG, 0, 0, NULL, "PATH"},
    {"lib", NULL, K_PATH, 0, 0, NULL, "PATH"},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* What the command line asked for; values point into argv or are
 * malloc'ed (absolute paths), and live until exec. */
struct launch {
    const char *values[NOPTIONS];
    const char *lib;
    int prog;              /* index of PROGRAM in argv */
    int check;             /* --check: no PROGRAM */
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: codeshim [options] [--] PROGRAM [ARGS...]\n"
        "       codeshim [options] --check\n"
        "       codeshim trace FILE [--json]\n"
        "       codeshim sessions [stop ID|--all]\n"
        "\n"
        "Runs PROGRAM with libcodeshim.so preloaded, so its libcurl requests to\n"
        "OpenAI-compatible APIs get a working code_interpreter tool.\n"
        "\n"
        "options (each sets the environment variable shown):\n"
        "  --offline            built-in offline model, no network   CODESHIM_OFFLINE=1\n"
        "  --max-loops N        executions per request, 1..1000      CODESHIM_MAX_LOOPS\n"
        "  --timeout SECONDS    wall clock per execution, 1..86400   CODESHIM_EXEC_TIMEOUT\n"
        "  --output-cap BYTES   tool output kept, 256..10485760      CODESHIM_OUTPUT_CAP\n"
        "  --log LEVEL          error|warn|info|debug                CODESHIM_LOG\n"
        "  --log-file FILE      log here instead of stderr           CODESHIM_LOG_FILE\n"
        "  --trace FILE         append JSON Lines events to FILE     CODESHIM_TRACE\n"
        "  --record DIR         save upstream exchanges in DIR       CODESHIM_RECORD\n"
        "  --replay DIR         answer from DIR, no network          CODESHIM_REPLAY\n"
        "  --sandbox NAME       local|e2b                            CODESHIM_SANDBOX\n"
        "  --python PATH        Python of the local sandbox          CODESHIM_PYTHON\n"
        "  --lib PATH           the library (else CODESHIM_LIB, else next to\n"
        "                       this program, else ../lib/codeshim/)\n"
        "  --check              start a sandbox and report the isolation and\n"
        "                       limits this machine gives; exit 0 if isolated\n"
        "  -h, --help           this text\n"
        "  --settings           list every setting the library reads, with its\n"
        "                       default, what it takes and what it is for\n"
        "  -V, --version        print the version\n"
        "\n"
        "`codeshim trace FILE` prints a per-request summary of a trace file\n"
        "(--json: as one JSON object). `codeshim sessions` lists this user's\n"
        "session hosts and sessions; `codeshim sessions stop ID|--all` ends them.\n"
        "See codeshim(1).\n");
}

static const struct option_def *find_option(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++)
        if (strlen(options[i].name) == len && !strncmp(options[i].name, name, len))
            return &options[i];
    return NULL;
}

static int check_number(const struct option_def *o, const char *v)
{
    size_t n = strspn(v, "0123456789");
    long long x;

    /* Digits only: no sign, blanks or hex that strtoll would take. */
    if (!*v || v[n] || n > 18) {
        fprintf(stderr, "codeshim: --%s %s: not a whole number (%lld..%lld)\n", o->name, v,
                o->lo, o->hi);
        return -EINVAL;
    }
    x = strtoll(v, NULL, 10);
    if (x < o->lo || x > o->hi) {
        fprintf(stderr, "codeshim: --%s %s: out of range (%lld..%lld)\n", o->name, v, o->lo,
                o->hi);
        return -ERANGE;
    }
    return 0;
}

static const char *check_word(const struct option_def *o, const char *v)
{
    size_t i;

    for (i = 0; o->words[i]; i++)
        if (!strcasecmp(v, o->words[i]))
            return o->words[i];
    fprintf(stderr, "codeshim: --%s %s: not one of ", o->name, v);
    for (i = 0; o->words[i]; i++)
        fprintf(stderr, "%s%s", i ? "|" : "", o->words[i]);
    fputc('\n', stderr);
    return NULL;
}

/* The library opens these lazily, maybe after the program changed its
 * working directory: hand it absolute paths. Returns v itself or a
 * malloc'ed copy (kept until exec), NULL on failure. */
static const char *absolute(const char *v)
{
    char cwd[PATH_MAX];
    size_t n;
    char *out;

    if (v[0] == '/')
        return v;
    if (!getcwd(cwd, sizeof(cwd))) {
        fprintf(stderr, "codeshim: cannot resolve %s: %s\n", v, strerror(errno));
        return NULL;
    }
    n = strlen(cwd) + strlen(v) + 2;
    out = malloc(n);
    if (!out) {
        fprintf(stderr, "codeshim: out of memory\n");
        return NULL;
    }
    shim_fileio_join(out, n, cwd, v); /* n fits both */
    return out;
}

/* Checks v for option o and returns the value to export, or NULL (after a
 * message). */
static const char *option_value(const struct option_def *o, const char *v)
{
    switch (o->kind) {
    case K_FLAG:
        return "1";
    case K_NUM:
        return check_number(o, v) < 0 ? NULL : v;
    case K_WORD:
        return check_word(o, v);
    case K_PATH:
    case K_PROG:
        if (!*v) {
            fprintf(stderr, "codeshim: --%s needs a non-empty %s\n", o->name, o->arg);
            return NULL;
        }
        if (o->kind == K_PROG && !strchr(v, '/'))
            return v;
        return absolute(v);
    }
    return NULL;
}

static int is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Parses one "--name[=value]" at argv[*i], advancing *i past its value.
 * 0, 1 = done (--help/--version printed), or -EINVAL (message printed). */
static int parse_option(int argc, char **argv, int *i, struct launch *l)
{
    const char *arg = argv[*i] + 2, *eq = strchr(arg, '='), *v = "", *val;
    const struct option_def *o = find_option(arg, eq ? (size_t)(eq - arg) : strlen(arg));

    if (!o) {
        fprintf(stderr, "codeshim: unknown option %s (see codeshim --help)\n", argv[*i]);
        return -EINVAL;
    }
    if (o->kind == K_FLAG && eq) {
        fprintf(stderr, "codeshim: --%s takes no value\n", o->name);
        return -EINVAL;
    }
    if (o->kind != K_FLAG) {
        if (eq)
            v = eq + 1;
        else if (*i + 1 < argc && argv[*i + 1][0] == '-' && o->kind != K_NUM) {
            /* "--trace -- prog" or "--log-file --offline": an option
             * forgotten its value, not a file named "--" */
            fprintf(stderr,
                    "codeshim: --%s needs a value (%s), not the option-like %s "
                    "(write --%s=%s or ./%s for a file of that name)\n",
                    o->name, o->arg, argv[*i + 1], o->name, argv[*i + 1], argv[*i + 1]);
            return -EINVAL;
        } else if (*i + 1 < argc)
            v = argv[++*i];
        else {
            fprintf(stderr, "codeshim: --%s needs a value (%s)\n", o->name, o->arg);
            return -EINVAL;
        }
    }
    val = option_value(o, v);
    if (!val)
        return -EINVAL;
    if (!strcmp(o->name, "replay") && !is_dir(val)) {
        fprintf(stderr, "codeshim: --replay %s: no such directory (record one with --record)\n",
                v);
        return -EINVAL;
    }
    if (o->env)
        l->values[o - options] = val;
    else
        l->lib = val;
    return 0;
}

/* `codeshim --settings`: the library's table of settings (settings.h),
 * one a line: the variable, its default, what it takes, what it is for. */
static void print_settings(FILE *out)
{
    static const char *const kinds[] = {"boolean", "number", "size", "word", "word", "text",
                                        "absolute path", "secret", "directory"};
    size_t i;

    for (i = 0; i < shim_nsettings; i++) {
        const struct shim_setting *s = &shim_settings[i];
        char def[96], range[96];

        shim_setting_describe(s, def, range, sizeof(def));
        fprintf(out, "%-30s %-12s %s%s%s: %s\n", s->var, def, kinds[s->kind], range[0] ? " " : "",
                range, s->help);
    }
}

/* 0 with l filled, 1 when --help/--version answered, -EINVAL. */
static int parse_args(int argc, char **argv, struct launch *l)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            printf("codeshim %s\n", CODESHIM_VERSION);
            return 1;
        }
        if (!strcmp(a, "--check")) {
            l->check = 1;
            continue;
        }
        if (!strcmp(a, "--settings")) {
            print_settings(stdout);
            return 1;
        }
        if (a[0] != '-')
            break;
        if (a[1] != '-') {
            fprintf(stderr, "codeshim: unknown option %s (see codeshim --help)\n", a);
            return -EINVAL;
        }
        if (parse_option(argc, argv, &i, l) < 0)
            return -EINVAL;
    }
    if (l->check) {
        if (i < argc) {
            fprintf(stderr, "codeshim: --check runs no PROGRAM (%s)\n", argv[i]);
            return -EINVAL;
        }
        return 0;
    }
    if (i >= argc || !argv[i][0]) {
        fprintf(stderr, "codeshim: no PROGRAM to run\n");
        usage(stderr);
        return -EINVAL;
    }
    l->prog = i;
    return 0;
}

static int export(const char *name, const char *value)
{
    if (setenv(name, value, 1) < 0) {
        fprintf(stderr, "codeshim: cannot set %s: %s\n", name, strerror(errno));
        return -errno;
    }
    return 0;
}

/* Sets the CODESHIM_* variables. 0 or negative errno. */
static int export_options(const struct launch *l)
{
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < NOPTIONS; i++)
        if (l->values[i])
            rc = export(options[i].env, l->values[i]);
    return rc;
}

/* Sets LD_PRELOAD and the CODESHIM_* variables. 0 or negative errno. */
static int export_all(const struct launch *l, const char *lib)
{
    char *preload = cli_preload_value(lib, getenv("LD_PRELOAD"));
    int rc;

    if (!preload) {
        fprintf(stderr, "codeshim: out of memory\n");
        return -ENOMEM;
    }
    rc = export("LD_PRELOAD", preload);
    free(preload);
    return rc ? rc : export_options(l);
}

/* A warning when LD_PRELOAD cannot reach the program; it runs anyway
 * (the user may want it run, just not by codeshim's reach). */
static void warn_unreachable(const char *prog)
{
    char path[PATH_MAX], judged[PATH_MAX];
    enum cli_reach r;

    if (cli_reach_resolve(prog, getenv("PATH"), path, sizeof(path)) < 0)
        return; /* execvp says what is missing */
    r = cli_reach_check(path, judged, sizeof(judged));
    if (r == CLI_REACH_OK)
        return;
    fprintf(stderr,
            "codeshim: warning: %s%s%s %s; codeshim will not see its requests "
            "(running it anyway)\n",
            strcmp(judged, path) ? "the interpreter " : "", judged,
            strcmp(judged, path) ? " of the script" : "", cli_reach_text(r));
}

/* Replaces this process with PROGRAM; returns only on failure, with the
 * shell's exit status convention (127 not found, 126 cannot run). */
static int run_program(char **argv)
{
    int err;

    execvp(argv[0], argv);
    err = errno;
    if (err == ENOENT || err == ENOTDIR) {
        if (strchr(argv[0], '/'))
            fprintf(stderr, "codeshim: %s: %s\n", argv[0], strerror(err));
        else
            fprintf(stderr, "codeshim: %s: command not found\n", argv[0]);
        return EXIT_NOTFOUND;
    }
    fprintf(stderr, "codeshim: cannot run %s: %s\n", argv[0], strerror(err));
    return EXIT_NOEXEC;
}

int main(int argc, char **argv)
{
    struct launch l;
    char exe_dir[PATH_MAX], lib[PATH_MAX], err[PATH_MAX * 2 + 128];
    int rc;

    if (argc > 1 && !strcmp(argv[1], "trace"))
        return cli_trace_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "sessions"))
        return cli_sessions_main(argc - 1, argv + 1);
    memset(&l, 0, sizeof(l));
    rc = parse_args(argc, argv, &l);
    if (rc)
        return rc > 0 ? 0 : EXIT_USAGE;
    if (l.check) /* the sandbox the library would make, made here */
        return export_options(&l) < 0 ? EXIT_NOLIB : cli_check_main();
    rc = cli_find_library(l.lib, getenv("CODESHIM_LIB"),
                          cli_exe_dir(exe_dir, sizeof(exe_dir)) == 0 ? exe_dir : NULL, lib,
                          sizeof(lib), err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "codeshim: %s\n", err);
        return EXIT_NOLIB;
    }
    if (export_all(&l, lib) < 0)
        return EXIT_NOLIB;
    warn_unreachable(argv[l.prog]);
    fflush(stdout);
    return run_program(argv + l.prog);
}
