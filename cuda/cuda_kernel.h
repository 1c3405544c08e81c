/* The one collective kernel of the device executor and its parameters. Shared by the C host side
 * (cuda_colls.c, cuda_launch.c, cuda_end.c, built by the MPI C compiler) and the CUDA side
 * (coll_kernel.cu, built by nvcc): plain C, no CUDA header.
 *
 * A launch runs one step of one collective on one chunk. Its grid of G blocks splits the chunk
 * into G slices; block b of every rank works on slice b only and synchronises with block b of the
 * other ranks through one flag per (rank, block): a monotonic epoch, stored with release and
 * loaded with acquire at system scope. G depends only on the chunk size, so it is the same on
 * every rank. */
#ifndef PICOLL_CUDA_KERNEL_H
#define PICOLL_CUDA_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define PICOLL_CUDA_MAX_LOCAL 32  /* local ranks a device workspace serves */
#define PICOLL_CUDA_MAX_BLOCKS 64 /* blocks of a launch: flags per rank */
#define PICOLL_CUDA_THREADS 512
#define PICOLL_CUDA_FLAG_STRIDE 8 /* uint64_t per flag: one 64-byte line each */
/* bytes per block below which fewer blocks are launched: small messages in small slices, so that
 * up to max_blocks SMs share them (each block waits on its own flags: one flag line per block) */
#define PICOLL_CUDA_SLICE_MIN 2048

/* A rank's workspace, one allocation: flag lines (uint64_t words), then two data buffers.
 *   arrive[b]        word b * PICOLL_CUDA_FLAG_STRIDE: written by the owner's block b, polled by
 *                    the peers' blocks b
 *   started[b]       word PICOLL_CUDA_STARTED_WORD + b * PICOLL_CUDA_FLAG_STRIDE: the first epoch
 *                    of the owner's latest launch, written when its block b starts running. Read
 *                    only by a block that gives up, to tell a peer whose launch has not started
 *                    (late: named) from one that runs but waits for somebody else itself
 *   halt             word PICOLL_CUDA_HALT_WORD: the seq of the owner's latest launch in which a
 *                    block gave up waiting; read (by the owner only) when a block starts, so
 *                    that launches queued behind that one exit without arriving
 *   hello            word PICOLL_CUDA_HELLO_WORD: a known value, read through every mapping at
 *                    set-up to prove peer access
 * No kernel reads a peer's workspace after its launch: a workspace is freed only after every rank
 * closed its mappings and passed a barrier, when no launch can be running. */
#define PICOLL_CUDA_STARTED_WORD (PICOLL_CUDA_MAX_BLOCKS * PICOLL_CUDA_FLAG_STRIDE)
#define PICOLL_CUDA_HALT_WORD (PICOLL_CUDA_HELLO_WORD + PICOLL_CUDA_FLAG_STRIDE)
#define PICOLL_CUDA_HELLO_WORD (2 * PICOLL_CUDA_MAX_BLOCKS * PICOLL_CUDA_FLAG_STRIDE)
/*   epoch            word PICOLL_CUDA_EPOCH_WORD: a workspace of a stream (launches whose
 *                    epoch_word points here): the last epoch of the owner's latest launch,
 *                    advanced by the kernel itself (dev_finish), so that a launch captured in a
 *                    CUDA graph and replayed takes the next epochs at each replay */
#define PICOLL_CUDA_EPOCH_WORD (PICOLL_CUDA_HALT_WORD + PICOLL_CUDA_FLAG_STRIDE)
/*   barrier[s]       word PICOLL_CUDA_BARRIER_WORD + s * PICOLL_CUDA_FLAG_STRIDE: the barrier
 *                    floor's flags (picoll_barrier_kernel, picoll_device_barrier_floor): the epoch
 *                    of local rank s's latest barrier, stored by s into every peer's workspace
 *                    (pushed) and polled by the owner in its own; no collective reads them
 *   barrier epoch    word PICOLL_CUDA_BARRIER_EPOCH_WORD: the owner's last barrier epoch, read
 *                    and advanced by the barrier kernel itself (queued launches and a graph's
 *                    replays take the next ones) */
