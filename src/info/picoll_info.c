/* picoll_info: version, build, the network step's cost model, every PICOLL_* variable, and the
 * algorithm tables. */
#include "build-config.h"
#include "coll/coll.h"
#include "coll/netmodel.h"
#include "coll/select.h"
#include "host/shm.h"
#include "cuda/cuda_dev.h"
#include "util/config.h"
#include "mem/cuda_state.h"
#include "mem/cudrv.h"
#include "util/log.h"
#include "net/net.h"
#include "pmpi/stage.h"
#include "topo/topo.h"
#include <picoll.h>

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PICOLL_HAVE_HWLOC
#include <hwloc.h>
#endif

extern char **environ;

static void print_build(void)
{
    char mpilib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(mpilib, &len);
    char *nl = strchr(mpilib, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    printf("build:\n");
    printf("  MPI    : built against %s; runtime: %s\n", PICOLL_BUILD_MPI, mpilib);
    printf("  CUDA   : %s\n", PICOLL_BUILD_CUDA);
    printf("  UCX    : %s; runtime: ", PICOLL_BUILD_UCX);
    fflush(stdout);
    picoll_net_print_ucx(stdout);
    printf("  network step transports (UCX_TLS, PICOLL_UCX_TLS): ");
    fflush(stdout);
    picoll_net_print_transports(stdout);
#ifdef PICOLL_HAVE_HWLOC
    unsigned hv = hwloc_get_api_version();
    printf("  hwloc  : %s, runtime API %u.%u.%u\n", PICOLL_BUILD_HWLOC, hv >> 16, (hv >> 8) & 0xff,
           hv & 0xff);
#else
    printf("  hwloc  : %s\n", PICOLL_BUILD_HWLOC);
#endif
}

/* The caches the host executor's chunks scale by, and the chunks in force (the values of this
 * process's CPU: in a job, the node's first rank decides for the node). */
static void print_host(void)
{
    picoll_topo_cpu_t cpu;
    picoll_config_load(&picoll_cfg, environ); /* what a job's MPI_Init would read */
    size_t unit = picoll_shm_cache_unit(&cpu);
    picoll_shm_t probe = {
        .cache_unit = unit,
        .slot_size = picoll_cfg.workspace_size / 2 < 4096 ? 4096 : picoll_cfg.workspace_size / 2};
    printf("host executor:\n");
    printf("  caches : L2 %zu KiB", cpu.l2 >> 10);
    if (cpu.l2_cpus > 0) {
        printf(" shared by %d CPU(s)", cpu.l2_cpus);
    }
    if (cpu.l3 != 0) {
        printf(", L3 %zu KiB", cpu.l3 >> 10);
        if (cpu.l3_cpus > 0) {
            printf(" shared by %d CPU(s)", cpu.l3_cpus);
        }
    }
    printf(" (%s, CPU %d)\n", cpu.from, cpu.cpu);
    printf("  chunks : unit %zu KiB (%s); allgather %zu KiB, alltoall %zu KiB a step\n", unit >> 10,
           picoll_cfg.host_cache != 0 ? "PICOLL_HOST_CACHE" : "the L2",
           picoll_shm_chunk(&probe, 1, 2) >> 10, picoll_shm_chunk(&probe, 1, 1) >> 10);
    printf("  auto   : allreduce at every size; allgather while ranks x block <= %zu bytes, "
           "alltoall while ranks x ranks x block <= %zu bytes (PICOLL_HOST_AUTO_MAX)\n",
           picoll_cfg.host_auto_max, picoll_cfg.host_auto_max);
}

/* Seconds in a short unit: "12.3us", "4.56ms", "7.89s". */
static void format_time(double s, char *buf, size_t len)
{
    if (s < 1e-3) {
        snprintf(buf, len, "%.1fus", s * 1e6);
    } else if (s < 1.0) {
        snprintf(buf, len, "%.2fms", s * 1e3);
    } else {
        snprintf(buf, len, "%.2fs", s);
    }
}

/* The network step's cost model (coll/netmodel.h) with the variables in force: for rails of a
 * few sizes, the method chosen and its predicted time, allreduce by rail block and allgather by
 * node part. */
static void print_netmodel(void)
{
    static const int members[] = {2, 16, 128, 1024, 12500};
    static const size_t sizes[] = {8, 1024, 64 << 10, 1 << 20, 16 << 20};
    static const char *const labels[] = {"8 B", "1 KiB", "64 KiB", "1 MiB", "16 MiB"};
    picoll_netmodel_t m;
    char t[32];

    picoll_config_load(&picoll_cfg, environ);
    picoll_netmodel_get(&picoll_cfg, &m);
    printf("network step (a rail's method, predicted time; latency %g s, %g B/s, reduce %g "
           "s/B):\n  %-5s %-9s",
           m.alpha, m.beta > 0 ? 1.0 / m.beta : 0.0, m.gamma, "nodes", "");
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        printf(" %15s", labels[k]);
    }
    printf("\n");
    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
        for (int ag = 0; ag < 2; ag++) {
            printf("  %-5d %-9s", members[i], ag ? "allgather" : "allreduce");
            for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                int n = members[i];
                picoll_rail_method_t how = ag ? picoll_netmodel_allgather(&picoll_cfg, n, sizes[k])
                                              : picoll_netmodel_allreduce(&picoll_cfg, n, sizes[k]);
                format_time(ag ? picoll_netmodel_allgather_time(&m, how, n, (double)sizes[k])
                               : picoll_netmodel_allreduce_time(&m, how, n, (double)sizes[k]),
                            t, sizeof(t));
                printf(" %-5s %9s", picoll_netmodel_name(how), t);
            }
            printf("\n");
        }
    }
}

