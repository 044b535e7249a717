/* engineprog.c - an ordinary libcurl program that checks where libcurl
 * calls its callbacks in the multi interface: on its own thread, inside
 * one of its libcurl calls, never for a transfer it removed. It knows
 * nothing about codeshim.
 *
 *   engineprog LOOP ACTION TRIGGER URL OUTDIR BODY_A [BODY_B]
 *
 * LOOP: poll (curl_multi_perform + curl_multi_poll), select
 * (curl_multi_perform + curl_multi_fdset + select + curl_multi_timeout),
 * socket (curl_multi_socket_action with SOCKETFUNCTION and TIMERFUNCTION,
 * a poll(2) loop), timer (TIMERFUNCTION only: socket_action on the timer
 * and on every socket libcurl wants, learnt from curl_multi_fdset).
 *
 * Transfer A POSTs the JSON file BODY_A to URL (Authorization: Bearer
 * $OPENAI_API_KEY) with every callback set: write, header, xferinfo,
 * debug (VERBOSE), sockopt, opensocket, closesocket, prereq, resolver
 * start; BODY_A "mime:PATH" instead sends PATH as a MIME part named
 * "file" read through a MIME read callback. ACTION none runs it to its
 * end; remove, cleanup (curl_easy_cleanup without removing) and
 * multicleanup (curl_multi_cleanup, then curl_easy_cleanup) stop it once
 * TRIGGER holds (file:PATH exists, or text:STRING was written to A), and
 * A's callback data is freed right then; pausecb (A's write callback
 * answers CURL_WRITEFUNC_PAUSE once, to the first chunk) and pauseapi
 * (curl_easy_pause(CURLPAUSE_RECV) from the loop after the first write)
 * pause A once TRIGGER holds, and the loop unpauses it
 * (curl_easy_pause(CURLPAUSE_CONT)) after 5 rounds; "paused_writes"
 * counts writes meanwhile, "pauses" the pauses; pausehdr with TRIGGER
 * header:NAME: A's header callback answers CURL_WRITEFUNC_PAUSE once, to
 * the first header line that starts with NAME (any case), and the loop
 * unpauses it the same way (header calls while paused count as
 * "paused_writes"); A's header lines as taken go to OUTDIR/A.head; "progress_during_code"
 * counts xferinfo calls between A's streamed code_interpreter_call
 * "interpreting" and "completed" events. BODY_B is then POSTed alone
 * (in a new multi handle after multicleanup) and run to its end.
 *
 * Output: OUTDIR/A.body, OUTDIR/B.body (what the write callback got) and
 * one JSON line on stdout: {"A": result, "B": result, "status_a": N,
 * "status_b": N, "calls": {name: n}, "off_thread": {name: n},
 * "outside": {name: n}, "late": n} where off_thread counts callbacks on
 * another thread than main's, outside those run while the program was in
 * none of its libcurl calls, late those for A after it was stopped. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CB_WRITE, CB_HEADER, CB_XFERINFO, CB_DEBUG, CB_SOCKOPT, CB_OPENSOCKET,
       CB_CLOSESOCKET, CB_PREREQ, CB_RESOLVER, CB_MIME_READ, CB_N };
static const char *const cb_names[CB_N] = {"write", "header", "xferinfo", "debug",
                                           "sockopt", "opensocket", "closesocket",
                                           "prereq", "resolver_start", "mime_read"};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int calls[CB_N], off_thread[CB_N], outside[CB_N];
static int late;
static int pause_cb, pause_api, pause_hdr; /* ACTION pausecb / pauseapi / pausehdr */
static const char *pause_hdr_name;
static int paused_now, paused_writes, pauses;
static int progress_during_code; /* xferinfo calls while A's code ran */
static pthread_t main_thread;
static int in_curl; /* main is inside one of its libcurl calls */

#define MAGIC 0x5eed1234u

struct ctx {
    unsigned magic;
    int stopped; /* never read after free: ASan tells */
    char name;
    FILE *out;
    FILE *head; /* the header lines taken */
    char seen[4096]; /* the last bytes written, for the text trigger */
    size_t seen_len;
    FILE *mime;
    int code_state; /* 1 from "...interpreting" written, 2 from "...completed" */
};

