/* Unit tests: live.c, the relay of the upstream's own stream. Two
 * upstream turns (a message and a call of codeshim's tool, then a message)
 * become one program stream: one response.created with the first reply's
 * id, sequence_number gap-free across both, output_index renumbered 0, 1,
 * 2, the call shown as a code_interpreter_call whose code deltas came
 * while the arguments streamed; Chat deltas relayed with codeshim's call
 * withheld and the program's renumbered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "api/live.h"
#include "api/responses.h"
#include "api/stream.h"
#include "base/buf.h"
#include "base/json.h"

struct harness {
    struct shim_stream st;
    struct shim_live live;
    struct shim_conv cv;
    struct shim_buf out;
    cJSON *req;
    int began;
};

static int collect(void *ctx, const char *p, size_t n)
{
    return shim_buf_add(ctx, p, n) ? -1 : 0;
}

static int h_begin(void *ctx, const cJSON *first)
{
    struct harness *h = ctx;

    h->began++;
    shim_stream_init(&h->st, h->live.api, &h->cv, collect, &h->out);
    return shim_stream_start(&h->st, h->req, first);
}

static void h_container(void *ctx, char *out, size_t n)
{
    (void)ctx;
    snprintf(out, n, "cntr_test");
}

static void setup(struct harness *h, enum shim_api api, const char *req)
{
    struct shim_live_hooks hooks = {h_begin, h_container, h};

    memset(h, 0, sizeof(*h));
    shim_buf_init(&h->out, 1 << 20);
    snprintf(h->cv.tool_name, sizeof(h->cv.tool_name), "python");
    h->cv.max_exec = 10;
    h->cv.visible = cJSON_CreateArray();
    h->req = shim_json_parse(req, strlen(req));
    shim_live_init(&h->live, api, &h->cv, &h->st, &hooks, 1 << 20);
}

static void teardown(struct harness *h)
{
    shim_live_free(&h->live);
    shim_stream_free(&h->st);
    shim_conv_free(&h->cv);
    shim_buf_free(&h->out);
    cJSON_Delete(h->req);
}

static void ev(struct harness *h, const char *json)
{
    assert_int_equal(shim_live_event(&h->live, NULL, json, strlen(json)), 0);
}

/* The program stream's events (Responses framing), in order. */
static cJSON *events(const struct harness *h)
{
    cJSON *evs = cJSON_CreateArray();
    const char *p = h->out.data, *end = p + h->out.len;

    while (p && p < end) {
        const char *data = strstr(p, "data: "), *stop = strstr(data, "\n\n");
        cJSON_AddItemToArray(evs, shim_json_parse(data + 6, (size_t)(stop - data - 6)));
        p = stop + 2;
    }
    return evs;
}

#define MSG_ADDED(i, id)                                                                  \
    "{\"type\":\"response.output_item.added\",\"output_index\":" #i ",\"item\":{\"id\":\"" \
    id "\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\","      \
    "\"content\":[]}}"
#define MSG_DELTA(i, id, d)                                                              \
    "{\"type\":\"response.output_text.delta\",\"output_index\":" #i ",\"item_id\":\"" id \
    "\",\"content_index\":0,\"delta\":\"" d "\",\"logprobs\":[]}"
#define MSG_ITEM(id, t)                                                                   \
    "{\"id\":\"" id "\",\"type\":\"message\",\"status\":\"completed\",\"role\":"          \
    "\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"" t "\","           \
    "\"annotations\":[]}]}"
#define MSG_DONE(i, id, t)                                                                \
    "{\"type\":\"response.output_item.done\",\"output_index\":" #i ",\"item\":"          \
    MSG_ITEM(id, t) "}"
#define FC_ITEM "{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\"," \
    "\"call_id\":\"call_1\",\"name\":\"python\",\"arguments\":\"{\\\"code\\\": \\\"print(1)\\\\n\\\"}\"}"

