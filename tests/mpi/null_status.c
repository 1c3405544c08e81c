/* MPI_Request_get_status on MPI_REQUEST_NULL returns MPI's empty status, every field of it
 * (MPI 4.1, section 3.7.3: source MPI_ANY_SOURCE, tag MPI_ANY_TAG, error MPI_SUCCESS, no elements,
 * not cancelled), whatever the status held before; and flag true. Open MPI 4.1 leaves MPI_ERROR as
 * it was, so that this fails there without picoll's wrapper (MPICH's test pt2pt/rqstatus). */
#include "mpitest.h"

#include <string.h>

static void check(const char *what, int fill)
{
    MPI_Status st;
    memset(&st, fill, sizeof(st));
    int flag = 0, count = -1, cancelled = -1;
    int rc = MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    MPI_Test_cancelled(&st, &cancelled);
    if (rc != MPI_SUCCESS || !flag || st.MPI_SOURCE != MPI_ANY_SOURCE ||
        st.MPI_TAG != MPI_ANY_TAG || st.MPI_ERROR != MPI_SUCCESS || count != 0 || cancelled != 0) {
        mt_fail("%s: rc %d flag %d source %d tag %d error %d count %d cancelled %d", what, rc, flag,
                st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR, count, cancelled);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    mt_load_picoll(argc > 1 && strcmp(argv[1], "--expect-picoll") == 0);
    check("status filled with 0x5a", 0x5a);
    check("status filled with 0xff", 0xff);
    check("status filled with 0", 0);
    /* a completed request afterwards: the empty status did not stick */
    int x = mt_rank, y = -1;
    MPI_Request req;
    MPI_Status st;
    int flag = 0;
    MPI_Irecv(&y, 1, MPI_INT, 0, 7, MPI_COMM_SELF, &req);
    MPI_Send(&x, 1, MPI_INT, 0, 7, MPI_COMM_SELF);
    while (!flag) {
        MPI_Request_get_status(req, &flag, &st);
    }
    if (st.MPI_SOURCE != 0 || st.MPI_TAG != 7 || y != x) {
        mt_fail("a live request's status: source %d tag %d value %d", st.MPI_SOURCE, st.MPI_TAG, y);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return mt_finish("null_status");
}