#define PICOLL_CUDA_BARRIER_WORD (PICOLL_CUDA_EPOCH_WORD + PICOLL_CUDA_FLAG_STRIDE)
#define PICOLL_CUDA_BARRIER_EPOCH_WORD                                                             \
    (PICOLL_CUDA_BARRIER_WORD + PICOLL_CUDA_MAX_LOCAL * PICOLL_CUDA_FLAG_STRIDE)
#define PICOLL_CUDA_FLAGS_BYTES 12288 /* the words above, rounded up to 4 KiB */
#ifndef __cplusplus
_Static_assert((PICOLL_CUDA_BARRIER_EPOCH_WORD + 1) * 8 <= PICOLL_CUDA_FLAGS_BYTES,
               "the flag lines' words fit PICOLL_CUDA_FLAGS_BYTES");
#endif
/* The veto_at of every launch on a stream: the host's watch stores it in status->veto to end
 * the waits of a stream whose peer is gone (the call's data is lost then: the job ends) */
#define PICOLL_CUDA_STREAM_ABORT (~0ull)

typedef enum {
    PICOLL_CUDA_K_ONESHOT,    /* copy in, arrive, reduce every rank's slot into dst */
    PICOLL_CUDA_K_TWOSHOT,    /* copy in, arrive, reduce my piece, arrive, gather every piece */
    PICOLL_CUDA_K_ALLGATHER,  /* copy in, arrive, copy every rank's slot out */
    PICOLL_CUDA_K_ALLTOALL,   /* copy the piece for every peer in, arrive, copy my pieces out */
    PICOLL_CUDA_K_HCM,        /* hybrid cube mesh: copy in, arrive, reduce my quad, arrive, combine
                              * my quad's result with my relay's */
    PICOLL_CUDA_K_REDSCAT,    /* reduce-scatter (two-shot's first half): copy the piece for every
                              * rank in, arrive, reduce my piece of every rank's slot into dst */
    PICOLL_CUDA_K_BCAST,      /* the root copies in, every rank arrives, the others copy the root's
                              * slot out */
    PICOLL_CUDA_K_REDUCE,     /* one-shot to the root: copy in, arrive, the root reduces every
                              * rank's slot into dst */
    PICOLL_CUDA_K_ALLGATHERV, /* allgather with blocks of every size (piece) at their offsets in
                               * dst (piece_off) */
    PICOLL_CUDA_K_ALLTOALLV,  /* alltoall with pieces of every size: the piece for every rank in
                              * (piece, piece_off of src) at slot_stride apart, arrive, the piece
                              * from every rank out (rpiece, rpiece_off of dst) */
    PICOLL_CUDA_K_ONESHOT_LL, /* one-shot with low-latency lines: push my input as lines into
                               * every rank's slot, wait for every rank's lines in mine, reduce */
    PICOLL_CUDA_K_ALLGATHER_LL, /* allgather with the lines: push my block as lines into every
                                * rank's slot, wait for every rank's lines in mine, into dst */
    /* Zero-copy (issue 50): the peers' user buffers mapped here (zsrc, zdst), no slot; one launch
     * for the whole call. A first arrival says my input is ready, a last one that I am done
     * reading the peers' buffers, and a block returns only when every peer is done with mine */
    PICOLL_CUDA_K_ALLGATHER_ZC, /* arrive, copy every rank's block from its zsrc into dst, arrive */
    PICOLL_CUDA_K_TWOSHOT_ZC,   /* arrive, reduce my part of every zsrc into my dst, arrive, copy
                                 * every rank's part from its zdst, arrive */
    PICOLL_CUDA_K_ALLTOALL_ZC,  /* arrive, copy the block for me from every zsrc, arrive */
    PICOLL_CUDA_K_REDSCAT_ZC,   /* arrive, reduce my piece of every zsrc into my dst, arrive */
    PICOLL_CUDA_K_BCAST_ZC      /* arrive, the others copy the root's zsrc into dst, arrive */
} picoll_cuda_kmode_t;

