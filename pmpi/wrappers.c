/* The MPI functions picoll intercepts. They only classify the call and dispatch it: to picoll's
 * algorithms, or untouched to PMPI_*. Anything invalid goes to PMPI_* so that the application
 * sees the underlying MPI's own error. */
#include "build-config.h" /* first: _GNU_SOURCE before any system header (MPICH's mpi.h has some) */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "util/export.h"
#include "pmpi/classify.h"
#include "coll/dispatch.h"
#include "core/comm.h"
#include "core/core.h"
#include "pmpi/gen_wrappers.h"
#include "pmpi/half_ops.h"
#include "pmpi/records.h"
#include "coll/stats.h"
#include "cuda/cuda_kernel.h"
#include "util/wait.h"

/* Nonzero while this thread runs one of picoll's collectives for the application (inside its MPI
 * call, not inside the MPI): there it may call the MPI at any thread level. */
static _Thread_local int app_call __attribute__((tls_model("initial-exec")));

/* The MPI's progress from picoll's waits (util/wait.h): a collective the MPI runs itself drives
 * its progress engine while it waits, and with it the application's other transfers, such as a
 * nonblocking send whose rendezvous a peer needs before it can join the call (MPI's progress
 * rule). A rank waiting in picoll's barriers instead would wait for a peer stuck in MPI_Recv for
 * bytes this rank's MPI never moves on: a correct program hung (2 ranks, MPICH's shared memory,
 * or Open MPI without single-copy: tests/mpi/progress.c). A probe moves the MPI's engine on. */
static void mpi_progress(void)
{
    int flag;
    if (app_call > 0) {
        PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

static void init_done(int provided)
{
    picoll_init(provided);
    picoll_half_ops_init();
    picoll_classify_probe_chars();
    picoll_classify_check_fortran();
    picoll_wait_set_mpi_progress(mpi_progress);
}

PICOLL_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        init_done(provided);
    }
    return rc;
}

PICOLL_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        init_done(*provided);
    }
    return rc;
}

PICOLL_EXPORT int MPI_Finalize(void)
{
    picoll_wait_set_mpi_progress(NULL);
    picoll_orphans_poll(1); /* requests the application freed while active */
    picoll_half_ops_free();
    picoll_finalize();
    return PMPI_Finalize();
}

/* The size of comm's group, or of its remote group on an intercommunicator where remote is 1. */
static int group_size(MPI_Comm comm, int remote)
{
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter && remote) {
        PMPI_Comm_remote_size(comm, &n);
    } else {
        PMPI_Comm_size(comm, &n);
    }
    return n;
}

/* Stats and last path of a call handed to PMPI, counted only once PMPI accepted its arguments:
 * count elements of type (allgather, alltoall and reduce-scatter-block: per rank of the group). */
static void fallback_done(picoll_coll_t coll, int rc, MPI_Count count, MPI_Datatype type,
                          MPI_Comm comm)
{
    int tsize = 0;
    size_t bytes;
    if (picoll_reentry) {
        return;
    }
    picoll_last_set(coll, PICOLL_ALG_FALLBACK);
    if (!picoll_g.stats || rc != MPI_SUCCESS) {
        return;
    }
    PMPI_Type_size(type, &tsize);
    bytes = (size_t)count * (size_t)tsize;
    if (coll == PICOLL_COLL_ALLGATHER || coll == PICOLL_COLL_ALLTOALL ||
        coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK) {
        bytes *= (size_t)group_size(comm, 1);
    }
    picoll_stats_add(coll, PICOLL_ALG_FALLBACK, bytes);
}

/* fallback_done of a v-form: the sum of its receive counts (int, or MPI_Count where width says
 * so), one per rank of the group (reduce-scatter: the local one; else the remote one on an
 * intercommunicator), read only where the stats count them: whatever path the call took, on
 * host or device buffers. */
static void fallback_v_done(picoll_coll_t coll, int rc, const void *counts, size_t width,
                            MPI_Datatype type, MPI_Comm comm)
{
    MPI_Count sum = 0;
    if (picoll_g.stats && rc == MPI_SUCCESS && !picoll_reentry && counts != NULL) {
        int n = group_size(comm, coll != PICOLL_COLL_REDUCE_SCATTER);
        for (int r = 0; r < n; r++) {
            sum += width == sizeof(int) ? ((const int *)counts)[r] : ((const MPI_Count *)counts)[r];
        }
    }
    fallback_done(coll, rc, sum, type, comm);
}

