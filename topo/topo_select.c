/* From a topology and a set of ranks to the device algorithm per message size.
 *
 * Reach of a rank set (picoll_topo_reach), decided by its weakest pair:
 *   nvlink  every pair of its distinct GPUs joined by NVLink or NVSwitch, or all ranks on one GPU.
 *           This includes a fully connected subset of an HCM or a mixed node (a DGX-1 quad).
 *   hcm     the node is an HCM and the set is its 8 GPUs, one rank each: the HCM algorithm
 *           relies on every GPU reading its 3 quad peers and its relay, nothing else.
 *   pcie    peer access between every pair, not all over NVLink (PCIe-only nodes, or a mixed
 *           set that includes a PCIe pair: the slowest link sets the pace).
 *   none    some pair without peer access (across sockets, or a rank without GPU).
 *
 * Allreduce (PyTorch's intra-node thresholds as defaults):
 *   nvlink  one-shot <= PICOLL_NVLINK_ONESHOT_MAX (256k), two-shot <= PICOLL_NVLINK_TWOSHOT_MAX
 *           (10M), then hand over
 *   hcm     HCM one-shot <= PICOLL_HCM_ONESHOT_MAX (256k), then hand over
 *   pcie    one-shot <= PICOLL_PCIE_ONESHOT_MAX (64k), then hand over. Over PCIe a small message
 *           costs latency, not bandwidth: one kernel that reads the n-1 peers' inputs beats an
 *           MPI allreduce that stages device buffers through the host. Large messages are
 *           bandwidth-bound; one-shot moves (n-1)x the data through each GPU's single x16 link
 *           and two-shot gains little on a tree of PCIe switches while P2P reads through a host
 *           bridge are slow on many CPUs, so the underlying MPI (or NCCL below it) does better.
 *   none    hand over
 * Allgather and alltoall: IPC copies <= PICOLL_NVLINK_IPC_MAX (nvlink) or PICOLL_PCIE_IPC_MAX
 * (pcie); the whole HCM has pairs without NVLink and without peer access (across sockets), so
 * those hand over, as does none. */
#include "build-config.h"
#include "topo/topo.h"

const char *picoll_topo_reach_name(picoll_topo_reach_t reach)
{
    static const char *const names[] = {
        [PICOLL_TOPO_REACH_NONE] = "none",
        [PICOLL_TOPO_REACH_NVLINK] = "nvlink",
        [PICOLL_TOPO_REACH_HCM] = "hcm",
        [PICOLL_TOPO_REACH_PCIE] = "pcie",
    };
    return (unsigned)reach < sizeof(names) / sizeof(names[0]) ? names[reach] : "?";
}

const char *picoll_topo_alg_name(picoll_topo_alg_t alg)
{
    static const char *const names[] = {
        [PICOLL_TOPO_ALG_HANDOVER] = "handover",
        [PICOLL_TOPO_ALG_ONESHOT] = "one-shot",
        [PICOLL_TOPO_ALG_TWOSHOT] = "two-shot",
        [PICOLL_TOPO_ALG_HCM] = "hcm",
        [PICOLL_TOPO_ALG_IPC] = "ipc",
    };
    return (unsigned)alg < sizeof(names) / sizeof(names[0]) ? names[alg] : "?";
}

picoll_topo_reach_t picoll_topo_reach(const picoll_topo_t *t, const int *rank_gpu, int nranks)
{
    uint32_t set = 0;
    int ndistinct = 0, all_nv = 1, all_p2p = 1;

    if (t == NULL || nranks < 2 || t->ngpus < 1) {
        return PICOLL_TOPO_REACH_NONE;
    }
    for (int r = 0; r < nranks; r++) {
        if (rank_gpu[r] < 0 || rank_gpu[r] >= t->ngpus) {
            return PICOLL_TOPO_REACH_NONE;
        }
        set |= 1u << rank_gpu[r];
    }
    for (uint32_t a = set; a; a &= a - 1) {
        int i = __builtin_ctz(a);
        ndistinct++;
        for (uint32_t b = a & (a - 1); b; b &= b - 1) {
            int j = __builtin_ctz(b);
            if (picoll_topo_nvlinks(t, i, j) == 0 || t->links[i][j].p2p != PICOLL_TOPO_P2P_OK) {
                all_nv = 0;
            }
            if (t->links[i][j].p2p != PICOLL_TOPO_P2P_OK) {
                all_p2p = 0;
            }
        }
    }
    if (all_nv) {
        return PICOLL_TOPO_REACH_NVLINK; /* also: a single GPU shared by all ranks */
    }
    if (t->cls.cls == PICOLL_TOPO_CLASS_HCM && ndistinct == 8 && nranks == 8) {
        return PICOLL_TOPO_REACH_HCM;
    }
    if (all_p2p) {
        return PICOLL_TOPO_REACH_PCIE;
    }
    return PICOLL_TOPO_REACH_NONE;
}

picoll_topo_alg_t picoll_topo_allreduce_alg(picoll_topo_reach_t reach, size_t bytes,
                                            const picoll_config_t *cfg)
{
    switch (reach) {
    case PICOLL_TOPO_REACH_NVLINK:
        if (bytes <= cfg->nvlink_oneshot_max) {
            return PICOLL_TOPO_ALG_ONESHOT;
        }
        if (bytes <= cfg->nvlink_twoshot_max) {
            return PICOLL_TOPO_ALG_TWOSHOT;
        }
        return PICOLL_TOPO_ALG_HANDOVER;
    case PICOLL_TOPO_REACH_HCM:
        return bytes <= cfg->hcm_oneshot_max ? PICOLL_TOPO_ALG_HCM : PICOLL_TOPO_ALG_HANDOVER;
    case PICOLL_TOPO_REACH_PCIE:
        return bytes <= cfg->pcie_oneshot_max ? PICOLL_TOPO_ALG_ONESHOT : PICOLL_TOPO_ALG_HANDOVER;
    case PICOLL_TOPO_REACH_NONE:
        break;
    }
    return PICOLL_TOPO_ALG_HANDOVER;
}

static picoll_topo_alg_t ipc_alg(picoll_topo_reach_t reach, size_t bytes,
                                 const picoll_config_t *cfg)
{
    switch (reach) {
    case PICOLL_TOPO_REACH_NVLINK:
        return bytes <= cfg->nvlink_ipc_max ? PICOLL_TOPO_ALG_IPC : PICOLL_TOPO_ALG_HANDOVER;
    case PICOLL_TOPO_REACH_PCIE:
        return bytes <= cfg->pcie_ipc_max ? PICOLL_TOPO_ALG_IPC : PICOLL_TOPO_ALG_HANDOVER;
    case PICOLL_TOPO_REACH_HCM:
    case PICOLL_TOPO_REACH_NONE:
        break;
    }
    return PICOLL_TOPO_ALG_HANDOVER;
}

picoll_topo_alg_t picoll_topo_allgather_alg(picoll_topo_reach_t reach, size_t bytes,
                                            const picoll_config_t *cfg)
{
    return ipc_alg(reach, bytes, cfg);
}

picoll_topo_alg_t picoll_topo_alltoall_alg(picoll_topo_reach_t reach, size_t bytes,
                                           const picoll_config_t *cfg)
{
    return ipc_alg(reach, bytes, cfg);
}
