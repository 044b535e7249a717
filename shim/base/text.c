/* text.c - see text.h. */
#include "base/text.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

size_t shim_text_cut_back(const char *s, size_t at)
{
    while (at > 0 && shim_text_is_cont((unsigned char)s[at]))
        at--;
    return at;
}

size_t shim_text_cut_forward(const char *s, size_t at, size_t n)
{
    while (at < n && shim_text_is_cont((unsigned char)s[at]))
        at++;
    return at;
}

int shim_text_is_base64(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '+' || *s == '/' || *s == '='))
            return 0;
    return 1;
}

void shim_text_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len, i;
    unsigned c = s[0];
    unsigned long cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

void shim_text_sanitize_utf8(char *s, size_t n)
{
    unsigned char *p = (unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t k = p[i] ? utf8_seq(p + i, n - i) : 0;
        if (k == 0) {
            p[i++] = '?';
            continue;
        }
        i += k;
    }
}

/* Whether s[0..n) is valid UTF-8 (shortest forms, no surrogates). */
static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0, k;

    while (i < n) {
        if (!(k = utf8_seq(s + i, n - i)))
            return 0;
        i += k;
    }
    return 1;
}

int shim_text_safe_filename(const char *in, char *out, size_t outsz)
{
    const char *base = in, *p;
    size_t n, i;

    for (p = in; *p; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    n = strlen(base);
    if (!n || n > 255 || n >= outsz || !strcmp(base, ".") || !strcmp(base, ".."))
        return -EINVAL;
    for (i = 0; i < n; i++)
        if ((unsigned char)base[i] < 0x20 || base[i] == 0x7f)
            return -EINVAL;
    if (!valid_utf8((const unsigned char *)base, n))
        return -EINVAL;
    memcpy(out, base, n + 1);
    return 0;
}

int shim_text_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t shim_text_distance(const char *a, const char *b, size_t max)
{
    size_t la = strlen(a), lb = strlen(b), i, j, row[65];

    if (la > 64 || lb > 64 || (la > lb ? la - lb : lb - la) > max)
        return max + 1;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0], best;

        row[0] = i;
        best = row[0];
        for (j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) !=
                                 tolower((unsigned char)b[j - 1]));
            size_t v = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;

            row[j] = v < sub ? v : sub;
            diag = up;
            if (row[j] < best)
                best = row[j];
        }
        if (best > max)
            return max + 1;
    }
    return row[lb] > max ? max + 1 : row[lb];
}
