/* stream.c - an ordinary libcurl program that asks an OpenAI-style server a
 * question with the code_interpreter tool enabled and "stream": true, and
 * prints the server-sent events as they arrive. It knows nothing about
 * codeshim: run it under LD_PRELOAD (or the codeshim launcher) and you see
 * each code execution start and end while the answer is being worked out.
 *
 *   stream [--chat] [--timestamps-json FILE] "question"
 *
 * Environment: OPENAI_BASE_URL (default https://api.openai.com/v1),
 * OPENAI_API_KEY, OPENAI_MODEL (default gpt-4.1-mini).
 *
 * Output (stdout), one line per event, with the time since the start:
 *
 *   [+0.000s] HTTP 200 text/event-stream
 *   [+0.004s] response.created
 *   [+0.005s] response.code_interpreter_call.interpreting
 *   [+1.012s] response.code_interpreter_call.completed
 *   [+1.020s] response.output_text.delta "Done. Tool said: 42\n"
 *   ...
 *   --- answer ---
 *   Done. Tool said: 42
 *
 * Chat streams have no event names: their lines read chat.completion.chunk
 * (then role / content / tool_calls / finish_reason=... / usage), and
 * [DONE]. A reply that is not a stream (an HTTP error) is printed as is.
 *
 * --timestamps-json FILE writes one JSON line per write-callback call,
 * {"t": seconds, "bytes": n}, and one per parsed event, {"t": seconds,
 * "event": name}, so the timing of the delivery can be examined.
 *
 * Exit status: 0 when the stream ended normally (response.completed or
 * response.incomplete; [DONE] for Chat), 1 otherwise. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct reader {
    double t0;
    int chat;
    FILE *times;         /* --timestamps-json, or NULL */
    long status;         /* from the status line */
    int sse;             /* Content-Type: text/event-stream */
    char *buf;           /* bytes not yet split into lines */
    size_t len, cap;
    char event[128];     /* the event being read: its name ... */
    char *data;          /* ... and its data lines, joined with '\n' */
    size_t dlen, dcap;
    int has_data;
    int skip_lf;         /* the last line ended with CR: drop a leading LF */
    char *answer;        /* text deltas, joined */
    size_t alen, acap;
    int ended;           /* the terminal event was seen */
    int failed;          /* an error or response.failed was seen */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Appends n bytes to a growing buffer; 0 when out of memory. */
static int append(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        char *q;
        while (c < *len + n + 1)
            c *= 2;
        q = realloc(*p, c);
        if (!q)
            return 0;
        *p = q;
        *cap = c;
    }
    memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = '\0';
    return 1;
}

static void stamp_event(struct reader *r, double t, const char *name)
{
    cJSON *str;
    char *q;

    if (!r->times)
        return;
    str = cJSON_CreateString(name);
    q = cJSON_PrintUnformatted(str);
    fprintf(r->times, "{\"t\": %.6f, \"event\": %s}\n", t, q ? q : "\"\"");
    free(q);
    cJSON_Delete(str);
}

static void print_quoted(const char *s)
{
    cJSON *str = cJSON_CreateString(s ? s : "");
    char *q = cJSON_PrintUnformatted(str);
    printf(" %s", q ? q : "\"\"");
    free(q);
    cJSON_Delete(str);
}

static void add_answer(struct reader *r, const char *text)
{
    if (text)
        append(&r->answer, &r->alen, &r->acap, text, strlen(text));
}

/* A Responses event: its name (the event: line, else its type). */
static void on_responses_event(struct reader *r, const char *name, const cJSON *ev)
{
    const char *delta = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "delta"));

    printf("[+%.3fs] %s", now() - r->t0, name);
    if (!strcmp(name, "response.output_text.delta")) {
        print_quoted(delta);
        add_answer(r, delta);
    } else if (!strcmp(name, "error")) {
        const cJSON *e = cJSON_GetObjectItem(ev, "error"); /* nested or flat */
        const char *m = cJSON_GetStringValue(cJSON_GetObjectItem(e ? e : ev, "message"));
        print_quoted(m);
        r->failed = 1;
    } else if (!strcmp(name, "response.completed") || !strcmp(name, "response.incomplete")) {
        r->ended = 1;
    } else if (!strcmp(name, "response.failed")) {
        r->ended = r->failed = 1;
    }
    printf("\n");
}

