#include "build-config.h"
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int picoll_log_level = PICOLL_LOG_WARN;
int picoll_log_rank = -1;

static const char *const level_names[] = {
    [PICOLL_LOG_ERROR] = "error", [PICOLL_LOG_WARN] = "warn",   [PICOLL_LOG_INFO] = "info",
    [PICOLL_LOG_DEBUG] = "debug", [PICOLL_LOG_TRACE] = "trace",
};

void picoll_log_emit(picoll_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int n;

    /* One fprintf per message so that lines of different ranks do not interleave mid-line. */
    if (picoll_log_rank >= 0) {
        n = snprintf(msg, sizeof(msg), "[picoll %d] %s: ", picoll_log_rank, level_names[level]);
    } else {
        n = snprintf(msg, sizeof(msg), "[picoll] %s: ", level_names[level]);
    }
    va_start(ap, fmt);
    n += vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(msg) - 1) {
        n = (int)sizeof(msg) - 2;
    }
    if (level >= PICOLL_LOG_DEBUG) {
        const char *base = strrchr(file, '/');
        n += snprintf(msg + n, sizeof(msg) - (size_t)n, " (%s:%d)", base ? base + 1 : file, line);
        if (n >= (int)sizeof(msg) - 1) {
            n = (int)sizeof(msg) - 2;
        }
    }
    msg[n] = '\n';
    msg[n + 1] = '\0';
    fputs(msg, stderr);
}
