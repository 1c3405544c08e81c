/* Classification of a node from its NVLink connection mesh and PCIe paths.
 *
 *   none       no GPU
 *   single     one GPU
 *   nvswitch   every pair joined, through NVSwitches (DGX A100, DGX H100)
 *   full-mesh  every pair joined by direct NVLinks (2 GPUs with a bridge, 4-GPU HGX boards)
 *   hcm        hybrid cube mesh (DGX-1): 8 GPUs, each with 4 NVLink neighbours, one of which,
 *              the relay, shares no neighbour with it, while the other 3 and the GPU itself are
 *              fully connected (a quad). The HCM allreduce sums the quad one-shot and adds the
 *              relay's quad sum, read over the relay's link.
 *   pcie       no NVLink; pcie_distance is the farthest GPU pair
 *   mixed      anything else with NVLink; the largest fully connected subsets are listed */
#include "build-config.h"
#include "topo/topo.h"

#include <string.h>

static int popcount32(uint32_t v)
{
    int n = 0;
    for (; v; v &= v - 1) {
        n++;
    }
    return n;
}

static uint32_t neighbor_mask(const picoll_topo_t *t, int i)
{
    uint32_t m = 0;
    for (int j = 0; j < t->ngpus; j++) {
        if (picoll_topo_nvlinks(t, i, j) > 0) {
            m |= 1u << j;
        }
    }
    return m;
}

static int is_clique(const uint32_t *nbr, uint32_t set)
{
    for (uint32_t s = set; s; s &= s - 1) {
        int i = __builtin_ctz(s);
        if ((set & ~(1u << i) & ~nbr[i]) != 0) {
            return 0;
        }
    }
    return 1;
}

/* Bron-Kerbosch with pivoting, keeping the cliques of the largest size found so far. */
typedef struct {
    const uint32_t *nbr;
    picoll_topo_classification_t *c;
} clique_ctx_t;

static void bron_kerbosch(clique_ctx_t *x, uint32_t r, uint32_t p, uint32_t q)
{
    if (p == 0 && q == 0) {
        int size = popcount32(r);
        if (size > x->c->subset_size) {
            x->c->subset_size = size;
            x->c->nsubsets = 0;
        }
        if (size == x->c->subset_size && x->c->nsubsets < PICOLL_TOPO_MAX_SUBSETS) {
            x->c->subsets[x->c->nsubsets++] = r;
        }
        return;
    }
    uint32_t pq = p | q;
    int pivot = __builtin_ctz(pq);
    for (uint32_t cand = p & ~x->nbr[pivot]; cand; cand &= cand - 1) {
        int v = __builtin_ctz(cand);
        uint32_t bit = 1u << v;
        bron_kerbosch(x, r | bit, p & x->nbr[v], q & x->nbr[v]);
        p &= ~bit;
        q |= bit;
    }
}

static int check_hcm(const picoll_topo_t *t, const uint32_t *nbr, picoll_topo_classification_t *c)
{
    if (t->ngpus != 8) {
        return 0;
    }
    for (int i = 0; i < 8; i++) {
        int relay = -1;
        if (popcount32(nbr[i]) != 4) {
            return 0;
        }
        for (uint32_t s = nbr[i]; s; s &= s - 1) {
            int j = __builtin_ctz(s);
            if ((nbr[i] & nbr[j]) == 0) {
                if (relay >= 0) {
                    return 0; /* two relays */
                }
                relay = j;
            }
        }
        if (relay < 0) {
            return 0;
        }
        /* the GPU and its 3 other neighbours: a fully connected quad */
        if (!is_clique(nbr, (nbr[i] & ~(1u << relay)) | (1u << i))) {
            return 0;
        }
        c->hcm_relay[i] = relay;
        int k = 0;
        for (uint32_t s = nbr[i]; s; s &= s - 1) {
            c->hcm_neighbors[i][k++] = __builtin_ctz(s);
        }
    }
    for (int i = 0; i < 8; i++) {
        if (c->hcm_relay[c->hcm_relay[i]] != i) {
            return 0;
        }
    }
    return 1;
}

