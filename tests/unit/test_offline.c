/* Unit tests: offline.c, the built-in offline model (offline.h), for both
 * APIs: which ```python blocks it runs and when, [parallel], the answer
 * after the tool outputs, the tool it calls, usage in rough tokens, and
 * the answer it gives to requests it cannot act on. Requests are built as
 * the loop builds them: codeshim's tool from shim_conv_code_tool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/classify.h"
#include "api/conv.h"
#include "api/offline.h"
#include "base/json.h"

#define HELP "This is codeshim's offline model"

static cJSON *J(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));
    if (!j)
        print_error("bad JSON in test: %s\n", s);
    assert_non_null(j);
    return j;
}

/* An upstream request: model, the program's tools given as JSON (may be
 * NULL) with codeshim's tool called name appended (none when name is
 * NULL), and the conversation (Responses input or Chat messages). */
static cJSON *request(enum shim_api api, const char *tools, const char *name,
                      const char *conversation)
{
    cJSON *r = cJSON_CreateObject(), *t = tools ? J(tools) : cJSON_CreateArray();

    cJSON_AddStringToObject(r, "model", "gpt-test");
    if (name)
        cJSON_AddItemToArray(t, shim_conv_code_tool(name, api == SHIM_API_CHAT));
    cJSON_AddItemToObject(r, "tools", t);
    cJSON_AddItemToObject(r, api == SHIM_API_CHAT ? "messages" : "input", J(conversation));
    return r;
}

static cJSON *reply(enum shim_api api, const cJSON *req)
{
    cJSON *r = shim_offline_reply(api, req);
    assert_non_null(r);
    return r;
}

/* The code of a call's arguments (a JSON string {"code": ...}); caller
 * frees. */
static char *code_of(const char *arguments)
{
    cJSON *a;
    char *code;

    assert_non_null(arguments);
    a = J(arguments);
    assert_int_equal(cJSON_GetArraySize(a), 1);
    assert_non_null(shim_json_str(a, "code"));
    code = strdup(shim_json_str(a, "code"));
    cJSON_Delete(a);
    return code;
}

static void assert_code(const char *arguments, const char *want)
{
    char *code = code_of(arguments);
    assert_string_equal(code, want);
    free(code);
}

/* ---- Responses ---- */

static const cJSON *r_output(const cJSON *rep, int i)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "output"), i);
}

/* The function calls of a Responses reply: checks each, returns count. */
static int r_calls(const cJSON *rep, const char *tool)
{
    const cJSON *it;
    int n = 0;

    cJSON_ArrayForEach(it, cJSON_GetObjectItem(rep, "output"))
    {
        assert_string_equal(shim_json_str(it, "type"), "function_call");
        assert_string_equal(shim_json_str(it, "name"), tool);
        assert_string_equal(shim_json_str(it, "status"), "completed");
        assert_int_equal(strncmp(shim_json_str(it, "id"), "fc_", 3), 0);
        assert_int_equal(strncmp(shim_json_str(it, "call_id"), "call_", 5), 0);
        n++;
    }
    return n;
}

/* The text of a Responses reply that answers with one message. */
static const char *r_text(const cJSON *rep)
{
    const cJSON *m = r_output(rep, 0), *part;

    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "output")), 1);
    assert_string_equal(shim_json_str(m, "type"), "message");
    assert_string_equal(shim_json_str(m, "role"), "assistant");
    assert_string_equal(shim_json_str(m, "status"), "completed");
    assert_int_equal(strncmp(shim_json_str(m, "id"), "msg_", 4), 0);
    part = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "content"), 0);
    assert_string_equal(shim_json_str(part, "type"), "output_text");
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(part, "annotations")));
    assert_non_null(shim_json_str(part, "text"));
    return shim_json_str(part, "text");
}

