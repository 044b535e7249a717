/* quota.c - see quota.h. The layout counted is session.h's:
 *   <runtime>/<identity>/<32 hex>/   a session (sock once it listens)
 * beside <runtime>/containers/ (cstore.h) and <runtime>/hosts/ (the
 * user's sandbox hosts), which hold none. */
#include "session/quota.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "session/proto.h"
#include "session/session.h"
#include "store/store.h"
#include "system/config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_WAIT_MS 30000
#define STARTING_S 120 /* a directory without a socket yet: being started */

/* 1 when dir holds a live process (its socket answers) or one being
 * started (made lately, no socket yet); a dead one's stale socket counts
 * for nothing. */
static int holds(const char *dir)
{
    char p[SHIM_PATH_MAX + 8];
    struct stat st;
    int fd;

    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        shim_fileio_join(p, sizeof(p), dir, "sock") < 0)
        return 0;
    if (lstat(p, &st) < 0)
        return lstat(dir, &st) == 0 && shim_clock_wall_s() - st.st_mtime < STARTING_S;
    fd = shim_proto_socket(dir, 0);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

/* Counts what holds() in each directory of parent (hex names only when
 * hex), but skip. */
static int count_in(const char *parent, int hex, const char *skip)
{
    char p[SHIM_PATH_MAX];
    struct dirent *e;
    DIR *d = opendir(parent);
    int n = 0;

    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (hex && !shim_session_is_name(e->d_name)) ||
            shim_fileio_join(p, sizeof(p), parent, e->d_name) < 0 || (skip && !strcmp(p, skip)))
            continue;
        n += holds(p);
    }
    if (d)
        closedir(d);
    return n;
}

/* Every identity's live sessions but self. */
static int count(const char *root, const char *self)
{
    char id[SHIM_PATH_MAX];
    struct dirent *e;
    DIR *d = opendir(root);
    int sessions = 0;

    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "containers") || /* cstore.c's */
            !strcmp(e->d_name, "hosts") || /* the user's sandbox hosts */
            shim_fileio_join(id, sizeof(id), root, e->d_name) < 0 ||
            lstat(id, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        sessions += count_in(id, 1, self);
    }
    if (d)
        closedir(d);
    return sessions;
}

int shim_quota_session(const struct shim_config *cfg, const char *self)
{
    char root[SHIM_PATH_MAX];
    int lock, sessions, rc = 0;

    if ((rc = shim_store_runtime(cfg, root, sizeof(root))) < 0)
        return rc;
    if ((lock = shim_store_lock(root, LOCK_WAIT_MS)) < 0)
        return lock;
    sessions = count(root, self);
    close(lock);
    if (sessions >= cfg->user_sessions) {
        shim_store_set_why("codeshim: this user's programs already hold %d live sessions, as "
                           "many as CODESHIM_USER_SESSIONS allows across all API keys; a new "
                           "one can start when one ends (idle for CODESHIM_SESSION_TTL, or "
                           "`codeshim sessions stop`)", sessions);
        rc = -EUSERS;
    }
    return rc;
}
