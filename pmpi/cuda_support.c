/* MPIX_Query_cuda_support: 1 whenever picoll's CUDA support is active (CUDA buffers are staged or
 * go to picoll's own algorithms), else the underlying MPI's own answer. And the GPU's floors for
 * benchmarks (picoll_device_floor, picoll_device_barrier_floor). */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include <sys/types.h> /* ssize_t (picoll_cuda_alloc) */
#include "util/export.h"
#include "util/log.h"
#include "cuda/cuda_dev.h"
#include "core/comm.h"
#include "core/core.h"
#include "mem/cuda_state.h"

/* Open MPI declares it in mpi-ext.h, MPICH in mpi.h: declared here for both. */
int MPIX_Query_cuda_support(void);
/* include/picoll.h's (its PICOLL_FLOOR_* are cuda_dev.h's PICOLL_CUDA_FLOOR_*) */
int picoll_device_floor(int what, void *cuda_stream, int n, size_t bytes, double *seconds);
int picoll_device_barrier_floor(MPI_Comm comm, int what, void *cuda_stream, int n, double *seconds);
int picoll_register(MPI_Comm comm, void *ptr, size_t bytes, void **handle);
int picoll_deregister(void *handle);
void *picoll_cuda_alloc(ssize_t size, int device, void *stream);
void picoll_cuda_free(void *ptr, ssize_t size, int device, void *stream);

PICOLL_EXPORT int MPIX_Query_cuda_support(void)
{
    const char *how;
    if (picoll_cuda.active) {
        return 1;
    }
    if (picoll_g.initialized) {
        return picoll_cuda.mpi_aware;
    }
    return picoll_mpi_cuda_aware(&how); /* before MPI_Init, or with picoll off */
}

PICOLL_EXPORT int picoll_device_floor(int what, void *cuda_stream, int n, size_t bytes,
                                      double *seconds)
{
    char why[256] = "";
    if (seconds == NULL) {
        picoll_warn("picoll_device_floor: seconds is NULL");
        return MPI_ERR_ARG;
    }
    picoll_status_t st = picoll_cuda_floor(what, cuda_stream, n, bytes, seconds, why, sizeof(why));
    if (st != PICOLL_OK) {
        picoll_warn("picoll_device_floor: %s", why);
    }
    return st == PICOLL_OK                  ? MPI_SUCCESS
           : st == PICOLL_ERR_INVALID_PARAM ? MPI_ERR_ARG
                                            : MPI_ERR_OTHER;
}

PICOLL_EXPORT int picoll_device_barrier_floor(MPI_Comm comm, int what, void *cuda_stream, int n,
                                              double *seconds)
{
    char why[256] = "";
    picoll_status_t st = PICOLL_ERR_NOT_SUPPORTED;
    picoll_comm_t *ctx = picoll_g.active && comm != MPI_COMM_NULL ? picoll_comm_get(comm) : NULL;
    picoll_cuda_ws_t *ws = ctx == NULL              ? NULL
                           : ctx->coll.cuda != NULL ? ctx->coll.cuda
                                                    : ctx->coll.cuda_enq;
    if (seconds == NULL) {
        st = PICOLL_ERR_INVALID_PARAM;
        snprintf(why, sizeof(why), "seconds is NULL");
    } else if (ws == NULL) {
        snprintf(why, sizeof(why),
                 "the communicator has no device workspace (picoll %s, no device call on it yet, "
                 "or ranks on several nodes)",
                 picoll_g.active ? "active" : "not active");
    } else {
        st = picoll_cuda_barrier_floor(ws, what, cuda_stream, n, seconds, why, sizeof(why));
    }
    if (st != PICOLL_OK) {
        picoll_warn("picoll_device_barrier_floor: %s", why);
    }
    return st == PICOLL_OK                  ? MPI_SUCCESS
           : st == PICOLL_ERR_INVALID_PARAM ? MPI_ERR_ARG
                                            : MPI_ERR_OTHER;
}

PICOLL_EXPORT int picoll_register(MPI_Comm comm, void *ptr, size_t bytes, void **handle)
{
    const void *scope = NULL;
    if (comm != MPI_COMM_NULL) {
        /* local: the communicator's scope, no context made (that would be collective) */
        scope = picoll_g.active ? picoll_comm_reg_scope(comm) : NULL;
        if (scope == NULL) {
            picoll_warn("picoll_register: picoll is not active on the communicator");
            return MPI_ERR_COMM;
        }
    }
    if (ptr == NULL || handle == NULL || bytes == 0) {
        picoll_warn("picoll_register: %s", ptr == NULL      ? "ptr is NULL"
                                           : handle == NULL ? "handle is NULL"
                                                            : "bytes is 0");
        return MPI_ERR_ARG;
    }
    picoll_status_t st = picoll_cuda_register(scope, ptr, bytes, handle);
    if (st == PICOLL_ERR_NOT_SUPPORTED) {
        picoll_warn("picoll_register: picoll has no device support here (built without CUDA, or "
                    "no CUDA driver)");
    }
    return st == PICOLL_OK                  ? MPI_SUCCESS
           : st == PICOLL_ERR_INVALID_PARAM ? MPI_ERR_ARG
                                            : MPI_ERR_OTHER;
}

PICOLL_EXPORT int picoll_deregister(void *handle)
{
    picoll_status_t st = picoll_cuda_deregister(handle);
    if (st != PICOLL_OK) {
        picoll_warn("picoll_deregister: %p is not a registered range's handle", handle);
    }
    return st == PICOLL_OK ? MPI_SUCCESS : MPI_ERR_ARG;
}

PICOLL_EXPORT void *picoll_cuda_alloc(ssize_t size, int device, void *stream)
{
    (void)stream;
    return size > 0 ? picoll_cuda_mem_alloc((size_t)size, device) : NULL;
}

PICOLL_EXPORT void picoll_cuda_free(void *ptr, ssize_t size, int device, void *stream)
{
    (void)size, (void)stream;
    picoll_cuda_mem_free(ptr, device);
}