void picoll_topo_classify(picoll_topo_t *t)
{
    picoll_topo_classification_t *c = &t->cls;
    uint32_t nbr[PICOLL_TOPO_MAX_GPUS] = {0};
    int n = t->ngpus, npairs = 0, nvpairs = 0, switched = 0;

    memset(c, 0, sizeof(*c));
    for (int i = 0; i < PICOLL_TOPO_MAX_GPUS; i++) {
        c->hcm_relay[i] = -1;
        for (int k = 0; k < 4; k++) {
            c->hcm_neighbors[i][k] = -1;
        }
    }
    if (n <= 0) {
        c->cls = PICOLL_TOPO_CLASS_NONE;
        return;
    }
    if (n == 1) {
        c->cls = PICOLL_TOPO_CLASS_SINGLE;
        return;
    }
    for (int i = 0; i < n; i++) {
        nbr[i] = neighbor_mask(t, i);
        for (int j = i + 1; j < n; j++) {
            npairs++;
            if (picoll_topo_nvlinks(t, i, j) > 0) {
                nvpairs++;
                switched |= t->links[i][j].nvswitch_links > 0;
            }
            if (t->links[i][j].path > c->pcie_distance) {
                c->pcie_distance = t->links[i][j].path;
            }
        }
    }
    if (nvpairs == npairs) {
        c->cls = switched ? PICOLL_TOPO_CLASS_NVSWITCH : PICOLL_TOPO_CLASS_FULL_MESH;
        c->nsubsets = 1;
        c->subset_size = n;
        c->subsets[0] = n == 32 ? 0xffffffffu : (1u << n) - 1;
        return;
    }
    if (nvpairs == 0) {
        c->cls = PICOLL_TOPO_CLASS_PCIE;
        return;
    }
    clique_ctx_t x = {.nbr = nbr, .c = c};
    uint32_t all = n == 32 ? 0xffffffffu : (1u << n) - 1;
    bron_kerbosch(&x, 0, all, 0);
    if (check_hcm(t, nbr, c)) {
        c->cls = PICOLL_TOPO_CLASS_HCM;
        return;
    }
    for (int i = 0; i < PICOLL_TOPO_MAX_GPUS; i++) {
        c->hcm_relay[i] = -1;
        for (int k = 0; k < 4; k++) {
            c->hcm_neighbors[i][k] = -1;
        }
    }
    c->cls = PICOLL_TOPO_CLASS_MIXED;
}

/* The two changes that re-classify, here beside the classification, so that topo.c (the helpers
 * the classification uses) calls nothing back. */
void picoll_topo_set_p2p(picoll_topo_t *t, int a, int b, picoll_topo_p2p_t p2p)
{
    if (a < 0 || b < 0 || a >= t->ngpus || b >= t->ngpus || a == b) {
        return;
    }
    t->links[a][b].p2p = p2p;
    t->links[b][a].p2p = p2p;
    picoll_topo_classify(t);
}

picoll_status_t picoll_topo_restrict(const picoll_topo_t *t, const int *gpus, int n,
                                     picoll_topo_t *out)
{
    uint32_t seen = 0;

    if (n < 0 || n > PICOLL_TOPO_MAX_GPUS || out == t) {
        return PICOLL_ERR_INVALID_PARAM;
    }
    for (int i = 0; i < n; i++) {
        if (gpus[i] < 0 || gpus[i] >= t->ngpus || (seen & (1u << gpus[i]))) {
            return PICOLL_ERR_INVALID_PARAM;
        }
        seen |= 1u << gpus[i];
    }
    picoll_topo_init(out, t->source);
    out->ngpus = n;
    out->nnics = t->nnics;
    memcpy(out->nic_names, t->nic_names, sizeof(out->nic_names));
    for (int i = 0; i < n; i++) {
        out->gpus[i] = t->gpus[gpus[i]];
        memcpy(out->gpu_nic[i], t->gpu_nic[gpus[i]], sizeof(out->gpu_nic[i]));
        for (int j = 0; j < n; j++) {
            out->links[i][j] = t->links[gpus[i]][gpus[j]];
        }
    }
    picoll_topo_classify(out);
    return PICOLL_OK;
}