/* Low-latency lines (PICOLL_CUDA_K_ONESHOT_LL and _ALLGATHER_LL, PICOLL_CUDA_LL_MAX). A line is 16
 * bytes stored and loaded as one vector: {data 4 bytes, flag, data 4 bytes, flag}, each 8-byte
 * half of data and its flag single-copy atomic (what NCCL's LL protocol relies on too), so a
 * reader that sees both flags has both halves of the data: an arrival is the data itself, no
 * release, no acquire, no flag round trip. The flag is picoll_cuda_ll_flag(epoch): never 0 (a
 * zeroed workspace holds no line), the same again only 2^32 - 1 epochs on. The lines live in an
 * area of their own after the two data buffers, one per parity (picoll_cuda_ll_area_bytes), where
 * nothing but lines is ever stored: raw data (a slot's copy-in, an unpacked payload) may hold any
 * words, the flag's at a line's places included, and taken for a line it would be an arrival with
 * wrong data (the emulated matrix found that: bytes of 0 and 1 read as flag 257). For a chunk of
 * B = picoll_cuda_ll_bytes(bytes) bytes of payload, every rank's area of the launch's parity
 * (ep & 1) holds
 *   lines of sender s     at s * 2B (2B bytes of lines: 16 for every 8 of payload)
 * and its slot of that parity (slot[ep & 1][r])
 *   unpacked of sender s  at s * B: the payload of s's lines, stored by the reader, which then
 *                         reduces every sender's in rank order as one-shot does (allreduce; an
 *                         allgather stores the payload in dst)
 * A sender writes a rank's area of parity x at epoch e only when every rank is done with epoch
 * e - 2 (it finished epoch e - 1, whose every call waits for every rank; HCM, which does not, never
 * takes the lines), so no line a reader still waits for is overwritten. */
#ifdef __CUDACC__
#define PICOLL_CUDA_HD __host__ __device__
#else
#define PICOLL_CUDA_HD
#endif
PICOLL_CUDA_HD static inline size_t picoll_cuda_ll_bytes(size_t bytes)
{
    return (bytes + 15) & ~(size_t)15;
}

PICOLL_CUDA_HD static inline uint32_t picoll_cuda_ll_flag(uint64_t epoch)
{
    return (uint32_t)(epoch % 0xffffffffull) + 1u;
}

/* Bytes of one data buffer (slot) of a workspace of PICOLL_WORKSPACE_SIZE ws_size: half of it in
 * 4 KiB pages, at least 64 KiB. */
static inline size_t picoll_cuda_slot_bytes(size_t ws_size)
{
    size_t slot = (ws_size / 2 + 4095) / 4096 * 4096;
    return slot < 65536 ? 65536 : slot;
}

/* Bytes of one parity's line area of a workspace of nranks ranks where calls up to ll_max bytes
 * (PICOLL_CUDA_LL_MAX) take the lines: every rank's lines of a call of ll_max bytes; 0: none. */
static inline size_t picoll_cuda_ll_area_bytes(int nranks, size_t ll_max)
{
    return ll_max == 0 ? 0 : (size_t)nranks * 2 * picoll_cuda_ll_bytes(ll_max);
}

/* Element types the kernel reduces, with their device type (picoll's bool and byte are reduced
 * as uint8; the complex types as float2/double2, real part first; float16 and bfloat16 as their
 * bits, in lane types coll_kernel.cu defines). X(enum, device type). */
