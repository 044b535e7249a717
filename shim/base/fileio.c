/* fileio.c - see fileio.h. */
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int shim_fileio_join(char *out, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    if (!n)
        return -ENAMETOOLONG;
    if (la + 1 + lb + 1 > n) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

ssize_t shim_fileio_read_fd(int fd, void *buf, size_t cap)
{
    char *p = buf;
    size_t got = 0;

    while (got < cap) {
        ssize_t k = read(fd, p + got, cap - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

ssize_t shim_fileio_read(const char *path, int oflags, char *out, size_t n)
{
    int fd;
    ssize_t got;
    char extra;

    if (!n)
        return -EINVAL;
    out[0] = '\0';
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | oflags)) < 0)
        return -errno;
    got = shim_fileio_read_fd(fd, out, n - 1);
    /* one byte more tells a file that fits from one that does not */
    if (got == (ssize_t)(n - 1) && shim_fileio_read_fd(fd, &extra, 1) == 1)
        got = -EFBIG;
    close(fd);
    if (got >= 0)
        out[got] = '\0';
    else if (got == -EFBIG)
        out[n - 1] = '\0';
    return got;
}
