/* fuzz_common.c - see fuzz_common.h: the checks and the conversation the
 * harnesses share, and the sanitizers' defaults for every harness. */
#include "fuzz_common.h"

#include "api/offline.h"
#include "api/step.h"
#include "api/stream.h"
#include "base/json.h"
#include "curl/sink.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* sanitizer defaults (the environment's ASAN_OPTIONS etc. still win)  */

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void)
{
    /* engines handle a failed malloc: a huge one returns NULL */
    return "detect_leaks=1:allocator_may_return_null=1:quarantine_size_mb=16:"
           "handle_abort=1:print_summary=1";
}

const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1:print_summary=1";
}

/* ------------------------------------------------------------------ */
/* reports and small helpers                                           */

const char *fuzz_target = "?";
int fuzz_utf8;

void fuzz_invalid(const char *check, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "fuzz: invalid output: %s: ", check);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (target %s)\nSUMMARY: fuzz: invalid output: %s\n", fuzz_target, check);
    fflush(stderr);
    abort();
}

void *fuzz_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p) {
        fprintf(stderr, "fuzz: out of memory\n");
        abort();
    }
    return p;
}

char *fuzz_exact(const void *p, size_t n)
{
    char *c = fuzz_xmalloc(n);

    if (n)
        memcpy(c, p, n);
    return c;
}

char *fuzz_cstr(const void *p, size_t n)
{
    char *c = fuzz_xmalloc(n + 1);

    if (n)
        memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

static uint64_t fnv64(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ULL;

    while (n--) {
        h ^= *s++;
        h *= 1099511628211ULL;
    }
    return h;
}

unsigned fuzz_pick(const struct fuzz_input *in, int salt, unsigned n)
{
    uint64_t x = in->h ^ ((uint64_t)salt * 0x9E3779B97F4A7C15ULL);

    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return n ? (unsigned)(x % n) : 0;
}

/* ------------------------------------------------------------------ */
/* strict JSON                                                         */

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint32_t c;
    size_t k, i;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        k = 2, c = p[0] & 0x1F;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF)
        k = 3, c = p[0] & 0x0F;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4)
        k = 4, c = p[0] & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if ((k == 3 && c < 0x800) || (k == 4 && c < 0x10000) || c > 0x10FFFF ||
        (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    return k;
}

int fuzz_utf8_valid(const uint8_t *p, size_t n)
{
    size_t i = 0, k;

    while (i < n) {
        if (!(k = utf8_seq(p + i, n - i)))
            return 0;
        i += k;
    }
    return 1;
}

static size_t skip_ws(const char *p, size_t n, size_t i)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A strict JSON string at p[i] ('"'); returns the index after it, or 0. */
static size_t check_string(const char *p, size_t n, size_t i, int utf8, const char **why)
{
    i++;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"')
            return i + 1;
        if (c < 0x20) {
            *why = "raw control character in a string";
            return 0;
        }
        if (c == '\\') {
            if (i + 1 >= n)
                break;
            c = (unsigned char)p[i + 1];
            if (c == 'u') {
                if (i + 5 >= n || !is_hex(p[i + 2]) || !is_hex(p[i + 3]) || !is_hex(p[i + 4]) ||
                    !is_hex(p[i + 5])) {
                    *why = "bad \\u escape";
                    return 0;
                }
                i += 6;
            } else if (c && strchr("\"\\/bfnrt", c)) {
                i += 2;
            } else {
                *why = "bad escape";
                return 0;
            }
            continue;
        }
        if (c >= 0x80 && utf8) {
            size_t k = utf8_seq((const uint8_t *)p + i, n - i);
            if (!k) {
                *why = "invalid UTF-8 in a string";
                return 0;
            }
            i += k;
            continue;
        }
        i++;
    }
    *why = "unterminated string";
    return 0;
}

static size_t check_digits(const char *p, size_t n, size_t i)
{
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    return i;
}

static size_t check_number(const char *p, size_t n, size_t i)
{
    size_t s;

    if (i < n && p[i] == '-')
        i++;
    if (i >= n)
        return 0;
    if (p[i] == '0')
        i++;
    else if (p[i] >= '1' && p[i] <= '9')
        i = check_digits(p, n, i);
    else
        return 0;
    if (i < n && p[i] == '.') {
        s = ++i;
        if ((i = check_digits(p, n, i)) == s)
            return 0;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        s = i;
        if ((i = check_digits(p, n, i)) == s)
            return 0;
    }
    return i;
}

