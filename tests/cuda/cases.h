/* The cases of tests/cuda/cuda_coll: inputs every rank can regenerate, the reference results
 * (plain host loops, bit for bit), buffers on the device or the host with guard bytes, one
 * allreduce / allgather / alltoall in three steps (prepare, call, check) so that a test can put
 * something between them, and the check of the path picoll took for each call. */
#ifndef PICOLL_TESTS_CUDA_CASES_H
#define PICOLL_TESTS_CUDA_CASES_H

#include "drv.h"
#include "mpitest.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The thresholds the device cases are built around: cuda_coll sets these PICOLL_* defaults before
 * MPI_Init (tests/cuda/CTestTestfile.cmake.in sets the same) and refuses other values. */
#define ONESHOT_MAX 4096 /* PICOLL_NVLINK_ONESHOT_MAX=4k */
#define SLOT 65536       /* PICOLL_WORKSPACE_SIZE=128k: two data buffers of 64 KiB */

#define GUARD 64
#define GUARD_BYTE 0xA5

typedef enum {
    K_INT,
    K_UINT,
    K_BOOL,
    K_BYTE,
    K_FLOAT,
    K_DOUBLE,
    K_LDOUBLE,
    K_CFLOAT,
    K_CDOUBLE,
    K_F16,
    K_BF16
} kind_t;
typedef enum { SUM, PROD, MAX, MIN, LAND, LOR, LXOR, BAND, BOR, BXOR, NOPS } op_t;

typedef struct {
    const char *name;
    MPI_Datatype dt;
    kind_t kind;
    size_t size;
} type_t;

extern const type_t types[];
extern const size_t ntypes;
extern const type_t type_long_double;
/* indices into types[] of a few the special cases use */
#define T_INT8 0
#define T_UINT8 1
#define T_INT32 4
#define T_FLOAT 10
#define T_DOUBLE 11
#define T_CDOUBLE 13

extern const char *const op_names[NOPS];
int op_allowed(const type_t *t, op_t op);
/* An op t allows, drawn as the shuffles draw (mt_rand(seed, k, base + d) for d = d0, d0 + 1, ...
 * until one is allowed): the same on every rank. */
op_t draw_op(const type_t *t, uint64_t seed, long k, uint64_t base, int d0);

/* Where a rank's buffers are: device memory of the current context, host memory, or a host send
 * buffer with a device receive buffer. */
typedef enum { MEM_DEVICE, MEM_HOST, MEM_HOST_SEND } mem_t;

/* The setting of the cases. */
extern MPI_Comm test_comm;  /* the communicator they run on (MPI_COMM_WORLD by default) */
extern int groups;          /* --groups G: the reference reduces within groups of G ranks first */
extern int hier;            /* --hier G: virtual nodes of G ranks: the allreduce between them
                                 takes the device hierarchy (hier_cuda), the reference reduces
                                 within groups of G first */
extern int expect_fallback; /* every device call must fall back (ranks time-slice one GPU...) */
extern int zc_register;     /* --register: every device buffer registered (picoll_register) for
                                 test_comm, deregistered before it is freed */
extern int zc_aligned;      /* --zc: send buffers at the receive buffer's offset (0, 1, 8), so
                                 that calls at offset 0 have both 16-aligned (the zero-copy
                                 path's condition); else at odd offsets (3, 4, 11) */
extern unsigned long long ncases;

/* An allocation of len bytes at byte offset off, followed by GUARD guard bytes, on the device (in
 * the current context) or on the host. */
typedef struct {
    char *alloc;
    char *p;
    size_t len, off;
    int host;
    void *reg; /* --register: the allocation's registration */
} dbuf_t;
void dbuf_alloc(dbuf_t *b, size_t len, size_t off, int host);
void dbuf_put(dbuf_t *b, size_t at, const void *src, size_t n);
void dbuf_get(const dbuf_t *b, size_t at, void *dst, size_t n);
void dbuf_free(dbuf_t *b);

/* One allreduce. Fill the first fields, then ar_prepare (inputs, reference, buffers), ar_call (the
 * MPI call and its path check: want_path, or NULL for what the device path should take), ar_check
 * (the result, guard bytes, the send buffer unchanged; frees everything). */
