/* e2b_api.c - the e2b HTTP calls (see e2b_int.h), each answer mapped to
 * 0 or -errno plus a text for the model in a->why:
 *   transport failure  -> the transport's errno, "could not be reached"
 *   401/403            -> -EACCES, the key was refused (on a sandbox's own
 *                         host: its access token was, dp_fail)
 *   404                -> -ENOENT
 *   429                -> waited (Retry-After, bounded) and tried again;
 *                         -EAGAIN once the budget is spent, or at once
 *                         without Retry-After (the concurrency limit)
 *   5xx, other         -> -EIO / -EINVAL with e2b's own message
 * Control plane: E2B_API_URL with X-API-Key. Data plane: the
 * sandbox's per-port host https://49999-<id>.<domain>, or the shared host
 * CODESHIM_E2B_SANDBOX_URL with E2b-Sandbox-Id/-Port headers. */
#include "sandbox/e2b/e2b_int.h"

#include "base/ids.h"
#include "base/json.h"
#include "base/log.h"
#include "sandbox/sandbox.h"
#include "system/config.h"
#include "system/url.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CP_CONNECT_MS 10000
#define CP_TOTAL_MS 30000
#define CP_BODY_MAX (1u << 20)
#define LIST_MAX_BODY (4u << 20)
#define LIST_MAX_PAGES 50 /* 5000 sandboxes: far past any session cap */
#define RETRY_BUDGET_S 10.0 /* waiting on 429s, per call */
#define RETRY_TRIES 4
#define JUPYTER_PORT "49999"
#define ENVD_PORT "49983" /* envd: the file API */
/* config.c's default: with another E2B_DOMAIN and no E2B_API_URL of its
 * own, the control plane is api.<domain>, as e2b's SDKs make it. */
#define LINE_MAX_BYTES (16u << 20)       /* one NDJSON line (an image) */
/* envd takes a raw application/octet-stream upload from this version on
 * (e2b's SDKs: ENVD_OCTET_STREAM_UPLOAD), only multipart/form-data before */
#define ENVD_RAW_UPLOAD_MAJOR 0
#define ENVD_RAW_UPLOAD_MINOR 5
#define ENVD_RAW_UPLOAD_PATCH 7
#define STREAM_SLACK (32u << 20)         /* beyond the output cap */

int shim_e2b_api_init(struct shim_e2b_api *a, const struct shim_config *cfg,
                      const struct shim_http_net *net)
{
    int rc;

    memset(a, 0, sizeof(*a));
    a->cfg = cfg;
    a->retry_cap_s = RETRY_BUDGET_S;
    if ((rc = shim_http_open(net, &a->cp)) < 0 || (rc = shim_http_open(net, &a->dp)) < 0) {
        shim_e2b_api_free(a);
        return rc;
    }
    return 0;
}

void shim_e2b_api_free(struct shim_e2b_api *a)
{
    shim_http_close(a->cp);
    shim_http_close(a->dp);
    a->cp = a->dp = NULL;
}

