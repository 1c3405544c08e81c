#include "util/config.h"
#include "util/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PICOLL_ENV_PREFIX "PICOLL_"

/* clang-format off: one variable a block, its fields packed as written */
static const picoll_config_var_t config_vars[] = {
    {.name = "PICOLL_ENABLE",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, enable),
     .doc = "1 intercepts the collectives; 0 passes every call to PMPI untouched"},
    {.name = "PICOLL_LOG_LEVEL",
     .type = PICOLL_CFG_ENUM,
     .def = "warn",
     .choices = "error,warn,info,debug,trace",
     .offset = offsetof(picoll_config_t, log_level),
     .doc = "messages printed to stderr, each prefixed with the world rank"},
    {.name = "PICOLL_STATS",
     .type = PICOLL_CFG_BOOL,
     .def = "0",
     .offset = offsetof(picoll_config_t, stats),
     .doc = "1: at MPI_Finalize rank 0 prints the calls and bytes of each collective and path, "
            "summed over ranks"},
    {.name = "PICOLL_HOST",
     .type = PICOLL_CFG_ENUM,
     .def = "auto",
     .choices = "off,on,auto",
     .offset = offsetof(picoll_config_t, host),
     .doc = "collectives on host buffers through the shared-memory executor: off, on (every "
            "size) or auto (where it beat the MPI when measured: allreduce, and allgather and "
            "alltoall up to PICOLL_HOST_AUTO_MAX)"},
    {.name = "PICOLL_WORKSPACE_SIZE",
     .type = PICOLL_CFG_SIZE,
     .def = "8M",
     .offset = offsetof(picoll_config_t, workspace_size),
     .doc = "bytes of shared workspace per local rank and communicator; larger messages go "
            "through it in chunks"},
    {.name = "PICOLL_HOST_CACHE",
     .type = PICOLL_CFG_SIZE,
     .def = "0",
     .offset = offsetof(picoll_config_t, host_cache),
     .doc = "bytes the host allgather and alltoall chunks scale by (0: the L2 cache of a core "
            "of the node's first rank)"},
    {.name = "PICOLL_HOST_AUTO_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "16k",
     .offset = offsetof(picoll_config_t, host_auto_max),
     .doc = "with PICOLL_HOST=auto on one node, the largest allgather (ranks x block) and "
            "alltoall (ranks x ranks x block) in bytes that picoll runs"},
    {.name = "PICOLL_ALLREDUCE_ONESHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "16k",
     .offset = offsetof(picoll_config_t, allreduce_oneshot_max),
     .doc = "largest host allreduce (bytes) run one-shot, every rank reducing all inputs"},
    {.name = "PICOLL_ALLREDUCE_TWOSHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "1G",
     .offset = offsetof(picoll_config_t, allreduce_twoshot_max),
     .doc = "largest host allreduce (bytes) run two-shot (reduce-scatter then all-gather); "
            "larger ones go to the MPI"},
    {.name = "PICOLL_TIMEOUT",
     .type = PICOLL_CFG_DOUBLE,
     .def = "60",
     .offset = offsetof(picoll_config_t, timeout),
     .doc = "seconds a rank waits for a peer inside a collective before it names the ranks it "
            "waits for (again at 2x, 4x, ...)"},
    {.name = "PICOLL_WAIT_NAP",
     .type = PICOLL_CFG_DOUBLE,
     .def = "0.05",
     .offset = offsetof(picoll_config_t, wait_nap),
     .doc = "seconds a rank waits for a peer with nothing moving before each further poll "
            "sleeps 0.1 ms instead of yielding the CPU (a late peer then gets the CPUs; "
            "0: never sleeps)"},
    {.name = "PICOLL_TIMEOUT_ACTION",
     .type = PICOLL_CFG_ENUM,
     .def = "wait",
     .choices = "wait,abort",
     .offset = offsetof(picoll_config_t, timeout_action),
     .doc = "what a wait for live peers does past PICOLL_TIMEOUT: wait (as MPI does) or abort "
            "(end the job, naming them)"},
    {.name = "PICOLL_TEST_FAIL_SETUP",
     .type = PICOLL_CFG_INT,
     .def = "-1",
     .min = -1,
     .max = INT_MAX,
     .offset = offsetof(picoll_config_t, test_fail_setup),
     .doc = "tests only: the world rank whose communicator set-up is made to fail (-1: none)",
     .internal = 1},
    {.name = "PICOLL_CMA",
     .type = PICOLL_CFG_ENUM,
     .def = "auto",
     .choices = "auto,off",
     .offset = offsetof(picoll_config_t, cma),
     .doc = "single-copy host transfers (process_vm_readv, from PICOLL_CMA_MIN and "
            "PICOLL_ALLREDUCE_CMA_MIN): auto where every rank of the node can, off never"},
    {.name = "PICOLL_CMA_MIN",
     .type = PICOLL_CFG_SIZE,
     .def = "0",
     .offset = offsetof(picoll_config_t, cma_min),
     .doc = "smallest host allgather/alltoall block (bytes) read single-copy with "
            "process_vm_readv (0: never)"},
    {.name = "PICOLL_ALLREDUCE_CMA_MIN",
     .type = PICOLL_CFG_SIZE,
     .def = "0",
     .offset = offsetof(picoll_config_t, allreduce_cma_min),
     .doc = "smallest host allreduce (bytes) run two-shot in single copies with "
            "process_vm_readv (0: never)"},
    {.name = "PICOLL_TEST_CMA_FAULT",
     .type = PICOLL_CFG_INT,
     .def = "-1",
     .min = -1,
     .max = INT_MAX,
     .offset = offsetof(picoll_config_t, test_cma_fault),
     .doc = "tests only: the world rank that publishes an unreadable block address to the "
            "single-copy algorithms (-1: none)",
     .internal = 1},
    {.name = "PICOLL_NET",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, net),
     .doc = "1 runs host-buffer collectives of communicators that span nodes hierarchically "
            "over UCX where PICOLL_HOST allows; 0 hands them to the MPI"},
    {.name = "PICOLL_VNODE_SIZE",
     .type = PICOLL_CFG_INT,
     .def = "0",
     .min = 0,
     .max = INT_MAX,
     .offset = offsetof(picoll_config_t, vnode_size),
     .doc = "split every node into virtual nodes of this many local ranks, so the between-nodes "
            "path runs on one machine (0: real nodes)"},
    {.name = "PICOLL_VNODE_LAYOUT",
     .type = PICOLL_CFG_ENUM,
     .def = "block",
     .choices = "block,cyclic",
     .offset = offsetof(picoll_config_t, vnode_layout),
     .doc = "with PICOLL_VNODE_SIZE, block puts consecutive local ranks on a virtual node and "
            "cyclic deals them out round-robin"},
    {.name = "PICOLL_NET_RD_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "0",
     .offset = offsetof(picoll_config_t, net_rd_max),
     .doc = "largest block (bytes per rail) the allreduce's network step reduces by recursive "
            "doubling, larger ones going round a ring (0: the cost model chooses)"},
    {.name = "PICOLL_NET_LATENCY",
     .type = PICOLL_CFG_DOUBLE,
     .def = "5e-6",
     .offset = offsetof(picoll_config_t, net_latency),
     .doc = "seconds a message between nodes costs besides its bytes, in the cost model that "
            "chooses the network step's method"},
    {.name = "PICOLL_NET_BANDWIDTH",
     .type = PICOLL_CFG_SIZE,
     .def = "12500000000",
     .offset = offsetof(picoll_config_t, net_bandwidth),
     .doc = "bytes per second a rail carries between nodes, in the same cost model (12500000000: "
            "100 Gb/s)"},
    {.name = "PICOLL_NET_ALLREDUCE",
     .type = PICOLL_CFG_ENUM,
     .def = "auto",
     .choices = "auto,rd,rabenseifner,ring",
     .offset = offsetof(picoll_config_t, net_allreduce),
     .doc = "the allreduce's network step: auto (PICOLL_NET_RD_MAX, else the cost model), or "
            "always recursive doubling, Rabenseifner's or the ring"},
    {.name = "PICOLL_NET_ALLGATHER",
     .type = PICOLL_CFG_ENUM,
     .def = "auto",
     .choices = "auto,ring,bruck",
     .offset = offsetof(picoll_config_t, net_allgather),
     .doc = "the allgather's network step: auto (the cost model), or always the ring or Bruck's"},
    {.name = "PICOLL_NET_INFLIGHT",
     .type = PICOLL_CFG_INT,
     .def = "8",
     .min = 1,
     .max = 1024,
     .offset = offsetof(picoll_config_t, net_inflight),
     .doc = "most peers a rank exchanges with at once in the alltoall's network step"},
    {.name = "PICOLL_CUDA_STAGING",
     .type = PICOLL_CFG_ENUM,
     .def = "auto",
     .choices = "auto,on,off",
     .offset = offsetof(picoll_config_t, cuda_staging),
     .doc = "CUDA buffers of calls handed to the MPI go through pinned host memory: auto (when "
            "the MPI is not CUDA-aware), on or off"},
    {.name = "PICOLL_CUDA",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, cuda),
     .doc = "1 runs collectives on device buffers through the CUDA IPC executor where a GPU is "
            "found; 0 hands them to the MPI (staged as PICOLL_CUDA_STAGING says)"},
    {.name = "PICOLL_CUDA_FIXED",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, cuda_fixed),
     .doc = "1 runs the device sums of float, float16, bfloat16 and double on 2, 4, 6 or 8 "
            "ranks on kernel entries compiled for them; 0 on the generic kernel (same bits, "
            "for A/B timings)"},
    {.name = "PICOLL_CUDA_SPIN",
     .type = PICOLL_CFG_DOUBLE,
     .def = "0.01",
     .offset = offsetof(picoll_config_t, cuda_spin),
     .doc = "seconds a device kernel spins for a late peer's kernel before it gives its SMs "
            "back and the host waits instead (at least 0.001)"},
    {.name = "PICOLL_CUDA_SMALL_THREADS",
     .type = PICOLL_CFG_INT,
     .def = "0",
     .min = 0,
     .max = 1024,
     .offset = offsetof(picoll_config_t, cuda_small_threads),
     .doc = "threads per block of a device kernel launch of one block (small calls), rounded up "
            "to whole warps; 0 launches as many as larger calls (512)"},
    {.name = "PICOLL_CUDA_FENCES",
     .type = PICOLL_CFG_ENUM,
     .def = "needed",
     .choices = "all,needed",
     .offset = offsetof(picoll_config_t, cuda_fences),
     .doc = "the device kernels' status words: relaxed where they order nothing (needed: fewer "
            "fences per launch), or all stored with a system-scope release (all, as before)"},
    {.name = "PICOLL_CUDA_NAP",
     .type = PICOLL_CFG_INT,
     .def = "256",
     .min = 0,
     .max = 100000,
     .offset = offsetof(picoll_config_t, cuda_nap),
     .doc = "nanoseconds a device kernel waiting for a peer sleeps between two looks at its flag "
            "(0: none)"},
    {.name = "PICOLL_CUDA_BLOCKS",
     .type = PICOLL_CFG_INT,
     .def = "0",
     .min = 0,
     .max = 64,
     .offset = offsetof(picoll_config_t, cuda_blocks),
     .doc = "blocks of a device kernel launch at most (the fewest any rank asks for); 0: as many "
            "as every rank sharing the GPU keeps resident at once"},
    {.name = "PICOLL_CUDA_LL_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "0",
     .offset = offsetof(picoll_config_t, cuda_ll_max),
     .doc = "largest device allreduce or allgather (bytes a rank receives) run with low-latency "
            "lines (cuda_ll: 8 bytes and their flag per 16-byte store); 0: none"},
    {.name = "PICOLL_CUDA_IPC_CACHE",
     .type = PICOLL_CFG_INT,
     .def = "64",
     .min = 0,
     .max = 1024,
     .offset = offsetof(picoll_config_t, cuda_ipc_cache),
     .doc = "peers' device allocations this process keeps mapped through CUDA IPC at most "
            "(the zero-copy path's cache, keyed by buffer id); 0: no cache"},
    {.name = "PICOLL_CUDA_IPC_CACHE_BYTES",
     .type = PICOLL_CFG_SIZE,
     .def = "8G",
     .offset = offsetof(picoll_config_t, cuda_ipc_cache_bytes),
     .doc = "bytes of peers' device allocations the IPC cache keeps mapped at most (a mapping "
            "may keep a freed allocation's memory until it is closed)"},
    {.name = "PICOLL_CUDA_ZERO_COPY",
     .type = PICOLL_CFG_ENUM,
     .def = "registered",
     .choices = "off,registered,reused,on",
     .offset = offsetof(picoll_config_t, cuda_zero_copy),
     .doc = "large device calls read peers' buffers in place where all are registered ranges, "
            "or also any device memory from its second call (reused) or at once (on)"},
    {.name = "PICOLL_CUDA_ZERO_COPY_MIN",
     .type = PICOLL_CFG_SIZE,
     .def = "1M",
     .offset = offsetof(picoll_config_t, cuda_zero_copy_min),
     .doc = "smallest device call (bytes a rank reads) that takes the zero-copy path; such "
            "calls take the node's vote (one host barrier), not the hot path"},
    {.name = "PICOLL_STAGE_DEPTH",
     .type = PICOLL_CFG_INT,
     .def = "2",
     .min = 0,
     .max = 8,
     .offset = offsetof(picoll_config_t, stage_depth),
     .doc = "chunks of a staged allreduce between nodes copied to the host ahead of the chunk "
            "on the network (0: the whole buffer first)"},
    {.name = "PICOLL_HIER_CUDA",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, hier_cuda),
     .doc = "1 runs the node steps of allreduce, allgather and alltoall between nodes on device "
            "buffers over CUDA IPC; 0 takes the host hierarchy"},
    {.name = "PICOLL_HIER_CUDA_MIN",
     .type = PICOLL_CFG_SIZE,
     .def = "128k",
     .offset = offsetof(picoll_config_t, hier_cuda_min),
     .doc = "smallest call (bytes: an allreduce's vector, an allgather's or alltoall's node "
            "part) that PICOLL_HIER_CUDA runs with device node steps"},
    {.name = "PICOLL_HIER_CUDA_CHUNK",
     .type = PICOLL_CFG_SIZE,
     .def = "1M",
     .offset = offsetof(picoll_config_t, hier_cuda_chunk),
     .doc = "bytes of a rank's block that the device hierarchy's allreduce moves through host "
            "memory as one chunk (at most half of PICOLL_WORKSPACE_SIZE)"},
    {.name = "PICOLL_STREAM_KERNELS",
     .type = PICOLL_CFG_BOOL,
     .def = "1",
     .offset = offsetof(picoll_config_t, stream_kernels),
     .doc = "1 launches picoll's kernels on the stream for enqueued collectives of a stream "
            "communicator on one node; 0 leaves them to the stream's thread"},
    {.name = "PICOLL_STREAM_DEFAULT_SHARING",
     .type = PICOLL_CFG_INT,
     .def = "4",
     .min = 0,
     .max = 1024,
     .offset = offsetof(picoll_config_t, stream_default_sharing),
     .doc = "the most ranks sharing a GPU for which a default stream (legacy, per-thread) "
            "takes picoll's kernels; more take the stream's thread (0: none)"},
    {.name = "PICOLL_TOPO_FILE",
     .type = PICOLL_CFG_STRING,
     .def = "",
     .offset = offsetof(picoll_config_t, topo_file),
     .doc = "a recorded `nvidia-smi topo -m` text used instead of the detected GPU topology "
            "(tests, what-if)"},
    {.name = "PICOLL_TOPO_FILE_GPU",
     .type = PICOLL_CFG_ENUM,
     .def = "device",
     .choices = "device,local-rank",
     .offset = offsetof(picoll_config_t, topo_file_gpu),
     .doc = "with PICOLL_TOPO_FILE, which of the file's GPUs a rank uses: device (GPUn for CUDA "
            "device n) or local-rank (GPUr for local rank r)"},
    {.name = "PICOLL_NVLINK_ONESHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "256k",
     .offset = offsetof(picoll_config_t, nvlink_oneshot_max),
     .doc = "GPUs all joined by NVLink/NVSwitch: largest allreduce (bytes) run one-shot on the "
            "device"},
    {.name = "PICOLL_NVLINK_TWOSHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "10M",
     .offset = offsetof(picoll_config_t, nvlink_twoshot_max),
     .doc = "GPUs all joined by NVLink/NVSwitch: largest allreduce (bytes) run two-shot where "
            "the MPI is CUDA-aware (where picoll stages, every size)"},
    {.name = "PICOLL_HCM_ONESHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "256k",
     .offset = offsetof(picoll_config_t, hcm_oneshot_max),
     .doc = "the 8 GPUs of a hybrid cube mesh (DGX-1): largest allreduce (bytes) run as HCM "
            "one-shot"},
    {.name = "PICOLL_PCIE_ONESHOT_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "64k",
     .offset = offsetof(picoll_config_t, pcie_oneshot_max),
     .doc = "GPUs with peer access over PCIe only: largest allreduce (bytes) run one-shot (0: "
            "hand all over)"},
    {.name = "PICOLL_NVLINK_IPC_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "1G",
     .offset = offsetof(picoll_config_t, nvlink_ipc_max),
     .doc = "GPUs all joined by NVLink/NVSwitch: largest allgather/alltoall (receive bytes per "
            "rank) copied over IPC"},
    {.name = "PICOLL_PCIE_IPC_MAX",
     .type = PICOLL_CFG_SIZE,
     .def = "1M",
     .offset = offsetof(picoll_config_t, pcie_ipc_max),
     .doc = "GPUs with peer access over PCIe only: largest allgather/alltoall (receive bytes "
            "per rank) copied over IPC"},
};
/* clang-format on */

