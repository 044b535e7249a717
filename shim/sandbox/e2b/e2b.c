/* e2b.c - the e2b backend's ops table (CODESHIM_SANDBOX=e2b): the code
 * runs in an e2b sandbox (e2b's cloud, or a self-hosted e2b) made from
 * CODESHIM_E2B_TEMPLATE, through its code-interpreter server's /execute.
 * The other files of the backend are listed in e2b_int.h.
 *
 * A private sandbox (one request's) is created at its first execution
 * (the loop opens a sandbox only when the model runs code, so a request
 * that never does costs no e2b call) with e2b's default lifetime, extended
 * when a long request needs more, and killed (DELETE) at destroy.
 *
 * A tagged sandbox (a session's, shim_sandbox_open_at) is found again in
 * e2b itself, so no local process has to stay alive between program runs:
 * it carries metadata that holds only hashes (owner, session, container)
 * and a random nonce from which its container id is derived, so every run
 * that finds it reports the same id. It is looked up when opened
 * (GET /v2/sandboxes?metadata=..., then GET /sandboxes/{id} for its access
 * token), else created then, after making room under the per-owner cap
 * (the sandbox e2b ends first, smallest endAt, is the least recently used:
 * every use sets its timeout to the session TTL). It is never killed at
 * destroy; e2b ends it when the TTL passes unused. A local marker per
 * session (its last container id, under the runtime directory) lets the
 * next request's model hear that an ended sandbox's state is gone.
 *
 * No timeout sent is over the team's maximum once e2b has named it (a
 * create's 400); the session TTL is clamped to it.
 *
 * Failures become results whose text tells the model what happened; an
 * execution is sent again only when e2b's proxy said the sandbox was not
 * there (502/404: the code did not run): briefly after create (e2b's
 * proxy answers 502 for a moment), or once on a new sandbox when the old
 * one vanished, the model told that its state and files are gone. A
 * timed-out execution is interrupted: the connection closed (e2b's server
 * then interrupts the kernel) and the Python context restarted; the
 * restarted one is back in /home/user, so /mnt/data is made the working
 * directory again before the next code. A file that cannot be placed is
 * named, with why, in a warning and a note for the model.
 *
 * An execution whose request is stopped (shim_sandbox_exec_until: the
 * program's deadline, its progress callback, its transfer removed) is
 * dropped the same way at once, a session's context restarted, and the
 * session's next execution, in whichever later request or program run,
 * tells the model the interpreter was restarted: the setup cell marks
 * each interpreter it sets up, so one found unmarked was restarted. A
 * session's executions on this machine take turns (a lock under the
 * runtime directory), so the next one cannot slip in between a stopped
 * one and its restart. */
#include "sandbox/e2b/e2b_int.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "base/ids.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sha256.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "system/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PRIVATE_TIMEOUT_S 300 /* e2b's SDK default */
#define FRESH_TRIES 6         /* 502s right after create: 0.1+0.2+...+3.2 s */
#define MAX_OVER_CAP 16 /* sandboxes listed past the cap (other runs' races) */
#define TEAM_MAX_KEEP_S 86400 /* a remembered team maximum is trusted a day */

struct e2b {
    const struct shim_config *cfg;
    struct shim_e2b_api api;
    struct shim_e2b_box box;
    int have_box;
    int fresh;          /* created here and not yet reached */
    int made;           /* tagged: created by the open, not found again */
    double deadline;    /* private: when e2b ends it (clock seconds) */
    int tagged;
    char owner[65], session[65], salt[65];
    int cap, ttl_s;
    char cid[64];       /* tagged: derived from salt and nonce */
    char want[64];      /* tagged by container only: the one looked for */
    char note[512];
    char err[600];      /* an open-time failure, said at the next exec */
    double create_s;    /* create time not yet reported */
    int team_max_s;     /* the longest life e2b gives this key's team's
                           sandboxes (1 h hobby, 24 h pro) once a create's
                           400 said it, else 0: no timeout sent is over it */
    int dir_ready;      /* /mnt/data made and the working directory */
    int kernel_known;   /* what the interpreter lost is known here (the
                           sandbox made here, or the model told): a fresh
                           one at the next setup cell needs no note */
    int lost;           /* the next execution says the interpreter was
                           restarted before it */
    char *listing;      /* the last listing of /mnt/data (JSON), or NULL */
};