/* The loop's next request: the reply's calls, then an output for each. */
static void r_answer_calls(cJSON *req, const cJSON *rep, const char *const *outputs)
{
    cJSON *input = cJSON_GetObjectItem(req, "input");
    const cJSON *it;
    int i = 0;

    cJSON_ArrayForEach(it, cJSON_GetObjectItem(rep, "output"))
        cJSON_AddItemToArray(input, cJSON_Duplicate(it, 1));
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(rep, "output"))
    {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "function_call_output");
        cJSON_AddStringToObject(o, "call_id", shim_json_str(it, "call_id"));
        cJSON_AddStringToObject(o, "output", outputs[i++]);
        cJSON_AddItemToArray(input, o);
    }
}

static void assert_response_shape(const cJSON *rep, const cJSON *req)
{
    const cJSON *u = cJSON_GetObjectItem(rep, "usage");

    assert_int_equal(strncmp(shim_json_str(rep, "id"), "resp_", 5), 0);
    assert_string_equal(shim_json_str(rep, "object"), "response");
    assert_string_equal(shim_json_str(rep, "status"), "completed");
    assert_string_equal(shim_json_str(rep, "model"), "gpt-test");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(rep, "created_at")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "error")));
    assert_true(cJSON_Compare(cJSON_GetObjectItem(rep, "tools"), cJSON_GetObjectItem(req, "tools"),
                              1));
    assert_true(shim_json_int(u, "input_tokens") > 0);
    assert_int_equal(shim_json_int(u, "total_tokens"),
                     shim_json_int(u, "input_tokens") + shim_json_int(u, "output_tokens"));
    assert_non_null(cJSON_GetObjectItem(u, "input_tokens_details"));
    assert_non_null(cJSON_GetObjectItem(u, "output_tokens_details"));
}

static void responses_one_block_per_turn(void **state)
{
    cJSON *req = request(SHIM_API_RESPONSES, NULL, "python",
                         "[{\"role\":\"user\",\"content\":\"first ```python\\nprint(1)\\n``` "
                         "then ```python\\nprint(2)\\n``` please\"}]"),
          *rep;
    static const char *const out1[] = {"1\n"}, *const out2[] = {"2\n"};
    (void)state;

    rep = reply(SHIM_API_RESPONSES, req);
    assert_response_shape(rep, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), "print(1)\n");
    r_answer_calls(req, rep, out1);
    cJSON_Delete(rep);

    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), "print(2)\n");
    r_answer_calls(req, rep, out2);
    cJSON_Delete(rep);

    /* no block left: the answer quotes the last output */
    rep = reply(SHIM_API_RESPONSES, req);
    assert_response_shape(rep, req);
    assert_string_equal(r_text(rep), "The code ran. Output:\n2\n");
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

static void responses_parallel_runs_every_block_at_once(void **state)
{
    cJSON *req = request(SHIM_API_RESPONSES, NULL, "python",
                         "[{\"role\":\"user\",\"content\":\"[parallel] ```python\\na=1\\n```"
                         "```python\\nb=2\\n``` and ```python\\nprint(3)\\n```\"}]"),
          *rep;
    static const char *const outs[] = {"", "", "3\n"};
    (void)state;

    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 3);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), "a=1\n");
    assert_code(shim_json_str(r_output(rep, 1), "arguments"), "b=2\n");
    assert_code(shim_json_str(r_output(rep, 2), "arguments"), "print(3)\n");
    assert_string_not_equal(shim_json_str(r_output(rep, 0), "call_id"),
                            shim_json_str(r_output(rep, 1), "call_id"));
    assert_string_not_equal(shim_json_str(r_output(rep, 1), "call_id"),
                            shim_json_str(r_output(rep, 2), "call_id"));
    r_answer_calls(req, rep, outs);
    cJSON_Delete(rep);

    rep = reply(SHIM_API_RESPONSES, req);
    assert_string_equal(r_text(rep), "The code ran. Output:\n3\n");
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

/* Blocks come from the last user message only; its outputs count from
 * there. Text parts are read in order; a string input is a user message. */