/* 1 when picoll's own algorithms ran the call (*rc its return code); 0: the caller falls back. */
static int allreduce_accel(const void *sendbuf, void *recvbuf, MPI_Count count,
                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, int *rc)
{
    /* recvbuf MPI_IN_PLACE is erroneous: the MPI says so (its error class, its handler) */
    if (!picoll_g.active || picoll_reentry || count <= 0 || comm == MPI_COMM_NULL ||
        sendbuf == recvbuf || recvbuf == MPI_IN_PLACE) {
        return 0;
    }
    picoll_comm_t *ctx = picoll_comm_get(comm);
    /* neither executor can take it: no need to classify */
    if (ctx == NULL || !ctx->enabled ||
        (picoll_cfg.host == PICOLL_HOST_OFF && !ctx->coll.cuda_possible)) {
        return 0;
    }
    picoll_allreduce_args_t args = {
        .sendbuf = sendbuf,
        .recvbuf = recvbuf,
        .count = (size_t)count,
        .op = picoll_classify_op(op),
    };
    /* MPI_CHAR (osu_allreduce's default) first: it is not in the type table, whose search it
     * would otherwise walk to the end on every call */
    args.dtype = picoll_classify_char(datatype, args.op);
    if (args.dtype == PICOLL_DT_NONE) {
        args.dtype = picoll_classify_dtype(datatype);
    }
    if (args.dtype == PICOLL_DT_NONE || args.op == PICOLL_OP_NONE ||
        !picoll_op_valid(args.dtype, args.op)) {
        return 0;
    }
    int alg;
    app_call++;
    int ran = picoll_allreduce(&ctx->coll, &args, &alg, rc) == PICOLL_OK;
    app_call--;
    return ran;
}

PICOLL_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int rc;
    if (allreduce_accel(sendbuf, recvbuf, count, datatype, op, comm, &rc)) {
        return rc;
    }
    /* one predictable branch in there when there is no CUDA driver: picoll_g.staging is 0 */
    rc = picoll_stage_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    fallback_done(PICOLL_COLL_ALLREDUCE, rc, count, datatype, comm);
    return rc;
}

#ifdef PICOLL_HAVE_MPI_Allreduce_c
PICOLL_EXPORT int MPI_Allreduce_c(const void *sendbuf, void *recvbuf, MPI_Count count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int rc;
    if (allreduce_accel(sendbuf, recvbuf, count, datatype, op, comm, &rc)) {
        return rc;
    }
    rc = picoll_stage_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
    fallback_done(PICOLL_COLL_ALLREDUCE, rc, count, datatype, comm);
    return rc;
}
#endif

/* Allgather and alltoall: picoll copies blocks as bytes, so both types must be contiguous
 * predefined ones. Types may differ between ranks (only the type signatures must match), so a rank
 * whose types picoll cannot copy still joins the algorithm's vote, with a "no": every rank then
 * falls back together. Fills args; returns 0 when the call goes straight to PMPI (arguments that
 * PMPI must judge). */
/* The bytes of an element of type: those picoll copies (*copyable 1), or for a type it does not
 * (a derived one) its size, which still tells every rank the same message size where the type
 * signatures match; 0 where the MPI does not know it either. */
static size_t type_bytes(MPI_Datatype type, int *copyable)
{
    size_t e = type == MPI_DATATYPE_NULL ? 0 : picoll_classify_copy_size(type);
    int tsize = 0;
    *copyable = e != 0;
    if (e == 0 && type != MPI_DATATYPE_NULL && PMPI_Type_size(type, &tsize) == MPI_SUCCESS &&
        tsize > 0) {
        e = (size_t)tsize;
    }
    return e;
}

static int blocks_args(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                       void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                       picoll_blocks_args_t *args)
{
    size_t relem;

    if (recvcount <= 0 || sendbuf == recvbuf || recvbuf == MPI_IN_PLACE ||
        (relem = type_bytes(recvtype, &args->eligible)) == 0) {
        return 0;
    }
    args->sendbuf = sendbuf;
    args->recvbuf = recvbuf;
    args->block_bytes = (size_t)recvcount * relem;
    if (sendbuf != MPI_IN_PLACE && args->eligible) {
        size_t selem = picoll_classify_copy_size(sendtype);
        args->eligible =
            selem != 0 && sendcount > 0 && (size_t)sendcount * selem == args->block_bytes;
    }
    return 1;
}

