/* fuzz_sse.c - libFuzzer harness: what reads the upstream's own stream.
 * sse.c, the SSE parser: the input parsed whole and fed in pieces (cut
 * at points the input picks, and byte by byte for short inputs) must give
 * the same events, and every event must fit the caps. argcode.c, the
 * code decoder: the input as call arguments, decoded whole and in
 * pieces, must give the same bytes, a prefix of what shim_conv_parse_code
 * finds when it accepts the arguments (all of it when the decoder did not
 * stop and the string closed). live.c: every event relayed into a program
 * stream (both APIs) whose output must be well-framed SSE. */
#include "fuzz_common.h"

#include "api/argcode.h"
#include "api/live.h"
#include "api/sse.h"
#include "api/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FUZZ_PLAIN_INITIALIZE

#define CAP 4096

static int collect(void *ctx, const char *name, const char *data, size_t len)
{
    struct shim_buf *b = ctx;

    if (strlen(data) > len || len > CAP)
        fuzz_invalid("sse", "event data of %zu bytes over the cap or not terminated", len);
    shim_buf_addf(b, "%s|%zu|", name ? name : "-", len);
    shim_buf_add(b, data, len);
    return 0;
}

static int parse(const uint8_t *p, size_t n, const size_t *cuts, int ncuts,
                 struct shim_buf *out)
{
    struct shim_sse s;
    size_t at = 0;
    int i, rc = 0;

    shim_sse_init(&s, CAP, CAP, collect, out);
    for (i = 0; i <= ncuts && rc == 0; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        rc = shim_sse_feed(&s, (const char *)p + at, to - at);
        at = to;
    }
    if (rc == 0)
        rc = shim_sse_end(&s);
    shim_sse_free(&s);
    return rc;
}

static void sse_splits(const struct fuzz_input *in)
{
    struct shim_buf whole, cut;
    size_t cuts[8], i;
    int ncuts = 0, a, b;

    for (i = 0; i < 8 && in->n; i++) {
        size_t c = fuzz_pick(in, 100 + (int)i, (unsigned)in->n + 1);
        if (!ncuts || c >= cuts[ncuts - 1])
            cuts[ncuts++] = c;
    }
    shim_buf_init(&whole, 1 << 24);
    shim_buf_init(&cut, 1 << 24);
    a = parse(in->p, in->n, NULL, 0, &whole);
    b = parse(in->p, in->n, cuts, ncuts, &cut);
    if (a != b || (a == 0 && (whole.len != cut.len ||
                              memcmp(whole.data ? whole.data : "", cut.data ? cut.data : "",
                                     whole.len))))
        fuzz_invalid("sse", "the events depend on where the input was cut (%d vs %d)", a, b);
    if (in->n <= 512) { /* byte by byte */
        size_t bytes[512];
        for (i = 0; i < in->n; i++)
            bytes[i] = i;
        shim_buf_reset(&cut);
        b = parse(in->p, in->n, bytes, (int)in->n, &cut);
        if (a != b || (a == 0 && (whole.len != cut.len ||
                                  memcmp(whole.data ? whole.data : "",
                                         cut.data ? cut.data : "", whole.len))))
            fuzz_invalid("sse", "byte-by-byte events differ (%d vs %d)", a, b);
    }
    shim_buf_free(&whole);
    shim_buf_free(&cut);
}

static void decode(const uint8_t *p, size_t n, size_t cut, struct shim_buf *out,
                   struct shim_argcode *d)
{
    shim_argcode_init(d);
    shim_argcode_feed(d, (const char *)p, cut, out);
    shim_argcode_feed(d, (const char *)p + cut, n - cut, out);
}

