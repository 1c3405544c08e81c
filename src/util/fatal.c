#include "build-config.h"
#include "util/fatal.h"
#include "util/config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void picoll_abort_job(void)
{
    /* give the launcher a moment to forward the error line: MPICH's tears the job down at the
     * first MPI_Abort and, under load, was seen to drop what the ranks had just written */
    fflush(stderr);
    struct timespec pause = {.tv_nsec = 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    PMPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; should it, the job must still end */
}

int picoll_format_ranks(char *list, size_t len, const int *comm_ranks, const unsigned char *missing,
                        int n, int which)
{
    int off = 0, count = 0;
    snprintf(list, len, "?");
    for (int r = 0; r < n; r++) {
        if (which == 0 ? missing[r] == 0 : missing[r] != which) {
            continue;
        }
        if (off < (int)len - 16) {
            off +=
                snprintf(list + off, len - (size_t)off, "%s%d", count ? ", " : "", comm_ranks[r]);
        }
        count++;
    }
    return count;
}

void picoll_fatal_missing(const char *coll, int comm_size, const int *comm_ranks,
                          const unsigned char *missing, int n, double timeout)
{
    char list[256];
    picoll_format_ranks(list, sizeof(list), comm_ranks, missing, n, 0);
    picoll_fatal("%s on a communicator of size %d: rank(s) %s did not arrive within %g s "
                 "(PICOLL_TIMEOUT; raise it if they are only slow): aborting the job",
                 coll, comm_size, list, timeout);
}

void picoll_wait_verdict(const char *coll, int comm_size, const int *comm_ranks,
                         const unsigned char *missing, int n, int ngone, int nunwatched,
                         int expired, double waited, double timeout)
{
    char list[256];
    if (ngone > 0) {
        picoll_format_ranks(list, sizeof(list), comm_ranks, missing, n, 2);
        picoll_fatal("%s on a communicator of size %d: rank(s) %s exited while the others waited "
                     "for them (their processes are gone): aborting the job",
                     coll, comm_size, list);
    }
    if (!expired) {
        return;
    }
    if (picoll_cfg.timeout_action == PICOLL_TIMEOUT_ABORT) {
        picoll_fatal_missing(coll, comm_size, comm_ranks, missing, n, timeout);
    }
    picoll_format_ranks(list, sizeof(list), comm_ranks, missing, n, 0);
    picoll_warn("%s on a communicator of size %d: still waiting after %.0f s for rank(s) %s; %s "
                "(PICOLL_TIMEOUT=%g; PICOLL_TIMEOUT_ACTION=abort ends the job instead)",
                coll, comm_size, waited, list,
                nunwatched == 0 ? "they are alive" : "picoll cannot see whether they are alive",
                timeout);
}
