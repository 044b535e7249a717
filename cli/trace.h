/* trace.h - `codeshim trace`: reads a CODESHIM_TRACE file (JSON Lines
 * written by the library, possibly by several processes) and summarizes it
 * per request, as text or as one JSON object.
 *
 * Split in three so each part is testable on its own (tests/unit/
 * test_trace.c): cli_trace_load() (trace_load.c) aggregates lines into a
 * struct cli_trace (trace_model.h; bad lines are counted, never fatal),
 * the two printers (trace_print.c) only format it, trace.c is the
 * subcommand. */
#ifndef CLI_TRACE_H
#define CLI_TRACE_H

#include <stdio.h>

/* Lines longer than this are skipped (counted as malformed), so a corrupt
 * or hostile file cannot make the reader allocate without bound. */
#define CLI_TRACE_MAX_LINE (16u << 20)

struct cli_trace;

/* Reads every line of f. 0 with *out set (caller frees with
 * cli_trace_free), -ENOMEM, or -EIO on a read error. */
int cli_trace_load(FILE *f, struct cli_trace **out);
void cli_trace_free(struct cli_trace *t);

/* 0, or -EIO when writing failed. */
int cli_trace_print_text(const struct cli_trace *t, FILE *out);
int cli_trace_print_json(const struct cli_trace *t, FILE *out);

/* The `trace` subcommand: argv[0] is "trace". Returns the exit status. */
int cli_trace_main(int argc, char **argv);

#endif
