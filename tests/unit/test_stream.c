/* Unit tests: stream.c, the Responses SSE a streaming program gets: the
 * events of many output items are in order and complete, and finishing a
 * stream is one walk over the items (no lookup by index in a loop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "api/responses.h"
#include "api/stream.h"
#include "base/buf.h"
#include "base/json.h"

/* The list steps every cJSON_GetArrayItem call of the code under test
 * takes: this definition in the test program takes the place of
 * libcjson's for the library's objects linked into it. */
static unsigned long array_steps;

CJSON_PUBLIC(cJSON *) cJSON_GetArrayItem(const cJSON *array, int index)
{
    cJSON *c = array ? array->child : NULL;

    for (; c && index > 0; index--, c = c->next)
        array_steps++;
    return index < 0 ? NULL : c;
}

static int collect(void *ctx, const char *p, size_t n)
{
    return shim_buf_add(ctx, p, n) ? -1 : 0;
}

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

static cJSON *message(int i)
{
    char s[256];

    snprintf(s, sizeof(s),
             "{\"type\":\"message\",\"id\":\"msg_%d\",\"status\":\"completed\","
             "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
             "\"text\":\"t%d\",\"annotations\":[]}]}",
             i, i);
    return J(s);
}

static cJSON *response(cJSON *output)
{
    cJSON *r = J("{\"id\":\"resp_first\",\"object\":\"response\",\"created_at\":1,"
                 "\"status\":\"completed\",\"model\":\"m\"}");
    cJSON_AddItemToObject(r, "output", output);
    return r;
}

/* The stream's events, parsed; checks the framing and that the sequence
 * numbers run 0, 1, 2... Caller deletes. */
static cJSON *events_of(const struct shim_buf *b)
{
    cJSON *evs = cJSON_CreateArray();
    const char *p = b->data, *end = b->data + b->len;
    long seq = 0;

    while (p < end) {
        /* searched by hand: the sanitizers' strstr/memmem interceptors
         * check the whole rest of the buffer at every call (quadratic) */
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *data, *stop;
        cJSON *ev;
        assert_non_null(nl);
        assert_memory_equal(p, "event: ", 7);
        data = nl + 1;
        assert_memory_equal(data, "data: ", 6);
        for (stop = data; stop + 1 < end && !(stop[0] == '\n' && stop[1] == '\n'); stop++)
            ;
        assert_true(stop + 1 < end);
        ev = shim_json_parse(data + 6, (size_t)(stop - data - 6));
        assert_non_null(ev);
        assert_int_equal((int)(nl - p - 7), (int)strlen(shim_json_str(ev, "type")));
        assert_memory_equal(p + 7, shim_json_str(ev, "type"), (size_t)(nl - p - 7));
        assert_int_equal(shim_json_int(ev, "sequence_number"), seq++);
        cJSON_AddItemToArray(evs, ev);
        p = stop + 2;
    }
    return evs;
}

/* Every item's added and done events carry it at the next output_index,
 * in the order of want; the last event completes the stream's response
 * with all of them. Returns how many items there were. */
static int check_items(const cJSON *evs, const char *const *want_ids, int nwant)
{
    const cJSON *ev, *last = NULL;
    int added = 0, done = 0, open = -1;

    cJSON_ArrayForEach(ev, evs)
    {
        const char *type = shim_json_str(ev, "type");
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(ev, "item");
        if (!strcmp(type, "response.output_item.added")) {
            assert_int_equal(open, -1);
            assert_int_equal(shim_json_int(ev, "output_index"), added);
            if (want_ids)
                assert_string_equal(shim_json_str(item, "id"), want_ids[added]);
            open = added++;
        } else if (!strcmp(type, "response.output_item.done")) {
            assert_int_equal(shim_json_int(ev, "output_index"), open);
            assert_int_equal(open, done++);
            open = -1;
        } else if (cJSON_GetObjectItemCaseSensitive(ev, "output_index")) {
            assert_int_equal(shim_json_int(ev, "output_index"), open);
        }
        last = ev;
    }
    assert_int_equal(added, nwant);
    assert_int_equal(done, nwant);
    assert_string_equal(shim_json_str(last, "type"), "response.completed");
    assert_string_equal(shim_json_str(cJSON_GetObjectItemCaseSensitive(last, "response"), "id"),
                        "resp_first");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                         cJSON_GetObjectItemCaseSensitive(last, "response"), "output")),
                     nwant);
    return added;
}

