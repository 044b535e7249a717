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

#include "base/fileio.h"
#include "system/settings.h"

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

/* The options are the rows of the library's table of settings that name
 * one (settings.h: the option, its placeholder, its range or words and
 * its help all come from there), and --lib, the launcher's own. */
static const struct shim_setting lib_option = {
    .var = "CODESHIM_LIB", .kind = SHIM_SET_STR, .option = "lib", .arg = "PATH"};

/* What the command line asked for; values (one per row of the table)
 * point into argv or are malloc'ed (absolute paths), and live until exec. */
struct launch {
    const char **values;
    const char *lib;
    int prog;              /* index of PROGRAM in argv */
    int check;             /* --check: no PROGRAM */
};

/* "  --name ARG", its help, then its range or words and the variable it
 * sets, in parentheses (on the next line when the line would pass 79). */
static void usage_option(FILE *out, const struct shim_setting *s)
{
    char name[64], extra[96];
    int n;

    snprintf(name, sizeof(name), "--%s%s%s", s->option, s->arg ? " " : "", s->arg ? s->arg : "");
    if (s->kind == SHIM_SET_NUM || s->kind == SHIM_SET_SIZE)
        snprintf(extra, sizeof(extra), "%lld..%lld, %s", s->lo, s->hi, s->var);
    else if (s->kind == SHIM_SET_WORD || s->kind == SHIM_SET_LEVEL)
        snprintf(extra, sizeof(extra), "%s, %s", s->text, s->var);
    else if (s->kind == SHIM_SET_BOOL)
        snprintf(extra, sizeof(extra), "%s=1", s->var);
    else
        snprintf(extra, sizeof(extra), "%s", s->var);
    n = fprintf(out, "  %-20s %s", name, s->help);
    if (n + (int)strlen(extra) + 3 > 79)
        fprintf(out, "\n  %-20s", "");
    fprintf(out, " (%s)\n", extra);
}

static void usage(FILE *out)
{
    size_t i;

    fprintf(out,
        "usage: codeshim [options] [--] PROGRAM [ARGS...]\n"
        "       codeshim [options] --check\n"
        "       codeshim trace FILE [--json]\n"
        "       codeshim sessions [stop ID|--all]\n"
        "\n"
        "Runs PROGRAM with libcodeshim.so preloaded, so its libcurl requests to\n"
        "OpenAI-compatible APIs get a working code_interpreter tool.\n"
        "\n"
        "options (each sets the environment variable shown):\n");
    for (i = 0; i < shim_nsettings; i++)
        if (shim_settings[i].option)
            usage_option(out, &shim_settings[i]);
    fprintf(out,
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

static const struct shim_setting *find_option(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < shim_nsettings; i++) {
        const char *o = shim_settings[i].option;
        if (o && strlen(o) == len && !strncmp(o, name, len))
            return &shim_settings[i];
    }
    if (strlen(lib_option.option) == len && !strncmp(lib_option.option, name, len))
        return &lib_option;
    return NULL;
}

static int check_number(const struct shim_setting *o, const char *v)
{
    size_t n = strspn(v, "0123456789");
    long long x;

    /* Digits only: no sign, blanks, hex or suffix that strtoll would take
     * or the library would read. */
    if (!*v || v[n] || n > 18) {
        fprintf(stderr, "codeshim: --%s %s: not a whole number (%lld..%lld)\n", o->option, v,
                o->lo, o->hi);
        return -EINVAL;
    }
    x = strtoll(v, NULL, 10);
    if (x < o->lo || x > o->hi) {
        fprintf(stderr, "codeshim: --%s %s: out of range (%lld..%lld)\n", o->option, v, o->lo,
                o->hi);
        return -ERANGE;
    }
    return 0;
}

/* The word v names, as the table spells it (kept until exec), or NULL. */
static const char *check_word(const struct shim_setting *o, const char *v)
{
    char word[64], *out;

    if (shim_setting_word(o, v, word, sizeof(word)) < 0) {
        fprintf(stderr, "codeshim: --%s %s: not one of %s\n", o->option, v, o->text);
        return NULL;
    }
    out = strdup(word);
    if (!out)
        fprintf(stderr, "codeshim: out of memory\n");
    return out;
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
static const char *option_value(const struct shim_setting *o, const char *v)
{
    switch (o->kind) {
    case SHIM_SET_BOOL:
        return "1";
    case SHIM_SET_NUM:
    case SHIM_SET_SIZE:
        return check_number(o, v) < 0 ? NULL : v;
    case SHIM_SET_WORD:
    case SHIM_SET_LEVEL:
        return check_word(o, v);
    default:
        if (!*v) {
            fprintf(stderr, "codeshim: --%s needs a non-empty %s\n", o->option, o->arg);
            return NULL;
        }
        if (o->option_program && !strchr(v, '/'))
            return v;
        return absolute(v);
    }
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
    const struct shim_setting *o = find_option(arg, eq ? (size_t)(eq - arg) : strlen(arg));
    int flag;

    if (!o) {
        fprintf(stderr, "codeshim: unknown option %s (see codeshim --help)\n", argv[*i]);
        return -EINVAL;
    }
    flag = o->kind == SHIM_SET_BOOL;
    if (flag && eq) {
        fprintf(stderr, "codeshim: --%s takes no value\n", o->option);
        return -EINVAL;
    }
    if (!flag) {
        if (eq)
            v = eq + 1;
        else if (*i + 1 < argc && argv[*i + 1][0] == '-' && o->kind != SHIM_SET_NUM &&
                 o->kind != SHIM_SET_SIZE) {
            /* "--trace -- prog" or "--log-file --offline": an option
             * forgotten its value, not a file named "--" */
            fprintf(stderr,
                    "codeshim: --%s needs a value (%s), not the option-like %s "
                    "(write --%s=%s or ./%s for a file of that name)\n",
                    o->option, o->arg, argv[*i + 1], o->option, argv[*i + 1], argv[*i + 1]);
            return -EINVAL;
        } else if (*i + 1 < argc)
            v = argv[++*i];
        else {
            fprintf(stderr, "codeshim: --%s needs a value (%s)\n", o->option, o->arg);
            return -EINVAL;
        }
    }
    val = option_value(o, v);
    if (!val)
        return -EINVAL;
    if (!strcmp(o->var, "CODESHIM_REPLAY") && !is_dir(val)) {
        fprintf(stderr, "codeshim: --replay %s: no such directory (record one with --record)\n",
                v);
        return -EINVAL;
    }
    if (o == &lib_option)
        l->lib = val;
    else
        l->values[o - shim_settings] = val;
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

    for (i = 0; rc == 0 && i < shim_nsettings; i++)
        if (l->values[i])
            rc = export(shim_settings[i].var, l->values[i]);
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
    l.values = calloc(shim_nsettings, sizeof(*l.values));
    if (!l.values) {
        fprintf(stderr, "codeshim: out of memory\n");
        return EXIT_NOLIB;
    }
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
