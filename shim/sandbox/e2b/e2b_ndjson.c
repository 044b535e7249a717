/* e2b_ndjson.c - see e2b_ndjson.h. Linear in the stream: each line is
 * parsed once; text beyond the head goes through a fixed ring (the
 * tail), so memory stays at about 2 * keep plus the images. */
#include "sandbox/e2b/e2b_ndjson.h"

#include "base/json.h"
#include "base/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_VALUES 4096 /* a line of /execute is a small object */
#define LINE_DEPTH 16
#define SHORT_NOTE "\n[... %zu bytes of output truncated ...]\n" /* sandbox.c's note */

int shim_e2b_ndjson_init(struct shim_e2b_ndjson *p, size_t keep)
{
    memset(p, 0, sizeof(*p));
    p->keep = keep ? keep : 1;
    p->count = -1;
    shim_buf_init(&p->head, p->keep);
    p->tail = malloc(p->keep);
    if (!p->tail) {
        shim_e2b_ndjson_free(p);
        return -ENOMEM;
    }
    return 0;
}

void shim_e2b_ndjson_free(struct shim_e2b_ndjson *p)
{
    shim_buf_free(&p->head);
    free(p->tail);
    shim_exec_images_free(p->images, p->nimages);
    memset(p, 0, sizeof(*p));
}

size_t shim_e2b_strip_ansi(char *s, size_t n)
{
    size_t i = 0, o = 0;

    while (i < n) {
        if (s[i] != '\x1b') {
            s[o++] = s[i++];
            continue;
        }
        i++;
        if (i < n && s[i] == '[') { /* CSI: parameters, then one final byte */
            i++;
            while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x3f)
                i++;
            if (i < n && (unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)
                i++;
        } else if (i < n && (unsigned char)s[i] >= 0x30 && (unsigned char)s[i] <= 0x7e) {
            i++;
        }
    }
    return o;
}

/* Text in arrival order: the head first; once it is full, the ring. */
static int add_text(struct shim_e2b_ndjson *p, const char *s, size_t n)
{
    size_t room = p->keep - p->head.len, i;

    if (room) {
        size_t take = n < room ? n : room;
        if (shim_buf_add(&p->head, s, take) < 0)
            return -ENOMEM;
        s += take;
        n -= take;
    }
    for (i = 0; i < n; i++) {
        if (p->tail_len == p->keep)
            p->dropped++;
        else
            p->tail_len++;
        p->tail[p->tail_pos] = s[i];
        p->tail_pos = (p->tail_pos + 1) % p->keep;
    }
    return 0;
}

static int add_str(struct shim_e2b_ndjson *p, const cJSON *o, const char *key)
{
    const char *t = shim_json_str(o, key);
    return t ? add_text(p, t, strlen(t)) : 0;
}

/* A png/jpeg of a result line, as an image of the result. */
static int add_image(struct shim_e2b_ndjson *p, const cJSON *o, const char *key,
                     const char *mime)
{
    return shim_exec_image_add(&p->images, &p->nimages, mime, shim_json_str(o, key));
}

/* The value of the cell's last expression is shown as text, on a line of
 * its own; a display (a figure) only by its image. */
static int on_result(struct shim_e2b_ndjson *p, const cJSON *o)
{
    const char *text = shim_json_str(o, "text");
    int rc = 0;

    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "is_main_result")) && text) {
        rc = add_text(p, text, strlen(text));
        if (!rc && *text && text[strlen(text) - 1] != '\n')
            rc = add_text(p, "\n", 1);
    }
    if (!rc)
        rc = add_image(p, o, "png", "image/png");
    if (!rc)
        rc = add_image(p, o, "jpeg", "image/jpeg");
    return rc;
}