/* What codeshim runs in the sandbox itself, around the model's code (each
 * an execution of its own; their names start with _cs_ and are deleted):
 * e2b_setup.py, e2b_list.py, e2b_remove.py, embedded by sandbox.mk as
 * build/gen/e2b_cells.c. */
extern const char shim_e2b_setup_py[];
extern const char shim_e2b_list_py[];
extern const char shim_e2b_remove_py[];

/* ---------------- names ---------------- */

static void hash2(const char *tag, const char *a, const char *b, size_t nbytes, char *out)
{
    const char *parts[] = {a, b};

    shim_sha256_tagged_hex(tag, parts, 2, nbytes, out);
}

static void derive_cid(const char *salt, const char *nonce, char out[64])
{
    memcpy(out, "cntr_", 5);
    hash2("codeshim-e2b-cntr-v1", salt, nonce, 24, out + 5);
}

static void container_tag(const char *salt, const char *cid, char out[65])
{
    hash2("codeshim-e2b-cref-v1", salt, cid, 16, out);
}

/* ---------------- finding and making sandboxes ---------------- */

/* A timeout e2b accepts: at least 1 s, at most the team's maximum. */
static int life(const struct e2b *e, int want_s)
{
    if (want_s < 1)
        want_s = 1;
    return e->team_max_s > 0 && want_s > e->team_max_s ? e->team_max_s : want_s;
}

/* <runtime>/e2b/team-<H(key, control plane)> remembers the team's maximum
 * and when e2b said it ("3600 <unix time>"), so later program runs ask for
 * no more; after a day it is asked again (the team may have changed tier). */
static int team_path(const struct e2b *e, char *out, size_t n)
{
    char dir[1024], name[40];
    int rc = shim_store_root(e->cfg, "e2b", dir, sizeof(dir));

    if (rc < 0)
        return rc;
    memcpy(name, "team-", 5);
    hash2("codeshim-e2b-team-v1", e->cfg->e2b_api_key, e->cfg->e2b_api_url, 16, name + 5);
    return shim_fileio_join(out, n, dir, name);
}

static void team_max_load(struct e2b *e)
{
    char path[1200], text[64];
    long long at, now = (long long)shim_clock_wall_s();
    int max;

    if (team_path(e, path, sizeof(path)) == 0 &&
        shim_store_read(path, text, sizeof(text), 1) == 0 &&
        sscanf(text, "%d %lld", &max, &at) == 2 && max >= 3600 && max <= 366 * 86400 &&
        at <= now + 60 && now - at <= TEAM_MAX_KEEP_S)
        e->team_max_s = max;
}

/* A create's 400 named the team's maximum: kept, and said once. */
static void team_max_learn(struct e2b *e, int max)
{
    char path[1200], text[64];

    e->team_max_s = max;
    LOG_WARN("e2b keeps this team's sandboxes at most %d s: a session lives that long "
             "(CODESHIM_SESSION_TTL asks %d s)", max, e->ttl_s);
    snprintf(text, sizeof(text), "%d %lld", max, (long long)shim_clock_wall_s());
    if (team_path(e, path, sizeof(path)) < 0 || shim_store_write(path, text) < 0)
        LOG_INFO("e2b: the team's maximum is not remembered for later runs");
}

/* The session's marker: <runtime>/e2b/<session hash> holds the container
 * id of the sandbox last made for it, so that a session whose sandbox e2b
 * has ended is told so (e2b lists ended sandboxes nowhere). */
static int marker_path(const struct e2b *e, char *out, size_t n)
{
    char dir[1024];
    int rc;

    if (!e->tagged || !e->session[0])
        return -ENOENT;
    rc = shim_store_root(e->cfg, "e2b", dir, sizeof(dir));
    return rc < 0 ? rc : shim_fileio_join(out, n, dir, e->session);
}

/* Kills the owner's sandboxes that e2b ends first until one more fits. */
static void make_room(struct e2b *e)
{
    size_t max = (size_t)(e->cap > 0 ? e->cap : 1) + MAX_OVER_CAP;
    struct shim_e2b_box *l = calloc(max, sizeof(*l));
    size_t n = 0, live, i;

    if (!l || shim_e2b_list(&e->api, "codeshim_owner", e->owner, l, max, &n) < 0) {
        if (l)
            LOG_WARN("e2b: cannot count this identity's sessions: %s", e->api.why);
        free(l);
        return;
    }
    for (live = n; live >= (size_t)(e->cap > 0 ? e->cap : 1); live--) {
        size_t old = n;
        for (i = 0; i < n; i++)
            if (l[i].id[0] && (old == n || l[i].end_at < l[old].end_at))
                old = i;
        if (old == n)
            break;
        LOG_INFO("session cap (%d) reached: closing the least recently used session", e->cap);
        if (shim_e2b_kill(&e->api, l[old].id) < 0 && e->api.status != 404)
            LOG_WARN("e2b: %s", e->api.why);
        l[old].id[0] = '\0';
    }
    memset(l, 0, max * sizeof(*l));
    free(l);
}

