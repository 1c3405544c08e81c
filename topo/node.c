#include "build-config.h"
#include "topo/node.h"
#include "util/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char bus_id[PICOLL_TOPO_BUSID_LEN];
    int index;
    uint32_t hash; /* of the rank's whole-node topology */
} gpu_msg_t;

void picoll_topo_node_free(picoll_topo_node_t *n)
{
    free(n->rank_gpu);
    n->rank_gpu = NULL;
    n->nranks = 0;
}

picoll_status_t picoll_topo_node_build(MPI_Comm node_comm, const picoll_topo_t *node,
                                       const picoll_topo_gpu_id_t *mine, picoll_topo_node_t *out)
{
    gpu_msg_t me, *all = NULL;
    int nranks, rc, used[PICOLL_TOPO_MAX_GPUS], nused = 0;
    int *rank_gpu = NULL;
    int nogpu = -1, withgpu = 0;
    picoll_status_t status = PICOLL_OK;

    memset(out, 0, sizeof(*out));
    rc = PMPI_Comm_size(node_comm, &nranks);
    if (rc != MPI_SUCCESS) {
        picoll_error("PMPI_Comm_size failed on the node communicator (error %d)", rc);
        return PICOLL_ERR_MPI;
    }
    memset(&me, 0, sizeof(me));
    snprintf(me.bus_id, sizeof(me.bus_id), "%s", mine && mine->bus_id[0] ? mine->bus_id : "");
    me.index = mine ? mine->index : -1;
    me.hash = picoll_topo_hash(node);
    all = calloc((size_t)nranks, sizeof(*all));
    rank_gpu = calloc((size_t)nranks, sizeof(*rank_gpu));
    if (all == NULL || rank_gpu == NULL) {
        status = PICOLL_ERR_NO_MEMORY;
        /* still take part in the exchange so that the others do not hang */
    }
    gpu_msg_t dummy[1];
    rc = PMPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all ? (void *)all : (void *)dummy,
                        all ? (int)sizeof(me) : 0, MPI_BYTE, node_comm);
    if (rc != MPI_SUCCESS) {
        picoll_error("PMPI_Allgather of the GPU bus ids failed (error %d)", rc);
        status = PICOLL_ERR_MPI;
    }
    if (status != PICOLL_OK) {
        goto free_arrays;
    }
    /* every rank now holds the same all[]: what follows is deterministic */
    out->reach = PICOLL_TOPO_REACH_NONE;
    for (int r = 0; r < nranks; r++) {
        if (all[r].hash != me.hash) {
            snprintf(out->why, sizeof(out->why), "ranks 0 and %d see different node topologies", r);
            for (int k = 0; k < nranks; k++) {
                rank_gpu[k] = -1;
            }
            nused = 0;
            goto restrict_used;
        }
        int g = all[r].bus_id[0] ? picoll_topo_find_bus_id(node, all[r].bus_id) : -1;
        if (g < 0 && all[r].index >= 0 && all[r].index < node->ngpus) {
            g = all[r].index;
        }
        rank_gpu[r] = g;
        if (g < 0) {
            if (nogpu < 0) {
                nogpu = r;
            }
            continue;
        }
        withgpu++;
        int seen = 0;
        for (int k = 0; k < nused; k++) {
            seen |= used[k] == g;
        }
        if (!seen) {
            used[nused++] = g;
        } else {
            out->shared = 1;
        }
    }
    if (nogpu >= 0) {
        snprintf(out->why, sizeof(out->why),
                 withgpu ? "rank %d has no GPU" : "no rank has a GPU (rank %d first)", nogpu);
    }
restrict_used:
    status = picoll_topo_restrict(node, used, nused, &out->used);
    if (status != PICOLL_OK) {
        goto free_arrays;
    }
    /* rank_gpu as indices into out->used */
    for (int r = 0; r < nranks; r++) {
        int g = rank_gpu[r];
        rank_gpu[r] = -1;
        for (int k = 0; k < nused && g >= 0; k++) {
            if (used[k] == g) {
                rank_gpu[r] = k;
            }
        }
    }
    if (nogpu < 0 && out->why[0] == '\0') {
        out->reach = picoll_topo_reach(&out->used, rank_gpu, nranks);
        if (out->reach == PICOLL_TOPO_REACH_NONE) {
            snprintf(out->why, sizeof(out->why), "%s",
                     nranks < 2 ? "a single rank" : "some GPU pair has no peer access");
        }
    }
    out->nranks = nranks;
    out->rank_gpu = rank_gpu;
    free(all);
    return PICOLL_OK;