static void sleep_s(double s)
{
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* e2b's "message" from an error body, printable, at most 200 bytes. */
static void message_of(const struct shim_http_resp *r, char *out, size_t n)
{
    cJSON *o = r->body ? shim_json_parse(r->body, r->len) : NULL;
    const char *m = shim_json_str(o, "message");
    size_t i;

    if (!m && r->body && r->len && r->body[0] != '{')
        m = r->body; /* the code-interpreter server answers text/plain */
    snprintf(out, n, "%.200s", m ? m : "");
    for (i = 0; out[i]; i++)
        if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
            out[i] = ' ';
    cJSON_Delete(o);
}

/* a->why never carries a secret, even one a server echoed back. */
static void scrub(struct shim_e2b_api *a, const char *secret)
{
    char *p;
    size_t n = secret ? strlen(secret) : 0;

    if (n < 4)
        return;
    while ((p = strstr(a->why, secret)) != NULL)
        memset(p, '*', n);
}

/* The text and errno of a failed call. what: "creating a sandbox". */
static int fail(struct shim_e2b_api *a, int rc, const struct shim_http_resp *r, const char *what)
{
    char msg[256];

    a->status = r->status;
    message_of(r, msg, sizeof(msg));
    if (rc < 0) {
        snprintf(a->why, sizeof(a->why), "e2b could not be reached while %s (%s)", what,
                 r->error);
    } else if (r->status == 401 || r->status == 403) {
        snprintf(a->why, sizeof(a->why), "e2b refused the API key while %s (HTTP %ld%s%s); "
                 "check E2B_API_KEY", what, r->status, msg[0] ? ": " : "", msg);
        rc = -EACCES;
    } else if (r->status == 404) {
        snprintf(a->why, sizeof(a->why), "e2b found no such sandbox while %s (HTTP 404)", what);
        rc = -ENOENT;
    } else if (r->status == 429 && r->retry_after_s < 0) {
        /* no Retry-After: the team's concurrency limit, not the rate limiter */
        snprintf(a->why, sizeof(a->why), "e2b's limit on this team's concurrent sandboxes was "
                 "reached while %s (HTTP 429%s%s)", what, msg[0] ? ": " : "", msg);
        rc = -EAGAIN;
    } else if (r->status == 429) {
        snprintf(a->why, sizeof(a->why), "e2b kept rate-limiting codeshim while %s (HTTP 429%s%s)",
                 what, msg[0] ? ": " : "", msg);
        rc = -EAGAIN;
    } else {
        snprintf(a->why, sizeof(a->why), "e2b answered HTTP %ld while %s%s%s", r->status, what,
                 msg[0] ? ": " : "", msg);
        rc = r->status >= 500 ? -EIO : -EINVAL;
    }
    scrub(a, a->cfg->e2b_api_key);
    return rc;
}

/* One control-plane call, retried on 429 within the budget. *r holds the
 * last answer (free it). 0 when a 2xx came; else fail()'s errno. */
static int cp_call(struct shim_e2b_api *a, const char *method, const char *path,
                   const char *body, size_t max_body, struct shim_http_resp *r, const char *what)
{
    char url[1400], key[300];
    const char *hdr[] = {key, "Content-Type: application/json", "Accept: application/json",
                         "User-Agent: codeshim", NULL};
    struct shim_http_req rq;
    double waited = 0;
    size_t n = strlen(a->cfg->e2b_api_url);
    int rc, tries;

    if (!a->cfg->e2b_api_key[0]) {
        memset(r, 0, sizeof(*r));
        snprintf(a->why, sizeof(a->why), "no e2b API key is set (E2B_API_KEY or "
                 "CODESHIM_E2B_API_KEY); no sandbox can be created");
        return -EACCES;
    }
    while (n && a->cfg->e2b_api_url[n - 1] == '/')
        n--;
    if (!n)
        snprintf(url, sizeof(url), "https://api.%s%s", a->cfg->e2b_domain, path);
    else
        snprintf(url, sizeof(url), "%.*s%s", (int)n, a->cfg->e2b_api_url, path);
    snprintf(key, sizeof(key), "X-API-Key: %s", a->cfg->e2b_api_key);
    memset(&rq, 0, sizeof(rq));
    rq.method = method;
    rq.url = url;
    rq.headers = hdr;
    rq.body = body;
    rq.body_len = body ? strlen(body) : 0;
    rq.connect_ms = CP_CONNECT_MS;
    rq.total_ms = CP_TOTAL_MS;
    rq.max_body = max_body;
    for (tries = 1;; tries++) {
        double wait;

        rc = shim_http_do(a->cp, &rq, r);
        /* only the rate limiter's 429 says when to come back (Retry-After);
         * the concurrency limit's does not, and waiting seconds won't end it */
        if (rc < 0 || r->status != 429 || r->retry_after_s < 0 || tries >= RETRY_TRIES)
            break;
        wait = (double)r->retry_after_s;
        if (waited + wait > a->retry_cap_s)
            break;
        LOG_INFO("e2b rate limit while %s: retrying in %.0f s", what, wait);
        shim_http_resp_free(r);
        sleep_s(wait);
        waited += wait;
    }
    memset(key, 0, sizeof(key));
    a->status = r->status;
    if (rc == 0 && r->status >= 200 && r->status < 300 && !r->incomplete)
        return 0;
    return fail(a, rc, r, what);
}

/* ids and tokens go into URLs and headers: no separators, bounded. */
static int copy_token(char *out, size_t n, const char *v)
{
    size_t i, len = v ? strlen(v) : 0;

    if (!len || len >= n)
        return -1;
    for (i = 0; i < len; i++)
        if (!isalnum((unsigned char)v[i]) && !strchr("-_.~+/=", v[i]))
            return -1;
    memcpy(out, v, len + 1);
    return 0;
}

/* RFC 3339 in UTC ("2026-01-01T00:00:00.123Z"), fraction kept: LRU
 * order among sandboxes used within one second. 0 when unreadable. */
static double rfc3339(const char *s)
{
    struct tm tm;
    double frac = 0, scale = 0.1;
    int n = 0;

    memset(&tm, 0, sizeof(tm));
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return 0;
    if (s[n] == '.')
        for (n++; s[n] >= '0' && s[n] <= '9' && scale > 1e-9; n++, scale /= 10)
            frac += (s[n] - '0') * scale;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + frac;
}

/* A Sandbox / SandboxDetail / ListedSandbox object into out. */
static int box_of(const cJSON *o, struct shim_e2b_box *out)
{
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const char *v;

    memset(out, 0, sizeof(*out));
    if (copy_token(out->id, sizeof(out->id), shim_json_str(o, "sandboxID")) < 0 ||
        strchr(out->id, '/') || strchr(out->id, '.'))
        return -EPROTO;
    if ((v = shim_json_str(o, "envdAccessToken")) && copy_token(out->envd_token,
                                                                 sizeof(out->envd_token), v) < 0)
        return -EPROTO;
    if ((v = shim_json_str(o, "trafficAccessToken")) &&
        copy_token(out->traffic_token, sizeof(out->traffic_token), v) < 0)
        return -EPROTO;
    if ((v = shim_json_str(o, "domain")) && *v &&
        copy_token(out->domain, sizeof(out->domain), v) < 0)
        return -EPROTO;
    if ((v = shim_json_str(md, "codeshim_nonce")))
        copy_token(out->nonce, sizeof(out->nonce), v);
    if ((v = shim_json_str(o, "envdVersion")))
        copy_token(out->envd_version, sizeof(out->envd_version), v);
    out->end_at = rfc3339(shim_json_str(o, "endAt"));
    return 0;
}

static int parse_box(struct shim_e2b_api *a, const struct shim_http_resp *r,
                     struct shim_e2b_box *out, const char *what)
{
    cJSON *o = shim_json_parse(r->body, r->len);
    int rc = cJSON_IsObject(o) ? box_of(o, out) : -EPROTO;

    cJSON_Delete(o);
    if (rc)
        snprintf(a->why, sizeof(a->why), "e2b sent an answer codeshim cannot use while %s",
                 what);
    return rc;
}

/* The team's maximum a create's 400 names (e2b's sandbox_create.go:
 * "Timeout cannot be greater than N hours"), in seconds; 0 if not that. */
static int team_maximum(const struct shim_http_resp *r)
{
    char msg[256];
    const char *p;
    int h;

    message_of(r, msg, sizeof(msg));
    p = strstr(msg, "cannot be greater than ");
    if (!strstr(msg, "imeout") || !p || sscanf(p + 23, "%d hour", &h) != 1 || h < 1 ||
        h > 24 * 365)
        return 0;
    return h * 3600;
}

int shim_e2b_create(struct shim_e2b_api *a, const char *const *metadata, int timeout_s,
                    struct shim_e2b_box *out)
{
    static const char what[] = "creating a sandbox";
    cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");
    struct shim_http_resp r;
    char *body;
    size_t i;
    int rc;

    cJSON_AddStringToObject(o, "templateID", a->cfg->e2b_template);
    cJSON_AddNumberToObject(o, "timeout", timeout_s);
    for (i = 0; metadata && metadata[i] && metadata[i + 1]; i += 2)
        cJSON_AddStringToObject(md, metadata[i], metadata[i + 1]);
    cJSON_AddBoolToObject(o, "secure", 1);
    cJSON_AddBoolToObject(o, "allow_internet_access", a->cfg->e2b_internet != 0);
    body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!body)
        return -ENOMEM;
    a->max_timeout_s = 0;
    rc = cp_call(a, "POST", "/sandboxes", body, CP_BODY_MAX, &r, what);
    free(body);
    if (rc == 0)
        rc = parse_box(a, &r, out, what);
    else if (r.status == 400)
        a->max_timeout_s = team_maximum(&r);
    shim_http_resp_free(&r);
    return rc;
}

