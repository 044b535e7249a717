/* fuzz_deliver.c - libFuzzer harness: sink.c's shim_sink_head with
 * the input as the upstream's header block (status line and headers, as
 * libcurl's header callback collected them), a status, HTTP version,
 * content type and body length picked by the input's hash. The block it
 * builds must start with a status line when the upstream's did (or there
 * was none), have CRLF lines and one blank line at the end, and carry
 * exactly our Content-Type and Content-Length. */
#include "fuzz_common.h"

#include <curl/curl.h>


FUZZ_PLAIN_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ctypes[] = {"application/json", "text/event-stream", NULL};
    static const long statuses[] = {200, 400, 429, 500, 0, -1, 999999, 204};
    struct fuzz_input in;

    fuzz_input_begin(&in, data, size, 0);
    fuzz_deliver((const char *)data, size, statuses[fuzz_pick(&in, 60, 8)],
                 fuzz_pick(&in, 61, 2) ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_1_1,
                 ctypes[fuzz_pick(&in, 62, 3)], fuzz_pick(&in, 63, 3) ? (long long)size : -1,
                 fuzz_head_wants_status((const char *)data, size));
    fuzz_input_end(&in);
    return 0;
}