static int create_box(struct e2b *e)
{
    char nonce[40], cref[65], path[1200], old[64];
    const char *md[10];
    double t0 = shim_clock_s();
    size_t k = 0;
    int rc, want;

    if (e->tagged) {
        make_room(e);
        shim_id_make(nonce, sizeof(nonce), "", 32);
        derive_cid(e->salt, nonce, e->cid);
        container_tag(e->salt, e->cid, cref);
        md[k++] = "codeshim_owner";
        md[k++] = e->owner;
        if (e->session[0]) {
            md[k++] = "codeshim_session";
            md[k++] = e->session;
        }
        md[k++] = "codeshim_cntr";
        md[k++] = cref;
        md[k++] = "codeshim_nonce";
        md[k++] = nonce;
    } else {
        md[k++] = "codeshim";
        md[k++] = "request";
    }
    md[k] = NULL;
    want = life(e, e->tagged ? e->ttl_s : PRIVATE_TIMEOUT_S);
    rc = shim_e2b_create(&e->api, md, want, &e->box);
    if (rc == -EINVAL && e->api.max_timeout_s > 0 && e->api.max_timeout_s < want) {
        team_max_learn(e, e->api.max_timeout_s);
        rc = shim_e2b_create(&e->api, md, life(e, want), &e->box);
    }
    e->create_s += shim_clock_s() - t0;
    if (rc < 0)
        return rc;
    e->have_box = e->fresh = e->kernel_known = 1;
    e->deadline = shim_clock_s() + life(e, PRIVATE_TIMEOUT_S);
    LOG_INFO("e2b sandbox created in %.3f s", shim_clock_s() - t0);
    if (marker_path(e, path, sizeof(path)) == 0) {
        if (shim_store_read(path, old, sizeof(old), 1) == 0 && !strncmp(old, "cntr_", 5) &&
            strcmp(old, e->cid))
            snprintf(e->note, sizeof(e->note), "[Note: this session's earlier e2b sandbox %s "
                     "has ended (e2b ends a sandbox unused for %d s, or it was removed); its "
                     "variables, imports and files are gone. This is a new sandbox (%s).]\n",
                     old, life(e, e->ttl_s), e->cid);
        if (shim_store_write(path, e->cid) < 0)
            LOG_INFO("e2b: this session's sandbox is not remembered locally");
    }
    return 0;
}

/* The tagged sandbox, if e2b still runs it: 1 found, 0 not, -errno. */
static int find_box(struct e2b *e, const char *want_cid)
{
    struct shim_e2b_box l[8];
    char cref[65], cid[64];
    size_t n = 0, i, best = 0;
    int rc;

    if (e->session[0])
        rc = shim_e2b_list(&e->api, "codeshim_session", e->session, l, 8, &n);
    else {
        container_tag(e->salt, want_cid, cref);
        rc = shim_e2b_list(&e->api, "codeshim_cntr", cref, l, 8, &n);
    }
    if (rc < 0)
        return rc;
    for (i = 1; i < n; i++) /* two runs raced: the one e2b keeps longest */
        if (l[i].end_at > l[best].end_at)
            best = i;
    if (!n || !l[best].nonce[0])
        return 0;
    derive_cid(e->salt, l[best].nonce, cid);
    if (!e->session[0] && strcmp(cid, want_cid))
        return 0;
    rc = shim_e2b_get(&e->api, l[best].id, &e->box); /* the access token */
    memset(l, 0, sizeof(l));
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    memcpy(e->cid, cid, sizeof(cid));
    e->have_box = 1;
    return 1;
}

static void drop_box(struct e2b *e)
{
    memset(&e->box, 0, sizeof(e->box));
    e->have_box = e->fresh = 0;
}

/* ---------------- results ---------------- */