static void responses_two_turns_one_stream(void **state)
{
    struct harness h;
    struct shim_call *calls;
    size_t n, i;
    int foreign;
    cJSON *reply, *up, *answer, *evs, *e;
    const char *why;
    char code[64] = "";
    long seq = 0;
    int created = 0, ci_index = -1, msg_indexes[2] = {-1, -1}, nmsg = 0;

    (void)state;
    setup(&h, SHIM_API_RESPONSES, "{\"model\":\"m\",\"input\":\"x\"}");
    /* turn 1: a message, then codeshim's call with its arguments in pieces */
    shim_live_turn_begin(&h.live, 1);
    ev(&h, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_A\",\"object\":"
           "\"response\",\"created_at\":1,\"status\":\"in_progress\",\"output\":[]}}");
    ev(&h, "{\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_A\"}}");
    ev(&h, MSG_ADDED(0, "msg_1"));
    ev(&h, MSG_DELTA(0, "msg_1", "Let me"));
    ev(&h, MSG_DONE(0, "msg_1", "Let me"));
    ev(&h, "{\"type\":\"response.output_item.added\",\"output_index\":1,\"item\":{\"id\":"
           "\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"call_id\":"
           "\"call_1\",\"name\":\"python\",\"arguments\":\"\"}}");
    ev(&h, "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,"
           "\"item_id\":\"fc_1\",\"delta\":\"{\\\"code\\\": \\\"pri\"}");
    /* the code is out before the arguments are done */
    assert_non_null(strstr(h.out.data, "\"delta\":\"pri\""));
    ev(&h, "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,"
           "\"item_id\":\"fc_1\",\"delta\":\"nt(1)\\\\\"}");
    ev(&h, "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":1,"
           "\"item_id\":\"fc_1\",\"delta\":\"n\\\"}\"}");
    ev(&h, "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":" FC_ITEM "}");
    ev(&h, "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_A\",\"object\":"
           "\"response\",\"created_at\":1,\"status\":\"completed\",\"model\":\"m\",\"output\":["
           MSG_ITEM("msg_1", "Let me") "," FC_ITEM "]}}");
    reply = shim_live_take_reply(&h.live);
    assert_non_null(reply);
    assert_int_equal(shim_responses_ops.scan(reply, &h.cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 1);
    shim_live_turn_end(&h.live, reply, calls, n);
    assert_memory_equal(calls[0].ci_id, "ci_", 3); /* the id announced */
    calls[0].executed = 1;
    calls[0].code = shim_conv_parse_code(calls[0].arguments, &why);
    calls[0].output = strdup("1\n");
    calls[0].status = "completed";
    assert_int_equal(shim_stream_exec_begin(&h.st, &calls[0]), 0);
    assert_int_equal(shim_stream_exec_end(&h.st, &calls[0]), 0);
    up = shim_json_parse("{\"input\":\"x\"}", 13);
    shim_responses_ops.advance(up, reply, calls, n, &h.cv);
    cJSON_Delete(reply);
    shim_call_free(&calls[0]);
    free(calls);

    /* turn 2: a new upstream response; its created is not relayed */
    shim_live_turn_begin(&h.live, 1);
    ev(&h, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_B\"}}");
    ev(&h, MSG_ADDED(0, "msg_2"));
    ev(&h, MSG_DELTA(0, "msg_2", "1"));
    ev(&h, MSG_DONE(0, "msg_2", "1"));
    ev(&h, "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_B\",\"object\":"
           "\"response\",\"created_at\":2,\"status\":\"completed\",\"model\":\"m\",\"output\":["
           MSG_ITEM("msg_2", "1") "]}}");
    reply = shim_live_take_reply(&h.live);
    assert_int_equal(shim_responses_ops.scan(reply, &h.cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 0);
    shim_live_turn_end(&h.live, reply, calls, n);
    answer = shim_responses_ops.finish(h.req, reply, calls, n, &h.cv, 0);
    assert_int_equal(shim_stream_finish(&h.st, answer), 0);
    assert_int_equal(h.began, 1);

    evs = events(&h);
    cJSON_ArrayForEach(e, evs)
    {
        const char *type = shim_json_str(e, "type");
        assert_int_equal(shim_json_int(e, "sequence_number"), seq++);
        if (!strcmp(type, "response.created"))
            created++;
        if (!strcmp(type, "response.output_item.added")) {
            const char *it = shim_json_str(cJSON_GetObjectItem(e, "item"), "type");
            if (!strcmp(it, "code_interpreter_call"))
                ci_index = (int)shim_json_int(e, "output_index");
            else
                msg_indexes[nmsg++] = (int)shim_json_int(e, "output_index");
        }
        if (!strcmp(type, "response.code_interpreter_call_code.delta"))
            strncat(code, shim_json_str(e, "delta"), sizeof(code) - strlen(code) - 1);
    }
    assert_int_equal(created, 1);
    assert_int_equal(msg_indexes[0], 0);
    assert_int_equal(ci_index, 1);
    assert_int_equal(msg_indexes[1], 2);
    assert_string_equal(code, "print(1)\n");
    e = cJSON_GetArrayItem(evs, cJSON_GetArraySize(evs) - 1);
    assert_string_equal(shim_json_str(e, "type"), "response.completed");
    assert_string_equal(shim_json_str(cJSON_GetObjectItem(e, "response"), "id"), "resp_A");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "response"),
                                                            "output")), 3);
    for (i = 0; i < 3; i++) /* the relayed items end the stream as they were done */
        assert_non_null(cJSON_GetArrayItem(h.st.done, (int)i));
    cJSON_Delete(evs);
    cJSON_Delete(answer);
    cJSON_Delete(reply);
    free(calls);
    cJSON_Delete(up);
    teardown(&h);
}

