/* MPIX_Query_cuda_support() under picoll. --expect 1: picoll's CUDA support is active and it
 * answers 1; --expect mpi: it is not, and picoll answers what the underlying MPI library itself
 * answers (0 for Debian's Open MPI and MPICH), asked here through the library's own symbol. */
#include "mpitest.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The MPI library's own answer, or -1 if it has no MPIX_Query_cuda_support. */
static int mpi_own_answer(const char **lib)
{
    Dl_info info;
    void *h;
    int (*query)(void);
    if (dladdr((void *)&PMPI_Init, &info) == 0 || info.dli_fname == NULL) {
        return -1;
    }
    *lib = info.dli_fname;
    h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) {
        return -1;
    }
    *(void **)&query = dlsym(h, "MPIX_Query_cuda_support"); /* that library's, not picoll's */
    return query == NULL ? -1 : query();
}

int main(int argc, char **argv)
{
    const char *expect = mt_option(argc, argv, "--expect", "mpi");
    const char *lib = "?";
    int answer, own;
    int (*query)(void);

    MPI_Init(&argc, &argv);
    mt_load_picoll(1);
    /* looked up, not linked: an MPI-5 standard-ABI library (libmpi_abi) does not export it */
    *(void **)&query = dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    answer = query == NULL ? -1 : query();
    own = mpi_own_answer(&lib);
    if (mt_rank == 0) {
        printf("MPIX_Query_cuda_support: %d under picoll, %d from %s itself\n", answer, own, lib);
    }
    if (strcmp(expect, "1") == 0) {
        MT_CHECK(answer == 1, "MPIX_Query_cuda_support() = %d, expected 1 (CUDA support active)",
                 answer);
    } else {
        MT_CHECK(answer == (own < 0 ? 0 : own), "MPIX_Query_cuda_support() = %d, but %s answers %d",
                 answer, lib, own);
    }
    return mt_finish("cuda_query");
}