#define CONFIG_NVARS (sizeof(config_vars) / sizeof(config_vars[0]))

picoll_config_t picoll_cfg;

const picoll_config_var_t *picoll_config_vars(size_t *count)
{
    *count = CONFIG_NVARS;
    return config_vars;
}

const picoll_config_var_t *picoll_config_find(const char *name)
{
    for (size_t i = 0; i < CONFIG_NVARS; i++) {
        if (strcmp(config_vars[i].name, name) == 0) {
            return &config_vars[i];
        }
    }
    return NULL;
}

int picoll_parse_size(const char *text, size_t *out)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {
        {"", 0},    {"b", 0},    {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30},
    };
    const char *p = text;
    char *end;
    unsigned long long v;

    while (isspace((unsigned char)*p)) {
        p++;
    }
    if (!isdigit((unsigned char)*p)) {
        return -1; /* also rejects a sign */
    }
    errno = 0;
    v = strtoull(p, &end, 10);
    if (errno != 0) {
        return -1;
    }
    size_t n = strlen(end);
    while (n > 0 && isspace((unsigned char)end[n - 1])) {
        n--;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].suffix) == n && strncasecmp(end, units[i].suffix, n) == 0) {
            if (v > (SIZE_MAX >> units[i].shift)) {
                return -1;
            }
            *out = (size_t)v << units[i].shift;
            return 0;
        }
    }
    return -1;
}