int shim_e2b_get(struct shim_e2b_api *a, const char *id, struct shim_e2b_box *out)
{
    static const char what[] = "looking up a session's sandbox";
    struct shim_http_resp r;
    char path[200];
    int rc;

    snprintf(path, sizeof(path), "/sandboxes/%s", id);
    rc = cp_call(a, "GET", path, NULL, CP_BODY_MAX, &r, what);
    if (rc == 0)
        rc = parse_box(a, &r, out, what);
    shim_http_resp_free(&r);
    return rc;
}

/* e2b's paging token into a query value: it is opaque, so every byte
 * outside [A-Za-z0-9-._~] is percent-encoded (url.c). -1 when it does
 * not fit. */
static int query_value(const char *v, char *out, size_t n)
{
    return shim_url_escape(v, out, n) < 0 ? -1 : 0;
}

int shim_e2b_list(struct shim_e2b_api *a, const char *key, const char *value,
                  struct shim_e2b_box *out, size_t max, size_t *n)
{
    static const char what[] = "listing sandboxes";
    char path[1400], next[800] = "";
    int rc, pages, more;

    *n = 0;
    /* e2b's GET /v2/sandboxes pages (limit at most 100) with X-Next-Token,
     * sent back as nextToken; the filter is one value, the url-encoded
     * pairs k=v as e2b's SDKs build it (both are [a-z0-9_] here) */
    for (pages = 0; pages < LIST_MAX_PAGES; pages++) {
        struct shim_http_resp r;
        const cJSON *it;
        cJSON *arr;

        snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s%%3D%s&state=running&limit=100%s%s",
                 key, value, next[0] ? "&nextToken=" : "", next);
        rc = cp_call(a, "GET", path, NULL, LIST_MAX_BODY, &r, what);
        if (rc) {
            shim_http_resp_free(&r);
            return rc;
        }
        arr = shim_json_parse(r.body, r.len);
        if (!cJSON_IsArray(arr) || (r.next_token[0] && query_value(r.next_token, next,
                                                                   sizeof(next)) < 0)) {
            shim_http_resp_free(&r);
            cJSON_Delete(arr);
            snprintf(a->why, sizeof(a->why), "e2b sent an answer codeshim cannot use while %s",
                     what);
            return -EPROTO;
        }
        cJSON_ArrayForEach(it, arr)
        {
            if (*n < max && box_of(it, &out[*n]) == 0)
                (*n)++;
        }
        cJSON_Delete(arr);
        more = r.next_token[0] && *n < max;
        shim_http_resp_free(&r);
        if (!more)
            return 0;
    }
    return 0;
}