/* A Chat chunk: what its delta carries. */
static void on_chat_chunk(struct reader *r, const cJSON *c)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "choices"), 0);
    const cJSON *d = cJSON_GetObjectItem(ch, "delta");
    const char *fr = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "finish_reason"));
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
    const cJSON *err = cJSON_GetObjectItem(c, "error");

    printf("[+%.3fs] ", now() - r->t0);
    if (err) {
        printf("error");
        print_quoted(cJSON_GetStringValue(cJSON_GetObjectItem(err, "message")));
        r->failed = 1;
        printf("\n");
        return;
    }
    printf("chat.completion.chunk");
    if (cJSON_GetObjectItem(d, "role"))
        printf(" role");
    if (content && *content) {
        printf(" content");
        print_quoted(content);
        add_answer(r, content);
    }
    if (cJSON_GetObjectItem(d, "tool_calls")) {
        const cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls"))
        {
            const cJSON *fn = cJSON_GetObjectItem(tc, "function");
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
            printf(" tool_calls %s", name ? name : "");
            print_quoted(cJSON_GetStringValue(cJSON_GetObjectItem(fn, "arguments")));
        }
    }
    if (fr)
        printf(" finish_reason=%s", fr);
    if (cJSON_IsObject(cJSON_GetObjectItem(c, "usage")))
        printf(" usage total_tokens=%d",
               (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "usage"),
                                                             "total_tokens")));
    printf("\n");
}

/* A blank line: the event read so far is complete. */
static void dispatch(struct reader *r)
{
    double t = now() - r->t0;
    const char *name;
    cJSON *ev;

    if (!r->has_data) { /* nothing to dispatch (e.g. after a comment) */
        r->event[0] = '\0';
        return;
    }
    if (!strcmp(r->data, "[DONE]")) {
        stamp_event(r, t, "[DONE]");
        printf("[+%.3fs] [DONE]\n", t);
        if (r->chat)
            r->ended = 1;
    } else if (!(ev = cJSON_Parse(r->data))) {
        stamp_event(r, t, "(not JSON)");
        printf("[+%.3fs] (data that is not JSON) %s\n", t, r->data);
        r->failed = 1;
    } else {
        name = r->event[0] ? r->event : cJSON_GetStringValue(cJSON_GetObjectItem(ev, "type"));
        if (r->chat) {
            name = cJSON_GetObjectItem(ev, "error") ? "error" : "chat.completion.chunk";
            stamp_event(r, t, name);
            on_chat_chunk(r, ev);
        } else {
            stamp_event(r, t, name ? name : "(no type)");
            on_responses_event(r, name ? name : "(no type)", ev);
        }
        cJSON_Delete(ev);
    }
    fflush(stdout);
    r->event[0] = '\0';
    r->dlen = 0;
    r->has_data = 0;
}

/* One complete line (without its end) of the event stream. */
static void on_line(struct reader *r, char *line, size_t n)
{
    char *colon, *value;

    line[n] = '\0';
    if (n == 0) {
        dispatch(r);
        return;
    }
    if (line[0] == ':') /* a comment (keep-alive) */
        return;
    colon = strchr(line, ':');
    value = colon ? colon + 1 : line + n;
    if (colon) {
        *colon = '\0';
        if (*value == ' ')
            value++;
    }
    if (!strcmp(line, "event")) {
        snprintf(r->event, sizeof(r->event), "%s", value);
    } else if (!strcmp(line, "data")) {
        if (r->has_data)
            append(&r->data, &r->dlen, &r->dcap, "\n", 1);
        append(&r->data, &r->dlen, &r->dcap, value, strlen(value));
        r->has_data = 1;
    }
}

/* The write callback: bytes arrive in pieces of any size, an event may
 * be split across calls, and one call may hold several events. */
