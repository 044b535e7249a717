/* fuzz_cassette.c - libFuzzer harness: cassette.c's replay files
 * (CODESHIM_REPLAY=DIR), which a user may have edited or been handed.
 * The input is written as a recorded file and loaded, then used as
 * loop.c uses a replayed answer: its header block through
 * shim_sink_head (a content type with a line break must not reach the
 * block), and a 2xx body as the upstream's reply in a conversation.
 * Also sha256.c, which makes the files' names (keys): its digest of the
 * input, whole and fed in odd pieces, must equal OpenSSL's, an
 * implementation independent of nettle.
 *
 * The file goes to a directory of its own next to the harness binary
 * (build-fuzz/tmp/), removed at exit: nothing is written outside the
 * build directory. */
#include "fuzz_common.h"

#include "base/json.h"
#include "base/sha256.h"
#include "store/cassette.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static const char g_key[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
static char g_dir[PATH_MAX];

static void remove_dir(void)
{
    if (g_dir[0])
        rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    (void)argc;
    (void)argv;
    fuzz_setup();
    if (k <= 0)
        abort();
    exe[k] = '\0';
    if (snprintf(g_dir, sizeof(g_dir), "%s/tmp", dirname(exe)) >= (int)sizeof(g_dir))
        abort();
    if (mkdir(g_dir, 0700) < 0 && errno != EEXIST)
        abort();
    k = (ssize_t)strlen(g_dir);
    snprintf(g_dir + k, sizeof(g_dir) - (size_t)k, "/cassette-%ld", (long)getpid());
    if (mkdir(g_dir, 0700) < 0 && errno != EEXIST)
        abort();
    atexit(remove_dir);
    return 0;
}

static void sha256_matches(const struct fuzz_input *in)
{
    char a[65], b[65], c[65];
    unsigned char d[32], ref[EVP_MAX_MD_SIZE];
    unsigned int rlen = 0, step = 1 + fuzz_pick(in, 30, 97), i;
    struct shim_sha256 s;
    size_t off = 0;

    fuzz_target = "sha256";
    shim_sha256_hex(in->p, in->n, a);
    if (!EVP_Digest(in->p, in->n, ref, &rlen, EVP_sha256(), NULL) || rlen != 32)
        abort();
    for (i = 0; i < 32; i++)
        snprintf(b + 2 * i, 3, "%02x", ref[i]);
    shim_sha256_init(&s);
    while (off < in->n) {
        size_t k = in->n - off < step ? in->n - off : step;
        shim_sha256_update(&s, in->p + off, k);
        off += k;
        step = step * 7 % 131 + 1;
    }
    shim_sha256_final(&s, d);
    for (i = 0; i < 32; i++)
        snprintf(c + 2 * i, 3, "%02x", d[i]);
    if (strcmp(a, b) || strcmp(a, c))
        fuzz_invalid("sha256", "digest %s, OpenSSL %s, incremental %s", a, b, c);
}

/* Writes the input as the occ-th recording of g_key: 0 or -1. */
static int write_recording(const struct fuzz_input *in, int occ, char *path, size_t pathsz)
{
    int fd;

    if (occ > 1)
        snprintf(path, pathsz, "%s/%s-%d.json", g_dir, g_key, occ);
    else
        snprintf(path, pathsz, "%s/%s.json", g_dir, g_key);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (write(fd, in->p, in->n) != (ssize_t)in->n) {
        close(fd);
        unlink(path);
        return -1;
    }
    close(fd);
    return 0;
}

/* What loop.c does with a 2xx replayed answer: the body as the reply. */
static void replay_body(const struct fuzz_input *in, const struct shim_http_reply *r)
{
    enum shim_api api = fuzz_pick(in, 52, 2) ? SHIM_API_CHAT : SHIM_API_RESPONSES;
    cJSON *reply = shim_json_parse(r->body.data, r->body.len), *req;
    const cJSON *reps[1];

    if (!reply)
        return;
    reps[0] = reply;
    req = fuzz_builtin_req(api);
    fuzz_conversation(in, api, req, reps, 1, 53, 0);
    cJSON_Delete(req);
    cJSON_Delete(reply);
}

static void cassette(const struct fuzz_input *in)
{
    char path[PATH_MAX + 200];
    struct shim_http_reply r;
    int occ = fuzz_pick(in, 50, 4) == 0 ? 2 : 1, rc;
    size_t maxr = fuzz_pick(in, 51, 8) == 0 ? 16 : (size_t)8 << 20;

    fuzz_target = "cassette";
    if (write_recording(in, occ, path, sizeof(path)) < 0)
        return;
    memset(&r, 0, sizeof(r));
    rc = shim_cassette_load(g_dir, g_key, occ, &r, maxr);
    unlink(path);
    if (rc < 0)
        return;
    if (memchr(r.content_type, '\0', sizeof(r.content_type)) == NULL)
        fuzz_invalid("cassette-load", "content_type not terminated");
    /* deliver_raw's head ... */
    fuzz_deliver(r.head.data ? r.head.data : "", r.head.len, r.status, r.http_version,
                 r.content_type[0] ? r.content_type : NULL, (long long)r.body.len, 1);
    /* ... or the body as an upstream reply */
    if (r.status >= 200 && r.status < 300 && r.body.data)
        replay_body(in, &r);
    shim_http_reply_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;

    fuzz_input_begin(&in, data, size, 0);
    sha256_matches(&in);
    cassette(&in);
    fuzz_input_end(&in);
    return 0;
}
