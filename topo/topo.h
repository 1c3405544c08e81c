/* Node GPU topology: what connects the GPUs of one node (NVLink, NVSwitch, PCIe), its class, and
 * the reach of a set of ranks (how they can read each other's GPU memory). Topology knows no
 * message sizes: which algorithm runs at which size for each reach is the algorithm layer's
 * choice (src/coll/select.c).
 *
 * A topology comes from NVML + hwloc at run time (detect.c), or from a recorded
 * `nvidia-smi topo -m` text (parse.c, PICOLL_TOPO_FILE). Classification (topo_classify.c) and
 * the reach (reach.c) are pure functions of it, so every rank that holds the same topology makes
 * the same choice. topo/ depends only on src/ util (status, log, config); it never includes a
 * header of a higher layer. */
#ifndef PICOLL_TOPO_H
#define PICOLL_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/config.h"
#include "util/status.h"

#define PICOLL_TOPO_MAX_GPUS 32 /* GPUs of one node; a GPU set is a uint32_t mask */
#define PICOLL_TOPO_MAX_NICS 64
#define PICOLL_TOPO_BUSID_LEN 32  /* "0000:07:00.0" */
#define PICOLL_TOPO_NAME_LEN 32   /* "GPU0", "mlx5_0" */
#define PICOLL_TOPO_MAX_SUBSETS 8 /* largest fully connected subsets kept */
/* No GPU has more NVLink ports than this (V100: 6, A100: 12, H100 and B200: 18). A GPU whose
 * NV# entries add up to more must reach its peers through an NVSwitch. */
#define PICOLL_TOPO_MAX_GPU_NVLINKS 18
/* GPUs of one quad of a hybrid cube mesh: 4 fully connected GPUs, each a relay away from one of
 * the other quad's (picoll_topo_hcm_plan_t). */
#define PICOLL_TOPO_HCM_QUAD 4

/* PCIe path between two devices, nearest first; the names are nvidia-smi's. */
typedef enum {
    PICOLL_TOPO_PATH_UNKNOWN, /* not reported (e.g. hidden behind NV# in a topo -m text) */
    PICOLL_TOPO_PATH_SELF,    /* X */
    PICOLL_TOPO_PATH_PIX,     /* at most one PCIe bridge: same switch */
    PICOLL_TOPO_PATH_PXB,     /* several PCIe bridges, no host bridge */
    PICOLL_TOPO_PATH_PHB,     /* through a PCIe host bridge (the CPU) */
    PICOLL_TOPO_PATH_NODE,    /* between host bridges of one NUMA node */
    PICOLL_TOPO_PATH_SYS      /* across the SMP interconnect between sockets (QPI/UPI/xGMI) */
} picoll_topo_path_t;

typedef enum {
    PICOLL_TOPO_P2P_UNKNOWN, /* nobody said: treated as not working */
    PICOLL_TOPO_P2P_OK,      /* NVML reports peer access (or, from a file: NV# or a PCIe path
                                below SYS); the device layer confirms it with a real IPC mapping
                                and calls picoll_topo_set_p2p(..., NO) when that fails */
    PICOLL_TOPO_P2P_NO
} picoll_topo_p2p_t;

typedef struct {
    int nvlinks;        /* direct GPU-GPU NVLinks */
    int nvswitch_links; /* NVLinks through NVSwitches usable between the pair */
    picoll_topo_path_t path;
    picoll_topo_p2p_t p2p;
} picoll_topo_link_t;

typedef struct {
    char bus_id[PICOLL_TOPO_BUSID_LEN]; /* "0000:07:00.0", lower case; "" when unknown (files) */
    int numa_node;                      /* -1: unknown */
    char cpu_affinity[64];              /* as nvidia-smi prints it, "" when unknown */
    int nic;                            /* nearest NIC (index into nics), -1: none or unknown */
    picoll_topo_path_t nic_path;        /* path to that NIC */
    int total_nvlinks;                  /* sum of the GPU's NVLinks (direct or to switches) */
} picoll_topo_gpu_t;

typedef enum {
    PICOLL_TOPO_CLASS_NONE,      /* no GPU: host only */
    PICOLL_TOPO_CLASS_SINGLE,    /* one GPU (ranks may share it) */
    PICOLL_TOPO_CLASS_NVSWITCH,  /* every pair joined through NVSwitches */
    PICOLL_TOPO_CLASS_FULL_MESH, /* every pair joined by direct NVLinks */
    PICOLL_TOPO_CLASS_HCM,       /* hybrid cube mesh, as DGX-1: 8 GPUs, 4 neighbours, 1 relay */
    PICOLL_TOPO_CLASS_PCIE,      /* no NVLink at all */
    PICOLL_TOPO_CLASS_MIXED      /* some NVLink, not fully connected, not an HCM */
} picoll_topo_class_t;

typedef struct {
    picoll_topo_class_t cls;
    picoll_topo_path_t pcie_distance; /* PCIE: farthest path between two GPUs */
    /* HCM: per GPU its 4 NVLink neighbours (ascending) and the relay among them: the one
     * neighbour that shares no neighbour with it. The other 3 form a fully connected quad. */
    int hcm_neighbors[PICOLL_TOPO_MAX_GPUS][4];
    int hcm_relay[PICOLL_TOPO_MAX_GPUS];
    /* HCM, MIXED: the largest sets of GPUs all pairwise joined by NVLink, as masks; size each */
    int nsubsets;
    int subset_size;
    uint32_t subsets[PICOLL_TOPO_MAX_SUBSETS];
} picoll_topo_classification_t;

