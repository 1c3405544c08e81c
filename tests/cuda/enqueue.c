/* Stream-ordered calls (MPIX_Stream, MPIX_*_enqueue: pmpi/stream*.c) on the emulated GPU or a real
 * one, with libpicoll.so preloaded.
 *
 * One stream communicator on a CUDA stream of the test's own; on it, with nothing synchronised
 * in between:
 *   - allreduce rounds whose input the stream itself writes just before the enqueue (an
 *     asynchronous copy) and overwrites just after (an asynchronous memset): the call must see
 *     the first and not the second, both ways of stream order;
 *   - in place allreduce, allgather, alltoall, reduce_scatter_block, bcast from the last rank,
 *     send/recv between ranks 0 and 1, isend/irecv between them completed by one waitall (the
 *     send buffer overwritten on the stream right after the isend), an allreduce of host
 *     buffers;
 * all queued while rank 0's stream is held by a host function that waits for the main thread to
 * finish enqueuing (so an enqueue that waited for its stream would never return), then one
 * stream synchronise, and every output compared with a plain loop's result. Also a second stream
 * communicator on a second stream whose calls each rank enqueues in another interleaving with the
 * first (one progress thread per stream: no rank waits for another's order across streams), the
 * enqueues counted (no stream or context synchronise among the driver calls they made, on the
 * emulated GPU; and no cuStreamWaitValue64 but for the calls the progress threads run), the
 * counts of picoll_stream_query (every collective on picoll's kernels on the stream, those of host
 * buffers too; point-to-point ones staged), allreduces on stream communicators of the legacy
 * stream and the per-thread stream (on picoll's kernels there too), the collectives of a stream
 * communicator of MPI_COMM_SELF (a copy on the stream or nothing: no kernel, no staging), and the
 * errors: an enqueue on a communicator without a stream, a stream of an unknown type, a bad
 * stream handle.
 * --staged: run with PICOLL_STREAM_KERNELS=0: every device buffer is staged on the stream for
 * the progress thread.
 * --default-staged: the default streams' calls are staged (every rank on one GPU, more than
 * PICOLL_STREAM_DEFAULT_SHARING ranks sharing it).
 * --same-order: every rank enqueues the second stream's call at the same point among the first
 * stream's (calls that take the progress thread must: where the streams share a hardware queue,
 * a call's wait for the progress thread holds up the other stream's calls, FAKECUDA_QUEUES=1).
 * --late: see late().
 * --queue: see queue().
 * --thread-single: MPI initialised without MPI_THREAD_MULTIPLE: MPIX_Stream_comm_create must
 * answer an error naming the thread level.
 * --zc: see zc(). --zc-reused: see zc_reused(). */
#include "drv.h"
#include "mpitest.h"

#include "mpix.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mpix_t mx;

#define N 1000 /* ints per rank's block */
#define ROUNDS 6

static int value(int rank, int round, int e)
{
    return (rank + 1) * 100003 + round * 7919 + e;
}

static cu_ptr_t dalloc(size_t bytes)
{
    cu_ptr_t p = 0;
    CK(drv.mem_alloc(&p, bytes));
    return p;
}

static int staged_only;    /* --staged */
static int same_order;     /* --same-order */
static int default_staged; /* --default-staged */

/* got[e] must be the sum over the p ranks of value(q, round, e) */
static void check_sum(const int *got, int round, int p, const char *what)
{
    for (int e = 0; e < N; e++) {
        long long want = 0;
        for (int q = 0; q < p; q++) {
            want += value(q, round, e);
        }
        if (got[e] != (int)want) {
            mt_fail("%s: element %d is %d, want %lld", what, e, got[e], want);
            break;
        }
    }
}

static void get(int *dst, cu_ptr_t src, size_t bytes)
{
    CK(drv.memcpy_dtoh(dst, src, bytes));
}

/* rank 0 holds its stream until the main thread has enqueued everything */
static volatile int release_stream;

static void hold(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&release_stream, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The handle's bytes as MPICH 4.1 and later write them (MPIX_Info_set_hex): two hex digits a
 * byte, "[k]" for a run of k >= 2 zero bytes (MPICH's own MPIX_Info_set_hex there is the MPI's). */
static void hex_runs(char *text, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        while (i + k < n && b[i + k] == 0) {
            k++;
        }
        if (k >= 2) {
            text += sprintf(text, "[%zu]", k);
            i += k;
        } else {
            text += sprintf(text, "%02X", b[i++]);
        }
    }
}

/* A stream object of cs; runs: its info's value written by hand in MPICH's form. */
static stream_t make_stream(cu_stream_t cs, int runs)
{
    MPI_Info info;
    stream_t s = MPIX_STREAM_NULL;
    char text[4 * sizeof(cs) + 1];
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    if (runs) {
        hex_runs(text, (const unsigned char *)&cs, sizeof(cs));
        MPI_Info_set(info, "value", text);
    } else {
        MT_CHECK(mx.info_set_hex(info, "value", &cs, sizeof(cs)) == MPI_SUCCESS,
                 "MPIX_Info_set_hex");
    }
    MT_CHECK(mx.create(info, &s) == MPI_SUCCESS && s != MPIX_STREAM_NULL, "MPIX_Stream_create%s",
             runs ? " (the value in MPICH's form)" : "");
    MPI_Info_free(&info);
    return s;
}

static void expect_error(int rc, const char *what, const char *text)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MT_CHECK(rc != MPI_SUCCESS, "%s: succeeded, an error expected", what);
    if (rc != MPI_SUCCESS) {
        MPI_Error_string(rc, msg, &len);
        MT_CHECK(strstr(msg, text) != NULL, "%s: error text \"%s\" lacks \"%s\"", what, msg, text);
    }
}

/* --late (CTest sets PICOLL_TIMEOUT=1): the last rank enqueues its allreduce 3 s after the
 * others, whose kernels wait for it on their streams, nobody's host waiting: picoll's watch of the
 * stream names it as late past PICOLL_TIMEOUT (CTest looks for the line), and the call ends right
 * once it comes (late is not dead). */
