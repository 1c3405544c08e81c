/* Selection: from a call's shape to an algorithm index of its collective's table
 * (PICOLL_ALG_FALLBACK = hand it to the underlying MPI). Inputs are the same on every rank of a
 * communicator, so every rank picks the same algorithm. */
#ifndef PICOLL_SELECT_H
#define PICOLL_SELECT_H

#include <stddef.h>
#include "config.h"
#include "topo/topo.h"

/* bytes: count * element size; slot_size: one workspace buffer of one rank. */
int picoll_select_allreduce(const picoll_config_t *cfg, size_t slot_size, int nranks, size_t bytes);
/* block_bytes: what one rank contributes (allgather) or sends to one peer (alltoall). */
int picoll_select_allgather(const picoll_config_t *cfg, int nranks, size_t block_bytes);
int picoll_select_alltoall(const picoll_config_t *cfg, int nranks, size_t block_bytes);

/* The device executor (device buffers on a context with a device workspace), from the topology
 * tables (picoll_topo_*_alg): reach is the node's, slot_size one device data buffer. The hybrid
 * cube mesh's own algorithm is not written yet: it runs two-shot, whose IPC mappings were proven
 * between every pair at set-up. */
int picoll_select_cuda_allreduce(const picoll_config_t *cfg, picoll_topo_reach_t reach,
                                 size_t slot_size, size_t bytes);
/* block_bytes as above; the tables take one rank's receive bytes. */
int picoll_select_cuda_allgather(const picoll_config_t *cfg, picoll_topo_reach_t reach, int nranks,
                                 size_t block_bytes);
int picoll_select_cuda_alltoall(const picoll_config_t *cfg, picoll_topo_reach_t reach, int nranks,
                                size_t block_bytes);

#endif
