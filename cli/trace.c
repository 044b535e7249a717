/* trace.c - the `codeshim trace FILE [--json]` subcommand: arguments,
 * opening the file, and the exit status. Loading is trace_load.c, the two
 * printed forms trace_print.c; see trace.h. */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void trace_usage(FILE *out)
{
    fprintf(out, "usage: codeshim trace FILE [--json]\n"
                 "Summarizes a CODESHIM_TRACE file per request (FILE '-' reads stdin).\n");
}

int cli_trace_main(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, i, rc;
    struct cli_trace *t = NULL;
    FILE *f;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            trace_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "codeshim trace: unknown option %s\n", argv[i]);
            trace_usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "codeshim trace: more than one FILE (%s, %s)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "codeshim trace: missing FILE\n");
        trace_usage(stderr);
        return 2;
    }
    f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        fprintf(stderr, "codeshim trace: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    rc = cli_trace_load(f, &t);
    if (f != stdin)
        fclose(f);
    if (rc < 0) {
        fprintf(stderr, "codeshim trace: reading %s: %s\n", path, strerror(-rc));
        return 1;
    }
    rc = json ? cli_trace_print_json(t, stdout) : cli_trace_print_text(t, stdout);
    cli_trace_free(t);
    if (rc < 0) {
        fprintf(stderr, "codeshim trace: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}