typedef picoll_status_t (*blocks_alg_t)(picoll_coll_ctx_t *, const picoll_blocks_args_t *, int *,
                                        int *);

static int blocks_accel(blocks_alg_t alg, const void *sendbuf, MPI_Count sendcount,
                        MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, int *rc)
{
    picoll_blocks_args_t args;
    if (!picoll_g.active || picoll_reentry || comm == MPI_COMM_NULL ||
        !blocks_args(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, &args)) {
        return 0;
    }
    picoll_comm_t *ctx = picoll_comm_get(comm);
    int ran, done = 0;
    if (ctx != NULL && ctx->enabled) {
        app_call++;
        done = alg(&ctx->coll, &args, &ran, rc) == PICOLL_OK;
        app_call--;
    }
    return done;
}

/* MPI_Allgather, MPI_Alltoall and their large-count forms: picoll's algorithm, else the staging
 * fallback the table generates. */
#define BLOCKS_WRAPPER(NAME, COUNT_T, ALG, COLL)                                                   \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, COUNT_T sendcount, MPI_Datatype sendtype,    \
                                 void *recvbuf, COUNT_T recvcount, MPI_Datatype recvtype,          \
                                 MPI_Comm comm)                                                    \
    {                                                                                              \
        int rc;                                                                                    \
        if (blocks_accel(ALG, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,    \
                         &rc)) {                                                                   \
            return rc;                                                                             \
        }                                                                                          \
        rc =                                                                                       \
            picoll_stage_##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); \
        fallback_done(COLL, rc, recvcount, recvtype, comm);                                        \
        return rc;                                                                                 \
    }

BLOCKS_WRAPPER(Allgather, int, picoll_allgather, PICOLL_COLL_ALLGATHER)
BLOCKS_WRAPPER(Alltoall, int, picoll_alltoall, PICOLL_COLL_ALLTOALL)
#ifdef PICOLL_HAVE_MPI_Allgather_c
BLOCKS_WRAPPER(Allgather_c, MPI_Count, picoll_allgather, PICOLL_COLL_ALLGATHER)
#endif
#ifdef PICOLL_HAVE_MPI_Alltoall_c
BLOCKS_WRAPPER(Alltoall_c, MPI_Count, picoll_alltoall, PICOLL_COLL_ALLTOALL)
#endif

/* ---- reduce-scatter, bcast, reduce and allgatherv: picoll's device path only (CUDA device buffers on every
 * rank of a one-node communicator), else the staging fallback the table generates ---- */

/* The reduction of a call, classified as allreduce_accel does; 0 when picoll cannot reduce it. */
static int device_reduction(MPI_Datatype datatype, MPI_Op op, picoll_device_args_t *args)
{
    args->op = picoll_classify_op(op);
    args->dtype = picoll_classify_char(datatype, args->op);
    if (args->dtype == PICOLL_DT_NONE) {
        args->dtype = picoll_classify_dtype(datatype);
    }
    return args->dtype != PICOLL_DT_NONE && args->op != PICOLL_OP_NONE &&
           picoll_op_valid(args->dtype, args->op);
}

/* The communicator's context where the device path may take the call: every rank has a CUDA
 * device (no barrier is paid otherwise). Jobs where some world rank has none never look (no
 * context is made for a communicator these calls alone use). */
static picoll_comm_t *device_comm(MPI_Comm comm)
{
    if (!picoll_g.active || !picoll_g.cuda_everywhere || picoll_reentry || comm == MPI_COMM_NULL) {
        return NULL;
    }
    picoll_comm_t *ctx = picoll_comm_get(comm);
    return ctx != NULL && ctx->enabled && ctx->coll.cuda_possible ? ctx : NULL;
}

static int device_accel(picoll_comm_t *ctx, picoll_device_args_t *args, int *rc)
{
    args->me = ctx->rank;
    int alg;
    app_call++;
    int ran = picoll_device_only(&ctx->coll, args, &alg, rc) == PICOLL_OK;
    app_call--;
    return ran;
}

/* MPI_Reduce_scatter_block and MPI_Reduce_scatter: counts of every rank (equal for the block
 * form). In place, the input is in recvbuf. */
