/* The one table of PICOLL_* environment variables, and their parsed values. */
#ifndef PICOLL_CONFIG_H
#define PICOLL_CONFIG_H

#include <stddef.h>
#include "util/status.h"

typedef enum {
    PICOLL_CFG_BOOL,   /* int: 0 or 1 */
    PICOLL_CFG_SIZE,   /* size_t: bytes, units k/m/g (powers of 1024) */
    PICOLL_CFG_INT,    /* long, within [min, max] */
    PICOLL_CFG_DOUBLE, /* double, >= 0 */
    PICOLL_CFG_ENUM,   /* int: index into the comma-separated choices */
    PICOLL_CFG_STRING  /* const char *, may be empty */
} picoll_cfg_type_t;

typedef enum { PICOLL_HOST_OFF, PICOLL_HOST_ON, PICOLL_HOST_AUTO } picoll_host_mode_t;
typedef enum { PICOLL_VNODE_BLOCK, PICOLL_VNODE_CYCLIC } picoll_vnode_layout_t;
typedef enum {
    PICOLL_TOPO_FILE_GPU_DEVICE,
    PICOLL_TOPO_FILE_GPU_LOCAL_RANK
} picoll_topo_file_gpu_t;
/* PICOLL_CUDA_STAGING, in the order of its choices */
typedef enum { PICOLL_STAGING_AUTO, PICOLL_STAGING_ON, PICOLL_STAGING_OFF } picoll_staging_mode_t;
/* PICOLL_CMA, in the order of its choices */
typedef enum { PICOLL_CMA_AUTO, PICOLL_CMA_OFF } picoll_cma_mode_t;
typedef enum { PICOLL_TIMEOUT_WAIT, PICOLL_TIMEOUT_ABORT } picoll_timeout_action_t;
/* PICOLL_NET_ALLREDUCE and PICOLL_NET_ALLGATHER, in the order of their choices */
typedef enum {
    PICOLL_NET_AR_AUTO,
    PICOLL_NET_AR_RD,
    PICOLL_NET_AR_RAB,
    PICOLL_NET_AR_RING
} picoll_net_allreduce_mode_t;
typedef enum {
    PICOLL_NET_AG_AUTO,
    PICOLL_NET_AG_RING,
    PICOLL_NET_AG_BRUCK
} picoll_net_allgather_mode_t;

/* Parsed values: one field per table entry. */
/* PICOLL_CUDA_FENCES, in its choices' order. */
typedef enum { PICOLL_CUDA_FENCES_ALL, PICOLL_CUDA_FENCES_NEEDED } picoll_cuda_fences_t;
/* PICOLL_CUDA_ZERO_COPY, in its choices' order. */
typedef enum {
    PICOLL_CUDA_ZC_OFF,        /* every call copies through the workspace */
    PICOLL_CUDA_ZC_REGISTERED, /* buffers in ranges registered with picoll_register */
    PICOLL_CUDA_ZC_REUSED,     /* those, and any other device buffer from the second call its
                                * allocation is met in (the first one copies) */
    PICOLL_CUDA_ZC_ON          /* those, and any other device buffer through the IPC cache */
} picoll_cuda_zc_mode_t;

