/* The stream-ordered calls (MPIX_Stream, MPIX_*_enqueue) and picoll_stream_query, looked up in
 * the process (libpicoll.so preloaded; MPICH 4.1 and later bring MPIX_Stream_create and
 * MPIX_Info_set_hex of their own): for the device tests that enqueue (enqueue.c, shuffle.c). */
#ifndef PICOLL_TESTS_CUDA_MPIX_H
#define PICOLL_TESTS_CUDA_MPIX_H

#include <dlfcn.h>
#include <mpi.h>
#include <picoll.h> /* MPIX_Stream: picoll's own type, or the MPI's (MPICH 4.1 and later) */

typedef MPIX_Stream stream_t;

typedef struct {
    int (*info_set_hex)(MPI_Info, const char *, const void *, int);
    int (*create)(MPI_Info, stream_t *);
    int (*free_)(stream_t *);
    int (*comm_create)(MPI_Comm, stream_t, MPI_Comm *);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*rsb)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*bcast)(void *, int, MPI_Datatype, int, MPI_Comm);
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
    int (*recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
    int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*irecv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
    int (*waitall)(int, MPI_Request *, MPI_Status *);
    int (*query)(stream_t, long *, long *, long *, long *, long *, long *);
} mpix_t;

/* Fills m; 1 where every call is there. */
static inline int mpix_load(mpix_t *m)
{
    static const char *const names[] = {
        "MPIX_Info_set_hex",      "MPIX_Stream_create",
        "MPIX_Stream_free",       "MPIX_Stream_comm_create",
        "MPIX_Allreduce_enqueue", "MPIX_Allgather_enqueue",
        "MPIX_Alltoall_enqueue",  "MPIX_Reduce_scatter_block_enqueue",
        "MPIX_Bcast_enqueue",     "MPIX_Send_enqueue",
        "MPIX_Recv_enqueue",      "MPIX_Isend_enqueue",
        "MPIX_Irecv_enqueue",     "MPIX_Waitall_enqueue",
        "picoll_stream_query"};
    void **fields[] = {(void **)&m->info_set_hex, (void **)&m->create,    (void **)&m->free_,
                       (void **)&m->comm_create,  (void **)&m->allreduce, (void **)&m->allgather,
                       (void **)&m->alltoall,     (void **)&m->rsb,       (void **)&m->bcast,
                       (void **)&m->send,         (void **)&m->recv,      (void **)&m->isend,
                       (void **)&m->irecv,        (void **)&m->waitall,   (void **)&m->query};
    int all = 1;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *fields[i] = dlsym(RTLD_DEFAULT, names[i]);
        all = all && *fields[i] != NULL;
    }
    return all;
}

#endif
