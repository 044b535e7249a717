/* fuzz_proto.c - libFuzzer harness: proto.c, the session socket protocol
 * between the library and codeshim-sessiond (either end may be a stranger
 * that connected to the socket). shim_proto_recv reads the input as the
 * raw byte stream and as the payload of one well-sized frame, over a
 * socketpair whose writer has hung up (no wait); what it accepts must be
 * an object, printable as strict JSON, and a failure leaves *out NULL.
 * shim_proto_result_from_json reads every JSON value of the input (and
 * every frame received) into an exec result, and
 * shim_proto_result_to_json turns it back into strict JSON. */
#include "fuzz_common.h"

#include "session/proto.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>


FUZZ_PLAIN_INITIALIZE

static void result_both_ways(const cJSON *j)
{
    struct shim_exec_result r;
    cJSON *back;

    if (shim_proto_result_from_json(j, &r) < 0)
        return;
    back = shim_proto_result_to_json(&r);
    fuzz_check_json("proto-result", back);
    cJSON_Delete(back);
    shim_exec_result_free(&r);
}

/* What fits in the socket buffer is sent; the rest never arrives. */
static void feed(const void *p, size_t n)
{
    int sv[2];
    cJSON *out = NULL;
    size_t off = 0;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return;
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    while (off < n) {
        ssize_t k = send(sv[1], (const char *)p + off, n - off, MSG_NOSIGNAL);
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    shutdown(sv[1], SHUT_WR);
    if (shim_proto_recv(sv[0], &out, 200) == 0) {
        if (!cJSON_IsObject(out))
            fuzz_invalid("proto-recv", "0 without an object");
        result_both_ways(out);
        fuzz_check_json("proto-recv", out);
    } else if (out) {
        fuzz_invalid("proto-recv", "*out set on failure");
    }
    cJSON_Delete(out);
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    unsigned char *framed;
    int i;

    fuzz_input_begin(&in, data, size, 1);
    fuzz_target = "proto";
    for (i = 0; i < in.ndocs; i++)
        result_both_ways(in.doc[i]);
    if (size > (4u << 20)) { /* a replayed file larger than any test needs */
        fuzz_input_end(&in);
        return 0;
    }
    feed(data, size);
    framed = fuzz_xmalloc(size + 4);
    framed[0] = (unsigned char)(size >> 24);
    framed[1] = (unsigned char)(size >> 16);
    framed[2] = (unsigned char)(size >> 8);
    framed[3] = (unsigned char)size;
    if (size)
        memcpy(framed + 4, data, size);
    feed(framed, size + 4);
    free(framed);
    fuzz_input_end(&in);
    return 0;
}
