/* picoll_info: version, build, every PICOLL_* variable, and the algorithm tables. */
#include "build-config.h"
#include "coll/coll.h"
#include "config.h"
#include "log.h"
#include <picoll.h>

#include <mpi.h>
#include <stdio.h>
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
#ifdef PICOLL_HAVE_HWLOC
    unsigned hv = hwloc_get_api_version();
    printf("  hwloc  : %s, runtime API %u.%u.%u\n", PICOLL_BUILD_HWLOC, hv >> 16, (hv >> 8) & 0xff,
           hv & 0xff);
#else
    printf("  hwloc  : %s\n", PICOLL_BUILD_HWLOC);
#endif
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

static void usage(FILE *f)
{
    fprintf(f, "usage: picoll_info [-b|--build] [-v|--variables] [-a|--algorithms] [-h|--help]\n"
               "  with no option, prints everything\n");
}

int main(int argc, char **argv)
{
    int build = 0, vars = 0, algs = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--build")) {
            build = 1;
        } else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--variables")) {
            vars = 1;
        } else if (!strcmp(argv[i], "-a") || !strcmp(argv[i], "--algorithms")) {
            algs = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "picoll_info: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!build && !vars && !algs) {
        build = vars = algs = 1;
    }
    printf("picoll %s\n", picoll_version());
    if (build) {
        print_build();
    }
    if (vars) {
        print_variables();
    }
    if (algs) {
        print_algorithms();
    }
    return 0;
}
