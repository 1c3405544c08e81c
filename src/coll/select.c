#include "coll/select.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "coll/netmodel.h"

#include <stdint.h>

/* PICOLL_HOST=auto (the default): where the shared-memory executor beat Open MPI 4.1 in every job
 * measured (osu-bench, A/B in one job, np 2 and 4, 4 B to 16 MiB, MPI_FLOAT and MPI_CHAR, on a
 * 2-core EPYC VM, 512 KiB L2 a core; docs/performance.md has the runs). Allreduce through the
 * workspace won at every size (medians 1.03x-4.5x). Allgather and alltoall copy every byte twice
 * (into the workspace, out of it) where the MPI copies once (CMA). Up to 4 KiB blocks at np 2 they
 * won in every job (1.3x-3.5x); from 16 KiB to 256 KiB blocks some jobs won (1.2x-1.8x) and others,
 * the same binary on the same machine minutes apart, lost (0.49x-0.92x; with --bind-to core and
 * none alike, every round of a job alike: a state of the job, most likely where the hypervisor put
 * the two virtual CPUs, in which the workspace's freshly written lines cost more to read across);
 * from 1 MiB they ran level (0.9x-1.2x). So auto runs them only up to PICOLL_HOST_AUTO_MAX (16k) of
 * what the node moves: ranks x block for allgather (each rank reads every block), ranks x ranks x
 * block for alltoall; larger calls go to the MPI, and PICOLL_HOST=on keeps picoll's path.
 *
 * Single copy (process_vm_readv) is opt-in, from PICOLL_CMA_MIN and
 * PICOLL_ALLREDUCE_CMA_MIN (0, the defaults: never): there the kernel's copy ran at 8-17 GB/s
 * against memcpy's 30-140, and single copy lost to the workspace at every size (allgather 0.9x-1.2x
 * of Open MPI against 1.3x-3.1x, alltoall 0.9x-1.1x against 1.1x-1.5x, allreduce about half as
 * fast). It stays for nodes where it wins; both modes honour the thresholds. */

static int cma_from(size_t min, size_t bytes)
{
    return min != 0 && bytes >= min;
}

int picoll_select_allreduce(const picoll_config_t *cfg, size_t slot_size, int nranks, size_t bytes,
                            int cma)
{
    if (cfg->host == PICOLL_HOST_OFF || bytes == 0 || bytes > cfg->allreduce_twoshot_max) {
        return PICOLL_ALG_FALLBACK;
    }
    if (bytes <= cfg->allreduce_oneshot_max && bytes <= slot_size) {
        return PICOLL_ALLREDUCE_ONESHOT;
    }
    if (cma && cma_from(cfg->allreduce_cma_min, bytes) &&
        2 * slot_size / (size_t)nranks >= PICOLL_CMA_SCRATCH_MIN) {
        return PICOLL_ALLREDUCE_CMA;
    }
    return PICOLL_ALLREDUCE_TWOSHOT;
}

/* PICOLL_HOST=auto: whether nblocks blocks stay within PICOLL_HOST_AUTO_MAX. */
static int auto_fits(const picoll_config_t *cfg, size_t nblocks, size_t block_bytes)
{
    return cfg->host != PICOLL_HOST_AUTO || block_bytes <= cfg->host_auto_max / nblocks;
}

int picoll_select_allgather(const picoll_config_t *cfg, int nranks, size_t block_bytes, int cma)
{
    if (cfg->host == PICOLL_HOST_OFF || block_bytes == 0 ||
        !auto_fits(cfg, (size_t)nranks, block_bytes)) {
        return PICOLL_ALG_FALLBACK;
    }
    return cma && cma_from(cfg->cma_min, block_bytes) ? PICOLL_ALLGATHER_CMA : PICOLL_ALLGATHER_SHM;
}

int picoll_select_alltoall(const picoll_config_t *cfg, int nranks, size_t block_bytes, int cma)
{
    if (cfg->host == PICOLL_HOST_OFF || block_bytes == 0 ||
        !auto_fits(cfg, (size_t)nranks * (size_t)nranks, block_bytes)) {
        return PICOLL_ALG_FALLBACK;
    }
    return cma && cma_from(cfg->cma_min, block_bytes) ? PICOLL_ALLTOALL_CMA : PICOLL_ALLTOALL_SHM;
}

