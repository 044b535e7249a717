/* multiprog.c - an ordinary libcurl program that drives its transfers
 * through the multi interface, in the ways event-loop programs do. It
 * knows nothing about codeshim.
 *
 *   multiprog MODE URL BODYFILE... [--plain BODYFILE] [--n N] [--timeout-ms N]
 *             [--abort-at N]
 *
 * Each BODYFILE is POSTed (Authorization: Bearer $OPENAI_API_KEY) to URL
 * on its own easy handle, all in one multi handle; --plain adds one more;
 * --timeout-ms sets CURLOPT_TIMEOUT_MS on each (and "errbuf" is reported);
 * --abort-at N gives each an XFERINFOFUNCTION counting its calls
 * ("progress"), the first transfer's answering 1 on its Nth call.
 * At the end one JSON line per transfer goes to stdout:
 *   {"i":0,"result":0,"status":200,"content_type":"...","body":"...",
 *    "headers":N,"writes":N,"late":N}
 * and one summary line {"summary":...}: off_thread counts callbacks that
 * ran on a thread other than the one driving the multi handle (must be 0).
 *
 * Modes:
 *   epoll      curl_multi_socket_action, SOCKETFUNCTION + TIMERFUNCTION,
 *              an epoll loop (with curl_multi_assign)
 *   poll       curl_multi_perform + curl_multi_poll
 *   fdset      curl_multi_perform + curl_multi_fdset + select +
 *              curl_multi_timeout
 *   remove     poll, and the FIRST transfer is removed from the multi
 *              handle as soon as every other one is done; "late" counts
 *              its callbacks after the removal (must be 0)
 *   cleanup-multi / cleanup-easy
 *              poll until every transfer but the first is done, then
 *              curl_multi_cleanup (resp. curl_easy_cleanup of the first
 *              one), then cleans up the rest; then waits for the
 *              process's fds, threads and children to come back to what
 *              they were after a warm-up transfer of the last body
 *   threads    --n N threads, each with its own multi handle running
 *              every BODYFILE (poll mode)
 *   fork       poll mode once, then fork; the child does it again and
 *              prints its own lines (prefixed "child "), the parent waits
 *   fork-mid   fork while the transfers run: the child drives its copy
 *              of the multi handle to the end (lines "orphan "), then
 *              runs everything again ("child "); the parent ("parent ")
 *   exit       poll mode with stdin as an extra fd: exits (exit(0))
 *              in the middle of the transfers when a line arrives
 *   hygiene    --n N: N easy transfers of the first body (the 6th of
 *              every 250: the second, if given), then N in a multi handle with 8 in
 *              flight; prints resource snapshots after the first 10 and
 *              after all, per phase, and the count of failed transfers
 */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXX 64

struct xfer {
    int i;
    CURL *e;
    char *body; /* received */
    size_t len;
    int headers, writes, late, removed, done;
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    int progress;
    struct curl_slist *hdrs;
    pthread_t owner;
    int *off_thread;
};

struct run {
    CURLM *m;
    struct xfer x[MAXX];
    int n;
    int off_thread;
    int max_threads; /* the most threads seen while polling */
    pthread_t owner;
    /* epoll mode */
    int ep;
    long timeout_ms; /* -1: none */
    struct timespec deadline;
};

static const char *g_url;
static char *g_bodies[MAXX];
static int g_nbodies;
static char *g_plain;
static char g_auth[512];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        return NULL;
    }
    s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static void check_thread(struct xfer *x)
{
    if (!pthread_equal(pthread_self(), x->owner))
        (*x->off_thread)++;
    if (x->removed)
        x->late++;
}

static size_t on_write(char *p, size_t sz, size_t n, void *ud)
{
    struct xfer *x = ud;
    char *b;

    check_thread(x);
    x->writes++;
    b = realloc(x->body, x->len + sz * n + 1);
    if (!b)
        return 0;
    x->body = b;
    memcpy(x->body + x->len, p, sz * n);
    x->len += sz * n;
    x->body[x->len] = '\0';
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct xfer *x = ud;

    (void)p;
    check_thread(x);
    x->headers++;
    return sz * n;
}

