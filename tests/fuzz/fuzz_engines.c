/* fuzz_engines.c - a self-contained, gcc-only fuzzer for codeshim's pure
 * engines (classify, the Responses and Chat adapters, conv helpers, stream,
 * offline, proto, cassette, deliver_head, json helpers, sha256).
 *
 * Every input goes to every target. An input is a byte string; the JSON
 * targets read it as a sequence of up to four JSON values (a request
 * followed by upstream replies; a single value is tried both as a request
 * and as a reply, next to built-in partners). Outputs are checked: JSON
 * must be strict RFC 8259 JSON (and valid UTF-8 when the input was), SSE
 * must be well framed with gap-free sequence numbers and contiguous
 * output indexes, header blocks must open with a status line and end in
 * one blank line, SHA-256 must match a reference.
 *
 * Built with -fsanitize=address,undefined (build-asan/, tests/fuzz/fuzz.mk)
 * and the engines with -fsanitize-coverage=trace-pc, whose callback below
 * gives AFL-style edge coverage to grow the corpus.
 *
 * The inputs run in a forked worker. Each input is copied into shared
 * memory before it runs, so when a sanitizer aborts the worker the parent
 * saves exactly that input (build/fuzz-crashes/) and starts a new worker,
 * which goes on with the next input. Leaks are looked for after every
 * batch; a batch that leaks is re-run input by input in fresh processes to
 * find the culprit. A worker that stops making progress is a hang.
 *
 * Usage:
 *   fuzz_engines [--seed N] [--iterations N] [--seconds S] [--corpus DIR]...
 *                [--crashes DIR] [--queue DIR] [--max-len N] [--batch N]
 *                [--hang-seconds S] [--max-crashes N] [--rss-mb N] [--profile 1]
 *   fuzz_engines FILE...   run each file once (reproduce / regression)
 * Exit status: 0 when nothing failed, 1 otherwise. */
#include "cassette.h"
#include "classify.h"
#include "conv.h"
#include "deliver.h"
#include "json.h"
#include "offline.h"
#include "proto.h"
#include "sha256.h"
#include "stream.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#else
#define HAVE_LSAN 0
#endif

/* ------------------------------------------------------------------ */
/* sanitizer defaults (the environment's ASAN_OPTIONS etc. still win)  */

const char *__asan_default_options(void);
const char *__ubsan_default_options(void);
void __sanitizer_cov_trace_pc(void);

const char *__asan_default_options(void)
{
    return "detect_leaks=1:allocator_may_return_null=1:quarantine_size_mb=16:"
           "allocator_release_to_os_interval_ms=-1:"
           "handle_abort=1:print_summary=1";
}

const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1:print_summary=1";
}

/* ------------------------------------------------------------------ */
/* coverage: -fsanitize-coverage=trace-pc calls this in every block    */

#define MAP_SIZE (1u << 16)
static uint8_t g_map[MAP_SIZE];
static uintptr_t g_prev;

__attribute__((no_sanitize_address, no_instrument_function)) void
__sanitizer_cov_trace_pc(void)
{
    /* relative to this function: the same edges on every run (ASLR) */
    uintptr_t pc = (uintptr_t)__builtin_return_address(0) - (uintptr_t)&__sanitizer_cov_trace_pc;
    uintptr_t cur = (pc ^ (pc >> 15) ^ (pc >> 27)) * 0x9E3779B1u;

    cur = (cur >> 7) & (MAP_SIZE - 1);
    g_map[cur ^ g_prev]++;
    g_prev = cur >> 1;
}

/* ------------------------------------------------------------------ */
/* options                                                             */

#define MAX_DIRS 16

static struct {
    uint64_t seed;
    uint64_t iterations;
    double seconds;
    const char *corpus[MAX_DIRS];
    int ncorpus;
    const char *crashes;
    const char *queue;
    size_t max_len;
    unsigned batch;
    double hang_seconds;
    unsigned max_crashes;
    int profile;
    unsigned rss_mb;
} opt = {
    .seed = 1,
    .iterations = 0,
    .seconds = 0,
    .crashes = "build/fuzz-crashes",
    .max_len = 128 * 1024,
    .batch = 256,
    .hang_seconds = 20,
    .max_crashes = 0,
    .rss_mb = 2048,
};

static char g_tmpdir[256]; /* cassette files */

/* ------------------------------------------------------------------ */
/* small helpers                                                       */

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "fuzz: out of memory\n");
        _exit(2);
    }
    return p;
}

static void b_reserve(struct bytes *b, size_t n)
{
    if (n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < n + 1)
            c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p) {
            fprintf(stderr, "fuzz: out of memory\n");
            _exit(2);
        }
        b->cap = c;
    }
}

static void b_set(struct bytes *b, const void *p, size_t n)
{
    b_reserve(b, n);
    if (n)
        memcpy(b->p, p, n);
    b->len = n;
}

static void b_add(struct bytes *b, const void *p, size_t n)
{
    b_reserve(b, b->len + n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void b_adds(struct bytes *b, const char *s) { b_add(b, s, strlen(s)); }

/* Replaces b[pos, pos+del) with p[0, n). */
static void b_splice(struct bytes *b, size_t pos, size_t del, const void *p, size_t n)
{
    if (pos > b->len)
        pos = b->len;
    if (del > b->len - pos)
        del = b->len - pos;
    b_reserve(b, b->len - del + n);
    memmove(b->p + pos + n, b->p + pos + del, b->len - pos - del);
    if (n)
        memcpy(b->p + pos, p, n);
    b->len = b->len - del + n;
}

/* strlcpy: truncating copy (no format-truncation warnings). */
static void scopy(char *d, size_t n, const char *s)
{
    size_t k = strlen(s);
    if (k >= n)
        k = n - 1;
    memcpy(d, s, k);
    d[k] = '\0';
}

static uint64_t fnv64(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ULL;
    while (n--) {
        h ^= *s++;
        h *= 1099511628211ULL;
    }
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* deterministic PRNG (splitmix64 seeding xoshiro256**)                */

struct rng {
    uint64_t s[4];
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
    int i;
    for (i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rnext(struct rng *r)
{
    uint64_t res = rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;
    r->s[2] ^= r->s[0];
    r->s[3] ^= r->s[1];
    r->s[1] ^= r->s[2];
    r->s[0] ^= r->s[3];
    r->s[2] ^= t;
    r->s[3] = rotl(r->s[3], 45);
    return res;
}

/* Uniform in [0, n); 0 when n == 0. */
static size_t rbelow(struct rng *r, size_t n) { return n ? (size_t)(rnext(r) % n) : 0; }
static int rchance(struct rng *r, unsigned pct) { return rbelow(r, 100) < pct; }

/* ------------------------------------------------------------------ */
/* strict output checks                                                */

static const char *g_target = "?"; /* what is running, for reports */

__attribute__((noreturn, format(printf, 2, 3))) static void
invalid(const char *check, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fuzz: invalid output: %s: ", check);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (target %s)\nSUMMARY: fuzz: invalid output: %s\n", g_target, check);
    fflush(stderr);
    abort();
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint32_t c;
    size_t k, i;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        k = 2, c = p[0] & 0x1F;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF)
        k = 3, c = p[0] & 0x0F;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4)
        k = 4, c = p[0] & 0x07;
    else
        return 0;
    if (n < k)
        return 0;
    for (i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if ((k == 3 && c < 0x800) || (k == 4 && c < 0x10000) || c > 0x10FFFF ||
        (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    return k;
}

static int utf8_valid(const uint8_t *p, size_t n)
{
    size_t i = 0, k;
    while (i < n) {
        if (!(k = utf8_seq(p + i, n - i)))
            return 0;
        i += k;
    }
    return 1;
}

static size_t skip_ws(const char *p, size_t n, size_t i)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A strict JSON string at p[i] ('"'); returns the index after it, or 0. */
static size_t check_string(const char *p, size_t n, size_t i, int utf8, const char **why)
{
    i++;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"')
            return i + 1;
        if (c < 0x20) {
            *why = "raw control character in a string";
            return 0;
        }
        if (c == '\\') {
            if (i + 1 >= n)
                break;
            c = (unsigned char)p[i + 1];
            if (c == 'u') {
                if (i + 5 >= n || !is_hex(p[i + 2]) || !is_hex(p[i + 3]) || !is_hex(p[i + 4]) ||
                    !is_hex(p[i + 5])) {
                    *why = "bad \\u escape";
                    return 0;
                }
                i += 6;
            } else if (strchr("\"\\/bfnrt", c) && c) {
                i += 2;
            } else {
                *why = "bad escape";
                return 0;
            }
            continue;
        }
        if (c >= 0x80 && utf8) {
            size_t k = utf8_seq((const uint8_t *)p + i, n - i);
            if (!k) {
                *why = "invalid UTF-8 in a string";
                return 0;
            }
            i += k;
            continue;
        }
        i++;
    }
    *why = "unterminated string";
    return 0;
}

static size_t check_number(const char *p, size_t n, size_t i)
{
    size_t s;
    if (i < n && p[i] == '-')
        i++;
    if (i >= n)
        return 0;
    if (p[i] == '0')
        i++;
    else if (p[i] >= '1' && p[i] <= '9')
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    else
        return 0;
    if (i < n && p[i] == '.') {
        s = ++i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == s)
            return 0;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        s = i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == s)
            return 0;
    }
    return i;
}

/* NULL when p[0,n) is exactly one strict JSON value, else why not.
 * Iterative: no nesting limit. */
static const char *json_strict(const char *p, size_t n, int utf8)
{
    char *stack = NULL;
    size_t depth = 0, cap = 0, i = 0;
    const char *why = NULL;

#define PUSH(c)                                                                \
    do {                                                                       \
        if (depth == cap) {                                                    \
            cap = cap ? cap * 2 : 64;                                          \
            stack = realloc(stack, cap);                                       \
            if (!stack)                                                        \
                return "out of memory";                                        \
        }                                                                      \
        stack[depth++] = (c);                                                  \
    } while (0)

    i = skip_ws(p, n, i);
value:
    if (i >= n) {
        why = "truncated";
        goto bad;
    }
    switch (p[i]) {
    case '{':
        PUSH('o');
        i = skip_ws(p, n, i + 1);
        if (i < n && p[i] == '}') {
            depth--;
            i++;
            goto after;
        }
        goto key;
    case '[':
        PUSH('a');
        i = skip_ws(p, n, i + 1);
        if (i < n && p[i] == ']') {
            depth--;
            i++;
            goto after;
        }
        goto value;
    case '"':
        if (!(i = check_string(p, n, i, utf8, &why)))
            goto bad;
        goto after;
    case 't':
        if (n - i < 4 || memcmp(p + i, "true", 4))
            goto badlit;
        i += 4;
        goto after;
    case 'f':
        if (n - i < 5 || memcmp(p + i, "false", 5))
            goto badlit;
        i += 5;
        goto after;
    case 'n':
        if (n - i < 4 || memcmp(p + i, "null", 4))
            goto badlit;
        i += 4;
        goto after;
    default:
        if (!(i = check_number(p, n, i))) {
            why = "bad number or unexpected character";
            goto bad;
        }
        goto after;
    }
key:
    if (i >= n || p[i] != '"') {
        why = "object key is not a string";
        goto bad;
    }
    if (!(i = check_string(p, n, i, utf8, &why)))
        goto bad;
    i = skip_ws(p, n, i);
    if (i >= n || p[i] != ':') {
        why = "missing ':'";
        goto bad;
    }
    i = skip_ws(p, n, i + 1);
    goto value;
after:
    i = skip_ws(p, n, i);
    if (!depth) {
        free(stack);
        return i == n ? NULL : "trailing bytes after the value";
    }
    if (i < n && p[i] == ',') {
        i = skip_ws(p, n, i + 1);
        if (stack[depth - 1] == 'o')
            goto key;
        goto value;
    }
    if (i < n && ((stack[depth - 1] == 'o' && p[i] == '}') ||
                  (stack[depth - 1] == 'a' && p[i] == ']'))) {
        depth--;
        i++;
        goto after;
    }
    why = "expected ',' or a closing bracket";
    goto bad;
badlit:
    why = "bad literal";
bad:
    free(stack);
    return why;
#undef PUSH
}

static int g_utf8; /* the input was valid UTF-8: outputs must be too */
static int g_all;  /* replay: every target on every input, no sampling */

/* Prints j and checks the text; returns it (caller frees). */
static char *check_json(const char *check, const cJSON *j)
{
    char *s;
    const char *why;

    if (!j)
        return NULL;
    s = cJSON_PrintUnformatted(j);
    if (!s)
        invalid(check, "cJSON_PrintUnformatted failed on the output");
    if ((why = json_strict(s, strlen(s), g_utf8)) != NULL)
        invalid(check, "%s: %.300s", why, s);
    return s;
}

static void check_json_free(const char *check, const cJSON *j)
{
    free(check_json(check, j));
}

/* ------------------------------------------------------------------ */
/* reference SHA-256 (independent of shim/sha256.c)                    */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int k) { return (x >> k) | (x << (32 - k)); }

static void ref_block(uint32_t h[8], const uint8_t *b)
{
    uint32_t w[64], a, bb, c, d, e, f, g, hh, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
               (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
    for (i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
               w[i - 7] + (ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10));
    a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        hh = g, g = f, f = e, e = d + t1, d = c, c = bb, bb = a, a = t1 + t2;
    }
    h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

static void ref_sha256_hex(const uint8_t *p, size_t n, char out[65])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint8_t last[128];
    size_t full = n / 64 * 64, rest = n - full, tail, i;
    uint64_t bits = (uint64_t)n * 8;

    for (i = 0; i < full; i += 64)
        ref_block(h, p + i);
    memset(last, 0, sizeof(last));
    memcpy(last, p + full, rest);
    last[rest] = 0x80;
    tail = rest < 56 ? 64 : 128;
    for (i = 0; i < 8; i++)
        last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
    ref_block(h, last);
    if (tail == 128)
        ref_block(h, last + 64);
    for (i = 0; i < 8; i++)
        snprintf(out + 8 * i, 9, "%08x", h[i]);
}

/* ------------------------------------------------------------------ */
/* built-in partners for single-document inputs                        */

static const char builtin_resp_req[] =
    "{\"model\":\"gpt-4.1\",\"input\":[{\"role\":\"user\",\"content\":\"Compute 2+2\"}],"
    "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}},"
    "{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}],"
    "\"tool_choice\":\"auto\",\"stream\":true,\"metadata\":{\"session_id\":\"s1\"}}";
static const char builtin_resp_calls[] =
    "{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
    "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]},"
    "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"python\","
    "\"arguments\":\"{\\\"code\\\":\\\"1+1\\\"}\"},"
    "{\"type\":\"message\",\"id\":\"msg_0\",\"role\":\"assistant\",\"content\":[{\"type\":"
    "\"output_text\",\"text\":\"Let me run that.\",\"annotations\":[]}]},"
    "{\"type\":\"function_call\",\"id\":\"fc_2\",\"call_id\":\"call_b\",\"name\":\"python\","
    "\"arguments\":\"{\\\"code\\\":\\\"2+2\\\"}\"}],"
    "\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":2},"
    "\"output_tokens\":5,\"output_tokens_details\":{\"reasoning_tokens\":1},\"total_tokens\":15}}";
