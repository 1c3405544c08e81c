/* The device executor on device buffers, checked bit for bit against plain host loops, and the
 * path picoll took checked for every call (a call that quietly fell back to the MPI also gives
 * right answers). A plain MPI program with libpicoll.so preloaded; the CUDA driver is reached
 * through dlopen (tests/cuda/drv.h), so it builds without CUDA and runs on a GPU, on the emulated
 * GPU (tests/cuda/emu) or on the strict fake (tests/cuda/fake).
 *
 *   cuda_coll --probe [N]  no MPI: prints "SKIP: no CUDA device (<reason>)" and exits 77 where
 *                          there is no usable device (or fewer than N), else exits 0 (for the
 *                          test scripts)
 *   cuda_coll matrix       every datatype x op the host reduction covers, counts around the
 *                          one-shot limit and the workspace chunk edges (-1/0/+1 element), in place
 *                          and not, at odd byte offsets inside the allocation, guard bytes before
 *                          and after every buffer; allgather and alltoall likewise; a freed and
 *                          reallocated buffer; calls from a thread that chose its device; an input
 *                          still being written on the legacy default stream when MPI_Allreduce is
 *                          called; and, where the underlying MPI takes device buffers
 *                          (MPIX_Query_cuda_support), a rank with host buffers and long double
 *                          (both fall back)
 *   cuda_coll matrix --groups G   the same with the reference reduced within groups of G ranks
 *   cuda_coll matrix --hier G   between virtual nodes of G ranks (PICOLL_VNODE_SIZE=G, 2 nodes):
 *                          the allreduce on the device hierarchy (hier_cuda; PICOLL_HIER_CUDA_MIN
 *                          0 unless set, in bytes), the reference
 *                          reduced within each node first; allgather and alltoall on the host
 *                          hierarchy, staged
 *                          first (the hybrid cube mesh's order, run on a recorded DGX-1)
 *   cuda_coll quick        a few calls of each kind (for compute-sanitizer)
 *   cuda_coll loop [S]     allreduce, allgather and alltoall, checked, for S seconds (the faults
 *                          of tests/net/hosts.sh)
 *   cuda_coll devcoll      MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Bcast, MPI_Reduce,
 *                          MPI_Allgatherv and MPI_Alltoallv likewise (tests/cuda/devcoll.c), and
 *                          their fallbacks
 *   cuda_coll devcoll-late R S  each of those with rank R's kernel S seconds late (given up on,
 *                          waited for, resumed)
 *   cuda_coll zc           the zero-copy path's end and picoll's allocator (mode_zc)
 *   cuda_coll zcmiss [--calls N] [--sizes B,...]  allreduces of fresh buffers against reused
 *                          ones, timed: an IPC cache miss's cost (mode_zcmiss)
 *   cuda_coll stall R      rank R sleeps before an allreduce: the others must end the job with
 *                          picoll's timeout error naming it
 *   the modes of tests/cuda/modes.c (issue 12's defects): rehome, thread, ptds, mixed, commfree,
 *                          finalize, ctx, twoctx, reset, crossed, capture [ptds], stall-kernel R, backlog R, late R S C
 * Options: --fast trims the matrix (one or two ops per type, fewer counts) for the larger jobs on
 * the emulated GPU; --medium keeps every op of every type but shares the counts out among a
 * type's ops (every type at every count: a third of the calls); --max-bytes N leaves out its calls
 * of more than N bytes a rank (with --fast, the largest allreduce count becomes the one just past
 * two workspace buffers where that fits); --expect-fallback: every device call must go to the underlying MPI (ranks
 * sharing a GPU without MPS, the strict fake driver); the test also expects that by itself where
 * it sees ranks share a GPU whose MPS attribute is 0. --zc: send buffers at the receive buffer's
 * offset (0, 1 or 8 bytes into the allocation: both 16-byte aligned at 0), and each call's path
 * expected to be the zero-copy one (cuda_zc) where PICOLL_CUDA_ZERO_COPY=on and the call is one it
 * takes (cases.h, want_zc); --register: the same, every device buffer registered with
 * picoll_register (PICOLL_CUDA_ZERO_COPY=registered, the default).
 *
 * Rank r uses device (local rank % device count): with more ranks than GPUs, several ranks share
 * one GPU through CUDA IPC. The thresholds the cases are built around (cases.h) are set here as
 * defaults before MPI_Init and checked. */
#include "cases.h"
#include "modes.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int my_device, ndev, fast, medium;
/* --max-bytes N: the matrix's calls of at most N bytes (a rank's buffer) */
static size_t max_bytes = SIZE_MAX;

/* ---------------------------------------------------------------- matrix */

/* Counts around the limits, in elements of esize bytes. */
size_t edge_counts(size_t esize, size_t *out)
{
    size_t n = 0;
    size_t edges[] = {ONESHOT_MAX, SLOT, 2 * SLOT};
    out[n++] = 1;
    out[n++] = 33;
    for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
        size_t c = edges[e] / esize;
        out[n++] = c - 1;
        out[n++] = c;
        out[n++] = c + 1;
    }
    out[n++] = 2 * SLOT / esize * 3 + 5;
    return n;
}

