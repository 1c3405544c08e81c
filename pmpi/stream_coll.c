/* The collective enqueues (pmpi/stream_int.h): on picoll's kernels on the stream where the
 * communicator has them, else handed to the progress thread. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "util/export.h"
#include "pmpi/classify.h"
#include "pmpi/stream_int.h"

#include <picoll.h>

#include <stddef.h>

/* Bytes of count elements of type where they lie contiguously from the buffer's start; -1 where
 * they do not (holes, a lower bound or extent of their own). */
static long long contig_bytes(int count, MPI_Datatype type)
{
    int size = 0;
    MPI_Aint lb, extent, tlb, textent;
    if (count <= 0) {
        return 0;
    }
    PMPI_Type_size(type, &size);
    PMPI_Type_get_extent(type, &lb, &extent);
    PMPI_Type_get_true_extent(type, &tlb, &textent);
    if (tlb != 0 || textent != size || extent != size) {
        return -1;
    }
    return (long long)count * size;
}

PICOLL_EXPORT int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count,
                                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    enq_t e;
    PICOLL_STREAM_OR_MPI(comm,
                         PMPIX_Allreduce_enqueue(sendbuf, recvbuf, count, datatype, op, comm));
    int rc = picoll_stream_enq_begin(&e, "MPIX_Allreduce_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    e.o->kind = OP_ALLREDUCE;
    e.o->mop = op;
    picoll_enq_args_t a = {.coll = PICOLL_COLL_ALLREDUCE,
                           .sendbuf = sendbuf,
                           .recvbuf = recvbuf,
                           .count = (size_t)(count < 0 ? 0 : count),
                           .dtype = picoll_classify_dtype(datatype),
                           .op = picoll_classify_op(op)};
    a.bytes = a.count * picoll_dtype_size(a.dtype); /* the type's size: here only */
    long long bytes = (long long)a.bytes;
    if (a.dtype != PICOLL_DT_NONE &&
        picoll_stream_enq_kernels(&e, &a, bytes, bytes, sendbuf == MPI_IN_PLACE, &rc)) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, sendbuf, count, datatype, recvbuf, count, datatype,
                                   sendbuf == MPI_IN_PLACE);
    return rc != MPI_SUCCESS ? rc : picoll_stream_enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Reduce_scatter_block_enqueue(const void *sendbuf, void *recvbuf,
                                                    int recvcount, MPI_Datatype datatype, MPI_Op op,
                                                    MPI_Comm comm)
{
    enq_t e;
    int size = 1;
    int rc = picoll_stream_enq_begin(&e, "MPIX_Reduce_scatter_block_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_size(comm, &size);
    e.o->kind = OP_REDUCE_SCATTER_BLOCK;
    e.o->mop = op;
    /* in place: the input (recvcount * size elements) is in recvbuf */
    int in_place = sendbuf == MPI_IN_PLACE;
    picoll_enq_args_t a = {.coll = PICOLL_COLL_REDUCE_SCATTER_BLOCK,
                           .sendbuf = sendbuf,
                           .recvbuf = recvbuf,
                           .count = (size_t)(recvcount < 0 ? 0 : recvcount),
                           .dtype = picoll_classify_dtype(datatype),
                           .op = picoll_classify_op(op)};
    a.bytes = a.count * picoll_dtype_size(a.dtype); /* the type's size: here only */
    long long piece = (long long)a.bytes;
    if (a.dtype != PICOLL_DT_NONE &&
        picoll_stream_enq_kernels(&e, &a, piece * size, in_place ? piece * size : piece, in_place,
                                  &rc)) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, sendbuf, in_place ? 0 : recvcount * size, datatype, recvbuf,
                                   in_place ? recvcount * size : recvcount, datatype, in_place);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    e.o->rcount = recvcount;
    return picoll_stream_enq_commit(&e);
}