static const char builtin_resp_final[] =
    "{\"id\":\"resp_2\",\"object\":\"response\",\"status\":\"completed\",\"output\":["
    "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"status\":\"completed\","
    "\"content\":[{\"type\":\"output_text\",\"text\":\"The answer is 4.\",\"annotations\":[]}]}],"
    "\"usage\":{\"input_tokens\":20,\"output_tokens\":3,\"total_tokens\":23}}";
static const char builtin_chat_req[] =
    "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"Compute 2+2\"}],"
    "\"tools\":[{\"type\":\"code_interpreter\"},{\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}],"
    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
static const char builtin_chat_calls[] =
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1700000000,"
    "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":null,\"tool_calls\":[{\"id\":\"call_a\",\"type\":\"function\",\"function\":"
    "{\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"2+2\\\"}\"}}]},"
    "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,"
    "\"completion_tokens\":7,\"total_tokens\":16}}";
static const char builtin_chat_final[] =
    "{\"id\":\"chatcmpl-2\",\"object\":\"chat.completion\",\"created\":1700000001,"
    "\"model\":\"gpt-4o\",\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,"
    "\"message\":{\"role\":\"assistant\",\"content\":\"The answer is 4.\"},"
    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":30,"
    "\"completion_tokens\":5,\"total_tokens\":35}}";

static cJSON *parse_const(const char *s) { return shim_json_parse(s, strlen(s)); }

/* ------------------------------------------------------------------ */
/* SSE checks                                                          */

struct sink {
    struct bytes out;
    int writes;
    int fail_at;    /* the fail_at-th write fails (0: never) */
    int failed;
    int after_fail; /* writes attempted after a failure */
};

static int sink_write(void *ctx, const char *p, size_t n)
{
    struct sink *s = ctx;

    if (s->failed) {
        s->after_fail++;
        return -1;
    }
    if (++s->writes == s->fail_at || s->out.len + n > ((size_t)64 << 20)) {
        s->failed = 1;
        return -1;
    }
    if (n == 0 || p[n - 1] != '\n' || (n > 1 && p[n - 2] != '\n'))
        invalid("sse-write", "a write is not a whole event: %.*s", (int)(n > 200 ? 200 : n), p);
    b_add(&s->out, p, n);
    return 0;
}

static long json_long(const cJSON *o, const char *k, long dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (long)v->valueint : dflt;
}

/* Checks the framing and the event invariants of a stream's bytes.
 * complete: finish/fail ran and no write failed. */
static void check_sse(enum shim_api api, const struct sink *sk, int started, int ended,
                      int failed_ev)
{
    const char *p = (const char *)sk->out.p, *end = p + sk->out.len;
    long seq = 0, next_index = 0, open_index = -1;
    int nev = 0, done = 0, last_terminal = 0, unparsed = 0;
    char *resp_id = NULL; /* the stream's id (any length) */

    if (sk->after_fail)
        invalid("sse-after-failure", "%d writes after the write function failed",
                sk->after_fail);
    while (p < end) {
        const char *name = NULL, *data, *nl, *evend;
        size_t name_len = 0, data_len;
        cJSON *j;
        const char *why;

        evend = NULL;
        for (nl = p; nl + 1 < end; nl++)
            if (nl[0] == '\n' && nl[1] == '\n') {
                evend = nl;
                break;
            }
        if (!evend)
            invalid("sse-framing", "event not terminated by a blank line");
        if (done)
            invalid("sse-after-done", "bytes after data: [DONE]");
        if (!strncmp(p, "event: ", 7)) {
            name = p + 7;
            nl = memchr(name, '\n', (size_t)(evend - name));
            if (!nl)
                invalid("sse-framing", "event line without a data line");
            name_len = (size_t)(nl - name);
            p = nl + 1;
        }
        if (strncmp(p, "data: ", 6))
            invalid("sse-framing", "expected a data line: %.80s", p);
        data = p + 6;
        data_len = (size_t)(evend - data);
        if (memchr(data, '\n', data_len) || memchr(data, '\r', data_len))
            invalid("sse-framing", "raw newline inside a data line");
        if (name && (memchr(name, '\r', name_len) || name_len == 0))
            invalid("sse-framing", "bad event name");
        nev++;
        p = evend + 2;
        if (api == SHIM_API_CHAT && data_len == 6 && !memcmp(data, "[DONE]", 6)) {
            done = 1;
            continue;
        }
        if ((why = json_strict(data, data_len, g_utf8)) != NULL)
            invalid("sse-json", "%s: %.*s", why, (int)(data_len > 300 ? 300 : data_len), data);
        j = shim_json_parse(data, data_len);
        if (!j) {
            /* strict JSON, but nested deeper than cJSON parses (a request
             * nested to cJSON's limit, echoed inside an event): framing
             * only from here on */
            unparsed = 1;
        }
        if (unparsed) {
            cJSON_Delete(j);
            continue;
        }
        if (!cJSON_IsObject(j))
            invalid("sse-json", "event data is not an object");
        if (api == SHIM_API_RESPONSES) {
            const char *type = shim_json_str(j, "type");
            const cJSON *sn = cJSON_GetObjectItemCaseSensitive(j, "sequence_number");
            if (!name || !type || strlen(type) != name_len || memcmp(type, name, name_len))
                invalid("sse-event-name", "event name and data type differ");
            if (!cJSON_IsNumber(sn) || sn->valuedouble != (double)seq)
                invalid("sse-sequence", "sequence_number %g, expected %ld",
                        cJSON_IsNumber(sn) ? sn->valuedouble : -1.0, seq);
            seq++;
            if (last_terminal)
                invalid("sse-order", "event after the terminal event");
            if (!strcmp(type, "response.output_item.added")) {
                long idx = json_long(j, "output_index", -2);
                if (open_index >= 0 || idx != next_index)
                    invalid("sse-output-index", "output_item.added index %ld, expected %ld%s",
                            idx, next_index, open_index >= 0 ? " (item still open)" : "");
                open_index = idx;
            } else if (!strcmp(type, "response.output_item.done")) {
                long idx = json_long(j, "output_index", -2);
                if (idx != open_index)
                    invalid("sse-output-index", "output_item.done index %ld, open %ld", idx,
                            open_index);
                open_index = -1;
                next_index = idx + 1;
            } else if (!strcmp(type, "response.created") ||
                       !strcmp(type, "response.completed") ||
                       !strcmp(type, "response.incomplete") ||
                       !strcmp(type, "response.failed")) {
                const char *id = shim_json_str(cJSON_GetObjectItemCaseSensitive(j, "response"), "id");
                if (!strcmp(type, "response.created")) {
                    if (nev != 1)
                        invalid("sse-order", "response.created is not the first event");
                    free(resp_id);
                    resp_id = strdup(id ? id : "");
                } else {
                    last_terminal = 1;
                    if (resp_id && (!id || strcmp(id, resp_id)))
                        invalid("sse-response-id", "final id differs from response.created's");
                }
            }
        } else {
            const char *id = shim_json_str(j, "id");
            if (name)
                invalid("sse-framing", "chat chunks carry no event name");
            if (cJSON_GetObjectItemCaseSensitive(j, "error")) {
                /* the failure chunk */
            } else {
                const char *obj = shim_json_str(j, "object");
                if (!obj || strcmp(obj, "chat.completion.chunk"))
                    invalid("sse-chunk", "chunk object is not chat.completion.chunk");
                if (!resp_id) {
                    resp_id = strdup(id ? id : "");
                } else if (!id || strcmp(id, resp_id)) {
                    invalid("sse-response-id", "chunk ids differ");
                }
            }
        }
        cJSON_Delete(j);
    }
    free(resp_id);
    if (!sk->failed && ended && started && !unparsed) {
        if (api == SHIM_API_RESPONSES && !last_terminal)
            invalid("sse-order", "stream ended without a terminal event");
        if (api == SHIM_API_CHAT && !done && !failed_ev)
            invalid("sse-order", "chat stream ended without [DONE]");
    }
}

/* ------------------------------------------------------------------ */
/* header block checks                                                 */

static int line_named(const char *p, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && !strncasecmp(p, name, k) && p[k] == ':';
}

/* want_status: the block must start with a status line (the upstream's
 * block had one, or none was given and deliver_head must make it). */
static void check_head(const struct shim_buf *b, const char *ctype, long long body_len,
                       int want_status)
{
    const char *p = b->data, *end = b->data + b->len;
    int nct = 0, ncl = 0, first = 1, status_line = b->len >= 5 && !memcmp(p, "HTTP/", 5);

    if (want_status && !status_line)
        invalid("head-status-line", "header block does not start with a status line: %.60s",
                b->data);
    if (b->len < 4 || memcmp(end - 4, "\r\n\r\n", 4))
        invalid("head-end", "header block does not end in CRLF CRLF");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;
        if (!nl || nl == p || nl[-1] != '\r')
            invalid("head-line", "a line does not end in CRLF");
        n = (size_t)(nl - p - 1);
        if (n == 0 && nl + 1 != end)
            invalid("head-blank", "blank line before the end of the header block");
        if (!first && n) {
            nct += line_named(p, n, "Content-Type");
            ncl += line_named(p, n, "Content-Length");
        }
        first = 0;
        p = nl + 1;
    }
    if (status_line && (nct != (ctype ? 1 : 0) || ncl != (body_len >= 0 ? 1 : 0)))
        invalid("head-fields", "%d Content-Type and %d Content-Length lines", nct, ncl);
}

/* Whether deliver_head must start its block with a status line: the
 * upstream's first non-blank line (as deliver_head splits lines: at LF,
 * trailing CRs and LFs trimmed) is one, or there is none at all. */
static int head_wants_status(const char *p, size_t n)
{
    const char *end = p + n;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p), t = len;
        while (t && (p[t - 1] == '\r' || p[t - 1] == '\n'))
            t--;
        if (t)
            return t >= 5 && !memcmp(p, "HTTP/", 5);
        p += len + (nl ? 1 : 0);
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* the targets                                                         */