static void responses_reads_the_last_user_message(void **state)
{
    cJSON *req, *rep;
    (void)state;

    req = request(SHIM_API_RESPONSES, NULL, "python",
                  "[{\"role\":\"user\",\"content\":\"```python\\nold()\\n```\"},"
                  "{\"type\":\"function_call\",\"call_id\":\"call_a\",\"name\":\"python\","
                  "\"arguments\":\"{}\"},"
                  "{\"type\":\"function_call_output\",\"call_id\":\"call_a\",\"output\":\"x\"},"
                  "{\"role\":\"assistant\",\"content\":\"done\"},"
                  "{\"role\":\"developer\",\"content\":\"```python\\nnot_me()\\n```\"},"
                  "{\"type\":\"message\",\"role\":\"user\",\"content\":["
                  "{\"type\":\"input_text\",\"text\":\"now ```python\\nne\"},"
                  "{\"type\":\"input_text\",\"text\":\"w()\\n```\"}]}]");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), "new()\n");
    cJSON_Delete(rep);
    cJSON_Delete(req);

    /* a last user message without a block: guidance, not an old output */
    req = request(SHIM_API_RESPONSES, NULL, "python",
                  "[{\"role\":\"user\",\"content\":\"```python\\nold()\\n```\"},"
                  "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"x\"},"
                  "{\"role\":\"user\",\"content\":\"thanks\"}]");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_non_null(strstr(r_text(rep), HELP));
    cJSON_Delete(rep);
    cJSON_Delete(req);

    req = request(SHIM_API_RESPONSES, NULL, "python", "\"just ```python\\n6*7\\n```\"");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), "6*7\n");
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

/* ---- Chat Completions ---- */

static const cJSON *c_message(const cJSON *rep)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "choices"), 0);

    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rep, "choices")), 1);
    assert_int_equal(shim_json_int(ch, "index"), 0);
    return cJSON_GetObjectItem(ch, "message");
}

static const char *c_finish(const cJSON *rep)
{
    return shim_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "choices"), 0),
                         "finish_reason");
}

static void assert_chat_shape(const cJSON *rep)
{
    const cJSON *u = cJSON_GetObjectItem(rep, "usage");

    assert_int_equal(strncmp(shim_json_str(rep, "id"), "chatcmpl-", 9), 0);
    assert_string_equal(shim_json_str(rep, "object"), "chat.completion");
    assert_string_equal(shim_json_str(rep, "model"), "gpt-test");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(rep, "created")));
    assert_string_equal(shim_json_str(c_message(rep), "role"), "assistant");
    assert_true(shim_json_int(u, "prompt_tokens") > 0);
    assert_int_equal(shim_json_int(u, "total_tokens"),
                     shim_json_int(u, "prompt_tokens") + shim_json_int(u, "completion_tokens"));
}

/* The chat tool calls: checks each, returns the array. */
static const cJSON *c_calls(const cJSON *rep, const char *tool, int want)
{
    const cJSON *msg = c_message(rep), *tcs = cJSON_GetObjectItem(msg, "tool_calls"), *t;

    assert_string_equal(c_finish(rep), "tool_calls");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(msg, "content")));
    assert_int_equal(cJSON_GetArraySize(tcs), want);
    cJSON_ArrayForEach(t, tcs)
    {
        assert_string_equal(shim_json_str(t, "type"), "function");
        assert_int_equal(strncmp(shim_json_str(t, "id"), "call_", 5), 0);
        assert_string_equal(shim_json_str(cJSON_GetObjectItem(t, "function"), "name"), tool);
    }
    return tcs;
}

static const char *c_args(const cJSON *tcs, int i)
{
    return shim_json_str(cJSON_GetObjectItem(cJSON_GetArrayItem(tcs, i), "function"),
                         "arguments");
}

static void c_answer_calls(cJSON *req, const cJSON *rep, const char *const *outputs)
{
    cJSON *msgs = cJSON_GetObjectItem(req, "messages");
    const cJSON *t;
    int i = 0;

    cJSON_AddItemToArray(msgs, cJSON_Duplicate(c_message(rep), 1));
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(c_message(rep), "tool_calls"))
    {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "role", "tool");
        cJSON_AddStringToObject(o, "tool_call_id", shim_json_str(t, "id"));
        cJSON_AddStringToObject(o, "content", outputs[i++]);
        cJSON_AddItemToArray(msgs, o);
    }
}