/* --fast: per type one op (a rotation over its ops; two for every third type), and the counts 1,
 * both sides of the one-shot limit, one past a workspace buffer and the largest (indices into
 * edge_counts). With --groups (the hybrid cube mesh, whose tests lift its one-shot limit out of
 * reach; 8 ranks) 1 and one past a workspace buffer only: two chunks, the second of one element. */
static int fast_keeps(size_t ti, op_t op, size_t c)
{
    static const size_t keep_all[] = {0, 3, 4, 7, 11}, keep_groups[] = {0, 7};
    const size_t *keep = groups > 0 && hier == 0 ? keep_groups : keep_all;
    size_t nkeep = groups > 0 && hier == 0 ? 2 : 5;
    int pos = 0, total = 0;
    for (op_t o = 0; o < NOPS; o++) {
        if (op_allowed(&types[ti], o)) {
            pos += o < op;
            total++;
        }
    }
    if (pos != (int)(ti % (size_t)total) &&
        !(ti % 3 == 0 && pos == (int)((ti + 1) % (size_t)total))) {
        return 0;
    }
    for (size_t k = 0; k < nkeep; k++) {
        if (keep[k] == c) {
            return 1;
        }
    }
    return 0;
}

/* --medium: every op of every type, each at a share of the counts (a type's first ops between
 * them at every count): every type at every edge, every pair of type and op, in a third of the
 * full matrix's calls. */
static int medium_keeps(size_t ti, op_t op, size_t c)
{
    int pos = 0, total = 0;
    for (op_t o = 0; o < NOPS; o++) {
        if (op_allowed(&types[ti], o)) {
            pos += o < op;
            total++;
        }
    }
    int share = total < 3 ? total : 3;
    return (c + (size_t)pos) % (size_t)share == 0;
}

static void matrix_allreduce(void)
{
    size_t counts[16];
    for (size_t ti = 0; ti < ntypes; ti++) {
        const type_t *t = &types[ti];
        size_t nc = edge_counts(t->size, counts);
        for (op_t op = 0; op < NOPS; op++) {
            if (!op_allowed(t, op)) {
                continue;
            }
            for (size_t c = 0; c < nc; c++) {
                size_t count = counts[c];
                /* --fast with --max-bytes: a largest count that does not fit gives its place to
                 * the one just past two workspace buffers (three chunks: a slot's parity used
                 * again within the call) where that fits */
                if (fast && c == nc - 1 && count * t->size > max_bytes &&
                    counts[c - 1] * t->size <= max_bytes) {
                    count = counts[c - 1];
                }
                if ((fast && !fast_keeps(ti, op, c)) || (medium && !medium_keeps(ti, op, c)) ||
                    count * t->size > max_bytes) {
                    continue;
                }
                /* every placement for the edges, a rotation of them elsewhere */
                int k = (int)(c + (size_t)op);
                allreduce_case((int)ti, t, op, count, k & 1,
                               (size_t)(k % 3 == 0   ? 0
                                        : k % 3 == 1 ? 1
                                                     : 8));
            }
        }
    }
}

static void matrix_blocks(void)
{
    size_t piece = SLOT / (size_t)mt_size / 16 * 16; /* alltoall chunk per peer */
    size_t blocks[] = {1,        7,         4096,  SLOT - 1,  SLOT,
                       SLOT + 1, piece - 1, piece, piece + 1, 2 * SLOT + 3};
    for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
        if ((fast && b % 2 == 1) || blocks[b] > max_bytes) {
            continue;
        }
        for (int a = 0; a < 2; a++) {
            blocks_case(a, blocks[b], (int)(b & 1), b % 3 == 0 ? 0 : 1 + b);
        }
    }
}

/* The same buffer freed and allocated again (most likely at the same address) between calls. */
static void realloc_case(void)
{
    for (int k = 0; k < 3; k++) {
        allreduce_case(T_INT32, &types[T_INT32], SUM, 1000 + (size_t)k, 0, 0);
        allreduce_case(T_INT32, &types[T_INT32], SUM, 1000 + (size_t)k, 1, 0);
    }
}

/* A thread that chooses its device itself (a fresh thread has no current context). */
static void *chooser_main(void *arg)
{
    (void)arg;
    drv_choose_device(my_device);
    for (int k = 0; k < 4; k++) {
        allreduce_case(T_DOUBLE, &types[T_DOUBLE], SUM, 3000 + (size_t)k * 1000, k & 1, (size_t)k);
    }
    return NULL;
}

static void chooser_case(void)
{
    pthread_t th;
    if (pthread_create(&th, NULL, chooser_main, NULL) != 0) {
        mt_fail("pthread_create failed");
        return;
    }
    pthread_join(th, NULL);
}

static void slow_host_fn(void *arg)
{
    usleep(*(const unsigned *)arg);
}

/* The input is written on the legacy default stream, behind 0.3 s of other work, and
 * MPI_Allreduce is called without synchronising: picoll must wait for it. */
