/* The MPI functions picoll intercepts. They only classify the call and dispatch it: to picoll's
 * algorithms, or untouched to PMPI_*. Anything invalid goes to PMPI_* so that the application
 * sees the underlying MPI's own error. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/export.h"
#include "pmpi/classify.h"
#include "coll/dispatch.h"
#include "core/comm.h"
#include "core/core.h"
#include "pmpi/gen_wrappers.h"
#include "pmpi/half_ops.h"
#include "pmpi/records.h"
#include "coll/stats.h"


PICOLL_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        picoll_init(provided);
        picoll_half_ops_init();
        picoll_classify_probe_chars();
        picoll_classify_check_fortran();
    }
    return rc;
}

PICOLL_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) {
        picoll_init(*provided);
        picoll_half_ops_init();
        picoll_classify_probe_chars();
        picoll_classify_check_fortran();
    }
    return rc;
}

PICOLL_EXPORT int MPI_Finalize(void)
{
    picoll_orphans_poll(1); /* requests the application freed while active */
    picoll_half_ops_free();
    picoll_finalize();
    return PMPI_Finalize();
}

/* Stats and last path of a call handed to PMPI, counted only once PMPI accepted its arguments. */
static void fallback_done(picoll_coll_t coll, int rc, MPI_Count count, MPI_Datatype type,
                          MPI_Comm comm)
{
    int tsize = 0, csize = 1, inter = 0;
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
    return picoll_allreduce(&ctx->coll, &args, rc) != PICOLL_ALG_FALLBACK;
}

PICOLL_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm)
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
static int blocks_args(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                       void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                       picoll_blocks_args_t *args)
{
    size_t relem = picoll_classify_copy_size(recvtype);
    int tsize;

    if (recvcount <= 0 || recvtype == MPI_DATATYPE_NULL || sendbuf == recvbuf ||
        recvbuf == MPI_IN_PLACE) {
        return 0;
    }
    args->sendbuf = sendbuf;
    args->recvbuf = recvbuf;
    if (relem != 0) {
        args->block_bytes = (size_t)recvcount * relem;
        args->eligible = 1;
    } else {
        /* a derived type: its size still tells every rank's block size */
        if (PMPI_Type_size(recvtype, &tsize) != MPI_SUCCESS || tsize <= 0) {
            return 0;
        }
        args->block_bytes = (size_t)recvcount * (size_t)tsize;
        args->eligible = 0;
    }
    if (sendbuf != MPI_IN_PLACE && args->eligible) {
        size_t selem = picoll_classify_copy_size(sendtype);
        args->eligible = selem != 0 && sendcount > 0 &&
                         (size_t)sendcount * selem == args->block_bytes;
    }
    return 1;
}

typedef int (*blocks_alg_t)(picoll_coll_ctx_t *, const picoll_blocks_args_t *, int *);

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
    return ctx != NULL && ctx->enabled && alg(&ctx->coll, &args, rc) != PICOLL_ALG_FALLBACK;
}

/* MPI_Allgather, MPI_Alltoall and their large-count forms: picoll's algorithm, else the staging
 * fallback the table generates. */
#define BLOCKS_WRAPPER(NAME, COUNT_T, ALG, COLL)                                                   \
    PICOLL_EXPORT int MPI_##NAME(const void *sendbuf, COUNT_T sendcount, MPI_Datatype sendtype,           \
                          void *recvbuf, COUNT_T recvcount, MPI_Datatype recvtype, MPI_Comm comm)  \
    {                                                                                              \
        int rc;                                                                                    \
        if (blocks_accel(ALG, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,    \
                         &rc)) {                                                                   \
            return rc;                                                                             \
        }                                                                                          \
        rc = picoll_stage_##NAME(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,       \
                                 comm);                                                            \
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
