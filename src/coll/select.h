/* Selection: from a call's shape to an algorithm index of its collective's table
 * (PICOLL_ALG_FALLBACK = hand it to the underlying MPI). Inputs are the same on every rank of a
 * communicator, so every rank picks the same algorithm. */
#ifndef PICOLL_SELECT_H
#define PICOLL_SELECT_H

#include <stddef.h>
#include "cuda/cuda_dev.h"
#include "util/config.h"
#include "topo/topo.h"

/* bytes: count * element size; slot_size: one workspace buffer of one rank; cma: as below.
 * One-shot up to PICOLL_ALLREDUCE_ONESHOT_MAX; above it two-shot, in single copies from
 * PICOLL_ALLREDUCE_CMA_MIN (0, the default: never) where the node can and each rank's two
 * workspace buffers hold PICOLL_CMA_SCRATCH_MIN bytes per local rank, else through the workspace. */
#define PICOLL_CMA_SCRATCH_MIN 4096
int picoll_select_allreduce(const picoll_config_t *cfg, size_t slot_size, int nranks, size_t bytes,
                            int cma);
/* block_bytes: what one rank contributes (allgather) or sends to one peer (alltoall); cma: the
 * node agreed that its ranks can read each other's memory (host/cma.h). Single copy from
 * PICOLL_CMA_MIN (0, the default: never), the workspace below; with PICOLL_HOST=auto only up to
 * PICOLL_HOST_AUTO_MAX (nranks x block_bytes for allgather, nranks^2 x block_bytes for alltoall;
 * select.c says why). */
int picoll_select_allgather(const picoll_config_t *cfg, int nranks, size_t block_bytes, int cma);
int picoll_select_alltoall(const picoll_config_t *cfg, int nranks, size_t block_bytes, int cma);

/* Between nodes (the hierarchical algorithms). Allreduce: one-shot node step and recursive
 * doubling of the whole vector on every rail up to PICOLL_ALLREDUCE_ONESHOT_MAX on nodes of equal
 * size; else rail blocks by the method picoll_netmodel_allreduce chooses for rail_block on
 * num_nodes members (coll/netmodel.h: PICOLL_NET_ALLREDUCE where set, recursive doubling on two
 * nodes, PICOLL_NET_RD_MAX's rule where it is not 0, else the cost model of PICOLL_NET_LATENCY
 * and PICOLL_NET_BANDWIDTH: recursive doubling, Rabenseifner's or a ring). Allgather: the ring or
 * Bruck's, by picoll_netmodel_allgather for parts of min(block_bytes, piece_max) x rail_pieces
 * bytes (PICOLL_NET_ALLGATHER where set). rail_block: the bytes rail 0 reduces in the first chunk;
 * piece_max: the largest piece of a block the workspace holds (0: too many ranks). */
typedef struct {
    int num_nodes;
    int even;         /* every node has the same number of ranks */
    size_t slot_size; /* one workspace buffer of one rank */
    int rail_pieces;  /* the most pieces one node's allgather part holds on rail 0 */
} picoll_hier_shape_t;
int picoll_select_hier_allreduce(const picoll_config_t *cfg, const picoll_hier_shape_t *shape,
                                 size_t bytes, size_t rail_block);
int picoll_select_hier_allgather(const picoll_config_t *cfg, const picoll_hier_shape_t *shape,
                                 size_t block_bytes, size_t piece_max);
int picoll_select_hier_alltoall(const picoll_config_t *cfg, size_t block_bytes, size_t piece_max);

/* The device executor (device buffers on a context with a device workspace): lim is the
 * workspace's (its reach, ranks, data buffer and the low-latency lines' fit, handed up once when
 * it was made: cuda/cuda_dev.h; nothing is asked of the executor per call), reach the node's
 * (topo/reach.c); the thresholds are the PICOLL_NVLINK_*, PICOLL_HCM_* and PICOLL_PCIE_*
 * variables (select.c has the table). staged: a call handed over is staged through host memory
 * by picoll (the MPI is not CUDA-aware), which is never the faster way over NVLink: no upper
 * limit to two-shot there then. */
int picoll_select_cuda_allreduce(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                 size_t bytes, int staged);
/* block_bytes as above (lim->nranks blocks); the tables take one rank's receive bytes. */
int picoll_select_cuda_allgather(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                 size_t block_bytes);
int picoll_select_cuda_alltoall(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                size_t block_bytes);
/* The device-only collectives (PICOLL_DEVICE_ONLY_CUDA or PICOLL_ALG_FALLBACK). Reduce-scatter
 * and reduce: bytes of one rank's input, under the allreduce limits; bcast (the message),
 * allgatherv (one rank's receive bytes) and alltoallv (the largest receive bytes of a rank): under
 * the IPC limits. */
int picoll_select_cuda_reduce(const picoll_config_t *cfg, picoll_topo_reach_t reach, size_t bytes,
                              int staged);
int picoll_select_cuda_bcast(const picoll_config_t *cfg, picoll_topo_reach_t reach, size_t bytes);

#endif
