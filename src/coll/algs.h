/* picoll's own algorithms on the host executor. Each takes this rank's vote (1 when it can run the
 * call: its buffers are host memory of the right kind) and returns PICOLL_OK, or
 * PICOLL_ERR_DISABLED when some rank voted no: then no receive buffer was touched and every rank
 * hands the call to the underlying MPI.
 *
 * Workspace rule that keeps them race-free with one barrier per step: data written into
 * buffer (epoch + 1) of a slot before a barrier is read only between that barrier and the next. */
#ifndef PICOLL_ALGS_H
#define PICOLL_ALGS_H

#include "coll/dispatch.h"
#include "host/shm.h"

/* Host executor algorithms, then the device executor's (cuda/: they run on device buffers). */
enum {
    PICOLL_ALLREDUCE_ONESHOT = 1,
    PICOLL_ALLREDUCE_TWOSHOT = 2,
    PICOLL_ALLREDUCE_CUDA_ONESHOT = 3,
    PICOLL_ALLREDUCE_CUDA_TWOSHOT = 4
};
enum { PICOLL_ALLGATHER_SHM = 1, PICOLL_ALLGATHER_CUDA_IPC = 2 };
enum { PICOLL_ALLTOALL_SHM = 1, PICOLL_ALLTOALL_CUDA_IPC = 2 };

picoll_status_t picoll_allreduce_oneshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote);
picoll_status_t picoll_allreduce_twoshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote);
picoll_status_t picoll_allgather_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote);
picoll_status_t picoll_alltoall_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote);

#endif
