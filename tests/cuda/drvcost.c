/* drvcost [--iters N] [--batches B]: what each CUDA driver call that picoll makes around a
 * collective costs the host on this machine (issue 50, item 3: where an enqueued call's time
 * goes besides the GPU's). No picoll: the driver alone, the calls made back to back in batches of
 * N (default 2000), each batch timed, the median batch's time per call printed (B batches,
 * default 7), every rank of the job measuring at once (ranks sharing a GPU under MPS, as the
 * benchmarks run them); rank 0 prints. The calls:
 *
 *   cuCtxGetCurrent                    the thread's context, asked before a blocking call's vote
 *   cuCtxPushCurrent + cuCtxPopCurrent an enqueued call enters its stream's context and leaves
 *   cuPointerGetAttribute BUFFER_ID    the memory-kind cache checks an entry (device buffer)
 *   ... of host memory                 the same on a malloc'd buffer (the driver answers an error)
 *   cuPointerGetAttributes (7)         a cache miss: the buffer described
 *   cuStreamIsCapturing                an enqueued call asks whether its stream is captured
 *   cuEventRecord                      picoll_torch's group stream records an event per call
 *   cuStreamWaitEvent                  ... and waits for one
 *   cuEventQuery                       a stream's finished calls retired
 *
 * Each call's result is checked (the host buffer's query must fail, the others succeed); on the
 * emulated GPU the times are the CPU emulation's, meaningless, and only the checks count (CTest
 * cuda.emu.drvcost). On a GPU: lease step drv50 (tests/cuda/gpu-lease.sh). */
#include "drv.h"
#include "mpitest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ATTR_CONTEXT 1
#define ATTR_MEMORY_TYPE 2
#define ATTR_BUFFER_ID 7
#define ATTR_IS_MANAGED 8
#define ATTR_DEVICE_ORDINAL 9
#define ATTR_RANGE_START 11
#define ATTR_RANGE_SIZE 12

static cu_ptr_t dbuf;
static char *hbuf;
static cu_ctx_t ctx;
static cu_stream_t stream;
static cu_event_t ev;

static cu_result_t c_get_current(void)
{
    cu_ctx_t c = NULL;
    return drv.ctx_get_current(&c);
}
static cu_result_t c_push_pop(void)
{
    cu_ctx_t popped = NULL;
    cu_result_t rc = drv.ctx_push_current(ctx);
    return rc != 0 ? rc : drv.ctx_pop_current(&popped);
}
static cu_result_t c_buffer_id(void)
{
    unsigned long long id = 0;
    return drv.pointer_get_attribute(&id, ATTR_BUFFER_ID, dbuf + 64);
}
static cu_result_t c_buffer_id_host(void)
{
    unsigned long long id = 0;
    return drv.pointer_get_attribute(&id, ATTR_BUFFER_ID, (cu_ptr_t)(uintptr_t)(hbuf + 64));
}
static cu_result_t c_attributes(void)
{
    unsigned type = 0;
    int managed = 0, device = 0;
    unsigned long long id = 0;
    cu_ctx_t c = NULL;
    cu_ptr_t start = 0;
    size_t size = 0;
    int attrs[] = {ATTR_MEMORY_TYPE, ATTR_IS_MANAGED,  ATTR_DEVICE_ORDINAL, ATTR_BUFFER_ID,
                   ATTR_CONTEXT,     ATTR_RANGE_START, ATTR_RANGE_SIZE};
    void *data[] = {&type, &managed, &device, &id, &c, &start, &size};
    return drv.pointer_get_attributes(7, attrs, data, dbuf + 64);
}
static cu_result_t c_is_capturing(void)
{
    int status = -1;
    return drv.stream_is_capturing(stream, &status);
}
static cu_result_t c_event_record(void)
{
    return drv.event_record(ev, stream);
}
static cu_result_t c_wait_event(void)
{
    return drv.stream_wait_event(stream, ev, 0);
}
static cu_result_t c_event_query(void)
{
    return drv.event_query(ev);
}

