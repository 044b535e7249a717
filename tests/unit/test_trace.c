/* Unit tests: `codeshim trace` (cli/trace_load.c, cli/trace_print.c) on
 * hand-written JSON Lines: the aggregated numbers and both printed forms.
 *
 * The launcher's files are compiled in here (the unit-test rules link only
 * the library's archive, which has the buf.c and json.c they use). Lines
 * are written with ' for " so they stay readable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/trace_load.c"
#include "../../cli/trace_print.c"

/* ---- helpers ---- */

/* The lines joined with '\n' (none after the last when unterminated), with
 * every ' turned into ". Caller frees. */
static char *join(const char *const *lines, size_t n, int unterminated, size_t *len)
{
    struct shim_buf b;
    size_t i;

    shim_buf_init(&b, 1 << 20);
    for (i = 0; i < n; i++) {
        assert_int_equal(shim_buf_adds(&b, lines[i]), 0);
        if (i + 1 < n || !unterminated)
            assert_int_equal(shim_buf_adds(&b, "\n"), 0);
    }
    for (i = 0; i < b.len; i++)
        if (b.data[i] == '\'')
            b.data[i] = '"';
    return shim_buf_take(&b, len);
}

static struct cli_trace *load_bytes(const char *p, size_t n)
{
    struct cli_trace *t = NULL;
    FILE *f = n ? fmemopen((void *)p, n, "r") : fopen("/dev/null", "r");

    assert_non_null(f);
    assert_int_equal(cli_trace_load(f, &t), 0);
    fclose(f);
    assert_non_null(t);
    return t;
}

static struct cli_trace *load_lines(const char *const *lines, size_t n, int unterminated)
{
    size_t len;
    char *s = join(lines, n, unterminated, &len);
    struct cli_trace *t = load_bytes(s, len);

    free(s);
    return t;
}

#define LOAD(lines) load_lines(lines, sizeof(lines) / sizeof(lines[0]), 0)

/* Output of print (text or JSON) as a string. Caller frees. */
static char *printed(const struct cli_trace *t, int json)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    assert_non_null(f);
    assert_int_equal(json ? cli_trace_print_json(t, f) : cli_trace_print_text(t, f), 0);
    fclose(f);
    return out;
}

/* The request with this id (a test failure when there is none). */
static const struct cli_trace_req *req(const struct cli_trace *t, const char *id)
{
    size_t i;

    for (i = 0; i < cli_trace_nreqs(t); i++)
        if (!strcmp(cli_trace_req_at(t, i)->id, id))
            return cli_trace_req_at(t, i);
    fail_msg("no request %s", id);
    return NULL;
}

static void assert_json_equal(const char *got, const char *want_quoted)
{
    char *want_text = strdup(want_quoted), *p;
    cJSON *g = cJSON_Parse(got), *w;

    assert_non_null(want_text);
    for (p = want_text; *p; p++)
        if (*p == '\'')
            *p = '"';
    w = cJSON_Parse(want_text);
    assert_non_null(g);
    assert_non_null(w);
    if (!cJSON_Compare(g, w, 1)) {
        char *gs = cJSON_PrintUnformatted(g);

        fail_msg("JSON differs:\n got %s\nwant %s", gs, want_text);
    }
    cJSON_Delete(g);
    cJSON_Delete(w);
    free(want_text);
}

/* ---- a mixed trace ---- */

/* Three requests from four processes, interleaved, req_b's first line
 * before req_a's and req_a's earliest timestamp on a late line; junk,
 * blank lines, missing fields and errors outside any request between. */
