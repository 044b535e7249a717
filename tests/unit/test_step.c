/* Unit tests: step.c, what the loop does after each upstream reply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/conv.h"
#include "api/step.h"
#include "base/json.h"

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    assert_non_null(j);
    return j;
}

/* One conversation of the Responses API with a cap of max_exec. */
struct conv {
    cJSON *req, *up;
    struct shim_conv cv;
    struct shim_step s;
};

static void open_conv(struct conv *c, const struct shim_api_ops *ops, const char *req,
                      int max_exec)
{
    memset(c, 0, sizeof(*c));
    c->req = J(req);
    c->cv.max_exec = max_exec;
    c->up = ops->prepare(c->req, &c->cv);
    assert_non_null(c->up);
    shim_step_init(&c->s, ops, &c->cv);
}

static void close_conv(struct conv *c)
{
    cJSON_Delete(c->up);
    cJSON_Delete(c->req);
    shim_conv_free(&c->cv);
}

static const char resp_req[] =
    "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"code_interpreter\","
    "\"container\":{\"type\":\"auto\"}},{\"type\":\"function\",\"name\":\"get_weather\","
    "\"parameters\":{}}]}";

/* Fixtures: a Responses conversation with a cap of 5 or of 1, and the
 * turn a test reads into (freed with it). */
struct fx {
    struct conv c;
    struct shim_turn t;
};

static int open_fx(void **state, int max_exec)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    open_conv(&f->c, &shim_responses_ops, resp_req, max_exec);
    *state = f;
    return 0;
}

static int cap5(void **state)
{
    return open_fx(state, 5);
}

static int cap1(void **state)
{
    return open_fx(state, 1);
}

static int close_fx(void **state)
{
    struct fx *f = *state;

    shim_turn_free(&f->t);
    close_conv(&f->c);
    free(f);
    return 0;
}

#define CALL(id, code)                                                                      \
    "{\"type\":\"function_call\",\"id\":\"fc_" id "\",\"call_id\":\"call_" id "\","           \
    "\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"" code "\\\"}\"}"
#define WEATHER                                                                             \
    "{\"type\":\"function_call\",\"id\":\"fc_w\",\"call_id\":\"call_w\","                   \
    "\"name\":\"get_weather\",\"arguments\":\"{}\"}"
#define MESSAGE                                                                             \
    "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\"," \
    "\"content\":[{\"type\":\"output_text\",\"text\":\"4\",\"annotations\":[]}]}"
#define REPLY(items)                                                                        \
    "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[" items "]}"

/* The loop's part: each call picked is run (faked). */
static void run(struct conv *c, struct shim_turn *t)
{
    size_t i;
    const char *why;

    for (i = 0; i < t->nrun; i++) {
        shim_step_ran(&c->s);
        t->calls[i].executed = 1;
        t->calls[i].code = shim_conv_parse_code(t->calls[i].arguments, &why);
        t->calls[i].output = strdup("2\n");
        t->calls[i].status = "completed";
        strcpy(t->calls[i].ci_id, "ci_1");
        strcpy(t->calls[i].container_id, "cntr_1");
    }
}

/* Reads reply, runs what the step picks, and returns what comes next. */
static enum shim_step_next turn(struct conv *c, const char *reply, struct shim_turn *t,
                                unsigned flags)
{
    cJSON *r = J(reply);
    enum shim_step_next next;

    assert_int_equal(shim_step_read(&c->s, r, t), 0);
    run(c, t);
    next = shim_step_next(&c->s, c->up, r, t, flags);
    cJSON_Delete(r);
    return next;
}

static int input_items(const struct conv *c)
{
    return cJSON_GetArraySize(cJSON_GetObjectItem(c->up, "input"));
}

static void an_answer_is_delivered(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;
    int before;

    before = input_items(c);
    assert_int_equal(turn(c, REPLY(MESSAGE), t, 0), SHIM_STEP_ANSWER);
    assert_true(shim_step_answers(SHIM_STEP_ANSWER));
    assert_int_equal(t->n, 0);
    assert_false(t->capped);
    assert_false(t->foreign);
    assert_int_equal(input_items(c), before); /* no next request */
    shim_turn_free(t);
}