#define MAX_DOCS 4

struct input {
    const uint8_t *p;
    size_t n;
    uint64_t h;    /* hash: picks variants deterministically */
    cJSON *doc[MAX_DOCS];
    int ndocs;
};

static unsigned pick(const struct input *in, int salt, unsigned n)
{
    uint64_t x = in->h ^ ((uint64_t)salt * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    return n ? (unsigned)(x % n) : 0;
}

/* A heap copy of exactly n bytes: over-reads hit the redzone. */
static char *exact(const void *p, size_t n)
{
    char *c = xmalloc(n);
    if (n)
        memcpy(c, p, n);
    return c;
}

static char *cstr(const void *p, size_t n)
{
    char *c = xmalloc(n + 1);
    if (n)
        memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

static void t_classify(const struct input *in)
{
    static const char *const urls[] = {"https://api.openai.com/v1/responses",
                                       "http://127.0.0.1:8080/v1/chat/completions?x=1",
                                       "localhost/responses/", "https://h/v1/files"};
    static const char *const methods[] = {NULL, "POST", "post", "PUT", ""};
    char *s = cstr(in->p, in->n), *body = exact(in->p, in->n);
    int i;

    g_target = "classify";
    shim_classify_url(s);
    for (i = 0; i < 4; i++)
        shim_classify_transfer(1, methods[(pick(in, 10 + i, 5))], urls[i], body, in->n,
                               pick(in, 20, 2) ? (size_t)1 << 20 : in->n / 2);
    shim_classify_transfer(1, NULL, s, body, in->n, (size_t)1 << 20);
    for (i = 0; i < in->ndocs; i++)
        shim_classify_body(in->doc[i]);
    free(s);
    free(body);
}

/* Walks every node: json.c helpers on each member (shim_json_int must
 * clamp what no long long holds: 1e300, inf). */
static void json_walk(const cJSON *node, int depth)
{
    const cJSON *it;

    if (depth > 1100)
        return;
    cJSON_ArrayForEach(it, node)
    {
        if (it->string && cJSON_IsObject(node)) {
            shim_json_str(node, it->string);
            shim_json_int(node, it->string);
        }
        if (it->child)
            json_walk(it, depth + 1);
    }
}

static void t_json(const struct input *in)
{
    int i;

    g_target = "json";
    if (!g_all && pick(in, 32, 4) != 0)
        return; /* a simple target: a sample is enough */
    for (i = 0; i < in->ndocs; i++) {
        cJSON *dup = cJSON_Duplicate(in->doc[i], 1);
        json_walk(in->doc[i], 0);
        /* set on an object, and on anything else (takes the value) */
        shim_json_set(dup, dup && dup->child && dup->child->string ? dup->child->string : "k",
                      cJSON_CreateString("replaced"));
        shim_json_set(dup, "new_key", cJSON_CreateNumber(1));
        check_json_free("json-set", dup);
        cJSON_Delete(dup);
    }
}

static void t_sha256(const struct input *in)
{
    char a[65], b[65], c[65];
    struct shim_sha256 s;
    unsigned char d[32];
    size_t off = 0;
    unsigned step = 1 + pick(in, 30, 97);
    int i;

    g_target = "sha256";
    if (!g_all && pick(in, 31, 16) != 0 && in->n > 256)
        return; /* no input-dependent branches: a sample is enough */
    shim_sha256_hex(in->p, in->n, a);
    ref_sha256_hex(in->p, in->n, b);
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
        invalid("sha256", "digest %s, reference %s, incremental %s", a, b, c);
}

static void t_conv_helpers(const struct input *in)
{
    int i, chat;
    char *s = cstr(in->p, in->n);
    const char *why;
    char *code;

    g_target = "conv";
    code = shim_conv_parse_code(s, &why);
    if (!code && !why)
        invalid("parse-code", "NULL without a reason");
    if (code && !why && g_utf8 && !utf8_valid((const uint8_t *)code, strlen(code)))
        invalid("parse-code", "code is not UTF-8");
    free(code);
    free(s);
    for (i = 0; i < in->ndocs; i++) {
        const cJSON *d = in->doc[i];
        const char *refs[16];
        size_t k, n = shim_conv_container_refs(d, refs, pick(in, 40, 17));
        cJSON *echo;
        for (k = 0; k < n; k++)
            if (strncmp(refs[k], "cntr_", 5))
                invalid("container-refs", "a reference without the cntr_ prefix");
        shim_conv_session_id(d);
        echo = shim_responses_echo_tools(d);
        check_json_free("echo-tools", echo);
        cJSON_Delete(echo);
        for (chat = 0; chat < 2; chat++) {
            cJSON *dup = cJSON_Duplicate(d, 1);
            char name[SHIM_TOOL_NAME_MAX];
            struct shim_conv cv;
            memset(&cv, 0, sizeof(cv));
            shim_conv_pick_tool_name(cJSON_GetObjectItemCaseSensitive(d, "tools"), chat, name,
                                     sizeof(name));
            snprintf(cv.tool_name, sizeof(cv.tool_name), "%s", name);
            if (dup) {
                shim_conv_strip_private(dup);
                shim_conv_rewrite_choice(dup, &cv, chat);
                shim_conv_relax_choice(dup, chat);
                check_json_free("conv-choice", dup);
            }
            cJSON_Delete(dup);
        }
    }
}

static void t_offline(const struct input *in)
{
    int i, a;

    g_target = "offline";
    for (i = 0; i < in->ndocs; i++)
        for (a = 0; a < 2; a++) {
            cJSON *r = shim_offline_reply(a ? SHIM_API_CHAT : SHIM_API_RESPONSES, in->doc[i]);
            check_json_free("offline-reply", r);
            cJSON_Delete(r);
        }
}

static void proto_result(const cJSON *j)
{
    struct shim_exec_result r;
    cJSON *back;

    if (shim_proto_result_from_json(j, &r) < 0)
        return;
    back = shim_proto_result_to_json(&r);
    check_json_free("proto-result", back);
    cJSON_Delete(back);
    shim_exec_result_free(&r);
}

static void proto_feed(const void *p, size_t n)
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
            break; /* the socket buffer is full: the rest is never sent */
        off += (size_t)k;
    }
    shutdown(sv[1], SHUT_WR);
    if (shim_proto_recv(sv[0], &out, 200) == 0) {
        if (!cJSON_IsObject(out))
            invalid("proto-recv", "0 without an object");
        proto_result(out);
        check_json_free("proto-recv", out);
    } else if (out) {
        invalid("proto-recv", "*out set on failure");
    }
    cJSON_Delete(out);
    close(sv[0]);
    close(sv[1]);
}

static void t_proto(const struct input *in)
{
    unsigned char hdr[4];
    char *framed;
    int i;

    g_target = "proto";
    for (i = 0; i < in->ndocs; i++)
        proto_result(in->doc[i]);
    if (in->n > 4 * 1024 * 1024)
        return;
    proto_feed(in->p, in->n);
    hdr[0] = (unsigned char)(in->n >> 24);
    hdr[1] = (unsigned char)(in->n >> 16);
    hdr[2] = (unsigned char)(in->n >> 8);
    hdr[3] = (unsigned char)in->n;
    framed = xmalloc(in->n + 4);
    memcpy(framed, hdr, 4);
    memcpy(framed + 4, in->p, in->n);
    proto_feed(framed, in->n + 4);
    free(framed);
}

static void t_deliver(const char *head, size_t n, long status, long version,
                      const char *ctype, long long len, int want_status)
{
    struct shim_buf b;
    char *h = exact(head, n);

    g_target = "deliver_head";
    shim_buf_init(&b, (size_t)4 << 20);
    if (shim_deliver_head(&b, status, version, n ? h : NULL, n, ctype, len) == 0) {
        check_head(&b, ctype, len, want_status);
        /* a content type with a line break (a tampered cassette) must not
         * put its lines into the block */
        if (ctype && strpbrk(ctype, "\r\n")) {
            char *line = xmalloc(strlen(ctype) + 16);
            sprintf(line, "Content-Type: %s", ctype);
            if (memmem(b.data, b.len, line, strlen(line)))
                invalid("head-injection", "content type with a line break copied into the block");
            free(line);
        }
    }
    shim_buf_free(&b);
    free(h);
}

static void run_scenario(const struct input *in, enum shim_api api, const cJSON *req,
                         const cJSON *const *replies, int nreplies, int salt);

