/* ask.c - an ordinary libcurl program that asks an OpenAI-style server a
 * question with the code_interpreter tool enabled, and prints the answer.
 * It knows nothing about codeshim: run it under LD_PRELOAD (or the
 * codeshim launcher) and the code interpreter works on any server.
 *
 *   ask [--chat] [--stream] [--raw] "question"
 *
 * Environment: OPENAI_BASE_URL (default https://api.openai.com/v1),
 * OPENAI_API_KEY, OPENAI_MODEL (default gpt-4.1-mini). */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct body {
    char *data;
    size_t len;
    int stream;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct body *b = ud;
    size_t len = sz * n;
    char *d;

    if (b->stream) { /* show events as they arrive */
        fwrite(p, 1, len, stdout);
        fflush(stdout);
        return len;
    }
    d = realloc(b->data, b->len + len + 1);
    if (!d)
        return 0;
    memcpy(d + b->len, p, len);
    b->data = d;
    b->len += len;
    b->data[b->len] = '\0';
    return len;
}

static void print_responses(const cJSON *r)
{
    const cJSON *it, *c, *o;

    cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "output"))
    {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(it, "type"));
        if (type && !strcmp(type, "code_interpreter_call")) {
            printf("--- code (%s) ---\n%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(it, "container_id")),
                   cJSON_GetStringValue(cJSON_GetObjectItem(it, "code")));
            cJSON_ArrayForEach(o, cJSON_GetObjectItem(it, "outputs"))
            {
                const char *logs = cJSON_GetStringValue(cJSON_GetObjectItem(o, "logs"));
                if (logs)
                    printf("--- output ---\n%s", logs);
                else
                    printf("--- image ---\n");
            }
        } else if (type && !strcmp(type, "message")) {
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(it, "content"))
            {
                const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
                if (t)
                    printf("--- answer ---\n%s\n", t);
            }
        }
    }
}

static void print_chat(const cJSON *r)
{
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItem(ch, "message");
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(msg, "content"));
    printf("--- answer ---\n%s\n", t ? t : "(no text)");
}

int main(int argc, char **argv)
{
    int chat = 0, stream = 0, raw = 0, i;
    const char *question = NULL;
    const char *base = getenv("OPENAI_BASE_URL");
    const char *key = getenv("OPENAI_API_KEY");
    const char *model = getenv("OPENAI_MODEL");
    char url[1024], auth[1024];
    struct body b = {0};
    struct curl_slist *hdrs = NULL;
    cJSON *req, *tools, *tool, *resp;
    char *json;
    CURL *h;
    CURLcode rc;
    long code = 0;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chat")) chat = 1;
        else if (!strcmp(argv[i], "--stream")) stream = 1;
        else if (!strcmp(argv[i], "--raw")) raw = 1;
        else question = argv[i];
    }
    if (!question) {
        fprintf(stderr, "usage: %s [--chat] [--stream] [--raw] \"question\"\n", argv[0]);
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
    if (stream)
        cJSON_AddTrueToObject(req, "stream");
    json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);

    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key ? key : "");
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, auth);
    b.stream = stream;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc != CURLE_OK) {
        fprintf(stderr, "request failed: %s\n", curl_easy_strerror(rc));
    } else if (!stream) {
        resp = cJSON_Parse(b.data ? b.data : "");
        if (raw || code != 200 || !resp)
            printf("%s\n", b.data ? b.data : "");
        else if (chat)
            print_chat(resp);
        else
            print_responses(resp);
        cJSON_Delete(resp);
    }
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    curl_global_cleanup();
    free(json);
    free(b.data);
    return rc == CURLE_OK && code == 200 ? 0 : 1;
}