/* CUDA support as MPI_Init would decide it with the current PICOLL_CUDA_STAGING. */
static void print_cuda(void)
{
    picoll_config_t cfg;
    picoll_cuda_state_t st;
    const char *how = "";

    picoll_log_level = PICOLL_LOG_ERROR;
    picoll_config_load(&cfg, environ);
    /* the MPI answers only between MPI_Init and MPI_Finalize (picoll's own set-up bypassed) */
    PMPI_Init(NULL, NULL);
    picoll_cuda_state_init(cfg.cuda_staging, &st);
    printf("cuda:\n");
    printf("  driver     : %s\n", picoll_cudrv_why());
    printf("  devices    : %d\n", st.devices);
    for (int d = 0; d < st.devices; d++) {
        char image[160];
        picoll_cuda_kernel_image(d, image, sizeof(image));
        printf("  device %-3d : kernels: %s\n", d, image);
    }
    int aware = picoll_mpi_cuda_aware(&how);
    printf("  MPI        : %sCUDA-aware (its %s answers %d)\n", aware ? "" : "not ", how, aware);
    printf("  staging    : %s\n", st.staging ? "active" : "inactive");
    printf("  MPIX_Query_cuda_support: %d\n", st.active ? 1 : st.mpi_aware);
    printf("  %s\n", st.why);
    PMPI_Finalize();
}

static void print_variables(void)
{
    picoll_config_t cfg;
    size_t n;
    const picoll_config_var_t *vars = picoll_config_vars(&n);
    char cur[128];

    /* unknown or malformed variables are reported on stderr by the loader */
    picoll_log_level = PICOLL_LOG_WARN;
    picoll_config_load(&cfg, environ);
    printf("variables (name, default, current value, meaning):\n");
    for (size_t i = 0; i < n; i++) {
        if (vars[i].internal) {
            continue; /* picoll's tests' own */
        }
        picoll_config_format(&vars[i], &cfg, cur, sizeof(cur));
        printf("  %-30s default %-6s current %-6s %s", vars[i].name, vars[i].def, cur, vars[i].doc);
        if (vars[i].type == PICOLL_CFG_ENUM) {
            printf(" [%s]", vars[i].choices);
        }
        printf("\n");
    }
}

/* The full table of variables as Markdown, from the config table alone (not the environment):
 * docs/variables.md is this output, and unit.variables_doc fails when they differ. */
