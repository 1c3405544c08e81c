#include "coll/coll.h"
#include "coll/algs.h"

#define FALLBACK_ALG                                                                               \
    {                                                                                              \
        .name = "fallback", .desc = "handed to the underlying MPI (PMPI_*)"                        \
    }

static const picoll_alg_desc_t allreduce_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLREDUCE_ONESHOT] = {.name = "oneshot",
                                  .desc = "shared memory: every rank reduces all inputs in rank "
                                          "order (up to PICOLL_ALLREDUCE_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_TWOSHOT] = {.name = "twoshot",
                                  .desc = "shared memory: reduce-scatter then all-gather, chunked "
                                          "by the workspace (up to PICOLL_ALLREDUCE_TWOSHOT_MAX)"},
    [PICOLL_ALLREDUCE_CMA] = {.name = "cma",
                              .desc = "single copy: two-shot where each rank reads its block of "
                                      "the peers' inputs, and then their reduced blocks, straight "
                                      "from their buffers with process_vm_readv (from "
                                      "PICOLL_ALLREDUCE_CMA_MIN)"},
    [PICOLL_ALLREDUCE_CUDA_ONESHOT] = {.name = "cuda_oneshot",
                                       .desc =
                                           "device buffers over CUDA IPC: every rank reduces all "
                                           "inputs in rank order (PICOLL_NVLINK_ONESHOT_MAX, "
                                           "PICOLL_PCIE_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_CUDA_LL] = {.name = "cuda_ll",
                                  .desc = "device buffers over CUDA IPC, small: one-shot where "
                                          "each rank pushes its input into every peer's "
                                          "workspace, 8 bytes with their flag in each 16-byte "
                                          "line, and reduces the lines that reach its own in "
                                          "rank order (up to PICOLL_CUDA_LL_MAX)"},
    [PICOLL_ALLREDUCE_CUDA_TWOSHOT] = {.name = "cuda_twoshot",
                                       .desc = "device buffers over CUDA IPC: reduce-scatter then "
                                               "all-gather, chunked by the workspace (up to "
                                               "PICOLL_NVLINK_TWOSHOT_MAX)"},
    [PICOLL_ALLREDUCE_CUDA_ZC] = {.name = "cuda_zc",
                                  .desc = "device buffers over CUDA IPC, large: two-shot that "
                                          "reads the peers' buffers where they are, mapped "
                                          "through the IPC cache, with no copy through the "
                                          "workspace (PICOLL_CUDA_ZERO_COPY, from "
                                          "PICOLL_CUDA_ZERO_COPY_MIN)"},
    [PICOLL_ALLREDUCE_CUDA_HCM] = {.name = "cuda_hcm",
                                   .desc = "device buffers on the 8 GPUs of a hybrid cube mesh "
                                           "(DGX-1): each quad reduces one-shot over its NVLinks, "
                                           "then every rank adds its relay's quad result (up to "
                                           "PICOLL_HCM_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_HIER_RD] = {.name = "hier_rd",
                                  .desc = "between nodes: node reduce-scatter, recursive doubling "
                                          "on each rail over UCX, node all-gather (small rail "
                                          "blocks: the cost model, PICOLL_NET_RD_MAX)"},
    [PICOLL_ALLREDUCE_HIER_ONESHOT] = {.name = "hier_oneshot",
                                       .desc = "between nodes, small, nodes of equal size: every "
                                               "rank reduces its node's inputs, then recursive "
                                               "doubling of the whole vector on its rail over UCX "
                                               "(up to PICOLL_ALLREDUCE_ONESHOT_MAX)"},
    [PICOLL_ALLREDUCE_HIER_CUDA] = {.name = "hier_cuda",
                                    .desc = "between nodes, device buffers, nodes of 2 to 32 "
                                            "ranks (of any sizes): "
                                            "device reduce-scatter over CUDA IPC, each rank's "
                                            "block through pinned host memory in pipelined "
                                            "chunks to its rail (recursive doubling or ring over "
                                            "UCX), device all-gather (PICOLL_HIER_CUDA)"},
    [PICOLL_ALLREDUCE_HIER_RING] = {.name = "hier_ring",
                                    .desc = "between nodes: node reduce-scatter, ring allreduce "
                                            "on each rail over UCX, node all-gather"},
    [PICOLL_ALLREDUCE_HIER_RAB] = {.name = "hier_rab",
                                   .desc = "between nodes: node reduce-scatter, Rabenseifner's "
                                           "allreduce (recursive halving, then doubling) on each "
                                           "rail over UCX, node all-gather (large rail blocks on "
                                           "many nodes: the cost model)"},
};

