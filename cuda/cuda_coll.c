/* The device collectives on the workspace: per-call set-up (device, stream ordering), the chunk
 * loops and the kernel launches, and the end of a call (synchronise, report a timeout).
 *
 * Stream ordering: picoll works on its own non-blocking stream, which first waits for an event
 * recorded on the legacy default stream (so everything the application queued there, and on
 * every blocking stream, before the call is finished first) and for one recorded on the calling
 * thread's per-thread default stream (applications built with --default-stream per-thread). Work
 * on the application's own non-blocking streams must be synchronised by the application, as with
 * any MPI. The call returns after the stream is synchronised: the result is in the receive
 * buffer. */
#include "build-config.h"
#include "coll/algs.h"
#include "cuda/cuda_ws.h"
#include "host/shm.h"
#include "log.h"

#include <string.h>

static picoll_cuda_type_t coll_type(picoll_dtype_t dt)
{
    switch (dt) {
    case PICOLL_DT_INT8: return PICOLL_CUDA_T_I8;
    case PICOLL_DT_UINT8: return PICOLL_CUDA_T_U8;
    case PICOLL_DT_INT16: return PICOLL_CUDA_T_I16;
    case PICOLL_DT_UINT16: return PICOLL_CUDA_T_U16;
    case PICOLL_DT_INT32: return PICOLL_CUDA_T_I32;
    case PICOLL_DT_UINT32: return PICOLL_CUDA_T_U32;
    case PICOLL_DT_INT64: return PICOLL_CUDA_T_I64;
    case PICOLL_DT_UINT64: return PICOLL_CUDA_T_U64;
    case PICOLL_DT_FLOAT: return PICOLL_CUDA_T_F32;
    case PICOLL_DT_DOUBLE: return PICOLL_CUDA_T_F64;
    case PICOLL_DT_FLOAT16: return PICOLL_CUDA_T_F16;
    case PICOLL_DT_BFLOAT16: return PICOLL_CUDA_T_BF16;
    case PICOLL_DT_FLOAT_COMPLEX: return PICOLL_CUDA_T_C32;
    case PICOLL_DT_DOUBLE_COMPLEX: return PICOLL_CUDA_T_C64;
    /* 0/1 bytes under LAND/LOR/LXOR and bytes under BAND/BOR/BXOR: uint8 gives the same bits */
    case PICOLL_DT_BOOL: return PICOLL_CUDA_T_U8;
    case PICOLL_DT_BYTE: return PICOLL_CUDA_T_U8;
    default: return PICOLL_CUDA_T_NONE; /* long double: no device arithmetic for it */
    }
}

/* The device of a device buffer, or -1 (host, managed, unknown). */
static int coll_device_of(const void *ptr)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

int picoll_cuda_buffers_device(const void *sendbuf, const void *recvbuf)
{
    int rdev = coll_device_of(recvbuf);
    int sdev = sendbuf == MPI_IN_PLACE ? rdev : coll_device_of(sendbuf);
    return sdev == rdev ? rdev : -1;
}

int picoll_cuda_vote(const picoll_cuda_ws_t *ws, const void *sendbuf, const void *recvbuf,
                     picoll_dtype_t dt, int *home)
{
    int rdev = coll_device_of(recvbuf);
    int sdev = sendbuf == MPI_IN_PLACE ? rdev : coll_device_of(sendbuf);
    *home = rdev < 0 || sdev != rdev || rdev == ws->device;
    if (dt != PICOLL_DT_NONE && coll_type(dt) == PICOLL_CUDA_T_NONE) {
        return 0;
    }
    return rdev == ws->device && sdev == ws->device;
}

/* Past the agreement a rank cannot fall back alone: a CUDA failure ends the job. */
static void coll_fatal(const char *coll, const char *call, cudaError_t err)
{
    picoll_error("%s on the device: %s failed (%s): aborting the job", coll, call,
                 cudaGetErrorString(err));
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

static picoll_cuda_saved_ctx_t coll_begin(picoll_cuda_ws_t *ws, const char *coll)
{
    picoll_cuda_saved_ctx_t prev;
    cudaError_t err = picoll_cuda_enter(ws->device, &prev);
    if (err == cudaSuccess) {
        err = cudaEventRecord(ws->ready, cudaStreamLegacy);
    }
    if (err == cudaSuccess) {
        err = cudaStreamWaitEvent(ws->stream, ws->ready, 0);
    }
    if (err == cudaSuccess) {
        err = cudaEventRecord(ws->ready, cudaStreamPerThread);
    }
    if (err == cudaSuccess) {
        err = cudaStreamWaitEvent(ws->stream, ws->ready, 0);
    }
    if (err != cudaSuccess) {
        coll_fatal(coll, "ordering after the default streams", err);
    }
    return prev;
}

static void coll_end(picoll_cuda_ws_t *ws, picoll_cuda_saved_ctx_t prev, const char *coll)
{
    cudaError_t err = cudaStreamSynchronize(ws->stream);
    if (ws->err->timed_out) {
        unsigned char missing[PICOLL_CUDA_MAX_LOCAL];
        for (int r = 0; r < ws->nlocal; r++) {
            missing[r] = ws->err->missing[r];
        }
        picoll_timeout_abort(coll, ws->comm_size, ws->comm_ranks, missing, ws->nlocal, ws->timeout);
    }
    if (err != cudaSuccess) {
        coll_fatal(coll, "cudaStreamSynchronize", err);
    }
    picoll_cuda_leave(&prev);
}

/* The parameters every launch on ws shares. */
static void coll_params(const picoll_cuda_ws_t *ws, int mode, picoll_cuda_kparams_t *p)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->nranks = ws->nlocal;
    p->me = ws->me;
    p->max_blocks = ws->max_blocks;
    p->timeout_ns = (uint64_t)(ws->timeout * 1e9);
    p->err = ws->err_dev;
    p->type = PICOLL_CUDA_T_NONE;
    p->esize = 1;
    p->peers = ws->peers;
    for (int r = 0; r < ws->nlocal; r++) {
        if (ws->peer[r] != NULL) { /* hcm: only the quad and the relay are mapped */
            p->slot[0][r] = picoll_cuda_slot(ws, r, 0);
            p->slot[1][r] = picoll_cuda_slot(ws, r, 1);
            p->flags[r] = (uint64_t *)(void *)ws->peer[r];
        }
    }
    for (int k = 0; k < 4; k++) {
        p->quad[k] = ws->quad[k];
    }
    p->relay = ws->relay;
    p->quad_first = ws->quad_first;
}

