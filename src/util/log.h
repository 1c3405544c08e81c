/* Logging to stderr, gated by PICOLL_LOG_LEVEL, prefixed with the MPI rank. */
#ifndef PICOLL_LOG_H
#define PICOLL_LOG_H

#include <stdatomic.h>

typedef enum {
    PICOLL_LOG_ERROR,
    PICOLL_LOG_WARN,
    PICOLL_LOG_INFO,
    PICOLL_LOG_DEBUG,
    PICOLL_LOG_TRACE
} picoll_log_level_t;

extern int picoll_log_level; /* messages above this level are dropped */
extern int picoll_log_rank;  /* world rank for the prefix, -1 before MPI_Init */

void picoll_log_emit(picoll_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define picoll_log(level, ...)                                                                     \
    do {                                                                                           \
        if ((int)(level) <= picoll_log_level) {                                                    \
            picoll_log_emit((level), __FILE__, __LINE__, __VA_ARGS__);                             \
        }                                                                                          \
    } while (0)

#define picoll_error(...) picoll_log(PICOLL_LOG_ERROR, __VA_ARGS__)
#define picoll_warn(...) picoll_log(PICOLL_LOG_WARN, __VA_ARGS__)
#define picoll_info(...) picoll_log(PICOLL_LOG_INFO, __VA_ARGS__)
#define picoll_debug(...) picoll_log(PICOLL_LOG_DEBUG, __VA_ARGS__)
#define picoll_trace(...) picoll_log(PICOLL_LOG_TRACE, __VA_ARGS__)

/* A warning that every communicator of a job may hit alike (no room for a workspace): the first
 * at warn, the process's later ones at info, so that a job with many communicators is told once
 * (per call site). */
#define picoll_warn_once(...)                                                                      \
    do {                                                                                           \
        static _Atomic int picoll_warned_;                                                         \
        picoll_log_level_t picoll_once_level_ =                                                    \
            atomic_exchange(&picoll_warned_, 1) ? PICOLL_LOG_INFO : PICOLL_LOG_WARN;               \
        picoll_log(picoll_once_level_, __VA_ARGS__);                                               \
    } while (0)

#endif
