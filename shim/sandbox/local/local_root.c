/* local_root.c - the unsafe mode's host directory
 * (CODESHIM_UNSAFE_NO_ISOLATION=1), which stands in for the jail: made
 * (mkdtemp in the temporary directory), its data, home and tmp refreshed
 * before each start, and removed with everything in it (never following
 * a link, whatever the code did to its modes). See local_int.h. */
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/local/local_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RM_MAX_DEPTH 128

static void rm_contents(int dfd, int depth);

/* Removes name in dfd, whatever it is, never following symlinks. */
static void rm_entry(int dfd, const char *name, int depth)
{
    int sub;

    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return;
    if (errno != EISDIR && errno != EPERM)
        return;
    if (depth >= RM_MAX_DEPTH)
        return;
    sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* a directory the code made unreadable: made readable, opened again */
    if (sub < 0 && errno == EACCES && fchmodat(dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
        sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return;
    fchmod(sub, 0700);
    rm_contents(sub, depth + 1);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Empties the directory dfd; takes ownership of dfd. */
static void rm_contents(int dfd, int depth)
{
    DIR *d = fdopendir(dfd);
    struct dirent *e;

    if (!d) {
        close(dfd);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        rm_entry(dirfd(d), e->d_name, depth);
    }
    closedir(d);
}

void shim_local_rm_root(const struct shim_local *l)
{
    const char *path = l->root;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd >= 0)
        rm_contents(fd, 0);
    if (rmdir(path) != 0 && errno != ENOENT)
        LOG_WARN("could not remove sandbox directory %s: %s", path,
                 strerror(errno));
}

int shim_local_make_root(struct shim_local *l)
{
    int rc;

    if (shim_fileio_join(l->root, sizeof(l->root), l->p.tmpdir, "codeshim-XXXXXX") ||
        !mkdtemp(l->root)) {
        rc = errno ? -errno : -ENAMETOOLONG;
        LOG_ERR("cannot create a sandbox directory in %s: %s", l->p.tmpdir,
                strerror(-rc));
        return rc;
    }
    LOG_WARN("CODESHIM_UNSAFE_NO_ISOLATION is set: model-written code "
             "runs WITHOUT isolation, as this user, in %s",
             l->root);
    return 0;
}

/* (Re)creates root/{data,home,tmp}; a root that is no longer our own
 * directory is refused. */
int shim_local_refresh_root(const struct shim_local *l)
{
    static const char *const subs[] = {"data", "home", "tmp"};
    char p[SHIM_PATH_MAX];
    struct stat st;
    size_t i;

    if (mkdir(l->root, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (lstat(l->root, &st) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return -EEXIST;
    chmod(l->root, 0700);
    for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (shim_fileio_join(p, sizeof(p), l->root, subs[i]))
            return -ENAMETOOLONG;
        if (mkdir(p, 0700) == 0)
            chmod(p, 0700);
        else if (errno != EEXIST)
            return -errno;
    }
    return 0;
}