/* allgather, alltoall: the receive side holds size blocks; in place, the input is in it */
static int enq_blocks(const char *fn, op_kind_t kind, const void *sendbuf, int sendcount,
                      MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                      MPI_Comm comm)
{
    enq_t e;
    int size = 1;
    int rc = picoll_stream_enq_begin(&e, fn, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_size(comm, &size);
    e.o->kind = kind;
    int in_place = sendbuf == MPI_IN_PLACE;
    int sblocks = kind == OP_ALLTOALL ? size : 1;
    /* the path by the block's bytes (the same on every rank: the type signatures match); a
     * type that is not contiguous here (-1) cannot follow the others onto the kernels */
    int tsize = 0;
    PMPI_Type_size(recvtype, &tsize);
    long long block = contig_bytes(recvcount, recvtype);
    picoll_enq_args_t a = {.coll =
                               kind == OP_ALLTOALL ? PICOLL_COLL_ALLTOALL : PICOLL_COLL_ALLGATHER,
                           .sendbuf = sendbuf,
                           .recvbuf = recvbuf,
                           .count = recvcount < 0 ? 0 : (size_t)recvcount * (size_t)tsize,
                           .dtype = PICOLL_DT_NONE};
    a.bytes = a.count;
    long long sb = in_place ? 0 : contig_bytes(sendcount * sblocks, sendtype);
    if (picoll_stream_enq_kernels(&e, &a, sb, block < 0 ? -1 : block * size, in_place, &rc)) {
        return rc;
    }
    rc = picoll_stream_enq_buffers(&e, sendbuf, in_place ? 0 : sendcount * sblocks, sendtype,
                                   recvbuf, recvcount * size, recvtype, in_place);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    /* the MPI call takes the counts per block */
    e.o->scount = sendcount;
    e.o->rcount = recvcount;
    return picoll_stream_enq_commit(&e);
}

PICOLL_EXPORT int MPIX_Allgather_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                         void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                         MPI_Comm comm)
{
    return enq_blocks("MPIX_Allgather_enqueue", OP_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf,
                      recvcount, recvtype, comm);
}

PICOLL_EXPORT int MPIX_Alltoall_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void *recvbuf, int recvcount, MPI_Datatype recvtype,
                                        MPI_Comm comm)
{
    return enq_blocks("MPIX_Alltoall_enqueue", OP_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf,
                      recvcount, recvtype, comm);
}

PICOLL_EXPORT int MPIX_Bcast_enqueue(void *buffer, int count, MPI_Datatype datatype, int root,
                                     MPI_Comm comm)
{
    enq_t e;
    int me = 0;
    int rc = picoll_stream_enq_begin(&e, "MPIX_Bcast_enqueue", comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    PMPI_Comm_rank(comm, &me);
    e.o->kind = OP_BCAST;
    e.o->peer = root;
    int tsize = 0;
    PMPI_Type_size(datatype, &tsize);
    long long bytes = contig_bytes(count, datatype);
    picoll_enq_args_t a = {.coll = PICOLL_COLL_BCAST,
                           .sendbuf = MPI_IN_PLACE,
                           .recvbuf = buffer,
                           .count = count < 0 ? 0 : (size_t)count * (size_t)tsize,
                           .dtype = PICOLL_DT_NONE,
                           .root = root};
    a.bytes = a.count;
    if (picoll_stream_enq_kernels(&e, &a, 0, bytes, me == root, &rc)) {
        return rc;
    }
    /* the root's buffer is read (copied in, not back); the others' written (copied back) */
    rc = me == root ? picoll_stream_enq_buffers(&e, buffer, count, datatype, NULL, 0, datatype, 0)
                    : picoll_stream_enq_buffers(&e, NULL, 0, datatype, buffer, count, datatype, 0);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (me == root) {
        e.o->rbuf = (void *)e.o->sbuf;
    }
    e.o->rcount = count;
    e.o->rtype = datatype;
    return picoll_stream_enq_commit(&e);
}
