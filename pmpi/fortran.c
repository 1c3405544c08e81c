/* Fortran entry points of the accelerated collectives, for Open MPI. Open MPI's Fortran layer
 * (mpif.h and `use mpi`: mpi_allreduce_ in libmpi_mpifh; `use mpi_f08`: mpi_allreduce_f08_, which
 * calls ompi_allreduce_f) calls PMPI_Allreduce directly, so a Fortran MPI_ALLREDUCE never reaches
 * picoll's C MPI_Allreduce (nor does MPI_INIT reach MPI_Init). picoll defines those Fortran symbols itself, in every name mangling
 * Open MPI exports, converts the handles and calls its own C wrapper. MPICH's Fortran layer calls
 * the C MPI_ functions, so there nothing is needed and nothing is built.
 *
 * Fortran's MPI_IN_PLACE and MPI_BOTTOM are the addresses of common blocks
 * (mpi_fortran_in_place_, mpi_fortran_bottom_), looked up once in the process: the dynamic linker
 * binds every library's references to one of each. */
#pragma GCC visibility push(default)
#include <mpi.h>
#pragma GCC visibility pop

#include "build-config.h"
#include "util/export.h"

#ifdef OPEN_MPI
#include <dlfcn.h>
#include <stdatomic.h>

#define ALIAS(name) __attribute__((visibility("default"), alias(name)))

/* The Fortran sentinels' addresses; each name mangling a compiler may use. */
static void *const *sentinels(void)
{
    static void *addr[9]; /* 4 for MPI_IN_PLACE, 4 for MPI_BOTTOM, NULL-terminated by slot 8 */
    static atomic_int done;
    static const char *const names[8] = {"mpi_fortran_in_place_",  "mpi_fortran_in_place",
                                         "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE",
                                         "mpi_fortran_bottom_",    "mpi_fortran_bottom",
                                         "mpi_fortran_bottom__",   "MPI_FORTRAN_BOTTOM"};
    if (!atomic_load(&done)) {
        for (int i = 0; i < 8; i++) {
            addr[i] = dlsym(RTLD_DEFAULT, names[i]);
        }
        atomic_store(&done, 1);
    }
    return addr;
}

/* A Fortran buffer argument as the C call wants it. */
static void *fbuf(void *p)
{
    void *const *s = sentinels();
    for (int i = 0; i < 8; i++) {
        if (s[i] != NULL && p == s[i]) {
            return i < 4 ? MPI_IN_PLACE : MPI_BOTTOM;
        }
    }
    return p;
}

/* MPI_INIT and MPI_FINALIZE: Open MPI's Fortran ones call PMPI_Init and PMPI_Finalize, so without
 * these picoll would never start (nor print its stats) in a Fortran program. */
PICOLL_EXPORT void mpi_init_(MPI_Fint *ierr)
{
    int argc = 0;
    char **argv = NULL;
    int rc = MPI_Init(&argc, &argv);
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

PICOLL_EXPORT void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int argc = 0, prov = MPI_THREAD_SINGLE;
    char **argv = NULL;
    int rc = MPI_Init_thread(&argc, &argv, (int)*required, &prov);
    *provided = (MPI_Fint)prov;
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

PICOLL_EXPORT void mpi_finalize_(MPI_Fint *ierr)
{
    int rc = MPI_Finalize();
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

PICOLL_EXPORT void mpi_allreduce_(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                                  MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    int rc = MPI_Allreduce(fbuf(sendbuf), fbuf(recvbuf), (int)*count, PMPI_Type_f2c(*datatype),
                           PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm));
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

/* allgather and alltoall take the same arguments */
#define BLOCKS_F(lower, C)                                                                         \
    PICOLL_EXPORT void mpi_##lower##_(void *sendbuf, MPI_Fint *sendcount, MPI_Fint *sendtype,      \
                                      void *recvbuf, MPI_Fint *recvcount, MPI_Fint *recvtype,      \
                                      MPI_Fint *comm, MPI_Fint *ierr)                              \
    {                                                                                              \
        int rc = MPI_##C(fbuf(sendbuf), (int)*sendcount, PMPI_Type_f2c(*sendtype), fbuf(recvbuf),  \
                         (int)*recvcount, PMPI_Type_f2c(*recvtype), PMPI_Comm_f2c(*comm));         \
        if (ierr != NULL) {                                                                        \
            *ierr = (MPI_Fint)rc;                                                                  \
        }                                                                                          \
    }
BLOCKS_F(allgather, Allgather)
BLOCKS_F(alltoall, Alltoall)

/* the other manglings, and the function `use mpi_f08` calls, with the same arguments */
#define AR_ARGS void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *
#define BL_ARGS                                                                                    \
    void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *
#define MANGLINGS(lower, upper, ...)                                                               \
    void mpi_##lower(__VA_ARGS__) ALIAS("mpi_" #lower "_");                                        \
    void mpi_##lower##__(__VA_ARGS__) ALIAS("mpi_" #lower "_");                                    \
    void MPI_##upper(__VA_ARGS__) ALIAS("mpi_" #lower "_");                                        \
    void ompi_##lower##_f(__VA_ARGS__) ALIAS("mpi_" #lower "_");
MANGLINGS(init, INIT, MPI_Fint *)
MANGLINGS(init_thread, INIT_THREAD, MPI_Fint *, MPI_Fint *, MPI_Fint *)
MANGLINGS(finalize, FINALIZE, MPI_Fint *)
MANGLINGS(allreduce, ALLREDUCE, AR_ARGS)
MANGLINGS(allgather, ALLGATHER, BL_ARGS)
MANGLINGS(alltoall, ALLTOALL, BL_ARGS)
#endif