int picoll_select_hier_allreduce(const picoll_config_t *cfg, const picoll_hier_shape_t *shape,
                                 size_t bytes, size_t rail_block)
{
    if (cfg->host == PICOLL_HOST_OFF || !cfg->net || bytes == 0) {
        return PICOLL_ALG_FALLBACK;
    }
    if (shape->even && bytes <= cfg->allreduce_oneshot_max && bytes <= shape->slot_size) {
        return PICOLL_ALLREDUCE_HIER_ONESHOT;
    }
    switch (picoll_netmodel_allreduce(cfg, shape->num_nodes, rail_block)) {
    case PICOLL_RAIL_RING: return PICOLL_ALLREDUCE_HIER_RING;
    case PICOLL_RAIL_RAB: return PICOLL_ALLREDUCE_HIER_RAB;
    default: return PICOLL_ALLREDUCE_HIER_RD;
    }
}

int picoll_select_hier_allgather(const picoll_config_t *cfg, const picoll_hier_shape_t *shape,
                                 size_t block_bytes, size_t piece_max)
{
    if (cfg->host == PICOLL_HOST_OFF || !cfg->net || block_bytes == 0 || piece_max == 0 ||
        cfg->host == PICOLL_HOST_AUTO) {
        return PICOLL_ALG_FALLBACK;
    }
    size_t piece = block_bytes < piece_max ? block_bytes : piece_max;
    return picoll_netmodel_allgather(cfg, shape->num_nodes, piece * (size_t)shape->rail_pieces) ==
                   PICOLL_RAIL_BRUCK
               ? PICOLL_ALLGATHER_HIER_BRUCK
               : PICOLL_ALLGATHER_HIER;
}

int picoll_select_hier_alltoall(const picoll_config_t *cfg, size_t block_bytes, size_t piece_max)
{
    if (cfg->host == PICOLL_HOST_OFF || !cfg->net || block_bytes == 0 || piece_max == 0 ||
        cfg->host == PICOLL_HOST_AUTO) {
        return PICOLL_ALG_FALLBACK;
    }
    return PICOLL_ALLTOALL_HIER;
}

/* The device executor, by the node's reach (topo/reach.c), PyTorch's intra-node thresholds as
 * defaults:
 *   any but hcm: low-latency lines (cuda_ll) <= PICOLL_CUDA_LL_MAX (0: never, until an A/B on a
 *           GPU shows them faster) where one slot holds every rank's lines and payload
 *   nvlink  one-shot <= PICOLL_NVLINK_ONESHOT_MAX (256k), two-shot <= PICOLL_NVLINK_TWOSHOT_MAX
 *           (10M), then hand over to a CUDA-aware MPI; where picoll stages the calls it hands
 *           over (the MPI is not CUDA-aware), two-shot at every size: a 16 MiB allreduce took
 *           9.3 ms staged, 99 us two-shot (an H100, 2 ranks under MPS, 2026-11-26,
 *           docs/performance.md)
 *   hcm     HCM one-shot <= PICOLL_HCM_ONESHOT_MAX (256k), then hand over
 *   pcie    one-shot <= PICOLL_PCIE_ONESHOT_MAX (64k), then hand over. Over PCIe a small message
 *           costs latency, not bandwidth: one kernel that reads the n-1 peers' inputs beats an
 *           MPI allreduce that stages device buffers through the host. Large messages are
 *           bandwidth-bound; one-shot moves (n-1)x the data through each GPU's single x16 link
 *           and two-shot gains little on a tree of PCIe switches while P2P reads through a host
 *           bridge are slow on many CPUs, so the underlying MPI (or NCCL below it) does better.
 *   none    hand over
 * Allgather and alltoall: IPC copies <= PICOLL_NVLINK_IPC_MAX (nvlink) or PICOLL_PCIE_IPC_MAX
 * (pcie), of one rank's receive buffer; the whole HCM has pairs without NVLink and without peer
 * access (across sockets), so those hand over, as does none. A one-shot message larger than a
 * device data buffer runs two-shot, in chunks. Allreduce and reduce here: ll_max, the largest
 * message on the lines (0: none; the workspace's, picoll_cuda_limits_t). */