static int parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"1", "y", "yes", "on", "true"};
    static const char *const no[] = {"0", "n", "no", "off", "false"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

static int parse_enum(const char *choices, const char *text, int *out)
{
    size_t len = strlen(text);
    int index = 0;
    for (const char *c = choices; *c != '\0'; index++) {
        const char *comma = strchr(c, ',');
        size_t clen = comma ? (size_t)(comma - c) : strlen(c);
        if (clen == len && strncasecmp(c, text, len) == 0) {
            *out = index;
            return 0;
        }
        if (!comma) {
            break;
        }
        c = comma + 1;
    }
    return -1;
}

static int parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_double(const char *text, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= 0.0) || v > 1e9) {
        return -1;
    }
    *out = v;
    return 0;
}

picoll_status_t picoll_config_parse(const picoll_config_var_t *var, const char *text,
                                    picoll_config_t *cfg, char *err, size_t errlen)
{
    void *field = (char *)cfg + var->offset;
    const char *form = NULL;

    switch (var->type) {
    case PICOLL_CFG_BOOL:
        if (parse_bool(text, (int *)field) != 0) {
            form = "expected 1/0, yes/no, on/off or true/false";
        }
        break;
    case PICOLL_CFG_SIZE:
        if (picoll_parse_size(text, (size_t *)field) != 0) {
            form = "expected a size in bytes: a non-negative integer with an optional unit "
                   "k, m or g (powers of 1024; kb, mib... also accepted), e.g. 256k or 10M";
        }
        break;
    case PICOLL_CFG_INT:
        if (parse_long(text, var->min, var->max, (long *)field) != 0) {
            snprintf(err, errlen, "%s=\"%s\" is invalid: expected an integer from %ld to %ld",
                     var->name, text, var->min, var->max);
            return PICOLL_ERR_CONFIG;
        }
        break;
    case PICOLL_CFG_DOUBLE:
        if (parse_double(text, (double *)field) != 0) {
            form = "expected a non-negative number, e.g. 30 or 0.5";
        }
        break;
    case PICOLL_CFG_ENUM:
        if (parse_enum(var->choices, text, (int *)field) != 0) {
            snprintf(err, errlen, "%s=\"%s\" is invalid: expected one of %s", var->name, text,
                     var->choices);
            return PICOLL_ERR_CONFIG;
        }
        break;
    case PICOLL_CFG_STRING: *(const char **)field = text; break;
    }
    if (form != NULL) {
        snprintf(err, errlen, "%s=\"%s\" is invalid: %s", var->name, text, form);
        return PICOLL_ERR_CONFIG;
    }
    return PICOLL_OK;
}