static void note(int cb, struct ctx *c)
{
    pthread_mutex_lock(&mu);
    calls[cb]++;
    if (!pthread_equal(pthread_self(), main_thread))
        off_thread[cb]++;
    else if (!in_curl)
        outside[cb]++;
    if (c && (c->magic != MAGIC || c->stopped))
        late++;
    pthread_mutex_unlock(&mu);
}

#define CURL_CALL(expr)                                                        \
    do {                                                                       \
        in_curl = 1;                                                           \
        expr;                                                                  \
        in_curl = 0;                                                           \
    } while (0)

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
    struct ctx *c = ud;
    size_t len = sz * n, keep;

    note(CB_WRITE, c);
    if (paused_now)
        paused_writes++;
    if (pause_cb == 1 && c->name == 'A') { /* refused: it must come again */
        pause_cb = 2;
        paused_now = 1;
        pauses++;
        return CURL_WRITEFUNC_PAUSE;
    }
    fwrite(p, 1, len, c->out);
    keep = len < sizeof(c->seen) - 1 ? len : sizeof(c->seen) - 1;
    if (c->seen_len + keep >= sizeof(c->seen)) {
        size_t drop = c->seen_len + keep - (sizeof(c->seen) - 1);
        memmove(c->seen, c->seen + drop, c->seen_len - drop);
        c->seen_len -= drop;
    }
    memcpy(c->seen + c->seen_len, p + len - keep, keep);
    c->seen_len += keep;
    c->seen[c->seen_len] = '\0';
    if (c->code_state == 0 && strstr(c->seen, "code_interpreter_call.interpreting"))
        c->code_state = 1;
    if (c->code_state == 1 && strstr(c->seen, "code_interpreter_call.completed"))
        c->code_state = 2;
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct ctx *c = ud;
    size_t k = pause_hdr_name ? strlen(pause_hdr_name) : 0;

    note(CB_HEADER, ud);
    if (paused_now)
        paused_writes++;
    if (pause_hdr == 1 && c->name == 'A' && sz * n >= k &&
        !strncasecmp(p, pause_hdr_name, k)) { /* refused: it must come again */
        pause_hdr = 2;
        paused_now = 1;
        pauses++;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (c->head)
        fwrite(p, 1, sz * n, c->head);
    return sz * n;
}

static int on_xferinfo(void *ud, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d)
{
    struct ctx *c = ud;

    (void)a, (void)b, (void)c2, (void)d;
    note(CB_XFERINFO, ud);
    if (c->code_state == 1)
        progress_during_code++;
    return 0;
}

static int on_debug(CURL *h, curl_infotype t, char *p, size_t n, void *ud)
{
    (void)h, (void)t, (void)p, (void)n;
    note(CB_DEBUG, ud);
    return 0;
}

static int on_sockopt(void *ud, curl_socket_t fd, curlsocktype purpose)
{
    (void)fd, (void)purpose;
    note(CB_SOCKOPT, ud);
    return CURL_SOCKOPT_OK;
}

static curl_socket_t on_open(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)purpose;
    note(CB_OPENSOCKET, ud);
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int on_close(void *ud, curl_socket_t fd)
{
    note(CB_CLOSESOCKET, ud);
    return close(fd);
}

static int on_prereq(void *ud, char *ip, char *lip, int port, int lport)
{
    (void)ip, (void)lip, (void)port, (void)lport;
    note(CB_PREREQ, ud);
    return CURL_PREREQFUNC_OK;
}

static int on_resolver(void *state, void *reserved, void *ud)
{
    (void)state, (void)reserved;
    note(CB_RESOLVER, ud);
    return 0;
}

static size_t on_mime_read(char *buf, size_t sz, size_t n, void *ud)
{
    struct ctx *c = ud;

    note(CB_MIME_READ, c);
    return fread(buf, 1, sz * n, c->mime);
}

static int on_mime_seek(void *ud, curl_off_t off, int origin)
{
    struct ctx *c = ud;
    return fseek(c->mime, (long)off, origin) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = '\0';
    fclose(f);
    return buf;
}

struct xfer {
    CURL *h;
    struct ctx *c;
    struct curl_slist *hdrs;
    curl_mime *mime;
    char *body;
    int done;
    CURLcode result;
    long status;
};