static int reduce_scatter_accel(picoll_coll_t coll, const void *sendbuf, void *recvbuf,
                                const size_t *counts, MPI_Datatype datatype, MPI_Op op,
                                picoll_comm_t *ctx, int *rc)
{
    picoll_device_args_t args = {
        .coll = coll, .sendbuf = sendbuf, .recvbuf = recvbuf, .counts = counts};
    int uneven = 0;
    for (int r = 1; r < ctx->coll.size; r++) {
        uneven |= counts[r] != counts[0];
    }
    /* in place with uneven pieces: a rank's result would overwrite input pieces that other blocks
     * of its kernel still read */
    args.eligible = device_reduction(datatype, op, &args) && !(uneven && sendbuf == MPI_IN_PLACE);
    return device_accel(ctx, &args, rc);
}

#define REDUCE_SCATTER_BLOCK_WRAPPER(NAME, COUNT_T)                                                \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, COUNT_T recvcount,            \
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)                  \
    {                                                                                              \
        size_t counts[PICOLL_CUDA_MAX_LOCAL];                                                      \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc;                                                                                    \
        if (ctx != NULL && recvcount > 0 && sendbuf != recvbuf && recvbuf != MPI_IN_PLACE &&       \
            ctx->coll.size <= PICOLL_CUDA_MAX_LOCAL) {                                             \
            for (int r = 0; r < ctx->coll.size; r++) {                                             \
                counts[r] = (size_t)recvcount;                                                     \
            }                                                                                      \
            if (reduce_scatter_accel(PICOLL_COLL_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, counts,   \
                                     datatype, op, ctx, &rc)) {                                    \
                return rc;                                                                         \
            }                                                                                      \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, recvbuf, recvcount, datatype, op, comm);                 \
        fallback_done(PICOLL_COLL_REDUCE_SCATTER_BLOCK, rc, recvcount, datatype, comm);            \
        return rc;                                                                                 \
    }

#define REDUCE_SCATTER_WRAPPER(NAME, COUNT_T)                                                      \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, const COUNT_T recvcounts[],   \
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)                  \
    {                                                                                              \
        size_t counts[PICOLL_CUDA_MAX_LOCAL], sum = 0;                                             \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc, ok = ctx != NULL && recvcounts != NULL && sendbuf != recvbuf &&                    \
                     recvbuf != MPI_IN_PLACE && ctx->coll.size <= PICOLL_CUDA_MAX_LOCAL;           \
        for (int r = 0; ok && r < ctx->coll.size; r++) {                                           \
            ok = recvcounts[r] >= 0;                                                               \
            counts[r] = (size_t)recvcounts[r];                                                     \
            sum += counts[r];                                                                      \
        }                                                                                          \
        if (ok && sum > 0 &&                                                                       \
            reduce_scatter_accel(PICOLL_COLL_REDUCE_SCATTER, sendbuf, recvbuf, counts, datatype,   \
                                 op, ctx, &rc)) {                                                  \
            return rc;                                                                             \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, recvbuf, recvcounts, datatype, op, comm);                \
        fallback_v_done(PICOLL_COLL_REDUCE_SCATTER, rc, recvcounts, sizeof(recvcounts[0]),         \
                        datatype, comm);                                                           \
        return rc;                                                                                 \
    }

/* Bcast: copied as bytes, so the type must be one picoll copies (types may differ between ranks,
 * their sizes not: a rank that cannot copy its type votes no). */
#define BCAST_WRAPPER(NAME, COUNT_T)                                                               \
    PICOLL_EXPORT int MPI_##NAME(void *buffer, COUNT_T count, MPI_Datatype datatype, int root,     \
                                 MPI_Comm comm)                                                    \
    {                                                                                              \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc;                                                                                    \
        int copyable;                                                                              \
        size_t esize = ctx != NULL ? type_bytes(datatype, &copyable) : 0;                          \
        if (esize != 0 && count > 0 && root >= 0 && root < ctx->coll.size) {                       \
            picoll_device_args_t args = {.coll = PICOLL_COLL_BCAST,                                \
                                         .recvbuf = buffer,                                        \
                                         .count = (size_t)count * esize,                           \
                                         .root = root,                                             \
                                         .eligible = copyable};                                    \
            if (device_accel(ctx, &args, &rc)) {                                                   \
                return rc;                                                                         \
            }                                                                                      \
        }                                                                                          \
        rc = picoll_stage_##NAME(buffer, count, datatype, root, comm);                             \
        fallback_done(PICOLL_COLL_BCAST, rc, count, datatype, comm);                               \
        return rc;                                                                                 \
    }