static void default_stream_case(void)
{
    static const size_t need[] = {DRV_FIELD(launch_host_func), DRV_FIELD(memcpy_htod_async),
                                  DRV_FIELD(mem_host_alloc), DRV_FIELD(mem_free_host)};
    static const unsigned delay_us = 300000;
    const char *lacks = drv_lacks(need, 4);
    size_t count = 20000, bytes = count * sizeof(int32_t);
    int32_t *host_in, *got = malloc(bytes);
    dbuf_t sb, rb;

    if (lacks != NULL) {
        if (mt_rank == 0) {
            printf("note: default-stream case not run: the driver lacks %s\n", lacks);
        }
        free(got);
        return;
    }
    CK(drv.mem_host_alloc((void **)&host_in, bytes, CU_MEMHOSTALLOC_PORTABLE));
    for (size_t i = 0; i < count; i++) {
        host_in[i] = (int32_t)(i * 7 + (size_t)mt_rank);
    }
    dbuf_alloc(&sb, bytes, 0, 0);
    dbuf_alloc(&rb, bytes, 0, 0);
    CK(drv.ctx_synchronize());
    CK(drv.launch_host_func(NULL, slow_host_fn, (void *)&delay_us));
    CK(drv.memcpy_htod_async((cu_ptr_t)(uintptr_t)sb.p, host_in, bytes, NULL));
    call_allreduce(sb.p, rb.p, count, MPI_INT32_T, MPI_SUM, want_allreduce(&types[T_INT32], bytes),
                   "MPI_Allreduce MPI_INT32_T SUM (input written on the legacy stream)");
    MT_CHECK(dbuf_read(&rb, got), "default stream: guard bytes overwritten");
    for (size_t i = 0; i < count; i++) {
        int32_t want = 0;
        for (int r = 0; r < mt_size; r++) {
            want += (int32_t)(i * 7 + (size_t)r);
        }
        if (got[i] != want) {
            mt_fail("default stream: element %zu is %d, expected %d (input not waited for)", i,
                    got[i], want);
            break;
        }
    }
    dbuf_free(&sb);
    dbuf_free(&rb);
    CK(drv.mem_free_host(host_in));
    free(got);
    ncases++;
}

/* A rank with host buffers among device ones, and long double (no device arithmetic): both fall
 * back, so they need an MPI that takes device buffers (picoll's staging makes one). */
static void fallback_cases(void)
{
    if (!fallback_takes_device_buffers()) {
        if (mt_rank == 0) {
            printf("note: mixed host/device and long double cases not run: the underlying MPI "
                   "does not take device buffers (MPIX_Query_cuda_support)\n");
        }
        return;
    }
    allreduce_case(99, &type_long_double, SUM, 777, 0, 0);
    for (size_t ti = 0; ti < ntypes; ti += 5) {
        if (types[ti].kind == K_F16 || types[ti].kind == K_BF16) {
            continue; /* picoll hands these to the MPI with a host user op: not on device buffers */
        }
        ar_case_t c = {.ti = (int)ti,
                       .t = &types[ti],
                       .count = 5000,
                       .exact = 1,
                       .op = op_allowed(&types[ti], SUM) ? SUM : BXOR,
                       .mem = mt_rank == mt_size - 1 ? MEM_HOST : MEM_DEVICE};
        ar_prepare(&c);
        ar_call(&c, want_staged_allreduce());
        ar_check(&c);
    }
}

static int mode_matrix(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    matrix_allreduce();
    matrix_blocks();
    realloc_case();
    chooser_case();
    default_stream_case();
    fallback_cases();
    if (mt_rank == 0) {
        printf("cuda_coll: %llu cases on %d ranks, %d device(s)%s\n", ncases, mt_size, ndev,
               fast     ? " (--fast)"
               : medium ? " (--medium)"
                        : "");
    }
    return mt_finish("cuda_coll matrix");
}

/* One call of each kind, for the slow sanitizer runs of tests/cuda/run-gpu.sh. */
static int mode_quick(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    allreduce_case(T_FLOAT, &types[T_FLOAT], SUM, 33, 0, 1);
    allreduce_case(T_DOUBLE, &types[T_DOUBLE], PROD, 2 * SLOT / 8 + 3, 1, 0);
    allreduce_case(T_INT8, &types[T_INT8], BXOR, SLOT + 5, 0, 8);
    blocks_case(0, 4099, 0, 3);
    blocks_case(1, 4099, 1, 0);
    return mt_finish("cuda_coll quick");
}

/* loop S: allreduce (several chunks), allgather and alltoall on device buffers, each checked,
 * until rank 0 has run S seconds; "loop running" once 10 rounds have passed (tests/net/hosts.sh
 * starts its fault there), then the longest round. */
static int mode_loop(int argc, char **argv)
{
    double secs = argc > 2 ? atof(argv[2]) : 10.0, start = MPI_Wtime(), longest = 0.0;
    long it;
    for (it = 0;; it++) {
        double t0 = MPI_Wtime();
        int stop = mt_rank == 0 && t0 - start > secs, any;
        MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            break;
        }
        allreduce_case(T_FLOAT, &types[T_FLOAT], SUM, 2 * SLOT / 4 * 3 + 5, (int)(it & 1), 0);
        blocks_case(0, SLOT + 100, 0, 0);
        blocks_case(1, SLOT + 100, 0, 0);
        longest = MPI_Wtime() - t0 > longest ? MPI_Wtime() - t0 : longest;
        if (it == 10 && mt_rank == 0) {
            printf("cuda_coll loop: loop running\n");
            fflush(stdout);
        }
    }
    if (mt_rank == 0) {
        printf("cuda_coll loop: %ld rounds, the longest took %.1f s\n", it, longest);
    }
    return mt_finish("cuda_coll loop");
}

/* Rank R sleeps before an allreduce (after a first one made the workspace): the others must end
 * the job with picoll's timeout error naming it. */