static long g_timeout_ms;
static int g_abort_at;

static int on_xferinfo(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct xfer *x = ud;

    (void)dt, (void)dn, (void)ut, (void)un;
    check_thread(x);
    return ++x->progress >= g_abort_at && x->i == 0; /* the others only count */
}

static void setup(struct run *r, int i, const char *body)
{
    struct xfer *x = &r->x[i];

    memset(x, 0, sizeof(*x));
    x->i = i;
    x->owner = r->owner;
    x->off_thread = &r->off_thread;
    x->e = curl_easy_init();
    x->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, g_auth);
    curl_easy_setopt(x->e, CURLOPT_URL, g_url);
    curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->e, CURLOPT_ERRORBUFFER, x->errbuf);
    if (g_timeout_ms)
        curl_easy_setopt(x->e, CURLOPT_TIMEOUT_MS, g_timeout_ms);
    if (g_abort_at) {
        curl_easy_setopt(x->e, CURLOPT_XFERINFOFUNCTION, on_xferinfo);
        curl_easy_setopt(x->e, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(x->e, CURLOPT_NOPROGRESS, 0L);
    }
}

static void start(struct run *r)
{
    int i;

    r->owner = pthread_self();
    r->m = curl_multi_init();
    r->n = g_nbodies + (g_plain ? 1 : 0);
    for (i = 0; i < r->n; i++) {
        setup(r, i, i < g_nbodies ? g_bodies[i] : g_plain);
        curl_multi_add_handle(r->m, r->x[i].e);
    }
}

/* Every DONE message: result kept, handle removed. */
static int reap(struct run *r)
{
    CURLMsg *msg;
    int left, n = 0;

    while ((msg = curl_multi_info_read(r->m, &left))) {
        struct xfer *x = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (!x || x->e != msg->easy_handle) {
            fprintf(stderr, "CURLINFO_PRIVATE does not name the handle\n");
            exit(3);
        }
        x->result = msg->data.result;
        x->done = 1;
        curl_multi_remove_handle(r->m, x->e);
        n++;
    }
    return n;
}

static int all_done(struct run *r, int skip_first)
{
    int i;

    for (i = skip_first ? 1 : 0; i < r->n; i++)
        if (!r->x[i].done)
            return 0;
    return 1;
}

static void print_run(struct run *r, const char *prefix)
{
    int i;

    for (i = 0; i < r->n; i++) {
        struct xfer *x = &r->x[i];
        cJSON *o = cJSON_CreateObject();
        long status = 0;
        char *ct = NULL, *s;

        if (x->e && !x->removed) {
            curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
            curl_easy_getinfo(x->e, CURLINFO_CONTENT_TYPE, &ct);
        }
        cJSON_AddNumberToObject(o, "i", i);
        cJSON_AddNumberToObject(o, "result", x->done ? (int)x->result : -1);
        cJSON_AddNumberToObject(o, "status", (double)status);
        cJSON_AddStringToObject(o, "content_type", ct ? ct : "");
        cJSON_AddStringToObject(o, "body", x->body ? x->body : "");
        cJSON_AddNumberToObject(o, "headers", x->headers);
        cJSON_AddNumberToObject(o, "writes", x->writes);
        cJSON_AddNumberToObject(o, "late", x->late);
        cJSON_AddBoolToObject(o, "removed", x->removed);
        cJSON_AddStringToObject(o, "errbuf", x->errbuf);
        cJSON_AddNumberToObject(o, "progress", x->progress);
        s = cJSON_PrintUnformatted(o);
        printf("%s%s\n", prefix, s);
        free(s);
        cJSON_Delete(o);
    }
    printf("%s{\"summary\":{\"off_thread\":%d}}\n", prefix, r->off_thread);
    if (r->max_threads)
        printf("%s{\"max_threads\":%d}\n", prefix, r->max_threads);
    fflush(stdout);
}

