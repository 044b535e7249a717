/* coro.h - coroutines: a function that runs on a stack of its own and
 * gives the thread back (yield) until it is resumed, on the same thread.
 *
 * The multi engine (multi.c) runs each intercepted transfer's loop as
 * one: it advances only inside the program's calls that drive its multi
 * handle, and wherever it would block it yields instead. The stack is
 * mmap'd with a guard page below it (an overflow faults at once instead
 * of writing over other memory); switches are told to AddressSanitizer
 * and ThreadSanitizer when the build has them. A coroutine is resumed
 * only by the thread that runs the program's call, never inside itself. */
#ifndef SHIM_CORO_H
#define SHIM_CORO_H

#include <stddef.h>

struct shim_coro;

/* A coroutine that will run fn(arg) on a stack of stack_size bytes
 * (rounded up to pages) once first resumed. 0, or -ENOMEM. */
int shim_coro_new(size_t stack_size, void (*fn)(void *arg), void *arg, struct shim_coro **out);
/* Runs c until it yields (0) or fn returned (1: c is over). Never from
 * inside a coroutine. */
int shim_coro_resume(struct shim_coro *c);
/* Inside a coroutine: back to the call that resumed it. */
void shim_coro_yield(void);
/* The coroutine this thread runs now, or NULL on the thread's own stack. */
struct shim_coro *shim_coro_self(void);
/* Frees c, over or never started (a coroutine yielded midway must be
 * resumed until it is over first: its stack holds what it owns). */
void shim_coro_free(struct shim_coro *c);

#endif
