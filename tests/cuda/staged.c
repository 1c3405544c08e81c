/* The collectives picoll stages for an MPI that is not CUDA-aware, on CUDA buffers: every staged
 * collective, in place and not, roots 0 and last, several sizes, datatypes with gaps and lower
 * bounds, host, device and managed buffers mixed across ranks and within a rank, buffers on
 * another device than the current one. Each result is compared bit for bit with the same call on
 * host buffers with the same contents through PMPI_* (picoll out of the way), and the send
 * buffers must come back unchanged. Also: MPIX_Query_cuda_support() == 1, and a buffer freed and
 * reallocated at the same address (new buffer id) on another device with other contents; invalid
 * arguments on device buffers; staged calls from several threads at once.
 *
 * A plain MPI program: it uses the CUDA driver through dlopen, so it builds without CUDA and,
 * without a GPU, prints "SKIP: no CUDA device (why)" and exits 77. Run it with libpicoll.so
 * preloaded. With tests/cuda/fake_libcuda.c's directory in LD_LIBRARY_PATH it runs on that fake
 * driver, whose device memory the CPU cannot touch. */
#include "drv.h"
#include "mpitest.h"
#include "tbuf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* picoll's MPIX_Query_cuda_support, or -1 without one: looked up, not linked, since an MPI-5
 * standard-ABI library (MPICH's libmpi_abi) does not export it */
static int query_cuda_support(void)
{
    int (*query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    return query == NULL ? -1 : query();
}

static int ndev;

/* ---- the collectives ---- */

enum {
    C_ALLREDUCE,
    C_ALLGATHER,
    C_ALLTOALL,
    C_BCAST,
    C_REDUCE,
    C_GATHER,
    C_SCATTER,
    C_ALLGATHERV,
    C_ALLTOALLV,
    C_REDUCE_SCATTER_BLOCK,
    C_COUNT
};
static const char *const coll_name[] = {
    "allreduce", "allgather", "alltoall",   "bcast",     "reduce",
    "gather",    "scatter",   "allgatherv", "alltoallv", "reduce_scatter_block"};

typedef struct {
    int coll, n, root, inplace;
    MPI_Datatype type; /* MPI_INT for the reductions */
    const char *tname;
    MPI_Aint lb, extent, tlb, textent;
    int counts[64], displs[64], rcounts[64], rdispls[64];
    size_t sbytes, rbytes; /* 0: no buffer on this rank */
} call_t;

static int is_root_only_recv(int coll)
{
    return coll == C_REDUCE || coll == C_GATHER;
}

/* Whether this rank passes MPI_IN_PLACE: rooted collectives are in place at the root only. */
static int in_place_here(const call_t *c)
{
    int rooted = c->coll == C_REDUCE || c->coll == C_GATHER || c->coll == C_SCATTER;
    return c->inplace && (!rooted || mt_rank == c->root);
}

/* Bytes that count elements of the call's type cover from the buffer start, with margin. */
static size_t type_bytes(const call_t *c, MPI_Aint count)
{
    return count <= 0 ? 0 : (size_t)((count - 1) * c->extent + c->tlb + c->textent);
}

static void plan(call_t *c)
{
    int n = c->n, p = mt_size, r = mt_rank;
    MPI_Aint total = 0;
    MPI_Type_get_extent(c->type, &c->lb, &c->extent);
    MPI_Type_get_true_extent(c->type, &c->tlb, &c->textent);
    switch (c->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        c->sbytes = type_bytes(c, n);
        c->rbytes = type_bytes(c, n);
        break;
    case C_BCAST:
        c->sbytes = 0;
        c->rbytes = type_bytes(c, n);
        break;
    case C_ALLGATHER:
    case C_GATHER:
        c->sbytes = type_bytes(c, n);
        c->rbytes = type_bytes(c, (MPI_Aint)p * n);
        break;
    case C_ALLTOALL: c->sbytes = c->rbytes = type_bytes(c, (MPI_Aint)p * n); break;
    case C_SCATTER:
        c->sbytes = type_bytes(c, (MPI_Aint)p * n);
        c->rbytes = type_bytes(c, n);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        c->sbytes = type_bytes(c, (MPI_Aint)p * n);
        c->rbytes = type_bytes(c, c->inplace ? (MPI_Aint)p * n : n);
        break;
    case C_ALLGATHERV: /* rank i contributes n + i elements, blocks 2 elements apart */
        for (int i = 0; i < p; i++) {
            c->rcounts[i] = n + i;
            c->rdispls[i] = (int)total;
            total += n + i + 2;
        }
        c->sbytes = type_bytes(c, n + r);
        c->rbytes = type_bytes(c, total);
        break;
    case C_ALLTOALLV: /* r sends n + (r + j) % 3 elements to j, blocks 1 element apart */
        for (int j = 0; j < p; j++) {
            c->counts[j] = c->rcounts[j] = n + (r + j) % 3;
            c->displs[j] = c->rdispls[j] = (int)total;
            total += n + (r + j) % 3 + 1;
        }
        c->sbytes = c->rbytes = type_bytes(c, total);
        break;
    }
    if (in_place_here(c) && c->coll == C_SCATTER) {
        c->rbytes = 0; /* the root's block stays in its send buffer */
    } else if (in_place_here(c)) {
        c->sbytes = 0;
    }
    if (c->coll == C_SCATTER && r != c->root) {
        c->sbytes = 0;
    }
    if (is_root_only_recv(c->coll) && r != c->root) {
        c->rbytes = 0;
    }
}

/* Runs the call through MPI_* (picoll) or PMPI_* (reference) on buffers s and r; NULL where
 * this rank passes no buffer, MPI_IN_PLACE where the call is in place here. */
static int run(const call_t *c, int pmpi, void *s, void *r)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int n = c->n, root = c->root;
    const void *snd = s;
    void *rcv = r;
    if (in_place_here(c) && c->coll == C_SCATTER) {
        rcv = MPI_IN_PLACE;
    } else if (in_place_here(c)) {
        snd = MPI_IN_PLACE;
    }
    switch (c->coll) {
    case C_ALLREDUCE:
        return (pmpi ? PMPI_Allreduce : MPI_Allreduce)(snd, rcv, n, c->type, MPI_SUM, w);
    case C_REDUCE: return (pmpi ? PMPI_Reduce : MPI_Reduce)(snd, rcv, n, c->type, MPI_SUM, root, w);
    case C_REDUCE_SCATTER_BLOCK:
        return (pmpi ? PMPI_Reduce_scatter_block : MPI_Reduce_scatter_block)(snd, rcv, n, c->type,
                                                                             MPI_SUM, w);
    case C_BCAST: return (pmpi ? PMPI_Bcast : MPI_Bcast)(rcv, n, c->type, root, w);
    case C_ALLGATHER:
        return (pmpi ? PMPI_Allgather : MPI_Allgather)(snd, n, c->type, rcv, n, c->type, w);
    case C_ALLTOALL:
        return (pmpi ? PMPI_Alltoall : MPI_Alltoall)(snd, n, c->type, rcv, n, c->type, w);
    case C_GATHER:
        return (pmpi ? PMPI_Gather : MPI_Gather)(snd, n, c->type, rcv, n, c->type, root, w);
    case C_SCATTER:
        return (pmpi ? PMPI_Scatter : MPI_Scatter)(snd, n, c->type, rcv, n, c->type, root, w);
    case C_ALLGATHERV:
        return (pmpi ? PMPI_Allgatherv : MPI_Allgatherv)(snd, n + mt_rank, c->type, rcv, c->rcounts,
                                                         c->rdispls, c->type, w);
    case C_ALLTOALLV:
        return (pmpi ? PMPI_Alltoallv : MPI_Alltoallv)(snd, c->counts, c->displs, c->type, rcv,
                                                       c->rcounts, c->rdispls, c->type, w);
    }
    return MPI_ERR_OTHER;
}

static void fill(unsigned char *p, size_t bytes, uint64_t seed)
{
    for (size_t i = 0; i < bytes; i += 4) {
        uint32_t v =
            (uint32_t)mt_rand(seed, (uint64_t)mt_rank, i) & 0xfffff; /* no overflow in sums */
        memcpy(p + i, &v, bytes - i < 4 ? bytes - i : 4);
    }
}

/* One call with this rank's buffers of kinds sk and rk, against the PMPI reference. */
static void check_call(call_t *c, int sk, int rk, uint64_t seed)
{
    unsigned char *s0, *r0, *sref, *rref, *sout, *rout;
    tbuf_t sb = {0}, rb = {0};
    int rc, rcref;

    plan(c);
    s0 = calloc(1, c->sbytes + 1);
    r0 = calloc(1, c->rbytes + 1);
    sref = calloc(1, c->sbytes + 1);
    rref = calloc(1, c->rbytes + 1);
    sout = calloc(1, c->sbytes + 1);
    rout = calloc(1, c->rbytes + 1);
    fill(s0, c->sbytes, seed);
    fill(r0, c->rbytes, seed ^ 0x5555);
    memcpy(sref, s0, c->sbytes);
    memcpy(rref, r0, c->rbytes);

    rcref = run(c, 1, c->sbytes ? sref : NULL, c->rbytes ? rref : NULL);

    if (c->sbytes) {
        tb_alloc(&sb, sk, c->sbytes);
        tb_put(&sb, s0);
    }
    if (c->rbytes) {
        tb_alloc(&rb, rk, c->rbytes);
        tb_put(&rb, r0);
    }
    /* the buffers' own devices, not the current one, must be used for the copies */
    drv_choose_device((mt_rank + 1) % ndev);
    rc = run(c, 0, c->sbytes ? sb.ptr : NULL, c->rbytes ? rb.ptr : NULL);
    drv_choose_device(mt_rank % ndev);
    if (c->sbytes) {
        tb_get(&sb, sout);
    }
    if (c->rbytes) {
        tb_get(&rb, rout);
    }
    MT_CHECK(rc == rcref, "%s n=%d root=%d %s %s send %s recv %s: rc %d, reference %d",
             coll_name[c->coll], c->n, c->root, c->tname, c->inplace ? "in place" : "",
             tb_kind_name[sk], tb_kind_name[rk], rc, rcref);
    MT_CHECK(
        memcmp(rout, rref, c->rbytes) == 0,
        "%s n=%d root=%d %s%s send %s recv %s: received bytes differ from PMPI's on host buffers",
        coll_name[c->coll], c->n, c->root, c->tname, c->inplace ? " in place" : "",
        tb_kind_name[sk], tb_kind_name[rk]);
    MT_CHECK(memcmp(sout, s0, c->sbytes) == 0,
             "%s n=%d root=%d %s%s send %s: the send buffer changed", coll_name[c->coll], c->n,
             c->root, c->tname, c->inplace ? " in place" : "", tb_kind_name[sk]);
    if (c->sbytes) {
        tb_free(&sb);
    }
    if (c->rbytes) {
        tb_free(&rb);
    }
    free(s0), free(r0), free(sref), free(rref), free(sout), free(rout);
}

/* Repeated calls on the same buffers hit the memory-kind cache (fake driver only: it counts the
 * full attribute queries). */
static void check_cache_hits(void)
{
    tbuf_t a, b;
    int in[16] = {0};
    long before, after;
    if (drv.fake_attribute_queries == NULL) {
        return;
    }
    tb_alloc(&a, TB_DEVICE, sizeof(in));
    tb_alloc(&b, TB_DEVICE, sizeof(in));
    tb_put(&a, in);
    MPI_Allreduce(a.ptr, b.ptr, 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    before = drv.fake_attribute_queries();
    for (int i = 0; i < 20; i++) {
        MPI_Allreduce(a.ptr, b.ptr, 16, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    after = drv.fake_attribute_queries();
    MT_CHECK(after == before,
             "20 allreduces on the same device buffers made %ld full attribute "
             "queries: the memory-kind cache misses",
             after - before);
    tb_free(&a);
    tb_free(&b);
}

/* Free a buffer and allocate another at the same address, on another device or as managed
 * memory, with other contents: the staging must see the new allocation (buffer id), not the
 * cached one. */
static void check_realloc(void)
{
    enum { N = 1000 };
    int data[N], out[N], expect[N];
    tbuf_t a, b;
    void *first;
    int reused;

    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            data[i] = (round + 1) * (i + mt_rank);
            expect[i] = 0;
            for (int r = 0; r < mt_size; r++) {
                expect[i] += (round + 1) * (i + r);
            }
        }
        drv_choose_device((mt_rank + round) % ndev);
        tb_alloc(&a, round == 0 || ndev > 1 ? TB_DEVICE : TB_MANAGED, sizeof(data));
        tb_alloc(&b, TB_DEVICE, sizeof(data));
        if (round == 0) {
            first = a.ptr;
        } else {
            reused = a.ptr == first;
            if (mt_rank == 0) {
                printf("realloc: the new buffer %s the freed one's address\n",
                       reused ? "reuses" : "does not reuse");
            }
        }
        tb_put(&a, data);
        MPI_Allreduce(a.ptr, b.ptr, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        tb_get(&b, out);
        MT_CHECK(memcmp(out, expect, sizeof(out)) == 0,
                 "allreduce after free and reallocation "
                 "(round %d): wrong result",
                 round);
        MPI_Bcast(a.ptr, N, MPI_INT, 0, MPI_COMM_WORLD);
        tb_get(&a, out);
        for (int i = 0; i < N; i++) {
            expect[i] = (round + 1) * i;
        }
        MT_CHECK(memcmp(out, expect, sizeof(out)) == 0,
                 "bcast after free and reallocation "
                 "(round %d): wrong result",
                 round);
        tb_free(&b);
        tb_free(&a);
    }
    drv_choose_device(mt_rank % ndev);
}

/* Invalid arguments with device buffers go to the MPI untouched: the same error class as the
 * MPI gives on its own (it rejects them before reading any buffer). */
static void check_bad_args(void)
{
    tbuf_t a, b;
    int rc, ref, cls, refcls;
    tb_alloc(&a, TB_DEVICE, 64 * sizeof(int));
    tb_alloc(&b, TB_DEVICE, 64 * sizeof(int));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int which = 0; which < 4; which++) {
        const char *what = "";
        switch (which) {
        case 0:
            what = "bcast with root = size";
            rc = MPI_Bcast(a.ptr, 16, MPI_INT, mt_size, MPI_COMM_WORLD);
            ref = PMPI_Bcast(a.ptr, 16, MPI_INT, mt_size, MPI_COMM_WORLD);
            break;
        case 1:
            what = "bcast with count -1";
            rc = MPI_Bcast(a.ptr, -1, MPI_INT, 0, MPI_COMM_WORLD);
            ref = PMPI_Bcast(a.ptr, -1, MPI_INT, 0, MPI_COMM_WORLD);
            break;
        case 2:
            if (mt_mpich_version() >= 50000) {
                continue; /* MPICH 5.0 asserts on it and exits, without picoll too */
            }
            what = "allreduce of MPI_DATATYPE_NULL";
            rc = MPI_Allreduce(a.ptr, b.ptr, 16, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
            ref = PMPI_Allreduce(a.ptr, b.ptr, 16, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
            break;
        default:
            what = "reduce with root -1";
            rc = MPI_Reduce(a.ptr, b.ptr, 16, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD);
            ref = PMPI_Reduce(a.ptr, b.ptr, 16, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD);
            break;
        }
        MPI_Error_class(rc, &cls);
        MPI_Error_class(ref, &refcls);
        MT_CHECK(ref != MPI_SUCCESS && cls == refcls,
                 "%s on device buffers: error class %d, "
                 "the MPI alone gives %d",
                 what, cls, refcls);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    tb_free(&a);
    tb_free(&b);
}

/* Staged calls from several threads at once, each on its own communicator and device buffers
 * (MPI_THREAD_MULTIPLE): per-thread memory-kind caches, one shared pinned pool. */
#define THREADS 3
typedef struct {
    MPI_Comm comm;
    int index;
    long failures;
} thread_arg_t;

static void *thread_main(void *p)
{
    thread_arg_t *t = p;
    enum { N = 4099 };
    int *in = malloc(N * sizeof(int)), *out = malloc(N * sizeof(int));
    tbuf_t a, b;
    drv_choose_device((mt_rank + t->index) % ndev);
    tb_alloc(&a, t->index % 2 ? TB_MANAGED : TB_DEVICE, N * sizeof(int));
    tb_alloc(&b, TB_DEVICE, N * sizeof(int));
    for (int iter = 0; iter < 30; iter++) {
        for (int i = 0; i < N; i++) {
            in[i] = mt_rank + i + iter * t->index;
        }
        tb_put(&a, in);
        MPI_Allreduce(a.ptr, b.ptr, N, MPI_INT, MPI_SUM, t->comm);
        MPI_Bcast(a.ptr, N, MPI_INT, iter % mt_size, t->comm);
        tb_get(&b, out);
        for (int i = 0; i < N; i++) {
            int e = mt_size * (i + iter * t->index) + mt_size * (mt_size - 1) / 2;
            t->failures += out[i] != e;
        }
        tb_get(&a, out);
        for (int i = 0; i < N; i++) {
            t->failures += out[i] != iter % mt_size + i + iter * t->index;
        }
    }
    tb_free(&a);
    tb_free(&b);
    free(in);
    free(out);
    return NULL;
}

static void check_threads(int provided)
{
    pthread_t th[THREADS];
    thread_arg_t args[THREADS];
    if (provided < MPI_THREAD_MULTIPLE) {
        if (mt_rank == 0) {
            printf("threads: skipped, the MPI does not provide MPI_THREAD_MULTIPLE\n");
        }
        return;
    }
    for (int i = 0; i < THREADS; i++) {
        args[i] = (thread_arg_t){.index = i};
        MPI_Comm_dup(MPI_COMM_WORLD, &args[i].comm);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        MT_CHECK(args[i].failures == 0, "thread %d: %ld wrong elements", i, args[i].failures);
        MPI_Comm_free(&args[i].comm);
    }
}

/* The fake driver has no kernel image for its devices: the first device allreduce on a new
 * communicator on one node tries to load picoll's kernels (once) and finds that out; the later calls are staged
 * without trying again (they used to reload the module and set the workspace up again every call). */
static void check_module_loads(void)
{
    MPI_Comm comm;
    cu_ptr_t buf = 0;
    long before, loads;
    int n = 64;
    if (drv.fake_module_loads == NULL) {
        return;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (drv.mem_alloc(&buf, (size_t)n * sizeof(int)) != 0) {
        mt_fail("cuMemAlloc of %zu bytes failed", (size_t)n * sizeof(int));
        return;
    }
    before = drv.fake_module_loads();
    for (int i = 0; i < 5; i++) {
        int *host = calloc((size_t)n, sizeof(int));
        int rc;
        for (int k = 0; k < n; k++) {
            host[k] = k + mt_rank;
        }
        drv.memcpy_htod(buf, host, (size_t)n * sizeof(int));
        rc = MPI_Allreduce(MPI_IN_PLACE, (void *)(uintptr_t)buf, n, MPI_INT, MPI_SUM, comm);
        drv.memcpy_dtoh(host, buf, (size_t)n * sizeof(int));
        for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
            long want = (long)k * mt_size + (long)mt_size * (mt_size - 1) / 2;
            if (host[k] != want) {
                mt_fail("device allreduce %d, element %d: %d, expected %ld", i, k, host[k], want);
                break;
            }
        }
        MT_CHECK(rc == MPI_SUCCESS, "device allreduce %d failed: %d", i, rc);
        free(host);
    }
    loads = drv.fake_module_loads() - before;
    /* none where the communicator spans (virtual) nodes: no device path to try */
    MT_CHECK(loads <= 1,
             "cuModuleLoadData called %ld times over 5 device allreduces on one new "
             "communicator, expected at most once (no kernel image: found at the first call)",
             loads);
    drv.mem_free(buf);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    static const int sizes[] = {1, 7, 1000, 65537};
    MPI_Datatype vec, gap, shifted;
    char why[256];
    uint64_t seed = 1;

    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_load_picoll(1);
    ndev = drv_load(why, sizeof(why));
    if (ndev == 0) {
        if (mt_rank == 0) {
            printf("SKIP: no CUDA device (%s)\n", why);
            fflush(stdout);
        }
        MPI_Finalize();
        return MT_SKIP;
    }
    drv_choose_device(mt_rank % ndev);
    MT_CHECK(query_cuda_support() == 1,
             "MPIX_Query_cuda_support() = %d under picoll with CUDA, "
             "expected 1",
             query_cuda_support());

    /* 2 ints with a 1-int hole, resized to 4 ints: holes inside and between elements */
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 4 * sizeof(int), &gap);
    MPI_Type_commit(&gap);
    /* one int 1 int after the start: a true lower bound of 4 bytes */
    int one = 1, disp = 1;
    MPI_Type_create_indexed_block(1, one, &disp, MPI_INT, &shifted);
    MPI_Type_commit(&shifted);
    const struct {
        MPI_Datatype type;
        const char *name;
    } types[] = {{MPI_INT, "int"}, {gap, "vector"}, {shifted, "shifted"}};

    for (int coll = 0; coll < C_COUNT; coll++) {
        int reduces = coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCE_SCATTER_BLOCK;
        for (int t = 0; t < (reduces ? 1 : 3); t++) {
            for (unsigned si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                if (t > 0 && sizes[si] > 1000) {
                    continue;
                }
                for (int inplace = 0; inplace < (coll == C_BCAST ? 1 : 2); inplace++) {
                    for (int root = 0; root<mt_size; root += mt_size> 1 ? mt_size - 1 : 1) {
                        call_t c = {.coll = coll,
                                    .n = sizes[si],
                                    .root = root,
                                    .inplace = inplace,
                                    .type = types[t].type,
                                    .tname = types[t].name};
                        if (coll == C_REDUCE && inplace &&
                            mt_reduce_in_place_broken(root, (size_t)sizes[si] * sizeof(int))) {
                            continue;
                        }
                        /* every (send, recv) kind pair on some rank over the cases */
                        int sk = (int)((seed + (uint64_t)mt_rank) % TB_KINDS);
                        int rk = (int)((seed / TB_KINDS + 2 * (uint64_t)mt_rank + 1) % TB_KINDS);
                        check_call(&c, sk, rk, seed++);
                    }
                }
            }
        }
    }
    check_module_loads();
    check_cache_hits();
    check_realloc();
    check_bad_args();
    check_threads(provided);
    MPI_Type_free(&gap);
    MPI_Type_free(&vec);
    MPI_Type_free(&shifted);
    return mt_finish("cuda staged");
}
