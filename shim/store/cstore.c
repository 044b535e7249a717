/* cstore.c - see cstore.h. */
#include "store/cstore.h"

#include "base/clock.h"
#include "base/fileio.h"
#include "base/ids.h"
#include "base/json.h"
#include "base/log.h"
#include "store/store.h"
#include "system/config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define META_MAX 4096
#define TOMBSTONE_S (7 * 86400) /* a deleted id stays "issued" this long */
#define SWEEP_S 60 /* expired containers are looked for at most this often on create */

/* <runtime>/containers/<hash of cid>; 0 or -errno. */
static int dir_of(const struct shim_config *cfg, const char *cid, char *out, size_t n)
{
    char root[SHIM_PATH_MAX], h[65];
    int rc = shim_store_root(cfg, "containers", root, sizeof(root));

    if (rc < 0)
        return rc;
    shim_store_hash("codeshim-cstore-v1", cid, NULL, h);
    return shim_fileio_join(out, n, root, h);
}

static int is_fid(const char *s)
{
    size_t i;

    if (strncmp(s, "cfile_", 6) || strlen(s) != 6 + 32)
        return 0;
    for (i = 6; s[i]; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return 0;
    return 1;
}

/* A file of the container's directory by kind ('f' bytes, 'm' record). */
static int file_path(const char *dir, char kind, const char *fid, char *out, size_t n)
{
    char name[80];

    if (!is_fid(fid))
        return -ENOENT;
    snprintf(name, sizeof(name), "%c-%s", kind, fid);
    return shim_fileio_join(out, n, dir, name);
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[SHIM_PATH_MAX + 300];

    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")))
            if (shim_fileio_join(p, sizeof(p), dir, e->d_name) == 0)
                unlink(p);
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Reads dir's meta into c and its owner; 0, -ENOENT, or -ESTALE for a
 * deleted container's tombstone. */
static int read_meta(const char *dir, struct shim_container *c, char owner[65])
{
    char p[SHIM_PATH_MAX + 8], text[META_MAX];
    struct stat st;
    cJSON *j;
    const char *s;
    int deleted;

    if (shim_fileio_join(p, sizeof(p), dir, "meta") < 0 || shim_store_read(p, text, sizeof(text), 0) < 0 ||
        stat(p, &st) < 0 || !(j = shim_json_parse(text, strlen(text))))
        return -ENOENT;
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", (s = shim_json_str(j, "id")) ? s : "");
    snprintf(c->name, sizeof(c->name), "%s", (s = shim_json_str(j, "name")) ? s : "");
    snprintf(c->memory_limit, sizeof(c->memory_limit), "%s",
             (s = shim_json_str(j, "memory_limit")) ? s : "1g");
    snprintf(owner, 65, "%s", (s = shim_json_str(j, "owner")) ? s : "");
    c->created_at = shim_json_int(j, "created_at");
    c->minutes = (int)shim_json_int(j, "minutes");
    c->order = shim_json_int(j, "order");
    c->explicit_ = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "explicit"));
    snprintf(c->session, sizeof(c->session), "%s", (s = shim_json_str(j, "session")) ? s : "");
    c->last_active_at = (long long)st.st_mtime;
    deleted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "deleted"));
    cJSON_Delete(j);
    if (!c->id[0] || !owner[0])
        return -ENOENT;
    return deleted ? -ESTALE : 0;
}

static int write_meta(const char *dir, const struct shim_container *c, const char *owner,
                      int deleted)
{
    char p[SHIM_PATH_MAX + 8], *text;
    cJSON *j = cJSON_CreateObject();
    int rc;

    cJSON_AddStringToObject(j, "id", c->id);
    cJSON_AddStringToObject(j, "owner", owner);
    cJSON_AddStringToObject(j, "name", c->name);
    cJSON_AddStringToObject(j, "memory_limit", c->memory_limit);
    cJSON_AddNumberToObject(j, "created_at", (double)c->created_at);
    cJSON_AddNumberToObject(j, "minutes", c->minutes);
    cJSON_AddNumberToObject(j, "order", (double)c->order);
    cJSON_AddBoolToObject(j, "explicit", c->explicit_);
    if (c->session[0])
        cJSON_AddStringToObject(j, "session", c->session);
    if (deleted)
        cJSON_AddTrueToObject(j, "deleted");
    text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text)
        return -ENOMEM;
    rc = shim_fileio_join(p, sizeof(p), dir, "meta");
    if (rc == 0)
        rc = shim_store_write(p, text);
    free(text);
    return rc;
}

/* Ends a container: its files go; its meta stays as a tombstone, so its
 * id is still known as codeshim's (never sent to the upstream). */
