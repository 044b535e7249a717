/* cite.c - see cite.h. */
#include "api/cite.h"

#include "base/text.h"

#include <string.h>

#define PREFIX "sandbox:/mnt/data/"
#define LABEL_MAX 512 /* how far back a markdown label may start */

/* Whether c ends a bare link. */
static int ends_bare(char c)
{
    return (unsigned char)c <= ' ' || strchr(")]>\"'`<", c) != NULL;
}

/* Percent-decodes s[0..n) into out; 0, or -1 when the name is not one
 * codeshim would serve. */
static int decode_name(const char *s, size_t n, char *out)
{
    size_t i, k = 0;
    char *seg;

    for (i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%' && i + 2 < n && shim_text_hexval(s[i + 1]) >= 0 && shim_text_hexval(s[i + 2]) >= 0) {
            c = shim_text_hexval(s[i + 1]) * 16 + shim_text_hexval(s[i + 2]);
            i += 2;
        }
        if (c < 0x20 || c == 0x7f || k + 1 >= SHIM_CITE_NAME_MAX)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    if (!k || out[0] == '/' || out[k - 1] == '/')
        return -1;
    for (seg = out; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
        size_t sl = strcspn(seg, "/");
        if (!sl || (sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
            return -1;
    }
    return 0;
}

/* Where the markdown link around the target at p (text[p-1] == '(')
 * begins: its '[' (or the '!' before it), or p when there is none. */
static size_t link_start(const char *text, size_t p)
{
    size_t i, floor = p > LABEL_MAX + 2 ? p - LABEL_MAX - 2 : 0;

    if (p < 3 || text[p - 1] != '(' || text[p - 2] != ']')
        return p;
    for (i = p - 2; i > floor; i--)
        if (text[i - 1] == '[')
            return i - 1 > 0 && text[i - 2] == '!' ? i - 2 : i - 1;
    return p;
}

/* Characters (code points) before byte offset at, counted incrementally:
 * offsets only grow, so the whole scan stays linear. */
struct counter {
    const char *text;
    size_t byte, chars;
};

static size_t chars_at(struct counter *c, size_t at)
{
    for (; c->byte < at; c->byte++)
        c->chars += !shim_text_is_cont((unsigned char)c->text[c->byte]);
    return c->chars;
}

size_t shim_cite_find(const char *text, size_t len, struct shim_cite *out, size_t max)
{
    const size_t pl = strlen(PREFIX);
    struct counter cnt = {text, 0, 0};
    size_t at = 0, n = 0;

    while (n < max && at + pl <= len) {
        const char *hit = memmem(text + at, len - at, PREFIX, pl);
        size_t p, q, start, end, back;
        int md;

        if (!hit)
            break;
        p = (size_t)(hit - text);
        back = link_start(text, p);
        md = back < p;
        q = p + pl;
        while (q < len && (md ? text[q] != ')' && text[q] != '\n' : !ends_bare(text[q])))
            q++;
        at = q;
        if (md && (q >= len || text[q] != ')'))
            continue; /* an unclosed link: not ours */
        end = md ? q + 1 : q;
        if (!md)
            while (q > p + pl && strchr(".,;:!?", text[q - 1])) /* sentence punctuation */
                end = --q;
        if (back < cnt.byte) /* overlaps the previous link: skip */
            continue;
        if (decode_name(text + p + pl, q - (p + pl), out[n].name) < 0)
            continue;
        start = chars_at(&cnt, back);
        out[n].start = start;
        out[n].end = chars_at(&cnt, end);
        n++;
    }
    return n;
}
