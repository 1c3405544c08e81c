/* Staging of CUDA buffers through pinned host memory (see staging.h), the wrappers of the
 * collectives picoll only stages, and MPIX_Query_cuda_support.
 *
 * Stream ordering: every copy is a cuMemcpy on the legacy default stream with the context of the
 * buffer's own device pushed. The legacy default stream waits for all work already queued on it
 * and on every blocking stream of that context (the application's default stream, PyTorch's
 * included), and a copy to host memory returns when the bytes have arrived; a copy back to the
 * device is followed by a synchronisation of that stream. So the inputs are read after the
 * application's queued work, and the call returns with the result in the receive buffer. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "core.h"
#include "cudrv.h"
#include "half_ops.h"
#include "memkind.h"
#include "pinned.h"
#include "staging.h"

#include <limits.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

enum { STAGE_IN = 1, STAGE_OUT = 2 }; /* no flag: not a buffer of this rank in this call */
#define STAGE_MAX 2

typedef struct {
    const void *user;      /* as the application passed it */
    void *pass;            /* what PMPI gets: user, or the host copy shifted by -lo */
    MPI_Datatype type;
    MPI_Aint count;        /* elements from user, when counts is NULL */
    int nblocks;           /* v-collectives: counts[i] elements at displs[i] elements */
    const int *counts, *displs;
    int flags;
    int staged;            /* device or managed memory */
    picoll_meminfo_t info;
    char *host;            /* pinned copy of [user + lo, user + lo + bytes) */
    MPI_Aint lo;
    size_t bytes;
} stage_buf_t;

typedef struct {
    MPI_Comm comm;
    int valid;             /* an intracommunicator, and the root one of its ranks */
    int rank, size;
    int n, any, failed;
    stage_buf_t b[STAGE_MAX];
} stage_t;

#define NO_ROOT INT_MIN /* the root argument of a collective that has none */

/* Starts a call on comm: valid when comm is an intracommunicator and root (unless NO_ROOT) one
 * of its ranks. Buffers of an invalid call are never looked at: it goes to PMPI untouched. */
static void stage_comm(stage_t *s, MPI_Comm comm, int root)
{
    int inter = 1;
    s->comm = comm;
    s->n = s->any = s->failed = 0;
    s->rank = -1;
    s->size = 0;
    s->valid = comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS &&
               !inter && PMPI_Comm_rank(comm, &s->rank) == MPI_SUCCESS &&
               PMPI_Comm_size(comm, &s->size) == MPI_SUCCESS &&
               (root == NO_ROOT || (root >= 0 && root < s->size));
}

static void stage_add(stage_t *s, const void *ptr, MPI_Datatype type, MPI_Aint count, int nblocks,
                      const int *counts, const int *displs, int flags)
{
    stage_buf_t *b = &s->b[s->n++];
    *b = (stage_buf_t){.user = ptr, .pass = (void *)ptr, .type = type, .count = count,
                       .nblocks = nblocks, .counts = counts, .displs = displs, .flags = flags};
    if (!s->valid || flags == 0 || ptr == NULL || ptr == MPI_IN_PLACE) {
        return;
    }
    picoll_memkind_query(ptr, &b->info);
    b->staged = b->info.kind == PICOLL_MEM_DEVICE || b->info.kind == PICOLL_MEM_MANAGED;
    s->any |= b->staged;
}

/* The bytes the buffer's blocks cover, from the type's true extent; -1 for arguments PMPI must
 * judge. An output whose span the call may not write entirely (gaps in the type, between
 * blocks) is copied in too, so that the copy back leaves those bytes as they were. */
static int stage_span(stage_buf_t *b)
{
    MPI_Aint lb, extent, tlb, textent, lo = 0, hi = 0;
    int size, empty = 1, dense;

    if (b->type == MPI_DATATYPE_NULL ||
        (b->nblocks > 0 && (b->counts == NULL || b->displs == NULL)) ||
        PMPI_Type_get_extent(b->type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(b->type, &tlb, &textent) != MPI_SUCCESS ||
        PMPI_Type_size(b->type, &size) != MPI_SUCCESS) {
        return -1;
    }
    dense = b->nblocks == 0 && tlb == 0 && textent == extent && extent == (MPI_Aint)size;
    for (int i = 0; i < (b->nblocks > 0 ? b->nblocks : 1); i++) {
        MPI_Aint count = b->nblocks > 0 ? b->counts[i] : b->count;
        MPI_Aint first = (b->nblocks > 0 ? b->displs[i] : 0) * extent + tlb;
        MPI_Aint last = first + (count - 1) * extent;
        if (count < 0) {
            return -1;
        }
        if (count == 0 || size == 0) {
            continue;
        }
        MPI_Aint a = first < last ? first : last, z = (first < last ? last : first) + textent;
        lo = empty || a < lo ? a : lo;
        hi = empty || z > hi ? z : hi;
        empty = 0;
    }
    b->lo = lo;
    b->bytes = empty ? 0 : (size_t)(hi - lo);
    if ((b->flags & STAGE_OUT) && !dense) {
        b->flags |= STAGE_IN;
    }
    return 0;
}

static void stage_release(stage_t *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->b[i].host != NULL) {
            picoll_pinned_put(s->b[i].host);
            s->b[i].host = NULL;
        }
    }
}

