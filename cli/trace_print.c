/* trace_print.c - the two forms of a loaded trace (trace_model.h): text
 * for people and one JSON object for programs, with the derived numbers
 * both share. Requests are printed in order of their first timestamp.
 * Only formats: everything kept was clipped when it was loaded. */
#include "trace_model.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- derived numbers, shared by both printers ---- */

/* Counted events, unless the answer reports more (a trace that lost lines,
 * or was started mid-request). */
static long long n_upstream(const struct cli_trace_req *r)
{
    return r->answer_upstream > r->upstream_calls ? r->answer_upstream
                                                  : r->upstream_calls;
}

static long long n_exec(const struct cli_trace_req *r)
{
    long long counted = (long long)cli_trace_nexecs(r);

    return r->answer_execs > counted ? r->answer_execs : counted;
}

/* The library's own measure when it answered, else the span of the
 * request's timestamps. */
static double total_s(const struct cli_trace_req *r)
{
    return r->has_total ? r->answer_s : r->last_ts - r->first_ts;
}

struct totals {
    long long upstream, execs, execs_failed, tok_in, tok_out, answered, failed;
    double model_s, sandbox_s, total_s;
    long long e2b_creates, e2b_execs;
    double e2b_create_s, e2b_exec_s;
};

/* A request failed when its transfer did or the status is an error. */
static int req_failed(const struct cli_trace_req *r)
{
    return r->answered &&
           ((r->has_curl && r->curl_code != 0) || (r->has_status && r->status >= 400));
}

static void sum_totals(const struct cli_trace *t, struct totals *s)
{
    size_t i;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < cli_trace_nreqs(t); i++) {
        const struct cli_trace_req *r = cli_trace_req_at(t, i);

        cli_trace_add_sat(&s->upstream, n_upstream(r));
        cli_trace_add_sat(&s->execs, n_exec(r));
        cli_trace_add_sat(&s->execs_failed, r->execs_failed);
        cli_trace_add_sat(&s->tok_in, r->tok_in);
        cli_trace_add_sat(&s->tok_out, r->tok_out);
        s->answered += r->answered;
        s->failed += req_failed(r);
        s->model_s += r->model_s;
        s->sandbox_s += r->sandbox_s;
        s->total_s += total_s(r);
        cli_trace_add_sat(&s->e2b_creates, r->e2b_creates);
        cli_trace_add_sat(&s->e2b_execs, r->e2b_execs);
        s->e2b_create_s += r->e2b_create_s;
        s->e2b_exec_s += r->e2b_exec_s;
    }
}

