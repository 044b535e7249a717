/* coro.c - see coro.h. ucontext (makecontext/swapcontext): the switch
 * saves the signal mask too (a system call each way), which costs
 * microseconds per resume, against the milliseconds a model call or an
 * execution takes. */
#include "curl/coro.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CORO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CORO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CORO_TSAN 1
#endif
#endif

#ifdef CORO_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
#endif
#ifdef CORO_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

struct shim_coro {
    ucontext_t ctx;  /* the coroutine's */
    ucontext_t back; /* the resumer's */
    void (*fn)(void *arg);
    void *arg;
    char *map;        /* guard page, then the stack */
    size_t map_len;
    int started, over;
#ifdef CORO_ASAN
    void *fake_back, *fake_self;
    const void *back_bottom;
    size_t back_size;
#endif
#ifdef CORO_TSAN
    void *fiber, *back_fiber;
#endif
};

static __thread struct shim_coro *current;

int shim_coro_new(size_t stack_size, void (*fn)(void *arg), void *arg, struct shim_coro **out)
{
    long page = sysconf(_SC_PAGESIZE);
    struct shim_coro *c;
    size_t n;

    if (page <= 0)
        page = 4096;
    n = (stack_size + (size_t)page - 1) / (size_t)page * (size_t)page + (size_t)page;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->map = mmap(NULL, n, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (c->map == MAP_FAILED) {
        free(c);
        return -ENOMEM;
    }
    if (mprotect(c->map, (size_t)page, PROT_NONE) < 0) {
        munmap(c->map, n);
        free(c);
        return -ENOMEM;
    }
    c->map_len = n;
    c->fn = fn;
    c->arg = arg;
    if (getcontext(&c->ctx) < 0) {
        munmap(c->map, n);
        free(c);
        return -ENOMEM;
    }
    c->ctx.uc_stack.ss_sp = c->map + page;
    c->ctx.uc_stack.ss_size = n - (size_t)page;
    c->ctx.uc_link = NULL;
#ifdef CORO_TSAN
    c->fiber = __tsan_create_fiber(0);
#endif
    *out = c;
    return 0;
}

/* Before the switch into c (the resumer's side). */
static void enter_begin(struct shim_coro *c)
{
#ifdef CORO_ASAN
    __sanitizer_start_switch_fiber(&c->fake_back, c->ctx.uc_stack.ss_sp, c->ctx.uc_stack.ss_size);
#endif
#ifdef CORO_TSAN
    c->back_fiber = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(c->fiber, 0);
#endif
    (void)c;
}

/* Right after the switch into c (on c's stack). */
static void enter_end(struct shim_coro *c)
{
#ifdef CORO_ASAN
    __sanitizer_finish_switch_fiber(c->fake_self, &c->back_bottom, &c->back_size);
#endif
    (void)c;
}

/* Before the switch out of c (on c's stack); last: c never runs again. */
static void leave_begin(struct shim_coro *c, int last)
{
#ifdef CORO_ASAN
    __sanitizer_start_switch_fiber(last ? NULL : &c->fake_self, c->back_bottom, c->back_size);
#endif
#ifdef CORO_TSAN
    __tsan_switch_to_fiber(c->back_fiber, 0);
#endif
    (void)c, (void)last;
}

/* Back on the resumer's stack. */
static void leave_end(struct shim_coro *c)
{
#ifdef CORO_ASAN
    __sanitizer_finish_switch_fiber(c->fake_back, NULL, NULL);
#endif
    (void)c;
}

static void trampoline(void)
{
    struct shim_coro *c = current;

    enter_end(c);
    c->fn(c->arg);
    c->over = 1;
    leave_begin(c, 1);
    swapcontext(&c->ctx, &c->back); /* never comes back */
    abort();
}

int shim_coro_resume(struct shim_coro *c)
{
    struct shim_coro *prev = current;

    if (c->over)
        return 1;
    if (prev) /* never nested: a coroutine does not resume another */
        return 0;
    if (!c->started) {
        c->started = 1;
        makecontext(&c->ctx, trampoline, 0);
    }
    current = c;
    enter_begin(c);
    swapcontext(&c->back, &c->ctx);
    leave_end(c);
    current = NULL;
    return c->over;
}

void shim_coro_yield(void)
{
    struct shim_coro *c = current;

    if (!c)
        return;
    leave_begin(c, 0);
    swapcontext(&c->ctx, &c->back);
    enter_end(c);
}

struct shim_coro *shim_coro_self(void)
{
    return current;
}

void shim_coro_free(struct shim_coro *c)
{
    if (!c)
        return;
#ifdef CORO_TSAN
    __tsan_destroy_fiber(c->fiber);
#endif
    munmap(c->map, c->map_len);
    free(c);
}