static void bury(const char *dir, const struct shim_container *c, const char *owner)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[SHIM_PATH_MAX + 300];

    while (d && (e = readdir(d)) != NULL)
        if ((e->d_name[0] == 'f' || e->d_name[0] == 'm') && e->d_name[1] == '-' &&
            shim_fileio_join(p, sizeof(p), dir, e->d_name) == 0)
            unlink(p);
    if (d)
        closedir(d);
    write_meta(dir, c, owner, 1);
}

static int expired(const struct shim_container *c)
{
    return c->minutes > 0 && (long long)shim_clock_wall_s() > c->last_active_at + 60LL * c->minutes;
}

/* Opens cid's directory for identity: 0 with dir (and *c) filled, or
 * -ENOENT (an expired container is removed here). */
static int open_dir(const struct shim_config *cfg, const char *identity, const char *cid,
                    char *dir, size_t n, struct shim_container *c)
{
    char owner[65];
    int rc;

    if (!cid || strncmp(cid, "cntr_", 5) || strlen(cid) >= sizeof(c->id))
        return -ENOENT;
    if ((rc = dir_of(cfg, cid, dir, n)) < 0)
        return rc;
    if (read_meta(dir, c, owner) < 0 || strcmp(c->id, cid))
        return -ENOENT;
    if (strcmp(owner, identity))
        return -ENOENT; /* another identity's: the same answer as none */
    if (expired(c)) {
        LOG_INFO("container %s expired after %d idle minutes: its files are removed", cid,
                 c->minutes);
        bury(dir, c, owner);
        return -ENOENT;
    }
    return 0;
}

static void touch(const char *dir, struct shim_container *c)
{
    char p[SHIM_PATH_MAX + 8];

    if (shim_fileio_join(p, sizeof(p), dir, "meta") == 0 && utimensat(AT_FDCWD, p, NULL, 0) == 0)
        c->last_active_at = (long long)shim_clock_wall_s();
}

int shim_cstore_find(const struct shim_config *cfg, const char *identity, const char *cid,
                     struct shim_container *out, int do_touch)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc < 0)
        return rc;
    if (do_touch)
        touch(dir, &c);
    if (out)
        *out = c;
    return 0;
}

int shim_cstore_issued(const struct shim_config *cfg, const char *cid)
{
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 8];
    struct stat st;

    if (!cid || strncmp(cid, "cntr_", 5) || dir_of(cfg, cid, dir, sizeof(dir)) < 0 ||
        shim_fileio_join(p, sizeof(p), dir, "meta") < 0)
        return 0;
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Calls fn on each live container identity owns (every identity's with
 * NULL: the user's); the count, or -errno. */
static int each_container(const struct shim_config *cfg, const char *identity,
                          void (*fn)(const char *dir, const struct shim_container *c, void *ud),
                          void *ud)
{
    char root[SHIM_PATH_MAX], dir[SHIM_PATH_MAX], owner[65];
    struct shim_container c;
    struct dirent *e;
    DIR *d;
    int n = 0, rc = shim_store_root(cfg, "containers", root, sizeof(root));

    if (rc < 0)
        return rc;
    if (!(d = opendir(root)))
        return -errno;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || shim_fileio_join(dir, sizeof(dir), root, e->d_name) < 0)
            continue;
        rc = read_meta(dir, &c, owner);
        if (rc == -ESTALE && (long long)shim_clock_wall_s() > c.last_active_at + TOMBSTONE_S)
            remove_tree(dir); /* anyone's old tombstone */
        if (rc < 0 || (identity && strcmp(owner, identity)))
            continue;
        if (expired(&c)) {
            bury(dir, &c, owner);
            continue;
        }
        n++;
        if (fn)
            fn(dir, &c, ud);
    }
    closedir(d);
    return n;
}

/* 0 when identity may have one more container, else -EDQUOT (or -errno).
 * Reading every record is linear in all the user's containers, and each
 * private request makes one: so it is done only when the directory holds
 * SHIM_CSTORE_MAX_CONTAINERS entries of anyone's (only then can the
 * identity be at its cap), or the last sweep is SWEEP_S old (reading them
 * is what removes expired ones and old tombstones). Otherwise names are
 * counted, nothing opened. */
