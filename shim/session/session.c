/* session.c - see session.h; the base the other session files stand on
 * (session_int.h lists them): the names (a session's, the settings', the
 * container map's entries), the runtime directory's layout and what lives
 * in it (a session's directory, its supervisor's socket, the marks of
 * deleted containers), asking a supervisor to end, the identity's lock,
 * the notes that tell the model its earlier sandbox is gone, and the
 * small accessors. A process is started only by session_host.c (the
 * user's sandbox host, codeshim-sessiond, which starts each supervisor,
 * or a supervisor alone); the sandbox itself is sandbox/'s business. */
#include "session/session.h"
#include "session/session_int.h"

#include "base/fileio.h"
#include "base/json.h"
#include "base/sha256.h"
#include "session/proto.h"
#include "store/store.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* e2b's settings, the key only as a hash ("" for other backends). */
static void e2b_settings(const struct shim_config *cfg, char *out, size_t n)
{
    char key[65];

    out[0] = '\0';
    if (strcmp(cfg->sandbox, "e2b"))
        return;
    shim_sha256_hex(cfg->e2b_api_key, strlen(cfg->e2b_api_key), key);
    snprintf(out, n, "%s\n%s\n%s\n%s\n%d\n%s", cfg->e2b_api_url, cfg->e2b_domain,
             cfg->e2b_sandbox_url, cfg->e2b_template, cfg->e2b_internet != 0, key);
}

void shim_session_settings(const struct shim_config *cfg, char out[65])
{
    char nums[256], e2b[2600];
    const char *parts[5] = {cfg->sandbox, nums, cfg->python, cfg->bwrap, e2b};

    snprintf(nums, sizeof(nums), "unsafe=%d memory=%llu procs=%d disk=%llu fsize=%llu "
             "cpu=%d timeout=%d output=%zu inodes=%llu files=%d", cfg->unsafe_no_isolation != 0,
             cfg->memory_limit, cfg->procs_limit, cfg->disk_limit, cfg->file_size_limit,
             cfg->cpu_time_s, cfg->exec_timeout_s, cfg->output_cap,
             (unsigned long long)cfg->inodes_limit, cfg->open_files_limit);
    e2b_settings(cfg, e2b, sizeof(e2b));
    shim_sha256_tagged_hex("codeshim-settings-v1", parts, e2b[0] ? 5 : 4, 16, out);
}

void shim_session_name(const char *identity, const char *session_id, const char *settings,
                       char out[65])
{
    const char *parts[3] = {identity, settings, session_id};

    shim_sha256_tagged_hex("codeshim-session-v2", parts, 3, 16, out);
}

/* The session a request's code runs in: an explicit container's own
 * (bind, keyed by its id) when there is one, else its session id's. */
void shim_session_keyed_name(const char *identity, const char *session_id, const char *bind,
                             const char *settings, char out[65])
{
    char key[80];

    if (bind && bind[0]) {
        snprintf(key, sizeof(key), "container:%.63s", bind);
        session_id = key;
    }
    shim_session_name(identity, session_id, settings, out);
}

/* The map entry naming the session of container cid, under settings. */
void shim_session_container_file(const char *iddir, const char *cid, const char *settings,
                                 char *out, size_t n)
{
    const char *parts[2] = {cid, settings};
    char h[68] = "c-";

    shim_sha256_tagged_hex("codeshim-container-v2", parts, 2, 16, h + 2);
    shim_fileio_join(out, n, iddir, h);
}

int shim_session_connect(const char *dir)
{
    return shim_proto_socket(dir, 0);
}

int shim_session_alive(const char *dir)
{
    int fd = shim_session_connect(dir);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

void shim_session_remove_dir(const char *dir)
{
    static const char *const files[] = {"sock", "cntr", "pid", "ttl"};
    char p[SHIM_PATH_MAX + 8];
    size_t i;

    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (shim_fileio_join(p, sizeof(p), dir, files[i]) == 0)
            unlink(p);
    rmdir(dir);
}

void shim_session_remove(const char *dir, const char *cid, const char *settings)
{
    char iddir[SHIM_PATH_MAX], cf[SHIM_PATH_MAX + 80];
    const char *slash = strrchr(dir, '/');

    shim_session_remove_dir(dir);
    if (!cid || !*cid || !slash || (size_t)(slash - dir) >= sizeof(iddir))
        return;
    memcpy(iddir, dir, (size_t)(slash - dir));
    iddir[slash - dir] = '\0';
    shim_session_container_file(iddir, cid, settings, cf, sizeof(cf));
    if (cf[0])
        unlink(cf);
}

/* Asks a supervisor to end its session; falls back to SIGTERM by pid. */
void shim_session_ask_close(const char *dir, int timeout_ms)
{
    int fd = shim_session_connect(dir);
    char pidtxt[32], p[SHIM_PATH_MAX + 8];
    cJSON *msg, *ans = NULL;
    int ok = 0;

    if (fd >= 0 && shim_proto_recv(fd, &ans, timeout_ms) == 0) { /* the greeting */
        cJSON_Delete(ans);
        ans = NULL;
        msg = cJSON_CreateObject();
        cJSON_AddStringToObject(msg, "op", "close");
        ok = shim_proto_send(fd, msg, timeout_ms) == 0 &&
             shim_proto_recv(fd, &ans, timeout_ms) == 0;
        cJSON_Delete(msg);
        cJSON_Delete(ans);
    }
    if (fd >= 0)
        close(fd);
    if (!ok && shim_fileio_join(p, sizeof(p), dir, "pid") == 0 && shim_store_read(p, pidtxt, sizeof(pidtxt), 1) == 0) {
        long pid = strtol(pidtxt, NULL, 10);
        if (pid > 1)
            kill((pid_t)pid, SIGTERM);
    }
}

/* Ends the session in dir and waits (boundedly) until it no longer
 * answers: nothing attaches to it afterwards. */
void shim_session_end_dir(const char *dir)
{
    int waited = 0;

    shim_session_ask_close(dir, 5000);
    while (shim_session_alive(dir) && waited < 5000) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
        waited += 10;
    }
}

