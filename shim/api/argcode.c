/* argcode.c - see argcode.h. */
#include "api/argcode.h"

#include "base/text.h"

#include <string.h>

void shim_argcode_init(struct shim_argcode *d)
{
    memset(d, 0, sizeof(*d));
}

int shim_argcode_stopped(const struct shim_argcode *d)
{
    return d->state == SHIM_AC_STOP;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int put_utf8(struct shim_buf *out, unsigned cp)
{
    char b[4];
    size_t n;

    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return shim_buf_add(out, b, n);
}

/* A complete \uXXXX: a BMP character, half of a pair, or the end of the
 * shape (U+0000 and lone surrogates are what the whole parse refuses). */
static enum shim_argcode_state hex_done(struct shim_argcode *d, struct shim_buf *out, int *rc)
{
    unsigned cp = d->cp;

    if (d->hi) {
        if (cp < 0xDC00 || cp > 0xDFFF)
            return SHIM_AC_STOP;
        cp = 0x10000 + ((d->hi - 0xD800) << 10) + (cp - 0xDC00);
        d->hi = 0;
    } else if (cp >= 0xD800 && cp <= 0xDBFF) {
        d->hi = cp;
        return SHIM_AC_STR;
    } else if ((cp >= 0xDC00 && cp <= 0xDFFF) || cp == 0) {
        return SHIM_AC_STOP;
    }
    *rc = put_utf8(out, cp);
    return SHIM_AC_STR;
}

static char unescape(char c)
{
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

/* The next state after byte c outside the string's body. */
static enum shim_argcode_state frame(struct shim_argcode *d, char c)
{
    static const char key[] = "code";

    switch (d->state) {
    case SHIM_AC_OPEN:
        return is_ws(c) ? SHIM_AC_OPEN : c == '{' ? SHIM_AC_KEYQ : SHIM_AC_STOP;
    case SHIM_AC_KEYQ:
        return is_ws(c) ? SHIM_AC_KEYQ : c == '"' ? SHIM_AC_KEY : SHIM_AC_STOP;
    case SHIM_AC_KEY:
        if (d->key < 4)
            return c == key[d->key++] ? SHIM_AC_KEY : SHIM_AC_STOP;
        return c == '"' ? SHIM_AC_COLON : SHIM_AC_STOP;
    case SHIM_AC_COLON:
        return is_ws(c) ? SHIM_AC_COLON : c == ':' ? SHIM_AC_VALQ : SHIM_AC_STOP;
    case SHIM_AC_VALQ:
        return is_ws(c) ? SHIM_AC_VALQ : c == '"' ? SHIM_AC_STR : SHIM_AC_STOP;
    default:
        return d->state;
    }
}

int shim_argcode_feed(struct shim_argcode *d, const char *p, size_t n, struct shim_buf *out)
{
    size_t i, run;
    int rc = 0, h;
    char u;

    for (i = 0; i < n && rc == 0; i++) {
        char c = p[i];
        switch (d->state) {
        case SHIM_AC_DONE:
        case SHIM_AC_STOP:
            return 0;
        case SHIM_AC_STR:
            if (d->hi && c != '\\') {
                d->state = SHIM_AC_STOP;
            } else if (c == '"') {
                d->state = SHIM_AC_DONE;
            } else if (c == '\\') {
                d->state = SHIM_AC_ESC;
            } else if ((unsigned char)c < 0x20) {
                d->state = SHIM_AC_STOP;
            } else { /* a run of plain bytes in one append */
                for (run = i; run < n && p[run] != '"' && p[run] != '\\' &&
                              (unsigned char)p[run] >= 0x20;
                     run++)
                    ;
                rc = shim_buf_add(out, p + i, run - i);
                i = run - 1;
            }
            break;
        case SHIM_AC_ESC:
            if (c == 'u') {
                d->state = SHIM_AC_HEX;
                d->hexn = d->cp = 0;
            } else if (d->hi || !(u = unescape(c))) {
                d->state = SHIM_AC_STOP;
            } else {
                rc = shim_buf_add(out, &u, 1);
                d->state = SHIM_AC_STR;
            }
            break;
        case SHIM_AC_HEX:
            if ((h = shim_text_hexval(c)) < 0) {
                d->state = SHIM_AC_STOP;
                break;
            }
            d->cp = d->cp << 4 | (unsigned)h;
            if (++d->hexn == 4)
                d->state = hex_done(d, out, &rc);
            break;
        default:
            d->state = frame(d, c);
        }
    }
    if (rc)
        d->state = SHIM_AC_STOP;
    return rc;
}

size_t shim_argcode_whole(const char *s, size_t len)
{
    size_t k;

    for (k = 1; k <= 3 && k <= len; k++) {
        unsigned char c = (unsigned char)s[len - k];
        size_t need;
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? len - k : len;
    }
    return len; /* no lead byte near the end: not UTF-8 to wait for */
}