static const char *const MIXED[] = {
    "{'ts':1000.5,'pid':100,'req':'req_a','event':'request','api':'responses',"
    "'url':'http://h/v1/responses','model':'gpt-x','stream':true}",
    "{'ts':1000.0,'pid':200,'req':'req_b','event':'request','api':'chat',"
    "'url':'http://h/v1/chat/completions','model':'small','stream':false}",
    "not json",                                                   /* malformed */
    "{'ts':1000.9,'pid':100,'req':'req_a','event':'upstream','turn':1,'status':200,"
    "'seconds':0.25,'bytes':900,'input_tokens':100,'output_tokens':20}",
    "",                                                           /* blank */
    "{'ts':1001.0,'pid':100,'req':'req_a','event':'exec','call':'ci_1',"
    "'status':'completed','seconds':0.5,'code':'\\n\\nimport math\\nprint(math.pi)\\n'}",
    "{'ts':1001.1,'pid':200,'req':'req_b','event':'upstream','turn':1,'seconds':2.0,"
    "'error':'Could not connect','curl_code':7}",
    "{'ts':1,'req':'req_a'}",                                     /* no event */
    "{'event':'request','req':'req_z'}",                          /* no ts */
    "{'ts':1001.3,'pid':100,'req':'req_a','event':'exec','call':'ci_2',"
    "'status':'failed','seconds':0.125,'code':'1/0'}",
    /* An execution with no call, status or code: kept, not completed. */
    "{'ts':1001.4,'pid':100,'req':'req_a','event':'exec','seconds':0.125}",
    /* The answer knows of one more upstream call than the trace shows. */
    "{'ts':1001.5,'pid':100,'req':'req_a','event':'answer','status':200,"
    "'executions':3,'upstream_calls':2,'seconds':1.75,'curl_code':0}",
    "{'ts':1001.6,'pid':300,'event':'error','message':'bad config'}",
    "{'ts':1001.65,'pid':300,'req':'','event':'error'}",
    "{'ts':1001.7,'pid':300,'event':'upstream'}",                 /* no req */
    "{'ts':1001.7,'pid':200,'req':'req_b','event':'error','message':'upstream unreachable'}",
    "{'ts':1001.8,'pid':200,'req':'req_b','event':'answer','status':0,'executions':0,"
    "'upstream_calls':1,'seconds':2.5,'curl_code':7}",
    /* req_c: no request event, no answer. */
    "{'ts':1002.0,'pid':400,'req':'req_c','event':'upstream','turn':1,'status':429,"
    "'seconds':0.125,'bytes':50}",
    "{'ts':1002.5,'pid':400,'req':'req_c','event':'future_event','x':1}",
    "{'ts':1,'req':'req_a','event':'exec'} {'ts':2}",             /* two objects */
    "[1,2]",                                                      /* not an object */
    "  {'ts':1000.25,'pid':100,'req':'req_a','event':'note'} \r", /* CRLF, spaces */
    "   \t",                                                      /* blank */
};

static void mixed_numbers(void **state)
{
    struct cli_trace *t = LOAD(MIXED);
    const struct cli_trace_req *a, *b, *c;
    (void)state;

    assert_int_equal(t->lines, 23);
    assert_int_equal(t->malformed, 6);
    assert_int_equal(cli_trace_nreqs(t), 3);
    assert_int_equal(cli_trace_nstrs(&t->orphans), 2);
    assert_string_equal(cli_trace_strs(&t->orphans)[0], "bad config");
    assert_string_equal(cli_trace_strs(&t->orphans)[1], "(no message)");

    a = req(t, "req_a");
    assert_int_equal(a->order, 0);
    assert_int_equal(a->pid, 100);
    assert_true(a->first_ts == 1000.25 && a->last_ts == 1001.5);
    assert_string_equal(a->api, "responses");
    assert_int_equal(a->stream, 1);
    assert_int_equal(a->upstream_calls, 1);
    assert_int_equal(a->answer_upstream, 2);
    assert_int_equal(a->upstream_bytes, 900);
    assert_true(a->has_tok_in && a->tok_in == 100 && a->has_tok_out && a->tok_out == 20);
    assert_true(a->model_s == 0.25 && a->sandbox_s == 0.75);
    assert_int_equal(cli_trace_nexecs(a), 3);
    assert_int_equal(a->execs_failed, 2);
    assert_string_equal(cli_trace_exec_at(a, 0)->code, "import math");
    assert_string_equal(cli_trace_exec_at(a, 2)->status, "?");
    assert_string_equal(cli_trace_exec_at(a, 2)->call, "");
    assert_true(a->answered && a->has_status && a->status == 200 && a->has_curl);

    b = req(t, "req_b");
    assert_int_equal(b->order, 1);
    assert_int_equal(b->pid, 200);
    assert_int_equal(b->stream, 0);
    assert_false(b->has_tok_in || b->has_tok_out);
    assert_int_equal(cli_trace_nstrs(&b->notes), 2);
    assert_true(b->answered && b->curl_code == 7 && b->answer_s == 2.5);

    c = req(t, "req_c");
    assert_int_equal(c->pid, 400);
    assert_null(c->api);
    assert_int_equal(c->stream, -1);
    assert_false(c->answered);
    assert_true(c->first_ts == 1002.0 && c->last_ts == 1002.5);
    cli_trace_free(t);
}

