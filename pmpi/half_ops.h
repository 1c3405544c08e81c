/* Half-precision reductions handed to the underlying MPI. MPICH 4.0 defines MPIX_C_FLOAT16 but
 * aborts in its own MPI_Allreduce on it (a yaksa pack assertion), while it moves the bytes of that
 * type correctly. So where picoll passes a float16 or bfloat16 reduction with a predefined op to
 * PMPI (fallback, staged calls), it passes the same bytes as MPI_UINT16_T with a commutative user
 * op of its own that runs picoll's reduction loops: the same bits as picoll's own algorithms, on
 * any MPI that defines the type. Compiled to nothing where the MPI defines neither type. */
#ifndef PICOLL_HALF_OPS_H
#define PICOLL_HALF_OPS_H

#include <mpi.h>

/* After PMPI_Init and picoll_init, by every rank: creates the user ops if picoll is initialised. */
void picoll_half_ops_init(void);
/* Before PMPI_Finalize: frees them. */
void picoll_half_ops_free(void);
/* While picoll intercepts: a float16/bfloat16 type with MPI_SUM, PROD, MAX or MIN becomes
 * MPI_UINT16_T and picoll's op for the pair; anything else is left as it is. */
void picoll_half_ops_translate(MPI_Datatype *type, MPI_Op *op);

#endif