picoll_status_t picoll_config_load(picoll_config_t *cfg, char *const *env)
{
    picoll_status_t status = PICOLL_OK;
    char err[512];

    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < CONFIG_NVARS; i++) {
        /* defaults are in the table as text and parse by construction (a unit test checks) */
        (void)picoll_config_parse(&config_vars[i], config_vars[i].def, cfg, err, sizeof(err));
    }
    if (env == NULL) {
        return PICOLL_OK;
    }
    for (char *const *e = env; *e != NULL; e++) {
        const char *eq;
        char name[128];
        size_t nlen;

        if (strncmp(*e, PICOLL_ENV_PREFIX, sizeof(PICOLL_ENV_PREFIX) - 1) != 0) {
            continue;
        }
        eq = strchr(*e, '=');
        if (eq == NULL) {
            continue;
        }
        nlen = (size_t)(eq - *e);
        if (nlen >= sizeof(name)) {
            nlen = sizeof(name) - 1;
        }
        memcpy(name, *e, nlen);
        name[nlen] = '\0';
        if (strncmp(name, "PICOLL_UCX_", 11) == 0) {
            continue; /* UCX's own settings for picoll's UCX context (src/net/ucx.c) */
        }
        if (strncmp(name, "PICOLL_BENCH_", 13) == 0) {
            continue; /* the benchmarks' own (osu-bench/), set in the jobs picoll runs in */
        }
        if (strncmp(name, "PICOLL_TORCH_", 13) == 0) {
            continue; /* picoll_torch's own (torch/: where its build finds picoll) */
        }
        const picoll_config_var_t *var = picoll_config_find(name);
        if (var == NULL) {
            picoll_warn("unknown variable %s ignored (picoll_info lists the valid ones)", name);
            continue;
        }
        if (picoll_config_parse(var, eq + 1, cfg, err, sizeof(err)) != PICOLL_OK) {
            picoll_error("%s", err);
            status = PICOLL_ERR_CONFIG;
            /* keep the default for this one */
            (void)picoll_config_parse(var, var->def, cfg, err, sizeof(err));
        }
    }
    return status;
}