static const char MIXED_TEXT[] =
    "request req_b (pid 200, 1970-01-01 00:16:40 UTC)\n"
    "  api       chat  model small  stream no\n"
    "  url       http://h/v1/chat/completions\n"
    "  loop      1 upstream call, 0 executions\n"
    "  time      model 2.000s  sandbox 0.000s  total 2.500s\n"
    "  tokens    unknown\n"
    "  result    status 0  curl code 7\n"
    "  note      upstream turn 1 failed: curl code 7: Could not connect\n"
    "  note      error: upstream unreachable\n"
    "\n"
    "request req_a (pid 100, 1970-01-01 00:16:40 UTC)\n"
    "  api       responses  model gpt-x  stream yes\n"
    "  url       http://h/v1/responses\n"
    "  loop      2 upstream calls, 3 executions\n"
    "  time      model 0.250s  sandbox 0.750s  total 1.750s\n"
    "  tokens    in 100  out 20\n"
    "  result    status 200  curl code 0\n"
    "  exec      completed  0.500s  import math\n"
    "  exec      failed     0.125s  1/0\n"
    "  exec      ?          0.125s  \n"
    "\n"
    "request req_c (pid 400, 1970-01-01 00:16:42 UTC)\n"
    "  api       ?  model ?  stream ?\n"
    "  url       ?\n"
    "  loop      1 upstream call, 0 executions\n"
    "  time      model 0.125s  sandbox 0.000s  total 0.500s\n"
    "  tokens    unknown\n"
    "  result    unfinished (no answer event)\n"
    "  note      upstream turn 1 answered status 429\n"
    "\n"
    "error outside any request: bad config\n"
    "error outside any request: (no message)\n"
    "total: 3 requests (2 answered, 1 failed), 4 upstream calls, 3 executions "
    "(2 not completed), model 2.375s, sandbox 0.750s, total 4.750s, "
    "tokens in 100 out 20\n"
    "skipped 6 malformed lines\n";

static void mixed_text(void **state)
{
    struct cli_trace *t = LOAD(MIXED);
    char *out = printed(t, 0);
    (void)state;

    assert_string_equal(out, MIXED_TEXT);
    free(out);
    cli_trace_free(t);
}

static void mixed_json(void **state)
{
    struct cli_trace *t = LOAD(MIXED);
    char *out = printed(t, 1);
    (void)state;

    /* One pretty-printed object and a newline. */
    assert_true(out[0] == '{' && !strcmp(out + strlen(out) - 2, "}\n"));
    assert_json_equal(out,
        "{'requests':["
        "{'req':'req_b','pid':200,'first_ts':1000.0,'api':'chat','model':'small',"
        "'url':'http://h/v1/chat/completions','stream':false,'upstream_calls':1,"
        "'executions':0,'model_seconds':2.0,'sandbox_seconds':0,'total_seconds':2.5,"
        "'input_tokens':null,'output_tokens':null,'upstream_bytes':0,'answered':true,"
        "'status':0,'curl_code':7,'exec':[],"
        "'notes':['upstream turn 1 failed: curl code 7: Could not connect',"
        "'error: upstream unreachable']},"
        "{'req':'req_a','pid':100,'first_ts':1000.25,'api':'responses','model':'gpt-x',"
        "'url':'http://h/v1/responses','stream':true,'upstream_calls':2,'executions':3,"
        "'model_seconds':0.25,'sandbox_seconds':0.75,'total_seconds':1.75,"
        "'input_tokens':100,'output_tokens':20,'upstream_bytes':900,'answered':true,"
        "'status':200,'curl_code':0,'exec':["
        "{'call':'ci_1','status':'completed','seconds':0.5,'code':'import math'},"
        "{'call':'ci_2','status':'failed','seconds':0.125,'code':'1/0'},"
        "{'call':'','status':'?','seconds':0.125,'code':''}],'notes':[]},"
        "{'req':'req_c','pid':400,'first_ts':1002.0,'api':null,'model':null,'url':null,"
        "'stream':null,'upstream_calls':1,'executions':0,'model_seconds':0.125,"
        "'sandbox_seconds':0,'total_seconds':0.5,'input_tokens':null,'output_tokens':null,"
        "'upstream_bytes':50,'answered':false,'status':null,'curl_code':null,'exec':[],"
        "'notes':['upstream turn 1 answered status 429']}],"
        "'totals':{'requests':3,'answered':2,'failed':1,'upstream_calls':4,'executions':3,"
        "'executions_not_completed':2,'model_seconds':2.375,'sandbox_seconds':0.75,"
        "'total_seconds':4.75,'input_tokens':100,'output_tokens':20},"
        "'errors_outside_requests':['bad config','(no message)'],"
        "'lines':23,'malformed_lines':6}");
    free(out);
    cli_trace_free(t);
}

