/* text.h - byte-level text helpers every layer needs: where a cut may
 * fall in UTF-8 text, and lowercase hex. Pure, no allocation. */
#ifndef SHIM_TEXT_H
#define SHIM_TEXT_H

#include <stddef.h>

/* Whether c continues a UTF-8 character (10xxxxxx): no cut before it. */
static inline int shim_text_is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

/* The cut point at or before at (at <= len of s) that starts a character:
 * text before it never ends inside a UTF-8 sequence. */
size_t shim_text_cut_back(const char *s, size_t at);
/* The cut point at or after at, at most n. */
size_t shim_text_cut_forward(const char *s, size_t at, size_t n);
/* Makes s[0..n) valid UTF-8 without NULs, in place and length-preserving:
 * every offending byte becomes '?' (text for the model, where a NUL would
 * end it early for every C consumer). */
void shim_text_sanitize_utf8(char *s, size_t n);
/* Whether s holds only base64 characters (A-Z a-z 0-9 + / =). */
int shim_text_is_base64(const char *s);
/* The value of hex digit c (either case), or -1. */
int shim_text_hexval(char c);
/* 2n lowercase hex digits of in, then a NUL (out holds 2n + 1). */
void shim_text_hex(const unsigned char *in, size_t n, char *out);

/* An uploaded file's name made safe for /mnt/data, into out (outsz
 * bytes, at most 255 + 1): the part after the last '/' or '\\' (clients
 * may send a path), refused (-EINVAL) when that is empty, "." or "..",
 * longer than 255 bytes, not valid UTF-8, or holds a control character. */
int shim_text_safe_filename(const char *in, char *out, size_t outsz);

/* The edit distance (insertions, deletions, substitutions; ASCII case
 * ignored) between a and b, or max + 1 when it exceeds max or either is
 * longer than 64 bytes: for "did you mean" hints. Linear in memory. */
size_t shim_text_distance(const char *a, const char *b, size_t max);

#endif
