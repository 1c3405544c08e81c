/* osu-bench/fake_nccl/libnccl.so.2: NCCL's entry points that the --nccl column calls, done with
 * MPI (PMPI, so a preloaded picoll stays out of it) on memory the CPU can read: the emulated GPU's
 * device memory (tests/cuda/emu). Testing only, never installed: it lets the tests run the NCCL
 * column's plumbing (loading, the communicator, the calls on the same buffers, the stream
 * synchronisation, validation, the rows and the driver's tables) without a GPU. Calls complete
 * before they return, so the stream has nothing to wait for. It exports fakenccl_over_mpi, which
 * the benchmark requires of an NCCL it runs on the emulated GPU. The communicator is the world's
 * ranks in the NCCL ranks' order; the version is 0.0.0, so that no output passes it off as a
 * real NCCL's. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

typedef struct {
    char internal[128];
} fake_unique_id_t;

typedef struct fake_comm {
    MPI_Comm comm;
} fake_comm_t;

enum { OK = 0, INVALID_ARGUMENT = 4, INTERNAL = 3 }; /* ncclSuccess, ncclInvalidArgument, ... */

FAKE_API const int fakenccl_over_mpi = 1;

/* The sends and receives of the group being built (ncclGroupStart .. ncclGroupEnd). */
static MPI_Request *requests;
static int nrequests, capacity, group_depth;

static MPI_Datatype mpi_type(int t)
{
    switch (t) {
    case 0: return MPI_SIGNED_CHAR;
    case 2: return MPI_INT;
    case 7: return MPI_FLOAT;
    case 8: return MPI_DOUBLE;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(int op)
{
    switch (op) {
    case 0: return MPI_SUM;
    case 1: return MPI_PROD;
    case 2: return MPI_MAX;
    case 3: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

FAKE_API int ncclGetVersion(int *version)
{
    *version = 0;
    return OK;
}

FAKE_API const char *ncclGetErrorString(int rc)
{
    return rc == OK                 ? "no error"
           : rc == INVALID_ARGUMENT ? "invalid argument (fake NCCL)"
                                    : "MPI error (fake NCCL)";
}

FAKE_API int ncclGetUniqueId(fake_unique_id_t *id)
{
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, "fake-nccl", 9);
    return OK;
}

FAKE_API int ncclCommInitRank(fake_comm_t **out, int nranks, fake_unique_id_t id, int rank)
{
    fake_comm_t *c;
    int size = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    if (nranks != size || memcmp(id.internal, "fake-nccl", 9) != 0) {
        return INVALID_ARGUMENT;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || PMPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c->comm) != MPI_SUCCESS) {
        free(c);
        return INTERNAL;
    }
    *out = c;
    return OK;
}

FAKE_API int ncclCommDestroy(fake_comm_t *c)
{
    PMPI_Comm_free(&c->comm);
    free(c);
    return OK;
}

FAKE_API int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                           fake_comm_t *c, void *stream)
{
    (void)stream;
    if (mpi_type(type) == MPI_DATATYPE_NULL || mpi_op(op) == MPI_OP_NULL) {
        return INVALID_ARGUMENT;
    }
    return PMPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, mpi_type(type),
                          mpi_op(op), c->comm) == MPI_SUCCESS
               ? OK
               : INTERNAL;
}

FAKE_API int ncclAllGather(const void *send, void *recv, size_t count, int type, fake_comm_t *c,
                           void *stream)
{
    int rank = 0, esize = 0;
    (void)stream;
    if (mpi_type(type) == MPI_DATATYPE_NULL) {
        return INVALID_ARGUMENT;
    }
    PMPI_Comm_rank(c->comm, &rank);
    PMPI_Type_size(mpi_type(type), &esize);
    /* NCCL's in place: the send buffer is this rank's block of the receive buffer */
    if ((const char *)send == (const char *)recv + (size_t)rank * count * (size_t)esize) {
        send = MPI_IN_PLACE;
    }
    return PMPI_Allgather(send, (int)count, mpi_type(type), recv, (int)count, mpi_type(type),
                          c->comm) == MPI_SUCCESS
               ? OK
               : INTERNAL;
}

static int add_request(void)
{
    if (nrequests == capacity) {
        int n = capacity ? 2 * capacity : 16;
        MPI_Request *r = realloc(requests, (size_t)n * sizeof(*r));
        if (r == NULL) {
            return -1;
        }
        requests = r;
        capacity = n;
    }
    return nrequests++;
}

static int complete(void)
{
    int rc = MPI_SUCCESS;
    /* one at a time: MPICH's header makes compilers read MPI_STATUSES_IGNORE as an empty array */
    for (int i = 0; i < nrequests && rc == MPI_SUCCESS; i++) {
        rc = PMPI_Wait(&requests[i], MPI_STATUS_IGNORE);
    }
    nrequests = 0;
    return rc == MPI_SUCCESS ? OK : INTERNAL;
}

FAKE_API int ncclGroupStart(void)
{
    group_depth++;
    return OK;
}

FAKE_API int ncclGroupEnd(void)
{
    if (group_depth == 0) {
        return INVALID_ARGUMENT;
    }
    return --group_depth == 0 ? complete() : OK;
}

FAKE_API int ncclSend(const void *buf, size_t count, int type, int peer, fake_comm_t *c,
                      void *stream)
{
    int i = add_request();
    (void)stream;
    if (i < 0 || mpi_type(type) == MPI_DATATYPE_NULL ||
        PMPI_Isend(buf, (int)count, mpi_type(type), peer, 0, c->comm, &requests[i]) !=
            MPI_SUCCESS) {
        return INTERNAL;
    }
    return group_depth == 0 ? complete() : OK;
}

FAKE_API int ncclRecv(void *buf, size_t count, int type, int peer, fake_comm_t *c, void *stream)
{
    int i = add_request();
    (void)stream;
    if (i < 0 || mpi_type(type) == MPI_DATATYPE_NULL ||
        PMPI_Irecv(buf, (int)count, mpi_type(type), peer, 0, c->comm, &requests[i]) !=
            MPI_SUCCESS) {
        return INTERNAL;
    }
    return group_depth == 0 ? complete() : OK;
}
