/* fileio.h - paths and small files, the one home of each: joining two
 * parts of a path, and reading a file under a cap (EINTR retried, never
 * more than the caller's buffer). Base layer: no knowledge of what the
 * files hold. */
#ifndef SHIM_FILEIO_H
#define SHIM_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* out = a "/" b; -ENAMETOOLONG (out empty) when it does not fit in n. */
int shim_fileio_join(char *out, size_t n, const char *a, const char *b);
/* Reads fd until its end or cap bytes into buf (EINTR retried): the
 * count, or -errno. */
ssize_t shim_fileio_read_fd(int fd, void *buf, size_t cap);
/* The file at path (opened O_RDONLY | O_CLOEXEC | oflags, e.g.
 * O_NOFOLLOW) into out, at most n - 1 bytes and a NUL: its length;
 * -EFBIG when it holds more (out then keeps the first n - 1 bytes);
 * -errno. The bytes may hold NULs. */
ssize_t shim_fileio_read(const char *path, int oflags, char *out, size_t n);

#endif