static int mode_stall(int argc, char **argv)
{
    int victim = argc > 2 ? atoi(argv[2]) : 1;
    dbuf_t b;
    dbuf_alloc(&b, 4096, 0, 0);
    call_allreduce(MPI_IN_PLACE, b.p, 1024, MPI_INT, MPI_SUM, want_allreduce(&types[T_INT32], 4096),
                   "set-up allreduce");
    if (mt_rank == victim) {
        sleep(30);
    }
    call_allreduce(MPI_IN_PLACE, b.p, 1024, MPI_INT, MPI_SUM, NULL, "stalled allreduce");
    dbuf_free(&b);
    return mt_finish("cuda_coll stall");
}

/* ---------------------------------------------------------------- zero-copy */

static volatile int hog_on;
static void *hog_main(void *arg)
{
    (void)arg;
    while (hog_on) {
    }
    return NULL;
}

/* SIGALRM in mode_zc: picoll_register waited for the other ranks */
static void register_hung(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL [rank 0] picoll_register did not return within 20 s while "
                              "the other ranks waited in a barrier: it waited for them\n";
    if (write(1, msg, sizeof(msg) - 1) < 0) {
        _exit(1);
    }
    _exit(1);
}

/* The zero-copy path's end and picoll's allocator (issue 50): allgathers of 96 KiB blocks from
 * buffers of picoll_cuda_alloc (registered: PICOLL_CUDA_ZERO_COPY=registered, the default, takes
 * them), each checked to take cuda_zc; the last rank's process spins a thread beside its call (its
 * kernel reads slower) and every rank frees its send buffer (picoll_cuda_free) the moment the
 * call returns: a rank that returned before every peer finished reading its buffer is caught by
 * the emulated GPU (freed-mapping, with FAKECUDA_FREE_MAPPED=1). Then a buffer of the allocator
 * reused at once by a second call, and the results bit for bit. */
