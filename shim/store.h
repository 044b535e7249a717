/* store.h - codeshim's private runtime directory, shared by sessions
 * (session.c) and conversation continuity (chain.c).
 *
 * Everything lives under the runtime directory, per identity:
 * <runtime>/<identity>/, where identity is a hash of the program's API
 * key (session.h). Directories must be real directories owned by this
 * user with mode 0700, else the store is refused; names are hashes; files
 * are written atomically with mode 0600 and read with a size cap.
 *
 * The runtime directory is cfg->runtime_dir. When that is a default (not
 * CODESHIM_RUNTIME_DIR) and someone else holds the path (another owner,
 * other permissions, not a directory), the first of its numbered siblings
 * <dir>.1, <dir>.2, ... that is private to this user is used instead,
 * created if missing: the same one in every run, so sessions survive; the
 * log says so once per process. */
#ifndef SHIM_STORE_H
#define SHIM_STORE_H

#include <stddef.h>

struct shim_config;

/* out = a "/" b; -ENAMETOOLONG (out empty) when it does not fit. */
int shim_store_join(char *out, size_t n, const char *a, const char *b);
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
/* <runtime>/sub, created private (shared by all identities of this user:
 * its entries must say whose they are). 0 or -errno. */
int shim_store_root(const struct shim_config *cfg, const char *sub, char *out, size_t n);

#endif
