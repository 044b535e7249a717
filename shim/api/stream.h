/* stream.h - SSE for programs that asked for "stream": true.
 *
 * The loop reports its progress here and the stream turns it into the
 * events OpenAI itself sends (Responses: response.created, in_progress,
 * output_item.added/done and their deltas, a terminal completed,
 * incomplete or failed, numbered from 0; Chat: chat.completion.chunk
 * objects, a usage chunk when asked, then [DONE]), written as soon as they exist: a program sees each code
 * execution start and end while the loop runs.
 *
 * Responses: response.created / in_progress once the first upstream reply
 * is in; every output item with its own event sequence, in order, with
 * contiguous output_index and a gap-free sequence_number; code executions
 * as code_interpreter_call items (interpreting when the sandbox starts,
 * completed when it ends); response.completed / incomplete last, with
 * the id of response.created. Chat: chat.completion.chunk objects (role,
 * content, finish_reason, optional usage chunk), then [DONE]; codeshim's
 * tool calls never appear.
 *
 * When the upstream streams too, live.c relays its events through the
 * entry points at the end (the items of a turn it relayed are skipped
 * when the turn's answer is synthesised); an upstream that answers whole
 * gets the synthesis above.
 *
 * Bytes leave through the write function; its first failure stops the
 * stream (every later call returns that failure). */
#ifndef SHIM_STREAM_H
#define SHIM_STREAM_H

#include "api/classify.h"
#include "api/conv.h"
#include "base/buf.h"

#include <cjson/cJSON.h>

typedef int (*shim_stream_write_fn)(void *ctx, const char *p, size_t n);

struct shim_stream {
    enum shim_api api;
    const struct shim_conv *cv;
    shim_stream_write_fn write;
    void *ctx;
    int failed;
    long seq;           /* Responses sequence_number */
    int next_index;     /* Responses output_index of the next item */
    const cJSON *cursor; /* next output item of the current reply */
    cJSON *chunk;       /* Chat: the chunk skeleton (id, created, model...) */
    cJSON *snap;        /* Responses: the in-progress response snapshot */
    cJSON *done;        /* Responses: output items finished so far */
    char *id;           /* the stream's response id (owned) */
    /* Live relay (live.c): the turn's events came from the upstream's own
     * stream, so its text and calls are out already (Chat finish sends
     * only the end); the code call announced while the model wrote it,
     * and its code decoded so far and the part of it sent as deltas. */
    int live;
    char live_ci[64];
    struct shim_buf live_code;
    size_t live_sent;
    /* Optional: the annotations of an output_text relayed live (the
     * container_file_citation of files.h), a new array or NULL; and the
     * last ones made, for the part and item that close it. */
    cJSON *(*annotate)(void *ctx, const char *text);
    void *annotate_ctx;
    cJSON *live_ann;
};

void shim_stream_init(struct shim_stream *s, enum shim_api api,
                      const struct shim_conv *cv, shim_stream_write_fn write,
                      void *ctx);
void shim_stream_free(struct shim_stream *s);
/* The first events, built from the program's request and the first
 * upstream reply. */
int shim_stream_start(struct shim_stream *s, const cJSON *req, const cJSON *first);
/* A new upstream reply whose items will be streamed. */
void shim_stream_turn(struct shim_stream *s, const cJSON *reply);
/* Items of the turn before call c, then c's events up to "interpreting". */
int shim_stream_exec_begin(struct shim_stream *s, const struct shim_call *c);
/* c's "completed" and output_item.done. */
int shim_stream_exec_end(struct shim_stream *s, const struct shim_call *c);
/* The rest of the answer and the closing events. */
int shim_stream_finish(struct shim_stream *s, const cJSON *answer);
/* Ends the stream with a failure (error + response.failed / error chunk). */
int shim_stream_fail(struct shim_stream *s, const char *code, const char *message);

/* For the live relay (live.c). Sends ev (taken) with the next
 * sequence_number (Responses). */
int shim_stream_send(struct shim_stream *s, cJSON *ev);
/* Sends an upstream item event (taken) as the item at output index
 * index; an output_item.done also joins the items finished so far. */
int shim_stream_forward(struct shim_stream *s, cJSON *ev, int index);
/* Announces the code_interpreter_call ci_id (added, in_progress) at the
 * next output index, before its code is known; live_code then collects
 * the code, and exec_begin for a call with this ci_id sends what is left
 * of it. */
int shim_stream_ci_open(struct shim_stream *s, const char *ci_id, const char *container_id,
                        size_t code_cap);
/* Sends the part of live_code not sent yet, up to a character boundary. */
int shim_stream_ci_code(struct shim_stream *s);
/* Chat: one chunk with this delta (taken) and no finish_reason. */
int shim_stream_chat_delta(struct shim_stream *s, cJSON *delta);

/* Pure SSE framing: appends "event: <name>\n" (when name) + "data: <data>\n\n". */
int shim_sse_frame(struct shim_buf *out, const char *name, const char *data);

#endif
