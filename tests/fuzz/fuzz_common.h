/* fuzz_common.h - what the libFuzzer harnesses (tests/fuzz/fuzz_*.c)
 * share: the output checks that go beyond the sanitizers (strict JSON,
 * SSE shape, header blocks), an input split into JSON documents, the
 * built-in request/reply partners, and one intercepted conversation run
 * the way loop.c runs it with the sandbox faked. Harnesses call only the
 * engines' public headers. A failed check prints what and why and aborts,
 * so libFuzzer saves the input. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include "api/classify.h"
#include "api/conv.h"
#include "base/buf.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* A harness's LLVMFuzzerInitialize calls this first (checker self-test). */
void fuzz_setup(void);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The initializer of a harness that needs nothing beyond fuzz_setup(). */
#define FUZZ_PLAIN_INITIALIZE                                                  \
    int LLVMFuzzerInitialize(int *argc, char ***argv)                          \
    {                                                                          \
        (void)argc;                                                            \
        (void)argv;                                                            \
        fuzz_setup();                                                          \
        return 0;                                                              \
    }

__attribute__((noreturn, format(printf, 2, 3))) void fuzz_invalid(const char *check,
                                                                   const char *fmt, ...);
/* What is running, for reports. */
extern const char *fuzz_target;
/* The input was valid UTF-8 without NULs: outputs must be valid UTF-8 too. */
extern int fuzz_utf8;

/* Valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
int fuzz_utf8_valid(const uint8_t *p, size_t n);
/* NULL when p[0,n) is exactly one strict RFC 8259 JSON value, else why
 * not (utf8: strings must be valid UTF-8). No nesting limit. */
const char *fuzz_json_strict(const char *p, size_t n, int utf8);
/* Prints j and checks it is strict JSON; aborts if not. NULL j is fine. */
void fuzz_check_json(const char *check, const cJSON *j);

/* An input: the bytes, a hash to pick variants, and (docs = 1) up to
 * FUZZ_MAX_DOCS JSON values read one after the other (a request and
 * replies). */
#define FUZZ_MAX_DOCS 4
struct fuzz_input {
    const uint8_t *p;
    size_t n;
    uint64_t h;
    cJSON *doc[FUZZ_MAX_DOCS];
    int ndocs;
};
void fuzz_input_begin(struct fuzz_input *in, const uint8_t *p, size_t n, int docs);
void fuzz_input_end(struct fuzz_input *in);
/* A variant in [0, n) picked by the input's hash and salt. */
unsigned fuzz_pick(const struct fuzz_input *in, int salt, unsigned n);

/* Heap copies: exactly n bytes (over-reads hit the redzone), or with a NUL. */
char *fuzz_exact(const void *p, size_t n);
char *fuzz_cstr(const void *p, size_t n);
void *fuzz_xmalloc(size_t n);

/* Built-in partners (parsed; caller deletes): a request, a reply calling
 * codeshim's tool, a final reply, per API. */
cJSON *fuzz_builtin_req(enum shim_api api);
cJSON *fuzz_builtin_calls(enum shim_api api);
cJSON *fuzz_builtin_final(enum shim_api api);

/* The stream's write function: the fail_at-th write fails (0: never). */
struct fuzz_sink {
    struct shim_buf out;
    int writes;
    int fail_at;
    int failed;
    int after_fail; /* writes attempted after the failure */
};
void fuzz_sink_init(struct fuzz_sink *s);
void fuzz_sink_free(struct fuzz_sink *s);
int fuzz_sink_write(void *ctx, const char *p, size_t n);
/* Framing and event invariants of what the sink got. started/ended: the
 * stream was started / finished or failed; failed_ev: it ended failing. */
void fuzz_check_sse(enum shim_api api, const struct fuzz_sink *sk, int started, int ended,
                    int failed_ev);

/* shim_sink_head on head[0,n), and the checks of its block
 * (want_status: the block must start with a status line). */
void fuzz_deliver(const char *head, size_t n, long status, long version, const char *ctype,
                  long long len, int want_status);
/* Whether deliver_head must start its block with a status line for this
 * upstream block (its first non-blank line is one, or there is none). */
int fuzz_head_wants_status(const char *p, size_t n);

/* The sandbox faked as loop.c's run_call sees it: when the execution
 * starts, then what it gave (output varied by the input's hash). */
void fuzz_exec_begin(struct shim_call *c, int k);
void fuzz_exec_end(const struct fuzz_input *in, struct shim_call *c, int k);
void fuzz_free_calls(struct shim_call *calls, size_t n);

/* One intercepted conversation as loop.c runs it, step.h deciding: prepare, then
 * per reply scan, the fake sandbox, advance or finish, the cap; the
 * offline model answers each follow-up request; streamed when the request
 * asks (or always with force_stream), with a write that may fail. */
void fuzz_conversation(const struct fuzz_input *in, enum shim_api api, const cJSON *req,
                       const cJSON *const *replies, int nreplies, int salt, int force_stream);

/* json.c helpers on every member of every document, and shim_json_set. */
void fuzz_json_helpers(const struct fuzz_input *in);

#endif