static void t_cassette(const struct input *in)
{
    static const char key[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char path[400];
    struct shim_http_reply r;
    int occ = pick(in, 50, 4) == 0 ? 2 : 1, fd, rc;
    size_t maxr = pick(in, 51, 8) == 0 ? 16 : (size_t)8 << 20;

    g_target = "cassette";
    if (occ > 1)
        snprintf(path, sizeof(path), "%s/%s-%d.json", g_tmpdir, key, occ);
    else
        snprintf(path, sizeof(path), "%s/%s.json", g_tmpdir, key);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (write(fd, in->p, in->n) != (ssize_t)in->n) {
        close(fd);
        unlink(path);
        return;
    }
    close(fd);
    memset(&r, 0, sizeof(r));
    rc = shim_cassette_load(g_tmpdir, key, occ, &r, maxr);
    unlink(path);
    if (rc < 0)
        return;
    if (memchr(r.content_type, '\0', sizeof(r.content_type)) == NULL)
        invalid("cassette-load", "content_type not terminated");

    /* what loop.c does with a replayed answer: deliver_raw's head ... */
    t_deliver(r.head.data ? r.head.data : "", r.head.len, r.status, r.http_version,
              r.content_type[0] ? r.content_type : NULL, (long long)r.body.len, 1);
    g_target = "cassette";
    /* ... or the body as an upstream reply */
    if (r.status >= 200 && r.status < 300 && r.body.data) {
        cJSON *reply = shim_json_parse(r.body.data, r.body.len);
        if (reply) {
            const cJSON *reps[1] = {reply};
            cJSON *req = parse_const(pick(in, 52, 2) ? builtin_chat_req : builtin_resp_req);
            run_scenario(in, pick(in, 52, 2) ? SHIM_API_CHAT : SHIM_API_RESPONSES, req, reps,
                         1, 53);
            cJSON_Delete(req);
            cJSON_Delete(reply);
        }
    }
    shim_http_reply_free(&r);
}

static void t_heads(const struct input *in)
{
    static const char *const ctypes[] = {"application/json", "text/event-stream", NULL};
    static const long statuses[] = {200, 400, 429, 500, 0, -1, 999999, 204};

    t_deliver((const char *)in->p, in->n, statuses[pick(in, 60, 8)],
              pick(in, 61, 2) ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_1_1,
              ctypes[pick(in, 62, 3)], pick(in, 63, 3) ? (long long)in->n : -1,
              head_wants_status((const char *)in->p, in->n));
}

static void t_sse_frame(const struct input *in)
{
    struct shim_buf b;
    char *data = cstr(in->p, in->n), name[64];
    const char *nm = NULL;
    size_t dl = strlen(data), k;
    struct bytes want = {0};

    g_target = "sse_frame";
    if (pick(in, 70, 2)) {
        for (k = 0; k < sizeof(name) - 1 && k < dl && data[k] != '\n' && data[k] != '\r'; k++)
            name[k] = data[k];
        name[k] = '\0';
        nm = name;
    }
    shim_buf_init(&b, pick(in, 71, 5) ? (size_t)1 << 24 : 64);
    if (shim_sse_frame(&b, nm, data) == 0) {
        if (nm) {
            b_adds(&want, "event: ");
            b_adds(&want, nm);
            b_adds(&want, "\n");
        }
        b_adds(&want, "data: ");
        b_adds(&want, data);
        b_adds(&want, "\n\n");
        if (want.len != b.len || memcmp(want.p, b.data, b.len))
            invalid("sse-frame", "frame differs from event/data/blank line");
    }
    free(want.p);
    shim_buf_free(&b);
    free(data);
}

/* The loop's run_call with the sandbox faked, in two halves: what is
 * known when the execution starts (streamed as it begins) ... */
static void fake_exec_begin(struct shim_call *c, int k)
{
    const char *why;

    c->executed = 1;
    snprintf(c->ci_id, sizeof(c->ci_id), "ci_%048d", k);
    snprintf(c->container_id, sizeof(c->container_id), "cntr_%048d", 7);
    c->code = shim_conv_parse_code(c->arguments, &why);
    if (!c->code) {
        c->output = strdup(why ? why : "?");
        c->status = "failed";
    }
}

/* ... and what it gave: output text like test_responses.c's fake_exec,
 * varied by the input's hash (UTF-8, control bytes, long, images). */
static void fake_exec_end(const struct input *in, struct shim_call *c, int k)
{
    static const char *const outs[] = {"4\n", "", "h\xc3\xa9llo \xe2\x9c\x93\n",
                                       "Traceback (most recent call last):\n  x\nNameError\n",
                                       "ctl\x01\x1f\x7f\ttab"};
    static const char *const st[] = {"completed", "failed", "incomplete"};
    unsigned v = pick(in, 100 + k, 64), i;

    if (!c->code)
        return;
    if (v % 7 == 0) {
        size_t n = 1000 + v * 100;
        c->output = xmalloc(n + 1);
        memset(c->output, 'x', n);
        c->output[n] = '\0';
    } else if (v % 5 == 0) {
        c->output = strdup(c->code); /* echoes the model's own bytes */
    } else {
        c->output = strdup(outs[v % 5]);
    }
    c->status = st[v % 3];
    c->res.status = SHIM_EXEC_OK;
    c->res.logs = strdup(c->output);
    c->res.logs_len = strlen(c->output);
    if (v % 4 == 1) {
        c->res.nimages = 1 + v % 3;
        c->res.images = calloc(c->res.nimages, sizeof(*c->res.images));
        for (i = 0; i < c->res.nimages; i++) {
            c->res.images[i].mime = strdup("image/png");
            c->res.images[i].base64 = strdup("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==");
        }
    }
}

static void free_calls(struct shim_call *calls, size_t n)
{
    while (n)
        shim_call_free(&calls[--n]);
    free(calls);
}

/* One intercepted conversation, as loop.c's step() runs it, with the
 * upstream's replies taken from the input and the sandbox faked. */
static void run_scenario(const struct input *in, enum shim_api api, const cJSON *req,
                         const cJSON *const *replies, int nreplies, int salt)
{
    const struct shim_api_ops *ops = api == SHIM_API_CHAT ? &shim_chat_ops : &shim_responses_ops;
    const char *saved_target = g_target;
    struct shim_conv cv;
    struct shim_stream st;
    struct sink sk;
    cJSON *up, *off;
    int k, streaming = 0, stream_wanted, r_capped = 0, executed = 0, ended = 0, failed_ev = 0;
    int started = 0;

    g_target = api == SHIM_API_CHAT ? "chat" : "responses";
    memset(&cv, 0, sizeof(cv));
    memset(&sk, 0, sizeof(sk));
    cv.max_exec = (int)(1 + pick(in, salt + 1, 4));
    if (pick(in, salt + 2, 4) == 0)
        cv.max_exec = 20;
    up = ops->prepare(req, &cv);
    if (!up) {
        shim_conv_free(&cv);
        g_target = saved_target;
        return;
    }
    check_json_free("prepare", up);
    if (!shim_classify_body(req)) {
        /* the loop never sees such a request: prepare only */
        cJSON_Delete(up);
        shim_conv_free(&cv);
        g_target = saved_target;
        return;
    }
    stream_wanted = cv.stream || pick(in, salt + 3, 3) == 0;
    sk.fail_at = pick(in, salt + 4, 6) == 0 ? (int)(1 + pick(in, salt + 5, 40)) : 0;
    shim_stream_init(&st, api, &cv, sink_write, &sk);
    for (k = 0; k < nreplies; k++) {
        const cJSON *reply = replies[k];
        struct shim_call *calls = NULL;
        size_t n = 0, i;
        int foreign = 0, capped = 0;

        if (!reply || ops->scan(reply, &cv, &calls, &n, &foreign) < 0) {
            if (calls || n)
                invalid("scan", "calls returned with a failure");
            if (streaming) {
                shim_stream_fail(&st, "upstream_error", "the model server's answer could not be read");
                ended = failed_ev = 1;
            }
            break;
        }
        for (i = 0; i < n; i++)
            if (!calls[i].call_id)
                invalid("scan", "call without call_id");
        if (stream_wanted && !streaming) {
            streaming = started = 1;
            shim_stream_start(&st, req, reply);
        }
        if (streaming)
            shim_stream_turn(&st, reply);
        for (i = 0; i < n; i++) {
            if (r_capped || executed >= cv.max_exec) {
                calls[i].skipped = 1;
                calls[i].output = strdup("Not run: over the cap.");
                capped = 1;
                continue;
            }
            executed++;
            fake_exec_begin(&calls[i], (int)i);
            if (streaming)
                shim_stream_exec_begin(&st, &calls[i]);
            fake_exec_end(in, &calls[i], (int)i);
            if (streaming)
                shim_stream_exec_end(&st, &calls[i]);
        }
        if (capped && !r_capped && !foreign && k + 1 < nreplies) {
            r_capped = 1;
            ops->advance(up, reply, calls, n, &cv);
            shim_json_set(up, "tool_choice", cJSON_CreateString("none"));
            check_json_free("advance", up);
        } else if (n == 0 || capped || r_capped || foreign || k + 1 == nreplies) {
            cJSON *answer = ops->finish(req, reply, calls, n, &cv, capped || r_capped);
            check_json_free("finish", answer);
            if (streaming) {
                if (!answer || pick(in, salt + 6, 8) == 0) {
                    shim_stream_fail(&st, "server_error", "codeshim: out of memory");
                    failed_ev = 1;
                } else {
                    shim_stream_finish(&st, answer);
                }
                ended = 1;
            }
            cJSON_Delete(answer);
            free_calls(calls, n);
            break;
        } else {
            ops->advance(up, reply, calls, n, &cv);
            check_json_free("advance", up);
            /* the offline model answers the follow-up request */
            off = shim_offline_reply(api, up);
            check_json_free("offline-followup", off);
            cJSON_Delete(off);
        }
        free_calls(calls, n);
    }
    if (streaming)
        check_sse(api, &sk, started, ended, failed_ev);
    shim_stream_free(&st);
    free(sk.out.p);
    cJSON_Delete(up);
    shim_conv_free(&cv);
    g_target = saved_target;
}

/* A stream that fails right after its start (the upstream failed on the
 * next call). As in the loop, a stream starts only from a reply that scan
 * accepted, for a request that classify accepted. */
static void t_stream_fail(const struct input *in)
{
    int a, i;

    g_target = "stream";
    if (!g_all && pick(in, 33, 3) != 0)
        return; /* the scenarios stream too: a sample is enough */
    for (i = 0; i < in->ndocs; i++)
        for (a = 0; a < 2; a++) {
            enum shim_api api = a ? SHIM_API_CHAT : SHIM_API_RESPONSES;
            const struct shim_api_ops *ops = a ? &shim_chat_ops : &shim_responses_ops;
            struct shim_conv cv;
            struct shim_stream st;
            struct sink sk;
            struct shim_call *calls = NULL;
            size_t n = 0;
            int foreign;
            cJSON *req = parse_const(a ? builtin_chat_req : builtin_resp_req);
            const cJSON *rq = i > 0 && shim_classify_body(in->doc[0]) ? in->doc[0] : req;

            memset(&cv, 0, sizeof(cv));
            memset(&sk, 0, sizeof(sk));
            snprintf(cv.tool_name, sizeof(cv.tool_name), "python");
            cv.include_usage = (int)pick(in, 80, 2);
            if (ops->scan(in->doc[i], &cv, &calls, &n, &foreign) == 0) {
                shim_stream_init(&st, api, &cv, sink_write, &sk);
                shim_stream_start(&st, rq, in->doc[i]);
                shim_stream_turn(&st, in->doc[i]);
                if (n && pick(in, 81, 2)) {
                    fake_exec_begin(&calls[0], 0);
                    shim_stream_exec_begin(&st, &calls[0]);
                    fake_exec_end(in, &calls[0], 0);
                    shim_stream_exec_end(&st, &calls[0]);
                }
                shim_stream_fail(&st, "upstream_error", "the model server answered HTTP 500");
                check_sse(api, &sk, 1, 1, 1);
                shim_stream_free(&st);
            }
            free_calls(calls, n);
            free(sk.out.p);
            shim_conv_free(&cv);
            cJSON_Delete(req);
        }
}

static void t_scenarios(const struct input *in)
{
    int a;

    for (a = 0; a < 2; a++) {
        enum shim_api api = a ? SHIM_API_CHAT : SHIM_API_RESPONSES;
        if (in->ndocs >= 2) {
            run_scenario(in, api, in->doc[0], (const cJSON *const *)&in->doc[1], in->ndocs - 1,
                         200 + a * 10);
        } else if (in->ndocs == 1) {
            cJSON *req = parse_const(a ? builtin_chat_req : builtin_resp_req);
            cJSON *calls = parse_const(a ? builtin_chat_calls : builtin_resp_calls);
            cJSON *fin = parse_const(a ? builtin_chat_final : builtin_resp_final);
            const cJSON *r1[2] = {calls, fin}, *r2[2] = {in->doc[0], fin};
            run_scenario(in, api, in->doc[0], r1, 2, 300 + a * 10);
            run_scenario(in, api, req, r2, 2, 400 + a * 10);
            cJSON_Delete(req);
            cJSON_Delete(calls);
            cJSON_Delete(fin);
        }
    }
}

/* Splits the input into up to MAX_DOCS JSON values. */
static void parse_docs(struct input *in)
{
    const char *p = (const char *)in->p, *end = p + in->n;

    in->ndocs = 0;
    while (p < end && in->ndocs < MAX_DOCS) {
        const char *next = NULL;
        cJSON *d;
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
            p++;
        if (p >= end)
            break;
        d = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &next, 0);
        if (!d || !next || next <= p) {
            cJSON_Delete(d);
            break;
        }
        in->doc[in->ndocs++] = d;
        p = next;
    }
}

static const struct {
    const char *name;
    void (*fn)(const struct input *);
} targets[] = {
    {"classify", t_classify}, {"json", t_json}, {"sha256", t_sha256},
    {"conv", t_conv_helpers}, {"offline", t_offline}, {"proto", t_proto},
    {"deliver_head", t_heads}, {"cassette", t_cassette}, {"sse_frame", t_sse_frame},
    {"stream_fail", t_stream_fail}, {"scenarios", t_scenarios},
};
#define NTARGETS (sizeof(targets) / sizeof(targets[0]))
static double g_prof[NTARGETS], *g_prof_out = g_prof;

static void run_one(const uint8_t *p, size_t n)
{
    struct input in;
    uint8_t *copy = (uint8_t *)exact(p, n);
    size_t i;

    memset(&in, 0, sizeof(in));
    in.p = copy;
    in.n = n;
    in.h = fnv64(p, n);
    g_utf8 = utf8_valid(p, n) && !memchr(p, '\0', n);
    parse_docs(&in);
    for (i = 0; i < NTARGETS; i++) {
        double t0 = opt.profile ? now_s() : 0;
        targets[i].fn(&in);
        if (opt.profile)
            g_prof_out[i] += now_s() - t0;
    }
    g_target = "?";
    for (i = 0; i < (size_t)in.ndocs; i++)
        cJSON_Delete(in.doc[i]);
    free(copy);
}

/* ------------------------------------------------------------------ */
/* mutations                                                           */

