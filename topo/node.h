/* The node-wide topology of a communicator's local ranks: every rank brings its GPU, all compute
 * the same result. MPI is used through PMPI_* only. */
#ifndef PICOLL_TOPO_NODE_H
#define PICOLL_TOPO_NODE_H

#include <mpi.h>

#include "topo/topo.h"

/* What one rank knows of its own GPU. */
typedef struct {
    char bus_id[PICOLL_TOPO_BUSID_LEN]; /* "0000:07:00.0"; "" when the rank has no GPU */
    int index; /* its GPUn in a recorded topology (PICOLL_TOPO_FILE, which has no bus ids), or -1 */
} picoll_topo_gpu_id_t;

typedef struct {
    int nranks;
    int *rank_gpu;             /* [nranks]: index into node (below) of each rank's GPU, -1 none */
    int shared;                /* some GPU is used by more than one rank */
    picoll_topo_reach_t reach; /* of all the ranks together: what selection takes */
    picoll_topo_t used; /* the distinct GPUs the ranks use, in order of first use; classified */
    char why[160];      /* when reach is none: why, e.g. "rank 3 has no GPU" */
} picoll_topo_node_t;

/* Collective over node_comm (the ranks of one node). node is this rank's detected or recorded
 * topology of the whole node. Every rank returns the same out (or the same error status);
 * disagreeing inputs (different topologies, a GPU on some ranks only) give reach none. */
picoll_status_t picoll_topo_node_build(MPI_Comm node_comm, const picoll_topo_t *node,
                                       const picoll_topo_gpu_id_t *mine, picoll_topo_node_t *out);
void picoll_topo_node_free(picoll_topo_node_t *n);

/* The hybrid cube mesh allreduce's view from one local rank (reach hcm): its quad (itself and the
 * 3 ranks whose GPUs are fully connected with its own, ascending local ranks) and its relay (the
 * rank on its GPU's NVLink neighbour in the other quad). first: the quad that holds local rank 0,
 * whose partial result comes first in the final combination, so that every rank computes
 * (quad of rank 0) op (other quad) and gets the same bits. */
typedef struct {
    int quad[PICOLL_TOPO_HCM_QUAD];
    int relay;
    int mine_first; /* this rank's quad is the one with local rank 0 */
} picoll_topo_hcm_plan_t;

/* PICOLL_OK with plan filled when n->reach is hcm; PICOLL_ERR_NOT_SUPPORTED otherwise. */
picoll_status_t picoll_topo_hcm_plan(const picoll_topo_node_t *n, int me,
                                     picoll_topo_hcm_plan_t *plan);

/* How the ranks of a node reach each other's GPUs, as the device executor sees them. */
typedef struct {
    picoll_topo_reach_t reach;
    int known; /* from the node's topology (it has GPUs); 0: from one_gpu */
    int hcm;   /* reach hcm, and plan is this rank's */
    picoll_topo_hcm_plan_t plan;
    char why[160]; /* known and reach none: why (picoll_topo_node_t's) */
} picoll_topo_node_reach_t;

/* Collective over node_comm, as picoll_topo_node_build (every rank takes part, even one without a
 * topology): the reach of the node's ranks from the node's topology (cfg->topo_file, else NVML
 * and hwloc: found at the first call, as they are slow to load, and kept), each on its GPU
 * mine (on GPU me, this rank's local rank, of a recorded topology whose GPUs are the local ranks'
 * (PICOLL_TOPO_FILE_GPU=local-rank)). Where the topology has no GPUs (no NVML), from one_gpu: all
 * ranks on one GPU (nvlink) or not (pcie), the ranks having proven their peer access already. */
void picoll_topo_node_reach(MPI_Comm node_comm, const picoll_config_t *cfg,
                            const picoll_topo_gpu_id_t *mine, int me, int one_gpu,
                            picoll_topo_node_reach_t *out);

#endif