/* iddir/d-<session>: the container of that session a deletion ended, so
 * that the session's next sandbox can tell the model. */
int shim_session_deleted_file(const char *iddir, const char *name, char *out, size_t n)
{
    char f[80];

    if (!iddir[0] || !shim_session_is_name(name))
        return -ENOENT;
    snprintf(f, sizeof(f), "d-%s", name);
    return shim_fileio_join(out, n, iddir, f);
}

/* The container a deletion ended for b's session, taken (""/-ENOENT if
 * none). */
int shim_session_take_deleted(struct shim_session *b, char out[64])
{
    char p[SHIM_PATH_MAX + 80];

    out[0] = '\0';
    if (shim_session_deleted_file(b->iddir, b->name, p, sizeof(p)) < 0 || shim_store_read(p, out, 64, 1) < 0) {
        out[0] = '\0';
        return -ENOENT;
    }
    unlink(p);
    return 0;
}

void shim_session_stop(const char *dir)
{
    shim_session_end_dir(dir);
}

int shim_session_lock(const char *iddir, int wait_ms)
{
    return shim_store_lock(iddir, wait_ms);
}

int shim_session_is_name(const char *n)
{
    size_t i;

    for (i = 0; i < NAME_HEX; i++)
        if (!n[i] || !strchr("0123456789abcdef", n[i]))
            return 0;
    return n[NAME_HEX] == '\0';
}

void shim_session_note_expired(struct shim_session *b, const char *old)
{
    snprintf(b->note, sizeof(b->note),
             "[Note: the earlier sandbox %.64s has expired (or was started with other "
             "sandbox settings); its variables, imports and files are not here. This is "
             "a new sandbox (%s).]\n", old, b->cid);
}

void shim_session_note_deleted(struct shim_session *b, const char *gone)
{
    snprintf(b->note, sizeof(b->note),
             "[Note: container %.64s was deleted; its variables, imports and files are "
             "gone. This is a new sandbox (%s).]\n", gone, b->cid);
}

/* b's sandbox is new and the one before it (old, or NULL if unknown) is
 * gone: the model is told why, when a deletion ended it, else that it
 * expired (nothing when old is unknown and nothing was deleted). */
void shim_session_note_lost(struct shim_session *b, const char *old)
{
    char gone[64];

    if (shim_session_take_deleted(b, gone) == 0 && gone[0] && strcmp(gone, b->cid))
        shim_session_note_deleted(b, gone);
    else if (old && old[0] && strcmp(old, b->cid))
        shim_session_note_expired(b, old);
}

/* A referred-to container that is not the one in use, if any. */
const char *shim_session_stale_ref(const struct shim_session *b, const struct shim_session_req *rq)
{
    size_t i;

    for (i = 0; i < rq->ncontainers; i++)
        if (rq->containers[i] && strcmp(rq->containers[i], b->cid))
            return rq->containers[i];
    return NULL;
}

int shim_session_build(const struct shim_config *cfg, const char *exe, char out[65])
{
    char id[160];
    struct stat st;

    out[0] = '\0';
    if (stat(exe, &st) < 0)
        return -errno;
    snprintf(id, sizeof(id), "%llu:%llu:%lld:%lld.%09ld", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
             st.st_mtim.tv_nsec);
    shim_store_hash("codeshim-sandbox-host-v1", id, cfg->preload_modules, out);
    out[16] = '\0';
    return 0;
}

const char *shim_session_container_id(const struct shim_session *b)
{
    return b ? b->cid : "";
}

const char *shim_session_key(const struct shim_session *b)
{
    return b && shim_session_is_name(b->name) ? b->name : "";
}

const char *shim_session_take_note(struct shim_session *b)
{
    static __thread char note[512];

    if (!b || !b->note[0])
        return NULL;
    snprintf(note, sizeof(note), "%s", b->note);
    b->note[0] = '\0';
    return note;
}

void shim_session_close(struct shim_session *b)
{
    if (!b)
        return;
    shim_sandbox_close(b->sb); /* a session lives on in its supervisor */
    free(b);
}

int shim_session_is_new(const struct shim_session *b)
{
    return b && b->fresh;
}

int shim_session_take_renewed(struct shim_session *b)
{
    int r = b && b->renewed;

    if (b)
        b->renewed = 0;
    return r;
}