static const char *const dict_values[] = {
    "null", "true", "false", "0", "-0", "1", "-1", "0.5", "1e308", "-1e308", "1e999",
    "-1e999", "1e-400", "4.9e-324", "9223372036854775807", "9223372036854775808",
    "-9223372036854775809", "18446744073709551616", "2147483648", "-2147483649",
    "4294967296", "1e19", "-1e19", "3", "64", "65536", "NaN", "Infinity", "-Infinity",
    "0x10", "01", "1.", ".5", "+1", "\"\"", "\"x\"", "[]", "{}", "[null]", "[{}]",
    "{\"\":null}", "\"\\u0000\"", "\"a\\u0000b\"", "\"\\ud800\"", "\"\\udc00\"",
    "\"\\ud800\\u0041\"", "\"\\ud83d\\ude00\"", "\"\\uDBFF\\uDFFF\"", "\"\\u00e9\\u20ac\"",
    "\"\\u2028\\u2029\"", "\"\xc3\xa9\"", "\"\xff\xfe\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"",
    "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "\"line\\nbreak\\r\\n\"", "\"tab\\t\\b\\f\"",
    "\"\\\"quoted\\\"\"", "\"back\\\\slash\"", "\"python\"", "\"codeshim_python\"",
    "\"codeshim_python_2\"", "\"code_interpreter\"", "\"code_interpreter_call\"",
    "\"function\"", "\"function_call\"", "\"function_call_output\"", "\"custom_tool_call\"",
    "\"message\"", "\"reasoning\"", "\"output_text\"", "\"refusal\"", "\"allowed_tools\"",
    "\"required\"", "\"auto\"", "\"none\"", "\"user\"", "\"assistant\"", "\"tool\"",
    "\"system\"", "\"completed\"", "\"incomplete\"", "\"failed\"", "\"in_progress\"",
    "\"tool_calls\"", "\"stop\"", "\"length\"", "\"cntr_abc\"", "\"cntr_\"", "\"ci_1\"",
    "\"ci_\"", "\"call_a\"", "\"call_missing\"", "\"resp_1\"", "\"code_interpreter_call.outputs\"",
    "\"{\\\"code\\\":\\\"print(1)\\\"}\"", "\"{\\\"code\\\":1}\"", "\"{\\\"code\\\":\\\"\\\"}\"",
    "\"{}\"", "\"[]\"", "\"{\\\"code\\\":\\\"x\\\",\\\"code\\\":\\\"y\\\"}\"",
    "\"```python\\nprint(1)\\n```\"", "\"[parallel] ```python\\na=1\\n``` ```python\\nb=2\\n```\"",
    "\"```python\"", "\"```python\\n\"", "{\"type\":\"code_interpreter\"}",
    "{\"type\":\"code_interpreter\",\"container\":\"cntr_x\"}",
    "{\"type\":\"function\",\"name\":\"python\"}",
    "{\"type\":\"function\",\"function\":{\"name\":\"python\"}}",
    "{\"type\":\"function_call\",\"name\":\"python\",\"call_id\":\"call_a\",\"arguments\":\"{\\\"code\\\":\\\"1\\\"}\"}",
    "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"1\\\"}\"}}",
    "{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"hi\"}]}",
    "{\"type\":\"refusal\",\"refusal\":\"no\"}",
    "{\"type\":\"allowed_tools\",\"mode\":\"required\",\"tools\":[{\"type\":\"code_interpreter\"}]}",
    "{\"type\":\"allowed_tools\",\"allowed_tools\":{\"mode\":\"required\",\"tools\":[{\"type\":\"code_interpreter\"}]}}",
    "{\"type\":\"code_interpreter_call\",\"id\":\"ci_1\",\"code\":\"x\",\"container_id\":\"cntr_1\",\"outputs\":[{\"type\":\"logs\",\"logs\":\"ok\"},{\"type\":\"image\"}]}",
    "{\"input_tokens\":1e308,\"output_tokens\":1e308,\"input_tokens_details\":{\"cached_tokens\":-1}}",
    "{\"session_id\":\"s\"}", "{\"include_usage\":true}",
};

static const char *const dict_keys[] = {
    "type", "name", "call_id", "arguments", "output", "tools", "tool_choice", "input",
    "messages", "tool_calls", "usage", "stream", "include", "metadata", "session_id",
    "container", "container_id", "outputs", "content", "role", "status", "choices", "message",
    "function", "id", "code", "logs", "images", "files", "base64", "mime", "seconds",
    "response", "request", "body", "headers", "content_type", "http_version",
    "max_tool_calls", "encrypted_content", "store", "annotations", "refusal", "text",
    "finish_reason", "stream_options", "include_usage", "codeshim_x", "_codeshim", "mode",
    "allowed_tools", "instructions", "model", "created", "created_at", "completed_at",
    "system_fingerprint", "input_tokens", "output_tokens", "total_tokens",
    "input_tokens_details", "output_tokens_details", "cached_tokens", "prompt_tokens",
    "completion_tokens", "parallel_tool_calls", "previous_response_id", "summary", "",
};

static const char *const dict_raw[] = {
    "\"type\":", "\"name\":", "\"call_id\":", "\"arguments\":", "\"output\":", "\"tools\":",
    "\"tool_choice\":", "\"input\":", "\"messages\":", "\"tool_calls\":", "\"usage\":",
    "\"stream\":true,", "\"include\":", "\"metadata\":", "\"session_id\":", "\"container\":",
    "\"container_id\":", "\"outputs\":", "\"content\":", "\"role\":", "\"status\":",
    "\"choices\":", "\"message\":", "\"function\":", "\"id\":", "\"code\":", "\"logs\":",
    "\"images\":", "\"files\":", "\"base64\":", "\"seconds\":", "\"response\":", "\"body\":",
    "\"headers\":", "\"content_type\":", "\"http_version\":", "\"max_tool_calls\":",
    "\"encrypted_content\":", "\"store\":false,", "\"annotations\":", "\"refusal\":",
    "\"finish_reason\":", "\"stream_options\":", "\"codeshim_x\":1,", "\"_codeshim\":1,",
    "HTTP/1.1 200 OK\r\n", "HTTP/2 200\r\n", "HTTP/1.1 100 Continue\r\n\r\n",
    "Content-Type: application/json\r\n", "Content-Length: 12\r\n", "content-length:1\r\n",
    "Transfer-Encoding: chunked\r\n", "Connection: keep-alive\r\n", "Set-Cookie: a=b\r\n",
    "\r\n", "\n", "\r", "\r\n\r\n", "\n\n", "data: ", "event: ", "data: [DONE]\n\n",
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800", "\\u0000", "```python\n",
    "```", "[parallel]", "\xc3", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
};

/* Binary tokens (session frame headers, NULs): with their lengths. */
static const struct {
    const char *p;
    size_t n;
} dict_bin[] = {
    {"\0", 1}, {"\0\0\0\x10", 4}, {"\x7f\xff\xff\xff", 4}, {"\x04\0\0\0", 4},
    {"\0\0\0\x02{}", 6}, {"\x04\0\0\x01", 4}, {"\xff\xff\xff\xff", 4},
};

#define NDICT_V (sizeof(dict_values) / sizeof(dict_values[0]))
#define NDICT_R (sizeof(dict_raw) / sizeof(dict_raw[0]))
#define NDICT_K (sizeof(dict_keys) / sizeof(dict_keys[0]))

struct span {
    uint32_t s, e;
    char kind; /* 's' string, 'n' scalar, 'o' object, 'a' array */
    char key;  /* string used as an object key */
};

#define MAX_SPANS 512

/* Finds JSON value spans (a reservoir sample when there are many). */
static size_t find_spans(struct rng *r, const struct bytes *b, struct span *sp)
{
    const char *p = (const char *)b->p;
    size_t n = b->len, i = 0, ns = 0, seen = 0, depth = 0;
    uint32_t stack[256];
    char stk_kind[256];

#define ADD(st, en, k, ky)                                                     \
    do {                                                                       \
        struct span x_ = {(uint32_t)(st), (uint32_t)(en), (k), (ky)};         \
        seen++;                                                                \
        if (ns < MAX_SPANS)                                                    \
            sp[ns++] = x_;                                                     \
        else {                                                                 \
            size_t j_ = rbelow(r, seen);                                       \
            if (j_ < MAX_SPANS)                                                \
                sp[j_] = x_;                                                   \
        }                                                                      \
    } while (0)

    while (i < n) {
        char c = p[i];
        if (c == '"') {
            size_t s = i++, j;
            while (i < n && p[i] != '"')
                i += p[i] == '\\' ? 2 : 1;
            if (i >= n)
                break;
            i++;
            j = i;
            while (j < n && (p[j] == ' ' || p[j] == '\n' || p[j] == '\t' || p[j] == '\r'))
                j++;
            ADD(s, i, 's', j < n && p[j] == ':');
            continue;
        }
        if (c == '{' || c == '[') {
            if (depth < 256) {
                stack[depth] = (uint32_t)i;
                stk_kind[depth] = c;
            }
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth) {
                depth--;
                if (depth < 256 && stk_kind[depth] == (c == '}' ? '{' : '['))
                    ADD(stack[depth], i + 1, c == '}' ? 'o' : 'a', 0);
            }
        } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
            size_t s = i, k = i;
            while (k > 0 && (p[k - 1] == ' ' || p[k - 1] == '\n'))
                k--;
            if (k == 0 || p[k - 1] == ':' || p[k - 1] == ',' || p[k - 1] == '[') {
                while (i < n && (strchr("+-.eE", p[i]) || (p[i] >= '0' && p[i] <= '9') ||
                                 (p[i] >= 'a' && p[i] <= 'z')) && p[i])
                    i++;
                ADD(s, i, 'n', 0);
                continue;
            }
        }
        i++;
    }
#undef ADD
    return ns;
}

/* End of the JSON value starting at p[i] (roughly), or 0. */
static size_t value_end(const uint8_t *p, size_t n, size_t i)
{
    size_t depth = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\n'))
        i++;
    if (i >= n)
        return 0;
    do {
        if (p[i] == '"') {
            i++;
            while (i < n && p[i] != '"')
                i += p[i] == '\\' ? 2 : 1;
            if (i >= n)
                return 0;
            i++;
        } else if (p[i] == '{' || p[i] == '[') {
            depth++;
            i++;
        } else if (p[i] == '}' || p[i] == ']') {
            if (!depth)
                return i;
            depth--;
            i++;
        } else if (!depth && (p[i] == ',' )) {
            return i;
        } else {
            i++;
        }
    } while (i < n && depth);
    if (depth)
        return 0;
    while (i < n && !depth && p[i] != ',' && p[i] != '}' && p[i] != ']' && p[i] != '"' &&
           p[i] != '{' && p[i] != '[' && p[i] != '\n')
        i++;
    return i;
}

static const struct bytes *g_pool; /* the corpus, for splicing */
static size_t g_npool;

static void random_string(struct rng *r, struct bytes *t)
{
    static const size_t lens[] = {0, 1, 23, 24, 25, 47, 48, 63, 64, 65, 79, 80, 81, 95, 96,
                                  127, 128, 158, 159, 160, 161, 255, 256, 4095, 4096,
                                  65535, 65536, 65537, 100000};
    static const char *const tails[] = {"", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                        "\\u00e9", "\\ud83d\\ude00", "\\n", "\\\"", "\\u0000"};
    size_t len = rchance(r, 70) ? lens[rbelow(r, sizeof(lens) / sizeof(lens[0]))]
                                : rbelow(r, 300);
    const char *tail = tails[rbelow(r, sizeof(tails) / sizeof(tails[0]))];
    char fill = "aAx0 ."[rbelow(r, 6)];
    size_t i;

    if (len > opt.max_len / 2)
        len = opt.max_len / 2;
    b_adds(t, "\"");
    b_reserve(t, t->len + len + 16);
    if (rchance(r, 30)) { /* multi-byte characters all the way */
        for (i = 0; i + 2 <= len; i += 2)
            b_add(t, "\xc3\xa9", 2);
    } else {
        memset(t->p + t->len, fill, len);
        t->len += len;
    }
    b_adds(t, tail);
    b_adds(t, "\"");
}