/* ---- edges ---- */

static void empty_and_unterminated(void **state)
{
    static const char *const two[] = {
        "{'ts':5,'req':'r1','event':'request','api':'chat'}",
        "{'ts':6,'req':'r1','event':'answer','status':200,'curl_code':0,'seconds':1}",
    };
    struct cli_trace *t = load_bytes("", 0);
    char *out = printed(t, 0);
    (void)state;

    assert_string_equal(out,
        "total: 0 requests (0 answered, 0 failed), 0 upstream calls, 0 executions "
        "(0 not completed), model 0.000s, sandbox 0.000s, total 0.000s, tokens in 0 out 0\n");
    free(out);
    out = printed(t, 1);
    assert_json_equal(out,
        "{'requests':[],'totals':{'requests':0,'answered':0,'failed':0,'upstream_calls':0,"
        "'executions':0,'executions_not_completed':0,'model_seconds':0,'sandbox_seconds':0,"
        "'total_seconds':0,'input_tokens':0,'output_tokens':0},"
        "'errors_outside_requests':[],'lines':0,'malformed_lines':0}");
    free(out);
    cli_trace_free(t);

    /* A last line without '\n' still counts. */
    t = load_lines(two, 2, 1);
    assert_int_equal(t->lines, 2);
    assert_int_equal(t->malformed, 0);
    assert_true(req(t, "r1")->answered && req(t, "r1")->status == 200);
    cli_trace_free(t);
}

/* A line of exactly CLI_TRACE_MAX_LINE bytes is read; one byte more and it
 * is skipped as malformed, the lines around it still count. */
/* Executions on e2b: the creates they waited for and the execute calls,
 * per request and in total; requests without them print nothing new. */
static void e2b_times(void **state)
{
    static const char *const lines[] = {
        "{'ts':1,'req':'r1','event':'request','api':'responses'}",
        "{'ts':2,'req':'r1','event':'exec','call':'ci_1','status':'completed','seconds':0.75,"
        "'e2b_create_seconds':0.5,'e2b_execute_seconds':0.25,'code':'a = 1'}",
        "{'ts':3,'req':'r1','event':'exec','call':'ci_2','status':'completed','seconds':0.125,"
        "'e2b_create_seconds':0,'e2b_execute_seconds':0.125,'code':'print(a)'}",
        "{'ts':4,'req':'r2','event':'exec','call':'ci_3','status':'completed','seconds':1,"
        "'code':'local'}",
    };
    struct cli_trace *t = LOAD(lines);
    const struct cli_trace_req *r1 = req(t, "r1"), *r2 = req(t, "r2");
    char *text = printed(t, 0), *json = printed(t, 1);
    (void)state;

    assert_int_equal(r1->e2b_creates, 1);
    assert_int_equal(r1->e2b_execs, 2);
    assert_true(r1->e2b_create_s == 0.5 && r1->e2b_exec_s == 0.375);
    assert_int_equal(r2->e2b_creates + r2->e2b_execs, 0);
    assert_non_null(strstr(text, "  e2b       create 1 (0.500s)  execute 2 (0.375s)\n"));
    assert_non_null(strstr(text, "total e2b: create 1 (0.500s)  execute 2 (0.375s)\n"));
    assert_int_equal(strstr(strstr(text, "request r2"), "  e2b ") != NULL, 0);
    assert_non_null(strstr(json, "\"create_seconds\":\t0.5"));
    free(text);
    free(json);
    cli_trace_free(t);
}

