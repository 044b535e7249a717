/* proto.h - the session socket protocol (library <-> codeshim-sessiond).
 *
 * Frames are a 4-byte big-endian length and a JSON object, at most
 * SHIM_PROTO_MAX bytes; anything longer or malformed closes the
 * connection. Requests: {"op":"hello"} (answers the container id),
 * {"op":"exec","code":...}, {"op":"close"} (ends the session now).
 * Answers: {"ok":true,"container_id":...,"fresh":bool,...} and for exec
 * the result fields (status, logs, images, files, seconds). Reads and
 * writes have deadlines, so a stuck peer cannot hang the host. */
#ifndef SHIM_PROTO_H
#define SHIM_PROTO_H

#include "sandbox.h"

#include <cjson/cJSON.h>

#define SHIM_PROTO_MAX (64u << 20)

/* 0, or -errno (-ETIMEDOUT after timeout_ms, -EPIPE on a closed peer). */
int shim_proto_send(int fd, const cJSON *msg, int timeout_ms);
/* Reads one frame into *out (caller owns). 0, -ETIMEDOUT, -EPIPE, -EPROTO. */
int shim_proto_recv(int fd, cJSON **out, int timeout_ms);

/* The session socket DIR/sock: connected (listening = 0) or bound and
 * listening, a stale socket file replaced (listening = 1). sun_path holds
 * 108 bytes; a longer path is reached through the directory's
 * /proc/self/fd entry. The fd (CLOEXEC), or -errno. */
int shim_proto_socket(const char *dir, int listening);

/* exec results as JSON and back (copies; caller owns what it gets). */
cJSON *shim_proto_result_to_json(const struct shim_exec_result *r);
int shim_proto_result_from_json(const cJSON *j, struct shim_exec_result *r);

#endif