/* One mutation of b in place. */
static void mutate_once(struct rng *r, struct bytes *b)
{
    struct span sp[MAX_SPANS];
    size_t ns, pos, k;
    struct bytes t = {0};
    unsigned op = (unsigned)rbelow(r, 22);

    if (b->len == 0)
        op = 4;
    switch (op) {
    case 0: /* bit flip */
        pos = rbelow(r, b->len);
        b->p[pos] ^= (uint8_t)(1u << rbelow(r, 8));
        break;
    case 1: { /* interesting byte */
        static const uint8_t ib[] = {0, 0xff, 0x7f, 0x80, '"', '\\', '{', '}', '[', ']',
                                     ',', ':', '\n', '\r', ' ', '0', '9', '-', 'e', 0xc3};
        b->p[rbelow(r, b->len)] = ib[rbelow(r, sizeof(ib))];
        break;
    }
    case 2: /* delete a range */
        pos = rbelow(r, b->len);
        k = 1 + rbelow(r, rchance(r, 80) ? 8 : b->len - pos);
        b_splice(b, pos, k, NULL, 0);
        break;
    case 3: /* truncate */
        b->len = rbelow(r, b->len + 1);
        break;
    case 4: { /* insert raw dictionary token or random bytes */
        pos = rbelow(r, b->len + 1);
        if (rchance(r, 60)) {
            const char *d = dict_raw[rbelow(r, NDICT_R)];
            b_splice(b, pos, 0, d, strlen(d));
        } else if (rchance(r, 30)) {
            size_t k2 = rbelow(r, sizeof(dict_bin) / sizeof(dict_bin[0]));
            b_splice(b, rchance(r, 50) ? 0 : pos, 0, dict_bin[k2].p, dict_bin[k2].n);
        } else {
            uint8_t rb[8];
            size_t i, m = 1 + rbelow(r, 8);
            for (i = 0; i < m; i++)
                rb[i] = (uint8_t)rnext(r);
            b_splice(b, pos, 0, rb, m);
        }
        break;
    }
    case 5: { /* duplicate a range */
        size_t s = rbelow(r, b->len), m = 1 + rbelow(r, b->len - s < 256 ? b->len - s : 256);
        b_set(&t, b->p + s, m);
        b_splice(b, rbelow(r, b->len + 1), 0, t.p, t.len);
        break;
    }
    case 6: { /* splice with another corpus entry */
        const struct bytes *o = g_npool ? &g_pool[rbelow(r, g_npool)] : NULL;
        if (!o || !o->len)
            break;
        pos = rbelow(r, b->len + 1);
        k = rbelow(r, o->len);
        b->len = pos;
        b_add(b, o->p + k, o->len - k);
        break;
    }
    case 7: { /* append another document (request + replies) */
        const struct bytes *o = g_npool ? &g_pool[rbelow(r, g_npool)] : NULL;
        if (!o)
            break;
        b_adds(b, "\n");
        b_add(b, o->p, o->len);
        break;
    }
    default: { /* JSON-aware */
        struct span *a, *c;
        ns = find_spans(r, b, sp);
        if (!ns)
            break;
        a = &sp[rbelow(r, ns)];
        switch (op) {
        case 8:
        case 9:
        case 10: /* replace a value with another of any type */
            if (a->key)
                break;
            if (rchance(r, 75)) {
                const char *v = dict_values[rbelow(r, NDICT_V)];
                b_splice(b, a->s, a->e - a->s, v, strlen(v));
            } else {
                c = &sp[rbelow(r, ns)]; /* another value from the input */
                if (c->key)
                    break;
                b_set(&t, b->p + c->s, c->e - c->s);
                b_splice(b, a->s, a->e - a->s, t.p, t.len);
            }
            break;
        case 11: /* huge / boundary-length string */
            if (a->key && rchance(r, 80))
                break;
            random_string(r, &t);
            b_splice(b, a->s, a->e - a->s, t.p, t.len);
            break;
        case 12: { /* deep nesting */
            static const size_t depths[] = {2, 10, 100, 500, 998, 999, 1000, 1001, 1002, 1100};
            size_t d = depths[rbelow(r, sizeof(depths) / sizeof(depths[0]))], i;
            int obj = rchance(r, 50);
            if (a->key)
                break;
            for (i = 0; i < d; i++)
                b_adds(&t, obj ? "{\"a\":" : "[");
            b_add(&t, b->p + a->s, a->e - a->s);
            for (i = 0; i < d; i++)
                b_adds(&t, obj ? "}" : "]");
            b_splice(b, a->s, a->e - a->s, t.p, t.len);
            break;
        }
        case 13:
        case 14: { /* duplicate key: repeat a member, or the key with another value */
            size_t ve;
            if (!a->key)
                break;
            pos = a->e;
            while (pos < b->len && b->p[pos] != ':')
                pos++;
            ve = value_end(b->p, b->len, pos + 1);
            if (!ve)
                break;
            b_adds(&t, ",");
            if (op == 13) {
                b_add(&t, b->p + a->s, ve - a->s);
            } else {
                b_add(&t, b->p + a->s, a->e - a->s);
                b_adds(&t, ":");
                b_adds(&t, dict_values[rbelow(r, NDICT_V)]);
            }
            if (rchance(r, 50)) {
                b_splice(b, ve, 0, t.p, t.len);
            } else { /* before the member: ",m" becomes "m," */
                memmove(t.p, t.p + 1, t.len - 1);
                t.p[t.len - 1] = ',';
                b_splice(b, a->s, 0, t.p, t.len);
            }
            break;
        }
        case 15: { /* unicode escapes, embedded NULs, raw bytes inside a string */
            static const char *const ins[] = {
                "\\ud800", "\\udc00", "\\ud83d\\ude00", "\\u0000", "\\u00e9", "\\uffff",
                "\\u2028", "\\ud800\\u0041", "\\ud800\\ud800", "\\udbff\\udfff", "\xc3",
                "\xe2\x82", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xc0\x80", "\xff",
                "\x01", "\n", "\\n\\n", "\\r\\n", "\\\\", "\\\"", "\\/", "\\x", "\\u12"};
            const char *v;
            if (a->kind != 's' || a->e - a->s < 2)
                break;
            pos = a->s + 1 + rbelow(r, a->e - a->s - 1);
            if (rchance(r, 15)) {
                b_splice(b, pos, 0, "\0", 1);
                break;
            }
            v = ins[rbelow(r, sizeof(ins) / sizeof(ins[0]))];
            b_splice(b, pos, 0, v, strlen(v));
            break;
        }
        case 16: /* remove a value (and a comma) */
            if (a->s > 0 && b->p[a->s - 1] == ',')
                b_splice(b, a->s - 1, a->e - a->s + 1, NULL, 0);
            else if (a->e < b->len && b->p[a->e] == ',')
                b_splice(b, a->s, a->e - a->s + 1, NULL, 0);
            else
                b_splice(b, a->s, a->e - a->s, NULL, 0);
            break;
        case 17: { /* swap two non-overlapping values */
            struct span *x, *y;
            struct bytes u = {0};
            c = &sp[rbelow(r, ns)];
            x = a->s < c->s ? a : c;
            y = a->s < c->s ? c : a;
            if (x->e > y->s || x->key || y->key)
                break;
            b_set(&t, b->p + x->s, x->e - x->s);
            b_set(&u, b->p + y->s, y->e - y->s);
            b_splice(b, y->s, y->e - y->s, t.p, t.len);
            b_splice(b, x->s, x->e - x->s, u.p, u.len);
            free(u.p);
            break;
        }
        case 18: { /* repeat an element many times */
            size_t reps = rchance(r, 70) ? 1 + rbelow(r, 8) : 1 + rbelow(r, 300), i;
            if (a->key || a->s == 0 || (b->p[a->s - 1] != '[' && b->p[a->s - 1] != ','))
                break;
            for (i = 0; i < reps && t.len < opt.max_len; i++) {
                b_adds(&t, ",");
                b_add(&t, b->p + a->s, a->e - a->s);
            }
            b_splice(b, a->e, 0, t.p, t.len);
            break;
        }
        case 19: { /* a value from another corpus entry */
            const struct bytes *o = g_npool ? &g_pool[rbelow(r, g_npool)] : NULL;
            struct span *x;
            size_t n2;
            if (!o || a->key)
                break;
            {
                uint32_t as = a->s, ae = a->e;
                n2 = find_spans(r, o, sp); /* sp is reused: a is stale now */
                if (!n2)
                    break;
                x = &sp[rbelow(r, n2)];
                if (x->key)
                    break;
                b_set(&t, o->p + x->s, x->e - x->s);
                b_splice(b, as, ae - as, t.p, t.len);
            }
            break;
        }
        case 20: /* a number next to a boundary */
        {
            static const char *const nums[] = {"-1", "0", "1", "2", "3", "4", "999", "1000",
                                               "1e300", "-1e300", "2.5", "1e-300", "-0.0",
                                               "123456789012345678901234567890"};
            const char *v = nums[rbelow(r, sizeof(nums) / sizeof(nums[0]))];
            if (a->kind != 'n')
                break;
            b_splice(b, a->s, a->e - a->s, v, strlen(v));
            break;
        }
        default: /* insert a member or an element into a container */
            if (a->kind == 'o' || a->kind == 'a') {
                int empty = a->e - a->s == 2;
                if (a->kind == 'o') {
                    b_adds(&t, "\"");
                    b_adds(&t, dict_keys[rbelow(r, NDICT_K)]);
                    b_adds(&t, "\":");
                }
                b_adds(&t, dict_values[rbelow(r, NDICT_V)]);
                if (!empty)
                    b_adds(&t, ",");
                b_splice(b, a->s + 1, 0, t.p, t.len);
            }
            break;
        }
    }
    }
    free(t.p);
    if (b->len > opt.max_len)
        b->len = opt.max_len;
}

static void mutate(struct rng *r, struct bytes *b)
{
    unsigned n = rchance(r, 10) ? 4 + (unsigned)rbelow(r, 12) : 1 + (unsigned)rbelow(r, 3), i;
    for (i = 0; i < n; i++)
        mutate_once(r, b);
}

/* ------------------------------------------------------------------ */
/* corpus                                                              */

static struct bytes *g_seeds;
static char **g_seed_names;
static size_t g_nseeds, g_capseeds;

static int read_whole(const char *path, struct bytes *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    ssize_t k;

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > opt.max_len * 4) {
        close(fd);
        return -1;
    }
    memset(b, 0, sizeof(*b));
    b_reserve(b, (size_t)st.st_size);
    while (b->len < (size_t)st.st_size &&
           (k = read(fd, b->p + b->len, (size_t)st.st_size - b->len)) > 0)
        b->len += (size_t)k;
    close(fd);
    return 0;
}

static void add_seed(const char *name, struct bytes *b)
{
    if (g_nseeds == g_capseeds) {
        g_capseeds = g_capseeds ? g_capseeds * 2 : 64;
        g_seeds = realloc(g_seeds, g_capseeds * sizeof(*g_seeds));
        g_seed_names = realloc(g_seed_names, g_capseeds * sizeof(*g_seed_names));
        if (!g_seeds || !g_seed_names)
            _exit(2);
    }
    g_seeds[g_nseeds] = *b;
    g_seed_names[g_nseeds++] = strdup(name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, i;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".log") || strstr(e->d_name, ".md"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof(*names));
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_str); /* deterministic order */
    for (i = 0; i < n; i++) {
        char path[4096];
        struct bytes b;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (read_whole(path, &b) == 0)
            add_seed(path, &b);
        free(names[i]);
    }
    free(names);
}

/* ------------------------------------------------------------------ */
/* shared memory between the parent and its worker                     */

#define BATCH_ARENA ((size_t)64 << 20)
#define FOUND_ARENA ((size_t)64 << 20)
#define MAX_FOUND 65536
#define MAX_BATCH 4096
#define SLOW_MAX ((size_t)4 << 20)

struct shm {
    volatile uint64_t next;      /* index of the next input */
    volatile uint64_t heartbeat; /* bumps after every input */
    volatile int stop;
    volatile uint32_t nbatch;    /* inputs in the batch arena */
    volatile size_t batch_used;
    uint32_t batch_off[MAX_BATCH + 1];
    volatile uint32_t nfound;
    volatile size_t found_used;
    uint32_t found_off[MAX_FOUND + 1];
    uint8_t virgin[MAP_SIZE];
    volatile double slowest;
    volatile uint64_t slowest_idx;
    volatile uint64_t bytes;      /* input bytes run */
    double prof[NTARGETS];        /* seconds per target (--profile) */
    double prof_mut;              /* generating inputs */
    volatile size_t slow_len;
    uint8_t slow[SLOW_MAX];       /* the slowest input so far */
    uint8_t batch[BATCH_ARENA];
    uint8_t found[FOUND_ARENA];
};

static struct shm *g_shm;

static void found_get(uint32_t i, const uint8_t **p, size_t *n)
{
    *p = g_shm->found + g_shm->found_off[i];
    *n = g_shm->found_off[i + 1] - g_shm->found_off[i];
}

/* The pool the mutator draws from: seeds + what coverage found. */
static void rebuild_pool(struct bytes **pool, size_t *npool)
{
    size_t i, nf = g_shm->nfound;

    free(*pool);
    *pool = xmalloc((g_nseeds + nf) * sizeof(**pool));
    for (i = 0; i < g_nseeds; i++)
        (*pool)[i] = g_seeds[i];
    for (i = 0; i < nf; i++) {
        const uint8_t *p;
        size_t n;
        found_get((uint32_t)i, &p, &n);
        (*pool)[g_nseeds + i].p = (uint8_t *)p;
        (*pool)[g_nseeds + i].len = n;
        (*pool)[g_nseeds + i].cap = n;
    }
    *npool = g_nseeds + nf;
}

static const uint8_t bucket_of[256] = {
    [0] = 0, [1] = 1, [2] = 2, [3] = 4,
    [4 ... 7] = 8, [8 ... 15] = 16, [16 ... 31] = 32, [32 ... 127] = 64, [128 ... 255] = 128,
};