static void print_markdown(void)
{
    static const char *const kinds[] = {
        [PICOLL_CFG_BOOL] = "0 or 1", [PICOLL_CFG_SIZE] = "size (k, M, G)",
        [PICOLL_CFG_INT] = "integer", [PICOLL_CFG_DOUBLE] = "number",
        [PICOLL_CFG_ENUM] = "one of", [PICOLL_CFG_STRING] = "text",
    };
    size_t n;
    const picoll_config_var_t *vars = picoll_config_vars(&n);

    printf("<!-- Generated by `picoll_info --markdown` from the config table (src/util/config.c): "
           "do not edit. -->\n\n");
    printf("# picoll's variables\n\n");
    printf("Every `PICOLL_*` variable picoll reads for its users (not its tests' own), with its "
           "default. Set them alike on every rank (`mpirun -x NAME`). `picoll_info -v` prints the "
           "same variables with the values in force. Besides these, `PICOLL_UCX_*` variables "
           "are UCX's own settings (`UCX_*`) for picoll's UCX context only (network.md), "
           "`PICOLL_BENCH_*` variables the benchmarks' (osu-bench/README.md) and "
           "`PICOLL_TORCH_*` variables picoll_torch's (torch.md), which picoll ignores.\n\n");
    printf("| variable | default | values | meaning |\n|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        char values[160];
        if (vars[i].internal) {
            continue; /* picoll's tests' own */
        }
        if (vars[i].type == PICOLL_CFG_ENUM) {
            snprintf(values, sizeof(values), "%s", vars[i].choices);
            for (char *c = values; *c; c++) {
                if (*c == ',') {
                    *c = '/';
                }
            }
        } else if (vars[i].type == PICOLL_CFG_INT) {
            snprintf(values, sizeof(values), "%s, %ld to %ld", kinds[vars[i].type], vars[i].min,
                     vars[i].max);
        } else {
            snprintf(values, sizeof(values), "%s", kinds[vars[i].type]);
        }
        printf(vars[i].def[0] ? "| `%s` | `%s` | %s | %s |\n" : "| `%s` | none%s | %s | %s |\n",
               vars[i].name, vars[i].def[0] ? vars[i].def : "", values, vars[i].doc);
    }
    /* named, so that the documents that describe them (testing.md) name variables picoll has */
    const char *sep = "\nThe tests' own variables, which users leave unset (testing.md): ";
    for (size_t i = 0; i < n; i++) {
        if (vars[i].internal) {
            printf("%s`%s`", sep, vars[i].name);
            sep = ", ";
        }
    }
    printf("%s", sep[0] == ',' ? ".\n" : "");
}

static void print_algorithms(void)
{
    printf("algorithms:\n");
    for (int c = 0; c < PICOLL_COLL_COUNT; c++) {
        const picoll_coll_desc_t *d = picoll_coll_desc((picoll_coll_t)c);
        for (int a = 0; a < d->count; a++) {
            printf("  %-10s %-12s %s\n", a == 0 ? d->name : "", d->algs[a].name, d->algs[a].desc);
        }
    }
}

/* The detected (or recorded) topology, its class and the selection tables; 1 on error. */
static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether picoll would stage the calls it hands over (picoll_cuda_state_init's rule, without
 * loading the driver). */
static int info_staged(const picoll_config_t *cfg)
{
    const char *how;
    return picoll_cuda_staging_rule(cfg->cuda_staging, picoll_mpi_cuda_aware(&how));
}

/* The device algorithm the selection picks for bytes (allreduce, reduce: the message; allgather,
 * alltoall, allgatherv: one rank's receive buffer; alltoallv: the largest of a rank's;
 * reduce-scatter: one rank's input; bcast: the message), by
 * its name in the collective's table. */
static const char *device_alg(picoll_coll_t coll, const picoll_config_t *cfg,
                              picoll_topo_reach_t reach, size_t bytes)
{
    int staged = info_staged(cfg);
    /* one rank, no bound on the data buffer: the reach's table alone */
    picoll_cuda_limits_t lim = picoll_cuda_limits(reach, 1, SIZE_MAX, cfg->cuda_ll_max);
    int alg = coll == PICOLL_COLL_ALLREDUCE ? picoll_select_cuda_allreduce(cfg, &lim, bytes, staged)
              : coll == PICOLL_COLL_ALLGATHER ? picoll_select_cuda_allgather(cfg, &lim, bytes)
              : coll == PICOLL_COLL_ALLTOALL  ? picoll_select_cuda_alltoall(cfg, &lim, bytes)
              : coll == PICOLL_COLL_BCAST || coll == PICOLL_COLL_ALLGATHERV ||
                      coll == PICOLL_COLL_ALLTOALLV
                  ? picoll_select_cuda_bcast(cfg, reach, bytes)
                  : picoll_select_cuda_reduce(cfg, reach, bytes, staged);
    return picoll_coll_desc(coll)->algs[alg].name;
}

/* One line per collective: the size ranges and their algorithm, e.g.
 *   allreduce   <= 256k cuda_oneshot, <= 10M cuda_twoshot, larger fallback */