static int by_first_ts(const void *a, const void *b)
{
    const struct cli_trace_req *x = *(const struct cli_trace_req *const *)a;
    const struct cli_trace_req *y = *(const struct cli_trace_req *const *)b;

    if (x->first_ts != y->first_ts)
        return x->first_ts < y->first_ts ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The requests in print order (caller frees the array), or NULL. */
static const struct cli_trace_req **sorted(const struct cli_trace *t)
{
    size_t n = cli_trace_nreqs(t);
    const struct cli_trace_req **v = malloc((n ? n : 1) * sizeof(*v));

    if (!v)
        return NULL;
    if (n)
        memcpy(v, t->reqs.data, n * sizeof(*v));
    qsort(v, n, sizeof(*v), by_first_ts);
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

static void print_e2b(FILE *out, const char *head, long long creates, double create_s,
                      long long execs, double exec_s)
{
    fprintf(out, "%screate %lld (%.3fs)  execute %lld (%.3fs)\n", head, creates, create_s,
            execs, exec_s);
}

static void print_req_text(const struct cli_trace_req *r, FILE *out)
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
    if (r->e2b_creates || r->e2b_execs)
        print_e2b(out, "  e2b       ", r->e2b_creates, r->e2b_create_s, r->e2b_execs,
                  r->e2b_exec_s);
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
    for (i = 0; i < cli_trace_nexecs(r); i++) {
        const struct cli_trace_exec *x = cli_trace_exec_at(r, i);

        fprintf(out, "  exec      %-10s %.3fs  %s\n", x->status, x->seconds, x->code);
    }
    for (i = 0; i < cli_trace_nstrs(&r->notes); i++)
        fprintf(out, "  note      %s\n", cli_trace_strs(&r->notes)[i]);
    if (r->notes_dropped)
        fprintf(out, "  note      ... and %zu more\n", r->notes_dropped);
}

int cli_trace_print_text(const struct cli_trace *t, FILE *out)
{
    const struct cli_trace_req **v = sorted(t);
    size_t i, n = cli_trace_nreqs(t);
    struct totals s;

    if (!v)
        return -ENOMEM;
    for (i = 0; i < n; i++) {
        print_req_text(v[i], out);
        fputc('\n', out);
    }
    free(v);
    for (i = 0; i < cli_trace_nstrs(&t->orphans); i++)
        fprintf(out, "error outside any request: %s\n", cli_trace_strs(&t->orphans)[i]);
    sum_totals(t, &s);
    fprintf(out,
            "total: %zu request%s (%lld answered, %lld failed), %lld upstream call%s, "
            "%lld execution%s (%lld not completed), model %.3fs, sandbox %.3fs, "
            "total %.3fs, tokens in %lld out %lld\n",
            n, plural((long long)n), s.answered, s.failed, s.upstream,
            plural(s.upstream), s.execs, plural(s.execs), s.execs_failed, s.model_s,
            s.sandbox_s, s.total_s, s.tok_in, s.tok_out);
    if (s.e2b_creates || s.e2b_execs)
        print_e2b(out, "total e2b: ", s.e2b_creates, s.e2b_create_s, s.e2b_execs,
                  s.e2b_exec_s);
    if (t->malformed)
        fprintf(out, "skipped %zu malformed line%s\n", t->malformed,
                t->malformed == 1 ? "" : "s");
    fflush(out);
    return ferror(out) ? -EIO : 0;
}

/* ---- JSON ---- */

/* cJSON reports allocation failure by returning NULL from each adder; the
 * builder checks once, at the end, through this flag. */
struct json_builder {
    int oom;
};

static void jnum(struct json_builder *b, cJSON *o, const char *k, double v)
{
    b->oom |= !cJSON_AddNumberToObject(o, k, v);
}

static void jstr(struct json_builder *b, cJSON *o, const char *k, const char *v)
{
    b->oom |= !(v ? cJSON_AddStringToObject(o, k, v) : cJSON_AddNullToObject(o, k));
}

static void jnull_or_num(struct json_builder *b, cJSON *o, const char *k, int has, double v)
{
    if (has)
        jnum(b, o, k, v);
    else
        b->oom |= !cJSON_AddNullToObject(o, k);
}

static void jstrings(struct json_builder *b, cJSON *o, const char *k, const struct shim_buf *list)
{
    cJSON *a = cJSON_AddArrayToObject(o, k);
    size_t i;

    if (!a) {
        b->oom = 1;
        return;
    }
    for (i = 0; i < cli_trace_nstrs(list); i++) {
        cJSON *s = cJSON_CreateString(cli_trace_strs(list)[i]);

        b->oom |= !s || !cJSON_AddItemToArray(a, s);
    }
}

static void req_execs_json(struct json_builder *b, cJSON *o, const struct cli_trace_req *r)
{
    cJSON *a = cJSON_AddArrayToObject(o, "exec");
    size_t i;

    if (!a) {
        b->oom = 1;
        return;
    }
    for (i = 0; i < cli_trace_nexecs(r); i++) {
        const struct cli_trace_exec *e = cli_trace_exec_at(r, i);
        cJSON *x = cJSON_CreateObject();

        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            b->oom = 1;
            return;
        }
        jstr(b, x, "call", e->call);
        jstr(b, x, "status", e->status);
        jnum(b, x, "seconds", e->seconds);
        jstr(b, x, "code", e->code);
    }
}

/* "e2b": {creates, create_seconds, executes, execute_seconds}, left out
 * when nothing ran on e2b. */
static void e2b_json(struct json_builder *b, cJSON *o, long long creates, double create_s,
                     long long execs, double exec_s)
{
    cJSON *e;

    if (!creates && !execs)
        return;
    e = cJSON_AddObjectToObject(o, "e2b");
    if (!e) {
        b->oom = 1;
        return;
    }
    jnum(b, e, "creates", (double)creates);
    jnum(b, e, "create_seconds", create_s);
    jnum(b, e, "executes", (double)execs);
    jnum(b, e, "execute_seconds", exec_s);
}

static cJSON *req_json(struct json_builder *b, const struct cli_trace_req *r)
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
    e2b_json(b, o, r->e2b_creates, r->e2b_create_s, r->e2b_execs, r->e2b_exec_s);
    req_execs_json(b, o, r);
    jstrings(b, o, "notes", &r->notes);
    return o;
}

static void totals_json(struct json_builder *b, cJSON *root, const struct cli_trace *t)
{
    cJSON *o = cJSON_AddObjectToObject(root, "totals");
    struct totals s;

    if (!o) {
        b->oom = 1;
        return;
    }
    sum_totals(t, &s);
    jnum(b, o, "requests", (double)cli_trace_nreqs(t));
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
    e2b_json(b, o, s.e2b_creates, s.e2b_create_s, s.e2b_execs, s.e2b_exec_s);
}

static cJSON *trace_json(struct json_builder *b, const struct cli_trace *t)
{
    cJSON *root = cJSON_CreateObject(), *a;
    const struct cli_trace_req **v = sorted(t);
    size_t i;

    a = root ? cJSON_AddArrayToObject(root, "requests") : NULL;
    if (!a || !v) {
        free(v);
        cJSON_Delete(root);
        b->oom = 1;
        return NULL;
    }
    for (i = 0; i < cli_trace_nreqs(t); i++) {
        cJSON *o = req_json(b, v[i]);

        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            b->oom = 1;
        }
    }
    free(v);
    totals_json(b, root, t);
    jstrings(b, root, "errors_outside_requests", &t->orphans);
    jnum(b, root, "lines", (double)t->lines);
    jnum(b, root, "malformed_lines", (double)t->malformed);
    return root;
}

int cli_trace_print_json(const struct cli_trace *t, FILE *out)
{
    struct json_builder b = {0};
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