static void chat_withholds_codeshims_call(void **state)
{
    struct harness h;
    cJSON *reply, *tcs;
    const char *o;

    (void)state;
    setup(&h, SHIM_API_CHAT, "{\"model\":\"m\",\"messages\":[]}");
    shim_live_turn_begin(&h.live, 1);
    ev(&h, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":"
           "\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},"
           "\"finish_reason\":null}]}");
    ev(&h, "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
           "\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"python\","
           "\"arguments\":\"{\\\"co\"}}]}}]}");
    ev(&h, "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
           "\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
           "\"arguments\":\"{\"}}]}}]}");
    ev(&h, "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
           "\"function\":{\"arguments\":\"de\\\": \\\"1\\\"}\"}},{\"index\":1,\"function\":"
           "{\"arguments\":\"}\"}}]}}]}");
    ev(&h, "{\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
           "\"tool_calls\"}]}");
    ev(&h, "{\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,"
           "\"completion_tokens\":2,\"total_tokens\":3}}");
    ev(&h, "[DONE]");
    o = h.out.data;
    assert_non_null(strstr(o, "\"content\":\"Hi\""));
    assert_null(strstr(o, "python"));   /* codeshim's call never shows */
    assert_null(strstr(o, "call_a"));
    /* the program's call is its first: index 0 */
    assert_non_null(strstr(o, "{\"index\":0,\"id\":\"call_b\",\"type\":\"function\","
                              "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\"}}"));
    assert_non_null(strstr(o, "{\"index\":0,\"function\":{\"arguments\":\"}\"}}"));
    reply = shim_live_take_reply(&h.live);
    assert_non_null(reply);
    tcs = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
                                  cJSON_GetObjectItem(reply, "choices"), 0), "message"),
                              "tool_calls");
    assert_int_equal(cJSON_GetArraySize(tcs), 2);
    assert_string_equal(shim_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(tcs, 0), "function"),
                                      "arguments"), "{\"code\": \"1\"}");
    assert_int_equal(shim_json_int(cJSON_GetObjectItem(reply, "usage"), "total_tokens"), 3);
    assert_string_equal(shim_json_str(reply, "id"), "chatcmpl-1");
    cJSON_Delete(reply);
    teardown(&h);
}

static void truncated_or_bad_streams_say_why(void **state)
{
    struct harness h;

    (void)state;
    setup(&h, SHIM_API_RESPONSES, "{}");
    shim_live_turn_begin(&h.live, 1);
    ev(&h, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_A\"}}");
    assert_null(shim_live_take_reply(&h.live)); /* no terminal event */
    assert_non_null(strstr(h.live.err, "ended before"));
    shim_live_turn_begin(&h.live, 1);
    assert_int_equal(shim_live_event(&h.live, NULL, "{\"a\":1,\"a\":2}", 13), -1);
    assert_non_null(strstr(h.live.err, "disagree"));
    shim_live_turn_begin(&h.live, 1);
    assert_int_equal(shim_live_event(&h.live, NULL, "nope", 4), -1);
    teardown(&h);
}

/* A call announced live but missing from the final answer is closed as
 * failed (never run): every added item is done, output_index moves on. */
static void announced_call_missing_from_answer_is_closed(void **state)
{
    struct harness h;
    struct shim_call *calls;
    size_t n;
    int foreign;
    cJSON *reply;

    (void)state;
    setup(&h, SHIM_API_RESPONSES, "{}");
    shim_live_turn_begin(&h.live, 1);
    ev(&h, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_A\"}}");
    ev(&h, "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":"
           "\"fc_1\",\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"python\","
           "\"arguments\":\"\"}}");
    ev(&h, "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_A\",\"output\":[]}}");
    reply = shim_live_take_reply(&h.live);
    assert_int_equal(shim_responses_ops.scan(reply, &h.cv, &calls, &n, &foreign), 0);
    assert_int_equal(n, 0);
    shim_live_turn_end(&h.live, reply, calls, n);
    assert_int_equal(h.st.next_index, 1);
    assert_int_equal(h.st.live_ci[0], '\0');
    assert_non_null(strstr(h.out.data, "\"response.output_item.done\""));
    assert_non_null(strstr(h.out.data, "\"status\":\"failed\""));
    cJSON_Delete(reply);
    free(calls);
    teardown(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(responses_two_turns_one_stream),
        cmocka_unit_test(chat_withholds_codeshims_call),
        cmocka_unit_test(truncated_or_bad_streams_say_why),
        cmocka_unit_test(announced_call_missing_from_answer_is_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