static void code_calls_run_and_the_upstream_is_called_again(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;
    const cJSON *last;
    int before;

    before = input_items(c);
    assert_int_equal(turn(c, REPLY(CALL("a", "1+1") "," CALL("b", "2+2")), t, 0),
                     SHIM_STEP_AGAIN);
    assert_false(shim_step_answers(SHIM_STEP_AGAIN));
    assert_int_equal(t->n, 2);
    assert_int_equal(t->nrun, 2);
    assert_int_equal(c->s.executed, 2);
    assert_false(t->calls[0].skipped || t->calls[1].skipped);
    /* the next request carries both calls and their outputs */
    assert_int_equal(input_items(c), before + 4);
    last = cJSON_GetArrayItem(cJSON_GetObjectItem(c->up, "input"), before + 3);
    assert_string_equal(shim_json_str(last, "type"), "function_call_output");
    assert_string_equal(shim_json_str(last, "call_id"), "call_b");
    assert_string_equal(shim_json_str(last, "output"), "2\n");
    assert_true(shim_step_room(&c->s));
    shim_turn_free(t);
}

static void the_cap_skips_calls_then_asks_once_more_without_tools(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;

    assert_int_equal(turn(c, REPLY(CALL("a", "1+1") "," CALL("b", "2+2")), t, 0),
                     SHIM_STEP_FINAL);
    assert_int_equal(t->nrun, 1);
    assert_false(t->calls[0].skipped);
    assert_true(t->calls[1].skipped);
    assert_false(t->calls[1].executed);
    assert_non_null(strstr(t->calls[1].output, "reached its limit of 1 code executions"));
    assert_true(c->s.capped);
    assert_false(shim_step_room(&c->s));
    assert_string_equal(shim_json_str(c->up, "tool_choice"), "none");
    shim_turn_free(t);

    /* the model calls the tool all the same: nothing runs, the answer is capped */
    assert_int_equal(turn(c, REPLY(CALL("c", "3+3")), t, 0), SHIM_STEP_CAPPED);
    assert_int_equal(t->nrun, 0);
    assert_true(t->calls[0].skipped);
    assert_true(t->capped);
    assert_int_equal(c->s.executed, 1);
    shim_turn_free(t);
}

static void the_final_answer_after_the_cap_is_capped(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;

    assert_int_equal(turn(c, REPLY(CALL("a", "1") "," CALL("b", "2")), t, 0),
                     SHIM_STEP_FINAL);
    shim_turn_free(t);
    assert_int_equal(turn(c, REPLY(MESSAGE), t, 0), SHIM_STEP_CAPPED);
    assert_true(t->capped);
    shim_turn_free(t);
}

static void a_program_tool_among_code_calls_is_handed_back(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;
    int before;

    before = input_items(c);
    assert_int_equal(turn(c, REPLY(CALL("a", "1+1") "," WEATHER), t, 0), SHIM_STEP_HANDBACK);
    assert_true(shim_step_answers(SHIM_STEP_HANDBACK));
    assert_true(t->foreign);
    assert_int_equal(t->n, 1); /* codeshim's call still runs before the hand-back */
    assert_int_equal(t->nrun, 1);
    assert_true(t->calls[0].executed);
    assert_false(t->capped);
    assert_int_equal(input_items(c), before);
    shim_turn_free(t);
}

static void a_program_tool_over_the_cap_is_handed_back_capped(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;

    /* no final call: the program answers its tool in a request of its own */
    assert_int_equal(turn(c, REPLY(CALL("a", "1") "," WEATHER "," CALL("b", "2")), t, 0),
                     SHIM_STEP_HANDBACK);
    assert_int_equal(t->nrun, 1);
    assert_true(t->calls[1].skipped);
    assert_true(t->capped);
    assert_false(c->s.capped);
    assert_null(cJSON_GetObjectItem(c->up, "tool_choice"));
    shim_turn_free(t);
}