int shim_e2b_set_timeout(struct shim_e2b_api *a, const char *id, int timeout_s)
{
    struct shim_http_resp r;
    char path[200], body[64];
    int rc;

    snprintf(path, sizeof(path), "/sandboxes/%s/timeout", id);
    snprintf(body, sizeof(body), "{\"timeout\":%d}", timeout_s);
    rc = cp_call(a, "POST", path, body, CP_BODY_MAX, &r, "extending a sandbox's timeout");
    shim_http_resp_free(&r);
    return rc;
}

int shim_e2b_kill(struct shim_e2b_api *a, const char *id)
{
    struct shim_http_resp r;
    char path[200];
    int rc;

    snprintf(path, sizeof(path), "/sandboxes/%s", id);
    rc = cp_call(a, "DELETE", path, NULL, CP_BODY_MAX, &r, "killing a sandbox");
    shim_http_resp_free(&r);
    return rc;
}

/* ---------------- the data plane ---------------- */

/* URL and headers for path on the sandbox's code-interpreter server. */
struct dp_target {
    char url[1400];
    char h[5][600];
    const char *hdr[7];
};

static void dp_target_at(const struct shim_e2b_api *a, const struct shim_e2b_box *b,
                         const char *port, const char *path, const char *ctype,
                         struct dp_target *t)
{
    const char *base = a->cfg->e2b_sandbox_url;
    size_t n = strlen(base), k = 0, i;