typedef struct {
    int ti; /* seeds the inputs: the index of t in types[], or any number */
    const type_t *t;
    op_t op;
    size_t count;
    int in_place;
    size_t off;
    mem_t mem;
    /* inputs whose reduction is exact in any order, for a call that falls back (the underlying
     * MPI has an order of its own); the same on every rank. Implied by expect_fallback. */
    int exact;
    /* set by ar_prepare */
    size_t bytes;
    unsigned char *mine, *want, *got;
    dbuf_t sb, rb;
} ar_case_t;
void ar_prepare(ar_case_t *c);
void ar_call(ar_case_t *c, const char *want_path);
void ar_check(ar_case_t *c);
/* all three, on device buffers */
void allreduce_case(int ti, const type_t *t, op_t op, size_t count, int in_place, size_t off);

/* One allgather or alltoall of MPI_BYTE blocks, in the same three steps. */
typedef struct {
    int alltoall;
    size_t block;
    int in_place;
    size_t off;
    mem_t mem;
    /* set by bl_prepare */
    size_t total;
    unsigned char *in, *want, *got;
    dbuf_t sb, rb;
} bl_case_t;
void bl_prepare(bl_case_t *c);
void bl_call(bl_case_t *c, const char *want_path);
void bl_check(bl_case_t *c);
void blocks_case(int alltoall, size_t block, int in_place, size_t off);

/* One call with its path check (want: accepted paths), outside the case structures: for tests
 * that make their own buffers. name names the call in messages. */
void call_allreduce(const void *send, void *recv, size_t count, MPI_Datatype dt, MPI_Op op,
                    const char *want, const char *name);
void call_blocks(int alltoall, const void *send, void *recv, size_t block, const char *want,
                 const char *name);
/* Reads a device or host buffer back: 1 when its guard bytes are intact. */
int dbuf_read(const dbuf_t *b, void *dst);

/* The path a device call should take: "a|b" lists the accepted names of picoll_last_algorithm(). */
const char *want_staged_allreduce(void);
const char *want_allreduce(const type_t *t, size_t bytes);
const char *want_blocks(int alltoall, int in_place, size_t total);
/* What a call whose copy path is want (one of the above) takes where the zero-copy path is
 * expected (PICOLL_CUDA_ZERO_COPY=on, or registered buffers with --register, from
 * PICOLL_CUDA_ZERO_COPY_MIN received bytes): "cuda_zc" for two-shot allreduce and the IPC
 * copies (alltoall not in place) where both buffers are 16-byte aligned, else want. */
const char *want_zc(const char *want, int alltoall, const void *send, const void *recv,
                    size_t rbytes);
/* The same for a call that maps maps allocations of its peers on a rank (bcast: the root's one),
 * where want_zc counts one a peer (two for a two-shot allreduce out of place); -1: as want_zc. */
const char *want_zc_maps(const char *want, int alltoall, const void *send, const void *recv,
                         size_t rbytes, long maps);

/* Checks the calling thread's picoll_last_algorithm() against want ("a|b"): on a mismatch, one
 * line "FAIL [rank r] <call> count=<n>: path <got>, expected <want>". */
void check_path(const char *call, size_t count, const char *want);
/* Resolves picoll_last_algorithm (libpicoll.so is preloaded): a failure when it is not there. */
void path_init(void);

/* From worker_start() to worker_stop() the MPI calls of the cases are made by one worker thread
 * that never made a CUDA context current (PyTorch's MPI backend does so); after each, the worker
 * checks that it still has no current context. */
void worker_start(void);
void worker_stop(void);
/* Runs fn(arg) in the worker (here where there is none) and waits for it. */
void worker_run(void (*fn)(void *), void *arg);

/* The inputs and references of the cases, for the other collectives (devcoll.c): the MPI op;
 * a seed; element i of rank r's input (exact: reducible in any order); element i of the
 * reduction over every rank (left to right, or by --groups); a bit-for-bit comparison of count
 * elements (one failure line naming the first that differs). */
MPI_Op op_handle(op_t op);
uint64_t seed_of(int t, int op, size_t count, int extra);
void gen(const type_t *t, op_t op, uint64_t seed, int r, size_t i, int exact, void *p);
void reference(const type_t *t, op_t op, uint64_t seed, size_t i, int exact, unsigned char *want);
void check_bytes(const char *what, const char *tname, const char *opname, size_t count,
                 size_t esize, const unsigned char *got, const unsigned char *want);

/* Sum over the ranks of (r + 1) * k, as a byte (inputs of the stream-ordering cases). */
unsigned char rank_byte_sum(int k);

#endif
