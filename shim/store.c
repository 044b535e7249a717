/* store.c - see store.h. */
#include "store.h"

#include "config.h"
#include "log.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIBLINGS 16 /* <runtime>.1 ... .16 */

int shim_store_join(char *out, size_t n, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    if (la + 1 + lb + 1 > n) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

void shim_store_hash(const char *tag, const char *a, const char *b, char out[65])
{
    struct shim_sha256 s;

    shim_sha256_init(&s);
    shim_sha256_update(&s, tag, strlen(tag) + 1);
    shim_sha256_update(&s, a, strlen(a) + 1);
    if (b)
        shim_sha256_update(&s, b, strlen(b));
    shim_sha256_final_hex(&s, 16, out);
}

/* 0 when path is (now) a real directory of this user with mode 0700;
 * -EPERM when it is something else (described by *st), or -errno. */
static int check_private(const char *path, struct stat *st)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return -errno;
    if (lstat(path, st) < 0)
        return -errno;
    if (!S_ISDIR(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & 077))
        return -EPERM;
    return 0;
}

int shim_store_private_dir(const char *path)
{
    struct stat st;
    int rc = check_private(path, &st);

    if (rc == -EPERM)
        LOG_WARN("%s is not a private directory of this user (mode %o, owner %ld): "
                 "sessions and continuity are off", path, (unsigned)(st.st_mode & 07777),
                 (long)st.st_uid);
    return rc;
}

/* Says once per process which sibling replaces a taken runtime directory. */
static void tell_moved(const char *base, const struct stat *st, const char *used)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char told[SHIM_PATH_MAX];

    pthread_mutex_lock(&mu);
    if (strcmp(told, used)) {
        snprintf(told, sizeof(told), "%s", used);
        LOG_WARN("%s is not a private directory of this user (mode %o, owner %ld): "
                 "using %s for sessions and continuity instead", base,
                 (unsigned)(st->st_mode & 07777), (long)st->st_uid, used);
    }
    pthread_mutex_unlock(&mu);
}

/* The runtime directory in use (store.h), checked; out holds n bytes. */
static int runtime_root(const struct shim_config *cfg, char *out, size_t n)
{
    struct stat st, sib;
    int rc, i;

    if ((size_t)snprintf(out, n, "%s", cfg->runtime_dir) >= n)
        return -ENAMETOOLONG;
    rc = check_private(out, &st);
    if (rc != -EPERM)
        return rc;
    if (!cfg->runtime_dir_default)
        return shim_store_private_dir(out); /* the user's choice: refused, loudly */
    for (i = 1; i <= SIBLINGS; i++) {
        if ((size_t)snprintf(out, n, "%s.%d", cfg->runtime_dir, i) >= n)
            break;
        if (check_private(out, &sib) == 0) {
            tell_moved(cfg->runtime_dir, &st, out);
            return 0;
        }
    }
    LOG_WARN("%s and its siblings %s.1 to .%d are not private directories of this user: "
             "sessions and continuity are off", cfg->runtime_dir, cfg->runtime_dir, SIBLINGS);
    out[0] = '\0';
    return -EPERM;
}

int shim_store_identity_dir(const struct shim_config *cfg, const char *identity,
                            char *out, size_t n)
{
    return shim_store_root(cfg, identity, out, n);
}

int shim_store_read(const char *path, char *out, size_t n, int first_line)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    size_t got = 0;
    ssize_t k;

    if (fd < 0)
        return -errno;
    while (got < n - 1 && (k = read(fd, out + got, n - 1 - got)) > 0)
        got += (size_t)k;
    if (got == n - 1) {
        char extra;
        if (read(fd, &extra, 1) == 1) { /* larger than the caller allows */
            close(fd);
            return -EFBIG;
        }
    }
    close(fd);
    if (!got)
        return -EIO;
    out[got] = '\0';
    if (first_line)
        out[strcspn(out, "\n")] = '\0';
    return 0;
}

int shim_store_write_bytes(const char *path, const void *data, size_t n)
{
    char tmp[SHIM_PATH_MAX + 48];
    static unsigned long counter;
    const char *p = data;
    size_t done = 0;
    int fd, rc = 0;

    if (strlen(path) > SHIM_PATH_MAX)
        return -ENAMETOOLONG;
    snprintf(tmp, sizeof(tmp), "%.4096s.%ld.%lu", path, (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (!rc && done < n) {
        ssize_t k = write(fd, p + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            rc = k < 0 && errno == ENOSPC ? -ENOSPC : -EIO;
        else
            done += (size_t)k;
    }
    if (close(fd) < 0 && !rc)
        rc = -EIO;
    if (!rc && rename(tmp, path) < 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

int shim_store_write(const char *path, const char *text)
{
    return shim_store_write_bytes(path, text, strlen(text));
}

int shim_store_read_all(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    size_t got = 0;
    char *buf;

    *out = NULL;
    *len = 0;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
        int rc = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
        close(fd);
        return rc;
    }
    buf = malloc((size_t)st.st_size + 1);
    while (buf && got < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (!buf)
        return -ENOMEM;
    if (got != (size_t)st.st_size) {
        free(buf);
        return -EIO;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

int shim_store_root(const struct shim_config *cfg, const char *sub, char *out, size_t n)
{
    char root[SHIM_PATH_MAX];
    int rc;

    if ((rc = runtime_root(cfg, root, sizeof(root))) < 0)
        return rc;
    if ((rc = shim_store_join(out, n, root, sub)) < 0)
        return rc;
    return shim_store_private_dir(out);
}