static int late(MPI_Comm scomm, cu_stream_t cs, stream_t s, stream_t s2)
{
    int p = mt_size, r = mt_rank;
    size_t blk = N * sizeof(int);
    int *src = malloc(blk), *got = malloc(blk);
    cu_ptr_t in = dalloc(blk), out = dalloc(blk);
    for (int e = 0; e < N; e++) {
        src[e] = value(r, 0, e);
    }
    CK(drv.memcpy_htod(in, src, blk));
    if (r == p - 1) {
        struct timespec ts = {3, 0};
        nanosleep(&ts, NULL);
    }
    MT_CHECK(mx.allreduce((void *)(uintptr_t)in, (void *)(uintptr_t)out, N, MPI_INT, MPI_SUM,
                          scomm) == MPI_SUCCESS,
             "MPIX_Allreduce_enqueue");
    CK(drv.stream_synchronize(cs));
    get(got, out, blk);
    check_sum(got, 0, p, "late rank's allreduce");
    long kernels = 0;
    MT_CHECK(mx.query(s, NULL, NULL, NULL, NULL, NULL, &kernels) == MPI_SUCCESS && kernels == 1,
             "the call went to the stream's kernels (%ld)", kernels);
    MPI_Comm_free(&scomm);
    MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
    return mt_finish("enqueue --late");
}

/* --queue: a user's pattern (mpich issue 7612): QUEUE allreduces of QUEUE_N floats enqueued in a
 * row, each with device buffers of its own, then one event recorded on the stream and waited for;
 * every result checked, the buffers freed, QUEUE_ROUNDS times. On the emulated GPU it segfaulted
 * in about one run in four at np 3 (a kernel thread's shadow read through a stale range-cache
 * entry: tests/cuda/emu/emu_launch.c, emu_range). */
#define QUEUE 40
#define QUEUE_N 4096
#define QUEUE_ROUNDS 3
static void queue(MPI_Comm scomm, cu_stream_t cs)
{
    size_t bytes = QUEUE_N * sizeof(float);
    float *h = malloc(bytes);
    cu_ptr_t in[QUEUE], out[QUEUE];
    cu_event_t ev;
    if (drv.event_create == NULL || drv.event_record == NULL || drv.event_synchronize == NULL) {
        mt_fail("the CUDA driver has no events");
        free(h);
        return;
    }
    CK(drv.event_create(&ev, 0));
    for (int round = 0; round < QUEUE_ROUNDS; round++) {
        for (int k = 0; k < QUEUE; k++) {
            for (int e = 0; e < QUEUE_N; e++) {
                h[e] = (float)((mt_rank + 1) * 3 + k * 5 + round * 7 + e % 97); /* exact sums */
            }
            in[k] = dalloc(bytes);
            out[k] = dalloc(bytes);
            CK(drv.memcpy_htod(in[k], h, bytes));
            MT_CHECK(mx.allreduce((void *)(uintptr_t)in[k], (void *)(uintptr_t)out[k], QUEUE_N,
                                  MPI_FLOAT, MPI_SUM, scomm) == MPI_SUCCESS,
                     "MPIX_Allreduce_enqueue %d of the queue", k);
        }
        CK(drv.event_record(ev, cs));
        CK(drv.event_synchronize(ev));
        for (int k = 0; k < QUEUE; k++) {
            CK(drv.memcpy_dtoh(h, out[k], bytes));
            for (int e = 0; e < QUEUE_N; e++) {
                float want = 0;
                for (int q = 0; q < mt_size; q++) {
                    want += (float)((q + 1) * 3 + k * 5 + round * 7 + e % 97);
                }
                if (h[e] != want) {
                    mt_fail("queue round %d, call %d: element %d is %g, want %g", round, k, e,
                            (double)h[e], (double)want);
                    break;
                }
            }
            CK(drv.mem_free(in[k]));
            CK(drv.mem_free(out[k]));
        }
    }
    if (drv.event_destroy != NULL) {
        drv.event_destroy(ev);
    }
    free(h);
}

/* --zc: the zero-copy path on the stream (issue 50; PICOLL_CUDA_ZERO_COPY_MIN at most 64 KiB):
 * buffers of picoll's allocator (picoll_cuda_alloc: registered, PICOLL_CUDA_ZERO_COPY=registered,
 * the default); ZC_CALLS rounds of an allreduce, an allgather, an alltoall, a
 * reduce_scatter_block and a bcast from the last rank enqueued back to back, each input written on the stream just before its call and overwritten just after, nothing
 * synchronised until the end; each call's path cuda_zc (picoll_last_algorithm); then one
 * allreduce captured into a graph and launched ZC_REPLAYS times, its input written on the stream
 * before each launch (the mappings the capture made stay held). Every result against a plain
 * loop. */
#define ZC_N (64 << 10) /* ints: 256 KiB a call */
#define ZC_CALLS 3
#define ZC_REPLAYS 5
static int zc_value(int rank, int k, int e)
{
    return (rank + 1) * 7 + k * 3 + e % 113;
}

/* --zc-reused: PICOLL_CUDA_ZERO_COPY=reused on the stream (PyTorch's tensors of its own caching
 * allocator: plain device memory, not registered): an allreduce and a reduce_scatter_block of
 * the same buffers (cuMemAlloc) enqueued ZC_CALLS times, each pass's inputs written on the stream
 * just before, the stream synchronised and every result checked after each pass. The first pass
 * meets every buffer for the first time and copies (its path not cuda_zc); the next ones read the
 * peers' buffers in place (cuda_zc). */
static void zc_reused(MPI_Comm scomm, cu_stream_t cs)
{
    const char *(*last)(void);
    *(void **)&last = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    MT_CHECK(last != NULL, "picoll_last_algorithm is not there");
    int p = mt_size, block = ZC_N / p;
    size_t bytes = ZC_N * sizeof(int);
    int *h = malloc(bytes), *got = malloc(bytes);
    cu_ptr_t in[2], out[2];
    for (int c = 0; c < 2; c++) {
        CK(drv.mem_alloc(&in[c], bytes));
        CK(drv.mem_alloc(&out[c], bytes));
    }
    for (int k = 0; k < ZC_CALLS; k++) {
        for (int c = 0; c < 2; c++) {
            for (int e = 0; e < ZC_N; e++) {
                h[e] = zc_value(mt_rank, k * 2 + c, e);
            }
            CK(drv.memcpy_htod_async(in[c], h, bytes, cs));
            void *src = (void *)(uintptr_t)in[c], *dst = (void *)(uintptr_t)out[c];
            int rc = c == 0 ? mx.allreduce(src, dst, ZC_N, MPI_INT, MPI_SUM, scomm)
                            : mx.rsb(src, dst, block, MPI_INT, MPI_SUM, scomm);
            const char *what = c == 0 ? "allreduce" : "reduce_scatter_block";
            MT_CHECK(rc == MPI_SUCCESS, "MPIX_%s_enqueue %d: %d", what, k, rc);
            const char *path = last();
            int zc_path = path != NULL && strcmp(path, "cuda_zc") == 0;
            MT_CHECK(zc_path == (k > 0),
                     "enqueued %s, pass %d over the same plain buffers (mode reused): path %s, "
                     "expected %s",
                     what, k, path ? path : "(none)",
                     k > 0 ? "cuda_zc (met before)" : "the copy path's (met for the first time)");
        }
        CK(drv.stream_synchronize(cs));
        for (int c = 0; c < 2; c++) {
            get(got, out[c], bytes);
            for (int e = 0, bad = 0; e < (c == 0 ? ZC_N : block) && bad < 3; e++) {
                long long want = 0;
                for (int q = 0; q < p; q++) {
                    want += zc_value(q, k * 2 + c, c == 0 ? e : mt_rank * block + e);
                }
                if (got[e] != (int)want) {
                    mt_fail("mode reused, pass %d, call %d: element %d is %d, want %lld", k, c, e,
                            got[e], want);
                    bad++;
                }
            }
        }
    }
    /* every rank is done before any frees what the peers mapped */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int c = 0; c < 2; c++) {
        CK(drv.mem_free(in[c]));
        CK(drv.mem_free(out[c]));
    }
    free(h);
    free(got);
}