/* A scalar at p[i]: the index after it, or 0 (and *why). */
static size_t check_scalar(const char *p, size_t n, size_t i, int utf8, const char **why)
{
    static const char *const lits[] = {"true", "false", "null"};
    size_t k;

    if (p[i] == '"')
        return check_string(p, n, i, utf8, why);
    for (k = 0; k < 3; k++)
        if (p[i] == lits[k][0]) {
            size_t l = strlen(lits[k]);
            if (n - i < l || memcmp(p + i, lits[k], l)) {
                *why = "bad literal";
                return 0;
            }
            return i + l;
        }
    if (!(k = check_number(p, n, i)))
        *why = "bad number or unexpected character";
    return k;
}

/* Iterative: a stack of open containers ('o' object, 'a' array). */
const char *fuzz_json_strict(const char *p, size_t n, int utf8)
{
    char *stack = NULL;
    size_t depth = 0, cap = 0, i = skip_ws(p, n, 0);
    const char *why = NULL;

    for (;;) {
        /* a value at p[i] */
        if (i >= n) {
            why = "truncated";
            break;
        }
        if (p[i] == '{' || p[i] == '[') {
            char kind = p[i] == '{' ? 'o' : 'a';
            if (depth == cap) {
                char *s = realloc(stack, cap = cap ? cap * 2 : 64);
                if (!s) {
                    why = "out of memory";
                    break;
                }
                stack = s;
            }
            stack[depth++] = kind;
            i = skip_ws(p, n, i + 1);
            if (i < n && p[i] == (kind == 'o' ? '}' : ']')) {
                depth--;
                i++;
            } else if (kind == 'o') {
                goto key;
            } else {
                continue;
            }
        } else if (!(i = check_scalar(p, n, i, utf8, &why))) {
            break;
        }
    after:
        i = skip_ws(p, n, i);
        if (!depth) {
            why = i == n ? NULL : "trailing bytes after the value";
            break;
        }
        if (i < n && p[i] == ',') {
            i = skip_ws(p, n, i + 1);
            if (stack[depth - 1] == 'a')
                continue;
            goto key;
        }
        if (i < n && ((stack[depth - 1] == 'o' && p[i] == '}') ||
                      (stack[depth - 1] == 'a' && p[i] == ']'))) {
            depth--;
            i++;
            goto after;
        }
        why = "expected ',' or a closing bracket";
        break;
    key:
        if (i >= n || p[i] != '"') {
            why = "object key is not a string";
            break;
        }
        if (!(i = check_string(p, n, i, utf8, &why)))
            break;
        i = skip_ws(p, n, i);
        if (i >= n || p[i] != ':') {
            why = "missing ':'";
            break;
        }
        i = skip_ws(p, n, i + 1);
    }
    free(stack);
    return why;
}

void fuzz_check_json(const char *check, const cJSON *j)
{
    char *s;
    const char *why;

    if (!j)
        return;
    s = cJSON_PrintUnformatted(j);
    if (!s)
        fuzz_invalid(check, "cJSON_PrintUnformatted failed on the output");
    if ((why = fuzz_json_strict(s, strlen(s), fuzz_utf8)) != NULL)
        fuzz_invalid(check, "%s: %.300s", why, s);
    free(s);
}

void fuzz_setup(void)
{
    static const char *const good[] = {"{\"a\":[1,-0,1e5,\"\\u00e9\"],\"b\":{}}", " [ ] ", "\"\"",
                                       "[[],{},[{\"c\":null}],true,false,-1.5E+3]", "0"};
    static const char *const bad[] = {"{\"a\":01}", "[1,]", "\"\xff\"", "{\"a\" 1}", "[1] x",
                                      "[tru]", "{1:2}", "\"\\x\"", "", "[}", "{\"a\":1,}",
                                      "{\"a\":1 \"b\":2}", "\"\\u12\"", "[1 2]", "[", "1.", "-"};
    size_t i;

    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (fuzz_json_strict(good[i], strlen(good[i]), 1))
            goto broken;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (!fuzz_json_strict(bad[i], strlen(bad[i]), 1))
            goto broken;
    return;
broken:
    fprintf(stderr, "fuzz: strict JSON checker self-test failed\n");
    abort();
}

/* ------------------------------------------------------------------ */
/* inputs                                                              */

