/* log.h - one-line diagnostics to stderr or CODESHIM_LOG_FILE.
 *
 * The only module that writes diagnostics. Lines look like
 *   codeshim[1234] warn loop_run: upstream answered 500
 * Messages pass through a redactor that masks anything shaped like an API
 * key or bearer token, so a careless format string cannot leak a secret. */
#ifndef SHIM_LOG_H
#define SHIM_LOG_H

#include <stddef.h>

enum shim_log_level {
    SHIM_LOG_ERROR = 0,
    SHIM_LOG_WARN = 1,
    SHIM_LOG_INFO = 2,
    SHIM_LOG_DEBUG = 3,
};

/* Called once at init (config owns the values). file may be NULL. */
void shim_log_setup(int level, const char *file);
int shim_log_enabled(int level);
void shim_log_write(int level, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Masks secrets in place: "Bearer x", "sk-...", "e2b_..." tokens. */
void shim_log_redact(char *s);

#define SHIM_LOG(lvl, ...)                                                     \
    do {                                                                       \
        if (shim_log_enabled(lvl))                                             \
            shim_log_write((lvl), __func__, __VA_ARGS__);                      \
    } while (0)
#define LOG_ERR(...) SHIM_LOG(SHIM_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) SHIM_LOG(SHIM_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) SHIM_LOG(SHIM_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) SHIM_LOG(SHIM_LOG_DEBUG, __VA_ARGS__)

#endif
