/* trace_load.c - reading a trace file into a struct cli_trace
 * (trace_model.h): the line reader, one handler per event type, and the
 * table that groups events by their "req" id.
 *
 * Every string kept from the file is clipped, so memory grows with the
 * number of events, never with the size of the code or output they carry.
 * A bad line is counted and skipped, never fatal. */
#include "trace_model.h"

#include "base/json.h"

#include <errno.h>
#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Requests and executions are kept for every event that names them, so
 * these lists are bounded by the file, like the original arrays; the cap
 * only keeps the size arithmetic far from overflowing. */
#define LIST_CAP (SIZE_MAX / 4)
#define NOTES_CAP (CLI_TRACE_NOTES_MAX * sizeof(char *))
/* Bytes read from the file between two appends to the line buffer. */
#define READ_CHUNK 4096

/* ---- small helpers ---- */

/* Writes at most max bytes of s to dst (which has room for max + 4),
 * stopping at the first line end when first_line is set; control
 * characters become spaces so one record stays one line of output, and a
 * cut never splits a UTF-8 sequence. A cut ends in "...". */
static void clip_into(char *dst, const char *s, size_t max, int first_line)
{
    size_t n = 0, keep;
    int cut;

    while (s[n] && n < max && !(first_line && (s[n] == '\n' || s[n] == '\r')))
        n++;
    cut = s[n] && !(first_line && (s[n] == '\n' || s[n] == '\r'));
    keep = n;
    if (cut)
        while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
            keep--;
    memcpy(dst, s, keep);
    for (n = 0; n < keep; n++) {
        unsigned char c = (unsigned char)dst[n];

        if (c < 0x20 || c == 0x7f)
            dst[n] = ' ';
        /* U+0080..U+009F (C1 controls, e.g. CSI) are escapes to a terminal
         * too, however few programs print them. */
        if (c == 0xC2 && n + 1 < keep && (unsigned char)dst[n + 1] >= 0x80 &&
            (unsigned char)dst[n + 1] <= 0x9F) {
            dst[n] = dst[n + 1] = ' ';
            n++;
        }
    }
    strcpy(dst + keep, cut ? "..." : "");
}

/* A malloc'ed clip_into() of s (max at most CLI_TRACE_TEXT_MAX), or NULL. */
static char *clip(const char *s, size_t max, int first_line)
{
    char out[CLI_TRACE_TEXT_MAX + 4];

    clip_into(out, s, max, first_line);
    return strdup(out);
}

static int get_num(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/* Integers (truncated) within +-9e15; a count or status beyond that is
 * ignored like an absent one. */
static int get_int(const cJSON *o, const char *key, long long *out)
{
    long long v;

    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, key)))
        return 0;
    v = shim_json_int(o, key);
    if (v < -9000000000000000LL || v > 9000000000000000LL)
        return 0;
    *out = v;
    return 1;
}

/* Replaces *slot with a clipped copy of s (when s is present). */
static int set_str(char **slot, const char *s, size_t max)
{
    char *c;

    if (!s)
        return 0;
    c = clip(s, max, 0);
    if (!c)
        return -ENOMEM;
    free(*slot);
    *slot = c;
    return 0;
}

/* Appends a clipped copy of text to a list of notes; past
 * CLI_TRACE_NOTES_MAX it is only counted. */
static int add_note(struct shim_buf *notes, size_t *dropped, const char *text)
{
    char *c;

    if (cli_trace_nstrs(notes) >= CLI_TRACE_NOTES_MAX) {
        (*dropped)++;
        return 0;
    }
    c = clip(text, CLI_TRACE_TEXT_MAX, 0);
    if (!c || shim_buf_add(notes, &c, sizeof(c)) < 0) {
        free(c);
        return -ENOMEM;
    }
    return 0;
}

static void free_strs(struct shim_buf *list)
{
    size_t i;

    for (i = 0; i < cli_trace_nstrs(list); i++)
        free(cli_trace_strs(list)[i]);
    shim_buf_free(list);
}