#define PICOLL_CUDA_TYPE_LIST(X)                                                                   \
    X(PICOLL_CUDA_T_I8, int8_t)                                                                    \
    X(PICOLL_CUDA_T_U8, uint8_t)                                                                   \
    X(PICOLL_CUDA_T_I16, int16_t)                                                                  \
    X(PICOLL_CUDA_T_U16, uint16_t)                                                                 \
    X(PICOLL_CUDA_T_I32, int32_t)                                                                  \
    X(PICOLL_CUDA_T_U32, uint32_t)                                                                 \
    X(PICOLL_CUDA_T_I64, int64_t)                                                                  \
    X(PICOLL_CUDA_T_U64, uint64_t)                                                                 \
    X(PICOLL_CUDA_T_F32, float)                                                                    \
    X(PICOLL_CUDA_T_F64, double)                                                                   \
    X(PICOLL_CUDA_T_F16, dev_f16_t)                                                                \
    X(PICOLL_CUDA_T_BF16, dev_bf16_t)                                                              \
    X(PICOLL_CUDA_T_C32, float2)                                                                   \
    X(PICOLL_CUDA_T_C64, double2)

typedef enum {
#define PICOLL_CUDA_TYPE_ENUM(e, dtype) e,
    PICOLL_CUDA_TYPE_LIST(PICOLL_CUDA_TYPE_ENUM)
#undef PICOLL_CUDA_TYPE_ENUM
        PICOLL_CUDA_T_NONE /* not on the device (long double): the call falls back */
} picoll_cuda_type_t;

/* What the kernel tells this rank's host, in host-mapped pinned memory: the host polls it instead
 * of synchronising a stream (no driver call), with its own deadline. A block waits for a peer's
 * block at most the launch's spin_ns; then it gives up: it records whom it waited for, the launch's
 * seq in halted and quit[b], and returns; launches queued behind it exit at once (quit[b] too).
 * The host then waits for the peers without the GPU and resumes the call (cuda_end.c). */
typedef struct {
    volatile uint64_t done[PICOLL_CUDA_MAX_BLOCKS];    /* block b of the latest launch finished:
                                                        * its last epoch */
    volatile uint64_t started[PICOLL_CUDA_MAX_BLOCKS]; /* block b of the latest launch runs: its
                                                        * first epoch */
    volatile uint64_t quit[PICOLL_CUDA_MAX_BLOCKS];    /* block b of launch seq gave up or was
                                                        * skipped: that seq */
    volatile uint64_t halted;                          /* seq of a launch that gave up; 0: none
                                                        * (the host clears it) */
    volatile uint8_t missing[PICOLL_CUDA_MAX_LOCAL];   /* a local rank given up on: 2 if its
                                                        * launch had not started, else 1 */
    volatile uint64_t veto;                            /* written by the host: the veto_at of a
                                                        * call some rank said no to (a peer
                                                        * that never arrives): its blocks leave
                                                        * their waits (quit[b]) */
} picoll_cuda_status_t;