static int text_result(struct shim_exec_result *out, enum shim_exec_status st, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));
static int text_result(struct shim_exec_result *out, enum shim_exec_status st, const char *fmt,
                       ...)
{
    char text[1024];
    va_list ap;

    shim_exec_result_free(out);
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    LOG_WARN("%.*s", (int)strcspn(text, "\n"), text);
    out->status = st;
    out->logs = strdup(text);
    if (!out->logs)
        return -ENOMEM;
    out->logs_len = strlen(text);
    return 0;
}

/* Appends text to out->logs, on a line of its own. */
static int append(struct shim_exec_result *out, const char *text)
{
    size_t n = strlen(text), nl = out->logs_len && out->logs[out->logs_len - 1] != '\n';
    char *t = realloc(out->logs, out->logs_len + nl + n + 1);

    if (!t)
        return -ENOMEM;
    if (nl)
        t[out->logs_len++] = '\n';
    memcpy(t + out->logs_len, text, n + 1);
    out->logs = t;
    out->logs_len += n;
    return 0;
}

/* ---------------- the ops ----------------
 * (No function here is named e2b_*: log lines carry the function's name,
 * and the log masks anything that looks like an e2b key, e2b_...) */

static int box_new(const struct shim_config *cfg, const struct shim_http_net *net,
                   struct e2b **out)
{
    struct shim_http_net dflt = {0};
    struct e2b *e = calloc(1, sizeof(*e));
    int rc;

    if (!e)
        return -ENOMEM;
    e->cfg = cfg;
    rc = shim_e2b_api_init(&e->api, cfg, net ? net : &dflt);
    if (rc < 0) {
        free(e);
        return rc;
    }
    team_max_load(e);
    *out = e;
    return 0;
}

static int op_create_at(const struct shim_config *cfg, const struct shim_http_net *net,
                         const struct shim_sandbox_tag *tag, void **state)
{
    struct e2b *e;
    int rc = box_new(cfg, net, &e);

    if (rc < 0)
        return rc;
    *state = e;
    if (!tag)
        return 0; /* created at the first execution */
    e->tagged = 1;
    snprintf(e->owner, sizeof(e->owner), "%s", tag->owner);
    snprintf(e->session, sizeof(e->session), "%s", tag->session ? tag->session : "");
    snprintf(e->salt, sizeof(e->salt), "%s", tag->salt);
    e->cap = tag->cap;
    e->ttl_s = tag->ttl_s > 0 ? tag->ttl_s : 900;
    snprintf(e->want, sizeof(e->want), "%s", tag->container ? tag->container : "");
    rc = find_box(e, e->want);
    if ((rc == 0 && (!e->session[0] || tag->find_only)) || (rc < 0 && tag->find_only)) {
        /* only an existing one will do */
        shim_e2b_api_free(&e->api);
        free(e);
        *state = NULL;
        return rc < 0 ? rc : -ENOENT;
    }
    if (rc == 0 && (rc = create_box(e)) == 0)
        e->made = 1;
    if (rc < 0) /* said at the first execution, which tries again */
        snprintf(e->err, sizeof(e->err), "%s", e->api.why);
    else
        LOG_INFO("e2b: %s session sandbox %s", rc ? "attached to" : "created", e->cid);
    return 0;
}

static int op_create(const struct shim_config *cfg, void **state)
{
    return op_create_at(cfg, NULL, NULL, state);
}

/* A private sandbox that a long request would outlive gets more time. */
static void keep_alive(struct e2b *e)
{
    int need = (e->cfg->exec_timeout_s > 0 ? e->cfg->exec_timeout_s : 60) + 60;

    if (e->tagged || e->deadline - shim_clock_s() > need)
        return;
    if (shim_e2b_set_timeout(&e->api, e->box.id, life(e, PRIVATE_TIMEOUT_S)) == 0)
        e->deadline = shim_clock_s() + life(e, PRIVATE_TIMEOUT_S);
}

/* Sends the code; a 502 just after create is retried briefly. */
static int send_code(struct e2b *e, const char *code, size_t len,
                     const struct shim_exec_stop *stop, struct shim_exec_result *out,
                     enum shim_e2b_exec_end *end, double *secs)
{
    long wait_ms = 100;
    double s;
    int i, rc = 0;