/* Folds this input's coverage into the virgin map; 1 when it added any. */
static int cov_new(void)
{
    uint64_t *m = (uint64_t *)g_map;
    size_t i, j;
    int fresh = 0;

    for (i = 0; i < MAP_SIZE / 8; i++) {
        if (!m[i])
            continue;
        for (j = i * 8; j < i * 8 + 8; j++) {
            uint8_t b = bucket_of[g_map[j]];
            if (b & ~g_shm->virgin[j]) {
                g_shm->virgin[j] |= b;
                fresh = 1;
            }
        }
        m[i] = 0;
    }
    g_prev = 0;
    return fresh;
}

static size_t cov_edges(void)
{
    size_t i, n = 0;
    for (i = 0; i < MAP_SIZE; i++)
        n += g_shm->virgin[i] != 0;
    return n;
}

static int leak_check(void)
{
#if HAVE_LSAN
    return __lsan_do_recoverable_leak_check();
#else
    return 0;
#endif
}

#define EXIT_LEAK 3

static void batch_reset(void)
{
    g_shm->nbatch = 0;
    g_shm->batch_used = 0;
    g_shm->batch_off[0] = 0;
}

static void batch_get(uint32_t i, const uint8_t **p, size_t *n)
{
    *p = g_shm->batch + g_shm->batch_off[i];
    *n = g_shm->batch_off[i + 1] - g_shm->batch_off[i];
}

/* The worker: generates and runs inputs until told to stop. */
static void worker(uint64_t limit)
{
    struct bytes cur = {0}, *pool = NULL;
    size_t npool = 0;
    uint32_t known_found = (uint32_t)-1;

    for (;;) {
        uint64_t i = g_shm->next;
        struct rng r;
        double t0, dt;

        if (g_shm->stop || (limit && i >= limit))
            break;
        if (known_found != g_shm->nfound) {
            rebuild_pool(&pool, &npool);
            g_pool = pool;
            g_npool = npool;
            known_found = g_shm->nfound;
        }
        t0 = now_s();
        if (i < g_nseeds) {
            b_set(&cur, g_seeds[i].p, g_seeds[i].len);
        } else {
            const struct bytes *base;
            rng_seed(&r, opt.seed * 0x100000001B3ULL ^ i);
            base = &pool[rbelow(&r, npool)];
            if (npool > g_nseeds && rchance(&r, 25)) /* recent finds */
                base = &pool[npool - 1 - rbelow(&r, (npool - g_nseeds + 3) / 4)];
            if (rchance(&r, 50)) { /* small inputs run faster: favour them */
                const struct bytes *o = &pool[rbelow(&r, npool)];
                if (o->len < base->len)
                    base = o;
            }
            b_set(&cur, base->p, base->len);
            mutate(&r, &cur);
        }
        /* record the input before it runs: a crash leaves it here */
        if (g_shm->nbatch >= opt.batch || g_shm->nbatch >= MAX_BATCH ||
            g_shm->batch_used + cur.len > BATCH_ARENA) {
            if (leak_check())
                _exit(EXIT_LEAK);
            batch_reset();
        }
        memcpy(g_shm->batch + g_shm->batch_used, cur.p, cur.len);
        g_shm->batch_off[g_shm->nbatch + 1] = (uint32_t)(g_shm->batch_used + cur.len);
        g_shm->batch_used += cur.len;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        g_shm->nbatch++;
        g_shm->next = i + 1;
        g_shm->bytes += cur.len;
        if (opt.profile)
            g_shm->prof_mut += now_s() - t0;
        t0 = now_s();
        run_one(cur.p, cur.len);
        dt = now_s() - t0;
        if (dt > g_shm->slowest) {
            g_shm->slowest = dt;
            g_shm->slowest_idx = i;
            if (cur.len <= SLOW_MAX) {
                memcpy(g_shm->slow, cur.p, cur.len);
                g_shm->slow_len = cur.len;
            }
        }
        if (cov_new() && i >= g_nseeds && cur.len <= 64 * 1024 &&
            g_shm->nfound < MAX_FOUND && g_shm->found_used + cur.len <= FOUND_ARENA) {
            uint32_t f = g_shm->nfound;
            memcpy(g_shm->found + g_shm->found_used, cur.p, cur.len);
            g_shm->found_used += cur.len;
            g_shm->found_off[f + 1] = (uint32_t)g_shm->found_used;
            g_shm->nfound = f + 1;
        }
        g_shm->heartbeat++;
    }
    if (leak_check())
        _exit(EXIT_LEAK);
    free(cur.p);
    free(pool);
    _exit(0);
}

/* ------------------------------------------------------------------ */
/* the parent                                                          */

struct sig {
    char text[256];
    unsigned count;
    size_t best_len;
    char path[512];
};

static struct sig g_sigs[256];
static unsigned g_nsigs;
static unsigned g_crashes, g_leaks, g_hangs, g_invalid;

static int mkdir_p(const char *dir)
{
    char tmp[1024], *p;

    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, p, n) != (ssize_t)n)
        fprintf(stderr, "fuzz: short write to %s\n", path);
    close(fd);
}

/* What a failure's log says it is: the check, the UBSan location and
 * kind, or the sanitizer's error kind with the first shim/ frame. */
static void signature(const char *log, char *out, size_t outsz)
{
    FILE *f = fopen(log, "r");
    char line[1024], kind[256] = "", summary[512] = "";

    snprintf(out, outsz, "unknown failure (no sanitizer report)");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *m;
        line[strcspn(line, "\n")] = '\0';
        if ((m = strstr(line, "fuzz: invalid output: ")) != NULL) {
            char *c = m + 22, *e = strchr(c, ':');
            snprintf(out, outsz, "invalid output: %.*s", (int)(e ? e - c : (long)strlen(c)), c);
            break;
        }
        if ((m = strstr(line, ": runtime error: ")) != NULL) {
            char *loc = line;
            while (*loc == ' ')
                loc++;
            snprintf(out, outsz, "UBSan: %.*s: %.200s", (int)(m - loc), loc, m + 17);
            break;
        }
        if (!kind[0] && ((m = strstr(line, "ERROR: AddressSanitizer: ")) != NULL ||
                         (m = strstr(line, "ERROR: LeakSanitizer: ")) != NULL)) {
            char *k = strstr(m, "Sanitizer: ") + 11, *on = strstr(k, " on ");
            snprintf(kind, sizeof(kind), "%.*s", (int)(on ? on - k : (long)strlen(k)), k);
            snprintf(out, outsz, "%s", kind);
            continue;
        }
        if (kind[0] && strstr(line, " in ") && strstr(line, " shim/")) {
            char *in = strstr(line, " in ") + 4;
            char *col = strrchr(in, ':');
            /* "func shim/x.c:12:5" -> "func shim/x.c:12" */
            if (col && strchr(in, ':') != col)
                *col = '\0';
            snprintf(out, outsz, "%s in %.200s", kind, in);
            break;
        }
        if (!summary[0] && !strncmp(line, "SUMMARY: ", 9))
            scopy(summary, sizeof(summary), line + 9);
    }
    fclose(f);
    if (!strncmp(out, "unknown", 7) && summary[0])
        scopy(out, outsz, summary);
}

/* The signature without the values in it (numbers vary for one bug). */
static void sig_key(const char *sig, char *key, size_t n)
{
    size_t j = 0;
    const char *p = sig;

    while (*p && j + 1 < n) {
        const char *w = p;
        size_t len;
        while (*p && *p != ' ')
            p++;
        len = (size_t)(p - w);
        if (!((w[0] >= '0' && w[0] <= '9') || (w[0] == '-' && w[1] >= '0' && w[1] <= '9') ||
              (len == 3 && (!strncmp(w, "inf", 3) || !strncmp(w, "nan", 3))) ||
              (len == 4 && (!strncmp(w, "-inf", 4) || !strncmp(w, "-nan", 4))))) {
            if (len > n - 1 - j)
                len = n - 1 - j;
            memcpy(key + j, w, len);
            j += len;
        }
        while (*p == ' ' && j + 1 < n) {
            key[j++] = ' ';
            p++;
        }
    }
    key[j] = '\0';
}

static char g_self[4096]; /* this program, for re-runs */

/* Runs `self path` in a fresh process with full malloc stacks; its report
 * replaces log when it fails the same way (it reproduces alone). */
static void rerun_detailed(const char *path, const char *log)
{
    char tmp[1200], env[2048];
    const char *old = getenv("ASAN_OPTIONS"), *uold = getenv("UBSAN_OPTIONS");
    pid_t pid;
    int st;

    if (!g_self[0])
        return;
    snprintf(tmp, sizeof(tmp), "%s.rerun", log);
    snprintf(env, sizeof(env), "%s%sfast_unwind_on_malloc=0:malloc_context_size=40:symbolize=1",
             old ? old : "", old && *old ? ":" : "");
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            close(fd);
        }
        setenv("ASAN_OPTIONS", env, 1);
        snprintf(env, sizeof(env), "%s%ssymbolize=1", uold ? uold : "",
                 uold && *uold ? ":" : "");
        setenv("UBSAN_OPTIONS", env, 1);
        execl(g_self, g_self, path, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        fprintf(stderr, "fuzz:   (does not fail when run alone: %s)\n", path);
        unlink(tmp);
        return;
    }
    rename(tmp, log);
}

/* Saves a failing input (and its log) under a name by signature: one
 * reproducer per signature, the smallest seen. A leak is re-run alone
 * with full malloc stacks first (the worker's stacks stop in cJSON), so
 * its signature names the shim frame that allocated. */
static void record(const char *kind, const uint8_t *p, size_t n, const char *log)
{
    char sig[512], key[512], path[1024], lpath[1100], pending[1100];
    uint64_t sh, ih = fnv64(p, n);
    unsigned i;
    struct sig *s = NULL;
    int is_leak = !strcmp(kind, "leak"), rerun = 0;

    snprintf(pending, sizeof(pending), "%s/.pending-%d", opt.crashes, (int)getpid());
    if (is_leak) {
        write_file(pending, p, n);
        rerun_detailed(pending, log);
        rerun = 1;
    }
    signature(log, sig, sizeof(sig));
    if (!rerun && strcmp(kind, "hang") && strcmp(kind, "oom") && !strstr(sig, " in ") && strncmp(sig, "UBSan", 5) &&
        strncmp(sig, "invalid", 7)) {
        /* workers do not symbolize: an ASan report names no shim frame */
        write_file(pending, p, n);
        rerun_detailed(pending, log);
        rerun = 1;
        signature(log, sig, sizeof(sig));
    }
    if (!strcmp(kind, "hang"))
        snprintf(sig, sizeof(sig), "hang (no progress for %.0f s)", opt.hang_seconds);
    if (!strcmp(kind, "oom"))
        snprintf(sig, sizeof(sig), "worker memory over %u MB", opt.rss_mb);
    sig_key(sig, key, sizeof(key));
    sh = fnv64(key, strlen(key));
    for (i = 0; i < g_nsigs; i++)
        if (!strcmp(g_sigs[i].text, key))
            s = &g_sigs[i];
    if (!s && g_nsigs < 256) {
        s = &g_sigs[g_nsigs++];
        scopy(s->text, sizeof(s->text), key);
        s->best_len = (size_t)-1;
    }
    if (strstr(sig, "invalid output"))
        g_invalid++;
    else if (is_leak)
        g_leaks++;
    else if (!strcmp(kind, "hang") || !strcmp(kind, "oom"))
        g_hangs++;
    g_crashes++;
    if (!s || n >= s->best_len) {
        unlink(pending);
        unlink(log);
        if (s)
            s->count++;
        return;
    }
    s->count++;
    if (s->path[0]) { /* keep the smallest reproducer per signature */
        unlink(s->path);
        snprintf(lpath, sizeof(lpath), "%s.log", s->path);
        unlink(lpath);
    }
    s->best_len = n;
    snprintf(path, sizeof(path), "%s/%s-%08llx-%08llx", opt.crashes, kind,
             (unsigned long long)(sh & 0xffffffff), (unsigned long long)(ih & 0xffffffff));
    scopy(s->path, sizeof(s->path), path);
    write_file(path, p, n);
    unlink(pending);
    snprintf(lpath, sizeof(lpath), "%s.log", path);
    if (rename(log, lpath) < 0)
        unlink(log);
    if (!rerun && strcmp(kind, "hang") && strcmp(kind, "oom"))
        rerun_detailed(path, lpath);
    if (s->count == 1)
        fprintf(stderr, "fuzz: %s: %s\n      input: %s (%zu bytes), log: %s\n", kind, sig, path,
                n, lpath);
}

static pid_t spawn(const char *log, void (*fn)(uint64_t), uint64_t arg)
{
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        fn(arg);
        _exit(0);
    }
    return pid;
}

