/* cgroup_fs.c - the files of the cgroup filesystems, for cgroup.c,
 * cgroup_v1.c and cgroup_v2.c: small reads and writes, where this
 * process's cgroup of a hierarchy is (/proc/self/cgroup and mountinfo),
 * whether another process is in a cgroup, whether the machine has swap.
 * See cgroup_int.h. */
#include "base/fileio.h"
#include "sandbox/local/cgroup_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Up to outsz-1 bytes of a small file, NUL-terminated (a longer one
 * cut); length or -errno. */
ssize_t shim_cgroup_fs_read(const char *path, char *out, size_t outsz)
{
    ssize_t n = shim_fileio_read(path, 0, out, outsz);

    return n == -EFBIG ? (ssize_t)(outsz - 1) : n;
}

int shim_cgroup_fs_write(const char *dir, const char *name,
                         const char *text)
{
    char path[SHIM_CG_PATH + 64];
    size_t len = strlen(text);
    ssize_t w;
    int fd, rc = 0;

    if (shim_fileio_join(path, sizeof(path), dir, name))
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    do
        w = write(fd, text, len);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len)
        rc = w < 0 ? -errno : -EIO;
    close(fd);
    return rc;
}

int shim_cgroup_fs_has(const char *dir, const char *name)
{
    char path[SHIM_CG_PATH + 64];

    return shim_fileio_join(path, sizeof(path), dir, name) == 0 &&
           access(path, F_OK) == 0;
}

/* Is word one of the sep-separated items of list? */
int shim_cgroup_fs_has_word(const char *list, const char *word, char sep)
{
    size_t n = strlen(word);
    const char *p = list;

    while (p && *p) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);

        while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == ' '))
            len--;
        if (len == n && !strncmp(p, word, n))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* This process's cgroup path in the v1 hierarchy of ctl, or in v2
 * (ctl NULL), from /proc/self/cgroup. */
static int own_path(const char *ctl, char *out, size_t outsz)
{
    char buf[CG_LINE * 4], *line, *save = NULL;

    if (shim_cgroup_fs_read("/proc/self/cgroup", buf, sizeof(buf)) < 0)
        return -ENOENT;
    for (line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

        if (!c2)
            continue;
        *c2 = '\0';
        if (ctl ? !shim_cgroup_fs_has_word(c1 + 1, ctl, ',')
                : !(c1 == line + 1 && line[0] == '0' && c1[1] == '\0'))
            continue;
        if (snprintf(out, outsz, "%s", c2 + 1) >= (int)outsz)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

/* The mountinfo fields we use, split in place; 0 or -EINVAL. */
struct mnt {
    char *root, *point, *fstype, *opts;
};

static int split_mount(char *line, struct mnt *m)
{
    char *f[8] = {0}, *tok, *save = NULL;
    int i = 0, dash = 0;

    memset(m, 0, sizeof(*m));
    for (tok = strtok_r(line, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        if (!dash && !strcmp(tok, "-")) {
            dash = 1;
            i = 5;
            continue;
        }
        if (i < 5)
            f[i] = tok;
        else if (dash && i < 8)
            f[i] = tok;
        i++;
    }
    if (!dash || !f[3] || !f[4] || !f[5] || !f[7])
        return -EINVAL;
    /* escaped blanks (\040) in a path: not worth decoding */
    if (strchr(f[3], '\\') || strchr(f[4], '\\'))
        return -EINVAL;
    m->root = f[3];
    m->point = f[4];
    m->fstype = f[5];
    m->opts = f[7];
    return 0;
}

/* The directory of cgroup path in the mount m of its hierarchy: the
 * mount point plus path below the mount's root. */
static int dir_in_mount(const struct mnt *m, const char *path, char *out,
                        size_t outsz)
{
    size_t rl = strlen(m->root);
    const char *rest;

    if (!strcmp(m->root, "/"))
        rest = path;
    else if (!strncmp(path, m->root, rl) && (path[rl] == '/' || !path[rl]))
        rest = path + rl;
    else
        return -ENOENT;
    if (!strcmp(rest, "/"))
        rest = "";
    if (snprintf(out, outsz, "%s%s", m->point, rest) >= (int)outsz)
        return -ENAMETOOLONG;
    return 0;
}

/* The directory of this process's cgroup in the hierarchy of ctl (v1)
 * or v2 (ctl NULL); rel gets the path /proc/<pid>/cgroup shows. */
int shim_cgroup_fs_find_dir(const char *ctl, char *dir, char *rel,
                            size_t sz)
{
    char line[CG_LINE];
    FILE *f;
    int rc = -ENOENT;

    if (own_path(ctl, rel, sz) != 0)
        return -ENOENT;
    f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    while (rc != 0 && fgets(line, sizeof(line), f)) {
        struct mnt m;

        if (!strchr(line, '\n')) { /* too long: skip the rest of it */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
        if (split_mount(line, &m) != 0)
            continue;
        if (ctl ? strcmp(m.fstype, "cgroup") ||
                      !shim_cgroup_fs_has_word(m.opts, ctl, ',')
                : strcmp(m.fstype, "cgroup2") != 0)
            continue;
        rc = dir_in_mount(&m, rel, dir, sz);
    }
    fclose(f);
    return rc;
}

/* Adds "what: why" to in->why. */
void shim_cgroup_fs_note(struct shim_cgroup_info *in, const char *what,
                         const char *why)
{
    size_t n = strlen(in->why);

    if (n + 3 < sizeof(in->why))
        snprintf(in->why + n, sizeof(in->why) - n, "%s%s: %s", n ? "; " : "",
                 what, why);
}

/* Is there no swap area at all? */
int shim_cgroup_fs_no_swap(void)
{
    char buf[256];

    /* /proc/swaps: a header line, then one line per swap area */
    return shim_cgroup_fs_read("/proc/swaps", buf, sizeof(buf)) >= 0 &&
           strchr(buf, '\n') && !strchr(buf, '\n')[1];
}

/* Is pid in cgroup rel (as /proc/<pid>/cgroup says)? */
int shim_cgroup_fs_member(long pid, const char *rel, int version,
                          const char *ctl)
{
    char path[64], buf[CG_LINE], *line, *save = NULL;

    snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
    if (shim_cgroup_fs_read(path, buf, sizeof(buf)) < 0)
        return 0;
    for (line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

        if (!c2)
            continue;
        *c2 = '\0';
        if (version == 2 ? (c1 != line + 1 || line[0] != '0')
                         : !shim_cgroup_fs_has_word(c1 + 1, ctl, ','))
            continue;
        return !strcmp(c2 + 1, rel);
    }
    return 0;
}