    *secs = 0;
    for (i = 0; i < FRESH_TRIES; i++) {
        struct timespec ts;

        rc = shim_e2b_execute(&e->api, &e->box, code, len, stop, out, end, &s);
        *secs += s;
        if (rc < 0 || *end != SHIM_E2B_GONE || !e->fresh)
            break;
        ts.tv_sec = wait_ms / 1000;
        ts.tv_nsec = (wait_ms % 1000) * 1000000L;
        nanosleep(&ts, NULL);
        wait_ms *= 2;
    }
    if (rc == 0 && *end != SHIM_E2B_GONE)
        e->fresh = 0;
    return rc;
}

static void make_dir(struct e2b *e);

/* The model is told right here that the state is lost; a session's new
 * interpreter is set up at once, so that the session's next request,
 * finding it set up, does not say so again. */
static int timed_out(struct e2b *e, struct shim_exec_result *out)
{
    char text[300];
    int rc;

    out->status = SHIM_EXEC_TIMEOUT;
    if (!out->logs && !(out->logs = strdup("")))
        return -ENOMEM;
    e->dir_ready = 0; /* a restarted context is back in /home/user */
    e->kernel_known = 1;
    if (shim_e2b_restart(&e->api, &e->box) == 0) {
        snprintf(text, sizeof(text), "Execution timed out after %d s; the Python interpreter "
                 "was restarted and its state (variables, imports) was lost.\n",
                 e->cfg->exec_timeout_s > 0 ? e->cfg->exec_timeout_s : 60);
        if (e->tagged)
            make_dir(e);
    } else
        snprintf(text, sizeof(text), "Execution timed out after %d s and was interrupted; "
                 "the e2b sandbox could not restart the interpreter, so the code may still "
                 "be running.\n", e->cfg->exec_timeout_s > 0 ? e->cfg->exec_timeout_s : 60);
    rc = append(out, text);
    return rc;
}

/* The execution's request was stopped (stop said so) and its connection
 * dropped, which makes e2b's server interrupt the kernel. A session's is
 * restarted too, as after a timeout (code that ignores the interrupt may
 * still run), so the state is lost as with the local backend, whose text
 * this is; the session's next setup cell finds the new interpreter, and
 * its next execution says so. A private sandbox ends with its request
 * (destroy kills it), so it is not restarted first. */
static int interrupted(struct e2b *e, struct shim_exec_result *out)
{
    int ok = 1;

    e->dir_ready = e->kernel_known = 0;
    if (!e->tagged)
        return text_result(out, SHIM_EXEC_FAILED, "Execution interrupted: the request that "
                           "ran it was stopped (its time limit, or its program); its e2b "
                           "sandbox ends with it.\n");
    if (shim_e2b_restart(&e->api, &e->box) < 0) {
        ok = 0;
        LOG_WARN("e2b: the interrupted interpreter was not restarted: %s", e->api.why);
    }
    return text_result(out, SHIM_EXEC_FAILED, "Execution interrupted: the request that ran it "
                       "was stopped (its time limit, or its program); %s\n",
                       ok ? "the Python interpreter was restarted and its state (variables, "
                            "imports) was lost."
                          : "the e2b sandbox could not restart the Python interpreter, so "
                            "the code may still be running.");
}

static int exec_on_box(struct e2b *e, const char *code, size_t len,
                       const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    enum shim_e2b_exec_end end;
    double secs;
    int rc;

    keep_alive(e);
    rc = send_code(e, code, len, stop, out, &end, &secs);
    if (rc < 0)
        return rc;
    out->remote_seconds = secs;
    switch (end) {
    case SHIM_E2B_RAN:
        return 0;
    case SHIM_E2B_TIMEOUT:
        return timed_out(e, out);
    case SHIM_E2B_STOPPED:
        rc = interrupted(e, out);
        out->remote_seconds = secs;
        return rc;
    case SHIM_E2B_GONE:
        return 1; /* not run: the caller replaces the sandbox */
    case SHIM_E2B_REFUSED:
        return text_result(out, SHIM_EXEC_FAILED,
                           "Error: the e2b sandbox did not run the code (%s).\n", e->api.why);
    default:
        return text_result(out, SHIM_EXEC_FAILED,
                           "Error: the e2b sandbox stopped answering (%s); the code may have "
                           "run, partly or fully. It was not run again.\n", e->api.why);
    }
}

static int no_sandbox(struct e2b *e, struct shim_exec_result *out, const char *why)
{
    (void)e;
    return text_result(out, SHIM_EXEC_FAILED,
                       "Error: no e2b sandbox could be had (%s); the code was not run.\n", why);
}

/* A sandbox to run in: a tagged one is looked for again first (the
 * lookup at open may have failed), then made. */
