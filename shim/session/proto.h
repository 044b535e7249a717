/* proto.h - the session socket protocol (library <-> codeshim-sessiond).
 *
 * Frames are a 4-byte big-endian length and a JSON object, at most
 * SHIM_PROTO_MAX bytes, nested at most SHIM_PROTO_MAX_DEPTH deep and
 * holding at most SHIM_PROTO_MAX_NODES values (checked before any parsing,
 * so a hostile frame cannot make a huge tree); anything else is refused.
 *
 * On every connection the supervisor speaks first, a greeting
 * {"ok":true,"container_id":...,"settings":...} (settings: the session's
 * fingerprint, session.h). Requests: {"op":"exec","code":...},
 * {"op":"close"} (ends the session now). Answers carry ok and container_id
 * and, for exec, the result fields (status, logs, images, files, seconds).
 * A result is cut to fit a frame, with a note in its logs, never dropped.
 * Reads and writes have deadlines, so a stuck peer cannot hang the host. */
#ifndef SHIM_PROTO_H
#define SHIM_PROTO_H

#include "api/result.h"

#include <cjson/cJSON.h>

#ifndef SHIM_PROTO_MAX /* a test build of the supervisor may lower it */
#define SHIM_PROTO_MAX (64u << 20)
#endif
#define SHIM_PROTO_MAX_DEPTH 8
#define SHIM_PROTO_MAX_NODES 4096
/* What a result may hold (the local sandbox's own limits). */
#define SHIM_PROTO_MAX_IMAGES SHIM_RESULT_MAX_IMAGES
#define SHIM_PROTO_MAX_FILES SHIM_RESULT_MAX_FILES
/* Room left in a frame for the answer's fields around a result. */
#define SHIM_PROTO_ENVELOPE 4096

/* 0, or -errno (-ETIMEDOUT after timeout_ms, -EPIPE on a closed peer,
 * -E2BIG for a message larger than a frame). */
int shim_proto_send(int fd, const cJSON *msg, int timeout_ms);
/* Reads one frame into *out (caller owns). 0, or frame.h's errors
 * (-ETIMEDOUT, -ECONNRESET on a closed peer, -EPROTO, ...); -EPROTO also
 * for a frame of the wrong shape or not a JSON object. */
int shim_proto_recv(int fd, cJSON **out, int timeout_ms);
/* 0 when the n bytes at p stay within the depth and node bounds above
 * (strings are skipped; the JSON itself is not validated), else -EPROTO. */
int shim_proto_check_shape(const char *p, size_t n);

/* The session socket DIR/sock: connected (listening = 0) or bound and
 * listening, a stale socket file replaced (listening = 1). sun_path holds
 * 108 bytes; a longer path is reached through the directory's
 * /proc/self/fd entry. The fd (CLOEXEC), or -errno. */
int shim_proto_socket(const char *dir, int listening);


/* An exec result as JSON that prints to at most max_bytes: when the whole
 * does not fit, images are left out from the last, then file names, then
 * the logs are cut (head and tail kept), and a note in the logs says what
 * is missing. NULL only without memory. Caller owns. */
cJSON *shim_proto_result_capped(const struct shim_exec_result *r, size_t max_bytes);
/* The same, capped to fit a frame with its envelope. */
cJSON *shim_proto_result_to_json(const struct shim_exec_result *r);
/* Back from JSON (copies; r owns them). -EPROTO unless the shape is a
 * result's: logs a string, status in range, at most SHIM_PROTO_MAX_IMAGES
 * PNG images in base64, at most SHIM_PROTO_MAX_FILES file names. */
int shim_proto_result_from_json(const cJSON *j, struct shim_exec_result *r);

#endif