static void finish(struct run *r)
{
    int i;

    for (i = 0; i < r->n; i++) {
        if (r->x[i].e) {
            if (!r->x[i].done && !r->x[i].removed)
                curl_multi_remove_handle(r->m, r->x[i].e);
            curl_easy_cleanup(r->x[i].e);
        }
        curl_slist_free_all(r->x[i].hdrs);
        free(r->x[i].body);
    }
    if (r->m)
        curl_multi_cleanup(r->m);
}

/* ---- perform + poll ---- */

static int count_dir(const char *path);

static void poll_loop(struct run *r, int (*stop)(struct run *), int watch_stdin)
{
    int running = 1;

    curl_multi_perform(r->m, &running);
    reap(r);
    while (!stop(r)) {
        struct curl_waitfd in = {0, CURL_WAIT_POLLIN, 0};
        if (curl_multi_poll(r->m, watch_stdin ? &in : NULL, watch_stdin ? 1 : 0, 10000, NULL))
            exit(4);
        if (watch_stdin && (in.revents & CURL_WAIT_POLLIN)) {
            printf("{\"exiting\":true}\n");
            fflush(stdout);
            exit(0); /* in the middle of everything */
        }
        curl_multi_perform(r->m, &running);
        reap(r);
        if (count_dir("/proc/self/task") > r->max_threads)
            r->max_threads = count_dir("/proc/self/task");
    }
}

static int stop_all(struct run *r) { return all_done(r, 0); }
static int stop_rest(struct run *r) { return all_done(r, 1); }

/* ---- perform + fdset + select ---- */

static void fdset_loop(struct run *r)
{
    int running = 1;

    curl_multi_perform(r->m, &running);
    while (!all_done(r, 0)) {
        fd_set rd, wr, ex;
        int maxfd = -1;
        long t = -1;
        struct timeval tv;

        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_ZERO(&ex);
        curl_multi_timeout(r->m, &t);
        curl_multi_fdset(r->m, &rd, &wr, &ex, &maxfd);
        if (t < 0)
            t = 10000; /* libcurl's advice when it has no timeout */
        tv.tv_sec = t / 1000;
        tv.tv_usec = (t % 1000) * 1000;
        if (maxfd >= 0)
            select(maxfd + 1, &rd, &wr, &ex, &tv);
        else if (t > 0)
            select(0, NULL, NULL, NULL, &tv);
        curl_multi_perform(r->m, &running);
        reap(r);
    }
}

/* ---- socket_action + epoll ---- */

static struct run *g_ep_run;

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct run *r = userp;
    struct epoll_event ev;

    (void)e;
    if (!pthread_equal(pthread_self(), r->owner))
        r->off_thread++;
    memset(&ev, 0, sizeof(ev));
    ev.data.fd = s;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(r->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (!socketp) {
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, s, &ev) < 0 && errno == EEXIST)
            epoll_ctl(r->ep, EPOLL_CTL_MOD, s, &ev);
        curl_multi_assign(r->m, s, (void *)1);
    } else {
        epoll_ctl(r->ep, EPOLL_CTL_MOD, s, &ev);
    }
    return 0;
}

static int on_timer(CURLM *m, long ms, void *userp)
{
    struct run *r = userp;

    (void)m;
    if (!pthread_equal(pthread_self(), r->owner))
        r->off_thread++;
    r->timeout_ms = ms;
    if (ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &r->deadline);
        r->deadline.tv_sec += ms / 1000;
        r->deadline.tv_nsec += (ms % 1000) * 1000000L;
        if (r->deadline.tv_nsec >= 1000000000L) {
            r->deadline.tv_sec++;
            r->deadline.tv_nsec -= 1000000000L;
        }
    }
    return 0;
}