static const picoll_alg_desc_t allgather_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLGATHER_SHM] = {.name = "shm",
                              .desc = "shared memory: blocks copied in, one barrier, copied out"},
    [PICOLL_ALLGATHER_CUDA_LL] = {.name = "cuda_ll",
                                  .desc = "device buffers over CUDA IPC, small: each rank pushes "
                                          "its block into every peer's workspace, 8 bytes with "
                                          "their flag in each 16-byte line, and copies the lines "
                                          "that reach its own into place (up to "
                                          "PICOLL_CUDA_LL_MAX received bytes)"},
    [PICOLL_ALLGATHER_CUDA_IPC] = {.name = "cuda_ipc",
                                   .desc =
                                       "device buffers over CUDA IPC: one kernel copies the block "
                                       "in, waits for the peers' flags, copies every block out"},
    [PICOLL_ALLGATHER_CUDA_ZC] = {.name = "cuda_zc",
                                  .desc = "device buffers over CUDA IPC, large: one kernel copies "
                                          "every peer's block from its buffer, mapped through "
                                          "the IPC cache (PICOLL_CUDA_ZERO_COPY, from "
                                          "PICOLL_CUDA_ZERO_COPY_MIN received bytes)"},
    [PICOLL_ALLGATHER_HIER] = {.name = "hier",
                               .desc = "between nodes: blocks into the node's workspace, node "
                                       "parts round a ring on each rail over UCX, copied out"},
    [PICOLL_ALLGATHER_HIER_BRUCK] = {.name = "hier_bruck",
                                     .desc = "between nodes: as hier, the node parts by Bruck's "
                                             "log2(nodes) steps on each rail (small parts on "
                                             "many nodes: the cost model)"},
    [PICOLL_ALLGATHER_HIER_CUDA] = {.name = "hier_cuda",
                                    .desc = "between nodes, device buffers, nodes of equal size, "
                                            "ranks placed by node: the node's blocks gathered on "
                                            "the device, a slice of the node's part per rank "
                                            "round the ring of nodes on its rail through pinned "
                                            "host memory, the slices gathered on the device "
                                            "(PICOLL_HIER_CUDA)"},
    [PICOLL_ALLGATHER_CMA] = {.name = "cma",
                              .desc = "single copy: each rank reads every peer's block straight "
                                      "into its receive buffer with process_vm_readv, between two "
                                      "barriers (blocks from PICOLL_CMA_MIN)"},
};

static const picoll_alg_desc_t alltoall_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_ALLTOALL_SHM] = {.name = "shm",
                             .desc = "shared memory: pieces for every peer copied in, one barrier, "
                                     "own pieces copied out"},
    [PICOLL_ALLTOALL_CUDA_IPC] = {.name = "cuda_ipc",
                                  .desc = "device buffers over CUDA IPC: one kernel lays out the "
                                          "pieces, waits for the peers' flags, copies its own out"},
    [PICOLL_ALLTOALL_CUDA_ZC] = {.name = "cuda_zc",
                                 .desc = "device buffers over CUDA IPC, large, not in place: one "
                                         "kernel copies the piece for it from every peer's send "
                                         "buffer, mapped through the IPC cache "
                                         "(PICOLL_CUDA_ZERO_COPY, from PICOLL_CUDA_ZERO_COPY_MIN "
                                         "received bytes)"},
    [PICOLL_ALLTOALL_HIER] = {.name = "hier",
                              .desc = "between nodes: pieces into the node's workspace, pairwise "
                                      "exchange of node parts on each rail over UCX "
                                      "(PICOLL_NET_INFLIGHT peers at a time), copied out"},
    [PICOLL_ALLTOALL_HIER_CUDA] = {.name = "hier_cuda",
                                   .desc = "between nodes, device buffers, nodes of equal size, "
                                           "ranks placed by node: for each other node, the "
                                           "node's pieces for its ranks on my rail gathered on "
                                           "the device (one alltoall kernel per node), exchanged "
                                           "pairwise on the rail through pinned host memory and "
                                           "copied straight into place (PICOLL_HIER_CUDA)"},
    [PICOLL_ALLTOALL_CMA] = {.name = "cma",
                             .desc = "single copy: each rank reads its piece of every peer's send "
                                     "buffer straight into its receive buffer with "
                                     "process_vm_readv, between two barriers (blocks from "
                                     "PICOLL_CMA_MIN; in place through the workspace)"},
};

