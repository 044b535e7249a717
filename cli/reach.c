/* reach.c - see reach.h. Reads an ELF header and the program headers
 * (at most 4096 of them) of the resolved file, and its mode. */
#include "reach.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

int cli_reach_resolve(const char *prog, const char *path_env, char *out, size_t outsz)
{
    const char *dir, *end;
    struct stat st;

    if (strchr(prog, '/')) {
        if ((size_t)snprintf(out, outsz, "%s", prog) >= outsz)
            return -ENAMETOOLONG;
        return 0;
    }
    for (dir = path_env ? path_env : "/usr/bin:/bin";; dir = end + 1) {
        size_t n;
        end = strchr(dir, ':');
        n = end ? (size_t)(end - dir) : strlen(dir);
        /* an empty entry is the working directory, as for execvp */
        if ((size_t)snprintf(out, outsz, "%.*s%s%s", (int)n, n ? dir : ".", "/", prog) < outsz &&
            stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        if (!end)
            break;
    }
    return -ENOENT;
}

/* 1: an ELF executable of this machine's byte order without PT_INTERP;
 * 0: one with it, or not ELF, or unreadable. */
static int elf_static(int fd)
{
    unsigned char id[EI_NIDENT];
    unsigned long long phoff;
    unsigned phnum, phentsize, type, i;
    int is64;

    if (pread(fd, id, sizeof(id), 0) != (ssize_t)sizeof(id) || memcmp(id, ELFMAG, SELFMAG))
        return 0;
    is64 = id[EI_CLASS] == ELFCLASS64;
    if ((!is64 && id[EI_CLASS] != ELFCLASS32) ||
        id[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
        return 0;
    if (is64) {
        Elf64_Ehdr eh;
        if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh))
            return 0;
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize, type = eh.e_type;
        if (phentsize < sizeof(Elf64_Phdr))
            return 0;
    } else {
        Elf32_Ehdr eh;
        if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh))
            return 0;
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize, type = eh.e_type;
        if (phentsize < sizeof(Elf32_Phdr))
            return 0;
    }
    if ((type != ET_EXEC && type != ET_DYN) || phnum == 0 || phnum > 4096)
        return 0;
    for (i = 0; i < phnum; i++) {
        off_t at = (off_t)(phoff + (unsigned long long)i * phentsize);
        unsigned pt;
        if (is64) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof(ph), at) != (ssize_t)sizeof(ph))
                return 0;
            pt = ph.p_type;
        } else {
            Elf32_Phdr ph;
            if (pread(fd, &ph, sizeof(ph), at) != (ssize_t)sizeof(ph))
                return 0;
            pt = ph.p_type;
        }
        if (pt == PT_INTERP)
            return 0;
    }
    return 1;
}

/* The secure-mode causes the kernel would apply to the file at path. */
static enum cli_reach secure_mode(const char *path, const struct stat *st)
{
    struct statvfs vfs;

    if (statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_NOSUID))
        return CLI_REACH_OK; /* the kernel ignores the bits and capabilities there */
    if ((st->st_mode & S_ISUID) && st->st_uid != geteuid())
        return CLI_REACH_SETUID;
    if ((st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP) && st->st_gid != getegid())
        return CLI_REACH_SETGID;
    if (getxattr(path, "security.capability", NULL, 0) > 0)
        return CLI_REACH_CAPS;
    return CLI_REACH_OK;
}

enum cli_reach cli_reach_check(const char *path, char *judged, size_t judgedsz)
{
    char head[256];
    struct stat st;
    ssize_t n;
    int fd, depth;
    enum cli_reach r = CLI_REACH_OK;

    snprintf(judged, judgedsz, "%s", path);
    for (depth = 0; depth < 2; depth++) { /* the file, then a script's interpreter */
        fd = open(judged, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return CLI_REACH_OK;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return CLI_REACH_OK;
        }
        n = pread(fd, head, sizeof(head) - 1, 0);
        if (n >= 2 && head[0] == '#' && head[1] == '!' && depth == 0) {
            char *p = head + 2, *e;
            close(fd);
            head[n] = '\0';
            p += strspn(p, " \t");
            e = p + strcspn(p, " \t\n");
            *e = '\0';
            if (*p != '/' || (size_t)snprintf(judged, judgedsz, "%s", p) >= judgedsz)
                return CLI_REACH_OK;
            continue; /* the kernel ignores a script's own setuid bit */
        }
        r = elf_static(fd) ? CLI_REACH_STATIC : secure_mode(judged, &st);
        close(fd);
        break;
    }
    return r;
}

const char *cli_reach_text(enum cli_reach r)
{
    switch (r) {
    case CLI_REACH_STATIC:
        return "is statically linked (no program interpreter): LD_PRELOAD cannot reach it";
    case CLI_REACH_SETUID:
        return "is setuid: the dynamic loader ignores LD_PRELOAD for it";
    case CLI_REACH_SETGID:
        return "is setgid: the dynamic loader ignores LD_PRELOAD for it";
    case CLI_REACH_CAPS:
        return "has file capabilities: the dynamic loader ignores LD_PRELOAD for it";
    case CLI_REACH_OK:
    default:
        return "can be preloaded";
    }
}