void fuzz_input_begin(struct fuzz_input *in, const uint8_t *p, size_t n, int docs)
{
    const char *s = (const char *)p, *end = s + n;

    memset(in, 0, sizeof(*in));
    in->p = p;
    in->n = n;
    in->h = fnv64(p, n);
    fuzz_utf8 = fuzz_utf8_valid(p, n) && !memchr(p, '\0', n);
    while (docs && s < end && in->ndocs < FUZZ_MAX_DOCS) {
        const char *next = NULL;
        cJSON *d;
        while (s < end && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t'))
            s++;
        if (s >= end)
            break;
        d = cJSON_ParseWithLengthOpts(s, (size_t)(end - s), &next, 0);
        if (!d || !next || next <= s) {
            cJSON_Delete(d);
            break;
        }
        in->doc[in->ndocs++] = d;
        s = next;
    }
}

void fuzz_input_end(struct fuzz_input *in)
{
    while (in->ndocs)
        cJSON_Delete(in->doc[--in->ndocs]);
    fuzz_target = "?";
}

/* ------------------------------------------------------------------ */
/* built-in partners for single-document inputs                        */

static const char builtin_resp_req[] =
    "{\"model\":\"gpt-4.1\",\"input\":[{\"role\":\"user\",\"content\":\"Compute 2+2\"}],"
    "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}},"
    "{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}],"
    "\"tool_choice\":\"auto\",\"stream\":true,\"metadata\":{\"session_id\":\"s1\"}}";
static const char builtin_resp_calls[] =
    "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
    "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
    "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"python\","
    "\"arguments\":\"{\\\"code\\\":\\\"1+1\\\"}\"},"
    "{\"type\":\"message\",\"id\":\"msg_0\",\"role\":\"assistant\",\"content\":[{\"type\":"
    "\"output_text\",\"text\":\"Let me run that.\",\"annotations\":[]}]},"
    "{\"type\":\"function_call\",\"id\":\"fc_2\",\"call_id\":\"call_b\",\"name\":\"python\","
    "\"arguments\":\"{\\\"code\\\":\\\"2+2\\\"}\"}],"
    "\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":2},"
    "\"output_tokens\":5,\"output_tokens_details\":{\"reasoning_tokens\":1},\"total_tokens\":15}}";
static const char builtin_resp_final[] =
    "{\"id\":\"resp_2\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
    "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
    "\"content\":[{\"type\":\"output_text\",\"text\":\"The answer is 4.\",\"annotations\":[]}]}],"
    "\"usage\":{\"input_tokens\":20,\"output_tokens\":3,\"total_tokens\":23}}";
static const char builtin_chat_req[] =
    "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"Compute 2+2\"}],"
    "\"tools\":[{\"type\":\"code_interpreter\"},{\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
static const char builtin_chat_calls[] =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1700000000,"
    "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":null,\"tool_calls\":[{\"id\":\"call_a\",\"type\":\"function\",\"function\":"
    "{\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"2+2\\\"}\"}}]},"
    "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":7,\"total_tokens\":16}}";
static const char builtin_chat_final[] =
    "{\"id\":\"chatcmpl-2\",\"object\":\"chat.completion\",\"created\":1700000001,"
    "\"model\":\"gpt-4o\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"The answer is 4.\"},"
    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":30,"
    "\"completion_tokens\":5,\"total_tokens\":35}}";

static cJSON *parse_const(const char *s)
{
    cJSON *j = shim_json_parse(s, strlen(s));

    if (!j)
        abort(); /* a built-in that does not parse: the harness is broken */
    return j;
}

cJSON *fuzz_builtin_req(enum shim_api api)
{
    return parse_const(api == SHIM_API_CHAT ? builtin_chat_req : builtin_resp_req);
}

cJSON *fuzz_builtin_calls(enum shim_api api)
{
    return parse_const(api == SHIM_API_CHAT ? builtin_chat_calls : builtin_resp_calls);
}

cJSON *fuzz_builtin_final(enum shim_api api)
{
    return parse_const(api == SHIM_API_CHAT ? builtin_chat_final : builtin_resp_final);
}

/* ------------------------------------------------------------------ */
/* SSE                                                                 */

void fuzz_sink_init(struct fuzz_sink *s)
{
    memset(s, 0, sizeof(*s));
    shim_buf_init(&s->out, (size_t)64 << 20);
}

void fuzz_sink_free(struct fuzz_sink *s)
{
    shim_buf_free(&s->out);
}