free_arrays:
    free(all);
    free(rank_gpu);
    return status;
}

/* The local rank on GPU g (reach hcm: one rank per GPU), or -1. */
static int node_rank_on(const picoll_topo_node_t *n, int g)
{
    for (int r = 0; r < n->nranks; r++) {
        if (n->rank_gpu[r] == g) {
            return r;
        }
    }
    return -1;
}

picoll_status_t picoll_topo_hcm_plan(const picoll_topo_node_t *n, int me,
                                     picoll_topo_hcm_plan_t *plan)
{
    memset(plan, 0, sizeof(*plan));
    if (n->reach != PICOLL_TOPO_REACH_HCM || me < 0 || me >= n->nranks) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    const picoll_topo_classification_t *c = &n->used.cls;
    int g = n->rank_gpu[me], k = 0;
    plan->relay = node_rank_on(n, c->hcm_relay[g]);
    plan->quad[k++] = me;
    for (int i = 0; i < 4; i++) {
        int nb = c->hcm_neighbors[g][i];
        if (nb != c->hcm_relay[g]) {
            if (k == PICOLL_TOPO_HCM_QUAD) {
                return PICOLL_ERR_NOT_SUPPORTED;
            }
            plan->quad[k++] = node_rank_on(n, nb);
        }
    }
    if (k != PICOLL_TOPO_HCM_QUAD || plan->relay < 0) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    /* ascending local ranks: the order every member of the quad reduces in */
    for (int i = 1; i < PICOLL_TOPO_HCM_QUAD; i++) {
        for (int j = i; j > 0 && plan->quad[j - 1] > plan->quad[j]; j--) {
            int t = plan->quad[j];
            plan->quad[j] = plan->quad[j - 1];
            plan->quad[j - 1] = t;
        }
    }
    if (plan->quad[0] < 0) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    plan->mine_first = plan->quad[0] == 0;
    return PICOLL_OK;
}

/* The node's topology as this process sees it, found once (NVML and hwloc are slow to load);
 * where it cannot be found, one without GPUs, said once. NULL only when out of memory. */
static const picoll_topo_t *node_topology(const picoll_config_t *cfg)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static picoll_topo_t *topo;
    static int tried;

    pthread_mutex_lock(&lock);
    if (!tried) {
        char err[256];
        tried = 1;
        topo = calloc(1, sizeof(*topo));
        if (topo != NULL && picoll_topo_load(cfg, topo, err, sizeof(err)) != PICOLL_OK) {
            picoll_warn("GPU topology not available (%s): device thresholds for PCIe are used",
                        err);
            picoll_topo_init(topo, "unavailable");
        }
    }
    pthread_mutex_unlock(&lock);
    return topo;
}

void picoll_topo_node_reach(MPI_Comm node_comm, const picoll_config_t *cfg,
                            const picoll_topo_gpu_id_t *mine, int me, int one_gpu,
                            picoll_topo_node_reach_t *out)
{
    const picoll_topo_t *topo = node_topology(cfg);
    picoll_topo_gpu_id_t id = *mine;
    picoll_topo_node_t node;

    memset(out, 0, sizeof(*out));
    out->reach = PICOLL_TOPO_REACH_NONE;
    if (cfg->topo_file[0] != '\0' && cfg->topo_file_gpu == PICOLL_TOPO_FILE_GPU_LOCAL_RANK) {
        id.bus_id[0] = '\0';
        id.index = me;
    }
    if (topo != NULL && picoll_topo_node_build(node_comm, topo, &id, &node) == PICOLL_OK) {
        out->reach = node.reach;
        out->known = topo->ngpus > 0;
        snprintf(out->why, sizeof(out->why), "%s", node.why);
        out->hcm = node.reach == PICOLL_TOPO_REACH_HCM &&
                   picoll_topo_hcm_plan(&node, me, &out->plan) == PICOLL_OK;
        picoll_topo_node_free(&node);
    } else if (topo == NULL) {
        /* still take part in the exchange the others make */
        picoll_topo_t none;
        picoll_topo_init(&none, "no memory");
        if (picoll_topo_node_build(node_comm, &none, &id, &node) == PICOLL_OK) {
            picoll_topo_node_free(&node);
        }
    }
    if (!out->known) {
        out->reach = one_gpu ? PICOLL_TOPO_REACH_NVLINK : PICOLL_TOPO_REACH_PCIE;
    }
}