/* Reduce: a leaf's receive buffer is not significant; in place only at the root. */
#define REDUCE_WRAPPER(NAME, COUNT_T)                                                              \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, void *recvbuf, COUNT_T count,                \
                                 MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)        \
    {                                                                                              \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc;                                                                                    \
        if (ctx != NULL && count > 0 && root >= 0 && root < ctx->coll.size) {                      \
            int at_root = ctx->rank == root;                                                       \
            picoll_device_args_t args = {.coll = PICOLL_COLL_REDUCE,                               \
                                         .sendbuf = sendbuf,                                       \
                                         .recvbuf = recvbuf,                                       \
                                         .count = (size_t)count,                                   \
                                         .root = root};                                            \
            args.eligible = device_reduction(datatype, op, &args) &&                               \
                            (at_root ? sendbuf != recvbuf && recvbuf != MPI_IN_PLACE               \
                                     : sendbuf != MPI_IN_PLACE);                                   \
            if (device_accel(ctx, &args, &rc)) {                                                   \
                return rc;                                                                         \
            }                                                                                      \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, recvbuf, count, datatype, op, root, comm);               \
        fallback_done(PICOLL_COLL_REDUCE, rc, count, datatype, comm);                              \
        return rc;                                                                                 \
    }

/* Allgatherv: blocks copied as bytes at their displacements (a predefined type's extent is its
 * size); the receive bytes, from the counts every rank passes alike, decide the path. */
#define ALLGATHERV_WRAPPER(NAME, COUNT_T, DISP_T)                                                  \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, COUNT_T sendcount, MPI_Datatype sendtype,    \
                                 void *recvbuf, const COUNT_T recvcounts[], const DISP_T displs[], \
                                 MPI_Datatype recvtype, MPI_Comm comm)                             \
    {                                                                                              \
        size_t bytes[PICOLL_CUDA_MAX_LOCAL], offs[PICOLL_CUDA_MAX_LOCAL], sum = 0;                 \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc, copyable = 0;                                                                      \
        size_t relem = ctx != NULL ? type_bytes(recvtype, &copyable) : 0;                          \
        int ok = relem != 0 && recvcounts != NULL && displs != NULL && sendbuf != recvbuf &&       \
                 recvbuf != MPI_IN_PLACE && ctx->coll.size <= PICOLL_CUDA_MAX_LOCAL;               \
        for (int r = 0; ok && r < ctx->coll.size; r++) {                                           \
            ok = recvcounts[r] >= 0 && displs[r] >= 0;                                             \
            bytes[r] = (size_t)recvcounts[r] * relem;                                              \
            offs[r] = (size_t)displs[r] * relem;                                                   \
            sum += bytes[r];                                                                       \
        }                                                                                          \
        if (ok && sum > 0) {                                                                       \
            picoll_device_args_t args = {.coll = PICOLL_COLL_ALLGATHERV,                           \
                                         .sendbuf = sendbuf,                                       \
                                         .recvbuf = recvbuf,                                       \
                                         .counts = bytes,                                          \
                                         .displs = offs,                                           \
                                         .eligible = copyable};                                    \
            if (sendbuf != MPI_IN_PLACE && copyable) {                                             \
                size_t selem = picoll_classify_copy_size(sendtype);                                \
                args.eligible =                                                                    \
                    selem != 0 && sendcount >= 0 && (size_t)sendcount * selem == bytes[ctx->rank]; \
            }                                                                                      \
            if (device_accel(ctx, &args, &rc)) {                                                   \
                return rc;                                                                         \
            }                                                                                      \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,        \
                                 recvtype, comm);                                                  \
        fallback_v_done(PICOLL_COLL_ALLGATHERV, rc, recvcounts, sizeof(recvcounts[0]), recvtype,   \
                        comm);                                                                     \
        return rc;                                                                                 \
    }

/* Alltoallv: pieces copied as bytes at their displacements, one contiguous predefined type on both
 * sides. A rank knows only its own pieces, so every condition of its own is a vote: a rank whose
 * arguments the device path cannot take (in place, another type, a negative count) still joins
 * the vote, with a "no", and every rank falls back together. */
