/* picoll: MPI collectives on GPU buffers through PMPI interposition.
 *
 * Applications need nothing from this header: preload libpicoll.so (or link it before the MPI
 * library) and the MPI calls are intercepted. These few functions are for tools and tests. */
#ifndef PICOLL_H
#define PICOLL_H

#include <mpi.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PICOLL_VERSION_MAJOR 0
#define PICOLL_VERSION_MINOR 1
#define PICOLL_VERSION_PATCH 0

/* "0.1.0" */
const char *picoll_version(void);

/* 1 when picoll intercepts collectives in this process (initialised through MPI_Init or
 * MPI_Init_thread with PICOLL_ENABLE=1 and a configuration accepted by every rank), else 0. */
int picoll_active(void);

/* While bypass is nonzero, every intercepted call goes straight to the underlying MPI, as with
 * PICOLL_ENABLE=0. Every rank of a communicator must make its calls in the same state: flip it
 * on all ranks between the same two collectives (benchmarks use it for A/B runs in one job). */
void picoll_set_bypass(int bypass);

typedef struct {
    unsigned long id; /* unique per communicator context in this process */
    int enabled;      /* picoll may run its own algorithms on this communicator */
    int size;         /* communicator size */
    int local_size;   /* ranks of this communicator on this node */
    int num_nodes;    /* nodes the communicator spans */
    char reason[128]; /* why it is disabled, when it is */
} picoll_comm_info_t;

/* Describe picoll's context for comm. Returns MPI_SUCCESS and fills info if a context exists
 * (one is created by the first intercepted collective on comm), MPI_ERR_OTHER if none does. */
int picoll_comm_query(MPI_Comm comm, picoll_comm_info_t *info);

/* What this rank holds for comm's network step, once set up (by comm's first collective that
 * spans nodes): the members of its rail (*rail_size, the nodes), the UCX endpoints it holds and
 * the liveness connections that watch its rail partners. Returns MPI_SUCCESS, or MPI_ERR_OTHER
 * where comm has no network step (one node, off a rail, not set up yet). For the scale tests:
 * both counts grow as log2 of the nodes, until an alltoall connects to all. */
int picoll_comm_net_query(MPI_Comm comm, int *rail_size, int *endpoints, int *watched);

/* The algorithm that ran the calling thread's last MPI_Allreduce, MPI_Allgather, MPI_Alltoall,
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Bcast or MPI_Reduce,
 * as PICOLL_STATS names it ("cuda_oneshot", "oneshot", "hier_rd", ...; "fallback" when the call
 * went to the underlying MPI), or NULL before the first. For tests that check each call's path. */
const char *picoll_last_algorithm(void);

/* ---- Stream-ordered MPI calls (MPICH's MPIX_Stream extension, on any MPI) ----
 *
 * MPICH 4.1 names and prototypes, so that code written for MPICH's extension runs unchanged on
 * Open MPI under picoll. A stream object wraps a CUDA stream (info key "type" = "cudaStream_t",
 * "value" the stream handle's bytes as set by MPIX_Info_set_hex); a stream communicator
 * (MPIX_Stream_comm_create) carries it; the *_enqueue calls on that communicator return at once
 * and take effect in the stream's order: later work on the stream sees their results, and they
 * see the results of the work queued on the stream before them. Enqueued collectives must be
 * enqueued in the same order on every rank, as blocking ones are called. MPIX_Allreduce_enqueue
 * and the point-to-point calls are MPICH's; MPIX_Allgather_enqueue, MPIX_Alltoall_enqueue,
 * MPIX_Reduce_scatter_block_enqueue and MPIX_Bcast_enqueue are picoll's, with the same pattern.
 * On an MPI whose mpi.h has MPIX_Stream of its own (MPICH 4.1 and later), picoll takes the MPI's
 * type and declarations: picoll's streams are those made from a CUDA stream's info, with handles
 * of their own, and every other stream, stream communicator and call (a stream without a GPU,
 * for threads) is the MPI's, handed to it through its PMPIX_ entry points. */
#ifndef MPIX_STREAM_NULL
#define PICOLL_MPIX_STREAM 1 /* picoll's own MPIX_Stream type */
typedef struct picoll_mpix_stream *MPIX_Stream;
#define MPIX_STREAM_NULL ((MPIX_Stream)0)

int MPIX_Info_set_hex(MPI_Info info, const char *key, const void *value, int value_size);
int MPIX_Stream_create(MPI_Info info, MPIX_Stream *stream);
int MPIX_Stream_free(MPIX_Stream *stream);
int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm *newcomm);
int MPIX_Send_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm);
int MPIX_Recv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                      MPI_Comm comm, MPI_Status *status);
int MPIX_Isend_enqueue(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                       MPI_Comm comm, MPI_Request *request);
int MPIX_Irecv_enqueue(void *buf, int count, MPI_Datatype datatype, int source, int tag,
                       MPI_Comm comm, MPI_Request *request);
int MPIX_Wait_enqueue(MPI_Request *request, MPI_Status *status);
int MPIX_Waitall_enqueue(int count, MPI_Request array_of_requests[],
                         MPI_Status array_of_statuses[]);
int MPIX_Allreduce_enqueue(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm);
#endif