int fuzz_sink_write(void *ctx, const char *p, size_t n)
{
    struct fuzz_sink *s = ctx;

    if (s->failed) {
        s->after_fail++;
        return -1;
    }
    if (++s->writes == s->fail_at) {
        s->failed = 1;
        return -1;
    }
    if (n == 0 || p[n - 1] != '\n' || (n > 1 && p[n - 2] != '\n'))
        fuzz_invalid("sse-write", "a write is not a whole event: %.*s",
                     (int)(n > 200 ? 200 : n), p);
    if (shim_buf_add(&s->out, p, n) < 0) { /* past 64 MiB: the program gives up */
        s->failed = 1;
        return -1;
    }
    return 0;
}

static long json_long(const cJSON *o, const char *k, long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    return cJSON_IsNumber(v) ? (long)v->valueint : dflt;
}

/* The state of one stream's check. */
struct sse_state {
    enum shim_api api;
    long seq, next_index, open_index;
    int nev, done, last_terminal, unparsed;
    char *resp_id; /* the stream's id (any length) */
};

/* Responses: event name, sequence, output indexes, one response id. */
static void check_responses_event(struct sse_state *st, const cJSON *j, const char *name,
                                  size_t name_len)
{
    const char *type = shim_json_str(j, "type");
    const cJSON *sn = cJSON_GetObjectItemCaseSensitive(j, "sequence_number");

    if (!name || !type || strlen(type) != name_len || memcmp(type, name, name_len))
        fuzz_invalid("sse-event-name", "event name and data type differ");
    if (!cJSON_IsNumber(sn) || sn->valuedouble != (double)st->seq)
        fuzz_invalid("sse-sequence", "sequence_number %g, expected %ld",
                     cJSON_IsNumber(sn) ? sn->valuedouble : -1.0, st->seq);
    st->seq++;
    if (st->last_terminal)
        fuzz_invalid("sse-order", "event after the terminal event");
    if (!strcmp(type, "response.output_item.added")) {
        long idx = json_long(j, "output_index", -2);
        if (st->open_index >= 0 || idx != st->next_index)
            fuzz_invalid("sse-output-index", "output_item.added index %ld, expected %ld%s", idx,
                         st->next_index, st->open_index >= 0 ? " (item still open)" : "");
        st->open_index = idx;
    } else if (!strcmp(type, "response.output_item.done")) {
        long idx = json_long(j, "output_index", -2);
        if (idx != st->open_index)
            fuzz_invalid("sse-output-index", "output_item.done index %ld, open %ld", idx,
                         st->open_index);
        st->open_index = -1;
        st->next_index = idx + 1;
    } else if (!strcmp(type, "response.created") || !strcmp(type, "response.completed") ||
               !strcmp(type, "response.incomplete") || !strcmp(type, "response.failed")) {
        const char *id = shim_json_str(cJSON_GetObjectItemCaseSensitive(j, "response"), "id");
        if (!strcmp(type, "response.created")) {
            if (st->nev != 1)
                fuzz_invalid("sse-order", "response.created is not the first event");
            free(st->resp_id);
            st->resp_id = strdup(id ? id : "");
        } else {
            st->last_terminal = 1;
            if (st->resp_id && (!id || strcmp(id, st->resp_id)))
                fuzz_invalid("sse-response-id", "final id differs from response.created's");
        }
    }
}

/* Chat: no event names, chat.completion.chunk objects of one id. */
static void check_chat_event(struct sse_state *st, const cJSON *j, const char *name)
{
    const char *id = shim_json_str(j, "id"), *obj;

    if (name)
        fuzz_invalid("sse-framing", "chat chunks carry no event name");
    if (cJSON_GetObjectItemCaseSensitive(j, "error"))
        return; /* the failure chunk */
    obj = shim_json_str(j, "object");
    if (!obj || strcmp(obj, "chat.completion.chunk"))
        fuzz_invalid("sse-chunk", "chunk object is not chat.completion.chunk");
    if (!st->resp_id)
        st->resp_id = strdup(id ? id : "");
    else if (!id || strcmp(id, st->resp_id))
        fuzz_invalid("sse-response-id", "chunk ids differ");
}