static int room_for_one(const struct shim_config *cfg, const char *identity)
{
    char root[SHIM_PATH_MAX], mark[SHIM_PATH_MAX + 8];
    struct dirent *e;
    struct stat st;
    DIR *d;
    int n = 0, rc = shim_store_root(cfg, "containers", root, sizeof(root));

    if (rc < 0 || (rc = shim_fileio_join(mark, sizeof(mark), root, ".swept")) < 0)
        return rc;
    if (stat(mark, &st) == 0 && shim_clock_wall_s() - st.st_mtime < SWEEP_S && (d = opendir(root))) {
        while (n < SHIM_CSTORE_MAX_CONTAINERS && (e = readdir(d)) != NULL)
            n += e->d_name[0] != '.';
        closedir(d);
        if (n < SHIM_CSTORE_MAX_CONTAINERS)
            return 0;
    }
    if ((rc = each_container(cfg, identity, NULL, NULL)) < 0)
        return rc;
    if (shim_store_write(mark, "") < 0)
        LOG_WARN("cannot write %s", mark);
    return rc >= SHIM_CSTORE_MAX_CONTAINERS ? -EDQUOT : 0;
}

int shim_cstore_create(const struct shim_config *cfg, const char *identity,
                       struct shim_container *c)
{
    char dir[SHIM_PATH_MAX];
    int rc;

    if (strncmp(c->id, "cntr_", 5))
        return -EINVAL;
    if ((rc = room_for_one(cfg, identity)) < 0)
        return rc;
    if ((rc = dir_of(cfg, c->id, dir, sizeof(dir))) < 0)
        return rc;
    if (mkdir(dir, 0700) < 0)
        return errno == EEXIST ? -EEXIST : -errno;
    c->order = (long long)shim_clock_wall_us();
    c->created_at = c->last_active_at = c->order / 1000000;
    if (!c->memory_limit[0])
        snprintf(c->memory_limit, sizeof(c->memory_limit), "1g");
    if ((rc = write_meta(dir, c, identity, 0)) < 0)
        remove_tree(dir);
    return rc;
}

struct list_acc {
    struct shim_container *v;
    size_t n, cap;
    int oom;
};

static void add_container(const char *dir, const struct shim_container *c, void *ud)
{
    struct list_acc *a = ud;
    (void)dir;

    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        struct shim_container *v = realloc(a->v, cap * sizeof(*v));
        if (!v) {
            a->oom = 1;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = *c;
}

static int by_created(const void *x, const void *y)
{
    const struct shim_container *a = x, *b = y;

    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return strcmp(a->id, b->id);
}

int shim_cstore_list(const struct shim_config *cfg, const char *identity,
                     struct shim_container **out, size_t *n)
{
    struct list_acc a = {NULL, 0, 0, 0};
    int rc = each_container(cfg, identity, add_container, &a);

    *out = NULL;
    *n = 0;
    if (rc < 0 || a.oom) {
        free(a.v);
        return rc < 0 ? rc : -ENOMEM;
    }
    if (a.n)
        qsort(a.v, a.n, sizeof(*a.v), by_created);
    *out = a.v;
    *n = a.n;
    return 0;
}

int shim_cstore_delete(const struct shim_config *cfg, const char *identity, const char *cid,
                       struct shim_container *out)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc == 0)
        bury(dir, &c, identity);
    if (rc == 0 && out)
        *out = c;
    return rc;
}

int shim_cstore_gone(const struct shim_config *cfg, const char *identity, const char *cid)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX], owner[65];

    if (open_dir(cfg, identity, cid, dir, sizeof(dir), &c) == 0) /* buries an expired one */
        return 0;
    if (!cid || strncmp(cid, "cntr_", 5) || dir_of(cfg, cid, dir, sizeof(dir)) < 0)
        return 0;
    return read_meta(dir, &c, owner) == -ESTALE && !strcmp(c.id, cid) && !strcmp(owner, identity);
}

/* ---------------- files ---------------- */

#define NOTICE_MAX 2048

/* An upload replaced path: the model hears of it at the next execution
 * (shim_cstore_take_notice). */
static void add_notice(const char *dir, const char *path)
{
    char p[SHIM_PATH_MAX + 16], text[NOTICE_MAX] = "", line[600];

    if (shim_fileio_join(p, sizeof(p), dir, "notice") < 0)
        return;
    if (shim_store_read(p, text, sizeof(text), 0) < 0)
        text[0] = '\0';
    snprintf(line, sizeof(line), "%s\n", path);
    if (strlen(text) + strlen(line) < sizeof(text) && !strstr(text, line))
        strcat(text, line);
    shim_store_write(p, text);
}

int shim_cstore_take_notice(const struct shim_config *cfg, const char *identity, const char *cid,
                            char *out, size_t n)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 16];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    out[0] = '\0';
    if (rc < 0 || shim_fileio_join(p, sizeof(p), dir, "notice") < 0)
        return rc < 0 ? rc : -ENAMETOOLONG;
    if (shim_store_read(p, out, n, 0) < 0) {
        out[0] = '\0';
        return 0;
    }
    unlink(p);
    return 0;
}

