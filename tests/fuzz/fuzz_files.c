/* fuzz_files.c - libFuzzer harness: the parsers of bytes that arrive with
 * files and configuration: the config file (confile.c), multipart uploads
 * (multipart.c), the model's file links (cite.c) and upload names
 * (text.c). The first byte picks the engine; the rest is its input. On
 * top of the sanitizers it checks what each promises: parts inside the
 * body and in order, citations inside the text and in order, names safe. */
#include "fuzz_common.h"

#include "api/cite.h"
#include "api/multipart.h"
#include "base/confile.h"
#include "base/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

FUZZ_PLAIN_INITIALIZE

static void check_confile(const char *p, size_t n)
{
    static struct shim_confile f;
    char err[256];
    size_t i, k;
    int rc = shim_confile_parse(p, n, &f, err, sizeof(err));

    if (rc != 0 && (rc != -EINVAL || !err[0]))
        fuzz_invalid("confile", "rc %d without a message", rc);
    if (rc)
        return;
    if (f.nsandboxes > SHIM_CONFILE_MAX_SANDBOXES)
        fuzz_invalid("confile", "%zu sandboxes", f.nsandboxes);
    for (i = 0; i < f.nsandboxes; i++)
        for (k = 0; k < f.sandboxes[i].npairs; k++)
            if (shim_confile_get(&f.sandboxes[i], f.sandboxes[i].pairs[k].key) !=
                f.sandboxes[i].pairs[k].value)
                fuzz_invalid("confile", "setting %zu of sandbox %zu is given twice", k, i);
}

/* The first line is the content type; the rest, the body. */
static void check_multipart(const char *p, size_t n)
{
    char ct[256], b[SHIM_MULTIPART_BOUNDARY_MAX + 1];
    const char *nl = memchr(p, '\n', n);
    struct shim_part parts[8];
    size_t len = nl ? (size_t)(nl - p) : n, i, np;
    const char *body = nl ? nl + 1 : p + n, *prev = body;

    if (len >= sizeof(ct) || memchr(p, '\0', len))
        return;
    memcpy(ct, p, len);
    ct[len] = '\0';
    if (shim_multipart_boundary(ct, b) < 0)
        return;
    if (!b[0] || strlen(b) > SHIM_MULTIPART_BOUNDARY_MAX)
        fuzz_invalid("multipart", "boundary of %zu bytes", strlen(b));
    if (shim_multipart_parse(body, (size_t)(p + n - body), b, parts, 8, &np) < 0)
        return;
    for (i = 0; i < np; i++) {
        if (parts[i].data < prev || parts[i].data + parts[i].len > p + n)
            fuzz_invalid("multipart", "part %zu outside the body or out of order", i);
        if (!parts[i].name[0])
            fuzz_invalid("multipart", "part %zu has no name", i);
        prev = parts[i].data + parts[i].len;
    }
}

/* A "." or ".." path segment. */
static int has_dot_segment(const char *s)
{
    while (*s) {
        size_t n = strcspn(s, "/");
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 1;
        s += n + (s[n] == '/');
    }
    return 0;
}

static void check_cite(const char *p, size_t n)
{
    struct shim_cite c[16];
    size_t got = shim_cite_find(p, n, c, 16), chars = 0, i, last = 0;

    for (i = 0; i < n; i++)
        chars += !shim_text_is_cont((unsigned char)p[i]);
    for (i = 0; i < got; i++) {
        if (c[i].start >= c[i].end || c[i].end > chars || c[i].start < last)
            fuzz_invalid("cite", "citation %zu spans %zu..%zu of %zu characters", i,
                         c[i].start, c[i].end, chars);
        if (!c[i].name[0] || c[i].name[0] == '/' || has_dot_segment(c[i].name))
            fuzz_invalid("cite", "unsafe name \"%s\"", c[i].name);
        last = c[i].end;
    }
}

static void check_filename(const char *p, size_t n)
{
    char in[600], out[256];

    if (n >= sizeof(in))
        return;
    memcpy(in, p, n);
    in[n] = '\0';
    if (shim_text_safe_filename(in, out, sizeof(out)) < 0)
        return;
    if (!out[0] || strchr(out, '/') || strchr(out, '\\') || !strcmp(out, "..") ||
        !strcmp(out, "."))
        fuzz_invalid("filename", "unsafe name \"%s\"", out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data + 1;

    if (!size)
        return 0;
    switch (data[0] % 4) {
    case 0: check_confile(p, size - 1); break;
    case 1: check_multipart(p, size - 1); break;
    case 2: check_cite(p, size - 1); break;
    default: check_filename(p, size - 1); break;
    }
    return 0;
}