static void triage_one(uint64_t idx)
{
    const uint8_t *p;
    size_t n;

    batch_get((uint32_t)idx, &p, &n);
    run_one(p, n);
    _exit(leak_check() ? EXIT_LEAK : 0);
}

/* A batch leaked: re-run its inputs one by one to find which. */
static void triage_leak(const char *log)
{
    uint32_t i, nb = g_shm->nbatch;

    for (i = 0; i < nb; i++) {
        int st;
        pid_t pid = spawn(log, triage_one, i);
        if (pid < 0 || waitpid(pid, &st, 0) < 0)
            break;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        {
            const uint8_t *p;
            size_t n;
            batch_get(i, &p, &n);
            record(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_LEAK ? "leak" : "crash", p, n, log);
        }
        return;
    }
    fprintf(stderr, "fuzz: a batch leaked but no single input does (cross-input state?)\n");
    g_leaks++;
    g_crashes++;
}

static void save_queue(void)
{
    uint32_t i;

    if (!opt.queue || mkdir_p(opt.queue) < 0)
        return;
    for (i = 0; i < g_shm->nfound; i++) {
        const uint8_t *p;
        size_t n;
        char path[1024];
        found_get(i, &p, &n);
        snprintf(path, sizeof(path), "%s/q-%016llx", opt.queue,
                 (unsigned long long)fnv64(p, n));
        write_file(path, p, n);
    }
}

/* Resident memory of the worker (ASan's own RSS limit runs in a thread,
 * which a forked worker does not have). */
static unsigned long worker_rss_mb(pid_t pid)
{
    char path[64], buf[128];
    unsigned long size = 0, rss = 0;
    int fd;
    ssize_t k;

    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0)
        return 0;
    buf[k] = '\0';
    if (sscanf(buf, "%lu %lu", &size, &rss) != 2)
        return 0;
    return rss * (unsigned long)sysconf(_SC_PAGESIZE) >> 20;
}

static int fuzz_main(void)
{
    double t0 = now_s(), last_beat_t;
    uint64_t last_beat = 0, limit = opt.iterations;
    pid_t pid = -1;
    char log[1024];
    int status, rc, i;

    if (mkdir_p(opt.crashes) < 0) {
        fprintf(stderr, "fuzz: cannot create %s\n", opt.crashes);
        return 1;
    }
    snprintf(log, sizeof(log), "%s/.worker-%d.log", opt.crashes, (int)getpid());
    g_shm = mmap(NULL, sizeof(struct shm), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g_shm == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (!opt.iterations && !opt.seconds)
        opt.seconds = 60;
    g_prof_out = g_shm->prof;
    if (opt.iterations && limit < g_nseeds)
        limit = g_nseeds; /* every seed runs at least once */
    fprintf(stderr, "fuzz: %zu seeds, seed %llu, %s%llu inputs / %.0f s\n", g_nseeds,
            (unsigned long long)opt.seed, "", (unsigned long long)opt.iterations, opt.seconds);
    last_beat_t = now_s();
    for (;;) {
        double t = now_s();
        if (pid < 0) {
            if (g_shm->stop || (limit && g_shm->next >= limit))
                break;
            batch_reset();
            pid = spawn(log, worker, limit);
            if (pid < 0) {
                perror("fork");
                return 1;
            }
            last_beat = g_shm->heartbeat;
            last_beat_t = t;
        }
        if (opt.seconds && t - t0 >= opt.seconds)
            g_shm->stop = 1;
        if (opt.max_crashes && g_crashes >= opt.max_crashes)
            g_shm->stop = 1;
        rc = waitpid(pid, &status, WNOHANG);
        if (rc == pid) {
            pid = -1;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                if (g_shm->stop || (limit && g_shm->next >= limit))
                    break;
                continue;
            }
            if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_LEAK) {
                triage_leak(log);
            } else if (g_shm->nbatch) {
                const uint8_t *p;
                size_t n;
                batch_get(g_shm->nbatch - 1, &p, &n);
                record("crash", p, n, log);
            } else {
                fprintf(stderr, "fuzz: the worker died before running an input\n");
                g_crashes++;
                break;
            }
            continue;
        }
        if (opt.rss_mb && worker_rss_mb(pid) > opt.rss_mb) {
            const uint8_t *p;
            size_t n;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            pid = -1;
            if (g_shm->nbatch) {
                batch_get(g_shm->nbatch - 1, &p, &n);
                record("oom", p, n, log);
            }
            continue;
        }
        if (g_shm->heartbeat != last_beat) {
            last_beat = g_shm->heartbeat;
            last_beat_t = t;
        } else if (t - last_beat_t > opt.hang_seconds) {
            const uint8_t *p;
            size_t n;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            pid = -1;
            if (g_shm->nbatch) {
                batch_get(g_shm->nbatch - 1, &p, &n);
                record("hang", p, n, log);
            }
            continue;
        }
        {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    unlink(log);
    save_queue();
    {
        double dt = now_s() - t0;
        uint64_t n = g_shm->next;
        char spath[1024];
        snprintf(spath, sizeof(spath), "%s/slowest", opt.crashes);
        if (g_shm->slow_len)
            write_file(spath, g_shm->slow, g_shm->slow_len);
        fprintf(stderr, "fuzz: slowest input %.3f s (#%llu, %s), mean input %.0f bytes\n",
                g_shm->slowest, (unsigned long long)g_shm->slowest_idx, spath,
                n ? (double)g_shm->bytes / (double)n : 0.0);
        if (opt.profile) {
            size_t t;
            for (t = 0; t < NTARGETS; t++)
                fprintf(stderr, "fuzz: %-12s %.3f s\n", targets[t].name, g_shm->prof[t]);
            fprintf(stderr, "fuzz: %-12s %.3f s\n", "mutate", g_shm->prof_mut);
        }
        for (i = 0; i < (int)g_nsigs; i++)
            fprintf(stderr, "fuzz:   %ux %s -> %s\n", g_sigs[i].count, g_sigs[i].text,
                    g_sigs[i].path);
        printf("fuzz: %llu inputs, %u crashes (%u leaks, %u hangs/oom, %u invalid outputs, "
               "%u distinct), %zu edges, %zu corpus, %.1f s, %.0f inputs/s, seed %llu\n",
               (unsigned long long)n, g_crashes, g_leaks, g_hangs, g_invalid, g_nsigs,
               cov_edges(), g_nseeds + g_shm->nfound, dt, dt > 0 ? (double)n / dt : 0.0,
               (unsigned long long)opt.seed);
    }
    return g_crashes ? 1 : 0;
}

/* Runs one file in this process: a failure aborts with the report; a
 * leak exits EXIT_LEAK. */
static int replay_one(const char *path)
{
    struct bytes b;

    if (read_whole(path, &b) < 0) {
        fprintf(stderr, "fuzz: cannot read %s\n", path);
        return 2;
    }
    run_one(b.p, b.len);
    free(b.p);
    if (leak_check()) {
        fprintf(stderr, "fuzz: %s leaks\nSUMMARY: fuzz: leak\n", path);
        return EXIT_LEAK;
    }
    return 0;
}

/* Runs files once each (in a process of its own when there are several). */
static int replay_main(int argc, char **argv)
{
    int i, bad = 0;

    if (argc == 1) {
        int rc = replay_one(argv[0]);
        printf("fuzz: %s: %s\n", argv[0], rc ? "FAILED" : "ok");
        return rc;
    }
    for (i = 0; i < argc; i++) {
        int st;
        pid_t pid;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid == 0)
            _exit(replay_one(argv[i]));
        if (pid < 0 || waitpid(pid, &st, 0) < 0) {
            bad++;
            continue;
        }
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            bad++;
            printf("fuzz: %s: FAILED (%s %d)\n", argv[i], WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
    }
    printf("fuzz: %d inputs replayed, %d failed\n", argc, bad);
    return bad ? 1 : 0;
}

static void self_test(void)
{
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char out[65];
    size_t i;

    for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        ref_sha256_hex((const uint8_t *)v[i].in, strlen(v[i].in), out);
        if (strcmp(out, v[i].hex)) {
            fprintf(stderr, "fuzz: reference SHA-256 is wrong\n");
            exit(2);
        }
    }
    if (json_strict("{\"a\":[1,-0,1e5,\"\\u00e9\"]}", 25, 1) ||
        !json_strict("{\"a\":01}", 8, 1) || !json_strict("[1,]", 4, 1) ||
        !json_strict("\"\xff\"", 3, 1)) {
        fprintf(stderr, "fuzz: strict JSON checker self-test failed\n");
        exit(2);
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fuzz_engines [--seed N] [--iterations N] [--seconds S] [--corpus DIR]...\n"
            "                    [--crashes DIR] [--queue DIR] [--max-len N] [--batch N]\n"
            "                    [--hang-seconds S] [--max-crashes N] [--rss-mb N]\n"
            "                    [--profile 1]\n"
            "       fuzz_engines FILE...\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int i, rc;
    const char *tmp = getenv("TMPDIR");

    setvbuf(stdout, NULL, _IOLBF, 0);
    {
        ssize_t k = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
        g_self[k > 0 ? k : 0] = '\0';
    }
    for (i = 1; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!v)
            usage();
        if (!strcmp(a, "--seed"))
            opt.seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--iterations"))
            opt.iterations = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--seconds"))
            opt.seconds = strtod(v, NULL);
        else if (!strcmp(a, "--corpus") && opt.ncorpus < MAX_DIRS)
            opt.corpus[opt.ncorpus++] = v;
        else if (!strcmp(a, "--crashes"))
            opt.crashes = v;
        else if (!strcmp(a, "--queue"))
            opt.queue = v;
        else if (!strcmp(a, "--max-len"))
            opt.max_len = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--batch"))
            opt.batch = (unsigned)strtoul(v, NULL, 0);
        else if (!strcmp(a, "--hang-seconds"))
            opt.hang_seconds = strtod(v, NULL);
        else if (!strcmp(a, "--rss-mb"))
            opt.rss_mb = (unsigned)strtoul(v, NULL, 0);
        else if (!strcmp(a, "--profile"))
            opt.profile = atoi(v);
        else if (!strcmp(a, "--max-crashes"))
            opt.max_crashes = (unsigned)strtoul(v, NULL, 0);
        else
            usage();
        i++;
    }
    if (opt.batch == 0 || opt.batch > MAX_BATCH)
        opt.batch = 256;
    if (opt.max_len < 64)
        opt.max_len = 64;
    self_test();
    snprintf(g_tmpdir, sizeof(g_tmpdir), "%s/codeshim-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    if (i < argc) {
        g_all = 1;
        rc = replay_main(argc - i, argv + i);
    } else {
        if (!getenv("CODESHIM_FUZZ_EXEC") && g_self[0]) {
            /* Workers die on every finding; symbolizing each report costs
             * far more than the run. Reports are symbolized when the
             * saved input is re-run alone (rerun_detailed). */
            char env[2048];
            const char *a = getenv("ASAN_OPTIONS"), *u = getenv("UBSAN_OPTIONS");
            snprintf(env, sizeof(env), "%s%ssymbolize=0", a ? a : "", a && *a ? ":" : "");
            setenv("ASAN_OPTIONS", env, 1);
            snprintf(env, sizeof(env), "%s%ssymbolize=0", u ? u : "", u && *u ? ":" : "");
            setenv("UBSAN_OPTIONS", env, 1);
            setenv("CODESHIM_FUZZ_EXEC", "1", 1);
            rmdir(g_tmpdir);
            execv(g_self, argv);
        }
        if (!opt.ncorpus) {
            opt.corpus[opt.ncorpus++] = "tests/fuzz/corpus";
            opt.corpus[opt.ncorpus++] = "tests/fuzz/crashes";
        }
        for (i = 0; i < opt.ncorpus; i++)
            load_dir(opt.corpus[i]);
        if (opt.queue)
            load_dir(opt.queue);
        if (!g_nseeds) {
            struct bytes b = {0};
            b_adds(&b, builtin_resp_req);
            add_seed("builtin", &b);
        }
        rc = fuzz_main();
    }
    {
        char p[600];
        DIR *d = opendir(g_tmpdir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(p, sizeof(p), "%s/%s", g_tmpdir, e->d_name);
            unlink(p);
        }
        if (d)
            closedir(d);
        rmdir(g_tmpdir);
    }
    for (i = 0; i < (int)g_nseeds; i++) {
        free(g_seeds[i].p);
        free(g_seed_names[i]);
    }
    free(g_seeds);
    free(g_seed_names);
    return rc;
}
