/* The MPI errors raised for a staged call (pmpi/errors.c): on the call's communicator, window or
 * file, through its error handler, as the MPI itself would; a refused call's error has a text of
 * its own, naming the call and the argument. */
#ifndef PICOLL_PMPI_ERRORS_H
#define PICOLL_PMPI_ERRORS_H

#include <mpi.h>

#include "pmpi/stage.h"

/* Calls the error handler of obj (PICOLL_OBJ_*; PICOLL_OBJ_NONE: MPI_COMM_WORLD) with code;
 * returns code. */
int picoll_raise_on(int obj_kind, const void *obj, int code);
/* ... of the call's communicator, window or file. */
int picoll_raise_call(const picoll_call_t *c, int code);
/* Refuses the call: warns, and raises an error whose text says that arg is CUDA device memory,
 * and why (picoll's own error class; MPI_ERR_BUFFER where the MPI cannot add one). */
int picoll_raise_refused(const picoll_call_t *c, const char *arg, const char *why);
/* Refuses a stream-ordered call (pmpi/stream*.c): warns, and raises on comm (MPI_COMM_NULL:
 * MPI_COMM_WORLD) an error of picoll's class "picoll: stream-ordered call refused" whose text is
 * the message (fallback, e.g. MPI_ERR_COMM, where the MPI cannot add classes). */
int picoll_raise_stream(MPI_Comm comm, int fallback, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