static void free_exec(struct cli_trace_exec *x)
{
    free(x->call);
    free(x->status);
    free(x->code);
}

static void free_req(void *p)
{
    struct cli_trace_req *r = p;
    size_t i;

    for (i = 0; i < cli_trace_nexecs(r); i++)
        free_exec((struct cli_trace_exec *)(void *)r->execs.data + i);
    shim_buf_free(&r->execs);
    free_strs(&r->notes);
    free(r->id);
    free(r->api);
    free(r->model);
    free(r->url);
    free(r);
}

/* ---- the request table ---- */

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct cli_trace_req *)a)->id, ((const struct cli_trace_req *)b)->id);
}

/* Finds or adds the request with this id. Ids are compared as kept
 * (clipped), so the events of an id longer than CLI_TRACE_ID_MAX still
 * make one request. Every request is both in the tree and in the list. */
static int lookup_req(struct cli_trace *t, const char *id, double ts,
                      struct cli_trace_req **out)
{
    char key_id[CLI_TRACE_ID_MAX + 4];
    struct cli_trace_req key, *r;
    void *found;

    clip_into(key_id, id, CLI_TRACE_ID_MAX, 0);
    key.id = key_id;
    found = tfind(&key, &t->index, by_id);
    if (found) {
        *out = *(struct cli_trace_req **)found;
        return 0;
    }
    r = calloc(1, sizeof(*r));
    if (!r || !(r->id = strdup(key_id))) {
        free(r);
        return -ENOMEM;
    }
    r->order = cli_trace_nreqs(t);
    r->first_ts = r->last_ts = ts;
    r->stream = -1;
    shim_buf_init(&r->execs, LIST_CAP);
    shim_buf_init(&r->notes, NOTES_CAP);
    if (!tsearch(r, &t->index, by_id)) {
        free_req(r);
        return -ENOMEM;
    }
    if (shim_buf_add(&t->reqs, &r, sizeof(r)) < 0) {
        tdelete(r, &t->index, by_id);
        free_req(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

/* ---- one event each ---- */

static int on_request(struct cli_trace_req *r, const cJSON *e)
{
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(e, "stream");

    if (cJSON_IsBool(stream))
        r->stream = cJSON_IsTrue(stream);
    if (set_str(&r->api, shim_json_str(e, "api"), CLI_TRACE_TEXT_MAX) < 0 ||
        set_str(&r->model, shim_json_str(e, "model"), CLI_TRACE_TEXT_MAX) < 0 ||
        set_str(&r->url, shim_json_str(e, "url"), CLI_TRACE_TEXT_MAX) < 0)
        return -ENOMEM;
    return 0;
}

static int on_upstream(struct cli_trace_req *r, const cJSON *e)
{
    long long n, turn = 0, status = 0, code = 0;
    double s;
    const char *err = shim_json_str(e, "error"), *src = shim_json_str(e, "source");
    char note[CLI_TRACE_TEXT_MAX + 96];

    r->upstream_calls++;
    if (get_num(e, "seconds", &s))
        r->model_s += s;
    if (get_int(e, "bytes", &n))
        cli_trace_add_sat(&r->upstream_bytes, n);
    if (get_int(e, "input_tokens", &n)) {
        cli_trace_add_sat(&r->tok_in, n);
        r->has_tok_in = 1;
    }
    if (get_int(e, "output_tokens", &n)) {
        cli_trace_add_sat(&r->tok_out, n);
        r->has_tok_out = 1;
    }
    get_int(e, "turn", &turn);
    if (err || !get_int(e, "status", &status)) {
        get_int(e, "curl_code", &code);
        snprintf(note, sizeof(note), "upstream turn %lld failed: curl code %lld: %.*s",
                 turn, code, (int)CLI_TRACE_TEXT_MAX, err ? err : "(no message)");
    } else if (status >= 400) {
        snprintf(note, sizeof(note), "upstream turn %lld answered status %lld", turn,
                 status);
    } else if (src && strcmp(src, "network")) { /* a cassette, a replay, offline */
        snprintf(note, sizeof(note), "upstream turn %lld answered by %.*s", turn,
                 (int)CLI_TRACE_TEXT_MAX, src);
    } else {
        return 0;
    }
    return add_note(&r->notes, &r->notes_dropped, note);
}

/* An execution on e2b: its create (if it waited for one) and call times. */
static void on_e2b(struct cli_trace_req *r, const cJSON *e)
{
    double create = 0, call = 0;

    if (get_num(e, "e2b_create_seconds", &create) && create > 0) {
        cli_trace_add_sat(&r->e2b_creates, 1);
        r->e2b_create_s += create;
    }
    if (get_num(e, "e2b_execute_seconds", &call)) {
        cli_trace_add_sat(&r->e2b_execs, 1);
        r->e2b_exec_s += call;
    }
}

static int on_exec(struct cli_trace_req *r, const cJSON *e)
{
    struct cli_trace_exec x = {0};
    const char *call = shim_json_str(e, "call");
    const char *status = shim_json_str(e, "status"), *code = shim_json_str(e, "code");

    get_num(e, "seconds", &x.seconds);
    x.call = clip(call ? call : "", CLI_TRACE_ID_MAX, 0);
    x.status = clip(status ? status : "?", CLI_TRACE_ID_MAX, 0);
    /* The first line is what identifies the code; blank leading lines
     * would show nothing, so skip them. */
    if (code)
        code += strspn(code, " \t\r\n");
    x.code = clip(code ? code : "", CLI_TRACE_CODE_MAX, 1);
    if (!x.call || !x.status || !x.code || shim_buf_add(&r->execs, &x, sizeof(x)) < 0) {
        free_exec(&x);
        return -ENOMEM;
    }
    r->sandbox_s += x.seconds;
    on_e2b(r, e);
    if (strcmp(x.status, "completed"))
        r->execs_failed++;
    return 0;
}

static void on_answer(struct cli_trace_req *r, const cJSON *e)
{
    r->answered = 1;
    r->has_status = get_int(e, "status", &r->status);
    r->has_curl = get_int(e, "curl_code", &r->curl_code);
    r->has_total = get_num(e, "seconds", &r->answer_s);
    get_int(e, "executions", &r->answer_execs);
    get_int(e, "upstream_calls", &r->answer_upstream);
}

static int on_error(struct cli_trace_req *r, const cJSON *e)
{
    const char *msg = shim_json_str(e, "message");
    char note[CLI_TRACE_TEXT_MAX + 16];

    snprintf(note, sizeof(note), "error: %.*s", (int)CLI_TRACE_TEXT_MAX,
             msg ? msg : "(no message)");
    return add_note(&r->notes, &r->notes_dropped, note);
}

/* 1 when the event was used, 0 when the line is malformed, -ENOMEM. */
static int add_event(struct cli_trace *t, const cJSON *e)
{
    const char *event, *id;
    long long pid;
    double ts;
    struct cli_trace_req *r;

    if (!cJSON_IsObject(e))
        return 0;
    event = shim_json_str(e, "event");
    id = shim_json_str(e, "req");
    if (!event || !get_num(e, "ts", &ts))
        return 0;
    if (!id || !*id) {
        /* An error the library hit outside any request still matters. */
        const char *msg = shim_json_str(e, "message");

        if (strcmp(event, "error"))
            return 0;
        return add_note(&t->orphans, &t->orphans_dropped, msg ? msg : "(no message)") < 0
                   ? -ENOMEM
                   : 1;
    }
    if (lookup_req(t, id, ts, &r) < 0)
        return -ENOMEM;
    if (ts < r->first_ts)
        r->first_ts = ts;
    if (ts > r->last_ts)
        r->last_ts = ts;
    if (get_int(e, "pid", &pid))
        r->pid = pid;
    if (!strcmp(event, "request"))
        return on_request(r, e) < 0 ? -ENOMEM : 1;
    if (!strcmp(event, "upstream"))
        return on_upstream(r, e) < 0 ? -ENOMEM : 1;
    if (!strcmp(event, "exec"))
        return on_exec(r, e) < 0 ? -ENOMEM : 1;
    if (!strcmp(event, "answer")) {
        on_answer(r, e);
        return 1;
    }
    if (!strcmp(event, "error"))
        return on_error(r, e) < 0 ? -ENOMEM : 1;
    return 1;    /* an event type from a newer library: ignored, not bad */
}

/* ---- reading ---- */

/* Appends n bytes to the line unless it is already over the cap (state
 * -E2BIG). Returns the new state: 0, -E2BIG or -ENOMEM. */
static int line_append(struct shim_buf *line, const char *p, size_t n, int state)
{
    if (state < 0 || !n)
        return state;
    return shim_buf_add(line, p, n);
}

/* Reads one line (without its '\n') into line, which is capped at
 * CLI_TRACE_MAX_LINE. 1 = a line, 0 = end of file, -E2BIG = a longer line
 * (consumed and dropped), -ENOMEM, -EIO. */
static int read_line(FILE *f, struct shim_buf *line)
{
    char chunk[READ_CHUNK];
    size_t n = 0;
    int c, any = 0, state = 0;

    shim_buf_reset(line);
    errno = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        chunk[n++] = (char)c;
        if (n == sizeof(chunk)) {
            state = line_append(line, chunk, n, state);
            n = 0;
            if (state == -ENOMEM)
                return state;
        }
    }
    state = line_append(line, chunk, n, state);
    if (state == -ENOMEM)
        return state;
    if (ferror(f))
        return errno ? -errno : -EIO;
    if (!any)
        return 0;
    return state == -E2BIG ? -E2BIG : 1;
}

static int blank(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

/* 1 used, 0 malformed, -ENOMEM. */
static int add_line(struct cli_trace *t, const char *s, size_t n)
{
    const char *end = NULL;
    /* Not shim_json_parse: the end of the object is needed. */
    cJSON *e = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    int rc;

    /* Anything after the object other than whitespace (a second object
     * glued on by a torn write, a NUL) makes the whole line suspect. */
    if (!e || !end || (size_t)(end - s) > n || !blank(end, n - (size_t)(end - s))) {
        cJSON_Delete(e);
        return 0;
    }
    rc = add_event(t, e);
    cJSON_Delete(e);
    return rc;
}

int cli_trace_load(FILE *f, struct cli_trace **out)
{
    struct cli_trace *t = calloc(1, sizeof(*t));
    struct shim_buf line;
    int rc;

    if (!t)
        return -ENOMEM;
    shim_buf_init(&t->reqs, LIST_CAP);
    shim_buf_init(&t->orphans, NOTES_CAP);
    shim_buf_init(&line, CLI_TRACE_MAX_LINE);
    while ((rc = read_line(f, &line)) != 0) {
        if (rc < 0 && rc != -E2BIG)
            break;
        t->lines++;
        if (rc == -E2BIG) {
            t->malformed++;
            continue;
        }
        if (blank(line.data, line.len))
            continue;
        rc = add_line(t, line.data, line.len);
        if (rc < 0)
            break;
        if (rc == 0)
            t->malformed++;
    }
    shim_buf_free(&line);
    if (rc < 0) {
        cli_trace_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void cli_trace_free(struct cli_trace *t)
{
    if (!t)
        return;
    /* The tree holds every request once: freeing through it frees all. */
    tdestroy(t->index, free_req);
    shim_buf_free(&t->reqs);
    free_strs(&t->orphans);
    free(t);
}
