/* store.h - codeshim's private runtime directory, shared by sessions
 * (session/) and conversation continuity (chain.c).
 *
 * Everything lives under the runtime directory, per identity:
 * <runtime>/<identity>/, where identity is a hash of the program's API
 * key (session.h). Directories must be real directories owned by this
 * user with mode 0700, else the store is refused; names are hashes; files
 * are written atomically with mode 0600 and read with a size cap.
 *
 * The runtime directory is cfg->runtime_dir (config.h; by default one no
 * other user can take: /run/codeshim for root, $XDG_RUNTIME_DIR/codeshim,
 * else codeshim/run in the user's cache directory, whose missing parents
 * are made here and must be this user's or root's and writable by no one
 * else). One that is not private is refused, never replaced by another:
 * what needs it fails, and shim_store_why() says why in words fit for an
 * error answer (the log says it once per process). It is also the unit of
 * the per-user caps (quota.h): its .lock serialises their counting. */
#ifndef SHIM_STORE_H
#define SHIM_STORE_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct shim_config;

/* 32 hex digits of SHA-256 over tag, a and b (NUL-separated). */
void shim_store_hash(const char *tag, const char *a, const char *b, char out[65]);
/* Creates path 0700 if needed; 0 only if it is private to this user
 * (-EPERM, and a warning, if it is not). */
int shim_store_private_dir(const char *path);
/* The directory of an identity (identity.h), created and
 * checked. 0 or -errno. */
int shim_store_identity_dir(const struct shim_config *cfg, const char *identity,
                            char *out, size_t n);
/* Whole small file into out (NUL-terminated, first line only when
 * first_line); 0 or -errno (-EFBIG past n-1 bytes). */
int shim_store_read(const char *path, char *out, size_t n, int first_line);
/* Writes text to path atomically (0600). 0 or -errno. */
int shim_store_write(const char *path, const char *text);
/* The same for bytes (-ENOSPC when the disk is full; nothing is left). */
int shim_store_write_bytes(const char *path, const void *data, size_t n);
/* A whole regular file of at most max bytes into a new buffer (*out,
 * NUL-terminated; caller frees). 0, -EFBIG, or -errno. */
int shim_store_read_all(const char *path, size_t max, char **out, size_t *len);
/* The runtime directory, checked (and made, with its parents for a
 * default) into out. 0, or -EPERM when it cannot be had (shim_store_why()
 * says why). */
int shim_store_runtime(const struct shim_config *cfg, char *out, size_t n);
/* Why the last refusal in this thread (a store that is not private, a
 * per-user cap reached) happened: one sentence, no secrets. */
const char *shim_store_why(void);
void shim_store_set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* dir/.lock taken (flock): the locked descriptor (closing it unlocks), or
 * -ETIMEDOUT after wait_ms (0: one try), or -errno. */
int shim_store_lock(const char *dir, int wait_ms);
/* The same for the runtime directory: the user's lock (quota.h). */
int shim_store_user_lock(const struct shim_config *cfg, int wait_ms);

/* Which file a process made (device, inode and change time: a freed
 * inode's number is soon another file's), so that at its end it removes
 * only that one, never a successor's of the same name. */
struct shim_store_own {
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
    int set;
};
/* Notes dir/name as it is now. 0 or -errno. */
int shim_store_mark(const char *dir, const char *name, struct shim_store_own *own);
/* 1 when dir/name is still the file own noted. */
int shim_store_is_own(const char *dir, const char *name, const struct shim_store_own *own);
/* Unlinks dir/name only if it is that file: 0, -ESTALE (another's), or -errno. */
int shim_store_unlink_own(const char *dir, const char *name, const struct shim_store_own *own);
/* <runtime>/sub, created private (shared by all identities of this user:
 * its entries must say whose they are). 0 or -errno. */
int shim_store_root(const struct shim_config *cfg, const char *sub, char *out, size_t n);

#endif
