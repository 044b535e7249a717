/* fuzz_request.c - libFuzzer harness: the program's request, the first
 * untrusted bytes codeshim reads. classify.c (URL, the transfer
 * pre-check on an exact-size body, the body), the conv.c helpers and
 * shim_responses_echo_tools on it, the Responses and Chat adapters'
 * prepare, the offline model's reply to it, and the whole conversation it
 * starts. Input: a JSON request, optionally followed by upstream replies
 * (built-in ones when there are none). */
#include "fuzz_common.h"

#include "api/offline.h"
#include "api/responses.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


FUZZ_PLAIN_INITIALIZE

static void classify(const struct fuzz_input *in)
{
    static const char *const urls[] = {"https://api.openai.com/v1/responses",
                                       "http://127.0.0.1:8080/v1/chat/completions?x=1",
                                       "localhost/responses/", "https://h/v1/files"};
    static const char *const methods[] = {NULL, "POST", "post", "PUT", ""};
    char *s = fuzz_cstr(in->p, in->n), *body = fuzz_exact(in->p, in->n);
    int i;

    fuzz_target = "classify";
    shim_classify_url(s);
    for (i = 0; i < 4; i++)
        shim_classify_transfer(1, methods[fuzz_pick(in, 10 + i, 5)], urls[i], body, in->n,
                               fuzz_pick(in, 20, 2) ? (size_t)1 << 20 : in->n / 2);
    shim_classify_transfer(1, NULL, s, body, in->n, (size_t)1 << 20);
    /* the same input as a C string body (POSTFIELDS without a size) */
    shim_classify_transfer(1, NULL, urls[0], s, SHIM_BODY_STRING,
                           fuzz_pick(in, 21, 2) ? (size_t)1 << 20 : in->n / 2);
    for (i = 0; i < in->ndocs; i++)
        shim_classify_body(in->doc[i]);
    { /* why it would be passed through: the whole body read, capped */
        struct shim_pass_why w;
        shim_classify_explain(1, methods[fuzz_pick(in, 22, 4) + 1], body, in->n,
                              fuzz_pick(in, 23, 2) ? (size_t)1 << 20 : in->n / 2, &w);
        shim_classify_explain(1, "POST", s, SHIM_BODY_STRING, (size_t)1 << 20, &w);
        if (strlen(w.text) >= sizeof(w.text))
            __builtin_trap();
    }
    free(s);
    free(body);
}

/* The tool choice for one API: codeshim's tool named, choice rewritten
 * for the first call and relaxed for the next. */
static void choice(const cJSON *d, int chat)
{
    cJSON *dup = cJSON_Duplicate(d, 1);
    char name[SHIM_TOOL_NAME_MAX];
    struct shim_conv cv;

    memset(&cv, 0, sizeof(cv));
    shim_conv_pick_tool_name(cJSON_GetObjectItemCaseSensitive(d, "tools"), chat, name,
                             sizeof(name));
    snprintf(cv.tool_name, sizeof(cv.tool_name), "%s", name);
    if (dup) {
        shim_conv_strip_private(dup);
        shim_conv_rewrite_choice(dup, &cv, chat);
        shim_conv_relax_choice(dup, chat);
        fuzz_check_json("conv-choice", dup);
    }
    cJSON_Delete(dup);
    shim_conv_free(&cv);
}

static void conv_helpers(const struct fuzz_input *in)
{
    int i, chat;

    fuzz_target = "conv";
    for (i = 0; i < in->ndocs; i++) {
        const cJSON *d = in->doc[i];
        const char *refs[16];
        size_t k, n = shim_conv_container_refs(d, refs, fuzz_pick(in, 40, 17));
        cJSON *echo;
        for (k = 0; k < n; k++)
            if (strncmp(refs[k], "cntr_", 5))
                fuzz_invalid("container-refs", "a reference without the cntr_ prefix");
        shim_conv_session_id(d);
        echo = shim_responses_echo_tools(d);
        fuzz_check_json("echo-tools", echo);
        cJSON_Delete(echo);
        for (chat = 0; chat < 2; chat++)
            choice(d, chat);
    }
}

/* The offline model reads the upstream request codeshim built. */
static void offline(const struct fuzz_input *in)
{
    int i, a;

    fuzz_target = "offline";
    for (i = 0; i < in->ndocs; i++)
        for (a = 0; a < 2; a++) {
            cJSON *r = shim_offline_reply(a ? SHIM_API_CHAT : SHIM_API_RESPONSES, in->doc[i]);
            fuzz_check_json("offline-reply", r);
            cJSON_Delete(r);
        }
}

static void conversations(const struct fuzz_input *in)
{
    int a;

    if (!in->ndocs)
        return;
    for (a = 0; a < 2; a++) {
        enum shim_api api = a ? SHIM_API_CHAT : SHIM_API_RESPONSES;
        if (in->ndocs >= 2) {
            fuzz_conversation(in, api, in->doc[0], (const cJSON *const *)&in->doc[1],
                              in->ndocs - 1, 200 + a * 10, 0);
        } else {
            cJSON *calls = fuzz_builtin_calls(api), *fin = fuzz_builtin_final(api);
            const cJSON *r[2] = {calls, fin};
            fuzz_conversation(in, api, in->doc[0], r, 2, 300 + a * 10, 0);
            cJSON_Delete(calls);
            cJSON_Delete(fin);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;

    fuzz_input_begin(&in, data, size, 1);
    classify(&in);
    conv_helpers(&in);
    offline(&in);
    fuzz_json_helpers(&in);
    conversations(&in);
    fuzz_input_end(&in);
    return 0;
}