static int mode_zc(int argc, char **argv)
{
    (void)argc, (void)argv;
    void *(*alloc)(ssize_t, int, void *);
    void (*release)(void *, ssize_t, int, void *);
    *(void **)&alloc = dlsym(RTLD_DEFAULT, "picoll_cuda_alloc");
    *(void **)&release = dlsym(RTLD_DEFAULT, "picoll_cuda_free");
    MT_CHECK(alloc != NULL && release != NULL, "picoll_cuda_alloc is not in the process");
    const size_t block = 96 << 10, total = block * (size_t)mt_size;
    unsigned char *in = malloc(block), *got = malloc(total), *want = malloc(total);
    /* the registration API's refusals, each an MPI error code (and a warning) */
    int (*reg)(MPI_Comm, void *, size_t, void **);
    int (*dereg)(void *);
    *(void **)&reg = dlsym(RTLD_DEFAULT, "picoll_register");
    *(void **)&dereg = dlsym(RTLD_DEFAULT, "picoll_deregister");
    MT_CHECK(reg != NULL && dereg != NULL, "picoll_register is not in the process");
    void *h = NULL, *host = malloc(4096);
    char *dev = alloc(4096, my_device, NULL);
    MT_CHECK(reg(test_comm, NULL, 64, &h) == MPI_ERR_ARG, "picoll_register(NULL) not MPI_ERR_ARG");
    MT_CHECK(reg(test_comm, dev, 0, &h) == MPI_ERR_ARG, "picoll_register of 0 bytes accepted");
    MT_CHECK(reg(test_comm, host, 4096, &h) == MPI_ERR_ARG, "host memory registered");
    MT_CHECK(reg(test_comm, dev + 4000, 4096, &h) == MPI_ERR_ARG,
             "a range past its allocation's end registered");
    MT_CHECK(reg(MPI_COMM_NULL, dev + 16, 256, &h) == MPI_SUCCESS, "picoll_register failed");
    MT_CHECK(dereg(h) == MPI_SUCCESS, "picoll_deregister failed");
    MT_CHECK(dereg(h) == MPI_ERR_ARG, "a range deregistered twice");
    MT_CHECK(dereg(&h) == MPI_ERR_ARG, "picoll_deregister of a stranger's pointer accepted");
    release(dev, 4096, my_device, NULL);
    free(host);
    /* no call before: the first, which makes the communicator's workspace, takes the path too
     * (the ranks describe their buffers after the workspace's set-up, in one more barrier) */
    for (int round = 0; round < 6; round++) {
        for (size_t i = 0; i < block; i++) {
            in[i] = (unsigned char)(i * 13 + (size_t)mt_rank * 7 + (size_t)round);
        }
        for (int r = 0; r < mt_size; r++) {
            for (size_t i = 0; i < block; i++) {
                want[(size_t)r * block + i] =
                    (unsigned char)(i * 13 + (size_t)r * 7 + (size_t)round);
            }
        }
        char *sb = alloc((ssize_t)block, my_device, NULL),
             *rb = alloc((ssize_t)total, my_device, NULL);
        MT_CHECK(sb != NULL && rb != NULL, "picoll_cuda_alloc of %zu bytes failed", total);
        CK(drv.memcpy_htod((cu_ptr_t)(uintptr_t)sb, in, block));
        pthread_t hog;
        int hogging = mt_rank == mt_size - 1 && pthread_create(&hog, NULL, hog_main, NULL) == 0;
        hog_on = hogging;
        call_blocks(0, sb, rb, block, "cuda_zc", "MPI_Allgather from picoll_cuda_alloc");
        release(sb, (ssize_t)block, my_device, NULL); /* at once: the peers must be done with it */
        if (hogging) {
            hog_on = 0;
            pthread_join(hog, NULL);
        }
        /* the receive buffer again at once, in place */
        call_blocks(0, MPI_IN_PLACE, rb, block, "cuda_zc", "MPI_Allgather in place, reused");
        CK(drv.memcpy_dtoh(got, (cu_ptr_t)(uintptr_t)rb, total));
        release(rb, (ssize_t)total, my_device, NULL);
        MT_CHECK(memcmp(got, want, total) == 0, "zero-copy allgather round %d: wrong bytes", round);
        ncases++;
    }
    /* nothing registered anywhere (PICOLL_CUDA_ZERO_COPY=registered): the calls that could take
     * the path skip its vote more and more (cuda_dev.h, picoll_cuda_zc_skip_t): 24 allgathers of
     * plain device buffers pass far fewer host barriers than calls (a vote each: 24); then
     * buffers of the allocator take the path again within the longest skip */
    unsigned long long (*barriers)(void);
    *(void **)&barriers = dlsym(RTLD_DEFAULT, "picoll_test_shm_barriers");
    MT_CHECK(barriers != NULL, "picoll_test_shm_barriers is not in the process");
    dbuf_t ps, pr;
    dbuf_alloc(&ps, block, 0, 0);
    dbuf_alloc(&pr, total, 0, 0);
    unsigned long long b0 = barriers();
    for (int k = 0; k < 24; k++) {
        call_blocks(0, ps.p, pr.p, block, "cuda_ipc", "MPI_Allgather of plain buffers");
    }
    unsigned long long votes = barriers() - b0;
    MT_CHECK(votes >= 1 && votes <= 6,
             "24 allgathers with nothing registered passed %llu host barriers (want 1 to 6: the "
             "zero-copy vote skipped)",
             votes);
    dbuf_free(&ps);
    dbuf_free(&pr);
    char *sb = alloc((ssize_t)block, my_device, NULL), *rb = alloc((ssize_t)total, my_device, NULL);
    int k = 0;
    const char *(*last)(void);
    *(void **)&last = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    for (; k < 2 * 64 + 2; k++) {
        MT_CHECK(MPI_Allgather(sb, (int)block, MPI_BYTE, rb, (int)block, MPI_BYTE, test_comm) ==
                     MPI_SUCCESS,
                 "MPI_Allgather after registering");
        if (last != NULL && strcmp(last(), "cuda_zc") == 0) {
            break;
        }
    }
    MT_CHECK(k <= 64,
             "registered buffers took the zero-copy path only after %d calls (want at "
             "most 64, the longest skip)",
             k);
    release(sb, (ssize_t)block, my_device, NULL);
    release(rb, (ssize_t)total, my_device, NULL);
    if (mt_rank == 0) {
        printf("cuda_coll zc: nothing registered: %llu host barriers in 24 calls; registered: the "
               "path again after %d calls\n",
               votes, k);
    }
    /* picoll_register is local: rank 0 registers for a communicator no call has used yet (its
     * context not made), while the others wait for it in a barrier of the world; a registration
     * that made the context (collective) would wait for them: a hang, ended by the alarm */
    long (*ranges)(void);
    *(void **)&ranges = dlsym(RTLD_DEFAULT, "picoll_test_zc_ranges");
    MT_CHECK(ranges != NULL, "picoll_test_zc_ranges is not in the process");
    MPI_Comm world = test_comm, d;
    dbuf_t rs, rr;
    dbuf_alloc(&rs, block, 0, 0);
    dbuf_alloc(&rr, total, 0, 0);
    void *hs = NULL, *hr = NULL;
    MPI_Comm_dup(world, &d);
    long before = ranges != NULL ? ranges() : 0;
    if (mt_rank == 0) {
        signal(SIGALRM, register_hung);
        alarm(20);
        MT_CHECK(reg(d, rs.p, block, &hs) == MPI_SUCCESS, "picoll_register for a dup failed");
        alarm(0);
    }
    PMPI_Barrier(world);
    if (mt_rank != 0) {
        MT_CHECK(reg(d, rs.p, block, &hs) == MPI_SUCCESS, "picoll_register for a dup failed");
    }
    MT_CHECK(reg(d, rr.p, total, &hr) == MPI_SUCCESS, "picoll_register for a dup failed");
    test_comm = d;
    call_blocks(0, rs.p, rr.p, block, "cuda_zc", "MPI_Allgather of ranges registered for it");
    /* the ranges end with their communicator: none is counted once it is freed, and a
     * communicator made after copies the same buffers; the handles still deregister, once */
    MT_CHECK(ranges == NULL || ranges() == before + 2, "%ld ranges registered, expected %ld",
             ranges != NULL ? ranges() : 0L, before + 2);
    MPI_Comm_free(&d);
    MT_CHECK(ranges == NULL || ranges() == before,
             "%ld ranges still registered after their communicator was freed (expected %ld)",
             ranges != NULL ? ranges() : 0L, before);
    MPI_Comm_dup(world, &d);
    test_comm = d;
    call_blocks(0, rs.p, rr.p, block, "cuda_ipc",
                "MPI_Allgather on a new communicator, of ranges registered for a freed one");
    test_comm = world;
    MPI_Comm_free(&d);
    MT_CHECK(dereg(hs) == MPI_SUCCESS && dereg(hr) == MPI_SUCCESS,
             "the handles of ranges whose communicator was freed do not deregister");
    MT_CHECK(dereg(hs) == MPI_ERR_ARG, "a range deregistered twice");
    dbuf_free(&rs);
    dbuf_free(&rr);
    free(in);
    free(got);
    free(want);
    return mt_finish("cuda_coll zc");
}

