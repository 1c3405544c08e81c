/* Whether a process on this machine is still there: its pid and its start time (field 22 of
 * /proc/PID/stat, clock ticks since boot), which together name one process even after the pid is
 * reused. A process that cannot be seen (another pid namespace, no /proc) is never called gone. */
#ifndef PICOLL_PROC_H
#define PICOLL_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The start time of pid, 0 when it cannot be read. */
uint64_t picoll_proc_start_time(pid_t pid);

typedef enum {
    PICOLL_PROC_ALIVE,  /* the same process, running or stopped */
    PICOLL_PROC_GONE,   /* exited (no such process, a zombie, or the pid now names another) */
    PICOLL_PROC_UNKNOWN /* cannot tell: start 0 (not checked at set-up) */
} picoll_proc_state_t;

/* pid and start as the process itself published them. */
picoll_proc_state_t picoll_proc_state(pid_t pid, uint64_t start);

/* Whether a peer that published pid and start can be watched from here: its process is seen
 * now, with that start time (one in another pid namespace names nobody here, or somebody else). */
static inline int picoll_proc_watchable(pid_t pid, uint64_t start)
{
    return start != 0 && picoll_proc_state(pid, start) == PICOLL_PROC_ALIVE;
}

#endif