static void chat_one_block_per_turn_then_text(void **state)
{
    cJSON *req = request(SHIM_API_CHAT, NULL, "codeshim_python",
                         "[{\"role\":\"system\",\"content\":\"be brief\"},"
                         "{\"role\":\"user\",\"content\":\"```python\\nx = 5\\n```\\n"
                         "```python\\nprint(x * 2)\\n```\"}]"),
          *rep;
    static const char *const out1[] = {""}, *const out2[] = {"10\n"};
    const cJSON *tcs;
    (void)state;

    rep = reply(SHIM_API_CHAT, req);
    assert_chat_shape(rep);
    tcs = c_calls(rep, "codeshim_python", 1);
    assert_code(c_args(tcs, 0), "x = 5\n");
    c_answer_calls(req, rep, out1);
    cJSON_Delete(rep);

    rep = reply(SHIM_API_CHAT, req);
    tcs = c_calls(rep, "codeshim_python", 1);
    assert_code(c_args(tcs, 0), "print(x * 2)\n");
    c_answer_calls(req, rep, out2);
    cJSON_Delete(rep);

    rep = reply(SHIM_API_CHAT, req);
    assert_chat_shape(rep);
    assert_string_equal(c_finish(rep), "stop");
    assert_string_equal(shim_json_str(c_message(rep), "content"), "The code ran. Output:\n10\n");
    assert_null(cJSON_GetObjectItem(c_message(rep), "tool_calls"));
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

static void chat_parallel_runs_every_block_at_once(void **state)
{
    cJSON *req = request(SHIM_API_CHAT, NULL, "python",
                         "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                         "\"```python\\n1\\n``` ```python\\n2\\n``` [parallel]\"}]}]"),
          *rep;
    static const char *const outs[] = {"1", "2"};
    const cJSON *tcs;
    (void)state;

    rep = reply(SHIM_API_CHAT, req);
    tcs = c_calls(rep, "python", 2);
    assert_code(c_args(tcs, 0), "1\n");
    assert_code(c_args(tcs, 1), "2\n");
    assert_string_not_equal(shim_json_str(cJSON_GetArrayItem(tcs, 0), "id"),
                            shim_json_str(cJSON_GetArrayItem(tcs, 1), "id"));
    c_answer_calls(req, rep, outs);
    cJSON_Delete(rep);

    rep = reply(SHIM_API_CHAT, req);
    assert_string_equal(c_finish(rep), "stop");
    assert_string_equal(shim_json_str(c_message(rep), "content"), "The code ran. Output:\n2");
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

/* ---- the tool it calls, its arguments, usage ---- */

/* offline.h: it calls codeshim's tool. A program tool that also takes a
 * "code" parameter, listed before it, is not codeshim's. */
static void calls_codeshim_tool_not_a_program_tool(void **state)
{
    static const char *const prog_r =
        "[{\"type\":\"function\",\"name\":\"eval_js\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"code\":{\"type\":\"string\"}}}},"
        "{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{}}]";
    static const char *const prog_c =
        "[{\"type\":\"function\",\"function\":{\"name\":\"eval_js\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\"}}}}}]";
    cJSON *req, *rep;
    (void)state;

    req = request(SHIM_API_RESPONSES, prog_r, "python",
                  "[{\"role\":\"user\",\"content\":\"```python\\nprint(1)\\n```\"}]");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    cJSON_Delete(rep);
    cJSON_Delete(req);

    req = request(SHIM_API_CHAT, prog_c, "codeshim_python",
                  "[{\"role\":\"user\",\"content\":\"```python\\nprint(1)\\n```\"}]");
    rep = reply(SHIM_API_CHAT, req);
    c_calls(rep, "codeshim_python", 1);
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

static void arguments_carry_the_exact_code(void **state)
{
    const char *want = "s = \"a\\\\b\"\nprint(s, 'caf\xc3\xa9', {\"k\": [1, 2]})\n\tpass\n";
    char text[512];
    cJSON *req, *rep, *input;
    (void)state;

    snprintf(text, sizeof(text), "run this:\n```python\n%s```\nthanks", want);
    req = request(SHIM_API_RESPONSES, NULL, "python", "[]");
    input = cJSON_GetObjectItem(req, "input");
    cJSON_AddItemToArray(input, cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetArrayItem(input, 0), "role", "user");
    cJSON_AddStringToObject(cJSON_GetArrayItem(input, 0), "content", text);
    rep = reply(SHIM_API_RESPONSES, req);
    assert_int_equal(r_calls(rep, "python"), 1);
    assert_code(shim_json_str(r_output(rep, 0), "arguments"), want);
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

/* Deterministic: the same request gives the same reply but for ids and
 * times. */
static void same_request_same_reply(void **state)
{
    cJSON *req = request(SHIM_API_RESPONSES, NULL, "python",
                         "[{\"role\":\"user\",\"content\":\"```python\\nprint(9)\\n```\"}]"),
          *a = reply(SHIM_API_RESPONSES, req), *b = reply(SHIM_API_RESPONSES, req);
    (void)state;

    assert_string_equal(shim_json_str(r_output(a, 0), "arguments"),
                        shim_json_str(r_output(b, 0), "arguments"));
    assert_true(cJSON_Compare(cJSON_GetObjectItem(a, "usage"), cJSON_GetObjectItem(b, "usage"),
                              1));
    assert_string_not_equal(shim_json_str(a, "id"), shim_json_str(b, "id"));
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(req);
}

/* offline.h: usage in rough tokens, 4 bytes each. */
static void usage_counts_four_bytes_a_token(void **state)
{
    static char pad[4001];
    char *text = malloc(sizeof(pad) + 64);
    cJSON *shorter, *longer, *rs, *rl;
    (void)state;

    assert_non_null(text);
    memset(pad, 'x', 4000);
    shorter = request(SHIM_API_CHAT, NULL, "python", "[{\"role\":\"user\",\"content\":\"hi\"}]");
    longer = request(SHIM_API_CHAT, NULL, "python", "[{\"role\":\"user\",\"content\":\"hi\"}]");
    snprintf(text, sizeof(pad) + 64, "hi%s", pad);
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(longer, "messages"), 0),
                              "content", cJSON_CreateString(text));
    rs = reply(SHIM_API_CHAT, shorter);
    rl = reply(SHIM_API_CHAT, longer);
    assert_int_equal(shim_json_int(cJSON_GetObjectItem(rl, "usage"), "prompt_tokens") -
                         shim_json_int(cJSON_GetObjectItem(rs, "usage"), "prompt_tokens"),
                     1000);
    cJSON_Delete(rs);
    cJSON_Delete(rl);
    cJSON_Delete(shorter);
    cJSON_Delete(longer);
    free(text);
}

/* ---- requests it cannot act on: guidance, never NULL, never a call ---- */

static void requests_it_cannot_act_on_get_guidance(void **state)
{
    static const char *const convs[] = {
        "[{\"role\":\"user\",\"content\":\"hello\"}]",                    /* no block */
        "[{\"role\":\"user\",\"content\":\"```python\\nprint(1)\"}]",      /* unclosed */
        "[{\"role\":\"user\",\"content\":\"```python print(1)```\"}]",     /* no newline */
        "[]", "{}", "42", "[1, null, {\"role\":7}]",
    };
    cJSON *req, *rep;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(convs) / sizeof(convs[0]); i++) {
        req = request(SHIM_API_RESPONSES, NULL, "python", convs[i]);
        rep = reply(SHIM_API_RESPONSES, req);
        assert_non_null(strstr(r_text(rep), HELP));
        cJSON_Delete(rep);
        cJSON_Delete(req);
        req = request(SHIM_API_CHAT, NULL, "python", convs[i]);
        rep = reply(SHIM_API_CHAT, req);
        assert_string_equal(c_finish(rep), "stop");
        assert_non_null(strstr(shim_json_str(c_message(rep), "content"), HELP));
        cJSON_Delete(rep);
        cJSON_Delete(req);
    }

    /* no tool of codeshim's: it never invents a call */
    req = request(SHIM_API_RESPONSES, "[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{}}]",
                  NULL, "[{\"role\":\"user\",\"content\":\"```python\\nprint(1)\\n```\"}]");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_non_null(strstr(r_text(rep), HELP));
    cJSON_Delete(rep);
    cJSON_Delete(req);
    req = request(SHIM_API_CHAT, NULL, NULL,
                  "[{\"role\":\"user\",\"content\":\"```python\\nprint(1)\\n```\"}]");
    rep = reply(SHIM_API_CHAT, req);
    assert_string_equal(c_finish(rep), "stop");
    cJSON_Delete(rep);
    cJSON_Delete(req);

    /* not even an object: still an answer, model defaulted */
    req = J("[\"not\", \"a request\"]");
    rep = reply(SHIM_API_RESPONSES, req);
    assert_string_equal(shim_json_str(rep, "model"), "codeshim-offline");
    assert_non_null(strstr(r_text(rep), HELP));
    cJSON_Delete(rep);
    rep = reply(SHIM_API_CHAT, req);
    assert_string_equal(shim_json_str(rep, "model"), "codeshim-offline");
    cJSON_Delete(rep);
    cJSON_Delete(req);
}

/* The answer says what the last output shows happened; "The code ran"
 * only when it did. */
static void answer_tells_what_happened(void **state)
{
    static const struct {
        const char *output, *lead;
    } cases[] = {
        {"42\n", "The code ran. Output:\n42\n"},
        {"", "The code ran and printed nothing."},
        {"Traceback (most recent call last):\n  File \"<cell-1>\", line 1\nZeroDivisionError: "
         "division by zero\n",
         "The code ran and raised an exception. Output:\nTraceback (most recent call last):"},
        {"partial\nExecution timed out after 1 s; the Python interpreter was restarted",
         "The code did not finish: it hit the time limit. Output:\npartial\n"},
        {"Error: the sandbox could not be started (Permission denied); the code was not run.",
         "The code could not be run. The tool said:\nError: the sandbox could not be started"},
        {"Error: the arguments are not JSON. Call the tool again",
         "The code could not be run. The tool said:\nError: the arguments"},
        {"Not run: this request reached its limit of 10 code executions.",
         "The code was not run. The tool said:\nNot run: this request"},
    };
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        static const char *outs[1];
        cJSON *req = request(SHIM_API_RESPONSES, NULL, "python",
                             "[{\"role\":\"user\",\"content\":\"```python\\n1/0\\n```\"}]"),
              *rep = reply(SHIM_API_RESPONSES, req);
        const char *text;

        outs[0] = cases[i].output;
        r_answer_calls(req, rep, outs);
        cJSON_Delete(rep);
        rep = reply(SHIM_API_RESPONSES, req);
        text = r_text(rep);
        assert_int_equal(strncmp(text, cases[i].lead, strlen(cases[i].lead)), 0);
        if (i > 0)
            assert_null(strstr(text, "The code ran. "));
        cJSON_Delete(rep);
        cJSON_Delete(req);

        req = request(SHIM_API_CHAT, NULL, "python",
                      "[{\"role\":\"user\",\"content\":\"```python\\n1/0\\n```\"}]");
        rep = reply(SHIM_API_CHAT, req);
        c_answer_calls(req, rep, outs);
        cJSON_Delete(rep);
        rep = reply(SHIM_API_CHAT, req);
        text = shim_json_str(c_message(rep), "content");
        assert_int_equal(strncmp(text, cases[i].lead, strlen(cases[i].lead)), 0);
        cJSON_Delete(rep);
        cJSON_Delete(req);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(responses_one_block_per_turn),
        cmocka_unit_test(responses_parallel_runs_every_block_at_once),
        cmocka_unit_test(responses_reads_the_last_user_message),
        cmocka_unit_test(chat_one_block_per_turn_then_text),
        cmocka_unit_test(chat_parallel_runs_every_block_at_once),
        cmocka_unit_test(calls_codeshim_tool_not_a_program_tool),
        cmocka_unit_test(arguments_carry_the_exact_code),
        cmocka_unit_test(same_request_same_reply),
        cmocka_unit_test(usage_counts_four_bytes_a_token),
        cmocka_unit_test(requests_it_cannot_act_on_get_guidance),
        cmocka_unit_test(answer_tells_what_happened),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