#define ALLTOALLV_WRAPPER(NAME, COUNT_T, DISP_T)                                                   \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, const COUNT_T sendcounts[],                  \
                                 const DISP_T sdispls[], MPI_Datatype sendtype, void *recvbuf,     \
                                 const COUNT_T recvcounts[], const DISP_T rdispls[],               \
                                 MPI_Datatype recvtype, MPI_Comm comm)                             \
    {                                                                                              \
        size_t sb[PICOLL_CUDA_MAX_LOCAL], so[PICOLL_CUDA_MAX_LOCAL];                               \
        size_t rb[PICOLL_CUDA_MAX_LOCAL], ro[PICOLL_CUDA_MAX_LOCAL];                               \
        picoll_comm_t *ctx = device_comm(comm);                                                    \
        int rc;                                                                                    \
        if (ctx != NULL && ctx->coll.size <= PICOLL_CUDA_MAX_LOCAL) {                              \
            size_t e = recvtype == sendtype ? picoll_classify_copy_size(recvtype) : 0;             \
            int ok = e != 0 && sendbuf != MPI_IN_PLACE && recvbuf != MPI_IN_PLACE &&               \
                     sendbuf != recvbuf && sendcounts != NULL && sdispls != NULL &&                \
                     recvcounts != NULL && rdispls != NULL;                                        \
            for (int r = 0; r < ctx->coll.size; r++) {                                             \
                ok = ok && sendcounts[r] >= 0 && sdispls[r] >= 0 && recvcounts[r] >= 0 &&          \
                     rdispls[r] >= 0;                                                              \
                sb[r] = ok ? (size_t)sendcounts[r] * e : 0;                                        \
                so[r] = ok ? (size_t)sdispls[r] * e : 0;                                           \
                rb[r] = ok ? (size_t)recvcounts[r] * e : 0;                                        \
                ro[r] = ok ? (size_t)rdispls[r] * e : 0;                                           \
            }                                                                                      \
            picoll_device_args_t args = {.coll = PICOLL_COLL_ALLTOALLV,                            \
                                         .sendbuf = sendbuf,                                       \
                                         .recvbuf = recvbuf,                                       \
                                         .counts = sb,                                             \
                                         .displs = so,                                             \
                                         .rcounts = rb,                                            \
                                         .rdispls = ro,                                            \
                                         .eligible = ok};                                          \
            if (device_accel(ctx, &args, &rc)) {                                                   \
                return rc;                                                                         \
            }                                                                                      \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,      \
                                 rdispls, recvtype, comm);                                         \
        fallback_v_done(PICOLL_COLL_ALLTOALLV, rc, recvcounts, sizeof(recvcounts[0]), recvtype,    \
                        comm);                                                                     \
        return rc;                                                                                 \
    }

REDUCE_SCATTER_BLOCK_WRAPPER(Reduce_scatter_block, int)
REDUCE_SCATTER_WRAPPER(Reduce_scatter, int)
BCAST_WRAPPER(Bcast, int)
REDUCE_WRAPPER(Reduce, int)
ALLGATHERV_WRAPPER(Allgatherv, int, int)
#ifdef PICOLL_HAVE_MPI_Allgatherv_c
ALLGATHERV_WRAPPER(Allgatherv_c, MPI_Count, MPI_Aint)
#endif
ALLTOALLV_WRAPPER(Alltoallv, int, int)
#ifdef PICOLL_HAVE_MPI_Alltoallv_c
ALLTOALLV_WRAPPER(Alltoallv_c, MPI_Count, MPI_Aint)
#endif
#ifdef PICOLL_HAVE_MPI_Reduce_scatter_block_c
REDUCE_SCATTER_BLOCK_WRAPPER(Reduce_scatter_block_c, MPI_Count)
#endif
#ifdef PICOLL_HAVE_MPI_Reduce_scatter_c
REDUCE_SCATTER_WRAPPER(Reduce_scatter_c, MPI_Count)
#endif
#ifdef PICOLL_HAVE_MPI_Bcast_c
BCAST_WRAPPER(Bcast_c, MPI_Count)
#endif
#ifdef PICOLL_HAVE_MPI_Reduce_c
REDUCE_WRAPPER(Reduce_c, MPI_Count)
#endif
