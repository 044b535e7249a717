/* capi.h - OpenAI's Containers API as codeshim answers it: which call a
 * transfer is (method and URL path), and the JSON of its answers
 * (ContainerResource, ContainerFileResource, their lists with OpenAI's
 * pagination: limit, after, order, has_more). Pure. */
#ifndef SHIM_CAPI_H
#define SHIM_CAPI_H

#include <cjson/cJSON.h>
#include <stddef.h>

struct shim_container {
    char id[64];
    char name[256];
    char memory_limit[8];
    long long created_at, last_active_at; /* Unix seconds */
    int minutes;                          /* expires_after */
    long long order;                      /* creation, in microseconds */
    int explicit_;                        /* made by POST /v1/containers */
    char session[65]; /* the session whose container it is (session.h's
                         name of it, a hash), or "" */
};

struct shim_cfile {
    char id[64];    /* cfile_... */
    char path[512]; /* /mnt/data/NAME */
    char source[16]; /* "user" or "assistant" */
    long long bytes, created_at;
    long long order; /* creation, in microseconds */
};

enum shim_capi_op {
    SHIM_CAPI_NONE = 0,
    SHIM_CAPI_LIST,        /* GET    .../containers */
    SHIM_CAPI_CREATE,      /* POST   .../containers */
    SHIM_CAPI_GET,         /* GET    .../containers/{id} */
    SHIM_CAPI_DELETE,      /* DELETE .../containers/{id} */
    SHIM_CAPI_FILES,       /* GET    .../containers/{id}/files */
    SHIM_CAPI_UPLOAD,      /* POST   .../containers/{id}/files */
    SHIM_CAPI_FILE,        /* GET    .../containers/{id}/files/{fid} */
    SHIM_CAPI_FILE_DELETE, /* DELETE .../containers/{id}/files/{fid} */
    SHIM_CAPI_CONTENT,     /* GET    .../containers/{id}/files/{fid}/content */
};

struct shim_capi_route {
    enum shim_capi_op op;
    char cid[64];  /* "" for LIST and CREATE */
    char fid[64];
    /* list parameters (query string) */
    int limit;     /* 1..100, default 20 */
    int ascending; /* order=asc; default desc */
    char after[64];
    char name[256]; /* LIST: only containers of this name */
    char bad_param[32]; /* a query parameter with an invalid value, or "" */
};

/* Which call method ("GET", "POST", "DELETE") on url is; SHIM_CAPI_NONE
 * for anything else (it goes to the upstream). An id that does not look
 * like one (cntr_..., cfile_...) is SHIM_CAPI_NONE too. */
enum shim_capi_op shim_capi_route(const char *method, const char *url, struct shim_capi_route *r);

cJSON *shim_capi_container(const struct shim_container *c);
cJSON *shim_capi_file(const struct shim_cfile *f, const char *cid);
/* A list page of v[0..n) (oldest first), as r's order, after and limit
 * ask. cid NULL: containers (v is struct shim_container *); else files of
 * cid (v is struct shim_cfile *). */
cJSON *shim_capi_list(const void *v, size_t n, const char *cid,
                      const struct shim_capi_route *r);
cJSON *shim_capi_deleted(const char *id, const char *object);

#endif
