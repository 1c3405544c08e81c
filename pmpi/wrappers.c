/* The MPI functions picoll intercepts. They only classify the call and dispatch it: to picoll's
 * algorithms, or untouched to PMPI_*. Anything invalid goes to PMPI_* so that the application
 * sees the underlying MPI's own error. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "classify.h"
#include "coll/dispatch.h"
#include "comm.h"
#include "core.h"
#include "stats.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        picoll_init(provided);
    }
    return rc;
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        picoll_init(*provided);
    }
    return rc;
}

EXPORT int MPI_Finalize(void)
{
    picoll_finalize();
    return PMPI_Finalize();
}

/* Stats of a call handed to PMPI, counted only once PMPI accepted its arguments. */
static void count_fallback(picoll_coll_t coll, int count, MPI_Datatype type, MPI_Comm comm)
{
    int tsize = 0, csize = 1, inter = 0;
    size_t bytes;
    PMPI_Type_size(type, &tsize);
    bytes = (size_t)count * (size_t)tsize;
    if (coll != PICOLL_COLL_ALLREDUCE) {
        PMPI_Comm_test_inter(comm, &inter);
        if (inter) {
            PMPI_Comm_remote_size(comm, &csize);
        } else {
            PMPI_Comm_size(comm, &csize);
        }
        bytes *= (size_t)csize;
    }
    picoll_stats_add(coll, PICOLL_ALG_FALLBACK, bytes);
}

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm)
{
    int rc;
    if (picoll_g.active && !picoll_reentry && count > 0 && comm != MPI_COMM_NULL &&
        sendbuf != recvbuf) {
        picoll_allreduce_args_t args = {
            .sendbuf = sendbuf,
            .recvbuf = recvbuf,
            .count = (size_t)count,
            .dtype = picoll_classify_dtype(datatype),
            .op = picoll_classify_op(op),
        };
        if (args.dtype != PICOLL_DT_NONE && args.op != PICOLL_OP_NONE &&
            picoll_op_valid(args.dtype, args.op)) {
            picoll_comm_t *ctx = picoll_comm_get(comm);
            if (ctx != NULL && ctx->enabled &&
                picoll_allreduce(ctx, &args, &rc) != PICOLL_ALG_FALLBACK) {
                return rc;
            }
        }
    }
    rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    if (picoll_g.stats && !picoll_reentry && rc == MPI_SUCCESS) {
        count_fallback(PICOLL_COLL_ALLREDUCE, count, datatype, comm);
    }
    return rc;
}

/* Allgather and alltoall take the same checks: contiguous predefined types on both sides with
 * equal block sizes. Returns the bytes of one block, or 0 when the call goes to PMPI. */
static size_t block_bytes(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                          MPI_Datatype recvtype)
{
    picoll_dtype_t rdt = picoll_classify_dtype(recvtype);
    size_t bytes;
    if (recvcount <= 0 || rdt == PICOLL_DT_NONE) {
        return 0;
    }
    bytes = (size_t)recvcount * picoll_dtype_size(rdt);
    if (sendbuf != MPI_IN_PLACE) {
        picoll_dtype_t sdt = picoll_classify_dtype(sendtype);
        if (sdt == PICOLL_DT_NONE || sendcount <= 0 ||
            (size_t)sendcount * picoll_dtype_size(sdt) != bytes) {
            return 0;
        }
    }
    return bytes;
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc;
    if (picoll_g.active && !picoll_reentry && comm != MPI_COMM_NULL && sendbuf != recvbuf) {
        picoll_blocks_args_t args = {
            .sendbuf = sendbuf,
            .recvbuf = recvbuf,
            .block_bytes = block_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype),
        };
        if (args.block_bytes != 0) {
            picoll_comm_t *ctx = picoll_comm_get(comm);
            if (ctx != NULL && ctx->enabled &&
                picoll_allgather(ctx, &args, &rc) != PICOLL_ALG_FALLBACK) {
                return rc;
            }
        }
    }
    rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    if (picoll_g.stats && !picoll_reentry && rc == MPI_SUCCESS) {
        count_fallback(PICOLL_COLL_ALLGATHER, recvcount, recvtype, comm);
    }
    return rc;
}

EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rc;
    if (picoll_g.active && !picoll_reentry && comm != MPI_COMM_NULL && sendbuf != recvbuf) {
        picoll_blocks_args_t args = {
            .sendbuf = sendbuf,
            .recvbuf = recvbuf,
            .block_bytes = block_bytes(sendbuf, sendcount, sendtype, recvcount, recvtype),
        };
        if (args.block_bytes != 0) {
            picoll_comm_t *ctx = picoll_comm_get(comm);
            if (ctx != NULL && ctx->enabled &&
                picoll_alltoall(ctx, &args, &rc) != PICOLL_ALG_FALLBACK) {
                return rc;
            }
        }
    }
    rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    if (picoll_g.stats && !picoll_reentry && rc == MPI_SUCCESS) {
        count_fallback(PICOLL_COLL_ALLTOALL, recvcount, recvtype, comm);
    }
    return rc;
}
