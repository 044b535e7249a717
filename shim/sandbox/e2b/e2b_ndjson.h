/* e2b_ndjson.h - the e2b backend's pure engine (layer 2): the NDJSON
 * lines of the code-interpreter server's POST /execute become a struct
 * shim_exec_result like the local backend's: stdout and stderr in order,
 * the main result's text, the error's traceback without ANSI codes, and
 * png/jpeg images. Unit-tested in tests/unit/test_e2b_ndjson.c. */
#ifndef SHIM_E2B_NDJSON_H
#define SHIM_E2B_NDJSON_H

#include "api/result.h"
#include "base/buf.h"

#include <stddef.h>

/* One execution's stream being read. Text (stdout, stderr, the main
 * result's text, the traceback without ANSI codes) is kept in arrival
 * order: its head and tail, each at most keep bytes, with a count of what
 * was dropped between them. */
struct shim_e2b_ndjson {
    struct shim_buf head;
    char *tail;      /* ring of keep bytes */
    size_t keep, tail_len, tail_pos, dropped;
    struct shim_exec_image *images;
    size_t nimages;
    int error;       /* an error line came */
    int ended;       /* end_of_execution came */
    long count;      /* number_of_executions, or -1 */
    size_t cut_at;   /* set by the reader: it stopped reading the stream
                        after this many bytes (the output cap) */
};

int shim_e2b_ndjson_init(struct shim_e2b_ndjson *p, size_t keep);
/* One line (no "\n"). Unknown types, blank and non-JSON lines are
 * ignored. 0 or -ENOMEM. */
int shim_e2b_ndjson_line(struct shim_e2b_ndjson *p, const char *line, size_t len);
/* Moves what was read into out: status OK / ERROR, or FAILED with a note
 * when the stream ended before end_of_execution (or was cut at cut_at).
 * p is freed. 0 or -ENOMEM. */
int shim_e2b_ndjson_finish(struct shim_e2b_ndjson *p, struct shim_exec_result *out);
void shim_e2b_ndjson_free(struct shim_e2b_ndjson *p);
/* Removes ANSI escape sequences (CSI, and two-byte ESC x forms) in place;
 * returns the new length. */
size_t shim_e2b_strip_ansi(char *s, size_t n);

#endif