static void print_reach(FILE *f, picoll_topo_reach_t reach, void *arg)
{
    const picoll_config_t *cfg = arg;
    size_t b[] = {cfg->nvlink_oneshot_max, cfg->nvlink_twoshot_max, cfg->hcm_oneshot_max,
                  cfg->pcie_oneshot_max,   cfg->nvlink_ipc_max,     cfg->pcie_ipc_max};
    size_t nb = sizeof(b) / sizeof(b[0]);
    char sz[32];

    qsort(b, nb, sizeof(b[0]), cmp_size);
    for (int c = 0; c < PICOLL_COLL_COUNT; c++) {
        fprintf(f, "    %-10s", picoll_coll_desc((picoll_coll_t)c)->name);
        const char *cur = device_alg((picoll_coll_t)c, cfg, reach, 1);
        int first = 1;
        for (size_t k = 0; k < nb; k++) {
            if (b[k] == (size_t)-1) {
                continue;
            }
            const char *next = device_alg((picoll_coll_t)c, cfg, reach, b[k] + 1);
            if (strcmp(next, cur) != 0) {
                picoll_format_size(b[k], sz, sizeof(sz));
                fprintf(f, "%s<= %s %s", first ? " " : ", ", sz, cur);
                first = 0;
                cur = next;
            }
        }
        fprintf(f, "%s%s %s\n", first ? " " : ", ", first ? "all sizes" : "larger", cur);
    }
}

static int print_topology(const char *file)
{
    picoll_config_t cfg;
    picoll_topo_t *t = malloc(sizeof(*t));
    char err[512] = "";
    picoll_status_t st;

    if (t == NULL) {
        return 1;
    }
    picoll_log_level = PICOLL_LOG_WARN;
    picoll_config_load(&cfg, environ);
    if (file != NULL) {
        cfg.topo_file = file;
    }
    st = picoll_topo_load(&cfg, t, err, sizeof(err));
    if (st != PICOLL_OK) {
        fprintf(stderr, "picoll_info: %s\n", err);
        free(t);
        return 1;
    }
    picoll_topo_print(stdout, t, print_reach, &cfg);
    free(t);
    return 0;
}

/* The generated layer's coverage of this MPI (pmpi/calls.def): a summary, or every function. */
static void print_calls(int all)
{
    static const char *const kinds[] = {"accelerated", "staged", "refused", "no message data"};
    printf(
        "MPI functions with a buffer (%d in this MPI's mpi.h), on CUDA device memory when the MPI "
        "is not CUDA-aware:\n",
        picoll_gen_ncalls);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        int n = 0;
        for (int i = 0; i < picoll_gen_ncalls; i++) {
            n += strcmp(picoll_gen_calls[i].kind, kinds[k]) == 0;
        }
        printf("  %-16s %d\n", kinds[k], n);
    }
    for (int i = 0; all && i < picoll_gen_ncalls; i++) {
        const picoll_gen_call_t *c = &picoll_gen_calls[i];
        printf("  %-34s %s%s%s%s\n", c->name, c->kind, c->why[0] ? " (" : "", c->why,
               c->why[0] ? ")" : "");
    }
}

static void usage(FILE *f)
{
    fprintf(
        f, "usage: picoll_info [-b|--build] [-v|--variables] [-a|--algorithms] [-h|--help]\n"
           "                   [-c|--calls] [-t|--topology [FILE]] [--markdown]\n"
           "  --markdown: every variable, its default and meaning, as the Markdown table of\n"
           "  docs/variables.md\n"
           "  --calls: every MPI function with a buffer and what picoll does with it on device\n"
           "  memory (accelerated, staged, refused, or no message data)\n"
           "  with no option, prints everything but the topology\n"
           "  --topology: the GPU topology detected (or recorded in FILE, an `nvidia-smi topo -m`\n"
           "  text; else PICOLL_TOPO_FILE), its class and the algorithm chosen per size\n");
}

int main(int argc, char **argv)
{
    int build = 0, vars = 0, algs = 0, topo = 0, calls = 0;
    const char *topo_file = NULL;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--build")) {
            build = 1;
        } else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--variables")) {
            vars = 1;
        } else if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--algorithms")) {
            algs = 1;
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--calls")) {
            calls = 1;
        } else if (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--topology")) {
            topo = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-') {
                topo_file = argv[++i];
            }
        } else if (!strcmp(argv[i], "--markdown")) {
            print_markdown();
            return 0;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "picoll_info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (topo && !build && !vars && !algs && !calls) {
        return print_topology(topo_file);
    }
    if (calls && !build && !vars && !algs) {
        print_calls(1);
        return 0;
    }
    if (!build && !vars && !algs) {
        build = vars = algs = 1;
    }
    printf("picoll %s\n", picoll_version());
    if (build) {
        print_build();
        print_host();
        print_netmodel();
        print_cuda();
        print_calls(calls);
    }
    if (vars) {
        print_variables();
    }
    if (algs) {
        print_algorithms();
    }
    if (topo && print_topology(topo_file) != 0) {
        return 1;
    }
    return 0;
}