static void zc(MPI_Comm scomm, cu_stream_t cs, int ordinal)
{
    void *(*alloc)(ssize_t, int, void *);
    void (*release)(void *, ssize_t, int, void *);
    const char *(*last)(void);
    *(void **)&alloc = dlsym(RTLD_DEFAULT, "picoll_cuda_alloc");
    *(void **)&release = dlsym(RTLD_DEFAULT, "picoll_cuda_free");
    *(void **)&last = dlsym(RTLD_DEFAULT, "picoll_last_algorithm");
    MT_CHECK(alloc != NULL && release != NULL && last != NULL, "picoll's allocator is not there");
    int dev = ordinal, p = mt_size, block = ZC_N / p;
    size_t bytes = ZC_N * sizeof(int);
    int *h = malloc(bytes), *got = malloc(bytes), *junk = malloc(bytes);
    char *in[ZC_CALLS][5], *out[ZC_CALLS][5];
    const int root = p - 1; /* the bcast's */
    memset(junk, 0x5a, bytes);
    for (int k = 0; k < ZC_CALLS; k++) {
        for (int c = 0; c < 5; c++) {
            in[k][c] = alloc((ssize_t)bytes, dev, NULL);
            out[k][c] = alloc((ssize_t)bytes, dev, NULL);
            MT_CHECK(in[k][c] != NULL && out[k][c] != NULL, "picoll_cuda_alloc failed");
            for (int e = 0; e < ZC_N; e++) {
                h[e] = zc_value(mt_rank, k * 5 + c, e);
            }
            /* the input on the stream just before the call, junk just after (bcast: the root's
             * message, junk in the others' buffers before, the root's overwritten after) */
            CK(drv.memcpy_htod_async((cu_ptr_t)(uintptr_t)in[k][c],
                                     c == 4 && mt_rank != root ? junk : h, bytes, cs));
            const char *what = c == 0   ? "allreduce"
                               : c == 1 ? "allgather"
                               : c == 2 ? "alltoall"
                               : c == 3 ? "reduce_scatter_block"
                                        : "bcast";
            int rc =
                c == 0   ? mx.allreduce(in[k][c], out[k][c], ZC_N, MPI_INT, MPI_SUM, scomm)
                : c == 1 ? mx.allgather(in[k][c], block, MPI_INT, out[k][c], block, MPI_INT, scomm)
                : c == 2 ? mx.alltoall(in[k][c], block, MPI_INT, out[k][c], block, MPI_INT, scomm)
                : c == 3 ? mx.rsb(in[k][c], out[k][c], block, MPI_INT, MPI_SUM, scomm)
                         : mx.bcast(in[k][c], ZC_N, MPI_INT, root, scomm);
            MT_CHECK(rc == MPI_SUCCESS, "MPIX_%s_enqueue %d: %d", what, k, rc);
            const char *path = last();
            MT_CHECK(path != NULL && strcmp(path, "cuda_zc") == 0,
                     "enqueued %s %d of registered buffers: path %s, expected cuda_zc", what, k,
                     path ? path : "(none)");
            if (c != 4 || mt_rank == root) {
                CK(drv.memcpy_htod_async((cu_ptr_t)(uintptr_t)in[k][c], junk, bytes, cs));
            }
        }
    }
    CK(drv.stream_synchronize(cs));
    for (int k = 0; k < ZC_CALLS; k++) {
        for (int c = 0; c < 5; c++) {
            get(got, (cu_ptr_t)(uintptr_t)(c == 4 ? in[k][c] : out[k][c]), bytes);
            int bad = 0;
            for (int e = 0; e < ZC_N && bad < 3; e++) {
                long long want = 0;
                if (c == 0) {
                    for (int q = 0; q < p; q++) {
                        want += zc_value(q, k * 5 + c, e);
                    }
                } else if (c == 1) { /* block e / block of rank e / block, its element e % block */
                    want = zc_value(e / block, k * 5 + c, e % block);
                } else if (c == 2) { /* from rank e / block: its block for me */
                    want = zc_value(e / block, k * 5 + c, mt_rank * block + e % block);
                } else if (c == 3) { /* my block of every rank's input, summed */
                    for (int q = 0; q < p && e < block; q++) {
                        want += zc_value(q, k * 5 + c, mt_rank * block + e);
                    }
                } else { /* the root's message (the root's own buffer was overwritten after) */
                    want = zc_value(root, k * 5 + c, e);
                }
                int checked = c == 3 ? block : c == 4 ? (mt_rank == root ? 0 : ZC_N) : block * p;
                if (e < checked && got[e] != (int)want) {
                    mt_fail("zero-copy call %d of kind %d: element %d is %d, want %lld", k, c, e,
                            got[e], want);
                    bad++;
                }
            }
            release(in[k][c], (ssize_t)bytes, dev, NULL);
            release(out[k][c], (ssize_t)bytes, dev, NULL);
        }
    }
    if (drv.stream_begin_capture != NULL && drv.graph_instantiate != NULL) {
        char *gin = alloc((ssize_t)bytes, dev, NULL), *gout = alloc((ssize_t)bytes, dev, NULL);
        cu_graph_t graph;
        cu_graph_exec_t exec;
        CK(drv.stream_begin_capture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MT_CHECK(mx.allreduce(gin, gout, ZC_N, MPI_INT, MPI_SUM, scomm) == MPI_SUCCESS,
                 "MPIX_Allreduce_enqueue captured");
        const char *path = last();
        MT_CHECK(path != NULL && strcmp(path, "cuda_zc") == 0,
                 "captured allreduce: path %s, expected cuda_zc", path ? path : "(none)");
        CK(drv.stream_end_capture(cs, &graph));
        CK(drv.graph_instantiate(&exec, graph, 0));
        CK(drv.graph_destroy(graph));
        for (int k = 0; k < ZC_REPLAYS; k++) {
            for (int e = 0; e < ZC_N; e++) {
                h[e] = zc_value(mt_rank, 50 + k, e);
            }
            CK(drv.memcpy_htod_async((cu_ptr_t)(uintptr_t)gin, h, bytes, cs));
            CK(drv.graph_launch(exec, cs));
            CK(drv.stream_synchronize(cs));
            get(got, (cu_ptr_t)(uintptr_t)gout, bytes);
            for (int e = 0, bad = 0; e < ZC_N && bad < 3; e++) {
                long long want = 0;
                for (int q = 0; q < p; q++) {
                    want += zc_value(q, 50 + k, e);
                }
                if (got[e] != (int)want) {
                    mt_fail("zero-copy graph launch %d: element %d is %d, want %lld", k, e, got[e],
                            want);
                    bad++;
                }
            }
        }
        CK(drv.graph_exec_destroy(exec));
        /* every rank's graph is done before any frees what the peers' replays read */
        MPI_Barrier(MPI_COMM_WORLD);
        release(gin, (ssize_t)bytes, dev, NULL);
        release(gout, (ssize_t)bytes, dev, NULL);
        if (mt_rank == 0) {
            printf("enqueue: a captured zero-copy allreduce right in %d graph launches\n",
                   ZC_REPLAYS);
        }
    }
    free(h);
    free(got);
    free(junk);
}

/* A stream communicator of MPI_COMM_WORLD on each default stream's handle (the legacy stream, 0
 * and CU_STREAM_LEGACY, and the per-thread stream): an allreduce there, its input written on that
 * stream just before, runs on picoll's kernels (none staged, none run by the progress thread)
 * unless --staged, and gives the sum. */
static void default_streams(const int *pattern, int p)
{
    const struct {
        cu_stream_t cs;
        const char *name;
    } kinds[] = {{(cu_stream_t)0, "legacy stream (0)"},
                 {(cu_stream_t)0x1, "legacy stream (CU_STREAM_LEGACY)"},
                 {(cu_stream_t)0x2, "per-thread stream"}};
    size_t blk = N * sizeof(int);
    int *hout = malloc(blk);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        stream_t sl = make_stream(kinds[k].cs, 0);
        MPI_Comm lcomm = MPI_COMM_NULL;
        MT_CHECK(mx.comm_create(MPI_COMM_WORLD, sl, &lcomm) == MPI_SUCCESS,
                 "MPIX_Stream_comm_create (%s)", kinds[k].name);
        cu_ptr_t lin = dalloc(blk), lout = dalloc(blk);
        for (int round = 0; round < 2; round++) {
            CK(drv.memcpy_htod_async(lin, pattern + round * N, blk, kinds[k].cs));
            MT_CHECK(mx.allreduce((void *)(uintptr_t)lin, (void *)(uintptr_t)lout, N, MPI_INT,
                                  MPI_SUM, lcomm) == MPI_SUCCESS,
                     "MPIX_Allreduce_enqueue on the %s", kinds[k].name);
            CK(drv.memset_d8_async(lin, 0xa5, blk, kinds[k].cs)); /* after the call */
            CK(drv.stream_synchronize(kinds[k].cs));
            get(hout, lout, blk);
            check_sum(hout, round, p, kinds[k].name);
        }
        long ls = -1, lr = -1, lk = -1;
        long want_k = staged_only || default_staged ? 0 : 2;
        MT_CHECK(mx.query(sl, &ls, NULL, NULL, NULL, &lr, &lk) == MPI_SUCCESS && ls == 2 - want_k &&
                     lk == want_k && lr == 2 - want_k,
                 "%s: %ld staged (want %ld), %ld on picoll's kernels (want %ld), %ld run by the "
                 "progress thread (want %ld)",
                 kinds[k].name, ls, 2 - want_k, lk, want_k, lr, 2 - want_k);
        MPI_Comm_free(&lcomm);
        MT_CHECK(mx.free_(&sl) == MPI_SUCCESS, "MPIX_Stream_free (%s)", kinds[k].name);
        CK(drv.mem_free(lin));
        CK(drv.mem_free(lout));
    }
    free(hout);
}