static int ensure_box(struct e2b *e)
{
    int rc = e->tagged ? find_box(e, e->want) : 0;

    return rc < 0 ? rc : rc == 1 ? 0 : create_box(e);
}

/* Runs one of codeshim's own cells; its stdout into *text (caller frees),
 * or NULL when it did not run. */
static char *own_cell(struct e2b *e, const char *code)
{
    struct shim_exec_result r;
    enum shim_e2b_exec_end end;
    double secs;
    char *text = NULL;

    if (send_code(e, code, strlen(code), NULL, &r, &end, &secs) == 0 && end == SHIM_E2B_RAN &&
        r.status == SHIM_EXEC_OK && r.logs) {
        text = r.logs;
        r.logs = NULL;
    }
    shim_exec_result_free(&r);
    return text;
}

/* The setup cell says "fresh" when its interpreter never ran it: one
 * restarted since (an interrupted or timed-out execution of an earlier
 * request), whose loss the model hears of at the next execution unless
 * it was told already. */
static void make_dir(struct e2b *e)
{
    char *said = own_cell(e, shim_e2b_setup_py);

    if (said && !strncmp(said, "fresh", 5) && !e->kernel_known)
        e->lost = 1;
    free(said);
    e->dir_ready = e->kernel_known = 1;
}

/* The files of /mnt/data after an execution, as the local backend lists
 * them: names, and whether anything changed since the last listing. */
static void list_files(struct e2b *e, struct shim_exec_result *out)
{
    char *text = own_cell(e, shim_e2b_list_py);
    cJSON *arr = text ? shim_json_parse(text, strlen(text)) : NULL, *it;
    size_t n = 0;

    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        free(text);
        return;
    }
    out->files = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*out->files));
    cJSON_ArrayForEach(it, arr)
    {
        const char *name = cJSON_GetStringValue(cJSON_GetArrayItem(it, 0));
        if (out->files && name && n < SHIM_RESULT_MAX_FILES && (out->files[n] = strdup(name)))
            n++;
    }
    out->nfiles = n;
    out->files_changed = !e->listing || strcmp(e->listing, text);
    free(e->listing);
    e->listing = text;
    cJSON_Delete(arr);
}

#define LOST_NOTE                                                              \
    "[Note: the Python interpreter was restarted before this execution; "      \
    "its earlier state (variables, imports) was lost. Files in the working "   \
    "directory were kept.]\n"

/* Puts text before out->logs. */
static int prepend(struct shim_exec_result *out, const char *text)
{
    size_t n = strlen(text);
    char *t = malloc(n + out->logs_len + 1);

    if (!t)
        return -ENOMEM;
    memcpy(t, text, n);
    if (out->logs_len)
        memcpy(t + n, out->logs, out->logs_len);
    t[n + out->logs_len] = '\0';
    free(out->logs);
    out->logs = t;
    out->logs_len += n;
    return 0;
}

/* A session's sandbox runs one execution of this machine's requests at a
 * time, from its setup cell to its listing (and an interrupted one's
 * restart): else the next request's code, queued behind a stopped one,
 * could run before that restart and never hear of it. An OFD lock on a
 * byte of <runtime>/e2b/.run that the container id picks (a shared byte
 * only serialises two sandboxes), waited for while stop allows, up to
 * twice the time limit of the execution holding it: the descriptor
 * (closing it unlocks), -ECANCELED (stop said so), or another -errno
 * (then the execution runs unlocked, e2b's server serialising it still). */
static int run_lock(struct e2b *e, const struct shim_exec_stop *stop)
{
    char dir[1024], path[1100];
    int64_t until = shim_clock_ms() +
                    ((int64_t)(e->cfg->exec_timeout_s > 0 ? e->cfg->exec_timeout_s : 60) * 2 +
                     30) * 1000;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1};
    int fd, rc = shim_store_root(e->cfg, "e2b", dir, sizeof(dir));

    if (rc < 0 || (rc = shim_fileio_join(path, sizeof(path), dir, ".run")) < 0)
        return rc;
    fl.l_start = (off_t)strtoul(e->cid + 5 + 42, NULL, 16); /* 6 hex digits */
    if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
        return -errno;
    while (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        struct timespec ts = {0, SHIM_EXEC_STOP_TICK_MS * 1000000L};

        rc = errno == EAGAIN || errno == EACCES ? 0 : -errno;
        if (!rc && stop && stop->fn(stop->ctx))
            rc = -ECANCELED;
        else if (!rc && shim_clock_ms() > until)
            rc = -ETIMEDOUT;
        if (rc) {
            close(fd);
            return rc;
        }
        nanosleep(&ts, NULL);
    }
    return fd;
}

