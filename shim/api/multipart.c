/* multipart.c - see multipart.h. */
#include "api/multipart.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int is_tchar(char c)
{
    return c > ' ' && c < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* The value of parameter key in a header's parameter list ("; a=b;
 * c=\"d\""), unquoted, into out. 1 found, 0 absent, -EINVAL malformed. */
static int param(const char *s, size_t n, const char *key, char *out, size_t outsz)
{
    size_t i = 0, kl = strlen(key);

    while (i < n) {
        size_t k0, k1, vl = 0;
        int match;

        while (i < n && s[i] != ';')
            i++; /* skip to the next parameter (the first is the value) */
        if (i >= n)
            return 0;
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        k0 = i;
        while (i < n && is_tchar(s[i]))
            i++;
        k1 = i;
        if (i >= n || s[i] != '=')
            return -EINVAL;
        i++;
        match = k1 - k0 == kl && !strncasecmp(s + k0, key, kl);
        if (i < n && s[i] == '"') {
            for (i++; i < n && s[i] != '"'; i++) {
                if (s[i] == '\\' && i + 1 < n)
                    i++;
                if (match && vl + 1 < outsz)
                    out[vl] = s[i];
                vl++;
            }
            if (i >= n)
                return -EINVAL;
            i++;
        } else {
            for (; i < n && s[i] != ';' && s[i] != ' ' && s[i] != '\t'; i++) {
                if (match && vl + 1 < outsz)
                    out[vl] = s[i];
                vl++;
            }
        }
        if (match) {
            if (vl >= outsz)
                return -EINVAL;
            out[vl] = '\0';
            return 1;
        }
    }
    return 0;
}

int shim_multipart_boundary(const char *ct, char *out)
{
    static const char mt[] = "multipart/form-data";
    size_t n = strlen(ct), i;
    int rc;

    if (strncasecmp(ct, mt, sizeof(mt) - 1) || (ct[sizeof(mt) - 1] && ct[sizeof(mt) - 1] != ';' &&
                                                  ct[sizeof(mt) - 1] != ' '))
        return -EINVAL;
    rc = param(ct, n, "boundary", out, SHIM_MULTIPART_BOUNDARY_MAX + 1);
    if (rc <= 0 || !out[0])
        return -EINVAL;
    for (i = 0; out[i]; i++)
        if ((unsigned char)out[i] < ' ' || (unsigned char)out[i] >= 0x7f)
            return -EINVAL;
    return 0;
}

/* One part's headers h[0..n): Content-Disposition (form-data, a name) and
 * Content-Type; other headers are ignored. */
static int part_headers(const char *h, size_t n, struct shim_part *p)
{
    size_t i = 0;
    int seen_cd = 0;

    while (i < n) {
        const char *eol = memmem(h + i, n - i, "\r\n", 2);
        size_t ll = eol ? (size_t)(eol - (h + i)) : n - i, cl;
        const char *line = h + i, *colon = memchr(line, ':', ll);

        i += ll + 2;
        if (!colon)
            return -EINVAL;
        cl = (size_t)(colon - line);
        colon++;
        ll -= cl + 1;
        while (ll && (*colon == ' ' || *colon == '\t'))
            colon++, ll--;
        if (cl == 19 && !strncasecmp(line, "Content-Disposition", 19)) {
            int rc;
            if (seen_cd++ || ll < 9 || strncasecmp(colon, "form-data", 9))
                return -EINVAL;
            if ((rc = param(colon, ll, "name", p->name, sizeof(p->name))) <= 0 || !p->name[0])
                return -EINVAL;
            rc = param(colon, ll, "filename", p->filename, sizeof(p->filename));
            if (rc < 0)
                return -EINVAL;
            p->has_filename = rc;
        } else if (cl == 12 && !strncasecmp(line, "Content-Type", 12)) {
            if (ll >= sizeof(p->content_type))
                return -EINVAL;
            memcpy(p->content_type, colon, ll);
            p->content_type[ll] = '\0';
        }
    }
    return seen_cd ? 0 : -EINVAL;
}

int shim_multipart_parse(const char *body, size_t len, const char *boundary,
                         struct shim_part *parts, size_t max, size_t *n)
{
    char delim[SHIM_MULTIPART_BOUNDARY_MAX + 5];
    size_t dl, at;
    const char *hit;

    *n = 0;
    dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
    if (!boundary[0] || dl >= sizeof(delim))
        return -EINVAL;
    /* the first delimiter may open the body without its CRLF */
    if (len >= dl - 2 && !memcmp(body, delim + 2, dl - 2))
        at = dl - 2;
    else if ((hit = memmem(body, len, delim, dl)) != NULL)
        at = (size_t)(hit - body) + dl;
    else
        return -EINVAL;
    for (;;) {
        struct shim_part *p;
        const char *hend, *next;
        size_t hs;

        if (len - at >= 2 && !memcmp(body + at, "--", 2))
            return 0; /* the close delimiter; the epilogue is ignored */
        while (at < len && (body[at] == ' ' || body[at] == '\t'))
            at++; /* transport padding */
        if (len - at < 2 || memcmp(body + at, "\r\n", 2))
            return -EINVAL;
        at += 2;
        if (*n >= max)
            return -E2BIG;
        p = &parts[*n];
        memset(p, 0, sizeof(*p));
        hs = len - at < SHIM_MULTIPART_HEAD_MAX + 4 ? len - at : SHIM_MULTIPART_HEAD_MAX + 4;
        if (hs >= 2 && !memcmp(body + at, "\r\n", 2))
            hend = body + at; /* no headers at all */
        else if ((hend = memmem(body + at, hs, "\r\n\r\n", 4)) == NULL)
            return -EINVAL;
        if (part_headers(body + at, (size_t)(hend - (body + at)), p) < 0)
            return -EINVAL;
        at = (size_t)(hend - body) + (hend == body + at ? 2 : 4);
        next = memmem(body + at, len - at, delim, dl);
        if (!next)
            return -EINVAL; /* truncated: no closing delimiter */
        p->data = body + at;
        p->len = (size_t)(next - (body + at));
        (*n)++;
        at = (size_t)(next - body) + dl;
    }
}