static const picoll_alg_desc_t reduce_scatter_block_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_ipc",
                                 .desc = "device buffers over CUDA IPC: one kernel copies every "
                                         "rank's piece in, waits for the peers' flags, reduces "
                                         "its own piece of every rank in rank order (the reach's "
                                         "allreduce limit on the input)"},
    [PICOLL_DEVICE_ONLY_CUDA_ZC] = {.name = "cuda_zc",
                                    .desc = "device buffers over CUDA IPC, large, not in place, "
                                            "pieces of 16-byte multiples: one kernel reduces "
                                            "its piece of every peer's send buffer, mapped "
                                            "through the IPC cache (PICOLL_CUDA_ZERO_COPY, "
                                            "from PICOLL_CUDA_ZERO_COPY_MIN input bytes)"},
};

static const picoll_alg_desc_t reduce_scatter_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_ipc",
                                 .desc = "device buffers over CUDA IPC: reduce_scatter_block's "
                                         "kernel with uneven pieces (in place: even pieces only)"},
    [PICOLL_DEVICE_ONLY_CUDA_ZC] = {.name = "cuda_zc",
                                    .desc = "even pieces: reduce_scatter_block's zero-copy "
                                            "kernel"},
};

static const picoll_alg_desc_t bcast_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_ipc",
                                 .desc = "device buffers over CUDA IPC: the root copies in, every "
                                         "rank waits for the flags, the others copy the root's "
                                         "buffer out (PICOLL_NVLINK_IPC_MAX, PICOLL_PCIE_IPC_MAX)"},
    [PICOLL_DEVICE_ONLY_CUDA_ZC] = {.name = "cuda_zc",
                                    .desc = "device buffers over CUDA IPC, large: one kernel in "
                                            "which the others copy the root's buffer, mapped "
                                            "through the IPC cache (PICOLL_CUDA_ZERO_COPY, from "
                                            "PICOLL_CUDA_ZERO_COPY_MIN bytes)"},
};

static const picoll_alg_desc_t reduce_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_oneshot",
                                 .desc = "device buffers over CUDA IPC: every rank copies in, the "
                                         "root reduces all inputs in rank order, chunked by the "
                                         "workspace (the reach's allreduce limit)"},
};

static const picoll_alg_desc_t allgatherv_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_ipc",
                                 .desc = "device buffers over CUDA IPC: allgather's kernel with "
                                         "blocks of every size at their displacements "
                                         "(PICOLL_NVLINK_IPC_MAX, PICOLL_PCIE_IPC_MAX)"},
};

static const picoll_alg_desc_t alltoallv_algs[] = {
    [PICOLL_ALG_FALLBACK] = FALLBACK_ALG,
    [PICOLL_DEVICE_ONLY_CUDA] = {.name = "cuda_ipc",
                                 .desc = "device buffers over CUDA IPC: alltoall's kernel with "
                                         "pieces of every size at their displacements, chunked "
                                         "by the call's largest piece, agreed in the vote "
                                         "(PICOLL_NVLINK_IPC_MAX, PICOLL_PCIE_IPC_MAX on the "
                                         "largest receive bytes of a rank)"},
};

#define TABLE(n, a)                                                                                \
    {                                                                                              \
        .name = n, .algs = a, .count = (int)(sizeof(a) / sizeof(a[0]))                             \
    }

static const picoll_coll_desc_t coll_descs[PICOLL_COLL_COUNT] = {
    [PICOLL_COLL_ALLREDUCE] = TABLE("allreduce", allreduce_algs),
    [PICOLL_COLL_ALLGATHER] = TABLE("allgather", allgather_algs),
    [PICOLL_COLL_ALLTOALL] = TABLE("alltoall", alltoall_algs),
    [PICOLL_COLL_REDUCE_SCATTER_BLOCK] = TABLE("reduce_scatter_block", reduce_scatter_block_algs),
    [PICOLL_COLL_REDUCE_SCATTER] = TABLE("reduce_scatter", reduce_scatter_algs),
    [PICOLL_COLL_BCAST] = TABLE("bcast", bcast_algs),
    [PICOLL_COLL_REDUCE] = TABLE("reduce", reduce_algs),
    [PICOLL_COLL_ALLGATHERV] = TABLE("allgatherv", allgatherv_algs),
    [PICOLL_COLL_ALLTOALLV] = TABLE("alltoallv", alltoallv_algs),
};

const picoll_coll_desc_t *picoll_coll_desc(picoll_coll_t coll)
{
    return coll < PICOLL_COLL_COUNT ? &coll_descs[coll] : 0;
}
