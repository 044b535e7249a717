/* argcode.h - decodes the "code" string out of a function call's
 * arguments while the model is still writing them: pure, no I/O.
 *
 * The arguments of codeshim's tool arrive as JSON text in pieces split
 * anywhere ({"code": "print(1)\n..."}); the decoder turns the value of a
 * leading "code" member into the code's bytes as the pieces come, so a
 * program can watch the code being written. Escapes (\n, \", \uXXXX and
 * surrogate pairs) may be split across pieces. Only that shape is
 * decoded: arguments that open otherwise ({"other": ..., "code": ...},
 * not an object, a key written with escapes) or that hold what the whole
 * parse would refuse (U+0000, a lone surrogate, a raw control byte) stop
 * the decoder, and the caller falls back to shim_conv_parse_code on the
 * whole arguments at the end. Constant memory, linear work. */
#ifndef SHIM_ARGCODE_H
#define SHIM_ARGCODE_H

#include "base/buf.h"

#include <stddef.h>

enum shim_argcode_state {
    SHIM_AC_OPEN,   /* before "{" */
    SHIM_AC_KEYQ,   /* before the key's opening quote */
    SHIM_AC_KEY,    /* inside the key */
    SHIM_AC_COLON,  /* before ":" */
    SHIM_AC_VALQ,   /* before the value's opening quote */
    SHIM_AC_STR,    /* inside the code string */
    SHIM_AC_ESC,    /* after a backslash */
    SHIM_AC_HEX,    /* inside \uXXXX */
    SHIM_AC_DONE,   /* the string closed: the rest is not looked at */
    SHIM_AC_STOP    /* not the shape: nothing more is decoded */
};

struct shim_argcode {
    enum shim_argcode_state state;
    unsigned key;     /* bytes of "code" matched */
    unsigned hexn;    /* hex digits of \uXXXX read */
    unsigned cp;      /* their value so far */
    unsigned hi;      /* a high surrogate waiting for its low half, or 0 */
};

void shim_argcode_init(struct shim_argcode *d);
/* Appends the code bytes p[0..n) completes to out. 0, or out's -E2BIG /
 * -ENOMEM (the decoder then stops). */
int shim_argcode_feed(struct shim_argcode *d, const char *p, size_t n, struct shim_buf *out);
/* Whether the decoder stopped (the arguments are not of the shape). */
int shim_argcode_stopped(const struct shim_argcode *d);
/* The length of out's longest prefix that ends on a UTF-8 character
 * boundary (looking back at most 3 bytes): what may be sent as a delta. */
size_t shim_argcode_whole(const char *s, size_t len);

#endif
