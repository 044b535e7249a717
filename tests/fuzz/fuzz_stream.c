/* fuzz_stream.c - libFuzzer harness: stream.c, which turns the upstream's
 * replies (and the program's request) into the SSE a program that asked
 * for "stream": true reads (the upstream's own stream, which codeshim
 * parses and relays, is fuzz_sse.c's). What is fuzzed is the stream's input:
 * every conversation is streamed, with a write function that may fail at
 * the n-th write; a stream that fails right after its start (the next
 * upstream call failed); and shim_sse_frame on the raw bytes. The output
 * checks: well-framed SSE (event/data lines, no raw newline in a data
 * line, each write one whole event, nothing after [DONE] or after the
 * write function failed); Responses events with a gap-free
 * sequence_number, contiguous output_index, names matching their type
 * and one response id; Chat chunks of one id ending in [DONE].
 * Input: a request followed by replies, or a single value tried both as
 * the request and as a reply, next to built-in partners. */
#include "fuzz_common.h"

#include "api/stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


FUZZ_PLAIN_INITIALIZE

static void conversations(const struct fuzz_input *in)
{
    int a;

    for (a = 0; a < 2; a++) {
        enum shim_api api = a ? SHIM_API_CHAT : SHIM_API_RESPONSES;
        if (in->ndocs >= 2) {
            fuzz_conversation(in, api, in->doc[0], (const cJSON *const *)&in->doc[1],
                              in->ndocs - 1, 600 + a * 10, 1);
        } else if (in->ndocs == 1) {
            cJSON *req = fuzz_builtin_req(api), *calls = fuzz_builtin_calls(api);
            cJSON *fin = fuzz_builtin_final(api);
            const cJSON *r1[2] = {calls, fin}, *r2[2] = {in->doc[0], fin};
            fuzz_conversation(in, api, in->doc[0], r1, 2, 700 + a * 10, 1);
            fuzz_conversation(in, api, req, r2, 2, 800 + a * 10, 1);
            cJSON_Delete(req);
            cJSON_Delete(calls);
            cJSON_Delete(fin);
        }
    }
}

/* As in the loop, a stream starts only from a reply that scan accepted,
 * for a request that classify accepted. */
static void fail_after_start(const struct fuzz_input *in, const cJSON *reply, enum shim_api api)
{
    const struct shim_api_ops *ops = api == SHIM_API_CHAT ? &shim_chat_ops : &shim_responses_ops;
    cJSON *req = fuzz_builtin_req(api);
    const cJSON *rq = reply != in->doc[0] && shim_classify_body(in->doc[0]) ? in->doc[0] : req;
    struct shim_call *calls = NULL;
    struct shim_stream st;
    struct shim_conv cv;
    struct fuzz_sink sk;
    size_t n = 0;
    int foreign;

    memset(&cv, 0, sizeof(cv));
    fuzz_sink_init(&sk);
    snprintf(cv.tool_name, sizeof(cv.tool_name), "python");
    cv.include_usage = (int)fuzz_pick(in, 80, 2);
    if (ops->scan(reply, &cv, &calls, &n, &foreign) == 0) {
        shim_stream_init(&st, api, &cv, fuzz_sink_write, &sk);
        shim_stream_start(&st, rq, reply);
        shim_stream_turn(&st, reply);
        if (n && fuzz_pick(in, 81, 2)) {
            fuzz_exec_begin(&calls[0], 0);
            shim_stream_exec_begin(&st, &calls[0]);
            fuzz_exec_end(in, &calls[0], 0);
            shim_stream_exec_end(&st, &calls[0]);
        }
        shim_stream_fail(&st, "upstream_error", "the model server answered HTTP 500");
        fuzz_check_sse(api, &sk, 1, 1, 1);
        shim_stream_free(&st);
    }
    fuzz_free_calls(calls, n);
    fuzz_sink_free(&sk);
    shim_conv_free(&cv);
    cJSON_Delete(req);
}

/* The frame is exactly "event: <name>\n" (when named), "data: <data>\n\n". */
static void sse_frame(const struct fuzz_input *in)
{
    char *data = fuzz_cstr(in->p, in->n), name[64];
    const char *nm = NULL;
    size_t dl = strlen(data), k;
    struct shim_buf b, want;

    fuzz_target = "sse_frame";
    if (fuzz_pick(in, 70, 2)) {
        for (k = 0; k < sizeof(name) - 1 && k < dl && data[k] != '\n' && data[k] != '\r'; k++)
            name[k] = data[k];
        name[k] = '\0';
        nm = name;
    }
    shim_buf_init(&b, fuzz_pick(in, 71, 5) ? (size_t)1 << 24 : 64);
    shim_buf_init(&want, (size_t)1 << 25);
    if (shim_sse_frame(&b, nm, data) == 0) {
        if (nm)
            shim_buf_addf(&want, "event: %s\n", nm);
        shim_buf_adds(&want, "data: ");
        shim_buf_adds(&want, data);
        shim_buf_adds(&want, "\n\n");
        if (want.len != b.len || memcmp(want.data, b.data, b.len))
            fuzz_invalid("sse-frame", "frame differs from event/data/blank line");
    }
    shim_buf_free(&want);
    shim_buf_free(&b);
    free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    int i, a;

    fuzz_input_begin(&in, data, size, 1);
    conversations(&in);
    fuzz_target = "stream";
    for (i = 0; i < in.ndocs; i++)
        for (a = 0; a < 2; a++)
            fail_after_start(&in, in.doc[i], a ? SHIM_API_CHAT : SHIM_API_RESPONSES);
    sse_frame(&in);
    fuzz_input_end(&in);
    return 0;
}