    while (n && base[n - 1] == '/')
        n--;
    if (n)
        snprintf(t->url, sizeof(t->url), "%.*s%s", (int)n, base, path);
    else
        snprintf(t->url, sizeof(t->url), "https://%s-%s.%s%s", port, b->id,
                 b->domain[0] ? b->domain : a->cfg->e2b_domain, path);
    snprintf(t->h[k++], sizeof(t->h[0]), "Content-Type: %s", ctype);
    snprintf(t->h[k++], sizeof(t->h[0]), "E2b-Sandbox-Id: %s", b->id);
    snprintf(t->h[k++], sizeof(t->h[0]), "E2b-Sandbox-Port: %s", port);
    if (b->envd_token[0])
        snprintf(t->h[k++], sizeof(t->h[0]), "X-Access-Token: %s", b->envd_token);
    if (b->traffic_token[0])
        snprintf(t->h[k++], sizeof(t->h[0]), "E2B-Traffic-Access-Token: %s", b->traffic_token);
    for (i = 0; i < k; i++)
        t->hdr[i] = t->h[i];
    t->hdr[k] = NULL;
}

static void dp_target(const struct shim_e2b_api *a, const struct shim_e2b_box *b,
                      const char *path, struct dp_target *t)
{
    dp_target_at(a, b, JUPYTER_PORT, path, "application/json", t);
}

static void dp_forget(struct dp_target *t)
{
    memset(t, 0, sizeof(*t)); /* the tokens */
}

/* fail() for a sandbox's own host: a 401/403 there is envd refusing the
 * sandbox's access token (X-Access-Token), not e2b refusing the key. */
static int dp_fail(struct shim_e2b_api *a, int rc, const struct shim_http_resp *r,
                   const char *what)
{
    if (rc < 0 || (r->status != 401 && r->status != 403))
        return fail(a, rc, r, what);
    a->status = r->status;
    snprintf(a->why, sizeof(a->why), "the sandbox refused its access token (HTTP %ld) "
             "while %s", r->status, what);
    return -EACCES;
}

/* Logged from a function whose name the log shows (see e2b.c). */
static void stream_broke(const char *why)
{
    LOG_WARN("e2b: the execution's stream broke off (%s)", why);
}

static int on_line(void *ud, const char *line, size_t len)
{
    return shim_e2b_ndjson_line(ud, line, len) < 0;
}

static int stop_asked(void *ud)
{
    const struct shim_exec_stop *stop = ud;
    return stop->fn(stop->ctx) != 0;
}

int shim_e2b_execute(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *code,
                     size_t len, const struct shim_exec_stop *stop,
                     struct shim_exec_result *out, enum shim_e2b_exec_end *end,
                     double *seconds)
{
    int timeout_s = a->cfg->exec_timeout_s > 0 ? a->cfg->exec_timeout_s : 60;
    size_t cap = a->cfg->output_cap ? a->cfg->output_cap : 20000;
    struct shim_e2b_ndjson nd;
    struct shim_http_resp r;
    struct shim_http_req rq;
    struct dp_target t;
    char *body = NULL, *c = strndup(code, len);
    cJSON *o = cJSON_CreateObject();
    int rc;

    memset(out, 0, sizeof(*out));
    *seconds = 0;
    if (c && o && cJSON_AddStringToObject(o, "code", c) &&
        cJSON_AddStringToObject(o, "language", "python"))
        body = cJSON_PrintUnformatted(o);
    free(c);
    cJSON_Delete(o);
    if (!body || shim_e2b_ndjson_init(&nd, cap + 4096) < 0) {
        free(body);
        return -ENOMEM;
    }
    dp_target(a, b, "/execute", &t);
    memset(&rq, 0, sizeof(rq));
    rq.method = "POST";
    rq.url = t.url;
    rq.headers = t.hdr;
    rq.body = body;
    rq.body_len = strlen(body);
    rq.connect_ms = CP_CONNECT_MS;
    rq.total_ms = (long)timeout_s * 1000 + 1000;
    rq.max_body = 4 * cap + STREAM_SLACK;
    rq.on_line = on_line;
    rq.ud = &nd;
    rq.max_line = LINE_MAX_BYTES;
    if (stop) {
        rq.stop = stop_asked;
        rq.stop_ud = (void *)stop;
    }
    rc = shim_http_do(a->dp, &rq, &r);
    dp_forget(&t);
    free(body);
    *seconds = r.seconds;
    a->status = r.status;
    if (r.interrupted) { /* what came is nobody's now */
        *end = SHIM_E2B_STOPPED;
        shim_http_resp_free(&r);
        shim_e2b_ndjson_free(&nd);
        return 0;
    }
    if (rc < 0 || r.status < 200 || r.status >= 300) {
        *end = rc < 0 ? (r.timed_out || rc == -ETIMEDOUT ? SHIM_E2B_TIMEOUT : SHIM_E2B_NOREPLY)
               : r.status == 502 || r.status == 404 ? SHIM_E2B_GONE : SHIM_E2B_REFUSED;
        if (*end != SHIM_E2B_TIMEOUT)
            dp_fail(a, rc, &r, "running the code");
        shim_http_resp_free(&r);
        shim_e2b_ndjson_free(&nd);
        return 0;
    }
    if (r.truncated)
        nd.cut_at = rq.max_body;
    if (r.timed_out) /* said by the caller, not as a broken stream */
        nd.ended = 1;
    *end = r.timed_out ? SHIM_E2B_TIMEOUT : SHIM_E2B_RAN;
    if (r.incomplete && !r.timed_out && !r.truncated)
        stream_broke(r.error);
    shim_http_resp_free(&r);
    return shim_e2b_ndjson_finish(&nd, out);
}