typedef struct {
    int mode;  /* picoll_cuda_kmode_t */
    int type;  /* picoll_cuda_type_t (allreduce) */
    int op;    /* picoll_op_t (allreduce) */
    int esize; /* element bytes (allreduce) */
    int nranks, me;
    int skip_self;        /* allgather in place: my block is already in dst */
    int root;             /* bcast, reduce: the root's local rank */
    int max_blocks;       /* blocks every rank's context keeps resident at once, beside the other
                         * ranks on its GPU (cuda_ws.c, ws_max_blocks); at most
                         * PICOLL_CUDA_MAX_BLOCKS */
    uint32_t peers;       /* local ranks waited for (all but me; hcm: quad and relay) */
    int quad[4];          /* hcm: my quad, ascending local ranks (reduced in this order) */
    int relay;            /* hcm: the rank whose quad result completes mine */
    int quad_first;       /* hcm: my quad's result is the left operand of the final combination */
    uint64_t epoch;       /* of the launch's first arrival; a two-shot also arrives at epoch + 1 */
    uint64_t *epoch_word; /* a launch on an application's stream: the first epoch is this word
                           * (PICOLL_CUDA_EPOCH_WORD of my flags) + 1, read when the launch runs,
                           * and the launch advances it; a wait past spin_ns names the peer in
                           * status->missing and waits on. NULL: epoch, as the host counts */
    uint64_t spin_ns;   /* a wait for a peer's block gives up after this long (PICOLL_CUDA_SPIN) */
    uint64_t seq;       /* this launch, numbered by the host (relaunches get new numbers) */
    uint64_t seq_floor; /* the first launch of this attempt at the call: a halt word in
                         * [seq_floor, seq) means an earlier launch of it gave up */
    uint64_t done_mask; /* resume: blocks that finished in an earlier attempt (they return) */
    int resume;         /* relaunch of the launch that gave up: each block goes on from where its
                         * own flag says it arrived */
    unsigned nap_ns;    /* a wait for a peer sleeps this long between looks (PICOLL_CUDA_NAP) */
    int lean;           /* PICOLL_CUDA_FENCES=needed: the words that order nothing (the started
                         * words; on a stream the epoch word and the status's done) stored and
                         * loaded relaxed, the started words by another warp than the arrivals'
                         * thread, so that no system-scope fence waits for them; on a stream no
                         * load of the halt word (nothing gives up there) */
    uint64_t veto_at;   /* a call on the hot path (no host barrier before it): its number, which
                         * status->veto takes when a rank said no; 0: the ranks agreed before */
    size_t bytes;       /* allreduce and allgather: the chunk; alltoall: the piece per peer;
                         * reduce-scatter, allgatherv: the chunk of the largest piece */
    size_t chunk_off;  /* offset of this chunk in the call's operands (of each block, each piece) */
    size_t src_stride; /* alltoall: bytes between the blocks of the send buffer */
    size_t dst_stride; /* allgather, alltoall: bytes between the blocks of the receive buffer */
    size_t slot_stride; /* reduce-scatter, alltoallv: bytes between the pieces in a slot (16-byte
                         * multiple) */
    size_t slot_size;   /* the lines: bytes of a data buffer, and of one parity's line area */
    size_t ll_size;     /* (after both data buffers of each rank's workspace, at flags[r]) */
    size_t piece[PICOLL_CUDA_MAX_LOCAL];      /* reduce-scatter, allgatherv: bytes of rank r's
                                              * whole piece (block) */
    size_t piece_off[PICOLL_CUDA_MAX_LOCAL];  /* its offset in the send buffer (reduce-scatter), in
                                              * the receive buffer (allgatherv) */
    size_t rpiece[PICOLL_CUDA_MAX_LOCAL];     /* alltoallv: bytes of the piece from rank r (piece:
                                               * those of the piece for rank r) */
    size_t rpiece_off[PICOLL_CUDA_MAX_LOCAL]; /* alltoallv: its offset in the receive buffer */
    const char *src;                          /* this chunk of the user's input */
    char *dst;                                /* this chunk of the user's output */
    char *slot[2][PICOLL_CUDA_MAX_LOCAL];     /* [parity][rank]: data buffers, mapped */
    const char *zsrc[PICOLL_CUDA_MAX_LOCAL];  /* zero-copy: rank r's input (allgather: its block;
                                               * alltoall: its send buffer), mapped (mine: src) */
    char *zdst[PICOLL_CUDA_MAX_LOCAL];        /* zero-copy two-shot: rank r's output, mapped */
    uint64_t *flags[PICOLL_CUDA_MAX_LOCAL];   /* [rank]: its flag lines, mapped */
    picoll_cuda_status_t *status;             /* host-mapped */
} picoll_cuda_kparams_t;
#ifndef __cplusplus
_Static_assert(sizeof(picoll_cuda_kparams_t) <= 4096, "a kernel's parameters: 4 KiB at most");
#endif