static void malformed_replies_are_refused(void **state)
{
    static const char *const bad[] = {
        "[]", "\"text\"", "{\"id\":\"resp_1\",\"object\":\"response\"}",
        "{\"id\":\"resp_1\",\"output\":{\"type\":\"message\"}}",
    };
    static const char *const chat_bad[] = {
        "{\"choices\":[]}", "{\"choices\":[{\"index\":0}]}", "{\"choices\":\"x\"}",
    };
    struct conv c;
    struct shim_turn t;
    cJSON *r;
    size_t i;
    (void)state;

    open_conv(&c, &shim_responses_ops, resp_req, 5);
    assert_int_equal(shim_step_read(&c.s, NULL, &t), -EPROTO); /* not JSON */
    assert_null(t.calls);
    for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        r = J(bad[i]);
        assert_int_equal(shim_step_read(&c.s, r, &t), -EPROTO);
        assert_null(t.calls);
        assert_int_equal(t.n, 0);
        cJSON_Delete(r);
    }
    close_conv(&c);

    open_conv(&c, &shim_chat_ops,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
              "\"tools\":[{\"type\":\"code_interpreter\"}]}", 5);
    for (i = 0; i < sizeof(chat_bad) / sizeof(*chat_bad); i++) {
        r = J(chat_bad[i]);
        assert_int_equal(shim_step_read(&c.s, r, &t), -EPROTO);
        assert_null(t.calls);
        cJSON_Delete(r);
    }
    close_conv(&c);
}

static void chat_calls_run_then_the_answer(void **state)
{
    struct conv c;
    struct shim_turn t;
    (void)state;

    open_conv(&c, &shim_chat_ops,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
              "\"tools\":[{\"type\":\"code_interpreter\"}]}", 5);
    assert_int_equal(
        turn(&c,
             "{\"id\":\"c1\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
             "\"finish_reason\":\"tool_calls\",\"message\":{\"role\":\"assistant\","
             "\"content\":null,\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\","
             "\"function\":{\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"1\\\"}\"}}]}}]}",
             &t, 0),
        SHIM_STEP_AGAIN);
    assert_int_equal(t.nrun, 1);
    shim_turn_free(&t);
    assert_int_equal(
        turn(&c,
             "{\"id\":\"c2\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
             "\"finish_reason\":\"stop\",\"message\":{\"role\":\"assistant\",\"content\":\"1\"}}]}",
             &t, 0),
        SHIM_STEP_ANSWER);
    shim_turn_free(&t);
    close_conv(&c);
}

static void a_stopped_program_or_a_refusal_ends_it(void **state)
{
    struct fx *f = *state;
    struct conv *c = &f->c;
    struct shim_turn *t = &f->t;
    int before;

    before = input_items(c);
    /* over the cap, but the program stopped reading: no final call */
    assert_int_equal(turn(c, REPLY(CALL("a", "1") "," CALL("b", "2")), t,
                          SHIM_STEP_STOP | SHIM_STEP_REFUSE),
                     SHIM_STEP_STOPPED);
    assert_false(shim_step_answers(SHIM_STEP_STOPPED));
    assert_false(c->s.capped);
    assert_int_equal(input_items(c), before);
    shim_turn_free(t);
    assert_int_equal(turn(c, REPLY(CALL("c", "3")), t, SHIM_STEP_REFUSE), SHIM_STEP_REFUSED);
    assert_false(shim_step_answers(SHIM_STEP_REFUSED));
    assert_int_equal(input_items(c), before);
    shim_turn_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(an_answer_is_delivered, cap5, close_fx),
        cmocka_unit_test_setup_teardown(code_calls_run_and_the_upstream_is_called_again, cap5, close_fx),
        cmocka_unit_test_setup_teardown(the_cap_skips_calls_then_asks_once_more_without_tools, cap1, close_fx),
        cmocka_unit_test_setup_teardown(the_final_answer_after_the_cap_is_capped, cap1, close_fx),
        cmocka_unit_test_setup_teardown(a_program_tool_among_code_calls_is_handed_back, cap5, close_fx),
        cmocka_unit_test_setup_teardown(a_program_tool_over_the_cap_is_handed_back_capped, cap1, close_fx),
        cmocka_unit_test(malformed_replies_are_refused),
        cmocka_unit_test(chat_calls_run_then_the_answer),
        cmocka_unit_test_setup_teardown(a_stopped_program_or_a_refusal_ends_it, cap1, close_fx),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
