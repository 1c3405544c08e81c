#include "build-config.h"
#include "util/fatal.h"

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
            off += snprintf(list + off, len - (size_t)off, "%s%d", count ? ", " : "",
                            comm_ranks[r]);
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
