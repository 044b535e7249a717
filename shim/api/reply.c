/* reply.c - see reply.h. */
#include "api/reply.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

void shim_http_reply_init(struct shim_http_reply *r, size_t head_cap, size_t body_cap)
{
    memset(r, 0, sizeof(*r));
    shim_buf_init(&r->head, head_cap);
    shim_buf_init(&r->body, body_cap);
}

void shim_http_reply_free(struct shim_http_reply *r)
{
    shim_buf_free(&r->head);
    shim_buf_free(&r->body);
}

void shim_http_reply_local(struct shim_http_reply *r, long status, const char *json)
{
    r->status = status;
    r->http_version = CURL_HTTP_VERSION_1_1;
    snprintf(r->content_type, sizeof(r->content_type), "application/json");
    shim_buf_addf(&r->head, "HTTP/1.1 %ld %s\r\nContent-Type: application/json\r\n\r\n",
                  status, status == 200 ? "OK" : "Error");
    shim_buf_adds(&r->body, json);
}

void shim_http_reply_header(struct shim_http_reply *r, const char *line)
{
    if (r->head.len < 2 || memcmp(r->head.data + r->head.len - 2, "\r\n", 2))
        return;
    r->head.len -= 2; /* before the blank line that ends the head */
    r->head.data[r->head.len] = '\0';
    shim_buf_addf(&r->head, "%s\r\n\r\n", line);
}