/* One event's data (a JSON object, or chat's [DONE]). */
static void check_event_data(struct sse_state *st, const char *name, size_t name_len,
                             const char *data, size_t data_len)
{
    const char *why;
    cJSON *j;

    if (st->api == SHIM_API_CHAT && data_len == 6 && !memcmp(data, "[DONE]", 6)) {
        st->done = 1;
        return;
    }
    if ((why = fuzz_json_strict(data, data_len, fuzz_utf8)) != NULL)
        fuzz_invalid("sse-json", "%s: %.*s", why, (int)(data_len > 300 ? 300 : data_len), data);
    j = shim_json_parse(data, data_len);
    if (!j) /* strict JSON nested deeper than cJSON parses (a request nested
             * to cJSON's limit, echoed in an event): framing only from here */
        st->unparsed = 1;
    if (st->unparsed) {
        cJSON_Delete(j);
        return;
    }
    if (!cJSON_IsObject(j))
        fuzz_invalid("sse-json", "event data is not an object");
    if (st->api == SHIM_API_RESPONSES)
        check_responses_event(st, j, name, name_len);
    else
        check_chat_event(st, j, name);
    cJSON_Delete(j);
}

void fuzz_check_sse(enum shim_api api, const struct fuzz_sink *sk, int started, int ended,
                    int failed_ev)
{
    const char *p = sk->out.data, *end = p ? p + sk->out.len : NULL; /* no NULL + 0 */
    struct sse_state st = {.api = api, .open_index = -1};

    if (sk->after_fail)
        fuzz_invalid("sse-after-failure", "%d writes after the write function failed",
                     sk->after_fail);
    while (p < end) {
        const char *name = NULL, *data, *nl, *evend = NULL;
        size_t name_len = 0, data_len;

        for (nl = p; nl + 1 < end; nl++)
            if (nl[0] == '\n' && nl[1] == '\n') {
                evend = nl;
                break;
            }
        if (!evend)
            fuzz_invalid("sse-framing", "event not terminated by a blank line");
        if (st.done)
            fuzz_invalid("sse-after-done", "bytes after data: [DONE]");
        if (!strncmp(p, "event: ", 7)) {
            name = p + 7;
            nl = memchr(name, '\n', (size_t)(evend - name));
            if (!nl)
                fuzz_invalid("sse-framing", "event line without a data line");
            name_len = (size_t)(nl - name);
            p = nl + 1;
        }
        if (strncmp(p, "data: ", 6))
            fuzz_invalid("sse-framing", "expected a data line: %.80s", p);
        data = p + 6;
        data_len = (size_t)(evend - data);
        if (memchr(data, '\n', data_len) || memchr(data, '\r', data_len))
            fuzz_invalid("sse-framing", "raw newline inside a data line");
        if (name && (memchr(name, '\r', name_len) || name_len == 0))
            fuzz_invalid("sse-framing", "bad event name");
        st.nev++;
        p = evend + 2;
        check_event_data(&st, name, name_len, data, data_len);
    }
    free(st.resp_id);
    if (!sk->failed && ended && started && !st.unparsed) {
        if (api == SHIM_API_RESPONSES && !st.last_terminal)
            fuzz_invalid("sse-order", "stream ended without a terminal event");
        if (api == SHIM_API_CHAT && !st.done && !failed_ev)
            fuzz_invalid("sse-order", "chat stream ended without [DONE]");
    }
}

/* ------------------------------------------------------------------ */
/* header blocks                                                       */

static int line_named(const char *p, size_t n, const char *name)
{
    size_t k = strlen(name);

    return n > k && !strncasecmp(p, name, k) && p[k] == ':';
}

/* Starts with a status line when it must, CRLF lines, one blank line at
 * the end, exactly our Content-Type and Content-Length. */
static void check_head(const struct shim_buf *b, const char *ctype, long long body_len,
                       int want_status)
{
    const char *p = b->data, *end;
    int nct = 0, ncl = 0, first = 1, status_line;

    if (!p)
        fuzz_invalid("head-end", "an empty header block");
    end = p + b->len;
    status_line = b->len >= 5 && !memcmp(p, "HTTP/", 5);
    if (want_status && !status_line)
        fuzz_invalid("head-status-line", "header block does not start with a status line: %.60s",
                     b->data);
    if (b->len < 4 || memcmp(end - 4, "\r\n\r\n", 4))
        fuzz_invalid("head-end", "header block does not end in CRLF CRLF");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;
        if (!nl || nl == p || nl[-1] != '\r')
            fuzz_invalid("head-line", "a line does not end in CRLF");
        n = (size_t)(nl - p - 1);
        if (n == 0 && nl + 1 != end)
            fuzz_invalid("head-blank", "blank line before the end of the header block");
        if (!first && n) {
            nct += line_named(p, n, "Content-Type");
            ncl += line_named(p, n, "Content-Length");
        }
        first = 0;
        p = nl + 1;
    }
    if (status_line && (nct != (ctype ? 1 : 0) || ncl != (body_len >= 0 ? 1 : 0)))
        fuzz_invalid("head-fields", "%d Content-Type and %d Content-Length lines", nct, ncl);
}

