/* guard.h - "codeshim or libcurl itself is calling libcurl" marker.
 *
 * libcurl calls its own public API through the PLT (curl_easy_perform
 * drives curl_multi_*, DoH sets options on internal handles), and codeshim
 * calls real libcurl for upstream requests. The guard is up on this
 * thread while such a real call runs. A wrapper called then from
 * libcurl's own code (preload.c asks real.h whether its return address
 * lies in libcurl) forwards straight to the real function and records
 * nothing about handles it has not seen before; one called from a
 * callback of the program's that libcurl is running is the program's
 * call like any other. */
#ifndef SHIM_GUARD_H
#define SHIM_GUARD_H

extern __thread int shim_guard_depth;

static inline void shim_guard_enter(void) { shim_guard_depth++; }
static inline void shim_guard_leave(void) { shim_guard_depth--; }
static inline int shim_guard_active(void) { return shim_guard_depth > 0; }

#endif