/* --big COUNT CALLS: on a stream communicator of the legacy stream, CALLS in-place allreduces
 * (MPI_FLOAT, SUM) of COUNT floats back to back (the way PyTorch's default stream issues them:
 * the host far ahead of the GPU), one synchronise, then the result against a plain loop: after k
 * in-place sums every element is p^(k-1) times the sum of the inputs (small integers: exact). */
static void big(int argc, char **argv, int p, int r)
{
    long count = 0, calls = 0;
    for (int i = 1; i + 2 < argc; i++) {
        if (strcmp(argv[i], "--big") == 0) {
            count = atol(argv[i + 1]);
            calls = atol(argv[i + 2]);
        }
    }
    MT_CHECK(count > 0 && calls > 0 && calls < 8, "--big COUNT CALLS (CALLS 1 to 7)");
    if (count <= 0 || calls <= 0 || calls >= 8) {
        return;
    }
    size_t bytes = (size_t)count * sizeof(float);
    cu_stream_t cs = (cu_stream_t)0;
    stream_t sl = make_stream(cs, 0);
    MPI_Comm lcomm = MPI_COMM_NULL;
    MT_CHECK(mx.comm_create(MPI_COMM_WORLD, sl, &lcomm) == MPI_SUCCESS,
             "MPIX_Stream_comm_create (legacy stream)");
    float *h = malloc(bytes);
    for (long e = 0; e < count; e++) {
        h[e] = (float)((r + 1) * 3 + e % 100);
    }
    cu_ptr_t d = dalloc(bytes);
    CK(drv.memcpy_htod_async(d, h, bytes, cs));
    for (long k = 0; k < calls; k++) {
        MT_CHECK(mx.allreduce(MPI_IN_PLACE, (void *)(uintptr_t)d, (int)count, MPI_FLOAT, MPI_SUM,
                              lcomm) == MPI_SUCCESS,
                 "MPIX_Allreduce_enqueue %ld", k);
    }
    CK(drv.stream_synchronize(cs));
    get((int *)h, d, bytes);
    for (long e = 0; e < count; e++) {
        double want = 0;
        for (int q = 0; q < p; q++) {
            want += (q + 1) * 3 + e % 100;
        }
        for (long k = 1; k < calls; k++) {
            want *= p;
        }
        if (h[e] != (float)want) {
            mt_fail("--big: element %ld is %g, want %g", e, h[e], want);
            break;
        }
    }
    long ls = -1, lk = -1;
    MT_CHECK(mx.query(sl, &ls, NULL, NULL, NULL, NULL, &lk) == MPI_SUCCESS && ls == 0 &&
                 lk == calls,
             "--big: %ld staged, %ld on the kernels (want 0, %ld)", ls, lk, calls);
    MPI_Comm_free(&lcomm);
    MT_CHECK(mx.free_(&sl) == MPI_SUCCESS, "MPIX_Stream_free (legacy)");
    CK(drv.mem_free(d));
    free(h);
}

