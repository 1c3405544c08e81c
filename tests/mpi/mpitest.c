#include "mpitest.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mt_picoll_t mt_picoll;
int mt_rank, mt_size;
long mt_failures;

int mt_load_picoll(int expect)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    *(void **)&mt_picoll.version = dlsym(RTLD_DEFAULT, "picoll_version");
    *(void **)&mt_picoll.active = dlsym(RTLD_DEFAULT, "picoll_active");
    *(void **)&mt_picoll.set_bypass = dlsym(RTLD_DEFAULT, "picoll_set_bypass");
    *(void **)&mt_picoll.comm_query = dlsym(RTLD_DEFAULT, "picoll_comm_query");
    *(void **)&mt_picoll.last_algorithm = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    mt_picoll.found =
        mt_picoll.version && mt_picoll.active && mt_picoll.set_bypass && mt_picoll.comm_query;
    if (expect && !mt_picoll.found) {
        mt_fail("picoll expected but its API is missing from the process (is libpicoll.so in "
                "LD_PRELOAD?): version %p active %p set_bypass %p comm_query %p",
                *(void **)&mt_picoll.version, *(void **)&mt_picoll.active,
                *(void **)&mt_picoll.set_bypass, *(void **)&mt_picoll.comm_query);
    }
    return mt_picoll.found;
}

void mt_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    static long limit = -1;
    if (limit < 0) {
        const char *env = getenv("MT_MAX_FAIL_LINES"); /* for investigating */
        limit = env ? atol(env) : 20;
    }
    if (mt_failures++ >= limit) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("FAIL [rank %d] %s\n", mt_rank, msg);
    fflush(stdout);
    /* the mutation check (tests/cuda/mutants.sh) needs only the first failure: the rest of a
     * matrix that fails everywhere costs it seconds */
    if (getenv("MT_FAIL_FAST") != NULL) {
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int mt_finish(const char *test)
{
    long total = 0;
    PMPI_Allreduce(&mt_failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        if (total == 0) {
            printf("%s: passed on %d ranks\n", test, mt_size);
        } else {
            printf("%s: FAILED, %ld failure(s) over %d ranks\n", test, total, mt_size);
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}

int mt_mpich_version(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0, patch = 0;
    MPI_Get_library_version(v, &len);
    const char *at = strstr(v, "MPICH Version:");
    if (at == NULL ||
        sscanf(at + strlen("MPICH Version:"), " %d.%d.%d", &major, &minor, &patch) < 2) {
        return 0;
    }
    return major * 10000 + minor * 100 + patch;
}

int mt_skip(const char *why)
{
    if (mt_rank == 0) {
        printf("SKIPPED: %s\n", why);
        fflush(stdout);
    }
    MPI_Finalize();
    return MT_SKIP;
}

int mt_flag(int argc, char **argv, const char *flag)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0) {
            return 1;
        }
    }
    return 0;
}

const char *mt_option(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return argv[i + 1];
        }
    }
    return def;
}