/* As deliver_head splits lines: at LF, trailing CRs and LFs trimmed. */
int fuzz_head_wants_status(const char *p, size_t n)
{
    const char *end = p + n;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p), t = len;
        while (t && (p[t - 1] == '\r' || p[t - 1] == '\n'))
            t--;
        if (t)
            return t >= 5 && !memcmp(p, "HTTP/", 5);
        p += len + (nl ? 1 : 0);
    }
    return 1;
}

void fuzz_deliver(const char *head, size_t n, long status, long version, const char *ctype,
                  long long len, int want_status)
{
    const char *saved = fuzz_target;
    struct shim_buf b;
    char *h = fuzz_exact(head, n);

    fuzz_target = "deliver_head";
    shim_buf_init(&b, (size_t)4 << 20);
    if (shim_sink_head(&b, status, version, n ? h : NULL, n, ctype, len) == 0) {
        check_head(&b, ctype, len, want_status);
        /* a content type with a line break (a tampered cassette) must not
         * put its lines into the block: the block is the one a harmless
         * type gives (the head's own lines may hold the same text, and
         * are the upstream's to pass on) */
        if (ctype && strpbrk(ctype, "\r\n")) {
            struct shim_buf safe;
            shim_buf_init(&safe, (size_t)4 << 20);
            if (shim_sink_head(&safe, status, version, n ? h : NULL, n,
                               "application/octet-stream", len) != 0 ||
                safe.len != b.len || memcmp(safe.data, b.data, b.len))
                fuzz_invalid("head-injection",
                             "content type with a line break copied into the block");
            shim_buf_free(&safe);
        }
    }
    shim_buf_free(&b);
    free(h);
    fuzz_target = saved;
}

/* ------------------------------------------------------------------ */
/* the faked sandbox and the conversation                              */

void fuzz_exec_begin(struct shim_call *c, int k)
{
    const char *why;

    c->executed = 1;
    snprintf(c->ci_id, sizeof(c->ci_id), "ci_%048d", k);
    snprintf(c->container_id, sizeof(c->container_id), "cntr_%048d", 7);
    c->code = shim_conv_parse_code(c->arguments, &why);
    if (!c->code) {
        c->output = strdup(why ? why : "?");
        c->status = "failed";
    }
}

/* Output text like test_responses.c's fake_exec: UTF-8, control bytes,
 * long text, the model's own bytes, images. */
void fuzz_exec_end(const struct fuzz_input *in, struct shim_call *c, int k)
{
    static const char *const outs[] = {"4\n", "", "h\xc3\xa9llo \xe2\x9c\x93\n",
                                       "Traceback (most recent call last):\n  x\nNameError\n",
                                       "ctl\x01\x1f\x7f\ttab"};
    static const char *const st[] = {"completed", "failed", "incomplete"};
    static const char png[] = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
                              "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    unsigned v = fuzz_pick(in, 100 + k, 64), i;

    if (!c->code)
        return;
    if (v % 7 == 0) {
        size_t n = 1000 + v * 100;
        c->output = fuzz_xmalloc(n + 1);
        memset(c->output, 'x', n);
        c->output[n] = '\0';
    } else if (v % 5 == 0) {
        c->output = strdup(c->code);
    } else {
        c->output = strdup(outs[v % 5]);
    }
    c->status = st[v % 3];
    c->res.status = SHIM_EXEC_OK;
    c->res.logs = strdup(c->output);
    c->res.logs_len = strlen(c->output);
    if (v % 4 == 1) {
        c->res.nimages = 1 + v % 3;
        c->res.images = calloc(c->res.nimages, sizeof(*c->res.images));
        for (i = 0; i < c->res.nimages; i++) {
            c->res.images[i].mime = strdup("image/png");
            c->res.images[i].base64 = strdup(png);
        }
    }
}

void fuzz_free_calls(struct shim_call *calls, size_t n)
{
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
}

/* One conversation: loop.c's struct run with the sandbox and the upstream
 * faked; what comes next is step.h's, as in loop.c. */
struct convo {
    const struct fuzz_input *in;
    enum shim_api api;
    const struct shim_api_ops *ops;
    const cJSON *req;
    cJSON *up;
    struct shim_conv cv;
    struct shim_step step;
    struct shim_stream st;
    struct fuzz_sink sk;
    int salt, streaming, stream_wanted, ended, failed_ev, started;
};

