/* picoll's own algorithms on the host executor. Each takes this rank's vote (1 when it can run the
 * call: its buffers are host memory of the right kind) and returns PICOLL_OK, or
 * PICOLL_DECLINED when some rank voted no: then no receive buffer was touched and every rank
 * hands the call to the underlying MPI.
 *
 * Workspace rule that keeps them race-free with one barrier per step: data written into
 * buffer (epoch + 1) of a slot before a barrier is read only between that barrier and the next. */
#ifndef PICOLL_ALGS_H
#define PICOLL_ALGS_H

#include "coll/dispatch.h"
#include "coll/netmodel.h"
#include "host/shm.h"
#include "net/hier.h"
#include "util/config.h"

/* Host executor algorithms, the device executor's (cuda/: they run on device buffers), then the
 * hierarchical ones (between nodes). */
enum {
    PICOLL_ALLREDUCE_ONESHOT = 1,
    PICOLL_ALLREDUCE_TWOSHOT = 2,
    PICOLL_ALLREDUCE_CUDA_ONESHOT = 3,
    PICOLL_ALLREDUCE_CUDA_TWOSHOT = 4,
    PICOLL_ALLREDUCE_HIER_RD = 5,
    PICOLL_ALLREDUCE_HIER_RING = 6,
    PICOLL_ALLREDUCE_HIER_ONESHOT = 7,
    PICOLL_ALLREDUCE_CUDA_HCM = 8,
    PICOLL_ALLREDUCE_CMA = 9,
    PICOLL_ALLREDUCE_HIER_CUDA = 10,
    PICOLL_ALLREDUCE_HIER_RAB = 11,
    PICOLL_ALLREDUCE_CUDA_LL = 12,
    PICOLL_ALLREDUCE_CUDA_ZC = 13
};
enum {
    PICOLL_ALLGATHER_SHM = 1,
    PICOLL_ALLGATHER_CUDA_IPC = 2,
    PICOLL_ALLGATHER_HIER = 3,
    PICOLL_ALLGATHER_CMA = 4,
    PICOLL_ALLGATHER_HIER_CUDA = 5,
    PICOLL_ALLGATHER_HIER_BRUCK = 6,
    PICOLL_ALLGATHER_CUDA_LL = 7,
    PICOLL_ALLGATHER_CUDA_ZC = 8
};
enum {
    PICOLL_ALLTOALL_SHM = 1,
    PICOLL_ALLTOALL_CUDA_IPC = 2,
    PICOLL_ALLTOALL_HIER = 3,
    PICOLL_ALLTOALL_CMA = 4,
    PICOLL_ALLTOALL_HIER_CUDA = 5,
    PICOLL_ALLTOALL_CUDA_ZC = 6
};
/* The device executor's kernel mode for a device allreduce or allgather algorithm (the blocking
 * dispatch's and the stream's). */
static inline picoll_cuda_kmode_t picoll_allreduce_kmode(int alg)
{
    return alg == PICOLL_ALLREDUCE_CUDA_HCM       ? PICOLL_CUDA_K_HCM
           : alg == PICOLL_ALLREDUCE_CUDA_TWOSHOT ? PICOLL_CUDA_K_TWOSHOT
           : alg == PICOLL_ALLREDUCE_CUDA_LL      ? PICOLL_CUDA_K_ONESHOT_LL
                                                  : PICOLL_CUDA_K_ONESHOT;
}
static inline picoll_cuda_kmode_t picoll_allgather_kmode(int alg)
{
    return alg == PICOLL_ALLGATHER_CUDA_LL ? PICOLL_CUDA_K_ALLGATHER_LL : PICOLL_CUDA_K_ALLGATHER;
}
/* Reduce-scatter (block or not), bcast, reduce and allgatherv run on the device executor only;
 * reduce-scatter's and bcast's zero-copy forms report PICOLL_DEVICE_ONLY_CUDA_ZC. */
enum { PICOLL_DEVICE_ONLY_CUDA = 1, PICOLL_DEVICE_ONLY_CUDA_ZC = 2 };

