/* sink.h - hands a synthetic HTTP answer to the program, as libcurl
 * would: status line and headers to the header callback (or through the
 * write callback when only HEADERDATA is set, or into the body stream with
 * CURLOPT_HEADER), the body to the write callback (or fwrite to WRITEDATA,
 * stdout by default). A callback that takes fewer bytes than offered
 * fails the transfer with CURLE_WRITE_ERROR; FAILONERROR turns a status
 * >= 400 into CURLE_HTTP_RETURNED_ERROR. The answer is registered for
 * curl_easy_getinfo before the first callback runs.
 *
 * A sink is used as: shim_sink_begin, shim_sink_body (any number of times:
 * streaming sends events as they are made), shim_sink_end.
 *
 * Queued mode (the multi interface): while a queue is given with
 * shim_sink_queue_into (the engine does so around each run of a
 * transfer's loop), new sinks touch nothing of the program's. They record
 * every begin/body/fail/end into the queue (sinkq.h), waiting (a
 * coroutine yields) while it is full; the replay hands the records to the
 * program's callbacks through a direct sink (shim_sink_replay) inside its
 * own curl_multi_* calls, on its own stack. What callers of
 * begin/body/end/fail see is the same in both modes, except that a
 * failure of the program's callback reaches a queued sink later, as
 * CURLE_ABORTED_BY_CALLBACK from its next call (or shim_sink_ok).
 *
 * A sink obeys its transfer's limits (xfer.h): once the deadline passed
 * or the progress callback said stop, nothing more is delivered and every
 * call fails with that code and libcurl's message (queued: recorded as
 * the failure). A direct sink of a transfer that curl_easy_perform
 * answers also pauses: a write callback that answers
 * CURL_WRITEFUNC_PAUSE (or a curl_easy_pause(CURLPAUSE_RECV)) holds
 * delivery, the progress callback called meanwhile, and the same bytes
 * are written again once the program unpauses. */
#ifndef SHIM_SINK_H
#define SHIM_SINK_H

#include "base/buf.h"
#include "curl/handles.h"

#include <curl/curl.h>

struct shim_sinkq;
struct shim_xfer;

struct shim_sink {
    struct shim_sinkq *q; /* queued mode: records go here */
    struct shim_xfer *x;  /* direct mode: the transfer's limits (xfer.h), or NULL */
    char ct[256]; /* replay: the content type the answer keeps */
    CURL *h;
    const struct shim_handle_view *v;
    struct shim_answer_info info;
    /* replay (multi.c): the program paused receiving (CURLPAUSE_RECV,
     * from CURL_WRITEFUNC_PAUSE or curl_easy_pause); the records not
     * delivered yet, oldest first, the first one's bytes already
     * written, and whether the writer had ended (with its result) */
    int paused;
    int replaying; /* a replay sink: a paused header callback holds the begin record */
    int head_held; /* its header block is part-delivered (head_off, head_part) */
    size_t head_off; /* the block's bytes taken before the line refused */
    int head_part;   /* that line's callbacks that took it already */
    struct shim_sinkq_item *held;
    size_t held_off;
    int held_end, held_result;
    CURLcode rc; /* first failure; later calls do nothing */
    char message[CURL_ERROR_SIZE]; /* its text */
    double t0;
};

/* Builds the header block for a body codeshim made: upstream_head's
 * status line and headers (NULL: a plain "HTTP/1.1 <status>" block) minus
 * those describing the upstream body, then our Content-Type and, when
 * body_len >= 0, Content-Length. */
int shim_sink_head(struct shim_buf *out, long status, long http_version,
                      const char *upstream_head, size_t head_len,
                      const char *content_type, long long body_len);

void shim_sink_init(struct shim_sink *s, CURL *h, const struct shim_handle_view *v,
                    double t0);
/* Sends the status line and headers: the header block is made from the
 * upstream's (upstream_head may be NULL) by shim_sink_head; body_len < 0
 * means unknown (a stream). */
CURLcode shim_sink_begin(struct shim_sink *s, long status, long http_version,
                         const char *upstream_head, size_t head_len,
                         const char *content_type, long long body_len);
CURLcode shim_sink_body(struct shim_sink *s, const char *p, size_t n);
CURLcode shim_sink_end(struct shim_sink *s);
/* A whole answer at once: begin, body, end. */
CURLcode shim_sink_whole(struct shim_sink *s, long status, long http_version,
                         const char *upstream_head, size_t head_len,
                         const char *content_type, const char *body, size_t body_len);
/* Fails the transfer with rc and message (copied to ERRORBUFFER). */
CURLcode shim_sink_fail(struct shim_sink *s, CURLcode rc, const char *message);

/* 1 while the transfer goes on. In queued mode this also notices that
 * the program's side stopped reading (removed, cleaned up, or its
 * callback failed) and fails s then: loops ask it between steps. */
int shim_sink_ok(struct shim_sink *s);

/* Sinks initialised on this thread from now record into q (borrowed;
 * NULL: deliver directly again). */
void shim_sink_queue_into(struct shim_sinkq *q);
/* The loop's side, after the transfer's last sink call: its result. */
void shim_sink_queue_end(struct shim_sinkq *q, CURLcode rc);
/* Program's thread: replays what waits in q through s, a direct sink of
 * the program's handle. 1 when the transfer ended (*rc: its CURLcode;
 * a failure of the program's callbacks wins over the loop's result),
 * else 0. The caller then stops q. */
int shim_sink_replay(struct shim_sink *s, struct shim_sinkq *q, CURLcode *rc);
/* While s->paused has CURLPAUSE_RECV nothing is taken from q or written;
 * a write or header callback that answers CURL_WRITEFUNC_PAUSE sets it,
 * and the chunk or header line it refused is given again first once the
 * program clears it.
 * Frees the records a replay sink still holds. */
void shim_sink_drop_held(struct shim_sink *s);


#endif