static int cuda_allreduce(const picoll_config_t *cfg, picoll_topo_reach_t reach, size_t slot_size,
                          size_t ll_max, size_t bytes, int staged)
{
    if (bytes == 0) {
        return PICOLL_ALG_FALLBACK;
    }
    /* low-latency lines where the slot holds the unpacked payload (ll_max), on every reach whose
     * workspace maps every peer */
    if (reach != PICOLL_TOPO_REACH_HCM && reach != PICOLL_TOPO_REACH_NONE && bytes <= ll_max) {
        return PICOLL_ALLREDUCE_CUDA_LL;
    }
    switch (reach) {
    case PICOLL_TOPO_REACH_NVLINK:
        if (bytes <= cfg->nvlink_oneshot_max) {
            return bytes <= slot_size ? PICOLL_ALLREDUCE_CUDA_ONESHOT
                                      : PICOLL_ALLREDUCE_CUDA_TWOSHOT;
        }
        return staged || bytes <= cfg->nvlink_twoshot_max ? PICOLL_ALLREDUCE_CUDA_TWOSHOT
                                                          : PICOLL_ALG_FALLBACK;
    case PICOLL_TOPO_REACH_HCM:
        return bytes <= cfg->hcm_oneshot_max ? PICOLL_ALLREDUCE_CUDA_HCM : PICOLL_ALG_FALLBACK;
    case PICOLL_TOPO_REACH_PCIE:
        if (bytes <= cfg->pcie_oneshot_max) {
            return bytes <= slot_size ? PICOLL_ALLREDUCE_CUDA_ONESHOT
                                      : PICOLL_ALLREDUCE_CUDA_TWOSHOT;
        }
        return PICOLL_ALG_FALLBACK;
    case PICOLL_TOPO_REACH_NONE: break;
    }
    return PICOLL_ALG_FALLBACK;
}

int picoll_select_cuda_allreduce(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                 size_t bytes, int staged)
{
    return cuda_allreduce(cfg, lim->reach, lim->slot_size, lim->ll_reduce_max, bytes, staged);
}

/* Reduce-scatter and reduce on the device: where an allreduce of the input's bytes would run on
 * it (one-shot or two-shot; HCM's workspaces map only the quad and the relay: handed over). */
int picoll_select_cuda_reduce(const picoll_config_t *cfg, picoll_topo_reach_t reach, size_t bytes,
                              int staged)
{
    /* no bound on a data buffer (chunks), the lines up to PICOLL_CUDA_LL_MAX */
    int alg = cuda_allreduce(cfg, reach, SIZE_MAX, cfg->cuda_ll_max, bytes, staged);
    return reach == PICOLL_TOPO_REACH_HCM || alg == PICOLL_ALG_FALLBACK ? PICOLL_ALG_FALLBACK
                                                                        : PICOLL_DEVICE_ONLY_CUDA;
}

/* Allgather and alltoall: copies over IPC up to the reach's limit of one rank's receive bytes. */
static int select_cuda_ipc(const picoll_config_t *cfg, picoll_topo_reach_t reach, int nranks,
                           size_t block_bytes, int alg)
{
    size_t bytes = block_bytes * (size_t)nranks;
    size_t max = reach == PICOLL_TOPO_REACH_NVLINK ? cfg->nvlink_ipc_max
                 : reach == PICOLL_TOPO_REACH_PCIE ? cfg->pcie_ipc_max
                                                   : 0;
    return block_bytes != 0 && bytes <= max ? alg : PICOLL_ALG_FALLBACK;
}

int picoll_select_cuda_allgather(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                 size_t block_bytes)
{
    /* the low-latency lines up to PICOLL_CUDA_LL_MAX received bytes (ll_gather_max: where the
     * line area holds them; as allreduce's, the hybrid cube mesh hands allgather over) */
    if ((lim->reach == PICOLL_TOPO_REACH_NVLINK || lim->reach == PICOLL_TOPO_REACH_PCIE) &&
        block_bytes != 0 && block_bytes <= lim->ll_gather_max) {
        return PICOLL_ALLGATHER_CUDA_LL;
    }
    return select_cuda_ipc(cfg, lim->reach, lim->nranks, block_bytes, PICOLL_ALLGATHER_CUDA_IPC);
}

int picoll_select_cuda_alltoall(const picoll_config_t *cfg, const picoll_cuda_limits_t *lim,
                                size_t block_bytes)
{
    return select_cuda_ipc(cfg, lim->reach, lim->nranks, block_bytes, PICOLL_ALLTOALL_CUDA_IPC);
}

int picoll_select_cuda_bcast(const picoll_config_t *cfg, picoll_topo_reach_t reach, size_t bytes)
{
    return select_cuda_ipc(cfg, reach, 1, bytes, PICOLL_DEVICE_ONLY_CUDA);
}