typedef struct {
    int enable;
    int log_level; /* picoll_log_level_t */
    int stats;
    int host; /* picoll_host_mode_t */
    size_t workspace_size;
    size_t host_cache;    /* PICOLL_HOST_CACHE: the chunks' cache unit (0: detected) */
    size_t host_auto_max; /* PICOLL_HOST_AUTO_MAX: auto's allgather/alltoall limit (bytes) */
    size_t allreduce_oneshot_max;
    size_t allreduce_twoshot_max;
    double timeout;
    int timeout_action; /* picoll_timeout_action_t */
    double wait_nap;    /* PICOLL_WAIT_NAP: seconds without movement before a wait sleeps */
    long test_fail_setup;
    /* single-copy transfers between the ranks of a node (host/cma.c) */
    int cma; /* picoll_cma_mode_t; may differ between ranks: agreed per node */
    size_t cma_min;
    size_t allreduce_cma_min;
    long test_cma_fault;
    /* between nodes */
    int net;
    long vnode_size;
    int vnode_layout;     /* picoll_vnode_layout_t */
    size_t net_rd_max;    /* PICOLL_NET_RD_MAX (0: the cost model decides) */
    double net_latency;   /* PICOLL_NET_LATENCY: the model's seconds per message */
    size_t net_bandwidth; /* PICOLL_NET_BANDWIDTH: the model's bytes per second */
    int net_allreduce;    /* picoll_net_allreduce_mode_t */
    int net_allgather;    /* picoll_net_allgather_mode_t */
    long net_inflight;
    int cuda_staging;            /* picoll_staging_mode_t */
    int cuda;                    /* device executor (cuda/) allowed */
    double cuda_spin;            /* seconds a device kernel waits for a peer before giving up */
    long cuda_small_threads;     /* PICOLL_CUDA_SMALL_THREADS: threads of a one-block launch */
    int cuda_fences;             /* PICOLL_CUDA_FENCES: picoll_cuda_fences_t */
    long cuda_nap;               /* PICOLL_CUDA_NAP: ns a kernel's wait sleeps between looks */
    long cuda_blocks;            /* PICOLL_CUDA_BLOCKS: blocks per launch at most (0: the budget) */
    size_t cuda_ll_max;          /* PICOLL_CUDA_LL_MAX: largest allreduce or allgather (bytes a
                                * rank receives) run with the low-latency lines (cuda_ll); 0:
                                * none */
    int cuda_fixed;              /* PICOLL_CUDA_FIXED: the kernel entries of fixed type, op and
                                * rank count (0: the generic kernel for every launch) */
    long cuda_ipc_cache;         /* PICOLL_CUDA_IPC_CACHE: peers' allocations kept mapped at
                                * most (cuda/cuda_ipc_cache.h); 0: none */
    size_t cuda_ipc_cache_bytes; /* PICOLL_CUDA_IPC_CACHE_BYTES: their bytes at most */
    int cuda_zero_copy;          /* PICOLL_CUDA_ZERO_COPY: picoll_cuda_zc_mode_t */
    size_t cuda_zero_copy_min;   /* PICOLL_CUDA_ZERO_COPY_MIN: smallest call (bytes a rank
                                * receives) that may take it */
    long stage_depth;            /* PICOLL_STAGE_DEPTH: chunks copied ahead (mem/stage.h) */
    int hier_cuda;               /* PICOLL_HIER_CUDA: device node steps of the collectives between
                                * nodes */
    size_t hier_cuda_min;        /* PICOLL_HIER_CUDA_MIN: smallest call (bytes) it takes */
    size_t hier_cuda_chunk;      /* PICOLL_HIER_CUDA_CHUNK: its allreduce's network-step chunk */
    int stream_kernels;          /* PICOLL_STREAM_KERNELS: picoll's kernels launched on the
                                * stream of an enqueued collective */
    long stream_default_sharing; /* PICOLL_STREAM_DEFAULT_SHARING: a default stream's kernels
                                  * only where at most this many ranks share a GPU */
    /* topology (topo/) */
    const char *topo_file;
    int topo_file_gpu; /* picoll_topo_file_gpu_t */
    size_t nvlink_oneshot_max;
    size_t nvlink_twoshot_max;
    size_t hcm_oneshot_max;
    size_t pcie_oneshot_max;
    size_t nvlink_ipc_max;
    size_t pcie_ipc_max;
} picoll_config_t;

/* The job's configuration: loaded by the core at MPI_Init (picoll_config_load) and the same on
 * every rank once picoll is active; read by every layer. */
extern picoll_config_t picoll_cfg;

typedef struct {
    const char *name; /* full variable name, "PICOLL_..." */
    picoll_cfg_type_t type;
    const char *def;     /* default, as text in the variable's own syntax */
    const char *choices; /* PICOLL_CFG_ENUM: comma-separated, lower case */
    long min, max;       /* PICOLL_CFG_INT: accepted range */
    size_t offset;       /* of the value in picoll_config_t */
    const char *doc;     /* one sentence */
    int internal;        /* 1: for picoll's tests only, not listed to users (picoll_info,
                           * docs/variables.md) */
} picoll_config_var_t;

const picoll_config_var_t *picoll_config_vars(size_t *count);
const picoll_config_var_t *picoll_config_find(const char *name);

/* Parse one value. On failure writes a message naming the variable and the accepted form. */
picoll_status_t picoll_config_parse(const picoll_config_var_t *var, const char *text,
                                    picoll_config_t *cfg, char *err, size_t errlen);

/* Defaults, then every variable found in env (a NULL-terminated "NAME=value" array, e.g. environ).
 * Malformed values are reported through picoll_error and leave their default; unknown PICOLL_*
 * names are reported through picoll_warn, except PICOLL_UCX_* (UCX's settings) and PICOLL_BENCH_*
 * (the benchmarks'). Returns PICOLL_ERR_CONFIG if any value was malformed. */
picoll_status_t picoll_config_load(picoll_config_t *cfg, char *const *env);

/* The value of var in cfg, formatted in the variable's syntax. */
void picoll_config_format(const picoll_config_var_t *var, const picoll_config_t *cfg, char *buf,
                          size_t len);

/* Format a size in the largest unit that divides it exactly: "8M", "256k", "1000". */
void picoll_format_size(size_t v, char *buf, size_t len);

/* Parse a size ("4096", "256k", "10M", "1G", "2MB", "64KiB"); 0 on success. */
int picoll_parse_size(const char *text, size_t *out);

/* A hash of the values that must be equal on every rank (all but the log level and PICOLL_CMA,
 * which each node agrees on at set-up). */
unsigned picoll_config_hash(const picoll_config_t *cfg);

#endif
