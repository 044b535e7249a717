/* log.c - see log.h. Writes whole lines with one write(2) so lines from
 * several threads or processes never interleave. */
#include "base/log.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int g_level = SHIM_LOG_WARN;
static int g_fd = 2;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void shim_log_setup(int level, const char *file)
{
    g_level = level;
    if (file && *file) {
        int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            g_fd = fd;
    }
}

int shim_log_enabled(int level)
{
    return level <= g_level;
}

static int is_token_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* Replace the token that starts at p (after a marker) with asterisks. */
static void mask_from(char *p)
{
    while (*p && is_token_char(*p))
        *p++ = '*';
}

void shim_log_redact(char *s)
{
    static const char *const markers[] = {"Bearer ", "bearer ", "sk-", "e2b_",
                                          "api-key: ", "api_key=", "api-key=",
                                          "key="};
    size_t i;

    for (i = 0; i < sizeof(markers) / sizeof(markers[0]); i++) {
        char *p = s;
        size_t ml = strlen(markers[i]);
        while ((p = strstr(p, markers[i])) != NULL) {
            /* "sk-" and "e2b_" only count at a token start, not inside
             * "task-" or a name such as shim_e2b_create */
            if ((markers[i][0] == 's' || markers[i][0] == 'e') && p > s &&
                is_token_char(p[-1])) {
                p += ml;
                continue;
            }
            p += ml;
            mask_from(p);
        }
    }
}

void shim_log_write(int level, const char *func, const char *fmt, ...)
{
    char line[2048];
    int n;
    va_list ap;

    if (level < 0 || level > SHIM_LOG_DEBUG)
        level = SHIM_LOG_ERROR;
    n = snprintf(line, sizeof(line), "codeshim[%ld] %s %s: ", (long)getpid(),
                 level_names[level], func);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* one line per event: fold embedded newlines */
    for (char *c = line + n; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    shim_log_redact(line);
    n = (int)strlen(line);
    line[n++] = '\n';
    if (write(g_fd, line, (size_t)n) < 0) {
        /* nothing sensible to do: never fail the host over a log line */
    }
}