/* A stream communicator of MPI_COMM_SELF on cs: allreduce (in place and not), allgather,
 * alltoall, reduce_scatter_block and bcast give their input, and none of them is staged, run by
 * the progress thread or launched as a kernel: a copy on the stream, or nothing. */
static void self_comm(cu_stream_t cs, const int *pattern)
{
    size_t blk = N * sizeof(int);
    stream_t ss = make_stream(cs, 0);
    MPI_Comm one = MPI_COMM_NULL;
    MT_CHECK(mx.comm_create(MPI_COMM_SELF, ss, &one) == MPI_SUCCESS,
             "MPIX_Stream_comm_create (MPI_COMM_SELF)");
    cu_ptr_t in = dalloc(blk), out[6];
    int *h = malloc(blk);
    CK(drv.memcpy_htod_async(in, pattern, blk, cs));
    for (int k = 0; k < 6; k++) {
        out[k] = dalloc(blk);
        CK(drv.memset_d8_async(out[k], 0x5a, blk, cs));
    }
    void *i = (void *)(uintptr_t)in;
#define OUT(k) ((void *)(uintptr_t)out[k])
    MT_CHECK(mx.allreduce(i, OUT(0), N, MPI_INT, MPI_SUM, one) == MPI_SUCCESS &&
                 mx.allgather(i, N, MPI_INT, OUT(1), N, MPI_INT, one) == MPI_SUCCESS &&
                 mx.alltoall(i, N, MPI_INT, OUT(2), N, MPI_INT, one) == MPI_SUCCESS &&
                 mx.rsb(i, OUT(3), N, MPI_INT, MPI_MAX, one) == MPI_SUCCESS,
             "the enqueued collectives on MPI_COMM_SELF");
    CK(drv.memcpy_htod_async(out[4], pattern, blk, cs));
    CK(drv.memcpy_htod_async(out[5], pattern, blk, cs));
    MT_CHECK(mx.allreduce(MPI_IN_PLACE, OUT(4), N, MPI_INT, MPI_PROD, one) == MPI_SUCCESS &&
                 mx.bcast(OUT(5), N, MPI_INT, 0, one) == MPI_SUCCESS,
             "in place allreduce and bcast on MPI_COMM_SELF");
#undef OUT
    CK(drv.memset_d8_async(in, 0xa5, blk, cs)); /* after the calls: the copies read before */
    CK(drv.stream_synchronize(cs));
    const char *what[6] = {"allreduce",          "allgather", "alltoall", "reduce_scatter_block",
                           "allreduce in place", "bcast"};
    for (int k = 0; k < 6; k++) {
        get(h, out[k], blk);
        int bad = 0;
        for (int e = 0; e < N; e++) {
            if (h[e] != pattern[e] && bad++ < 3) {
                mt_fail("MPI_COMM_SELF %s: element %d is %d, want %d", what[k], e, h[e],
                        pattern[e]);
            }
        }
        CK(drv.mem_free(out[k]));
    }
    long st = -1, dv = -1, rn = -1, kn = -1;
    MT_CHECK(mx.query(ss, &st, NULL, &dv, NULL, &rn, &kn) == MPI_SUCCESS && st == 0 && dv == 6 &&
                 rn == 0 && kn == 0,
             "MPI_COMM_SELF: %ld staged (want 0), %ld on the device without a kernel (want 6), "
             "%ld run by the progress thread (want 0), %ld on kernels (want 0)",
             st, dv, rn, kn);
    MPI_Comm_free(&one);
    MT_CHECK(mx.free_(&ss) == MPI_SUCCESS, "MPIX_Stream_free (MPI_COMM_SELF)");
    CK(drv.mem_free(in));
    free(h);
}