static int stage_error(stage_t *s, int rc)
{
    PMPI_Comm_call_errhandler(s->comm, rc);
    return rc;
}

/* Copies the inputs to host memory and points the pass pointers at the copies. Where nothing is
 * staged, or PMPI must judge the arguments, the pass pointers stay the application's own.
 * Returns 0, then the caller runs PMPI on the pass pointers and ends with stage_end; or -1 with
 * *rc the error, already raised. */
static int stage_begin(stage_t *s, int *rc)
{
    if (!s->any) {
        return 0;
    }
    for (int i = 0; i < s->n; i++) {
        if (s->b[i].staged && stage_span(&s->b[i]) != 0) {
            return 0; /* nothing copied: the call goes to PMPI untouched */
        }
    }
    for (int i = 0; i < s->n; i++) {
        stage_buf_t *b = &s->b[i];
        if (!b->staged || b->bytes == 0) {
            continue;
        }
        if (picoll_pinned_get(b->bytes, b->info.context, (void **)&b->host) != PICOLL_OK) {
            stage_release(s);
            *rc = stage_error(s, MPI_ERR_NO_MEM);
            return -1;
        }
        b->pass = (void *)((uintptr_t)b->host - (uintptr_t)b->lo);
        /* a failed copy still joins the call, so that the other ranks are not left waiting */
        if ((b->flags & STAGE_IN) &&
            picoll_cudrv_copy(b->host, (const char *)b->user + b->lo, b->bytes, b->info.context) !=
                PICOLL_OK) {
            s->failed = 1;
        }
    }
    return 0;
}

static int stage_end(stage_t *s, int rc)
{
    for (int i = 0; i < s->n && rc == MPI_SUCCESS; i++) {
        stage_buf_t *b = &s->b[i];
        if (b->host != NULL && (b->flags & STAGE_OUT) &&
            picoll_cudrv_copy((char *)b->user + b->lo, b->host, b->bytes, b->info.context) !=
                PICOLL_OK) {
            s->failed = 1;
        }
    }
    stage_release(s);
    if (rc == MPI_SUCCESS && s->failed) {
        rc = stage_error(s, MPI_ERR_OTHER);
    }
    return rc;
}

/* the receive buffer's flags: an input too when the send buffer is MPI_IN_PLACE */
#define SEND_IN_PLACE(sendbuf, flags_if_not)                                                       \
    ((sendbuf) == MPI_IN_PLACE ? STAGE_IN | STAGE_OUT : (flags_if_not))

int picoll_staged_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm)
{
    stage_t s;
    int rc;
    stage_comm(&s, comm, NO_ROOT);
    stage_add(&s, sendbuf, type, count, 0, NULL, NULL, STAGE_IN);
    stage_add(&s, recvbuf, type, count, 0, NULL, NULL, SEND_IN_PLACE(sendbuf, STAGE_OUT));
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Allreduce(s.b[0].pass, s.b[1].pass, count, type, op, comm);
    return stage_end(&s, rc);
}

/* Allgather and alltoall take the same arguments; the send buffer holds one block (allgather)
 * or one per rank (alltoall). */
typedef int (*blocks_fn_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);

static int staged_blocks(blocks_fn_t pmpi_fn, int send_blocks_per_rank, const void *sendbuf,
                         int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, MPI_Comm comm)
{
    stage_t s;
    int rc;
    stage_comm(&s, comm, NO_ROOT);
    stage_add(&s, sendbuf, sendtype, (MPI_Aint)(send_blocks_per_rank ? s.size : 1) * sendcount,
              0, NULL, NULL, STAGE_IN);
    stage_add(&s, recvbuf, recvtype, (MPI_Aint)s.size * recvcount, 0, NULL, NULL,
              SEND_IN_PLACE(sendbuf, STAGE_OUT));
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = pmpi_fn(s.b[0].pass, sendcount, sendtype, s.b[1].pass, recvcount, recvtype, comm);
    return stage_end(&s, rc);
}

int picoll_staged_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return staged_blocks(PMPI_Allgather, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, comm);
}

int picoll_staged_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                           void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    return staged_blocks(PMPI_Alltoall, 1, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, comm);
}

/* ---- the collectives picoll only stages: straight to PMPI unless staging is on ---- */

#define STAGING_OFF() (!picoll_g.staging || picoll_reentry)

EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    stage_t s;
    int rc;
    if (STAGING_OFF()) {
        return PMPI_Bcast(buffer, count, type, root, comm);
    }
    stage_comm(&s, comm, root);
    stage_add(&s, buffer, type, count, 0, NULL, NULL, s.rank == root ? STAGE_IN : STAGE_OUT);
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Bcast(s.b[0].pass, count, type, root, comm);
    return stage_end(&s, rc);
}

EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                      int root, MPI_Comm comm)
{
    stage_t s;
    int rc;
    picoll_half_ops_translate(&type, &op);
    if (STAGING_OFF()) {
        return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    }
    stage_comm(&s, comm, root);
    stage_add(&s, sendbuf, type, count, 0, NULL, NULL, STAGE_IN);
    stage_add(&s, recvbuf, type, count, 0, NULL, NULL,
              s.rank == root ? SEND_IN_PLACE(sendbuf, STAGE_OUT) : 0);
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Reduce(s.b[0].pass, s.b[1].pass, count, type, op, root, comm);
    return stage_end(&s, rc);
}

/* Gather and scatter take the same arguments; the root's receive buffer (gather) or send buffer
 * (scatter) holds one block per rank and is looked at only on the root. */
typedef int (*rooted_fn_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int,
                           MPI_Comm);

static int staged_rooted(rooted_fn_t pmpi_fn, int gather, const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, void *recvbuf, int recvcount,
                         MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    stage_t s;
    int rc;
    if (STAGING_OFF()) {
        return pmpi_fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    }
    stage_comm(&s, comm, root);
    int at_root = s.rank == root;
    stage_add(&s, sendbuf, sendtype, (MPI_Aint)(gather ? 1 : s.size) * sendcount, 0, NULL, NULL,
              gather || at_root ? STAGE_IN : 0);
    stage_add(&s, recvbuf, recvtype, (MPI_Aint)(gather ? s.size : 1) * recvcount, 0, NULL, NULL,
              !gather ? STAGE_OUT : at_root ? SEND_IN_PLACE(sendbuf, STAGE_OUT) : 0);
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = pmpi_fn(s.b[0].pass, sendcount, sendtype, s.b[1].pass, recvcount, recvtype, root, comm);
    return stage_end(&s, rc);
}

EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return staged_rooted(PMPI_Gather, 1, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, comm);
}

EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    return staged_rooted(PMPI_Scatter, 0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, comm);
}

EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                          MPI_Comm comm)
{
    stage_t s;
    int rc;
    if (STAGING_OFF()) {
        return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                               comm);
    }
    stage_comm(&s, comm, NO_ROOT);
    stage_add(&s, sendbuf, sendtype, sendcount, 0, NULL, NULL, STAGE_IN);
    stage_add(&s, recvbuf, recvtype, 0, s.size, recvcounts, displs,
              SEND_IN_PLACE(sendbuf, STAGE_OUT));
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Allgatherv(s.b[0].pass, sendcount, sendtype, s.b[1].pass, recvcounts, displs,
                         recvtype, comm);
    return stage_end(&s, rc);
}

EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                         MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                         const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    stage_t s;
    int rc;
    if (STAGING_OFF()) {
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
    }
    stage_comm(&s, comm, NO_ROOT);
    stage_add(&s, sendbuf, sendtype, 0, s.size, sendcounts, sdispls, STAGE_IN);
    stage_add(&s, recvbuf, recvtype, 0, s.size, recvcounts, rdispls,
              SEND_IN_PLACE(sendbuf, STAGE_OUT));
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Alltoallv(s.b[0].pass, sendcounts, sdispls, sendtype, s.b[1].pass, recvcounts,
                        rdispls, recvtype, comm);
    return stage_end(&s, rc);
}

EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                    MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    stage_t s;
    int rc;
    picoll_half_ops_translate(&type, &op);
    if (STAGING_OFF()) {
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    }
    stage_comm(&s, comm, NO_ROOT);
    stage_add(&s, sendbuf, type, (MPI_Aint)s.size * recvcount, 0, NULL, NULL, STAGE_IN);
    /* in place, the input is the whole of recvbuf */
    stage_add(&s, recvbuf, type, sendbuf == MPI_IN_PLACE ? (MPI_Aint)s.size * recvcount : recvcount,
              0, NULL, NULL, SEND_IN_PLACE(sendbuf, STAGE_OUT));
    if (stage_begin(&s, &rc) != 0) {
        return rc;
    }
    rc = PMPI_Reduce_scatter_block(s.b[0].pass, s.b[1].pass, recvcount, type, op, comm);
    return stage_end(&s, rc);
}

/* ---- MPIX_Query_cuda_support ---- */

/* Open MPI declares it in mpi-ext.h, MPICH in mpi.h: declared here for both. */
int MPIX_Query_cuda_support(void);

EXPORT int MPIX_Query_cuda_support(void)
{
    const char *how;
    if (picoll_g.cuda.active) {
        return 1;
    }
    if (picoll_g.initialized) {
        return picoll_g.cuda.mpi_aware;
    }
    return picoll_mpi_cuda_aware(&how); /* before MPI_Init, or with picoll off */
}
