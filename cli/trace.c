/* trace.c - `codeshim trace FILE [--json]`: aggregation of trace events
 * into per-request summaries, and their text and JSON forms; see trace.h.
 *
 * Events are grouped by their "req" id in a small hash table; requests are
 * printed in order of their first timestamp. Every string kept from the
 * file is clipped, so memory grows with the number of events, never with
 * the size of the code or output they carry. */
#include "trace.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ID_MAX 128       /* bytes kept of a request or call id */
#define TEXT_MAX 512     /* bytes kept of a URL, model or message */
#define CODE_MAX 72      /* bytes shown of the first line of code */
#define NOTES_MAX 64     /* error notes kept per request */

struct exec_rec {
    char *call;
    char *status;
    char *code;          /* first line of the code, clipped */
    double seconds;
};

struct req {
    char *id;
    size_t order;        /* first appearance in the file: tie-breaker */
    double first_ts, last_ts;
    long long pid;
    char *api, *model, *url;
    int stream;          /* -1 unknown, 0, 1 */
    long long upstream_calls, upstream_bytes;
    double model_s, sandbox_s;
    long long tok_in, tok_out;
    int has_tok_in, has_tok_out;
    struct exec_rec *execs;
    size_t nexec, cap_exec;
    long long execs_failed;
    int answered;
    int has_status, has_curl, has_total;
    long long status, curl_code;
    long long answer_execs, answer_upstream;
    double answer_s;
    char **notes;        /* upstream failures and error events, as text */
    size_t nnotes, notes_dropped;
};

struct cli_trace {
    struct req *reqs;
    size_t n, cap;
    size_t *slots;       /* hash of req id -> index + 1; 0 = empty */
    size_t nslots;
    char **orphans;      /* error events with no request id */
    size_t norphans, orphans_dropped;
    size_t lines, malformed;
};

/* ---- small helpers ---- */

/* Copies at most max bytes of s, stopping at the first line end when
 * first_line is set; control characters become spaces so one record stays
 * one line of output, and a cut never splits a UTF-8 sequence. */