static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct reader *r = ud;
    size_t len = sz * n, start = 0, i;

    if (r->times)
        fprintf(r->times, "{\"t\": %.6f, \"bytes\": %zu}\n", now() - r->t0, len);
    if (!append(&r->buf, &r->len, &r->cap, p, len))
        return 0;
    if (!r->sse) /* not a stream: keep the body and print it at the end */
        return len;
    for (i = 0; i < r->len; i++) {
        char c = r->buf[i];
        if (c != '\n' && c != '\r')
            continue;
        if (c == '\n' && r->skip_lf && i == start) { /* the LF of a CRLF */
            r->skip_lf = 0;
            start = i + 1;
            continue;
        }
        r->skip_lf = c == '\r';
        on_line(r, r->buf + start, i - start);
        start = i + 1;
    }
    /* keep the unfinished line for the next call */
    memmove(r->buf, r->buf + start, r->len - start);
    r->len -= start;
    return len;
}

/* Header lines: the status code and the Content-Type. */
static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct reader *r = ud;
    size_t len = sz * n;
    char line[512];
    size_t k = len < sizeof(line) - 1 ? len : sizeof(line) - 1;

    memcpy(line, p, k);
    line[k] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (!strncmp(line, "HTTP/", 5)) {
        r->status = strtol(strchr(line, ' ') ? strchr(line, ' ') + 1 : "0", NULL, 10);
        r->sse = 0;
    } else if (!strncasecmp(line, "Content-Type:", 13)) {
        const char *v = line + 13 + strspn(line + 13, " \t");
        r->sse = !strncasecmp(v, "text/event-stream", 17);
        printf("[+%.3fs] HTTP %ld %s\n", now() - r->t0, r->status, v);
        fflush(stdout);
    }
    return len;
}

int main(int argc, char **argv)
{
    int chat = 0, i, ok;
    const char *question = NULL, *times = NULL;
    const char *base = getenv("OPENAI_BASE_URL");
    const char *key = getenv("OPENAI_API_KEY");
    const char *model = getenv("OPENAI_MODEL");
    char url[1024], auth[1024];
    struct reader r;
    struct curl_slist *hdrs = NULL;
    cJSON *req, *tools, *tool;
    char *json;
    CURL *h;
    CURLcode rc;
    long code = 0;

    memset(&r, 0, sizeof(r));
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chat"))
            chat = 1;
        else if (!strcmp(argv[i], "--timestamps-json") && i + 1 < argc)
            times = argv[++i];
        else
            question = argv[i];
    }
    if (!question) {
        fprintf(stderr, "usage: %s [--chat] [--timestamps-json FILE] \"question\"\n", argv[0]);
        return 2;
    }
    if (times && !(r.times = fopen(times, "w"))) {
        perror(times);
        return 2;
    }
    snprintf(url, sizeof(url), "%s/%s", base ? base : "https://api.openai.com/v1",
             chat ? "chat/completions" : "responses");
    req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", model ? model : "gpt-4.1-mini");
    if (chat) {
        cJSON *msgs = cJSON_AddArrayToObject(req, "messages"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", question);
        cJSON_AddItemToArray(msgs, m);
    } else {
        cJSON_AddStringToObject(req, "input", question);
    }
    tools = cJSON_AddArrayToObject(req, "tools");
    tool = cJSON_CreateObject();
    cJSON_AddStringToObject(tool, "type", "code_interpreter");
    if (!chat)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(tool, "container"), "type", "auto");
    cJSON_AddItemToArray(tools, tool);
    cJSON_AddTrueToObject(req, "stream");
    if (chat) /* ask for the usage chunk at the end */
        cJSON_AddTrueToObject(cJSON_AddObjectToObject(req, "stream_options"), "include_usage");
    json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key ? key : "");
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
    hdrs = curl_slist_append(hdrs, auth);
    r.chat = chat;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r);
    r.t0 = now();
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK)
        fprintf(stderr, "request failed: %s\n", curl_easy_strerror(rc));
    if (!r.sse && r.len) /* an error body, or a server that did not stream */
        printf("%.*s\n", (int)r.len, r.buf);
    else if (r.answer)
        printf("--- answer ---\n%s\n", r.answer);
    ok = rc == CURLE_OK && code == 200 && r.sse && r.ended && !r.failed;
    if (rc == CURLE_OK && r.sse && !r.ended)
        fprintf(stderr, "the stream ended without its final event\n");
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    curl_global_cleanup();
    if (r.times)
        fclose(r.times);
    free(json);
    free(r.buf);
    free(r.data);
    free(r.answer);
    return ok ? 0 : 1;
}