static void coll_launch(picoll_cuda_ws_t *ws, picoll_cuda_kparams_t *p, int arrivals,
                        const char *coll)
{
    p->epoch = ws->epoch + 1;
    int err = picoll_cuda_kernel_launch(p, ws->stream);
    if (err != cudaSuccess) {
        coll_fatal(coll, "the kernel launch", (cudaError_t)err);
    }
    ws->epoch += (uint64_t)arrivals;
    ws->last_epoch = ws->epoch;
    ws->last_blocks = picoll_cuda_kernel_blocks(p);
}

picoll_status_t picoll_cuda_allreduce(picoll_cuda_ws_t *ws, const picoll_allreduce_args_t *args,
                                      int alg)
{
    int mode = alg == PICOLL_ALLREDUCE_CUDA_HCM       ? PICOLL_CUDA_K_HCM
               : alg == PICOLL_ALLREDUCE_CUDA_TWOSHOT ? PICOLL_CUDA_K_TWOSHOT
                                                      : PICOLL_CUDA_K_ONESHOT;
    const char *coll = "MPI_Allreduce";
    size_t esize = picoll_dtype_size(args->dtype);
    size_t bytes = args->count * esize;
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    char *dst = args->recvbuf;
    picoll_cuda_kparams_t p;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, mode, &p);
    p.type = coll_type(args->dtype);
    p.op = (int)args->op;
    p.esize = (int)esize;
    /* slot_size is a multiple of 4 KiB: every chunk holds whole elements */
    for (size_t off = 0; off < bytes; off += ws->slot_size) {
        p.bytes = bytes - off < ws->slot_size ? bytes - off : ws->slot_size;
        p.src = src + off;
        p.dst = dst + off;
        coll_launch(ws, &p, mode == PICOLL_CUDA_K_ONESHOT ? 1 : 2, coll);
    }
    coll_end(ws, prev, coll);
    return PICOLL_OK;
}

picoll_status_t picoll_cuda_allgather(picoll_cuda_ws_t *ws, const picoll_blocks_args_t *args)
{
    const char *coll = "MPI_Allgather";
    size_t block = args->block_bytes;
    int in_place = args->sendbuf == MPI_IN_PLACE;
    const char *mine = in_place ? (const char *)args->recvbuf + (size_t)ws->me * block
                                : (const char *)args->sendbuf;
    picoll_cuda_kparams_t p;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, PICOLL_CUDA_K_ALLGATHER, &p);
    p.skip_self = in_place;
    p.dst_stride = block;
    for (size_t off = 0; off < block; off += ws->slot_size) {
        p.bytes = block - off < ws->slot_size ? block - off : ws->slot_size;
        p.src = mine + off;
        p.dst = (char *)args->recvbuf + off;
        coll_launch(ws, &p, 1, coll);
    }
    coll_end(ws, prev, coll);
    return PICOLL_OK;
}

picoll_status_t picoll_cuda_alltoall(picoll_cuda_ws_t *ws, const picoll_blocks_args_t *args)
{
    const char *coll = "MPI_Alltoall";
    size_t block = args->block_bytes;
    size_t piece_max = ws->slot_size / (size_t)ws->nlocal / 16 * 16;
    const char *src = args->sendbuf == MPI_IN_PLACE ? args->recvbuf : args->sendbuf;
    picoll_cuda_kparams_t p;
    picoll_cuda_saved_ctx_t prev = coll_begin(ws, coll);

    coll_params(ws, PICOLL_CUDA_K_ALLTOALL, &p);
    p.src_stride = block;
    p.dst_stride = block;
    for (size_t off = 0; off < block; off += piece_max) {
        p.bytes = block - off < piece_max ? block - off : piece_max;
        p.src = src + off;
        p.dst = (char *)args->recvbuf + off;
        coll_launch(ws, &p, 1, coll);
    }
    coll_end(ws, prev, coll);
    return PICOLL_OK;
}
