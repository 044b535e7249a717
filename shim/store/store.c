/* store.c - see store.h. */
#include "store/store.h"

#include "base/fileio.h"
#include "base/log.h"
#include "base/sha256.h"
#include "system/config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void shim_store_hash(const char *tag, const char *a, const char *b, char out[65])
{
    const char *parts[] = {a, b};

    shim_sha256_tagged_hex(tag, parts, b ? 2 : 1, 16, out);
}

static __thread char why_text[640];

const char *shim_store_why(void)
{
    return why_text[0] ? why_text : "codeshim's private runtime directory is not usable";
}

void shim_store_set_why(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why_text, sizeof(why_text), fmt, ap);
    va_end(ap);
}

/* Logs a refusal once per process and path (every request would repeat it). */
static void tell_once(const char *path)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char told[SHIM_PATH_MAX];

    pthread_mutex_lock(&mu);
    if (strcmp(told, path)) {
        snprintf(told, sizeof(told), "%s", path);
        LOG_WARN("%s", shim_store_why());
    }
    pthread_mutex_unlock(&mu);
}

/* The refusals' words: what needs the directory, and the way out. */
#define NEED "codeshim needs a private runtime directory for sessions, continuations " \
             "(previous_response_id) and the Containers API, and "
#define FIX "; set CODESHIM_RUNTIME_DIR to a directory only this user can write"

static int cannot_make(const char *path, int rc)
{
    shim_store_set_why(NEED "cannot make %.300s: %s" FIX, path, strerror(-rc));
    return rc;
}

/* 0 when path is (now) a real directory of this user with mode 0700;
 * -EPERM when it is something else (the reason in shim_store_why), or
 * -errno. */
static int check_private(const char *path)
{
    struct stat st;

    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return cannot_make(path, -errno);
    if (lstat(path, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        shim_store_set_why(NEED "%.300s is not one (%s, owner %ld, mode %o)" FIX, path,
                           S_ISDIR(st.st_mode) ? "a directory" : "not a directory",
                           (long)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

int shim_store_private_dir(const char *path)
{
    int rc = check_private(path);

    if (rc < 0)
        tell_once(path);
    return rc;
}

/* The ancestors of a default runtime directory (store.h): each made 0700
 * when missing, and each owned by this user or root and writable by no
 * one else unless sticky, so no other user can swap what is below. */
static int safe_parents(const char *path)
{
    char p[SHIM_PATH_MAX];
    struct stat st;
    char *s;

    snprintf(p, sizeof(p), "%s", path);
    for (s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (stat(p, &st) < 0 && (errno != ENOENT || mkdir(p, 0700) < 0 || stat(p, &st) < 0))
            return cannot_make(p, -errno);
        if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
            ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
            shim_store_set_why(NEED "%.300s, above its default %.300s, is not safe (owner %ld, "
                               "mode %o)" FIX, p, path, (long)st.st_uid,
                               (unsigned)(st.st_mode & 07777));
            return -EPERM;
        }
        *s = '/';
    }
    return 0;
}

int shim_store_runtime(const struct shim_config *cfg, char *out, size_t n)
{
    int rc;

    if (!cfg->runtime_dir[0]) {
        shim_store_set_why(NEED "this user has no home directory to keep it in" FIX);
        tell_once("");
        return -EPERM;
    }
    if ((size_t)snprintf(out, n, "%s", cfg->runtime_dir) >= n)
        return -ENAMETOOLONG;
    rc = cfg->runtime_dir_default ? safe_parents(out) : 0;
    if (rc == 0)
        rc = check_private(out);
    if (rc < 0) {
        tell_once(out);
        out[0] = '\0';
    }
    return rc < 0 ? -EPERM : 0; /* whatever the cause, a refusal (the why says which) */
}

int shim_store_lock(const char *dir, int wait_ms)
{
    char p[SHIM_PATH_MAX + 8];
    int fd, waited = 0;

    if (shim_fileio_join(p, sizeof(p), dir, ".lock") < 0)
        return -ENAMETOOLONG;
    fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        struct timespec ts = {0, 10 * 1000000};
        if (errno != EWOULDBLOCK || (waited += 10) > wait_ms) {
            close(fd);
            return -ETIMEDOUT;
        }
        nanosleep(&ts, NULL);
    }
    return fd;
}

int shim_store_user_lock(const struct shim_config *cfg, int wait_ms)
{
    char root[SHIM_PATH_MAX];
    int rc = shim_store_runtime(cfg, root, sizeof(root));

    return rc < 0 ? rc : shim_store_lock(root, wait_ms);
}

int shim_store_mark(const char *dir, const char *name, struct shim_store_own *own)
{
    char p[SHIM_PATH_MAX + 16];
    struct stat st;

    memset(own, 0, sizeof(*own));
    if (shim_fileio_join(p, sizeof(p), dir, name) < 0)
        return -ENAMETOOLONG;
    if (lstat(p, &st) < 0)
        return -errno;
    own->dev = st.st_dev;
    own->ino = st.st_ino;
    own->ctime = st.st_ctim;
    own->set = 1;
    return 0;
}

int shim_store_is_own(const char *dir, const char *name, const struct shim_store_own *own)
{
    char p[SHIM_PATH_MAX + 16];
    struct stat st;

    return own->set && shim_fileio_join(p, sizeof(p), dir, name) == 0 && lstat(p, &st) == 0 &&
           st.st_dev == own->dev && st.st_ino == own->ino &&
           st.st_ctim.tv_sec == own->ctime.tv_sec && st.st_ctim.tv_nsec == own->ctime.tv_nsec;
}

int shim_store_unlink_own(const char *dir, const char *name, const struct shim_store_own *own)
{
    char p[SHIM_PATH_MAX + 16];

    if (!shim_store_is_own(dir, name, own))
        return -ESTALE;
    if (shim_fileio_join(p, sizeof(p), dir, name) < 0 || unlink(p) < 0)
        return -errno;
    return 0;
}

int shim_store_identity_dir(const struct shim_config *cfg, const char *identity,
                            char *out, size_t n)
{
    return shim_store_root(cfg, identity, out, n);
}

int shim_store_read(const char *path, char *out, size_t n, int first_line)
{
    ssize_t got = shim_fileio_read(path, O_NOFOLLOW, out, n);

    if (got < 0)
        return (int)got;
    if (!got)
        return -EIO;
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
    size_t got;
    ssize_t k;
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
    k = buf ? shim_fileio_read_fd(fd, buf, (size_t)st.st_size) : 0;
    got = k > 0 ? (size_t)k : 0;
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

    if ((rc = shim_store_runtime(cfg, root, sizeof(root))) < 0)
        return rc;
    if ((rc = shim_fileio_join(out, n, root, sub)) < 0)
        return rc;
    return shim_store_private_dir(out);
}
