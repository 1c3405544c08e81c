#include "build-config.h"
#include "util/proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads /proc/PID/stat: *state (field 3) and the start time (field 22). 0 when it cannot, with
 * errno set (ENOENT: no such process). */
static int proc_stat(pid_t pid, char *state, uint64_t *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name (field 2) is in parentheses and may hold spaces and parentheses */
    char *p = strrchr(buf, ')');
    if (p == NULL || p[1] != ' ') {
        errno = EINVAL;
        return 0;
    }
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (p == NULL) {
            errno = EINVAL;
            return 0;
        }
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 1;
}

uint64_t picoll_proc_start_time(pid_t pid)
{
    char state;
    uint64_t start = 0;
    return pid > 0 && proc_stat(pid, &state, &start) ? start : 0;
}

picoll_proc_state_t picoll_proc_state(pid_t pid, uint64_t start)
{
    char state = '?';
    uint64_t now = 0;
    if (pid <= 0 || start == 0) {
        return PICOLL_PROC_UNKNOWN;
    }
    if (!proc_stat(pid, &state, &now)) {
        return errno == ENOENT || errno == ESRCH ? PICOLL_PROC_GONE : PICOLL_PROC_UNKNOWN;
    }
    if (now != start || state == 'Z' || state == 'X') {
        return PICOLL_PROC_GONE;
    }
    return PICOLL_PROC_ALIVE;
}