int main(int argc, char **argv)
{
    int provided, single = mt_flag(argc, argv, "--thread-single");
    staged_only = mt_flag(argc, argv, "--staged");
    same_order = mt_flag(argc, argv, "--same-order");
    default_staged = mt_flag(argc, argv, "--default-staged");
    char why[256];

    if (single) {
        MPI_Init(&argc, &argv);
    } else {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    }
    mt_load_picoll(1);
    if (!mpix_load(&mx)) {
        mt_fail("picoll's MPIX_Stream calls are not there (is libpicoll.so preloaded?)");
        return mt_finish("enqueue");
    }
    if (drv_load(why, sizeof(why)) == 0) {
        return mt_skip(why);
    }
    if (!single && provided != MPI_THREAD_MULTIPLE) {
        return mt_skip("this MPI does not provide MPI_THREAD_MULTIPLE");
    }
    cu_device_t dev;
    cu_ctx_t ctx;
    int ndev = 0;
    CK(drv.device_get_count(&ndev));
    CK(drv.device_get(&dev, mt_rank % ndev));
    CK(drv.primary_ctx_retain(&ctx, dev));
    CK(drv.ctx_set_current(ctx));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    cu_stream_t cs, cs2;
    CK(drv.stream_create(&cs, CU_STREAM_DEFAULT));
    CK(drv.stream_create(&cs2, CU_STREAM_DEFAULT));
    stream_t s = make_stream(cs, 0), s2 = make_stream(cs2, 1);
    MPI_Comm scomm = MPI_COMM_NULL, scomm2 = MPI_COMM_NULL;
    int rc = mx.comm_create(MPI_COMM_WORLD, s, &scomm);
    if (single) {
        expect_error(rc, "MPIX_Stream_comm_create without MPI_THREAD_MULTIPLE",
                     "MPI_THREAD_MULTIPLE");
        MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
        return mt_finish("enqueue --thread-single");
    }
    MT_CHECK(rc == MPI_SUCCESS, "MPIX_Stream_comm_create: %d", rc);
    if (mt_flag(argc, argv, "--late")) {
        return late(scomm, cs, s, s2);
    }
    if (mt_flag(argc, argv, "--big")) {
        MPI_Comm_free(&scomm);
        big(argc, argv, mt_size, mt_rank);
        MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
        return mt_finish("enqueue --big");
    }
    if (mt_flag(argc, argv, "--zc-reused")) {
        zc_reused(scomm, cs);
        MPI_Comm_free(&scomm);
        MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
        return mt_finish("enqueue --zc-reused");
    }
    if (mt_flag(argc, argv, "--zc")) {
        zc(scomm, cs, mt_rank % ndev);
        MPI_Comm_free(&scomm);
        MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
        return mt_finish("enqueue --zc");
    }
    if (mt_flag(argc, argv, "--queue")) {
        queue(scomm, cs);
        MPI_Comm_free(&scomm);
        MT_CHECK(mx.free_(&s) == MPI_SUCCESS && mx.free_(&s2) == MPI_SUCCESS, "MPIX_Stream_free");
        return mt_finish("enqueue --queue");
    }
    MT_CHECK(mx.comm_create(MPI_COMM_WORLD, s2, &scomm2) == MPI_SUCCESS,
             "MPIX_Stream_comm_create (second stream)");
    MPI_Comm_set_errhandler(scomm, MPI_ERRORS_RETURN);

    /* ---- errors ---- */
    int one = 1, out1 = 0;
#ifdef PICOLL_MPIX_STREAM
    expect_error(mx.allreduce(&one, &out1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                 "an enqueue on a communicator without a stream", "has no stream");
    MPI_Info bad;
    stream_t sb = MPIX_STREAM_NULL;
    MPI_Info_create(&bad);
    MPI_Info_set(bad, "type", "hipStream_t");
    expect_error(mx.create(bad, &sb), "MPIX_Stream_create of type hipStream_t", "cudaStream_t");
    MPI_Info_free(&bad);
#else /* the MPI's own: its error for a communicator of its own; other stream types are its own */
    expect_error(mx.allreduce(&one, &out1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                 "an enqueue on a communicator without a stream (the MPI's answer)", "stream");
#endif
    MPI_Comm junk;
#ifdef PICOLL_MPIX_STREAM
    stream_t no_stream = (stream_t)&one;
#else /* a handle of picoll's kind (just above MPIX_STREAM_NULL: pmpi/stream.c) that is none */
    stream_t no_stream = (stream_t)((uintptr_t)MPIX_STREAM_NULL + 4000);
#endif
    expect_error(mx.comm_create(MPI_COMM_WORLD, no_stream, &junk),
                 "MPIX_Stream_comm_create with a bad stream", "not a stream");

    /* ---- the calls, queued while rank 0's stream is held ---- */
    int p = mt_size, r = mt_rank;
    size_t blk = N * sizeof(int);
    long calls0 = drv.call_counts != NULL ? drv_calls("cuStreamSynchronize") : -1;
    long waits0 = drv.call_counts != NULL ? drv_calls("cuStreamWaitValue64_v2") : -1;
    long ctxsync0 = drv.call_counts != NULL ? drv_calls("cuCtxSynchronize") : -1;
    if (r == 0) {
        CK(drv.launch_host_func(cs, hold, NULL));
    }
    int *pattern = malloc(ROUNDS * blk), *hout = malloc(blk);
    cu_ptr_t in = dalloc(blk), outs[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        for (int e = 0; e < N; e++) {
            pattern[k * N + e] = value(r, k, e);
        }
        outs[k] = dalloc(blk);
        CK(drv.memcpy_htod_async(in, pattern + k * N, blk, cs));
        MT_CHECK(mx.allreduce((void *)(uintptr_t)in, (void *)(uintptr_t)outs[k], N, MPI_INT,
                              MPI_SUM, scomm) == MPI_SUCCESS,
                 "MPIX_Allreduce_enqueue round %d", k);
        CK(drv.memset_d8_async(in, 0xa5, blk, cs)); /* after the call, on the stream */
    }
    /* in place */
    cu_ptr_t ip = dalloc(blk);
    CK(drv.memcpy_htod_async(ip, pattern, blk, cs));
    MT_CHECK(mx.allreduce(MPI_IN_PLACE, (void *)(uintptr_t)ip, N, MPI_INT, MPI_MAX, scomm) ==
                 MPI_SUCCESS,
             "MPIX_Allreduce_enqueue in place");
    /* allgather, alltoall, reduce_scatter_block: inputs value(r, 10 + j, e) */
    int *src = malloc((size_t)p * blk);
    for (int j = 0; j < p; j++) {
        for (int e = 0; e < N; e++) {
            src[j * N + e] = value(r, 10 + j, e);
        }
    }
    cu_ptr_t dsrc = dalloc((size_t)p * blk), dag = dalloc((size_t)p * blk),
             da2a = dalloc((size_t)p * blk), drsb = dalloc(blk), dbc = dalloc(blk);
    CK(drv.memcpy_htod_async(dsrc, src, (size_t)p * blk, cs));
    MT_CHECK(mx.allgather((void *)(uintptr_t)dsrc, N, MPI_INT, (void *)(uintptr_t)dag, N, MPI_INT,
                          scomm) == MPI_SUCCESS,
             "MPIX_Allgather_enqueue");
    MT_CHECK(mx.alltoall((void *)(uintptr_t)dsrc, N, MPI_INT, (void *)(uintptr_t)da2a, N, MPI_INT,
                         scomm) == MPI_SUCCESS,
             "MPIX_Alltoall_enqueue");
    MT_CHECK(mx.rsb((void *)(uintptr_t)dsrc, (void *)(uintptr_t)drsb, N, MPI_INT, MPI_SUM, scomm) ==
                 MPI_SUCCESS,
             "MPIX_Reduce_scatter_block_enqueue");
    if (r == p - 1) {
        CK(drv.memcpy_htod_async(dbc, src, blk, cs));
    }
    MT_CHECK(mx.bcast((void *)(uintptr_t)dbc, N, MPI_INT, p - 1, scomm) == MPI_SUCCESS,
             "MPIX_Bcast_enqueue");
    /* point to point: 0 -> 1 */
    cu_ptr_t dp2p = dalloc(blk);
    MPI_Status st;
    if (r == 0) {
        CK(drv.memcpy_htod_async(dp2p, src, blk, cs));
        MT_CHECK(mx.send((void *)(uintptr_t)dp2p, N, MPI_INT, 1, 42, scomm) == MPI_SUCCESS,
                 "MPIX_Send_enqueue");
    } else if (r == 1) {
        MT_CHECK(mx.recv((void *)(uintptr_t)dp2p, N, MPI_INT, 0, 42, scomm, &st) == MPI_SUCCESS,
                 "MPIX_Recv_enqueue");
    }
    /* nonblocking point to point: 0 and 1 exchange device blocks, both waited for at once */
    cu_ptr_t dx_in = dalloc(blk), dx_out = dalloc(blk);
    MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status xst[2];
    if (r <= 1 && p >= 2) {
        CK(drv.memcpy_htod_async(dx_in, src + N, blk, cs)); /* block 1: value(r, 11, e) */
        MT_CHECK(mx.irecv((void *)(uintptr_t)dx_out, N, MPI_INT, 1 - r, 7, scomm, &rq[0]) ==
                         MPI_SUCCESS &&
                     rq[0] != MPI_REQUEST_NULL,
                 "MPIX_Irecv_enqueue");
        MT_CHECK(mx.isend((void *)(uintptr_t)dx_in, N, MPI_INT, 1 - r, 7, scomm, &rq[1]) ==
                         MPI_SUCCESS &&
                     rq[1] != MPI_REQUEST_NULL,
                 "MPIX_Isend_enqueue");
        CK(drv.memset_d8_async(dx_in, 0x5a, blk, cs)); /* the isend took its data before */
        MT_CHECK(mx.waitall(2, rq, xst) == MPI_SUCCESS && rq[0] == MPI_REQUEST_NULL &&
                     rq[1] == MPI_REQUEST_NULL,
                 "MPIX_Waitall_enqueue");
    }
    /* host buffers: the call reads and writes them in place, in stream order */
    int *hsend = malloc(blk), *hrecv = calloc(N, sizeof(int));
    for (int e = 0; e < N; e++) {
        hsend[e] = value(r, 20, e);
    }
    MT_CHECK(mx.allreduce(hsend, hrecv, N, MPI_INT, MPI_SUM, scomm) == MPI_SUCCESS,
             "MPIX_Allreduce_enqueue of host buffers");
    /* the second stream: each rank interleaves its calls with the first stream's in another
     * order (rank-dependent), which per-stream progress makes harmless where the streams have
     * hardware queues of their own (not with --same-order) */
    cu_ptr_t d2in = dalloc(blk), d2out = dalloc(blk);
    CK(drv.memcpy_htod_async(d2in, pattern, blk, cs2));
    cu_ptr_t d3out = dalloc(blk);
    if (r % 2 == 0 || same_order) {
        MT_CHECK(mx.allreduce((void *)(uintptr_t)d2in, (void *)(uintptr_t)d2out, N, MPI_INT,
                              MPI_MIN, scomm2) == MPI_SUCCESS,
                 "enqueue on the second stream");
    }
    MT_CHECK(mx.allreduce((void *)(uintptr_t)dsrc, (void *)(uintptr_t)d3out, N, MPI_INT, MPI_BXOR,
                          scomm) == MPI_SUCCESS,
             "enqueue on the first stream");
    if (r % 2 == 1 && !same_order) {
        MT_CHECK(mx.allreduce((void *)(uintptr_t)d2in, (void *)(uintptr_t)d2out, N, MPI_INT,
                              MPI_MIN, scomm2) == MPI_SUCCESS,
                 "enqueue on the second stream");
    }
    /* every enqueue has returned: rank 0's stream may go on */
    long syncs = calls0 >= 0 ? drv_calls("cuStreamSynchronize") - calls0 : 0;
    long waits = waits0 >= 0 ? drv_calls("cuStreamWaitValue64_v2") - waits0 : -1;
    long ctxsyncs = ctxsync0 >= 0 ? drv_calls("cuCtxSynchronize") - ctxsync0 : 0;
    MT_CHECK(syncs == 0 && ctxsyncs == 0,
             "the enqueues synchronised: %ld cuStreamSynchronize, %ld cuCtxSynchronize", syncs,
             ctxsyncs);
    __atomic_store_n(&release_stream, 1, __ATOMIC_RELEASE);
    CK(drv.stream_synchronize(cs));
    CK(drv.stream_synchronize(cs2));

    /* ---- results ---- */
    for (int k = 0; k < ROUNDS; k++) {
        get(hout, outs[k], blk);
        for (int e = 0; e < N; e++) {
            long long want = 0;
            for (int q = 0; q < p; q++) {
                want += value(q, k, e);
            }
            if (hout[e] != (int)want) {
                mt_fail("allreduce round %d: element %d is %d, want %lld (stream order?)", k, e,
                        hout[e], want);
                break;
            }
        }
    }
    get(hout, ip, blk);
    for (int e = 0; e < N; e++) {
        if (hout[e] != value(p - 1, 0, e)) {
            mt_fail("allreduce in place (max): element %d is %d, want %d", e, hout[e],
                    value(p - 1, 0, e));
            break;
        }
    }
    int *big = malloc((size_t)p * blk);
    get(big, dag, (size_t)p * blk);
    for (int q = 0; q < p && mt_failures == 0; q++) {
        for (int e = 0; e < N; e++) {
            if (big[q * N + e] != value(q, 10, e)) {
                mt_fail("allgather: block %d element %d is %d, want %d", q, e, big[q * N + e],
                        value(q, 10, e));
                break;
            }
        }
    }
    get(big, da2a, (size_t)p * blk);
    for (int q = 0; q < p; q++) {
        for (int e = 0; e < N; e++) {
            if (big[q * N + e] != value(q, 10 + r, e)) {
                mt_fail("alltoall: block %d element %d is %d, want %d", q, e, big[q * N + e],
                        value(q, 10 + r, e));
                q = p;
                break;
            }
        }
    }
    get(hout, drsb, blk);
    for (int e = 0; e < N; e++) {
        long long want = 0;
        for (int q = 0; q < p; q++) {
            want += value(q, 10 + r, e);
        }
        if (hout[e] != (int)want) {
            mt_fail("reduce_scatter_block: element %d is %d, want %lld", e, hout[e], want);
            break;
        }
    }
    get(hout, dbc, blk);
    for (int e = 0; e < N; e++) {
        if (hout[e] != value(p - 1, 10, e)) {
            mt_fail("bcast: element %d is %d, want %d", e, hout[e], value(p - 1, 10, e));
            break;
        }
    }
    if (r == 1) {
        get(hout, dp2p, blk);
        for (int e = 0; e < N; e++) {
            if (hout[e] != value(0, 10, e)) {
                mt_fail("recv: element %d is %d, want %d", e, hout[e], value(0, 10, e));
                break;
            }
        }
        MT_CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 42, "recv status: source %d tag %d",
                 st.MPI_SOURCE, st.MPI_TAG);
    }
    if (r <= 1 && p >= 2) {
        get(hout, dx_out, blk);
        for (int e = 0; e < N; e++) {
            if (hout[e] != value(1 - r, 11, e)) {
                mt_fail("irecv/isend/waitall: element %d is %d, want %d", e, hout[e],
                        value(1 - r, 11, e));
                break;
            }
        }
        MT_CHECK(xst[0].MPI_SOURCE == 1 - r && xst[0].MPI_TAG == 7,
                 "irecv's status: source %d tag %d", xst[0].MPI_SOURCE, xst[0].MPI_TAG);
    }
    check_sum(hrecv, 20, p, "allreduce of host buffers");
    get(hout, d2out, blk);
    for (int e = 0; e < N; e++) {
        if (hout[e] != value(0, 0, e)) {
            mt_fail("second stream (min): element %d is %d, want %d", e, hout[e], value(0, 0, e));
            break;
        }
    }
    get(hout, d3out, blk);
    for (int e = 0; e < N; e++) {
        int want = 0;
        for (int q = 0; q < p; q++) {
            want ^= value(q, 10, e);
        }
        if (hout[e] != want) {
            mt_fail("first stream (bxor): element %d is %d, want %d", e, hout[e], want);
            break;
        }
    }
    /* the collectives on device buffers went to picoll's kernels on the stream (the stream is
     * one the test created; with --staged, to the progress thread, staged on the stream), the
     * point-to-point ones were staged on the stream, the host ones used in place; which path
     * each collective took there is in picoll's statistics (CTest) */
    long staged = -1, host = -1, device = -1, captured = -1, runs = -1, kernels = -1;
    MT_CHECK(mx.query(s, &staged, &host, &device, &captured, &runs, &kernels) == MPI_SUCCESS,
             "picoll_stream_query");
    long want_device = ROUNDS + 1 + 3 + 1 + 1; /* rounds, in place, ag/a2a/rsb, bcast, bxor */
    long want_staged = r <= 1 ? 1 + 3 : 0;     /* send or recv; irecv, isend, the irecv's wait */
    long want_host = 1 + (r <= 1 ? 1 : 0);     /* the host buffers; the isend's wait */
    long want_kernels = 0;
    if (staged_only) {
        want_staged += want_device;
        want_device = 0;
    } else {
        /* every collective, the one on host buffers too (copied to the device on the stream) */
        want_kernels = want_device + 1;
        want_device = 0;
        want_host -= 1;
    }
    MT_CHECK(staged == want_staged && host == want_host && device == want_device &&
                 kernels == want_kernels && captured == 0 && runs == staged + host + device,
             "stream calls: %ld staged, %ld host, %ld device, %ld on the stream's kernels, %ld "
             "captured, %ld run; want %ld, %ld, %ld, %ld, 0, %ld",
             staged, host, device, kernels, captured, runs, want_staged, want_host, want_device,
             want_kernels, want_staged + want_host + want_device);
    /* the stream waits for the progress thread once per call it runs, never for a kernel call:
     * no wait on the host for those (emulated GPU: every driver call counted) */
    /* (and the second stream's call) */
    long want_waits = want_staged + want_host + want_device + staged_only;
    MT_CHECK(waits < 0 || waits == want_waits,
             "%ld cuStreamWaitValue64 in the enqueues, want %ld (one per call the progress "
             "threads run)",
             waits, want_waits);

    /* ---- a CUDA graph: an allreduce captured once, launched GRAPH_RUNS times, its input written
     * on the stream before each launch ---- */
    if (drv.stream_begin_capture != NULL && drv.graph_instantiate != NULL) {
        enum { GN = 64, GRAPH_RUNS = 100 };
        cu_ptr_t gin = dalloc(GN * sizeof(int)), gout = dalloc(GN * sizeof(int));
        int gsrc[GN], gres[GN];
        cu_graph_t graph;
        cu_graph_exec_t exec;
        CK(drv.stream_begin_capture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MT_CHECK(mx.allreduce((void *)(uintptr_t)gin, (void *)(uintptr_t)gout, GN, MPI_INT, MPI_SUM,
                              scomm) == MPI_SUCCESS,
                 "MPIX_Allreduce_enqueue captured");
        CK(drv.stream_end_capture(cs, &graph));
        CK(drv.graph_instantiate(&exec, graph, 0));
        CK(drv.graph_destroy(graph));
        int bad = 0;
        for (int k = 0; k < GRAPH_RUNS; k++) {
            for (int e = 0; e < GN; e++) {
                gsrc[e] = value(r, 100 + k, e);
            }
            CK(drv.memcpy_htod_async(gin, gsrc, sizeof(gsrc), cs));
            CK(drv.graph_launch(exec, cs));
            CK(drv.stream_synchronize(cs));
            get(gres, gout, sizeof(gres));
            for (int e = 0; e < GN; e++) {
                long long want = 0;
                for (int q = 0; q < p; q++) {
                    want += value(q, 100 + k, e);
                }
                if (gres[e] != (int)want && bad++ < 3) {
                    mt_fail("graph launch %d: element %d is %d, want %lld", k, e, gres[e], want);
                }
            }
        }
        CK(drv.graph_exec_destroy(exec));
        long runs2 = -1, kernels2 = -1;
        MT_CHECK(mx.query(s, &staged, &host, &device, &captured, &runs2, &kernels2) ==
                         MPI_SUCCESS &&
                     captured == 1 && device == want_device + 0 &&
                     kernels2 == want_kernels + !staged_only &&
                     runs2 == runs + (staged_only ? GRAPH_RUNS : 0),
                 "after the graph: %ld captured (want 1), %ld device (want %ld), %ld on the "
                 "stream's kernels (want %ld), %ld runs (want %ld)",
                 captured, device, want_device, kernels2, want_kernels + !staged_only, runs2,
                 runs + (staged_only ? GRAPH_RUNS : 0));
        if (mt_rank == 0 && bad == 0) {
            printf("enqueue: a captured allreduce right in %d graph launches of %d\n", GRAPH_RUNS,
                   GRAPH_RUNS);
        }
    } else if (mt_rank == 0) {
        printf("enqueue: no graph test (the driver lacks cuGraphInstantiateWithFlags)\n");
    }

    /* ---- the default streams (issue 49): the legacy stream (handle 0) and this thread's
     * per-thread stream take picoll's kernels too, in the stream's order ---- */
    default_streams(pattern, p);
    /* ---- a communicator of one rank: a copy on the stream, or nothing ---- */
    self_comm(cs, pattern);

    MPI_Comm_free(&scomm);
    MPI_Comm_free(&scomm2);
    MT_CHECK(mx.free_(&s) == MPI_SUCCESS && s == MPIX_STREAM_NULL, "MPIX_Stream_free");
    MT_CHECK(mx.free_(&s2) == MPI_SUCCESS && s2 == MPIX_STREAM_NULL, "MPIX_Stream_free (second)");
    if (mt_rank == 0 && mt_failures == 0) {
        printf("enqueue: %d allreduce rounds in stream order, in place, allgather, alltoall, "
               "reduce_scatter_block, bcast, send/recv, isend/irecv/waitall, host buffers, two "
               "streams: right; "
               "%ld collectives on device buffers handed over as they are, %ld on picoll's "
               "kernels on the stream, %ld calls staged, no synchronisation in the enqueues\n",
               ROUNDS, device, kernels, staged);
    }
    return mt_finish("enqueue");
}