static void line_cap(void **state)
{
    static const char head[] = "{\"ts\":2,\"req\":\"r1\",\"event\":\"exec\",\"status\":\"completed\","
                               "\"seconds\":1,\"code\":\"";
    static const char tail[] = "\"}";
    size_t body = CLI_TRACE_MAX_LINE - (sizeof(head) - 1) - (sizeof(tail) - 1);
    size_t one = CLI_TRACE_MAX_LINE + 1, len = 2 * one + 1 + 40, off = 0;
    char *s = malloc(len);
    struct cli_trace *t;
    (void)state;

    assert_non_null(s);
    for (int extra = 0; extra <= 1; extra++) {
        memcpy(s + off, head, sizeof(head) - 1);
        off += sizeof(head) - 1;
        memset(s + off, 'x', body + (size_t)extra);
        off += body + (size_t)extra;
        memcpy(s + off, tail, sizeof(tail) - 1);
        off += sizeof(tail) - 1;
        s[off++] = '\n';
    }
    off += (size_t)snprintf(s + off, len - off, "{\"ts\":3,\"req\":\"r1\",\"event\":\"x\"}");
    t = load_bytes(s, off);
    assert_int_equal(t->lines, 3);
    assert_int_equal(t->malformed, 1);
    assert_int_equal(cli_trace_nexecs(req(t, "r1")), 1);
    assert_true(req(t, "r1")->last_ts == 3);
    /* The kept code is clipped to CLI_TRACE_CODE_MAX bytes and "...". */
    assert_int_equal(strlen(cli_trace_exec_at(req(t, "r1"), 0)->code), CLI_TRACE_CODE_MAX + 3);
    cli_trace_free(t);
    free(s);
}

/* Past CLI_TRACE_NOTES_MAX a request's notes (and the errors outside any
 * request) are counted, not kept. */
static void notes_cap(void **state)
{
    struct shim_buf b;
    struct cli_trace *t;
    char *out;
    int i;
    (void)state;

    shim_buf_init(&b, 1 << 20);
    for (i = 0; i < CLI_TRACE_NOTES_MAX + 6; i++) {
        assert_int_equal(shim_buf_addf(&b, "{\"ts\":%d,\"req\":\"r\",\"event\":\"error\","
                                           "\"message\":\"e%d\"}\n", i, i), 0);
        assert_int_equal(shim_buf_addf(&b, "{\"ts\":%d,\"event\":\"error\"}\n", i), 0);
    }
    t = load_bytes(b.data, b.len);
    assert_int_equal(cli_trace_nstrs(&req(t, "r")->notes), CLI_TRACE_NOTES_MAX);
    assert_int_equal(req(t, "r")->notes_dropped, 6);
    assert_int_equal(cli_trace_nstrs(&t->orphans), CLI_TRACE_NOTES_MAX);
    assert_int_equal(t->orphans_dropped, 6);
    out = printed(t, 0);
    assert_non_null(strstr(out, "  note      error: e63\n  note      ... and 6 more\n"));
    assert_null(strstr(out, "e64"));
    free(out);
    cli_trace_free(t);
    shim_buf_free(&b);
}

/* What is kept is clipped, control characters (C0, DEL, C1) become
 * spaces, and a cut never splits a UTF-8 sequence. */
static void clipping(void **state)
{
    struct shim_buf b;
    struct cli_trace *t;
    const struct cli_trace_req *r;
    const char *code;
    int i;
    (void)state;

    shim_buf_init(&b, 1 << 20);
    assert_int_equal(shim_buf_adds(&b, "{\"ts\":1,\"req\":\"r\",\"event\":\"request\",\"url\":\""), 0);
    for (i = 0; i < CLI_TRACE_TEXT_MAX - 1; i++)
        assert_int_equal(shim_buf_adds(&b, "u"), 0);
    /* é straddles the cut: it goes whole. */
    assert_int_equal(shim_buf_adds(&b, "\xc3\xa9tail\",\"model\":\"a\\u001b[1mb\\u0085c\\u007fd\"}\n"), 0);
    assert_int_equal(shim_buf_adds(&b, "{\"ts\":2,\"req\":\"r\",\"event\":\"exec\",\"status\":\"completed\","
                                       "\"code\":\" \\t\\r\\n  \\tx = 1\\r\\ny = 2\"}\n"), 0);
    t = load_bytes(b.data, b.len);
    r = req(t, "r");
    assert_int_equal(strlen(r->url), CLI_TRACE_TEXT_MAX - 1 + 3);
    assert_string_equal(r->url + CLI_TRACE_TEXT_MAX - 1, "...");
    assert_string_equal(r->model, "a [1mb  c d");
    /* Leading blank space and lines skipped, then the first line kept. */
    code = cli_trace_exec_at(r, 0)->code;
    assert_string_equal(code, "x = 1");
    cli_trace_free(t);
    shim_buf_free(&b);
}

/* Request ids are compared as kept: every event of an id longer than
 * CLI_TRACE_ID_MAX belongs to one request (each used to make its own). */