/* POST /contexts/{id}/restart for each Python context GET /contexts lists. */
int shim_e2b_restart(struct shim_e2b_api *a, const struct shim_e2b_box *b)
{
    struct shim_http_req rq;
    struct shim_http_resp r;
    struct dp_target t;
    const cJSON *it;
    cJSON *arr;
    int rc, restarted = 0;

    dp_target(a, b, "/contexts", &t);
    memset(&rq, 0, sizeof(rq));
    rq.method = "GET";
    rq.url = t.url;
    rq.headers = t.hdr;
    rq.connect_ms = CP_CONNECT_MS;
    rq.total_ms = CP_TOTAL_MS;
    rq.max_body = CP_BODY_MAX;
    rc = shim_http_do(a->dp, &rq, &r);
    arr = rc == 0 && r.status == 200 ? shim_json_parse(r.body, r.len) : NULL;
    shim_http_resp_free(&r);
    cJSON_ArrayForEach(it, arr)
    {
        const char *id = shim_json_str(it, "id"), *lang = shim_json_str(it, "language");
        char path[300], tok[200];

        if (!id || (lang && strcmp(lang, "python")) || copy_token(tok, sizeof(tok), id) < 0)
            continue;
        snprintf(path, sizeof(path), "/contexts/%s/restart", tok);
        dp_target(a, b, path, &t);
        rq.method = "POST";
        rq.url = t.url;
        rq.headers = t.hdr;
        if (shim_http_do(a->dp, &rq, &r) == 0 && r.status == 200)
            restarted++;
        shim_http_resp_free(&r);
    }
    dp_forget(&t);
    cJSON_Delete(arr);
    return restarted ? 0 : -EIO;
}

/* ---------------- envd's file API ---------------- */

/* "/files?username=user&path=<abs, percent-encoded>" into out: each
 * part between the '/'s encoded (url.c), the '/'s kept as e2b's SDKs send
 * them. */
static int files_path(const char *abs, char *out, size_t n)
{
    size_t k = (size_t)snprintf(out, n, "/files?username=user&path=");
    char part[1024];
    int rc;

    if (k >= n)
        return -ENAMETOOLONG;
    for (;;) {
        size_t pl = strcspn(abs, "/");
        if (pl >= sizeof(part))
            return -ENAMETOOLONG;
        memcpy(part, abs, pl);
        part[pl] = '\0';
        if ((rc = shim_url_escape(part, out + k, n - k)) < 0)
            return rc;
        k += strlen(out + k);
        if (!abs[pl])
            return 0;
        if (k + 2 > n)
            return -ENAMETOOLONG;
        out[k++] = '/';
        out[k] = '\0';
        abs += pl + 1;
    }
}

/* One call of envd's file API on abs; r holds the answer (free it). */
static int envd_call(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *method,
                     const char *abs, const char *ctype, const void *body, size_t len,
                     size_t max, struct shim_http_resp *r)
{
    struct shim_http_req rq;
    struct dp_target t;
    char path[2048];
    int rc;

    memset(r, 0, sizeof(*r));
    if (files_path(abs, path, sizeof(path)) < 0)
        return -ENAMETOOLONG;
    dp_target_at(a, b, ENVD_PORT, path, ctype, &t);
    memset(&rq, 0, sizeof(rq));
    rq.method = method;
    rq.url = t.url;
    rq.headers = t.hdr;
    rq.body = body;
    rq.body_len = len;
    rq.connect_ms = CP_CONNECT_MS;
    rq.total_ms = CP_TOTAL_MS * 4;
    rq.max_body = max;
    rc = shim_http_do(a->dp, &rq, r);
    dp_forget(&t);
    a->status = r->status;
    return rc;
}

