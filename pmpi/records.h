/* The registry of staged calls that outlive their wrapper (pmpi/records.c): a record keeps a call's
 * host copies (stage.h) from the wrapper's return until the call completes: its request's
 * completion for a non-blocking call (and every completion of a persistent one, whose inputs are
 * copied in again at each MPI_Start), the window's synchronisation for one-sided calls, the file's
 * matching _end for split collective I/O. A request the application frees while active becomes an
 * orphan, completed later. The engine (pmpi/stage.c) hands the calls over; the completion calls
 * (pmpi/requests.c) and the generated split-collective _end wrappers take them back. */
#ifndef PICOLL_RECORDS_H
#define PICOLL_RECORDS_H

#include <mpi.h>

#include "pmpi/stage.h"

#include <stdatomic.h>

/* A staged call that outlives its wrapper: a request, a persistent request, one-sided, split. */
typedef struct picoll_record picoll_record_t;

/* ---- from the engine ---- */
/* Keeps the call c (its host copies now the record's) in a record of mode: PICOLL_MODE_REQUEST or
 * PICOLL_MODE_PERSISTENT under request, PICOLL_MODE_RMA under its window, PICOLL_MODE_SPLIT under
 * its file. -1 when no record could be made: c keeps its copies. */
int picoll_record_keep(const picoll_call_t *c, picoll_stage_mode_t mode, MPI_Request request);

/* ---- split collective I/O ---- */
/* the record of file's _begin (NULL: none), and its completion */
picoll_record_t *picoll_split_take(MPI_File file);
void *picoll_record_pass(picoll_record_t *r, int i);
int picoll_split_end(picoll_record_t *r, int rc, const MPI_Status *status);

/* ---- completion, for pmpi/requests.c ---- */
/* records alive: request, persistent, one-sided, orphaned; 0 keeps completion calls pass-through */
extern atomic_int picoll_stage_tracked;
/* The record of request (NULL: none), taken out of the table unless it is persistent. */
picoll_record_t *picoll_request_find(MPI_Request request);
/* After the request completed with status: copies the outputs back (unless cancelled or already
 * copied), frees a non-persistent record. Returns rc, or the error of a failed copy. */
int picoll_request_done(picoll_record_t *r, int rc, const MPI_Status *status, int keep_copied);
/* MPI_Start: copies a persistent record's inputs in. */
int picoll_request_start(MPI_Request request);
/* MPI_Request_free on a tracked request: 1 when picoll took it over (*request set to NULL). */
int picoll_request_free(MPI_Request *request, int *rc);
/* Completes orphaned requests (freed by the application while active) that have finished;
 * with wait, waits for all of them (MPI_Finalize). */
void picoll_orphans_poll(int wait);
/* One-sided synchronisation on win completed the operations to target (-1: all). */
int picoll_rma_done(MPI_Win win, int target, int rc);

#endif
