/* From MPI handles to picoll's own element types and operations. */
#ifndef PICOLL_CLASSIFY_H
#define PICOLL_CLASSIFY_H

#include <mpi.h>
#include "util/dtype.h"

/* PICOLL_DT_NONE for any handle picoll does not run itself: derived types, pair types, MPI_CHAR... */
picoll_dtype_t picoll_classify_dtype(MPI_Datatype type);
/* Bytes of one element of a predefined contiguous type that picoll may copy as bytes (allgather,
 * alltoall): every type picoll_classify_dtype knows, plus the character types MPI does not reduce
 * (MPI_CHAR, MPI_WCHAR). 0 for anything else. */
size_t picoll_classify_copy_size(MPI_Datatype type);
/* MPI_CHAR and MPI_WCHAR in a reduction with op: the element type picoll reduces them as (the
 * platform's char and wchar_t), where the underlying MPI reduces them with that op itself;
 * PICOLL_DT_NONE otherwise (and for any other type). */
picoll_dtype_t picoll_classify_char(MPI_Datatype type, picoll_op_t op);
/* Asks the underlying MPI which ops it reduces MPI_CHAR and MPI_WCHAR with (after PMPI_Init, on
 * every rank). */
void picoll_classify_probe_chars(void);
/* Lets picoll_classify_dtype answer for Fortran's types (MPI_INTEGER, MPI_REAL, ...) once each is
 * found to have its C counterpart's size (after PMPI_Init). */
void picoll_classify_check_fortran(void);
/* PICOLL_OP_NONE for user-defined ops, MPI_MAXLOC/MINLOC, MPI_REPLACE, MPI_NO_OP. */
picoll_op_t picoll_classify_op(MPI_Op op);

#endif