static void argcode(const struct fuzz_input *in)
{
    struct shim_buf a, b;
    struct shim_argcode da, db;
    size_t cut = fuzz_pick(in, 7, (unsigned)in->n + 1);
    char *args = fuzz_cstr(in->p, in->n), *code;
    const char *why;

    shim_buf_init(&a, 1 << 24);
    shim_buf_init(&b, 1 << 24);
    decode(in->p, in->n, in->n, &a, &da);
    decode(in->p, in->n, cut, &b, &db);
    if (a.len != b.len || memcmp(a.data ? a.data : "", b.data ? b.data : "", a.len) ||
        da.state != db.state)
        fuzz_invalid("argcode", "the code depends on where the arguments were cut");
    code = strlen(args) == in->n ? shim_conv_parse_code(args, &why) : NULL;
    if (code && !shim_argcode_stopped(&da)) {
        if (a.len > strlen(code) || memcmp(code, a.data ? a.data : "", a.len))
            fuzz_invalid("argcode", "decoded bytes are not a prefix of the parsed code");
        if (da.state == SHIM_AC_DONE && a.len != strlen(code))
            fuzz_invalid("argcode", "a closed string differs from the parsed code");
    }
    free(code);
    free(args);
    shim_buf_free(&a);
    shim_buf_free(&b);
}

/* ---- live: the input's events relayed into a program stream ---- */

struct relay {
    struct shim_stream st;
    struct shim_live live;
    struct shim_conv cv;
    struct shim_buf out;
    cJSON *req;
};

static int out_write(void *ctx, const char *p, size_t n)
{
    return shim_buf_add(ctx, p, n) ? -1 : 0;
}

static int r_begin(void *ctx, const cJSON *first)
{
    struct relay *r = ctx;
    shim_stream_init(&r->st, r->live.api, &r->cv, out_write, &r->out);
    return shim_stream_start(&r->st, r->req, first);
}

static void r_container(void *ctx, char *out, size_t n)
{
    (void)ctx;
    snprintf(out, n, "cntr_fuzz");
}

static int to_live(void *ctx, const char *name, const char *data, size_t len)
{
    struct relay *r = ctx;
    shim_live_event(&r->live, name, data, len);
    return 0; /* keep going past refused events: more paths */
}

static void live(const struct fuzz_input *in, enum shim_api api)
{
    struct shim_live_hooks hooks;
    struct relay r;
    struct shim_sse s;
    cJSON *reply;

    memset(&r, 0, sizeof(r));
    hooks.begin = r_begin;
    hooks.container = r_container;
    hooks.ctx = &r;
    shim_buf_init(&r.out, 1 << 24);
    snprintf(r.cv.tool_name, sizeof(r.cv.tool_name), "python");
    r.cv.max_exec = 4;
    r.req = cJSON_CreateObject();
    shim_live_init(&r.live, api, &r.cv, &r.st, &hooks, CAP);
    shim_live_turn_begin(&r.live, 1);
    shim_sse_init(&s, CAP, CAP, to_live, &r);
    shim_sse_feed(&s, (const char *)in->p, in->n);
    shim_sse_end(&s);
    shim_sse_free(&s);
    reply = shim_live_take_reply(&r.live);
    if (reply)
        fuzz_check_json("live reply", reply);
    if (reply && r.live.started) {
        struct shim_call *calls = NULL;
        size_t n = 0;
        int foreign;
        const struct shim_api_ops *ops = api == SHIM_API_CHAT ? &shim_chat_ops
                                                              : &shim_responses_ops;
        if (ops->scan(reply, &r.cv, &calls, &n, &foreign) == 0) {
            size_t i;
            shim_live_turn_end(&r.live, reply, calls, n);
            for (i = 0; i < n; i++)
                shim_call_free(&calls[i]);
            free(calls);
        }
    }
    if (r.live.started)
        shim_stream_fail(&r.st, "fuzz", "end");
    if (r.out.len && (r.out.len < 2 || memcmp(r.out.data + r.out.len - 2, "\n\n", 2)))
        fuzz_invalid("live", "the program stream does not end with a whole event");
    cJSON_Delete(reply);
    shim_live_free(&r.live);
    shim_stream_free(&r.st);
    shim_conv_free(&r.cv);
    shim_buf_free(&r.out);
    cJSON_Delete(r.req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;

    fuzz_input_begin(&in, data, size, 0);
    fuzz_target = "sse";
    sse_splits(&in);
    fuzz_target = "argcode";
    argcode(&in);
    fuzz_target = "live";
    live(&in, SHIM_API_RESPONSES);
    live(&in, SHIM_API_CHAT);
    fuzz_input_end(&in);
    return 0;
}