typedef struct {
    int ngpus;
    int nnics;
    picoll_topo_gpu_t gpus[PICOLL_TOPO_MAX_GPUS];
    char nic_names[PICOLL_TOPO_MAX_NICS][PICOLL_TOPO_NAME_LEN];
    picoll_topo_link_t links[PICOLL_TOPO_MAX_GPUS][PICOLL_TOPO_MAX_GPUS];
    picoll_topo_path_t gpu_nic[PICOLL_TOPO_MAX_GPUS][PICOLL_TOPO_MAX_NICS];
    char source[256]; /* "nvml", "file PATH", or why there is no GPU */
    picoll_topo_classification_t cls;
} picoll_topo_t;

/* ------------------------------------------------------------------ basics (topo.c) */
void picoll_topo_init(picoll_topo_t *t, const char *source);
const char *picoll_topo_class_name(picoll_topo_class_t cls); /* "nvswitch", "hcm", ... */
const char *picoll_topo_path_name(picoll_topo_path_t path);  /* "PIX", ..., "?" */
const char *picoll_topo_path_desc(picoll_topo_path_t path);  /* "same PCIe switch", ... */
/* NVLinks between a and b, direct or through NVSwitches; 0 when a == b. */
int picoll_topo_nvlinks(const picoll_topo_t *t, int a, int b);
/* Records a peer-access result found later (the device layer's IPC check) and reclassifies. */
void picoll_topo_set_p2p(picoll_topo_t *t, int a, int b, picoll_topo_p2p_t p2p);
/* The topology of the GPUs gpus[0..n-1] (distinct, in that order) of t. */
picoll_status_t picoll_topo_restrict(const picoll_topo_t *t, const int *gpus, int n,
                                     picoll_topo_t *out);
/* Index of the GPU with that PCI bus id (any case, 4- or 8-digit domain), -1 if none. */
int picoll_topo_find_bus_id(const picoll_topo_t *t, const char *bus_id);
/* Normalises a bus id to "dddd:bb:dd.f" lower case; 0 on success. */
int picoll_topo_normalize_bus_id(const char *in, char *out, size_t len);
/* FNV hash of everything classification and selection read: equal topologies, equal hashes. */
uint32_t picoll_topo_hash(const picoll_topo_t *t);

/* ------------------------------------------------------------------ sources */
/* A recorded `nvidia-smi topo -m` text (parse.c). Errors name the file and line:
 * "topo file F line 5: expected 8 entries, found 7", and return PICOLL_ERR_TOPOLOGY. */
picoll_status_t picoll_topo_parse_file(const char *path, picoll_topo_t *out, char *err,
                                       size_t errlen);
picoll_status_t picoll_topo_parse_text(const char *text, const char *name, picoll_topo_t *out,
                                       char *err, size_t errlen);
/* This node's GPUs through NVML (dlopen'ed) and hwloc (linked when built with it). Without NVML
 * or GPUs the result has no GPU (class none) and PICOLL_OK: that is host only, not an error. */
picoll_status_t picoll_topo_detect(picoll_topo_t *out);
/* The NUMA node and the nearest NIC of each GPU of t whose bus_id is set, from hwloc's view of
 * this machine (HWLOC_XMLFILE, when set, replaces it: the tests' recorded machines). Does nothing
 * when picoll is built without hwloc. */
void picoll_topo_hwloc_fill(picoll_topo_t *t);
/* cfg->topo_file when set, else picoll_topo_detect. */
picoll_status_t picoll_topo_load(const picoll_config_t *cfg, picoll_topo_t *out, char *err,
                                 size_t errlen);

/* ------------------------------------------------------------------ classification */
/* Fills t->cls from the links (called by the sources; again after edits). */
void picoll_topo_classify(picoll_topo_t *t);

/* ------------------------------------------------------------------ selection (select.c) */
/* How a set of ranks can reach each other's GPU memory: computed once per communicator. */
typedef enum {
    PICOLL_TOPO_REACH_NONE,   /* no device path for this set: hand every call over */
    PICOLL_TOPO_REACH_NVLINK, /* all GPUs pairwise joined by NVLink/NVSwitch, or one shared GPU */
    PICOLL_TOPO_REACH_HCM,    /* exactly the 8 GPUs of a hybrid cube mesh, one rank each */
    PICOLL_TOPO_REACH_PCIE    /* peer access between every pair, not all over NVLink */
} picoll_topo_reach_t;

const char *picoll_topo_reach_name(picoll_topo_reach_t reach);

/* rank_gpu[r]: the topology index of rank r's GPU (ranks may share one), -1 for none. */
picoll_topo_reach_t picoll_topo_reach(const picoll_topo_t *t, const int *rank_gpu, int nranks);

/* ------------------------------------------------------------------ output (print.c) */
/* Matrix, GPUs, class, and the reach of the whole node and of its largest fully connected subsets,
 * as picoll_info --topology prints them; after each reach, print_reach (the caller's: the algorithm
 * layer's selection for that reach) when not NULL. */
void picoll_topo_print(FILE *f, const picoll_topo_t *t,
                       void (*print_reach)(FILE *f, picoll_topo_reach_t reach, void *arg),
                       void *arg);

#endif
