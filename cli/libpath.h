/* libpath.h - where the launcher finds libcodeshim.so and how it builds
 * LD_PRELOAD. Pure string work except for the stat/realpath checks in
 * cli_find_library(). */
#ifndef CLI_LIBPATH_H
#define CLI_LIBPATH_H

#include <stddef.h>

/* Where a library path came from; decides the error message. */
enum cli_lib_source { CLI_LIB_OPTION, CLI_LIB_ENV, CLI_LIB_BESIDE, CLI_LIB_INSTALLED };

/* Finds the library: opt (--lib) if non-NULL, else env (CODESHIM_LIB) if
 * non-empty, else libcodeshim.so in exe_dir, else
 * exe_dir/../lib/codeshim/libcodeshim.so. Writes the canonical absolute
 * path to out and returns 0; -ENOENT when none exists (an explicit --lib or
 * CODESHIM_LIB that is missing is not replaced by a guess), -EINVAL when
 * the path cannot be written in LD_PRELOAD (space or ':'), -ENAMETOOLONG.
 * On failure err gets a message naming what is missing. */
int cli_find_library(const char *opt, const char *env, const char *exe_dir, char *out,
                     size_t outsz, char *err, size_t errsz);

/* Builds the new LD_PRELOAD value: lib first, then every entry of old
 * (space or colon separated, may be NULL), empty entries and copies of lib
 * dropped, joined with ':'. Returns a malloc'ed string (caller frees) or
 * NULL when out of memory. */
char *cli_preload_value(const char *lib, const char *old);

/* Directory of the running executable (/proc/self/exe) into out; 0 or
 * negative errno. */
int cli_exe_dir(char *out, size_t outsz);

#endif