/* zcmiss [--calls N] [--sizes B,B,...]: what a miss of the zero-copy path's IPC cache costs
 * against the copy it saves (issue 50; lease step zcmiss runs it with PICOLL_CUDA_ZERO_COPY=on,
 * reused and off, turn about). For each size (bytes of a float sum; default 1M,4M,16M,64M): N
 * allreduces of fresh buffers (allocated before, freed after each call: every peer's mapping a
 * miss where the path is on), then N of the same buffers (hits after the first); each call alone
 * between two barriers, its time the slowest rank's, the median printed per kind. Every call's
 * path checked (want_zc; mode reused: a call of buffers met for the first time copies, so fresh
 * buffers always, reused ones at their first call) and every result against a plain loop. Where
 * the emulated GPU counts driver calls, the handles and opens of each kind are checked too. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double zcmiss_call(dbuf_t *sb, dbuf_t *rb, size_t n, float *h, float *got, int round,
                          const char *what, int first_seen)
{
    size_t bytes = n * sizeof(float);
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)((i * 7 + (size_t)mt_rank * 3 + (size_t)round) % 61);
    }
    dbuf_put(sb, 0, h, bytes);
    MPI_Barrier(test_comm);
    double t0 = MPI_Wtime();
    int rc = MPI_Allreduce(sb->p, rb->p, (int)n, MPI_FLOAT, MPI_SUM, test_comm);
    double dt = MPI_Wtime() - t0, slowest = dt;
    MT_CHECK(rc == MPI_SUCCESS, "zcmiss %s allreduce of %zu bytes: MPI error %d", what, bytes, rc);
    const char *copy = want_allreduce(&types[T_FLOAT], bytes);
    check_path(what, n, first_seen ? copy : want_zc(copy, 0, sb->p, rb->p, bytes));
    MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, test_comm);
    dbuf_get(rb, 0, got, bytes);
    for (size_t i = 0; i < n; i++) {
        float want = 0; /* small integers: exact in any order */
        for (int r = 0; r < mt_size; r++) {
            want += (float)((i * 7 + (size_t)r * 3 + (size_t)round) % 61);
        }
        if (got[i] != want) {
            mt_fail("zcmiss %s allreduce of %zu bytes, round %d: element %zu is %g, want %g", what,
                    bytes, round, i, (double)got[i], (double)want);
            break;
        }
    }
    ncases++;
    return slowest;
}

/* The calls of the driver entry point fn so far, where the emulated GPU counts them; else -1. */
static long driver_calls(const char *fn)
{
    int (*counts)(long *, int);
    const char *(*name)(int);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD); /* the driver loaded (drv.c) */
    if (lib == NULL) {
        return -1;
    }
    *(void **)&counts = dlsym(lib, "fakecuda_call_counts");
    *(void **)&name = dlsym(lib, "fakecuda_call_name");
    dlclose(lib);
    long c[512];
    int n = counts != NULL && name != NULL ? counts(c, 512) : 0;
    for (int i = 0; i < n && i < 512; i++) {
        if (strcmp(name(i), fn) == 0) {
            return c[i];
        }
    }
    return -1;
}

/* One kind of zcmiss's calls (fresh: new buffers at every call; else the same two); the median
 * time (us), this rank's cuIpcGetMemHandle and cuIpcOpenMemHandle in them (-1: not counted), and
 * *zc: whether calls of buffers met before take the path (want_zc). */
static double zcmiss_kind(size_t n, int calls, int fresh, int reused_mode, float *h, float *got,
                          double *t, long *handles, long *opens, int *zc)
{
    const char *what = fresh ? "fresh buffers" : "reused buffers";
    long h0 = driver_calls("cuIpcGetMemHandle"), o0 = driver_calls("cuIpcOpenMemHandle_v2");
    dbuf_t sb, rb;
    for (int k = 0; k < calls; k++) {
        if (fresh || k == 0) {
            dbuf_alloc(&sb, n * sizeof(float), 0, 0);
            dbuf_alloc(&rb, n * sizeof(float), 0, 0);
        }
        const char *copy = want_allreduce(&types[T_FLOAT], n * sizeof(float));
        *zc = copy != NULL && strcmp(want_zc(copy, 0, sb.p, rb.p, n * sizeof(float)), copy) != 0;
        t[k] = zcmiss_call(&sb, &rb, n, h, got, (fresh ? 0 : calls) + k, what,
                           reused_mode && (fresh || k == 0));
        if (fresh || k == calls - 1) {
            dbuf_free(&sb);
            dbuf_free(&rb);
        }
    }
    long h1 = driver_calls("cuIpcGetMemHandle"), o1 = driver_calls("cuIpcOpenMemHandle_v2");
    *handles = h0 >= 0 && h1 >= 0 ? h1 - h0 : -1;
    *opens = o0 >= 0 && o1 >= 0 ? o1 - o0 : -1;
    qsort(t, (size_t)calls, sizeof(double), cmp_double);
    return t[calls / 2] * 1e6;
}