/* The kernel's symbol in the fatbin (cuModuleGetFunction). */
#define PICOLL_CUDA_KERNEL_NAME "picoll_coll_kernel"
/* The empty kernel that times a launch (picoll_cuda_floor). */
#define PICOLL_CUDA_FLOOR_NAME "picoll_floor_kernel"
/* The barrier floor's kernel: a flag exchange with every local rank, no data (picoll_cuda_floor's
 * PICOLL_CUDA_FLOOR_BARRIER*). */
#define PICOLL_CUDA_BARRIER_NAME "picoll_barrier_kernel"

/* Kernel entries of one element type, op and local rank count fixed at compile time (issue 27):
 * the op's switch folds away and the loop over the ranks unrolls, every rank's 16-byte load of a
 * step issued before any is used. The reductions the deep-learning frameworks make (sums of
 * float, float16, bfloat16, double) at the rank counts of a node's GPUs; every other call takes
 * the generic kernel, with the same results bit for bit. An entry holds the modes that reduce over
 * every local rank (picoll_cuda_fixed_mode); the others and HCM take the generic kernel.
 * X(tag, type enum, device type, op). */
#define PICOLL_CUDA_FIXED_LIST(X)                                                                  \
    X(f32_sum, PICOLL_CUDA_T_F32, float, PICOLL_OP_SUM)                                            \
    X(f16_sum, PICOLL_CUDA_T_F16, dev_f16_t, PICOLL_OP_SUM)                                        \
    X(bf16_sum, PICOLL_CUDA_T_BF16, dev_bf16_t, PICOLL_OP_SUM)                                     \
    X(f64_sum, PICOLL_CUDA_T_F64, double, PICOLL_OP_SUM)
/* The rank counts of those entries: X(..., nranks) for each. */
#define PICOLL_CUDA_FIXED_RANKS(X, ...)                                                            \
    X(__VA_ARGS__, 2) X(__VA_ARGS__, 4) X(__VA_ARGS__, 6) X(__VA_ARGS__, 8)
#define PICOLL_CUDA_FIXED_COUNT (4 * 4)
/* An entry's symbol: picoll_coll_TAG_rN (picoll_coll_f32_sum_r8). */
#define PICOLL_CUDA_FIXED_NAME(tag, nr) "picoll_coll_" #tag "_r" #nr

/* Whether a launch of mode may take an entry of PICOLL_CUDA_FIXED_LIST. */
static inline int picoll_cuda_fixed_mode(int mode)
{
    return mode == PICOLL_CUDA_K_ONESHOT || mode == PICOLL_CUDA_K_REDUCE ||
           mode == PICOLL_CUDA_K_REDSCAT || mode == PICOLL_CUDA_K_TWOSHOT ||
           mode == PICOLL_CUDA_K_ONESHOT_LL || mode == PICOLL_CUDA_K_TWOSHOT_ZC ||
           mode == PICOLL_CUDA_K_REDSCAT_ZC;
}

/* Blocks a launch of p uses (1..PICOLL_CUDA_MAX_BLOCKS), the same on every rank: one per
 * PICOLL_CUDA_SLICE_MIN bytes, at most max_blocks. */
static inline int picoll_cuda_kernel_blocks(const picoll_cuda_kparams_t *p)
{
    int per_rank = p->mode == PICOLL_CUDA_K_ALLTOALL || p->mode == PICOLL_CUDA_K_REDSCAT ||
                   p->mode == PICOLL_CUDA_K_ALLTOALLV || p->mode == PICOLL_CUDA_K_ALLTOALL_ZC ||
                   p->mode == PICOLL_CUDA_K_REDSCAT_ZC;
    size_t total = per_rank ? p->bytes * (size_t)p->nranks : p->bytes;
    size_t g = (total + PICOLL_CUDA_SLICE_MIN - 1) / PICOLL_CUDA_SLICE_MIN;
    int max = p->max_blocks < 1 ? 1 : p->max_blocks;
    if (max > PICOLL_CUDA_MAX_BLOCKS) {
        max = PICOLL_CUDA_MAX_BLOCKS;
    }
    return g < 1 ? 1 : g > (size_t)max ? max : (int)g;
}

#endif
