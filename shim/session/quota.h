/* quota.h - what one user's processes may hold together, whatever API
 * keys they send. A key is only what the program sends (codeshim never
 * verifies it), so the per-key limits (CODESHIM_SESSION_CAP,
 * CODESHIM_FILES_DISK) alone would let invented keys multiply them; these
 * totals count every identity of the runtime directory, i.e. of the user:
 *   CODESHIM_USER_SESSIONS  live sessions (supervisors)
 *   CODESHIM_USER_FILES_DISK container file bytes (cstore.c counts those)
 * (The user's sandbox host is one per user and settings: nothing to cap.)
 * Counting happens under the user's lock (<runtime>/.lock, store.h), and a
 * session being started counts from the moment its directory is made, so
 * processes racing each other never pass a cap together. */
#ifndef SHIM_QUOTA_H
#define SHIM_QUOTA_H

struct shim_config;

/* Whether one more session (the directory self, already made) fits.
 * Takes the user's lock for the count. 0, or -EUSERS with
 * shim_store_why() saying why, or -errno. */
int shim_quota_session(const struct shim_config *cfg, const char *self);

#endif
