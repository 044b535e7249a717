/* guard.h - "codeshim or libcurl itself is calling libcurl" marker.
 *
 * libcurl calls its own public API through the PLT (curl_easy_perform
 * drives curl_multi_*, DoH sets options on internal handles), and codeshim
 * calls real libcurl for upstream requests. While the guard is up on this
 * thread, wrappers forward straight to the real function and record
 * nothing about handles they have not seen before. */
#ifndef SHIM_GUARD_H
#define SHIM_GUARD_H

extern __thread int shim_guard_depth;

static inline void shim_guard_enter(void) { shim_guard_depth++; }
static inline void shim_guard_leave(void) { shim_guard_depth--; }
static inline int shim_guard_active(void) { return shim_guard_depth > 0; }

#endif