static int mode_zcmiss(int argc, char **argv)
{
    int calls = 20;
    const char *sizes = "1M,4M,16M,64M";
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--calls") == 0) {
            calls = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--sizes") == 0) {
            sizes = argv[i + 1];
        }
    }
    MT_CHECK(calls >= 1 && calls <= 1000, "zcmiss: --calls %d (1 to 1000)", calls);
    double *t = malloc(sizeof(double) * (size_t)calls);
    /* the workspace first (a call finds no zero-copy path before it has one) */
    dbuf_t w;
    dbuf_alloc(&w, 4096, 0, 0);
    call_allreduce(MPI_IN_PLACE, w.p, 1024, MPI_INT, MPI_SUM, want_allreduce(&types[T_INT32], 4096),
                   "set-up allreduce");
    dbuf_free(&w);
    const char *env = getenv("PICOLL_CUDA_ZERO_COPY");
    const char *mode = env != NULL ? env : "registered";
    int on = strcmp(mode, "on") == 0, reused = strcmp(mode, "reused") == 0;
    for (const char *at = sizes; *at != '\0';) {
        char *end;
        size_t bytes = strtoul(at, &end, 10);
        bytes <<= *end == 'M' ? 20 : *end == 'k' ? 10 : 0;
        end += *end == 'M' || *end == 'k';
        at = *end == ',' ? end + 1 : end;
        size_t n = bytes / sizeof(float);
        MT_CHECK(n > 0 && (*end == ',' || *end == '\0'), "zcmiss: --sizes %s", sizes);
        if (n == 0) {
            break;
        }
        float *h = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
        long handles[2], opens[2];
        int zc = 0;
        double fresh = zcmiss_kind(n, calls, 1, reused, h, got, t, &handles[0], &opens[0], &zc);
        double same = zcmiss_kind(n, calls, 0, reused, h, got, t, &handles[1], &opens[1], &zc);
        if (mt_rank == 0) {
            printf("cuda_coll zcmiss: %zu bytes, PICOLL_CUDA_ZERO_COPY=%s: fresh buffers %.1f "
                   "us/call, reused %.1f us/call (median of %d, the slowest rank's)\n",
                   bytes, mode, fresh, same, calls);
        }
        /* the driver calls (the emulated GPU counts them): the owner describes its buffers at
         * every call of modes on and reused, their IPC handles once (two allocations: the send and
         * the receive buffer), kept after (cuda_ipc_cache.c); a two-shot maps both of every peer.
         * Mode reused: buffers met once cost no handle and no open */
        if (handles[1] >= 0 && opens[1] >= 0 && (on || reused) && zc) {
            long peers = mt_size - 1;
            MT_CHECK(handles[1] <= 2,
                     "zcmiss: %ld cuIpcGetMemHandle in %d calls of the same two buffers (want at "
                     "most 2: their handles kept)",
                     handles[1], calls);
            MT_CHECK(!reused || calls < 2 || (handles[1] == 2 && opens[1] == 2 * peers),
                     "zcmiss: mode reused, %d calls of the same two buffers: %ld "
                     "cuIpcGetMemHandle and %ld cuIpcOpenMemHandle (want 2 and %ld: both "
                     "buffers of every rank mapped once, at the second call)",
                     calls, handles[1], opens[1], 2 * peers);
            MT_CHECK(!reused || (handles[0] == 0 && opens[0] == 0),
                     "zcmiss: mode reused, %d calls of fresh buffers: %ld cuIpcGetMemHandle and "
                     "%ld cuIpcOpenMemHandle (want none: a buffer met once is copied)",
                     calls, handles[0], opens[0]);
            MT_CHECK(!on || opens[0] >= (long)calls * 2 * peers,
                     "zcmiss: mode on, %d calls of fresh buffers: %ld cuIpcOpenMemHandle (want "
                     "%ld: every peer's buffers opened at every call)",
                     calls, opens[0], (long)calls * 2 * peers);
            if (mt_rank == 0) {
                printf("cuda_coll zcmiss: %zu bytes: rank 0's cuIpcGetMemHandle / "
                       "cuIpcOpenMemHandle: %ld / %ld in %d calls of fresh buffers, %ld / %ld in "
                       "%d calls of the same buffers\n",
                       bytes, handles[0], opens[0], calls, handles[1], opens[1], calls);
            }
        }
        free(h);
        free(got);
    }
    free(t);
    return mt_finish("cuda_coll zcmiss");
}

/* ---------------------------------------------------------------- main */