static int wait_ms(struct run *r)
{
    struct timespec now;
    long ms;

    if (r->timeout_ms < 0)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    ms = (r->deadline.tv_sec - now.tv_sec) * 1000 + (r->deadline.tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : (int)ms;
}

static void epoll_loop(struct run *r)
{
    int running = 0, i;

    r->ep = epoll_create1(EPOLL_CLOEXEC);
    r->timeout_ms = -1;
    r->owner = pthread_self();
    r->m = curl_multi_init();
    g_ep_run = r;
    curl_multi_setopt(r->m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(r->m, CURLMOPT_SOCKETDATA, r);
    curl_multi_setopt(r->m, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(r->m, CURLMOPT_TIMERDATA, r);
    r->n = g_nbodies + (g_plain ? 1 : 0);
    for (i = 0; i < r->n; i++) {
        setup(r, i, i < g_nbodies ? g_bodies[i] : g_plain);
        curl_multi_add_handle(r->m, r->x[i].e);
    }
    while (!all_done(r, 0)) {
        struct epoll_event evs[16];
        int n = epoll_wait(r->ep, evs, 16, wait_ms(r)), k;

        if (n < 0 && errno != EINTR)
            exit(5);
        if (n <= 0) {
            r->timeout_ms = -1;
            curl_multi_socket_action(r->m, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        for (k = 0; k < n; k++) {
            int ev = (evs[k].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                     (evs[k].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                     (evs[k].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(r->m, evs[k].data.fd, ev, &running);
        }
        reap(r);
    }
    close(r->ep);
}

/* ---- resources ---- */

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n - (strcmp(path, "/proc/self/fd") == 0); /* opendir's own */
}

static int count_children(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    int n = 0;

    if (!d)
        return -1;
    while ((de = readdir(d))) {
        char p[300];
        FILE *f;
        int c;
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "/proc/self/task/%s/children", de->d_name);
        if (!(f = fopen(p, "r")))
            continue;
        while ((c = fgetc(f)) != EOF)
            n += c == ' ';
        fclose(f);
    }
    closedir(d);
    return n;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;

    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

struct snap {
    int fds, threads, children;
    long rss_kb;
};

/* Waits (up to 20 s, polling) for threads, children and fds (unless
 * want->fds < 0) to settle at or below want (NULL: just measure): a worker or sandbox ends a moment
 * after the transfer it served. */
static struct snap snapshot(const struct snap *want)
{
    struct snap s;
    int i;

    for (i = 0; i < 2000; i++) {
        s.fds = count_dir("/proc/self/fd");
        s.threads = count_dir("/proc/self/task");
        s.children = count_children();
        if (!want || (s.threads <= want->threads && s.children <= want->children &&
                      (want->fds < 0 || s.fds <= want->fds)))
            break;
        usleep(10000);
    }
    s.rss_kb = rss_kb();
    return s;
}

static void print_snap(const char *name, struct snap s)
{
    printf("{\"snap\":\"%s\",\"fds\":%d,\"threads\":%d,\"children\":%d,\"rss_kb\":%ld}\n", name,
           s.fds, s.threads, s.children, s.rss_kb);
    fflush(stdout);
}

/* ---- modes ---- */

static int mode_remove(void)
{
    struct run r;
    int before;

    memset(&r, 0, sizeof(r));
    start(&r);
    poll_loop(&r, stop_rest, 0);
    r.x[0].removed = 1;
    before = r.x[0].writes + r.x[0].headers;
    curl_multi_remove_handle(r.m, r.x[0].e);
    {   /* keep driving the multi handle a little: nothing may arrive */
        int running, k;
        for (k = 0; k < 20; k++) {
            curl_multi_poll(r.m, NULL, 0, 10, NULL);
            curl_multi_perform(r.m, &running);
        }
    }
    (void)before;
    print_run(&r, "");
    finish(&r);
    return 0;
}

/* A warm-up transfer of the last body, so that what codeshim keeps for
 * the whole process (its spawning thread) is in the baseline. */
static struct snap warm_baseline(void)
{
    struct run w;
    char *keep = g_plain;
    int nb = g_nbodies;

    memset(&w, 0, sizeof(w));
    g_bodies[0] = g_bodies[nb - 1];
    g_nbodies = 1;
    g_plain = NULL;
    start(&w);
    poll_loop(&w, stop_all, 0);
    finish(&w);
    g_nbodies = nb;
    g_plain = keep;
    return snapshot(NULL);
}

static int mode_cleanup(int multi_first)
{
    struct run r;
    char *first = g_bodies[0];
    struct snap base, after;

    base = warm_baseline();
    g_bodies[0] = first;
    memset(&r, 0, sizeof(r));
    start(&r);
    poll_loop(&r, stop_rest, 0);
    r.x[0].removed = 1; /* counts callbacks after the cleanup */
    if (multi_first) {
        curl_multi_cleanup(r.m);
        r.m = NULL;
    } else {
        curl_easy_cleanup(r.x[0].e);
        r.x[0].e = NULL;
    }
    print_run(&r, "");
    if (!multi_first) {
        curl_multi_cleanup(r.m);
        r.m = NULL;
    }
    finish(&r);
    after = snapshot(&base);
    print_snap("before", base);
    print_snap("after", after);
    return 0;
}

static void *thread_main(void *arg)
{
    struct run *r = arg;

    start(r);
    poll_loop(r, stop_all, 0);
    return NULL;
}

static int mode_threads(int n)
{
    struct run *rs = calloc((size_t)n, sizeof(*rs));
    pthread_t *ts = calloc((size_t)n, sizeof(*ts));
    int i;
    char prefix[32];

    for (i = 0; i < n; i++)
        pthread_create(&ts[i], NULL, thread_main, &rs[i]);
    for (i = 0; i < n; i++)
        pthread_join(ts[i], NULL);
    for (i = 0; i < n; i++) {
        snprintf(prefix, sizeof(prefix), "t%d ", i);
        print_run(&rs[i], prefix);
        finish(&rs[i]);
    }
    free(rs);
    free(ts);
    return 0;
}

static int mode_fork(void)
{
    struct run r;
    pid_t pid;
    int st = 0;

    memset(&r, 0, sizeof(r));
    start(&r);
    poll_loop(&r, stop_all, 0);
    print_run(&r, "parent ");
    finish(&r);
    pid = fork();
    if (pid == 0) {
        memset(&r, 0, sizeof(r));
        start(&r);
        poll_loop(&r, stop_all, 0);
        print_run(&r, "child ");
        finish(&r);
        fflush(stdout);
        _exit(0);
    }
    waitpid(pid, &st, 0);
    printf("{\"child_status\":%d}\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    return 0;
}

/* The k-th transfer's body: the first one, and the 6th of every 250 the
 * second when there is one (so sandboxes come and go too, the first
 * before the first snapshot). */
static const char *hygiene_body(int k)
{
    return g_nbodies > 1 && k % 250 == 5 ? g_bodies[1] : g_bodies[0];
}

/* fork while the transfers run: the child's copies of them end with an
 * error (their loops stayed with the parent), then the child runs them
 * all again; the parent's complete as if nothing happened. */
static int mode_fork_mid(void)
{
    struct run r, c;
    pid_t pid;
    int st = 0, running;

    memset(&r, 0, sizeof(r));
    start(&r);
    curl_multi_perform(r.m, &running);
    pid = fork();
    if (pid == 0) {
        r.owner = pthread_self();
        poll_loop(&r, stop_all, 0);
        print_run(&r, "orphan ");
        memset(&c, 0, sizeof(c));
        start(&c);
        poll_loop(&c, stop_all, 0);
        print_run(&c, "child ");
        fflush(stdout);
        _exit(0);
    }
    poll_loop(&r, stop_all, 0);
    waitpid(pid, &st, 0);
    print_run(&r, "parent ");
    finish(&r);
    printf("{\"child_status\":%d}\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    return 0;
}

static CURLcode easy_once(struct run *r, int k)
{
    CURLcode rc;

    setup(r, 0, hygiene_body(k));
    rc = curl_easy_perform(r->x[0].e);
    curl_easy_cleanup(r->x[0].e);
    curl_slist_free_all(r->x[0].hdrs);
    free(r->x[0].body);
    r->x[0].e = NULL;
    return rc;
}

/* n transfers in r's multi handle, at most 8 at once; returns failures. */
static int multi_batch(struct run *r, int n, int k0)
{
    int started = 0, finished = 0, running, fails = 0, i;

    while (finished < n) {
        for (i = 0; i < 8 && started < n; i++) {
            if (r->x[i].e)
                continue;
            setup(r, i, hygiene_body(k0 + started));
            curl_multi_add_handle(r->m, r->x[i].e);
            started++;
        }
        curl_multi_poll(r->m, NULL, 0, 10000, NULL);
        curl_multi_perform(r->m, &running);
        reap(r);
        for (i = 0; i < 8; i++)
            if (r->x[i].e && r->x[i].done) {
                fails += r->x[i].result != CURLE_OK || !r->x[i].body ||
                         !strstr(r->x[i].body, "\"status\":\"completed\"");
                curl_easy_cleanup(r->x[i].e);
                curl_slist_free_all(r->x[i].hdrs);
                free(r->x[i].body);
                memset(&r->x[i], 0, sizeof(r->x[i]));
                finished++;
            }
    }
    return fails;
}

static int mode_hygiene(int n)
{
    struct run r;
    struct snap a, b, c, d;
    int i, fails = 0;

    memset(&r, 0, sizeof(r));
    r.owner = pthread_self();
    for (i = 0; i < n; i++) {
        fails += easy_once(&r, i) != CURLE_OK;
        if (i == 9)
            a = snapshot(NULL);
    }
    b = snapshot(&a);
    r.m = curl_multi_init(); /* holds fds of its own (wake-up pair) */
    fails += multi_batch(&r, 10, 0);
    {
        struct snap settle = a;
        settle.fds = -1;
        c = snapshot(&settle);
    }
    fails += multi_batch(&r, n - 10, 10);
    d = snapshot(&c);
    curl_multi_cleanup(r.m);
    print_snap("easy10", a);
    print_snap("easy", b);
    print_snap("multi10", c);
    print_snap("multi", d);
    printf("{\"failures\":%d,\"off_thread\":%d}\n", fails, r.off_thread);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode, *key = getenv("OPENAI_API_KEY");
    int i, n = 2;
    struct run r;

    if (argc < 4) {
        fprintf(stderr, "usage: multiprog MODE URL BODYFILE... [--plain F] [--n N]\n");
        return 2;
    }
    mode = argv[1];
    g_url = argv[2];
    snprintf(g_auth, sizeof(g_auth), "Authorization: Bearer %s", key ? key : "");
    for (i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--plain") && i + 1 < argc)
            g_plain = slurp(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
            g_timeout_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--abort-at") && i + 1 < argc)
            g_abort_at = atoi(argv[++i]);
        else if (g_nbodies < MAXX - 1 && !(g_bodies[g_nbodies++] = slurp(argv[i])))
            return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    memset(&r, 0, sizeof(r));
    if (!strcmp(mode, "epoll")) {
        epoll_loop(&r);
    } else if (!strcmp(mode, "poll")) {
        start(&r);
        poll_loop(&r, stop_all, 0);
    } else if (!strcmp(mode, "fdset")) {
        start(&r);
        fdset_loop(&r);
    } else if (!strcmp(mode, "exit")) {
        start(&r);
        poll_loop(&r, stop_all, 1);
    } else if (!strcmp(mode, "remove")) {
        return mode_remove();
    } else if (!strcmp(mode, "cleanup-multi") || !strcmp(mode, "cleanup-easy")) {
        return mode_cleanup(!strcmp(mode, "cleanup-multi"));
    } else if (!strcmp(mode, "threads")) {
        return mode_threads(n);
    } else if (!strcmp(mode, "fork")) {
        return mode_fork();
    } else if (!strcmp(mode, "fork-mid")) {
        return mode_fork_mid();
    } else if (!strcmp(mode, "hygiene")) {
        return mode_hygiene(n);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    print_run(&r, "");
    finish(&r);
    curl_global_cleanup();
    return 0;
}