/* The traceback without colours; "name: value" when there is none. */
static int on_error(struct shim_e2b_ndjson *p, const cJSON *o)
{
    const char *tb = shim_json_str(o, "traceback");
    const char *name = shim_json_str(o, "name"), *value = shim_json_str(o, "value");
    char *t;
    size_t n;
    int rc;

    if (p->error)
        return 0;
    p->error = 1;
    if (!tb || !*tb) {
        char line[512];
        snprintf(line, sizeof(line), "%.200s: %.300s\n", name ? name : "Error",
                 value ? value : "");
        return add_text(p, line, strlen(line));
    }
    n = strlen(tb);
    if (!(t = malloc(n + 1)))
        return -ENOMEM;
    memcpy(t, tb, n);
    n = shim_e2b_strip_ansi(t, n);
    rc = add_text(p, t, n);
    if (!rc && n && t[n - 1] != '\n')
        rc = add_text(p, "\n", 1);
    free(t);
    return rc;
}

int shim_e2b_ndjson_line(struct shim_e2b_ndjson *p, const char *line, size_t len)
{
    const char *type;
    cJSON *o;
    int rc = 0;

    while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
        len--;
    if (!len || !(o = shim_json_parse_within(line, len, LINE_VALUES, LINE_DEPTH)))
        return 0;
    type = cJSON_IsObject(o) ? shim_json_str(o, "type") : NULL;
    if (!type)
        ;
    else if (!strcmp(type, "stdout") || !strcmp(type, "stderr"))
        rc = add_str(p, o, "text");
    else if (!strcmp(type, "result"))
        rc = on_result(p, o);
    else if (!strcmp(type, "error"))
        rc = on_error(p, o);
    else if (!strcmp(type, "number_of_executions") && p->count < 0)
        p->count = (long)shim_json_int(o, "execution_count");
    else if (!strcmp(type, "end_of_execution"))
        p->ended = 1;
    cJSON_Delete(o);
    return rc;
}

/* head + note + tail, as one string. */
static int join(struct shim_e2b_ndjson *p, struct shim_buf *b)
{
    size_t start = (p->tail_pos + p->keep - p->tail_len) % p->keep, first;

    if (p->head.len && shim_buf_add(b, p->head.data, p->head.len) < 0)
        return -ENOMEM;
    if (p->dropped && shim_buf_addf(b, SHORT_NOTE, p->dropped) < 0)
        return -ENOMEM;
    first = p->keep - start < p->tail_len ? p->keep - start : p->tail_len;
    if (first && shim_buf_add(b, p->tail + start, first) < 0)
        return -ENOMEM;
    if (p->tail_len > first && shim_buf_add(b, p->tail, p->tail_len - first) < 0)
        return -ENOMEM;
    return 0;
}

int shim_e2b_ndjson_finish(struct shim_e2b_ndjson *p, struct shim_exec_result *out)
{
    static const char cut[] =
        "[e2b: the execution's output stream ended before the execution did; "
        "the code may have run partly or fully, and its remaining output is lost]\n";
    struct shim_buf b;
    int rc;

    memset(out, 0, sizeof(*out));
    shim_buf_init(&b, 2 * p->keep + 256);
    rc = join(p, &b);
    if (!rc && b.len && b.data[b.len - 1] != '\n')
        rc = shim_buf_add(&b, "\n", 1);
    if (!rc && p->cut_at)
        rc = shim_buf_addf(&b, "[e2b: the execution's output passed %zu bytes; codeshim "
                           "stopped reading it and the execution was interrupted]\n", p->cut_at);
    else if (!rc && !p->ended)
        rc = shim_buf_adds(&b, cut);
    if (rc) {
        shim_buf_free(&b);
        shim_e2b_ndjson_free(p);
        return -ENOMEM;
    }
    out->status = !p->ended || p->cut_at ? SHIM_EXEC_FAILED : p->error ? SHIM_EXEC_ERROR : SHIM_EXEC_OK;
    out->logs = shim_buf_take(&b, &out->logs_len);
    if (!out->logs && !(out->logs = strdup(""))) {
        shim_e2b_ndjson_free(p);
        return -ENOMEM;
    }
    out->images = p->images;
    out->nimages = p->nimages;
    p->images = NULL;
    p->nimages = 0;
    shim_e2b_ndjson_free(p);
    return 0;
}