static char *clip(const char *s, size_t max, int first_line)
{
    size_t n = 0, keep;
    int cut;
    char *out;

    while (s[n] && n < max && !(first_line && (s[n] == '\n' || s[n] == '\r')))
        n++;
    cut = s[n] && !(first_line && (s[n] == '\n' || s[n] == '\r'));
    keep = n;
    if (cut)
        while (keep > 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
            keep--;
    out = malloc(keep + 4);
    if (!out)
        return NULL;
    memcpy(out, s, keep);
    for (n = 0; n < keep; n++) {
        unsigned char c = (unsigned char)out[n];

        if (c < 0x20 || c == 0x7f)
            out[n] = ' ';
        /* U+0080..U+009F (C1 controls, e.g. CSI) are escapes to a terminal
         * too, however few programs print them. */
        if (c == 0xC2 && n + 1 < keep && (unsigned char)out[n + 1] >= 0x80 &&
            (unsigned char)out[n + 1] <= 0x9F) {
            out[n] = out[n + 1] = ' ';
            n++;
        }
    }
    strcpy(out + keep, cut ? "..." : "");
    return out;
}

static int get_num(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsNumber(v))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/* Whole numbers only; a count or status that is not one is ignored. */
static int get_int(const cJSON *o, const char *key, long long *out)
{
    double d;

    if (!get_num(o, key, &d) || d != d || d < -9e15 || d > 9e15)
        return 0;
    *out = (long long)d;
    return 1;
}

/* Sums saturate: a hostile file of huge counts must not overflow. */
static void add_sat(long long *acc, long long v)
{
    if (v > 0 && *acc > LLONG_MAX - v)
        *acc = LLONG_MAX;
    else if (v < 0 && *acc < LLONG_MIN - v)
        *acc = LLONG_MIN;
    else
        *acc += v;
}

static const char *get_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
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

static int add_note(char ***notes, size_t *n, size_t *dropped, const char *text)
{
    char **grown;
    char *c;

    if (*n >= NOTES_MAX) {
        (*dropped)++;
        return 0;
    }
    c = clip(text, TEXT_MAX, 0);
    grown = c ? realloc(*notes, (*n + 1) * sizeof(**notes)) : NULL;
    if (!grown) {
        free(c);
        return -ENOMEM;
    }
    grown[(*n)++] = c;
    *notes = grown;
    return 0;
}

/* ---- the request table ---- */

static size_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ULL;     /* FNV-1a */

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static size_t *find_slot(struct cli_trace *t, const char *id)
{
    size_t i = hash_id(id) & (t->nslots - 1);

    while (t->slots[i] && strcmp(t->reqs[t->slots[i] - 1].id, id))
        i = (i + 1) & (t->nslots - 1);
    return &t->slots[i];
}

/* Keeps the table at most half full so probes stay short. */
static int grow_slots(struct cli_trace *t)
{
    size_t nslots = t->nslots ? t->nslots * 2 : 64, i;
    size_t *old = t->slots, oldn = t->nslots;

    if (t->nslots && t->n * 2 < t->nslots)
        return 0;
    t->slots = calloc(nslots, sizeof(*t->slots));
    if (!t->slots) {
        t->slots = old;
        return -ENOMEM;
    }
    t->nslots = nslots;
    for (i = 0; i < oldn; i++)
        if (old[i])
            *find_slot(t, t->reqs[old[i] - 1].id) = old[i];
    free(old);
    return 0;
}

static int lookup_req(struct cli_trace *t, const char *id, double ts, struct req **out)
{
    size_t *slot;
    struct req *r;

    if (grow_slots(t) < 0)
        return -ENOMEM;
    slot = find_slot(t, id);
    if (*slot) {
        *out = &t->reqs[*slot - 1];
        return 0;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct req *grown = realloc(t->reqs, cap * sizeof(*grown));

        if (!grown)
            return -ENOMEM;
        t->reqs = grown;
        t->cap = cap;
    }
    r = &t->reqs[t->n];
    memset(r, 0, sizeof(*r));
    r->id = clip(id, ID_MAX, 0);
    if (!r->id)
        return -ENOMEM;
    r->order = t->n;
    r->first_ts = r->last_ts = ts;
    r->stream = -1;
    *slot = ++t->n;
    *out = r;
    return 0;
}

/* ---- one event each ---- */

static int on_request(struct req *r, const cJSON *e)
{
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(e, "stream");

    if (cJSON_IsBool(stream))
        r->stream = cJSON_IsTrue(stream);
    if (set_str(&r->api, get_str(e, "api"), TEXT_MAX) < 0 ||
        set_str(&r->model, get_str(e, "model"), TEXT_MAX) < 0 ||
        set_str(&r->url, get_str(e, "url"), TEXT_MAX) < 0)
        return -ENOMEM;
    return 0;
}

static int on_upstream(struct req *r, const cJSON *e)
{
    long long n, turn = 0, status = 0, code = 0;
    double s;
    const char *err = get_str(e, "error");
    char note[TEXT_MAX + 96];

    r->upstream_calls++;
    if (get_num(e, "seconds", &s))
        r->model_s += s;
    if (get_int(e, "bytes", &n))
        add_sat(&r->upstream_bytes, n);
    if (get_int(e, "input_tokens", &n)) {
        add_sat(&r->tok_in, n);
        r->has_tok_in = 1;
    }
    if (get_int(e, "output_tokens", &n)) {
        add_sat(&r->tok_out, n);
        r->has_tok_out = 1;
    }
    get_int(e, "turn", &turn);
    if (err || !get_int(e, "status", &status)) {
        get_int(e, "curl_code", &code);
        snprintf(note, sizeof(note), "upstream turn %lld failed: curl code %lld: %.*s",
                 turn, code, TEXT_MAX, err ? err : "(no message)");
    } else if (status >= 400) {
        snprintf(note, sizeof(note), "upstream turn %lld answered status %lld", turn,
                 status);
    } else {
        return 0;
    }
    return add_note(&r->notes, &r->nnotes, &r->notes_dropped, note);
}

static int on_exec(struct req *r, const cJSON *e)
{
    struct exec_rec *x;
    const char *status = get_str(e, "status"), *code = get_str(e, "code");

    if (r->nexec == r->cap_exec) {
        size_t cap = r->cap_exec ? r->cap_exec * 2 : 4;
        struct exec_rec *grown = realloc(r->execs, cap * sizeof(*grown));

        if (!grown)
            return -ENOMEM;
        r->execs = grown;
        r->cap_exec = cap;
    }
    x = &r->execs[r->nexec];
    memset(x, 0, sizeof(*x));
    get_num(e, "seconds", &x->seconds);
    x->call = clip(get_str(e, "call") ? get_str(e, "call") : "", ID_MAX, 0);
    x->status = clip(status ? status : "?", ID_MAX, 0);
    /* The first line is what identifies the code; blank leading lines
     * would show nothing, so skip them. */
    if (code)
        code += strspn(code, " \t\r\n");
    x->code = clip(code ? code : "", CODE_MAX, 1);
    if (!x->call || !x->status || !x->code) {
        free(x->call);
        free(x->status);
        free(x->code);
        return -ENOMEM;
    }
    r->nexec++;
    r->sandbox_s += x->seconds;
    if (strcmp(x->status, "completed"))
        r->execs_failed++;
    return 0;
}

static void on_answer(struct req *r, const cJSON *e)
{
    r->answered = 1;
    r->has_status = get_int(e, "status", &r->status);
    r->has_curl = get_int(e, "curl_code", &r->curl_code);
    r->has_total = get_num(e, "seconds", &r->answer_s);
    get_int(e, "executions", &r->answer_execs);
    get_int(e, "upstream_calls", &r->answer_upstream);
}

static int on_error(struct req *r, const cJSON *e)
{
    const char *msg = get_str(e, "message");
    char note[TEXT_MAX + 16];

    snprintf(note, sizeof(note), "error: %.*s", TEXT_MAX, msg ? msg : "(no message)");
    return add_note(&r->notes, &r->nnotes, &r->notes_dropped, note);
}

/* 1 when the event was used, 0 when the line is malformed, -ENOMEM. */
static int add_event(struct cli_trace *t, const cJSON *e)
{
    const char *event, *id;
    long long pid;
    double ts;
    struct req *r;

    if (!cJSON_IsObject(e))
        return 0;
    event = get_str(e, "event");
    id = get_str(e, "req");
    if (!event || !get_num(e, "ts", &ts))
        return 0;
    if (!id || !*id) {
        /* An error the library hit outside any request still matters. */
        const char *msg = get_str(e, "message");

        if (strcmp(event, "error"))
            return 0;
        return add_note(&t->orphans, &t->norphans, &t->orphans_dropped,
                        msg ? msg : "(no message)") < 0 ? -ENOMEM : 1;
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

struct line {
    char *buf;
    size_t len, cap;
};

/* Reads one line (without its '\n') into l. 1 = a line, 0 = end of file,
 * -E2BIG = a line over CLI_TRACE_MAX_LINE (consumed and dropped), -ENOMEM,
 * -EIO. */
static int read_line(FILE *f, struct line *l)
{
    int c, big = 0, any = 0;

    l->len = 0;
    errno = 0;
    while ((c = getc_unlocked(f)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (big || l->len >= CLI_TRACE_MAX_LINE) {
            big = 1;
            continue;
        }
        if (l->len + 1 >= l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 4096;
            char *grown = realloc(l->buf, cap);

            if (!grown)
                return -ENOMEM;
            l->buf = grown;
            l->cap = cap;
        }
        l->buf[l->len++] = (char)c;
    }
    if (ferror(f))
        return errno ? -errno : -EIO;
    if (!any)
        return 0;
    if (big)
        return -E2BIG;
    if (l->buf)
        l->buf[l->len] = '\0';
    return 1;
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
    struct line l = {NULL, 0, 0};
    int rc;

    if (!t)
        return -ENOMEM;
    while ((rc = read_line(f, &l)) != 0) {
        if (rc < 0 && rc != -E2BIG)
            break;
        t->lines++;
        if (rc == -E2BIG) {
            t->malformed++;
            continue;
        }
        if (blank(l.buf, l.len))
            continue;
        rc = add_line(t, l.buf, l.len);
        if (rc < 0)
            break;
        if (rc == 0)
            t->malformed++;
    }
    free(l.buf);
    if (rc < 0) {
        cli_trace_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

static void free_notes(char **notes, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        free(notes[i]);
    free(notes);
}

void cli_trace_free(struct cli_trace *t)
{
    size_t i, j;

    if (!t)
        return;
    for (i = 0; i < t->n; i++) {
        struct req *r = &t->reqs[i];

        for (j = 0; j < r->nexec; j++) {
            free(r->execs[j].call);
            free(r->execs[j].status);
            free(r->execs[j].code);
        }
        free(r->execs);
        free_notes(r->notes, r->nnotes);
        free(r->id);
        free(r->api);
        free(r->model);
        free(r->url);
    }
    free_notes(t->orphans, t->norphans);
    free(t->reqs);
    free(t->slots);
    free(t);
}

/* ---- derived numbers, shared by both printers ---- */

/* Counted events, unless the answer reports more (a trace that lost lines,
 * or was started mid-request). */
static long long n_upstream(const struct req *r)
{
    return r->answer_upstream > r->upstream_calls ? r->answer_upstream
                                                  : r->upstream_calls;
}

static long long n_exec(const struct req *r)
{
    return r->answer_execs > (long long)r->nexec ? r->answer_execs
                                                 : (long long)r->nexec;
}

/* The library's own measure when it answered, else the span of the
 * request's timestamps. */
static double total_s(const struct req *r)
{
    return r->has_total ? r->answer_s : r->last_ts - r->first_ts;
}

struct totals {
    long long upstream, execs, execs_failed, tok_in, tok_out, answered, failed;
    double model_s, sandbox_s, total_s;
};

/* A request failed when its transfer did or the status is an error. */
static int req_failed(const struct req *r)
{
    return r->answered &&
           ((r->has_curl && r->curl_code != 0) || (r->has_status && r->status >= 400));
}

static void sum_totals(const struct cli_trace *t, struct totals *s)
{
    size_t i;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < t->n; i++) {
        const struct req *r = &t->reqs[i];

        add_sat(&s->upstream, n_upstream(r));
        add_sat(&s->execs, n_exec(r));
        add_sat(&s->execs_failed, r->execs_failed);
        add_sat(&s->tok_in, r->tok_in);
        add_sat(&s->tok_out, r->tok_out);
        s->answered += r->answered;
        s->failed += req_failed(r);
        s->model_s += r->model_s;
        s->sandbox_s += r->sandbox_s;
        s->total_s += total_s(r);
    }
}

static int by_first_ts(const void *a, const void *b)
{
    const struct req *x = *(const struct req *const *)a;
    const struct req *y = *(const struct req *const *)b;

    if (x->first_ts != y->first_ts)
        return x->first_ts < y->first_ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The requests in print order (caller frees the array), or NULL. */
static const struct req **sorted(const struct cli_trace *t)
{
    const struct req **v = malloc((t->n ? t->n : 1) * sizeof(*v));
    size_t i;

    if (!v)
        return NULL;
    for (i = 0; i < t->n; i++)
        v[i] = &t->reqs[i];
    qsort(v, t->n, sizeof(*v), by_first_ts);
    return v;
}

/* ---- text ---- */

static const char *plural(long long n)
{
    return n == 1 ? "" : "s";
}

static void print_when(FILE *out, double ts)
{
    time_t secs = (time_t)ts;
    struct tm tm;
    char buf[32];

    /* Past 5138 (or nonsense) the time_t conversion could overflow. */
    if (ts > 0 && ts < 1e11 && gmtime_r(&secs, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
        fprintf(out, ", %s UTC", buf);
}

static void print_req_text(const struct req *r, FILE *out)
{
    size_t i;

    fprintf(out, "request %s (pid %lld", r->id, r->pid);
    print_when(out, r->first_ts);
    fprintf(out, ")\n");
    fprintf(out, "  api       %s  model %s  stream %s\n", r->api ? r->api : "?",
            r->model ? r->model : "?", r->stream < 0 ? "?" : r->stream ? "yes" : "no");
    fprintf(out, "  url       %s\n", r->url ? r->url : "?");
    fprintf(out, "  loop      %lld upstream call%s, %lld execution%s\n", n_upstream(r),
            plural(n_upstream(r)), n_exec(r), plural(n_exec(r)));
    fprintf(out, "  time      model %.3fs  sandbox %.3fs  total %.3fs\n", r->model_s,
            r->sandbox_s, total_s(r));
    if (r->has_tok_in || r->has_tok_out)
        fprintf(out, "  tokens    in %lld  out %lld\n", r->tok_in, r->tok_out);
    else
        fprintf(out, "  tokens    unknown\n");
    if (!r->answered)
        fprintf(out, "  result    unfinished (no answer event)\n");
    else if (r->has_status)
        fprintf(out, "  result    status %lld  curl code %lld\n", r->status,
                r->has_curl ? r->curl_code : 0);
    else
        fprintf(out, "  result    no status  curl code %lld\n", r->has_curl ? r->curl_code : 0);
    for (i = 0; i < r->nexec; i++)
        fprintf(out, "  exec      %-10s %.3fs  %s\n", r->execs[i].status, r->execs[i].seconds,
                r->execs[i].code);
    for (i = 0; i < r->nnotes; i++)
        fprintf(out, "  note      %s\n", r->notes[i]);
    if (r->notes_dropped)
        fprintf(out, "  note      ... and %zu more\n", r->notes_dropped);
}

int cli_trace_print_text(const struct cli_trace *t, FILE *out)
{
    const struct req **v = sorted(t);
    struct totals s;
    size_t i;

    if (!v)
        return -ENOMEM;
    for (i = 0; i < t->n; i++) {
        print_req_text(v[i], out);
        fputc('\n', out);
    }
    free(v);
    for (i = 0; i < t->norphans; i++)
        fprintf(out, "error outside any request: %s\n", t->orphans[i]);
    sum_totals(t, &s);
    fprintf(out,
            "total: %zu request%s (%lld answered, %lld failed), %lld upstream call%s, "
            "%lld execution%s (%lld not completed), model %.3fs, sandbox %.3fs, "
            "total %.3fs, tokens in %lld out %lld\n",
            t->n, plural((long long)t->n), s.answered, s.failed, s.upstream,
            plural(s.upstream), s.execs, plural(s.execs), s.execs_failed, s.model_s,
            s.sandbox_s, s.total_s, s.tok_in, s.tok_out);
    if (t->malformed)
        fprintf(out, "skipped %zu malformed line%s\n", t->malformed,
                t->malformed == 1 ? "" : "s");
    fflush(out);
    return ferror(out) ? -EIO : 0;
}

/* ---- JSON ---- */

/* cJSON reports allocation failure by returning NULL from each adder; the
 * builder checks once, at the end, through this flag. */
struct jb {
    int oom;
};

static cJSON *jnum(struct jb *b, cJSON *o, const char *k, double v)
{
    cJSON *n = cJSON_AddNumberToObject(o, k, v);

    b->oom |= !n;
    return n;
}

static void jstr(struct jb *b, cJSON *o, const char *k, const char *v)
{
    b->oom |= !(v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k));
}

static void jnull_or_num(struct jb *b, cJSON *o, const char *k, int has, double v)
{
    if (has)
        jnum(b, o, k, v);
    else
        b->oom |= !cJSON_AddNullToObject(o, k);
}

static void jstrings(struct jb *b, cJSON *o, const char *k, char **v, size_t n)
{
    cJSON *a = cJSON_AddArrayToObject(o, k);
    size_t i;

    if (!a) {
        b->oom = 1;
        return;
    }
    for (i = 0; i < n; i++) {
        cJSON *s = cJSON_CreateString(v[i]);

        b->oom |= !s || !cJSON_AddItemToArray(a, s);
    }
}

static void req_execs_json(struct jb *b, cJSON *o, const struct req *r)
{
    cJSON *a = cJSON_AddArrayToObject(o, "exec");
    size_t i;

    if (!a) {
        b->oom = 1;
        return;
    }
    for (i = 0; i < r->nexec; i++) {
        cJSON *x = cJSON_CreateObject();

        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            b->oom = 1;
            return;
        }
        jstr(b, x, "call", r->execs[i].call);
        jstr(b, x, "status", r->execs[i].status);
        jnum(b, x, "seconds", r->execs[i].seconds);
        jstr(b, x, "code", r->execs[i].code);
    }
}

static cJSON *req_json(struct jb *b, const struct req *r)
{
    cJSON *o = cJSON_CreateObject();

    if (!o) {
        b->oom = 1;
        return NULL;
    }
    jstr(b, o, "req", r->id);
    jnum(b, o, "pid", (double)r->pid);
    jnum(b, o, "first_ts", r->first_ts);
    jstr(b, o, "api", r->api);
    jstr(b, o, "model", r->model);
    jstr(b, o, "url", r->url);
    if (r->stream < 0)
        b->oom |= !cJSON_AddNullToObject(o, "stream");
    else
        b->oom |= !cJSON_AddBoolToObject(o, "stream", r->stream);
    jnum(b, o, "upstream_calls", (double)n_upstream(r));
    jnum(b, o, "executions", (double)n_exec(r));
    jnum(b, o, "model_seconds", r->model_s);
    jnum(b, o, "sandbox_seconds", r->sandbox_s);
    jnum(b, o, "total_seconds", total_s(r));
    jnull_or_num(b, o, "input_tokens", r->has_tok_in, (double)r->tok_in);
    jnull_or_num(b, o, "output_tokens", r->has_tok_out, (double)r->tok_out);
    jnum(b, o, "upstream_bytes", (double)r->upstream_bytes);
    b->oom |= !cJSON_AddBoolToObject(o, "answered", r->answered);
    jnull_or_num(b, o, "status", r->has_status, (double)r->status);
    jnull_or_num(b, o, "curl_code", r->has_curl, (double)r->curl_code);
    req_execs_json(b, o, r);
    jstrings(b, o, "notes", r->notes, r->nnotes);
    return o;
}

static void totals_json(struct jb *b, cJSON *root, const struct cli_trace *t)
{
    cJSON *o = cJSON_AddObjectToObject(root, "totals");
    struct totals s;

    if (!o) {
        b->oom = 1;
        return;
    }
    sum_totals(t, &s);
    jnum(b, o, "requests", (double)t->n);
    jnum(b, o, "answered", (double)s.answered);
    jnum(b, o, "failed", (double)s.failed);
    jnum(b, o, "upstream_calls", (double)s.upstream);
    jnum(b, o, "executions", (double)s.execs);
    jnum(b, o, "executions_not_completed", (double)s.execs_failed);
    jnum(b, o, "model_seconds", s.model_s);
    jnum(b, o, "sandbox_seconds", s.sandbox_s);
    jnum(b, o, "total_seconds", s.total_s);
    jnum(b, o, "input_tokens", (double)s.tok_in);
    jnum(b, o, "output_tokens", (double)s.tok_out);
}

static cJSON *trace_json(struct jb *b, const struct cli_trace *t)
{
    cJSON *root = cJSON_CreateObject(), *a;
    const struct req **v = sorted(t);
    size_t i;

    a = root ? cJSON_AddArrayToObject(root, "requests") : NULL;
    if (!a || !v) {
        free(v);
        cJSON_Delete(root);
        b->oom = 1;
        return NULL;
    }
    for (i = 0; i < t->n; i++) {
        cJSON *o = req_json(b, v[i]);

        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            b->oom = 1;
        }
    }
    free(v);
    totals_json(b, root, t);
    jstrings(b, root, "errors_outside_requests", t->orphans, t->norphans);
    jnum(b, root, "lines", (double)t->lines);
    jnum(b, root, "malformed_lines", (double)t->malformed);
    return root;
}

int cli_trace_print_json(const struct cli_trace *t, FILE *out)
{
    struct jb b = {0};
    cJSON *root = trace_json(&b, t);
    char *text = root && !b.oom ? cJSON_Print(root) : NULL;

    cJSON_Delete(root);
    if (!text)
        return -ENOMEM;
    fprintf(out, "%s\n", text);
    free(text);
    fflush(out);
    return ferror(out) ? -EIO : 0;
}

/* ---- the subcommand ---- */

static void trace_usage(FILE *out)
{
    fprintf(out, "usage: codeshim trace FILE [--json]\n"
                 "Summarizes a CODESHIM_TRACE file per request (FILE '-' reads stdin).\n");
}

int cli_trace_main(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, i, rc;
    struct cli_trace *t = NULL;
    FILE *f;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            trace_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "codeshim trace: unknown option %s\n", argv[i]);
            trace_usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "codeshim trace: more than one FILE (%s, %s)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "codeshim trace: missing FILE\n");
        trace_usage(stderr);
        return 2;
    }
    f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) {
        fprintf(stderr, "codeshim trace: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    rc = cli_trace_load(f, &t);
    if (f != stdin)
        fclose(f);
    if (rc < 0) {
        fprintf(stderr, "codeshim trace: reading %s: %s\n", path, strerror(-rc));
        return 1;
    }
    rc = json ? cli_trace_print_json(t, stdout) : cli_trace_print_text(t, stdout);
    cli_trace_free(t);
    if (rc < 0) {
        fprintf(stderr, "codeshim trace: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}