static void start(struct shim_stream *s, struct shim_conv *cv, struct shim_buf *out,
                  cJSON *req, const cJSON *first)
{
    snprintf(cv->tool_name, sizeof(cv->tool_name), "python");
    cv->stream = 1;
    shim_buf_init(out, (size_t)1 << 30);
    shim_stream_init(s, SHIM_API_RESPONSES, cv, collect, out);
    assert_int_equal(shim_stream_start(s, req, first), 0);
    shim_stream_turn(s, first);
}

/* 20,000 items in one reply, none of them a code call: every one is
 * streamed, in order, and finishing walks them once (by index in a loop,
 * this was 200 million list steps). */
static void many_items_finish_in_one_walk(void **state)
{
    enum { N = 20000 };
    struct shim_conv cv = {0};
    struct shim_stream s;
    struct shim_buf out;
    cJSON *req = J("{\"model\":\"m\",\"input\":\"hi\",\"stream\":true,"
                   "\"tools\":[{\"type\":\"code_interpreter\"}]}");
    cJSON *items = cJSON_CreateArray(), *reply, *evs;
    int i;
    (void)state;

    for (i = 0; i < N; i++)
        cJSON_AddItemToArray(items, message(i));
    reply = response(items);
    start(&s, &cv, &out, req, reply);
    array_steps = 0;
    assert_int_equal(shim_stream_finish(&s, reply), 0);
    assert_true(array_steps <= N);
    evs = events_of(&out);
    assert_int_equal(check_items(evs, NULL, N), N);
    /* created, in_progress, 6 events per message, completed */
    assert_int_equal(cJSON_GetArraySize(evs), 2 + 6 * N + 1);
    cJSON_Delete(evs);
    shim_stream_free(&s);
    shim_buf_free(&out);
    cJSON_Delete(reply);
    cJSON_Delete(req);
}

/* A code call between two messages: the message before it and the call
 * stream while the loop runs; finishing streams only what follows. */
static void finish_resumes_after_executed_calls(void **state)
{
    static const char *const ids[] = {"msg_0", "ci_1", "msg_2"};
    struct shim_conv cv = {0};
    struct shim_stream s;
    struct shim_buf out;
    struct shim_call c = {0};
    char call_id[] = "call_1", code[] = "1", output[] = "1\n";
    cJSON *req = J("{\"model\":\"m\",\"input\":\"hi\",\"stream\":true,"
                   "\"tools\":[{\"type\":\"code_interpreter\"}]}");
    cJSON *turn = cJSON_CreateArray(), *answer_out = cJSON_CreateArray();
    cJSON *reply, *answer, *evs;
    (void)state;

    cJSON_AddItemToArray(turn, message(0));
    cJSON_AddItemToArray(turn, J("{\"type\":\"function_call\",\"id\":\"fc_1\","
                                 "\"call_id\":\"call_1\",\"name\":\"python\","
                                 "\"arguments\":\"{\\\"code\\\":\\\"1\\\"}\"}"));
    cJSON_AddItemToArray(turn, message(2));
    reply = response(turn);
    start(&s, &cv, &out, req, reply);

    c.call_id = call_id;
    c.code = code;
    c.output = output;
    c.executed = 1;
    snprintf(c.ci_id, sizeof(c.ci_id), "ci_1");
    snprintf(c.container_id, sizeof(c.container_id), "cntr_1");
    assert_int_equal(shim_stream_exec_begin(&s, &c), 0);
    assert_int_equal(shim_stream_exec_end(&s, &c), 0);

    cJSON_AddItemToArray(answer_out, message(0));
    cJSON_AddItemToArray(answer_out, shim_responses_ci_item(&c));
    cJSON_AddItemToArray(answer_out, message(2));
    answer = response(answer_out);
    assert_int_equal(shim_stream_finish(&s, answer), 0);

    evs = events_of(&out);
    check_items(evs, ids, 3);
    cJSON_Delete(evs);
    shim_stream_free(&s);
    shim_buf_free(&out);
    cJSON_Delete(answer);
    cJSON_Delete(reply);
    cJSON_Delete(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_items_finish_in_one_walk),
        cmocka_unit_test(finish_resumes_after_executed_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