/* picoll's enqueued collectives beyond MPICH's, on either type */
int MPIX_Allgather_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPIX_Alltoall_enqueue(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPIX_Reduce_scatter_block_enqueue(const void *sendbuf, void *recvbuf, int recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPIX_Bcast_enqueue(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);

/* For tests: the calls enqueued on stream so far, by how their buffers went: copied through host
 * memory on the stream (staged), used in place as host buffers (host), or kept on the device
 * without a kernel (device: the collectives of a communicator of one rank, a copy on the stream
 * from the input to the output, or nothing in place); of them,
 * those recorded into a CUDA graph (captured); the calls its progress thread ran (a graph's
 * replays included); and, apart from all these, the collectives that went to picoll's kernels on
 * the stream itself (kernels; their graph replays are not counted: nothing of the host sees
 * them). Any pointer may be NULL. MPI_SUCCESS, or MPI_ERR_ARG for a stream that is not one. */
int picoll_stream_query(MPIX_Stream stream, long *staged, long *host, long *device, long *captured,
                        long *runs, long *kernels);

/* ---- The GPU's floor, for benchmarks (osu-bench --floor) ----
 *
 * Times on the calling thread's current CUDA context, with picoll's own kernel module and the
 * launch shape of its calls (one block of its threads, its parameter block), and stores the time
 * of one in *seconds:
 *   PICOLL_FLOOR_LAUNCH  one empty kernel launched and waited for as a blocking call waits (the
 *                        host polls a word the kernel stores in mapped host memory); n times
 *   PICOLL_FLOOR_QUEUE   n empty kernels queued on cuda_stream (a CUstream), then one synchronise,
 *                        as enqueued calls run; the time per launch
 *   PICOLL_FLOOR_COPY    n device-to-device copies of bytes queued on cuda_stream, then one
 *                        synchronise; the time per copy (each reads and writes bytes)
 * Not collective. MPI_SUCCESS; MPI_ERR_ARG for a bad argument or no current context;
 * MPI_ERR_OTHER where picoll has no device kernels (built without CUDA, no driver) or CUDA
 * failed; the reason is logged (PICOLL_LOG=warn). */
#define PICOLL_FLOOR_LAUNCH 1
#define PICOLL_FLOOR_QUEUE 2
#define PICOLL_FLOOR_COPY 3
int picoll_device_floor(int what, void *cuda_stream, int n, size_t bytes, double *seconds);

/* The barrier floor, for benchmarks (osu-bench --floor): the cheapest kernel that crosses
 * processes, a barrier of comm's ranks on the node with no data. Each rank's kernel (one block of
 * one warp) stores its epoch into a flag of every peer's device workspace (the CUDA IPC workspace
 * of comm's device calls: comm must have made one, by a collective on device buffers) and spins
 * on the peers' flags in its own; *seconds is the time of one barrier:
 *   PICOLL_FLOOR_BARRIER        launched and waited for as a blocking call waits (the host polls a
 *                               word the kernel stores in mapped host memory); n times
 *   PICOLL_FLOOR_BARRIER_QUEUE  n queued on cuda_stream (a CUstream) back to back, then one
 *                               synchronise, as enqueued calls run
 *   PICOLL_FLOOR_BARRIER_GRAPH  one captured from cuda_stream (not a default stream) into a CUDA
 *                               graph, the graph launched n times back to back, one synchronise
 * Every rank of comm on the node must make the same calls, with the same what and n. A wait past
 * PICOLL_TIMEOUT gives up. MPI_SUCCESS; MPI_ERR_ARG for a bad argument; MPI_ERR_OTHER where comm
 * has no device workspace, the driver lacks the graph calls, a peer did not arrive or CUDA failed;
 * the reason is logged (PICOLL_LOG=warn). */
#define PICOLL_FLOOR_BARRIER 4
#define PICOLL_FLOOR_BARRIER_QUEUE 5
#define PICOLL_FLOOR_BARRIER_GRAPH 6
int picoll_device_barrier_floor(MPI_Comm comm, int what, void *cuda_stream, int n, double *seconds);

/* ---- Zero-copy device collectives (PICOLL_CUDA_ZERO_COPY) ----
 *
 * Large device allreduce, allgather and alltoall on one node read the peers' buffers where they
 * are, mapped through CUDA IPC, with no copy through picoll's workspace, where every rank's
 * buffers of the call lie in registered ranges (or, with PICOLL_CUDA_ZERO_COPY=on, for any device
 * buffer); every rank copies otherwise, together.
 *
 * picoll_register: bytes of device memory at ptr, inside one allocation (cudaMalloc, cuMemAlloc),
 * registered for the calls on comm (MPI_COMM_NULL: on every communicator); *handle is for
 * picoll_deregister, which must come before the memory is freed. Not collective: each rank
 * registers its own buffers, and the call waits for no other rank. The ranges registered for comm
 * end with it (MPI_Comm_free): no call takes them after, not even one on a communicator made
 * later; their handles still deregister, once. MPI_SUCCESS; MPI_ERR_ARG for a NULL pointer or handle, 0 bytes, a
 * range that is not device memory or runs past its allocation; MPI_ERR_COMM where picoll is not
 * active on comm; MPI_ERR_OTHER where picoll has no device support or holds 4096 ranges already.
 * picoll_deregister: MPI_SUCCESS, or MPI_ERR_ARG for what is not a registered range's handle
 * (one deregistered already). The reason is logged (PICOLL_LOG=warn). */
int picoll_register(MPI_Comm comm, void *ptr, size_t bytes, void **handle);
int picoll_deregister(void *handle);

/* An allocator whose memory is registered for every communicator, in the shape of PyTorch's
 * pluggable allocator (torch.cuda.memory.CUDAPluggableAllocator(path, "picoll_cuda_alloc",
 * "picoll_cuda_free"), picoll_torch.mem_pool()): size bytes of device memory in device's primary
 * context (NULL where that fails; stream unused), and its free (size and stream unused). */
void *picoll_cuda_alloc(ssize_t size, int device, void *stream);
void picoll_cuda_free(void *ptr, ssize_t size, int device, void *stream);

#ifdef __cplusplus
}
#endif
#endif
