/* libpath.c - finding libcodeshim.so and composing LD_PRELOAD; see
 * libpath.h. */
#include "libpath.h"

#include "base/fileio.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIB_NAME "libcodeshim.so"

int cli_exe_dir(char *out, size_t outsz)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    char *slash;

    if (n < 0)
        return -errno;
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    if ((size_t)snprintf(out, outsz, "%s", slash == buf ? "/" : buf) >= outsz)
        return -ENAMETOOLONG;
    return 0;
}

/* A regular, readable file, resolved to its canonical absolute path:
 * LD_PRELOAD is read again by every exec'ed child, whose working directory
 * may differ, so a relative path would break below the first chdir. */
static int resolve_file(const char *path, char *out, size_t outsz)
{
    char real[PATH_MAX];
    struct stat st;

    if (!realpath(path, real))
        return -errno;
    if (stat(real, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EISDIR;
    if (access(real, R_OK) < 0)
        return -errno;
    if ((size_t)snprintf(out, outsz, "%s", real) >= outsz)
        return -ENAMETOOLONG;
    return 0;
}

static int check_expressible(const char *path, char *err, size_t errsz)
{
    /* ld.so splits LD_PRELOAD on spaces and colons and has no escape. */
    if (strpbrk(path, " :\t\n")) {
        snprintf(err, errsz,
                 "library path %s contains a space or ':', which LD_PRELOAD "
                 "cannot express; install or copy it elsewhere",
                 path);
        return -EINVAL;
    }
    return 0;
}

static int explicit_library(const char *path, const char *what, char *out, size_t outsz,
                            char *err, size_t errsz)
{
    int rc = resolve_file(path, out, outsz);

    if (rc < 0) {
        snprintf(err, errsz, "library not found: %s (from %s): %s", path, what,
                 strerror(-rc));
        return rc == -ENAMETOOLONG ? rc : -ENOENT;
    }
    return check_expressible(out, err, errsz);
}

int cli_find_library(const char *opt, const char *env, const char *exe_dir, char *out,
                     size_t outsz, char *err, size_t errsz)
{
    char beside[PATH_MAX], installed[PATH_MAX];

    if (opt)
        return explicit_library(opt, "--lib", out, outsz, err, errsz);
    if (env && *env)
        return explicit_library(env, "CODESHIM_LIB", out, outsz, err, errsz);
    if (!exe_dir) {
        snprintf(err, errsz,
                 "%s not found: cannot tell where the launcher lives; use --lib "
                 "PATH or CODESHIM_LIB",
                 LIB_NAME);
        return -ENOENT;
    }
    shim_fileio_join(beside, sizeof(beside), exe_dir, LIB_NAME); /* "" if too long */
    snprintf(installed, sizeof(installed), "%s/../lib/codeshim/%s", exe_dir, LIB_NAME);
    if (resolve_file(beside, out, outsz) == 0 ||
        resolve_file(installed, out, outsz) == 0)
        return check_expressible(out, err, errsz);
    snprintf(err, errsz, "%s not found (looked for %s and %s); use --lib PATH or "
             "CODESHIM_LIB", LIB_NAME, beside, installed);
    return -ENOENT;
}

/* Is this LD_PRELOAD entry the library itself (same text, or a path that
 * resolves to the same file)? */
static int same_library(const char *entry, const char *lib)
{
    char real[PATH_MAX];

    if (!strcmp(entry, lib))
        return 1;
    return realpath(entry, real) && !strcmp(real, lib);
}

char *cli_preload_value(const char *lib, const char *old)
{
    size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *out = malloc(cap), *copy, *save = NULL, *tok;

    if (!out)
        return NULL;
    snprintf(out, cap, "%s", lib);
    if (!old)
        return out;
    copy = strdup(old);
    if (!copy) {
        free(out);
        return NULL;
    }
    /* Each kept entry adds at most its own length plus one separator, and
     * the separators it replaces were in old: cap always suffices. */
    for (tok = strtok_r(copy, " :\t\n", &save); tok; tok = strtok_r(NULL, " :\t\n", &save)) {
        if (same_library(tok, lib))
            continue;
        strcat(out, ":");
        strcat(out, tok);
    }
    free(copy);
    return out;
}