int shim_cstore_served(const struct shim_config *cfg, const char *identity, const char *cid)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 16];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc < 0 || shim_fileio_join(p, sizeof(p), dir, "served") < 0)
        return rc < 0 ? rc : -ENAMETOOLONG;
    if (access(p, F_OK) == 0)
        return 1;
    rc = shim_store_write(p, "");
    return rc < 0 ? rc : 0;
}

static int read_record(const char *dir, const char *fid, struct shim_cfile *f)
{
    char p[SHIM_PATH_MAX + 80], text[2048];
    const char *s;
    cJSON *j;

    if (file_path(dir, 'm', fid, p, sizeof(p)) < 0 || shim_store_read(p, text, sizeof(text), 0) < 0 ||
        !(j = shim_json_parse(text, strlen(text))))
        return -ENOENT;
    memset(f, 0, sizeof(*f));
    snprintf(f->id, sizeof(f->id), "%s", fid);
    snprintf(f->path, sizeof(f->path), "%s", (s = shim_json_str(j, "path")) ? s : "");
    snprintf(f->source, sizeof(f->source), "%s", (s = shim_json_str(j, "source")) ? s : "user");
    f->bytes = shim_json_int(j, "bytes");
    f->created_at = shim_json_int(j, "created_at");
    f->order = shim_json_int(j, "order");
    cJSON_Delete(j);
    return f->path[0] ? 0 : -ENOENT;
}

/* A file's record first (so it is never listed without its bytes), then
 * its bytes. */
static void unlink_file(const char *dir, const char *fid)
{
    char p[SHIM_PATH_MAX + 80];

    if (file_path(dir, 'm', fid, p, sizeof(p)) == 0)
        unlink(p);
    if (file_path(dir, 'f', fid, p, sizeof(p)) == 0)
        unlink(p);
}

/* The records of dir's files, oldest first; n counts them. */
static int records(const char *dir, struct shim_cfile **out, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    struct shim_cfile *v = NULL;
    size_t cap = 0;

    *out = NULL;
    *n = 0;
    if (!d)
        return -errno;
    while ((e = readdir(d)) != NULL && *n < SHIM_CSTORE_MAX_FILES + 1) {
        struct shim_cfile f;
        if (strncmp(e->d_name, "m-", 2) || read_record(dir, e->d_name + 2, &f) < 0)
            continue;
        if (*n == cap) {
            struct shim_cfile *w = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
            if (!w) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = w;
        }
        v[(*n)++] = f;
    }
    closedir(d);
    *out = v;
    return 0;
}

static int by_file_created(const void *x, const void *y)
{
    const struct shim_cfile *a = x, *b = y;

    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return strcmp(a->id, b->id);
}

int shim_cstore_files(const struct shim_config *cfg, const char *identity, const char *cid,
                      struct shim_cfile **out, size_t *n)
{
    struct shim_container c;
    char dir[SHIM_PATH_MAX];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    *out = NULL;
    *n = 0;
    if (rc < 0 || (rc = records(dir, out, n)) < 0)
        return rc;
    touch(dir, &c);
    if (*n)
        qsort(*out, *n, sizeof(**out), by_file_created);
    return 0;
}

struct usage {
    unsigned long long bytes;
};

static void add_usage(const char *dir, const struct shim_container *c, void *ud)
{
    struct usage *u = ud;
    struct shim_cfile *v;
    size_t n, i;
    (void)c;

    if (records(dir, &v, &n) < 0)
        return;
    for (i = 0; i < n; i++)
        u->bytes += (unsigned long long)v[i].bytes;
    free(v);
}

/* shim_cstore_put under the user's lock: the budgets' counts and the
 * write are one step for every process of the user. */