static void long_id_is_one_request(void **state)
{
    char id[CLI_TRACE_ID_MAX + 80];
    struct shim_buf b;
    struct cli_trace *t;
    const struct cli_trace_req *r;
    (void)state;

    memset(id, 'i', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    shim_buf_init(&b, 1 << 20);
    assert_int_equal(shim_buf_addf(&b, "{\"ts\":1,\"req\":\"%s\",\"event\":\"request\",\"api\":\"chat\"}\n"
                                       "{\"ts\":2,\"req\":\"%s\",\"event\":\"upstream\",\"status\":200}\n"
                                       "{\"ts\":3,\"req\":\"%s\",\"event\":\"answer\",\"status\":200}\n",
                                 id, id, id), 0);
    t = load_bytes(b.data, b.len);
    assert_int_equal(cli_trace_nreqs(t), 1);
    r = cli_trace_req_at(t, 0);
    assert_int_equal(strlen(r->id), CLI_TRACE_ID_MAX + 3);
    assert_true(r->answered && r->upstream_calls == 1 && r->api && r->last_ts == 3);
    cli_trace_free(t);
    shim_buf_free(&b);
}

/* Numbers beyond +-9e15 are ignored; sums saturate instead of wrapping. */
static void huge_numbers(void **state)
{
    struct shim_buf b;
    struct cli_trace *t;
    const struct cli_trace_req *r;
    int i;
    (void)state;

    shim_buf_init(&b, 1 << 20);
    assert_int_equal(shim_buf_adds(&b, "{\"ts\":1,\"req\":\"r\",\"event\":\"upstream\",\"status\":200,"
                                       "\"input_tokens\":1e300,\"bytes\":-1e300,\"turn\":1e16}\n"), 0);
    for (i = 0; i < 1100; i++)   /* 1100 * 9e15 > LLONG_MAX */
        assert_int_equal(shim_buf_adds(&b, "{\"ts\":2,\"req\":\"r\",\"event\":\"upstream\",\"status\":200,"
                                           "\"output_tokens\":9e15,\"bytes\":-9e15}\n"), 0);
    t = load_bytes(b.data, b.len);
    r = req(t, "r");
    assert_int_equal(r->upstream_calls, 1101);
    assert_false(r->has_tok_in);
    assert_int_equal(r->tok_in, 0);
    assert_true(r->has_tok_out && r->tok_out == LLONG_MAX);
    assert_true(r->upstream_bytes == LLONG_MIN);
    cli_trace_free(t);
    shim_buf_free(&b);
}

/* Requests print by first timestamp, ties in order of first appearance. */
static void print_order(void **state)
{
    static const char *const lines[] = {
        "{'ts':7,'req':'late','event':'request'}",
        "{'ts':5,'req':'tie_1','event':'request'}",
        "{'ts':5,'req':'tie_2','event':'request'}",
        "{'ts':3,'req':'late','event':'x'}",
        "{'ts':9,'req':'early','event':'x'}",
        "{'ts':1,'req':'early','event':'x'}",
    };
    struct cli_trace *t = LOAD(lines);
    char *out = printed(t, 0);
    const char *p;
    (void)state;

    p = strstr(out, "request early ");
    assert_non_null(p);
    p = strstr(p, "request late ");
    assert_non_null(p);
    p = strstr(p, "request tie_1 ");
    assert_non_null(p);
    assert_non_null(strstr(p, "request tie_2 "));
    free(out);
    cli_trace_free(t);
}

/* A failed read or write is an error, not a short summary. */
static void io_errors(void **state)
{
    static const char *const one[] = {"{'ts':1,'req':'r','event':'request'}"};
    struct cli_trace *t = NULL;
    FILE *f = fopen("/dev/null", "w");
    (void)state;

    assert_non_null(f);
    assert_true(cli_trace_load(f, &t) < 0);   /* not open for reading */
    assert_null(t);
    fclose(f);

    t = LOAD(one);
    f = fopen("/dev/full", "w");
    assert_non_null(f);
    assert_int_equal(cli_trace_print_text(t, f), -EIO);
    fclose(f);
    f = fopen("/dev/full", "w");
    assert_non_null(f);
    assert_int_equal(cli_trace_print_json(t, f), -EIO);
    fclose(f);
    cli_trace_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mixed_numbers),
        cmocka_unit_test(mixed_text),
        cmocka_unit_test(mixed_json),
        cmocka_unit_test(empty_and_unterminated),
        cmocka_unit_test(e2b_times),
        cmocka_unit_test(line_cap),
        cmocka_unit_test(notes_cap),
        cmocka_unit_test(clipping),
        cmocka_unit_test(long_id_is_one_request),
        cmocka_unit_test(huge_numbers),
        cmocka_unit_test(print_order),
        cmocka_unit_test(io_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
