/* reach.c - see reach.h. Reads an ELF header and the program headers
 * (at most 4096 of them) of the resolved file, and its mode. */
#include "reach.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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

/* An n-byte (2, 4 or 8) field of this machine's byte order at p. */
static unsigned long long field(const unsigned char *p, size_t n)
{
    uint16_t v2;
    uint32_t v4;
    uint64_t v8;

    if (n == 2) {
        memcpy(&v2, p, 2);
        return v2;
    }
    if (n == 4) {
        memcpy(&v4, p, 4);
        return v4;
    }
    memcpy(&v8, p, 8);
    return v8;
}

/* 1: an ELF executable of this machine's byte order without PT_INTERP;
 * 0: one with it, or not ELF, or unreadable. The header's fields are read
 * at their offsets in either class (elf(5)); p_type opens every program
 * header of both. */
static int elf_static(int fd)
{
    unsigned char eh[64], pt[4];
    unsigned long long phoff, phnum, phentsize, i;
    int is64;

    if (pread(fd, eh, sizeof(eh), 0) < 52 || memcmp(eh, ELFMAG, SELFMAG))
        return 0;
    is64 = eh[EI_CLASS] == ELFCLASS64;
    if ((!is64 && eh[EI_CLASS] != ELFCLASS32) ||
        eh[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
        return 0;
    phoff = is64 ? field(eh + 32, 8) : field(eh + 28, 4);
    phentsize = field(eh + (is64 ? 54 : 42), 2);
    phnum = field(eh + (is64 ? 56 : 44), 2);
    i = field(eh + 16, 2); /* e_type */
    if ((i != ET_EXEC && i != ET_DYN) || phnum == 0 || phnum > 4096 ||
        phentsize < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
        return 0;
    for (i = 0; i < phnum; i++) {
        if (pread(fd, pt, sizeof(pt), (off_t)(phoff + i * phentsize)) != (ssize_t)sizeof(pt))
            return 0;
        if (field(pt, 4) == PT_INTERP)
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