static int put(const struct shim_config *cfg, const char *identity, const char *cid,
               const char *path, const void *data, size_t len, const char *source,
               struct shim_cfile *out)
{
    struct shim_container c;
    struct shim_cfile *v = NULL, f;
    struct usage u = {0}, all = {0};
    unsigned long long mine = 0; /* this container's other files */
    int replaced = 0;
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 80], *rec;
    size_t n = 0, i;
    cJSON *j;
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc < 0)
        return rc;
    if (len > cfg->file_max)
        return -EFBIG;
    if ((rc = records(dir, &v, &n)) < 0)
        return rc;
    each_container(cfg, identity, add_usage, &u);
    each_container(cfg, NULL, add_usage, &all);
    for (i = 0; i < n; i++) {
        if (!strcmp(v[i].path, path)) {
            if (u.bytes >= (unsigned long long)v[i].bytes)
                u.bytes -= (unsigned long long)v[i].bytes; /* replaced below */
            if (all.bytes >= (unsigned long long)v[i].bytes)
                all.bytes -= (unsigned long long)v[i].bytes;
            replaced = 1;
        } else {
            mine += (unsigned long long)v[i].bytes;
        }
    }
    /* the container's files must fit its sandbox's /mnt/data (CODESHIM_DISK) */
    if (n >= SHIM_CSTORE_MAX_FILES || u.bytes + len > cfg->files_disk ||
        mine + len > cfg->disk_limit) {
        free(v);
        return -EDQUOT;
    }
    if (all.bytes + len > cfg->user_files_disk) { /* every key's files together */
        free(v);
        shim_store_set_why("codeshim cannot store this file: this user's container files "
                           "(%llu bytes, across all API keys) would exceed "
                           "CODESHIM_USER_FILES_DISK (%llu bytes)", all.bytes,
                           cfg->user_files_disk);
        return -ENOSPC;
    }
    memset(&f, 0, sizeof(f));
    shim_id_make(f.id, sizeof(f.id), "cfile_", 32);
    snprintf(f.path, sizeof(f.path), "%s", path);
    snprintf(f.source, sizeof(f.source), "%s", source);
    f.bytes = (long long)len;
    f.order = (long long)shim_clock_wall_us();
    f.created_at = f.order / 1000000;
    j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "path", f.path);
    cJSON_AddStringToObject(j, "source", f.source);
    cJSON_AddNumberToObject(j, "bytes", (double)f.bytes);
    cJSON_AddNumberToObject(j, "created_at", (double)f.created_at);
    cJSON_AddNumberToObject(j, "order", (double)f.order);
    rec = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    rc = rec ? file_path(dir, 'f', f.id, p, sizeof(p)) : -ENOMEM;
    if (rc == 0 && (rc = shim_store_write_bytes(p, data, len)) == -ENOSPC)
        shim_store_set_why("codeshim cannot store this file: the disk of its runtime "
                           "directory is full");
    if (rc == 0 && (rc = file_path(dir, 'm', f.id, p, sizeof(p))) == 0 &&
        (rc = shim_store_write(p, rec)) < 0) {
        file_path(dir, 'f', f.id, p, sizeof(p));
        unlink(p);
    }
    free(rec);
    for (i = 0; rc == 0 && i < n; i++) /* the file it replaces */
        if (!strcmp(v[i].path, path))
            unlink_file(dir, v[i].id);
    free(v);
    if (rc == 0 && replaced && !strcmp(source, "user"))
        add_notice(dir, path);
    if (rc == 0) {
        touch(dir, &c);
        if (out)
            *out = f;
    }
    return rc;
}

int shim_cstore_put(const struct shim_config *cfg, const char *identity, const char *cid,
                    const char *path, const void *data, size_t len, const char *source,
                    struct shim_cfile *out)
{
    int lock = shim_store_user_lock(cfg, 30000), rc;

    if (lock < 0)
        return lock == -ETIMEDOUT ? -EBUSY : lock;
    rc = put(cfg, identity, cid, path, data, len, source, out);
    close(lock);
    return rc;
}

int shim_cstore_file(const struct shim_config *cfg, const char *identity, const char *cid,
                     const char *fid, struct shim_cfile *meta, char **data, size_t *len)
{
    struct shim_container c;
    struct shim_cfile f;
    char dir[SHIM_PATH_MAX], p[SHIM_PATH_MAX + 80];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc < 0 || (rc = read_record(dir, fid, &f)) < 0)
        return rc;
    if (data) {
        if ((rc = file_path(dir, 'f', fid, p, sizeof(p))) < 0 ||
            (rc = shim_store_read_all(p, cfg->file_max, data, len)) < 0)
            return rc == -ENOENT ? -ENOENT : rc;
    }
    touch(dir, &c);
    if (meta)
        *meta = f;
    return 0;
}

int shim_cstore_remove(const struct shim_config *cfg, const char *identity, const char *cid,
                       const char *fid)
{
    struct shim_container c;
    struct shim_cfile f;
    char dir[SHIM_PATH_MAX];
    int rc = open_dir(cfg, identity, cid, dir, sizeof(dir), &c);

    if (rc < 0 || (rc = read_record(dir, fid, &f)) < 0)
        return rc;
    unlink_file(dir, fid);
    touch(dir, &c);
    return 0;
}
