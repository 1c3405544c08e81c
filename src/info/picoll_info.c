/* picoll_info: version, build, every PICOLL_* variable, and the algorithm tables. */
#include "build-config.h"
#include "coll/coll.h"
#include "util/config.h"
#include "mem/cuda_state.h"
#include "mem/cudrv.h"
#include "util/log.h"
#include "net/net.h"
#include "pmpi/stage.h"
#include "topo/topo.h"
#include <picoll.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PICOLL_HAVE_UCX
#include <ucp/api/ucp.h>
#endif
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
#ifdef PICOLL_HAVE_UCX
    printf("  UCX    : %s, runtime %s\n", PICOLL_BUILD_UCX, ucp_get_version_string());
#else
    printf("  UCX    : %s\n", PICOLL_BUILD_UCX);
#endif
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
        picoll_config_format(&vars[i], &cfg, cur, sizeof(cur));
        printf("  %-30s default %-6s current %-6s %s", vars[i].name, vars[i].def, cur, vars[i].doc);
        if (vars[i].type == PICOLL_CFG_ENUM) {
            printf(" [%s]", vars[i].choices);
        }
        printf("\n");
    }
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
    picoll_topo_print(stdout, t, &cfg);
    free(t);
    return 0;
}

/* The generated layer's coverage of this MPI (pmpi/calls.def): a summary, or every function. */
static void print_calls(int all)
{
    static const char *const kinds[] = {"accelerated", "staged", "refused", "no message data"};
    printf("MPI functions with a buffer (%d in this MPI's mpi.h), on CUDA device memory when the MPI "
           "is not CUDA-aware:\n", picoll_gen_ncalls);
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
    fprintf(f, "usage: picoll_info [-b|--build] [-v|--variables] [-a|--algorithms] [-h|--help]\n"
               "                   [-c|--calls] [-t|--topology [FILE]]\n"
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