/* The calls the step picked, on the faked sandbox, while the program
 * reads (as loop.c's run_calls). */
static void run_calls(struct convo *c, struct shim_turn *t)
{
    size_t i;

    for (i = 0; i < t->nrun && !c->sk.failed; i++) {
        shim_step_ran(&c->step);
        fuzz_exec_begin(&t->calls[i], (int)i);
        if (c->streaming)
            shim_stream_exec_begin(&c->st, &t->calls[i]);
        fuzz_exec_end(c->in, &t->calls[i], (int)i);
        if (c->streaming)
            shim_stream_exec_end(&c->st, &t->calls[i]);
    }
}

static void finish(struct convo *c, const cJSON *reply, struct shim_turn *t, int capped)
{
    cJSON *answer = c->ops->finish(c->req, reply, t->calls, t->n, &c->cv, capped);

    fuzz_check_json("finish", answer);
    if (c->streaming) {
        if (!answer || fuzz_pick(c->in, c->salt + 6, 8) == 0) {
            shim_stream_fail(&c->st, "server_error", "codeshim: out of memory");
            c->failed_ev = 1;
        } else {
            shim_stream_finish(&c->st, answer);
        }
        c->ended = 1;
    }
    cJSON_Delete(answer);
}

/* The step's invariants: the calls it runs are within the cap, the rest
 * skipped with a note; then what it said to do next. */
static void check_turn(const struct convo *c, const struct shim_turn *t)
{
    size_t i;

    if (t->nrun > t->n || (t->nrun && !shim_step_room(&c->step)) ||
        c->step.executed + (int)t->nrun > c->cv.max_exec)
        fuzz_invalid("step", "%zu of %zu calls to run, %d of %d run so far", t->nrun, t->n,
                     c->step.executed, c->cv.max_exec);
    for (i = 0; i < t->n; i++) {
        if (!t->calls[i].call_id)
            fuzz_invalid("scan", "call without call_id");
        if (t->calls[i].skipped != (i >= t->nrun))
            fuzz_invalid("step", "call %zu of %zu skipped %d, %zu to run", i, t->n,
                         t->calls[i].skipped, t->nrun);
    }
}

/* One upstream reply; 1 when the conversation is over. */
static int step(struct convo *c, const cJSON *reply, int last)
{
    struct shim_turn t;
    enum shim_step_next next;
    cJSON *off;

    if (shim_step_read(&c->step, reply, &t) < 0) {
        if (t.calls || t.n)
            fuzz_invalid("step", "calls returned with a failure");
        if (c->streaming) {
            shim_stream_fail(&c->st, "upstream_error",
                             "the model server's answer could not be read");
            c->ended = c->failed_ev = 1;
        }
        return 1;
    }
    check_turn(c, &t);
    if (c->stream_wanted && !c->streaming) {
        c->streaming = c->started = 1;
        shim_stream_start(&c->st, c->req, reply);
    }
    if (c->streaming)
        shim_stream_turn(&c->st, reply);
    run_calls(c, &t);
    next = shim_step_next(&c->step, c->up, reply, &t, c->sk.failed ? SHIM_STEP_STOP : 0);
    if (next == SHIM_STEP_AGAIN || next == SHIM_STEP_FINAL)
        fuzz_check_json("advance", c->up);
    if (next == SHIM_STEP_STOPPED) {
        shim_turn_free(&t);
        return 1;
    }
    if (shim_step_answers(next) || last) { /* out of replies: the last one answers */
        if (next == SHIM_STEP_HANDBACK && !t.foreign)
            fuzz_invalid("step", "a program tool handed back without one");
        finish(c, reply, &t, t.capped || c->step.capped);
        shim_turn_free(&t);
        return 1;
    }
    if (next == SHIM_STEP_AGAIN) {
        off = shim_offline_reply(c->api, c->up); /* it answers the follow-up */
        fuzz_check_json("offline-followup", off);
        cJSON_Delete(off);
    }
    shim_turn_free(&t);
    return 0;
}

