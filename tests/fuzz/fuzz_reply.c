/* fuzz_reply.c - libFuzzer harness: the upstream's JSON replies. The
 * Responses and Chat adapters' reply handling (scan, advance, finish,
 * the cap path) in the conversation loop.c runs for a built-in request,
 * shim_conv_parse_code on the bytes (a call's arguments come from the
 * reply), and the json.c helpers on every member. Input: up to four JSON
 * replies, one per turn (a single reply is followed by a built-in final
 * one, so a reply that calls the tool gets its follow-up turn). */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>


FUZZ_PLAIN_INITIALIZE

static void parse_code(const struct fuzz_input *in)
{
    char *s = fuzz_cstr(in->p, in->n), *code;
    const char *why;

    fuzz_target = "parse-code";
    code = shim_conv_parse_code(s, &why);
    if (!code && !why)
        fuzz_invalid("parse-code", "NULL without a reason");
    if (code && !why && fuzz_utf8 && !fuzz_utf8_valid((const uint8_t *)code, strlen(code)))
        fuzz_invalid("parse-code", "code is not UTF-8");
    free(code);
    free(s);
}

static void conversations(const struct fuzz_input *in)
{
    int a;

    if (!in->ndocs)
        return;
    for (a = 0; a < 2; a++) {
        enum shim_api api = a ? SHIM_API_CHAT : SHIM_API_RESPONSES;
        cJSON *req = fuzz_builtin_req(api);
        if (in->ndocs >= 2) {
            fuzz_conversation(in, api, req, (const cJSON *const *)in->doc, in->ndocs,
                              500 + a * 10, 0);
        } else {
            cJSON *fin = fuzz_builtin_final(api);
            const cJSON *r[2] = {in->doc[0], fin};
            fuzz_conversation(in, api, req, r, 2, 400 + a * 10, 0);
            cJSON_Delete(fin);
        }
        cJSON_Delete(req);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;

    fuzz_input_begin(&in, data, size, 1);
    parse_code(&in);
    fuzz_json_helpers(&in);
    conversations(&in);
    fuzz_input_end(&in);
    return 0;
}
