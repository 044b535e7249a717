/* local_argv.h - a command line built in place, for local_jail.c and
 * local_layout.c: at most ARGV_MAX arguments, the formatted ones kept in
 * a fixed arena; anything past either is an overflow the caller checks
 * (c->overflow), never a cut argument. Small enough to live here whole. */
#ifndef SHIM_LOCAL_ARGV_H
#define SHIM_LOCAL_ARGV_H

#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>

#define ARGV_MAX 256
#define ARENA 8192

struct cmd {
    char *v[ARGV_MAX + 1];
    int n;
    char arena[ARENA];
    size_t used;
    int overflow;
};

static inline void arg(struct cmd *c, const char *s)
{
    if (c->n < ARGV_MAX)
        c->v[c->n++] = (char *)s;
    else
        c->overflow = 1;
    c->v[c->n] = NULL;
}

/* A formatted argument kept in the command's arena. */
__attribute__((format(printf, 2, 3))) static inline const char *
argf(struct cmd *c, const char *fmt, ...)
{
    char *p = c->arena + c->used;
    size_t room = ARENA - c->used;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(p, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        c->overflow = 1;
        return "";
    }
    c->used += (size_t)n + 1;
    arg(c, p);
    return p;
}

/* One argument built in pieces at the arena's end: piece() appends to it
 * (formatted), piece_done() passes it on; too long is an overflow. */
struct pieces {
    char *p;
    size_t n;
};

static inline struct pieces pieces_start(struct cmd *c)
{
    struct pieces b = {c->arena + c->used, 0};

    if (c->used < ARENA)
        b.p[0] = '\0';
    else
        c->overflow = 1;
    return b;
}

__attribute__((format(printf, 3, 4))) static inline void
piece(struct cmd *c, struct pieces *b, const char *fmt, ...)
{
    size_t room = ARENA - c->used - b->n;
    va_list ap;
    int w;

    if (c->overflow)
        return;
    va_start(ap, fmt);
    w = vsnprintf(b->p + b->n, room, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= room)
        c->overflow = 1;
    else
        b->n += (size_t)w;
}

static inline void piece_done(struct cmd *c, struct pieces *b)
{
    if (c->overflow)
        return;
    c->used += b->n + 1;
    arg(c, b->p);
}

static inline void args2(struct cmd *c, const char *a, const char *b)
{
    arg(c, a);
    arg(c, b);
}

static inline void args3(struct cmd *c, const char *a, const char *b, const char *d)
{
    arg(c, a);
    arg(c, b);
    arg(c, d);
}

#endif
