/* From MPI handles to picoll's own element types and operations. */
#ifndef PICOLL_CLASSIFY_H
#define PICOLL_CLASSIFY_H

#include <mpi.h>
#include "dtype.h"

/* PICOLL_DT_NONE for any handle picoll does not run itself: derived types, pair types, MPI_CHAR... */
picoll_dtype_t picoll_classify_dtype(MPI_Datatype type);
/* Bytes of one element of a predefined contiguous type that picoll may copy as bytes (allgather,
 * alltoall): every type picoll_classify_dtype knows, plus the character types MPI does not reduce
 * (MPI_CHAR, MPI_WCHAR). 0 for anything else. */
size_t picoll_classify_copy_size(MPI_Datatype type);
/* PICOLL_OP_NONE for user-defined ops, MPI_MAXLOC/MINLOC, MPI_REPLACE, MPI_NO_OP. */
picoll_op_t picoll_classify_op(MPI_Op op);

#endif