void fuzz_conversation(const struct fuzz_input *in, enum shim_api api, const cJSON *req,
                       const cJSON *const *replies, int nreplies, int salt, int force_stream)
{
    const char *saved = fuzz_target;
    struct convo c;
    int k;

    memset(&c, 0, sizeof(c));
    c.in = in;
    c.api = api;
    c.ops = api == SHIM_API_CHAT ? &shim_chat_ops : &shim_responses_ops;
    c.req = req;
    c.salt = salt;
    fuzz_target = api == SHIM_API_CHAT ? "chat" : "responses";
    c.cv.max_exec = (int)(1 + fuzz_pick(in, salt + 1, 4));
    if (fuzz_pick(in, salt + 2, 4) == 0)
        c.cv.max_exec = 20;
    c.up = c.ops->prepare(req, &c.cv);
    fuzz_check_json("prepare", c.up);
    shim_step_init(&c.step, c.ops, &c.cv);
    if (!c.up || !shim_classify_body(req)) {
        /* the loop never sees such a request: prepare only */
        cJSON_Delete(c.up);
        shim_conv_free(&c.cv);
        fuzz_target = saved;
        return;
    }
    fuzz_sink_init(&c.sk);
    c.stream_wanted = force_stream || c.cv.stream || fuzz_pick(in, salt + 3, 3) == 0;
    c.sk.fail_at = fuzz_pick(in, salt + 4, 6) == 0 ? (int)(1 + fuzz_pick(in, salt + 5, 40)) : 0;
    shim_stream_init(&c.st, api, &c.cv, fuzz_sink_write, &c.sk);
    for (k = 0; k < nreplies; k++)
        if (step(&c, replies[k], k + 1 == nreplies))
            break;
    if (c.streaming)
        fuzz_check_sse(api, &c.sk, c.started, c.ended, c.failed_ev);
    shim_stream_free(&c.st);
    fuzz_sink_free(&c.sk);
    cJSON_Delete(c.up);
    shim_conv_free(&c.cv);
    fuzz_target = saved;
}

/* ------------------------------------------------------------------ */
/* json.c helpers                                                      */

/* shim_json_int must clamp what no long long holds (1e300, inf). */
static void json_walk(const cJSON *node, int depth)
{
    const cJSON *it;

    if (depth > 1100)
        return;
    cJSON_ArrayForEach(it, node)
    {
        if (it->string && cJSON_IsObject(node)) {
            shim_json_str(node, it->string);
            shim_json_int(node, it->string);
        }
        if (it->child)
            json_walk(it, depth + 1);
    }
}

/* Values in a tree, and its deepest level of arrays and objects. */
static void tree_size(const cJSON *node, int depth, size_t *values, int *deepest)
{
    const cJSON *it;

    ++*values;
    if (!cJSON_IsArray(node) && !cJSON_IsObject(node))
        return;
    if (depth + 1 > *deepest)
        *deepest = depth + 1;
    for (it = node->child; it; it = it->next)
        tree_size(it, depth + 1, values, deepest);
}

/* The budget counted on the text bounds the tree cJSON builds from it (a
 * small one picked by the hash, so it is often crossed), and the strict
 * reading refuses exactly the texts past the full budget. */
static void json_budget(const struct fuzz_input *in)
{
    const char *p = (const char *)in->p;
    size_t max_values = 1 + in->h % 300, values = 0;
    int max_depth = (int)((in->h >> 20) % 12), deepest = 0, rc, fits;
    struct shim_json_flaw why;
    cJSON *j = shim_json_parse_within(p, in->n, max_values, max_depth);

    if (j) {
        tree_size(j, 0, &values, &deepest);
        if (values > max_values || deepest > max_depth)
            fuzz_invalid("json-budget", "a tree of %zu values %d deep within %zu and %d",
                         values, deepest, max_values, max_depth);
        cJSON_Delete(j);
    }
    j = NULL;
    rc = shim_json_read(p, in->n, &j, &why);
    cJSON_Delete(j);
    fits = shim_json_fits(p, in->n, SHIM_JSON_MAX_VALUES, SHIM_JSON_MAX_DEPTH);
    if ((rc == -E2BIG) == fits || (rc == -E2BIG && !why.big))
        fuzz_invalid("json-budget", "read %d, fits %d", rc, fits);
}

void fuzz_json_helpers(const struct fuzz_input *in)
{
    const char *saved = fuzz_target;
    int i;

    fuzz_target = "json";
    json_budget(in);
    for (i = 0; i < in->ndocs; i++) {
        cJSON *dup = cJSON_Duplicate(in->doc[i], 1);
        json_walk(in->doc[i], 0);
        /* set on an object, and on anything else (takes the value) */
        shim_json_set(dup, dup && dup->child && dup->child->string ? dup->child->string : "k",
                      cJSON_CreateString("replaced"));
        shim_json_set(dup, "new_key", cJSON_CreateNumber(1));
        fuzz_check_json("json-set", dup);
        cJSON_Delete(dup);
    }
    fuzz_target = saved;
}
