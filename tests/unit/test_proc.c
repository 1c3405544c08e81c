/* util/proc: a process is alive while it runs or is stopped, and gone once it exited (a zombie,
 * reaped, or its pid now naming another process); unknown when nothing was published. */
#include "build-config.h" /* _GNU_SOURCE, as in src/ */
#include "util/proc.h"
#include "check.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    uint64_t me = picoll_proc_start_time(getpid());
    CHECK(me != 0, "this process's start time");
    CHECK(picoll_proc_state(getpid(), me) == PICOLL_PROC_ALIVE, "picoll_proc_alive");
    /* the same pid with another start time: a reused pid, not the process published */
    CHECK(picoll_proc_state(getpid(), me + 1) == PICOLL_PROC_GONE, "picoll_proc_gone");
    /* nothing published: cannot tell */
    CHECK(picoll_proc_state(getpid(), 0) == PICOLL_PROC_UNKNOWN, "picoll_proc_unknown");
    CHECK(picoll_proc_state(0, me) == PICOLL_PROC_UNKNOWN, "picoll_proc_unknown");

    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    CHECK(child > 0, "fork");
    uint64_t start = 0;
    for (int i = 0; i < 1000 && start == 0; i++) {
        start = picoll_proc_start_time(child);
    }
    CHECK(start != 0, "the child's start time");
    CHECK(picoll_proc_state(child, start) == PICOLL_PROC_ALIVE, "picoll_proc_alive");
    /* stopped (a rank in a debugger, SIGSTOP): late, not gone */
    kill(child, SIGSTOP);
    int st;
    waitpid(child, &st, WUNTRACED);
    CHECK(picoll_proc_state(child, start) == PICOLL_PROC_ALIVE, "picoll_proc_alive");
    /* killed and not yet reaped: a zombie is gone */
    kill(child, SIGKILL);
    siginfo_t info;
    waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT);
    CHECK(picoll_proc_state(child, start) == PICOLL_PROC_GONE, "picoll_proc_gone");
    /* reaped: no such process */
    waitpid(child, &st, 0);
    CHECK(picoll_proc_state(child, start) == PICOLL_PROC_GONE, "picoll_proc_gone");
    return check_summary("proc");
}
