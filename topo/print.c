/* The topology as picoll_info --topology prints it. */
#include "build-config.h"
#include "topo/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cell(const picoll_topo_t *t, int i, int j, char *buf, size_t len)
{
    const picoll_topo_link_t *l = &t->links[i][j];
    if (i == j) {
        snprintf(buf, len, "X");
    } else if (l->nvswitch_links > 0) {
        snprintf(buf, len, "NS%d", l->nvswitch_links);
    } else if (l->nvlinks > 0) {
        snprintf(buf, len, "NV%d", l->nvlinks);
    } else {
        snprintf(buf, len, "%s", picoll_topo_path_name(l->path));
    }
    if (i != j && l->p2p != PICOLL_TOPO_P2P_OK && len > strlen(buf) + 1) {
        strcat(buf, "*");
    }
}

static void print_selection(FILE *f, const picoll_topo_t *t, uint32_t set, const char *what,
                            void (*print_reach)(FILE *, picoll_topo_reach_t, void *), void *arg)
{
    int ranks[PICOLL_TOPO_MAX_GPUS] = {0}, n = 0;
    for (uint32_t s = set; s; s &= s - 1) {
        ranks[n++] = __builtin_ctz(s);
    }
    picoll_topo_reach_t reach = picoll_topo_reach(t, ranks, n);
    fprintf(f, "  %s {", what);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s%d", i ? "," : "", ranks[i]);
    }
    fprintf(f, "}, one rank per GPU: reach %s\n", picoll_topo_reach_name(reach));
    if (print_reach != NULL) {
        print_reach(f, reach, arg);
    }
}

void picoll_topo_print(FILE *f, const picoll_topo_t *t,
                       void (*print_reach)(FILE *f, picoll_topo_reach_t reach, void *arg),
                       void *arg)
{
    const picoll_topo_classification_t *c = &t->cls;
    char buf[32];

    fprintf(f, "topology: %s\n", t->source);
    fprintf(f, "  %d GPU(s), %d NIC(s)\n", t->ngpus, t->nnics);
    if (t->ngpus > 0) {
        fprintf(f, "  %-6s", "");
        for (int j = 0; j < t->ngpus; j++) {
            snprintf(buf, sizeof(buf), "GPU%d", j);
            fprintf(f, " %-6s", buf);
        }
        fprintf(f, " %-14s %-5s %s\n", "bus id", "NUMA", "nearest NIC");
        for (int i = 0; i < t->ngpus; i++) {
            const picoll_topo_gpu_t *g = &t->gpus[i];
            snprintf(buf, sizeof(buf), "GPU%d", i);
            fprintf(f, "  %-6s", buf);
            for (int j = 0; j < t->ngpus; j++) {
                cell(t, i, j, buf, sizeof(buf));
                fprintf(f, " %-6s", buf);
            }
            fprintf(f, " %-14s ", g->bus_id[0] ? g->bus_id : "?");
            if (g->numa_node >= 0) {
                fprintf(f, "%-5d ", g->numa_node);
            } else {
                fprintf(f, "%-5s ", "?");
            }
            if (g->nic >= 0) {
                fprintf(f, "%s (%s)\n", t->nic_names[g->nic], picoll_topo_path_name(g->nic_path));
            } else {
                fprintf(f, "?\n");
            }
        }
        fprintf(f,
                "  NV# direct NVLinks, NS# NVLinks through NVSwitches, PIX/PXB/PHB/NODE/SYS PCIe "
                "paths as nvidia-smi names them, * no peer access\n");
    }
    fprintf(f, "class: %s", picoll_topo_class_name(c->cls));
    if (c->cls == PICOLL_TOPO_CLASS_PCIE) {
        fprintf(f, " (farthest pair: %s, %s)", picoll_topo_path_name(c->pcie_distance),
                picoll_topo_path_desc(c->pcie_distance));
    }
    fprintf(f, "\n");
    if (c->cls == PICOLL_TOPO_CLASS_HCM) {
        for (int i = 0; i < t->ngpus; i++) {
            fprintf(f, "  GPU%d neighbours %d,%d,%d,%d relay %d\n", i, c->hcm_neighbors[i][0],
                    c->hcm_neighbors[i][1], c->hcm_neighbors[i][2], c->hcm_neighbors[i][3],
                    c->hcm_relay[i]);
        }
    }
    if (c->cls == PICOLL_TOPO_CLASS_HCM || c->cls == PICOLL_TOPO_CLASS_MIXED) {
        fprintf(f, "  largest fully connected subsets (%d GPUs):", c->subset_size);
        for (int s = 0; s < c->nsubsets; s++) {
            fprintf(f, " {");
            int k = 0;
            for (uint32_t m = c->subsets[s]; m; m &= m - 1) {
                fprintf(f, "%s%d", k++ ? "," : "", __builtin_ctz(m));
            }
            fprintf(f, "}");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "selection (sizes in bytes: allreduce, bcast, reduce message, allgather(v)/alltoall "
               "receive buffer, reduce_scatter(_block) input):\n");
    uint32_t all = t->ngpus >= 32 ? 0xffffffffu : (1u << t->ngpus) - 1;
    print_selection(f, t, all, "all GPUs", print_reach, arg);
    if (c->cls == PICOLL_TOPO_CLASS_HCM || c->cls == PICOLL_TOPO_CLASS_MIXED) {
        for (int s = 0; s < c->nsubsets; s++) {
            if (c->subsets[s] != all && c->subset_size > 1) {
                print_selection(f, t, c->subsets[s], "subset", print_reach, arg);
            }
        }
    }
}
