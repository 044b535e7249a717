/* trace.c - see trace.h. */
#include "trace.h"

#include "config.h"
#include "log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int g_fd = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void open_trace(void)
{
    const char *path = shim_config()->trace_file;

    if (!*path)
        return;
    g_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (g_fd < 0)
        LOG_WARN("cannot open trace file %s", path);
}

int shim_trace_enabled(void)
{
    pthread_once(&g_once, open_trace);
    return g_fd >= 0;
}

void shim_trace_emit(const char *req_id, const char *event, cJSON *fields)
{
    struct timeval tv;
    cJSON *line;
    char *s;

    if (!shim_trace_enabled()) {
        cJSON_Delete(fields);
        return;
    }
    gettimeofday(&tv, NULL);
    line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "ts", (double)tv.tv_sec + (double)tv.tv_usec / 1e6);
    cJSON_AddNumberToObject(line, "pid", (double)getpid());
    cJSON_AddStringToObject(line, "req", req_id ? req_id : "");
    cJSON_AddStringToObject(line, "event", event);
    if (fields) {
        cJSON *it = fields->child, *next;
        for (; it; it = next) {
            next = it->next;
            cJSON_AddItemToObject(line, it->string, cJSON_DetachItemViaPointer(fields, it));
        }
        cJSON_Delete(fields);
    }
    s = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (s) {
        size_t n = strlen(s);
        s[n] = '\n'; /* replaces the NUL: one write for the whole line */
        if (write(g_fd, s, n + 1) < 0)
            LOG_DEBUG("trace write failed");
        free(s);
    }
}