static int exec_locked(struct e2b *e, const char *code, size_t len,
                       const struct shim_exec_stop *stop, struct shim_exec_result *out);

static int op_exec_until(void *state, const char *code, size_t len,
                         const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    struct e2b *e = state;
    int rc, fd = -ENOENT;

    memset(out, 0, sizeof(*out));
    if (e->err[0]) { /* the open failed: say so once, then try again */
        rc = no_sandbox(e, out, e->err);
        e->err[0] = '\0';
        return rc;
    }
    if (!e->have_box && ensure_box(e) < 0)
        return no_sandbox(e, out, e->api.why);
    if (e->tagged && strlen(e->cid) == 53 && (fd = run_lock(e, stop)) == -ECANCELED)
        return text_result(out, SHIM_EXEC_FAILED, "Not run: the request was stopped (its "
                           "time limit, or its program) while the session's sandbox was busy "
                           "with another execution.\n");
    if (fd < 0 && e->tagged)
        LOG_INFO("e2b: this execution is not serialised with others here (%s)",
                 strerror(-fd));
    rc = exec_locked(e, code, len, stop, out);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* op_exec_until's execution, under its lock. */
static int exec_locked(struct e2b *e, const char *code, size_t len,
                       const struct shim_exec_stop *stop, struct shim_exec_result *out)
{
    char old[64];
    int rc;

    if (!e->dir_ready)
        make_dir(e);
    rc = exec_on_box(e, code, len, stop, out);
    if (rc == 1) { /* vanished: a new sandbox, and the model is told */
        snprintf(old, sizeof(old), "%s", e->tagged ? e->cid : "");
        LOG_WARN("e2b sandbox %s is gone (%s); starting a new one", e->tagged ? e->cid : "",
                 e->api.why);
        drop_box(e);
        if (create_box(e) < 0)
            return no_sandbox(e, out, e->api.why);
        free(e->listing);
        e->listing = NULL;
        make_dir(e);
        snprintf(e->note, sizeof(e->note),
                 "[Note: the e2b sandbox%s%s had ended (it expired or was removed); its "
                 "variables, imports and files are gone. This is a new sandbox%s%s%s.]\n",
                 old[0] ? " " : "", old, e->tagged ? " (" : "", e->tagged ? e->cid : "",
                 e->tagged ? ")" : "");
        e->lost = 0; /* the note above says more */
        rc = exec_on_box(e, code, len, stop, out);
        if (rc == 1)
            rc = text_result(out, SHIM_EXEC_FAILED, "Error: the new e2b sandbox was not "
                             "reachable either (%s); the code was not run.\n", e->api.why);
    }
    if (rc == 0 && e->lost && e->kernel_known) { /* not interrupted again */
        e->lost = 0;
        rc = prepend(out, LOST_NOTE);
    }
    /* kernel_known is 0 only when interrupted just now: nobody reads on */
    if (rc == 0 && e->have_box && out->status != SHIM_EXEC_TIMEOUT && e->kernel_known)
        list_files(e, out);
    out->create_seconds = e->create_s;
    out->remote = 1;
    e->create_s = 0;
    if (rc == 0 && e->tagged && e->have_box &&
        shim_e2b_set_timeout(&e->api, e->box.id, life(e, e->ttl_s)) < 0)
        LOG_WARN("e2b: the session's timeout was not extended: %s", e->api.why);
    return rc;
}

static int op_exec(void *state, const char *code, size_t len, struct shim_exec_result *out)
{
    return op_exec_until(state, code, len, NULL, out);
}

static void op_destroy(void *state)
{
    struct e2b *e = state;

    if (!e)
        return;
    if (e->have_box && !e->tagged && shim_e2b_kill(&e->api, e->box.id) < 0 &&
        e->api.status != 404)
        LOG_WARN("e2b: the request's sandbox was not killed: %s", e->api.why);
    shim_e2b_api_free(&e->api);
    free(e->listing);
    memset(e, 0, sizeof(*e)); /* the tokens */
    free(e);
}

/* The sandbox is ended now (its container was deleted), whoever's it was. */
static void op_end(void *state)
{
    struct e2b *e = state;

    if (e->have_box && shim_e2b_kill(&e->api, e->box.id) < 0 && e->api.status != 404)
        LOG_WARN("e2b: the sandbox was not killed: %s", e->api.why);
    drop_box(e);
}

static const char *op_container_id(void *state)
{
    struct e2b *e = state;
    return e->tagged && e->cid[0] ? e->cid : NULL;
}

static const char *op_take_note(void *state)
{
    static __thread char note[512];
    struct e2b *e = state;

    if (!e->note[0])
        return NULL;
    snprintf(note, sizeof(note), "%s", e->note);
    e->note[0] = '\0';
    return note;
}

/* The files of /mnt/data, through envd (the sandbox is made first when
 * there is none yet: a container's files may come before any code). */
static int file_target(struct e2b *e, const char *name, char *abs, size_t n)
{
    if (!name[0] || name[0] == '/' || strstr(name, "..") ||
        snprintf(abs, n, "/mnt/data/%s", name) >= (int)n)
        return -EINVAL;
    if (!e->have_box && ensure_box(e) < 0)
        return -EHOSTUNREACH;
    if (!e->dir_ready)
        make_dir(e);
    return 0;
}

static int op_file_get(void *state, const char *name, size_t max, char **out, size_t *len)
{
    struct e2b *e = state;
    char abs[600];
    int rc = file_target(e, name, abs, sizeof(abs));

    *out = NULL;
    *len = 0;
    return rc < 0 ? rc : shim_e2b_file_get(&e->api, &e->box, abs, max, out, len);
}

/* A file that could not be placed: the program is warned and the model
 * told at the next execution, each with the file's name and why. */
static void not_placed(struct e2b *e, const char *name, const char *why)
{
    size_t n = strlen(e->note);

    LOG_WARN("e2b: %s was not placed in /mnt/data: %s", name, why);
    if (n + 64 < sizeof(e->note))
        snprintf(e->note + n, sizeof(e->note) - n, "[Note: the file %.100s could not be "
                 "placed in /mnt/data (%.300s); it is not there.]\n", name, why);
}

static int op_file_put(void *state, const char *name, const void *data, size_t len)
{
    struct e2b *e = state;
    char abs[600];
    int rc = file_target(e, name, abs, sizeof(abs));

    if (rc == 0 && strchr(name, '/'))
        rc = -EINVAL;
    if (rc == 0)
        rc = shim_e2b_file_put(&e->api, &e->box, abs, data, len);
    if (rc < 0)
        not_placed(e, name, rc == -EINVAL ? "not a plain file name"
                            : e->api.why);
    return rc;
}

/* Removed by a cell of codeshim's own (envd's file API has no delete). */
static int op_file_remove(void *state, const char *name)
{
    struct e2b *e = state;
    char abs[600], *code, *out = NULL, *lit = NULL;
    cJSON *s;
    size_t n;
    int rc = file_target(e, name, abs, sizeof(abs));

    if (rc < 0 || !strcmp(name, ".") || strstr(name, "//") || name[strlen(name) - 1] == '/')
        return rc < 0 ? rc : -EINVAL;
    if ((s = cJSON_CreateString(name)) != NULL)
        lit = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    /* the name as a JSON string is a Python literal too */
    n = lit ? strlen("_cs_name = \n") + strlen(lit) + strlen(shim_e2b_remove_py) + 1 : 0;
    code = n ? malloc(n) : NULL;
    if (!code) {
        free(lit);
        return -ENOMEM;
    }
    snprintf(code, n, "_cs_name = %s\n%s", lit, shim_e2b_remove_py);
    free(lit);
    out = own_cell(e, code);
    free(code);
    rc = !out ? -EIO : !strncmp(out, "removed", 7) ? 0 : !strncmp(out, "none", 4) ? -ENOENT : -EIO;
    free(out);
    return rc;
}

static int op_is_new(void *state)
{
    struct e2b *e = state;

    return !e->tagged || e->made;
}

const struct shim_sandbox_ops shim_sandbox_e2b = {
    .name = "e2b",
    .create = op_create,
    .exec = op_exec,
    .exec_until = op_exec_until,
    .destroy = op_destroy,
    .create_at = op_create_at,
    .container_id = op_container_id,
    .take_note = op_take_note,
    .file_get = op_file_get,
    .end = op_end,
    .file_put = op_file_put,
    .file_remove = op_file_remove,
    .is_new = op_is_new,
};