static const struct {
    const char *name;
    cu_result_t (*call)(void);
    int fails; /* the driver must answer an error */
} probes[] = {
    {"cuCtxGetCurrent", c_get_current, 0},
    {"cuCtxPushCurrent + cuCtxPopCurrent", c_push_pop, 0},
    {"cuPointerGetAttribute BUFFER_ID (device)", c_buffer_id, 0},
    {"cuPointerGetAttribute BUFFER_ID (host)", c_buffer_id_host, 1},
    {"cuPointerGetAttributes (7 attributes)", c_attributes, 0},
    {"cuStreamIsCapturing", c_is_capturing, 0},
    {"cuEventRecord", c_event_record, 0},
    {"cuStreamWaitEvent", c_wait_event, 0},
    {"cuEventQuery", c_event_query, 0},
};
#define NPROBES (int)(sizeof(probes) / sizeof(probes[0]))

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    char why[256] = "";
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) { /* tests/cuda/gpu_test.sh: no MPI */
        if (drv_load(why, sizeof(why)) < 1) {
            printf("SKIP: no CUDA device (%s)\n", why);
            return MT_SKIP;
        }
        return 0;
    }
    MPI_Init(&argc, &argv);
    mt_load_picoll(0); /* the ranks (picoll is not needed) */
    int iters = atoi(mt_option(argc, argv, "--iters", "2000"));
    int batches = atoi(mt_option(argc, argv, "--batches", "7"));
    if (iters < 1 || batches < 1 || batches > 64) {
        mt_fail("drvcost: --iters takes 1 or more, --batches 1 to 64");
        return mt_finish("drvcost");
    }
    int ndev = drv_load(why, sizeof(why)), all = 0;
    PMPI_Allreduce(&(int){ndev > 0}, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        return mt_skip(why[0] ? why : "no CUDA device on some rank");
    }
    static const size_t need[] = {
        DRV_FIELD(ctx_push_current),      DRV_FIELD(ctx_pop_current),
        DRV_FIELD(pointer_get_attribute), DRV_FIELD(pointer_get_attributes),
        DRV_FIELD(stream_is_capturing),   DRV_FIELD(stream_create),
        DRV_FIELD(event_create),          DRV_FIELD(event_record),
        DRV_FIELD(stream_wait_event),     DRV_FIELD(event_query)};
    const char *lacks = drv_lacks(need, (int)(sizeof(need) / sizeof(need[0])));
    if (lacks != NULL) {
        return mt_skip(lacks);
    }
    ctx = drv_choose_device(0);
    CK(drv.mem_alloc(&dbuf, 1 << 20));
    hbuf = malloc(4096);
    CK(drv.stream_create(&stream, CU_STREAM_DEFAULT));
    CK(drv.event_create(&ev, 0x2 /* CU_EVENT_DISABLE_TIMING */));
    CK(drv.event_record(ev, stream));

    double median[NPROBES];
    for (int p = 0; p < NPROBES; p++) {
        double t[64];
        cu_result_t first = probes[p].call(); /* warm-up, and its answer checked */
        MT_CHECK((first != 0) == probes[p].fails, "%s answered %d: expected %s", probes[p].name,
                 first, probes[p].fails ? "an error" : "success");
        for (int b = 0; b < batches; b++) {
            int bad = 0;
            PMPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_ns();
            for (int i = 0; i < iters; i++) {
                bad += (probes[p].call() != 0) != probes[p].fails;
            }
            t[b] = (now_ns() - t0) / iters;
            MT_CHECK(bad == 0, "%s: %d of %d calls answered otherwise than the first",
                     probes[p].name, bad, iters);
            CK(drv.stream_synchronize(stream)); /* what the batch queued, done */
        }
        qsort(t, (size_t)batches, sizeof(double), cmp_double);
        median[p] = t[batches / 2];
        if (mt_rank == 0) {
            printf("drvcost: %-40s %9.1f ns a call (median of %d batches of %d; %.1f to %.1f)\n",
                   probes[p].name, median[p], batches, iters, t[0], t[batches - 1]);
        }
    }
    if (mt_rank == 0 && drv.call_counts != NULL) {
        printf("drvcost: the emulated GPU: these are its CPU emulation's times, not a driver's\n");
    }
    if (mt_rank == 0) {
        /* picoll's enqueued call makes these (docs/performance.md): push and pop, a validation
         * query per buffer, the capture question; its launch is osu-bench --floor's queued kernel */
        printf("drvcost: an enqueued call's driver calls besides its launch (push and pop, 2 "
               "BUFFER_ID queries, cuStreamIsCapturing): %.1f ns, the sum of the medians above, "
               "%d rank(s) measuring at once\n",
               median[1] + 2 * median[2] + median[5], mt_size);
    }
    CK(drv.event_destroy(ev));
    CK(drv.stream_destroy(stream));
    CK(drv.mem_free(dbuf));
    free(hbuf);
    return mt_finish("drvcost");
}