static int make(struct xfer *x, char name, const char *url, const char *body, const char *dir)
{
    char path[1024], auth[512];
    const char *key = getenv("OPENAI_API_KEY");

    memset(x, 0, sizeof(*x));
    x->c = calloc(1, sizeof(*x->c));
    x->c->magic = MAGIC;
    x->c->name = name;
    snprintf(path, sizeof(path), "%s/%c.body", dir, name);
    x->c->out = fopen(path, "wb");
    if (!x->c->out)
        return -1;
    snprintf(path, sizeof(path), "%s/%c.head", dir, name);
    x->c->head = fopen(path, "wb");
    x->h = curl_easy_init();
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key ? key : "");
    x->hdrs = curl_slist_append(NULL, auth);
    if (!strncmp(body, "mime:", 5)) {
        curl_mimepart *part;
        x->c->mime = fopen(body + 5, "rb");
        if (!x->c->mime)
            return -1;
        fseek(x->c->mime, 0, SEEK_END);
        long size = ftell(x->c->mime);
        fseek(x->c->mime, 0, SEEK_SET);
        x->mime = curl_mime_init(x->h);
        part = curl_mime_addpart(x->mime);
        curl_mime_name(part, "file");
        curl_mime_filename(part, "data.txt");
        curl_mime_data_cb(part, size, on_mime_read, on_mime_seek, NULL, x->c);
        curl_easy_setopt(x->h, CURLOPT_MIMEPOST, x->mime);
    } else {
        x->body = slurp(body);
        if (!x->body)
            return -1;
        x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
    }
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(x->h, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
    curl_easy_setopt(x->h, CURLOPT_XFERINFODATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(x->h, CURLOPT_DEBUGFUNCTION, on_debug);
    curl_easy_setopt(x->h, CURLOPT_DEBUGDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    curl_easy_setopt(x->h, CURLOPT_SOCKOPTDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_OPENSOCKETFUNCTION, on_open);
    curl_easy_setopt(x->h, CURLOPT_OPENSOCKETDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
    curl_easy_setopt(x->h, CURLOPT_CLOSESOCKETDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(x->h, CURLOPT_PREREQDATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_RESOLVER_START_FUNCTION, on_resolver);
    curl_easy_setopt(x->h, CURLOPT_RESOLVER_START_DATA, x->c);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    return 0;
}

/* After the easy handle is gone: the program frees what its callbacks use. */
static void free_data(struct xfer *x)
{
    if (x->c->out)
        fclose(x->c->out);
    if (x->c->head)
        fclose(x->c->head);
    if (x->c->mime)
        fclose(x->c->mime);
    x->c->stopped = 1;
    x->c->magic = 0;
    free(x->c);
    x->c = NULL;
    curl_slist_free_all(x->hdrs);
    free(x->body);
    x->hdrs = NULL;
    x->body = NULL;
}

static void destroy(struct xfer *x)
{
    CURL_CALL(curl_easy_cleanup(x->h));
    if (x->mime)
        curl_mime_free(x->mime);
    x->mime = NULL;
    x->h = NULL;
    free_data(x);
}

/* ---- the socket loop's state ---- */

#define MAXS 64
static struct { curl_socket_t fd; int what; } socks[MAXS];
static int nsocks;
static long timer_ms = -1;
static struct timespec timer_set;

static int on_socket(CURL *e, curl_socket_t s, int what, void *up, void *sp)
{
    int i;

    (void)e, (void)up, (void)sp;
    for (i = 0; i < nsocks && socks[i].fd != s; i++)
        ;
    if (what == CURL_POLL_REMOVE) {
        if (i < nsocks)
            socks[i] = socks[--nsocks];
        return 0;
    }
    if (i == nsocks && nsocks < MAXS)
        socks[nsocks++].fd = s;
    if (i < nsocks)
        socks[i].what = what;
    return 0;
}

static int on_timer(CURLM *m, long ms, void *up)
{
    (void)m, (void)up;
    timer_ms = ms;
    clock_gettime(CLOCK_MONOTONIC, &timer_set);
    return 0;
}

static long timer_left(void)
{
    struct timespec now;
    long el;

    if (timer_ms < 0)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    el = (now.tv_sec - timer_set.tv_sec) * 1000 + (now.tv_nsec - timer_set.tv_nsec) / 1000000;
    return el >= timer_ms ? 0 : timer_ms - el;
}

static const char *loop;

static void setup_multi(CURLM *m)
{
    if (!strcmp(loop, "socket")) {
        curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    }
    if (!strcmp(loop, "socket") || !strcmp(loop, "timer"))
        curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
}

/* One step of the loop, waiting at most 50 ms. */
static void step(CURLM *m)
{
    int running = 0, i, n;

    if (!strcmp(loop, "poll")) {
        CURL_CALL(curl_multi_perform(m, &running));
        CURL_CALL(curl_multi_poll(m, NULL, 0, 50, NULL));
    } else if (!strcmp(loop, "select")) {
        fd_set r, w, e;
        int maxfd = -1;
        long to = -1;
        struct timeval tv;

        CURL_CALL(curl_multi_perform(m, &running));
        FD_ZERO(&r);
        FD_ZERO(&w);
        FD_ZERO(&e);
        CURL_CALL(curl_multi_fdset(m, &r, &w, &e, &maxfd));
        CURL_CALL(curl_multi_timeout(m, &to));
        if (to < 0 || to > 50)
            to = 50;
        tv.tv_sec = 0;
        tv.tv_usec = to * 1000;
        select(maxfd + 1, &r, &w, &e, &tv);
    } else if (!strcmp(loop, "socket")) {
        struct pollfd p[MAXS];
        long to = timer_left();

        for (i = 0; i < nsocks; i++) {
            p[i].fd = socks[i].fd;
            p[i].events = (socks[i].what & CURL_POLL_IN ? POLLIN : 0) |
                          (socks[i].what & CURL_POLL_OUT ? POLLOUT : 0);
            p[i].revents = 0;
        }
        n = nsocks;
        if (to < 0 || to > 50)
            to = 50;
        if (poll(p, (nfds_t)n, (int)to) > 0) {
            for (i = 0; i < n; i++)
                if (p[i].revents) {
                    int ev = (p[i].revents & POLLIN ? CURL_CSELECT_IN : 0) |
                             (p[i].revents & POLLOUT ? CURL_CSELECT_OUT : 0) |
                             (p[i].revents & (POLLERR | POLLHUP) ? CURL_CSELECT_ERR : 0);
                    CURL_CALL(curl_multi_socket_action(m, p[i].fd, ev, &running));
                }
        }
        if (timer_left() == 0) {
            timer_ms = -1;
            CURL_CALL(curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running));
        }
    } else { /* timer: the program knows only the timer; fds from fdset */
        fd_set r, w, e;
        int maxfd = -1;
        long to = timer_left();
        struct timeval tv;

        FD_ZERO(&r);
        FD_ZERO(&w);
        FD_ZERO(&e);
        CURL_CALL(curl_multi_fdset(m, &r, &w, &e, &maxfd));
        if (to < 0 || to > 50)
            to = 50;
        tv.tv_sec = 0;
        tv.tv_usec = to * 1000;
        select(maxfd + 1, &r, &w, &e, &tv);
        for (i = 0; i <= maxfd; i++)
            if (FD_ISSET(i, &r) || FD_ISSET(i, &w))
                CURL_CALL(curl_multi_socket_action(m, i, 0, &running));
        if (timer_left() == 0) {
            timer_ms = -1;
            CURL_CALL(curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running));
        }
    }
}

static void reap(CURLM *m)
{
    CURLMsg *msg;
    int left;

    for (;;) {
        CURL_CALL(msg = curl_multi_info_read(m, &left));
        if (!msg)
            break;
        if (msg->msg == CURLMSG_DONE) {
            struct xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            if (x) {
                x->done = 1;
                x->result = msg->data.result;
                curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
            }
        }
    }
}

static int triggered(const char *trigger, const struct xfer *a)
{
    if (!strncmp(trigger, "file:", 5))
        return access(trigger + 5, F_OK) == 0;
    if (!strncmp(trigger, "text:", 5))
        return strstr(a->c->seen, trigger + 5) != NULL;
    return 0;
}

static int run_to_end(CURLM *m, struct xfer *x)
{
    int i;

    for (i = 0; i < 2400 && !x->done; i++) { /* at most ~2 minutes */
        step(m);
        reap(m);
    }
    return x->done;
}

int main(int argc, char **argv)
{
    struct xfer a, b;
    const char *action, *trigger, *url, *dir;
    CURLM *m;
    cJSON *o, *t;
    char *s;
    int i, stopped = 0;

    if (argc < 7) {
        fprintf(stderr, "usage: engineprog LOOP ACTION TRIGGER URL OUTDIR BODY_A [BODY_B]\n");
        return 2;
    }
    loop = argv[1];
    action = argv[2];
    trigger = argv[3];
    url = argv[4];
    dir = argv[5];
    main_thread = pthread_self();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    m = curl_multi_init();
    setup_multi(m);
    if (make(&a, 'A', url, argv[6], dir) < 0) {
        fprintf(stderr, "engineprog: cannot set up A\n");
        return 2;
    }
    CURL_CALL(curl_multi_add_handle(m, a.h));
    memset(&b, 0, sizeof(b));
    if (!strcmp(action, "none")) {
        run_to_end(m, &a);
    } else if (!strcmp(action, "pausecb") || !strcmp(action, "pauseapi") ||
               !strcmp(action, "pausehdr")) {
        int rounds = 0;

        if (!strcmp(action, "pausehdr") && !strncmp(trigger, "header:", 7)) {
            pause_hdr = 1;
            pause_hdr_name = trigger + 7;
        }

        for (i = 0; i < 2400 && !a.done; i++) {
            if (!pause_cb && !pause_api && !pause_hdr && triggered(trigger, &a)) {
                if (!strcmp(action, "pausecb")) {
                    pause_cb = 1;
                } else {
                    pause_api = 1;
                    paused_now = 1;
                    pauses++;
                    CURL_CALL(curl_easy_pause(a.h, CURLPAUSE_RECV));
                }
            }
            if (paused_now && ++rounds > 5) {
                paused_now = 0;
                CURL_CALL(curl_easy_pause(a.h, CURLPAUSE_CONT));
            }
            step(m);
            reap(m);
        }
    } else {
        for (i = 0; i < 2400 && !a.done && !triggered(trigger, &a); i++) {
            step(m);
            reap(m);
        }
        if (!a.done) {
            stopped = 1;
            a.c->stopped = 1;
            if (!strcmp(action, "remove")) {
                CURL_CALL(curl_multi_remove_handle(m, a.h));
                destroy(&a);
            } else if (!strcmp(action, "cleanup")) {
                destroy(&a); /* still in the multi handle: libcurl removes it */
            } else {
                CURL_CALL(curl_multi_cleanup(m));
                destroy(&a);
                m = curl_multi_init();
                setup_multi(m);
            }
        }
        if (argc > 7 && make(&b, 'B', url, argv[7], dir) == 0) {
            CURL_CALL(curl_multi_add_handle(m, b.h));
            run_to_end(m, &b);
            /* a few more rounds: nothing of A may come now */
            for (i = 0; i < 5; i++)
                step(m);
            CURL_CALL(curl_multi_remove_handle(m, b.h));
        }
    }
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "A", stopped ? -1 : a.done ? (double)a.result : -2);
    cJSON_AddNumberToObject(o, "status_a", stopped ? 0 : (double)a.status);
    cJSON_AddNumberToObject(o, "B", b.h ? (b.done ? (double)b.result : -2) : -3);
    cJSON_AddNumberToObject(o, "status_b", (double)b.status);
    if (!stopped) {
        CURL_CALL(curl_multi_remove_handle(m, a.h));
        destroy(&a);
    }
    if (b.h)
        destroy(&b);
    CURL_CALL(curl_multi_cleanup(m));
    pthread_mutex_lock(&mu);
    t = cJSON_AddObjectToObject(o, "calls");
    for (i = 0; i < CB_N; i++)
        cJSON_AddNumberToObject(t, cb_names[i], calls[i]);
    t = cJSON_AddObjectToObject(o, "off_thread");
    for (i = 0; i < CB_N; i++)
        cJSON_AddNumberToObject(t, cb_names[i], off_thread[i]);
    t = cJSON_AddObjectToObject(o, "outside");
    for (i = 0; i < CB_N; i++)
        cJSON_AddNumberToObject(t, cb_names[i], outside[i]);
    cJSON_AddNumberToObject(o, "late", late);
    cJSON_AddNumberToObject(o, "pauses", pauses);
    cJSON_AddNumberToObject(o, "progress_during_code", progress_during_code);
    cJSON_AddNumberToObject(o, "paused_writes", paused_writes);
    pthread_mutex_unlock(&mu);
    s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    cJSON_Delete(o);
    curl_global_cleanup();
    return 0;
}