/* The zero-copy form (cuda/cuda_zc.c) of device algorithm alg of coll, where the call may take
 * it: its reporting id (0: none), and the bytes it reads from the send buffer and writes to the
 * receive buffer (bytes: allreduce's vector, allgather's and alltoall's block, reduce-scatter's
 * piece, bcast's message; size ranks; in_place: MPI_IN_PLACE). Two-shot allreduce, allgather,
 * bcast (the others read the root's buffer), and alltoall and reduce-scatter not in place (they
 * read the peers' send buffers) have one, reduce-scatter of even
 * pieces of 16-byte multiples only (every rank's piece 16-aligned in a send buffer: the
 * reduction's loads; the caller says whether they are even, PICOLL_COLL_REDUCE_SCATTER_BLOCK), from
 * PICOLL_CUDA_ZERO_COPY_MIN bytes a rank reads, with the path not off: the same on every rank, the
 * blocking vote's and the stream's. */
static inline int picoll_zero_copy_form(picoll_coll_t coll, int alg, size_t bytes, int size,
                                        int in_place, size_t *sbytes, size_t *rbytes)
{
    int zc = coll == PICOLL_COLL_ALLREDUCE && alg == PICOLL_ALLREDUCE_CUDA_TWOSHOT
                 ? PICOLL_ALLREDUCE_CUDA_ZC
             : coll == PICOLL_COLL_ALLGATHER && alg == PICOLL_ALLGATHER_CUDA_IPC
                 ? PICOLL_ALLGATHER_CUDA_ZC
             : coll == PICOLL_COLL_ALLTOALL && alg == PICOLL_ALLTOALL_CUDA_IPC && !in_place
                 ? PICOLL_ALLTOALL_CUDA_ZC
             : coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK && alg == PICOLL_DEVICE_ONLY_CUDA &&
                     !in_place && bytes % 16 == 0
                 ? PICOLL_DEVICE_ONLY_CUDA_ZC
             : coll == PICOLL_COLL_BCAST && alg == PICOLL_DEVICE_ONLY_CUDA
                 ? PICOLL_DEVICE_ONLY_CUDA_ZC
                 : 0;
    size_t all =
        bytes * (size_t)(coll == PICOLL_COLL_ALLREDUCE || coll == PICOLL_COLL_BCAST ? 1 : size);
    *sbytes = coll == PICOLL_COLL_ALLGATHER ? bytes : all;
    *rbytes = coll == PICOLL_COLL_REDUCE_SCATTER_BLOCK ? bytes : all;
    return picoll_cfg.cuda_zero_copy != PICOLL_CUDA_ZC_OFF && all > 0 &&
                   all >= picoll_cfg.cuda_zero_copy_min
               ? zc
               : 0;
}

/* Block r of n elements split among nranks: [lo, hi), in multiples of 64 bytes where possible. */
static inline void picoll_split_block(size_t n, size_t esize, int nranks, int r, size_t *lo,
                                      size_t *hi)
{
    size_t align = esize >= 64 ? 1 : 64 / esize;
    size_t per = (n + (size_t)nranks - 1) / (size_t)nranks;
    per = (per + align - 1) / align * align;
    *lo = per * (size_t)r < n ? per * (size_t)r : n;
    *hi = *lo + per < n ? *lo + per : n;
}

picoll_status_t picoll_allreduce_oneshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote);
picoll_status_t picoll_allreduce_twoshot(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                         int vote);
/* Between nodes (hier.h): node step through shm, network step on the rails, node step. The
 * votes of every rank reach every rank through the messages and the last node barrier. how: the
 * network step's method (PICOLL_RAIL_RD, _RAB or _RING), the same on every rank. */
picoll_status_t picoll_allreduce_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                      const picoll_allreduce_args_t *args, int vote,
                                      picoll_rail_method_t how);
picoll_status_t picoll_allreduce_hier_oneshot(picoll_shm_t *shm, picoll_hier_t *h,
                                              const picoll_allreduce_args_t *args, int vote);
/* Bytes of the chunks the hierarchical allreduce works through one at a time (oneshot: the whole
 * message): a staging pipeline's chunks (args->pipe). */
size_t picoll_allreduce_hier_chunk_bytes(const picoll_shm_t *shm,
                                         const picoll_allreduce_args_t *args, int oneshot);