void picoll_format_size(size_t v, char *buf, size_t len)
{
    if (v != 0 && v % (1u << 30) == 0) {
        snprintf(buf, len, "%zuG", v >> 30);
    } else if (v != 0 && v % (1u << 20) == 0) {
        snprintf(buf, len, "%zuM", v >> 20);
    } else if (v != 0 && v % (1u << 10) == 0) {
        snprintf(buf, len, "%zuk", v >> 10);
    } else {
        snprintf(buf, len, "%zu", v);
    }
}

void picoll_config_format(const picoll_config_var_t *var, const picoll_config_t *cfg, char *buf,
                          size_t len)
{
    const void *field = (const char *)cfg + var->offset;
    switch (var->type) {
    case PICOLL_CFG_BOOL: snprintf(buf, len, "%d", *(const int *)field); break;
    case PICOLL_CFG_SIZE: picoll_format_size(*(const size_t *)field, buf, len); break;
    case PICOLL_CFG_INT: snprintf(buf, len, "%ld", *(const long *)field); break;
    case PICOLL_CFG_DOUBLE: snprintf(buf, len, "%g", *(const double *)field); break;
    case PICOLL_CFG_ENUM: {
        int index = *(const int *)field;
        const char *c = var->choices;
        for (int i = 0; i < index && c != NULL; i++) {
            c = strchr(c, ',');
            c = c ? c + 1 : NULL;
        }
        if (c == NULL) {
            snprintf(buf, len, "?");
        } else {
            const char *comma = strchr(c, ',');
            snprintf(buf, len, "%.*s", comma ? (int)(comma - c) : (int)strlen(c), c);
        }
        break;
    }
    case PICOLL_CFG_STRING:
        snprintf(buf, len, "%s", *(const char *const *)field ? *(const char *const *)field : "");
        break;
    }
}

unsigned picoll_config_hash(const picoll_config_t *cfg)
{
    unsigned h = 2166136261u; /* FNV-1a over the formatted values */
    char buf[256];
    for (size_t i = 0; i < CONFIG_NVARS; i++) {
        if (config_vars[i].offset == offsetof(picoll_config_t, log_level) ||
            config_vars[i].offset == offsetof(picoll_config_t, cma) ||
            config_vars[i].offset == offsetof(picoll_config_t, host_cache)) {
            continue; /* may differ between ranks (the cache unit: the node's first rank's) */
        }
        picoll_config_format(&config_vars[i], cfg, buf, sizeof(buf));
        for (const char *p = buf; *p; p++) {
            h = (h ^ (unsigned char)*p) * 16777619u;
        }
        h = (h ^ 0xff) * 16777619u;
    }
    return h;
}
