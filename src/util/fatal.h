/* The one way picoll ends a job: an error line that names what was lost, a flush, a moment for the
 * launcher to forward it, MPI_Abort on MPI_COMM_WORLD. Only for what leaves no way back: a peer
 * that never arrives inside a collective all ranks already agreed to run, a CUDA failure past that
 * agreement, memory exhausted in the middle of a set-up exchange that the other ranks are in. */
#ifndef PICOLL_FATAL_H
#define PICOLL_FATAL_H

#include "util/log.h"

#include <stddef.h>

/* Flush, pause, MPI_Abort. */
__attribute__((noreturn)) void picoll_abort_job(void);

/* An error line (printf format), then picoll_abort_job(). */
#define picoll_fatal(...)                                                                          \
    do {                                                                                           \
        picoll_error(__VA_ARGS__);                                                                 \
        picoll_abort_job();                                                                        \
    } while (0)

/* "1, 4": the ranks of the user's communicator (comm_ranks[r] for local rank r, of n) whose
 * missing[r] is set (which 0: any nonzero value; else that value), into list; "?" for none.
 * Returns how many there are. */
int picoll_format_ranks(char *list, size_t len, const int *comm_ranks, const unsigned char *missing,
                        int n, int which);

/* A wait inside coll passed PICOLL_TIMEOUT (timeout seconds): names the ranks of the user's
 * communicator (of comm_size ranks) that did not arrive (missing[r] != 0 for local rank r, of n;
 * comm_ranks[r] its rank in the communicator) and ends the job. */
__attribute__((noreturn)) void picoll_fatal_missing(const char *coll, int comm_size,
                                                    const int *comm_ranks,
                                                    const unsigned char *missing, int n,
                                                    double timeout);

/* What a wait that looked at the ranks it waits for concludes (missing[r]: 1 late, 2 gone; ngone of
 * them gone, nunwatched of them beyond picoll's sight): a gone one ends the job, naming it; past
 * PICOLL_TIMEOUT (expired) the late ones are named, in a "still waiting after <waited> s" line, or
 * with PICOLL_TIMEOUT_ACTION=abort in the end of the job. Returns when the wait goes on. */
void picoll_wait_verdict(const char *coll, int comm_size, const int *comm_ranks,
                         const unsigned char *missing, int n, int ngone, int nunwatched,
                         int expired, double waited, double timeout);

#endif