int shim_e2b_file_get(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *abs,
                      size_t max, char **out, size_t *len)
{
    struct shim_http_resp r;
    int rc = envd_call(a, b, "GET", abs, "application/octet-stream", NULL, 0, max + 1, &r);

    *out = NULL;
    *len = 0;
    if (rc == 0 && r.status == 200 && !r.truncated && r.len <= max) {
        *out = r.body;
        *len = r.len;
        r.body = NULL;
    } else if (rc != -ENAMETOOLONG) {
        rc = rc < 0 ? rc : r.status == 404 || r.status == 400 ? -ENOENT
             : r.truncated || r.len > max ? -EFBIG : -EIO;
        if (rc == -EIO)
            rc = dp_fail(a, 0, &r, "reading a file of the sandbox");
    }
    shim_http_resp_free(&r);
    return rc;
}

/* Whether the sandbox's envd takes a raw body (0.5.7 and later). */
static int envd_takes_raw(const struct shim_e2b_box *b)
{
    int v[3] = {0, 0, 0};

    if (sscanf(b->envd_version, "%d.%d.%d", &v[0], &v[1], &v[2]) < 2)
        return 0; /* unknown: the form every envd takes */
    if (v[0] != ENVD_RAW_UPLOAD_MAJOR)
        return v[0] > ENVD_RAW_UPLOAD_MAJOR;
    if (v[1] != ENVD_RAW_UPLOAD_MINOR)
        return v[1] > ENVD_RAW_UPLOAD_MINOR;
    return v[2] >= ENVD_RAW_UPLOAD_PATCH;
}

/* data as multipart/form-data, one part named "file" (envd's upload.go);
 * ctype gets the header's value. A new buffer, or NULL. */
static char *multipart_of(const char *abs, const void *data, size_t len, char *ctype,
                          size_t ctype_n, size_t *out_len)
{
    const char *base = strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
    char bound[48], fname[256], head[600], *out;
    size_t i, hn, tn;
    int tries;

    for (tries = 0;; tries++) { /* a boundary the data does not hold */
        shim_id_make(bound, sizeof(bound), "codeshim-", 32);
        if (!len || !memmem(data, len, bound, strlen(bound)) || tries >= 4)
            break;
    }
    snprintf(fname, sizeof(fname), "%s", base);
    for (i = 0; fname[i]; i++)
        if (fname[i] == '"' || fname[i] == '\\' || (unsigned char)fname[i] < 0x20)
            fname[i] = '_';
    hn = (size_t)snprintf(head, sizeof(head), "--%s\r\nContent-Disposition: form-data; "
                          "name=\"file\"; filename=\"%s\"\r\nContent-Type: "
                          "application/octet-stream\r\n\r\n", bound, fname);
    tn = strlen(bound) + 8; /* "\r\n--" bound "--\r\n" */
    if (hn >= sizeof(head) || len > (size_t)-1 - hn - tn - 1 || !(out = malloc(hn + len + tn + 1)))
        return NULL;
    memcpy(out, head, hn);
    if (len)
        memcpy(out + hn, data, len);
    snprintf(out + hn + len, tn + 1, "\r\n--%s--\r\n", bound);
    snprintf(ctype, ctype_n, "multipart/form-data; boundary=%s", bound);
    *out_len = hn + len + tn;
    return out;
}

int shim_e2b_file_put(struct shim_e2b_api *a, const struct shim_e2b_box *b, const char *abs,
                      const void *data, size_t len)
{
    struct shim_http_resp r;
    char ctype[128] = "application/octet-stream", *form = NULL;
    size_t n = len;
    int rc;

    if (!envd_takes_raw(b) && !(form = multipart_of(abs, data, len, ctype, sizeof(ctype), &n)))
        return -ENOMEM;
    rc = envd_call(a, b, "POST", abs, ctype, form ? form : data, n, CP_BODY_MAX, &r);
    free(form);
    if (rc < 0)
        fail(a, rc, &r, "writing a file into the sandbox");
    else if (r.status < 200 || r.status >= 300) {
        rc = dp_fail(a, 0, &r, "writing a file into the sandbox");
        if (r.status == 507)
            rc = -ENOSPC;
    }
    shim_http_resp_free(&r);
    return rc;
}