int fallback_takes_device_buffers(void)
{
    int (*query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    return query != NULL && query();
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    int chooses_device; /* the mode makes its device current itself */
} modes[] = {
    {"matrix", mode_matrix, 0},
    {"quick", mode_quick, 0},
    {"loop", mode_loop, 0},
    {"stall", mode_stall, 0},
    {"rehome", mode_rehome, 1},
    {"thread", mode_thread, 0},
    {"ptds", mode_ptds, 0},
    {"mixed", mode_mixed, 0},
    {"commfree", mode_commfree, 0},
    {"finalize", mode_finalize, 0},
    {"ctx", mode_ctx, 0},
    {"twoctx", mode_twoctx, 0},
    {"reset", mode_reset, 0},
    {"crossed", mode_crossed, 0},
    {"capture", mode_capture, 0},
    {"stall-kernel", mode_stall_kernel, 0},
    {"backlog", mode_backlog, 0},
    {"late", mode_late, 0},
    {"devcoll", mode_devcoll, 0},
    {"devcoll-late", mode_devcoll_late, 0},
    {"zc", mode_zc, 0},
    {"zcmiss", mode_zcmiss, 0},
    {"shuffle", mode_shuffle, 0},
};

/* The thresholds the cases are built around (cases.h): defaults here, and any other value set
 * from outside is a failure rather than a wrong expectation on every call. */
static const char *const thresholds[][2] = {
    {"PICOLL_WORKSPACE_SIZE", "128k"}, {"PICOLL_NVLINK_ONESHOT_MAX", "4k"},
    {"PICOLL_PCIE_ONESHOT_MAX", "1G"}, {"PICOLL_PCIE_IPC_MAX", "1G"},
    {"PICOLL_HCM_ONESHOT_MAX", "1G"},
};
#define NTHRESHOLDS (sizeof(thresholds) / sizeof(thresholds[0]))

static void thresholds_set(void)
{
    for (size_t i = 0; i < NTHRESHOLDS; i++) {
        setenv(thresholds[i][0], thresholds[i][1], 0);
    }
}

static void thresholds_check(void)
{
    for (size_t i = 0; i < NTHRESHOLDS; i++) {
        const char *v = getenv(thresholds[i][0]);
        MT_CHECK(v != NULL && strcmp(v, thresholds[i][1]) == 0,
                 "%s=%s: this test's cases are built for %s=%s", thresholds[i][0], v ? v : "",
                 thresholds[i][0], thresholds[i][1]);
    }
}

/* Ranks that share a GPU without MPS: picoll must not run kernels across their time-sliced
 * contexts, so every device call falls back. */
static void timeslice_detect(int local_size)
{
    int mps = 0, all_mps = 0;
    cu_device_t dev;
    if (local_size <= ndev) {
        return;
    }
    if (drv.device_get_attribute != NULL && drv.device_get(&dev, my_device) == 0 &&
        drv.device_get_attribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev) != 0) {
        mps = 0; /* an older driver does not know the attribute: no MPS, as picoll assumes */
    }
    PMPI_Allreduce(&mps, &all_mps, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_mps) {
        expect_fallback = 1;
        if (mt_rank == 0) {
            printf("note: %d ranks share %d GPU(s) without MPS: every device call must fall "
                   "back\n",
                   local_size, ndev);
        }
    }
}

static int probe(int argc, char **argv)
{
    char why[256] = "";
    int need = argc > 2 ? atoi(argv[2]) : 1, found = drv_load(why, sizeof(why));
    if (!found) {
        printf("SKIP: no CUDA device (%s)\n", why);
        return MT_SKIP;
    }
    if (found < need) {
        printf("SKIP: needs %d GPUs (found %d)\n", need, found);
        return MT_SKIP;
    }
    return 0;
}

int main(int argc, char **argv)
{
    char why[256] = "";
    int provided, all_have, local, local_size;
    const char *mode = argc > 1 ? argv[1] : "matrix";
    size_t m;
    MPI_Comm node;

    if (strcmp(mode, "--probe") == 0) {
        return probe(argc, argv);
    }
    groups = atoi(mt_option(argc, argv, "--groups", "0"));
    hier = atoi(mt_option(argc, argv, "--hier", "0"));
    groups = hier > 0 ? hier : groups;
    if (hier > 0) {
        /* every size on the device hierarchy unless the caller says otherwise (want_allreduce
         * follows the value) */
        setenv("PICOLL_HIER_CUDA_MIN", "0", 0);
    }
    fast = mt_flag(argc, argv, "--fast");
    medium = mt_flag(argc, argv, "--medium");
    max_bytes = (size_t)strtoull(mt_option(argc, argv, "--max-bytes", "0"), NULL, 0);
    if (max_bytes == 0) {
        max_bytes = SIZE_MAX;
    }
    expect_fallback = mt_flag(argc, argv, "--expect-fallback");
    zc_register = mt_flag(argc, argv, "--register");
    zc_aligned = mt_flag(argc, argv, "--zc") || zc_register;
    thresholds_set();
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    mt_load_picoll(1);
    path_init();
    thresholds_check();
    MT_CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    ndev = drv_load(why, sizeof(why));
    PMPI_Allreduce(&(int){ndev > 0}, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_have) {
        if (mt_rank == 0) {
            printf("SKIP: no CUDA device (%s)\n", why[0] ? why : "on another rank");
        }
        MPI_Finalize();
        return MT_SKIP;
    }
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mt_rank, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &local);
    PMPI_Comm_size(node, &local_size);
    PMPI_Comm_free(&node);
    my_device = local % ndev;
    for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        if (strcmp(mode, modes[m].name) == 0) {
            break;
        }
    }
    if (m == sizeof(modes) / sizeof(modes[0])) {
        mt_fail("unknown mode %s", mode);
        return mt_finish("cuda_coll");
    }
    timeslice_detect(local_size);
    if (!modes[m].chooses_device) {
        drv_choose_device(my_device);
    }
    return modes[m].run(argc, argv);
}