/* The device hierarchy's network step (every rank on a rail: nodes of equal size). rail_and: the
 * AND of mask over my rail (every rail carries the same where each node's ranks agree on theirs:
 * the vote between nodes). rails_chunk: the chunk, whole elements of esize bytes, at most max
 * bytes and what the network step's scratch buffers hold. rails: allreduce of count elements of
 * buf (host memory; args gives the type, the op and the staging pipe, whose chunks must be
 * chunk_bytes, from rails_chunk) with the members of my rail, chunk by chunk, each chunk by the
 * method picoll_netmodel_allreduce chooses for its bytes. */
uint32_t picoll_allreduce_hier_rail_and(picoll_hier_t *h, uint32_t mask);
size_t picoll_allreduce_hier_rails_chunk(const picoll_hier_t *h, size_t esize, size_t max);
picoll_status_t picoll_allreduce_hier_rails(picoll_hier_t *h, const picoll_allreduce_args_t *args,
                                            char *buf, size_t count, size_t chunk_bytes);
/* The device hierarchy's allgather network step: buf holds len bytes per node, mine at my node's
 * index (my rank on the rail); the others arrive round the ring or by Bruck's steps
 * (picoll_netmodel_allgather chooses for len), arrived(k, arg) called for each node k as its bytes
 * are in. */
picoll_status_t picoll_allgather_hier_rails(picoll_hier_t *h, char *buf, size_t len,
                                            void (*arrived)(int k, void *arg), void *arg);
/* The device hierarchy's alltoall network step: sbuf and rbuf hold len bytes per node, by node
 * index (rank on the rail); the piece for node k goes to it, node k's comes into rbuf, one node
 * at a time, arrived(k, arg) called as each is in. */
picoll_status_t picoll_alltoall_hier_rails(picoll_hier_t *h, const char *sbuf, char *rbuf,
                                           size_t len, void (*arrived)(int k, void *arg),
                                           void *arg);
/* What selection needs: the bytes rail 0 reduces in the first chunk; the largest piece of a
 * block that the allgather / alltoall workspace holds (0: none). */
size_t picoll_allreduce_hier_rail_block(const picoll_shm_t *shm, const picoll_hier_t *h,
                                        const picoll_allreduce_args_t *args);
size_t picoll_allgather_hier_piece_max(const picoll_hier_t *h, size_t slot_size);
size_t picoll_alltoall_hier_piece_max(const picoll_hier_t *h, size_t slot_size);
/* how: the allgather's network step, PICOLL_RAIL_RING or PICOLL_RAIL_BRUCK (every rank alike). */
picoll_status_t picoll_allgather_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                      const picoll_blocks_args_t *args, int vote,
                                      picoll_rail_method_t how);
picoll_status_t picoll_alltoall_hier(picoll_shm_t *shm, picoll_hier_t *h,
                                     const picoll_blocks_args_t *args, int vote);
picoll_status_t picoll_allgather_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote);
picoll_status_t picoll_alltoall_shm(picoll_shm_t *shm, const picoll_blocks_args_t *args, int vote);

/* Single copy (shm->cma): the vote has two bits. HOST: this rank can run a picoll algorithm on
 * the call; DIRECT: its peers may also read its buffers with process_vm_readv (plain host memory,
 * not CUDA-pinned, and for alltoall not in place). Returns PICOLL_OK when every rank voted both;
 * PICOLL_ERR_NOT_SUPPORTED when every rank voted HOST but some not DIRECT: nothing was touched,
 * and the caller runs the workspace algorithm (vote 1) instead; PICOLL_DECLINED otherwise. */
enum { PICOLL_CMA_VOTE_HOST = 1, PICOLL_CMA_VOTE_DIRECT = 2 };
picoll_status_t picoll_allgather_cma(picoll_shm_t *shm, const picoll_blocks_args_t *args,
                                     uint32_t vote);
picoll_status_t picoll_alltoall_cma(picoll_shm_t *shm, const picoll_blocks_args_t *args,
                                    uint32_t vote);
picoll_status_t picoll_allreduce_cma(picoll_shm_t *shm, const picoll_allreduce_args_t *args,
                                     uint32_t vote);

#endif
