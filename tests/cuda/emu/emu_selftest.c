/* Self-tests of the emulated GPU (tests/cuda/emu/libcuda.so.1): emu_selftest MODE, with the
 * emulation's directory in LD_LIBRARY_PATH. Each mode prints "passed" at the end, or a line
 * starting "FAIL" and exits 1. The rule-* modes break one CUDA rule on purpose: the emulation must
 * end them with "FAIL fakecuda: <rule>: ..." (CTest: PASS_REGULAR_EXPRESSION).
 *   streams   stream order: a copy behind a sleeping host function and a memset; the legacy
 *             stream and blocking streams wait for each other, non-blocking streams and other
 *             threads' per-thread streams do not; pageable sources are taken at the call
 *   events    record, query, synchronize, cuStreamWaitEvent
 *   capture   global-mode capture: unsafe calls fail in other threads unless relaxed, captured
 *             work is not run, the legacy stream refuses implicit dependencies; each refused call
 *             invalidates the capture (cuStreamEndCapture fails)
 *   ipc       two processes: the owner's bytes read and written through the other's mapping, the
 *             mapping's attributes, open counting (the owner frees after the close)
 *   ipc-rules two processes, FAKECUDA_NO_PEER=0-2: the open flag must be
 *             CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS; handles of one device of the owner open in one
 *             context per device here (a second context fails until the first closed them);
 *             no peer access, no mapping
 *   reset     cuDevicePrimaryCtxReset: the handle stays, cuCtxGetId changes, allocations and
 *             pinned memory are gone (their addresses handed out again)
 *   kernel    picoll_coll_kernel on the CPU: one-shot copy (1 rank) and sum (a second rank whose
 *             arrival is written beforehand), unaligned destination, status words
 *   fixed     every kernel entry of fixed type, op and rank count (PICOLL_CUDA_FIXED_LIST): a
 *             one-shot of up to 8 ranks gives the generic kernel's bytes and a plain loop's
 *   freeze    fakecuda_freeze_next_kernel: every block starts, none finishes
 *   counts    fakecuda_call_counts and fakecuda_call_name
 *   bufid     CU_POINTER_ATTRIBUTE_BUFFER_ID (singular and plural queries): the same anywhere in
 *             an allocation, new for an allocation made at the address of a freed one
 *   ipc-freed two processes, FAKECUDA_FREE_MAPPED=1: the owner frees an allocation the other
 *             maps and makes another at its address (a new buffer id); closing the stale mapping
 *             and opening the new handle is allowed and reads the new bytes
 *   rule-free-while-mapped, rule-stream-context, rule-event-context, rule-kernel-context,
 *   rule-kernel-bounds, rule-kernel-align, rule-unchosen-device (and unchosen-ok: the allowed case),
 *   rule-stale-handle (a function of a module loaded before a reset of its context),
 *   rule-freed-mapping (a copy through the stale mapping of ipc-freed) and
 *   rule-freed-mapping-kernel (a kernel's load through it). */
#define _GNU_SOURCE
#include "cuda/cuda_kernel.h"
#include "reduce/half.h"
#include "util/dtype.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long long dptr_t;
typedef void *ctx_t;
typedef void *stream_t;
typedef void *event_t;
typedef struct {
    char reserved[64];
} ipc_t;

#define LEGACY ((stream_t)0x1)
#define PER_THREAD ((stream_t)0x2)

static struct {
    void *lib;
    int (*init)(unsigned);
    int (*device_get_count)(int *);
    int (*primary_ctx_retain)(ctx_t *, int);
    int (*ctx_create)(ctx_t *, unsigned, int);
    int (*ctx_set_current)(ctx_t);
    int (*ctx_get_current)(ctx_t *);
    int (*mem_alloc)(dptr_t *, size_t);
    int (*mem_free)(dptr_t);
    int (*mem_host_alloc)(void **, size_t, unsigned);
    int (*mem_host_get_device_pointer)(dptr_t *, void *, unsigned);
    int (*pointer_get_attribute)(void *, int, dptr_t);
    int (*pointer_get_attributes)(unsigned, int *, void **, dptr_t);
    int (*htod)(dptr_t, const void *, size_t);
    int (*dtoh)(void *, dptr_t, size_t);
    int (*htod_async)(dptr_t, const void *, size_t, stream_t);
    int (*memset_async)(dptr_t, unsigned char, size_t, stream_t);
    int (*stream_create)(stream_t *, unsigned);
    int (*stream_synchronize)(stream_t);
    int (*stream_query)(stream_t);
    int (*stream_wait_event)(stream_t, event_t, unsigned);
    int (*launch_host_func)(stream_t, void (*)(void *), void *);
    int (*begin_capture)(stream_t, int);
    int (*end_capture)(stream_t, void **);
    int (*is_capturing)(stream_t, int *);
    int (*exchange_mode)(int *);
    int (*event_create)(event_t *, unsigned);
    int (*event_record)(event_t, stream_t);
    int (*event_query)(event_t);
    int (*event_synchronize)(event_t);
    int (*ipc_get)(ipc_t *, dptr_t);
    int (*ipc_open)(dptr_t *, ipc_t, unsigned);
    int (*ipc_close)(dptr_t);
    int (*can_access_peer)(int *, int, int);
    int (*primary_reset)(int);
    int (*ctx_get_id)(ctx_t, unsigned long long *);
    int (*module_load)(void **, const void *);
    int (*module_get_function)(void **, void *, const char *);
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                  stream_t, void **, void **);
    void (*freeze_next_kernel)(void);
    unsigned long (*block_switches)(void);
    int (*call_counts)(long *, int);
    const char *(*call_name)(int);
} cu;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL emu_selftest: ", stdout);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    exit(1);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        int ck_rc = (call);                                                                        \
        if (ck_rc != 0) {                                                                          \
            fail("%s returned %d (line %d)", #call, ck_rc, __LINE__);                              \
        }                                                                                          \
    } while (0)
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail(__VA_ARGS__);                                                                     \
        }                                                                                          \
    } while (0)

static void load_driver(void)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    EXPECT(cu.lib != NULL, "no emulated driver: %s", dlerror());
#define SYM(f, n)                                                                                  \
    do {                                                                                           \
        *(void **)&cu.f = dlsym(cu.lib, n);                                                        \
        EXPECT(cu.f != NULL, "the driver lacks %s (is it the emulated GPU?)", n);                  \
    } while (0)
    SYM(init, "cuInit");
    SYM(device_get_count, "cuDeviceGetCount");
    SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(ctx_create, "cuCtxCreate_v2");
    SYM(ctx_set_current, "cuCtxSetCurrent");
    SYM(ctx_get_current, "cuCtxGetCurrent");
    SYM(mem_alloc, "cuMemAlloc_v2");
    SYM(mem_free, "cuMemFree_v2");
    SYM(mem_host_alloc, "cuMemHostAlloc");
    SYM(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2");
    SYM(pointer_get_attribute, "cuPointerGetAttribute");
    SYM(pointer_get_attributes, "cuPointerGetAttributes");
    SYM(htod, "cuMemcpyHtoD_v2");
    SYM(dtoh, "cuMemcpyDtoH_v2");
    SYM(htod_async, "cuMemcpyHtoDAsync_v2");
    SYM(memset_async, "cuMemsetD8Async");
    SYM(stream_create, "cuStreamCreate");
    SYM(stream_synchronize, "cuStreamSynchronize");
    SYM(stream_query, "cuStreamQuery");
    SYM(stream_wait_event, "cuStreamWaitEvent");
    SYM(launch_host_func, "cuLaunchHostFunc");
    SYM(begin_capture, "cuStreamBeginCapture_v2");
    SYM(end_capture, "cuStreamEndCapture");
    SYM(is_capturing, "cuStreamIsCapturing");
    SYM(exchange_mode, "cuThreadExchangeStreamCaptureMode");
    SYM(event_create, "cuEventCreate");
    SYM(event_record, "cuEventRecord");
    SYM(event_query, "cuEventQuery");
    SYM(event_synchronize, "cuEventSynchronize");
    SYM(ipc_get, "cuIpcGetMemHandle");
    SYM(ipc_open, "cuIpcOpenMemHandle_v2");
    SYM(ipc_close, "cuIpcCloseMemHandle");
    SYM(can_access_peer, "cuDeviceCanAccessPeer");
    SYM(primary_reset, "cuDevicePrimaryCtxReset_v2");
    SYM(ctx_get_id, "cuCtxGetId");
    SYM(module_load, "cuModuleLoadData");
    SYM(module_get_function, "cuModuleGetFunction");
    SYM(launch, "cuLaunchKernel");
    SYM(freeze_next_kernel, "fakecuda_freeze_next_kernel");
    SYM(block_switches, "fakecuda_block_switches");
    SYM(call_counts, "fakecuda_call_counts");
    SYM(call_name, "fakecuda_call_name");
#undef SYM
    CK(cu.init(0));
}

/* cudaSetDevice: the primary context of device d, current in this thread. */
static ctx_t choose_device(int d)
{
    ctx_t c;
    CK(cu.primary_ctx_retain(&c, d));
    CK(cu.ctx_set_current(c));
    return c;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- host functions that record when they ran ---- */

typedef struct {
    int sleep_ms;
    double start, end;
} stamp_t;

static void stamp_fn(void *arg)
{
    stamp_t *s = arg;
    s->start = now_s();
    if (s->sleep_ms > 0) {
        usleep((useconds_t)s->sleep_ms * 1000);
    }
    s->end = now_s();
}

/* ---- streams ---- */

static void streams_copy_after_memset(void)
{
    stream_t s;
    dptr_t d;
    unsigned char out[4096];
    stamp_t sleeper = {.sleep_ms = 200};
    CK(cu.stream_create(&s, 0));
    CK(cu.mem_alloc(&d, sizeof(out)));
    CK(cu.launch_host_func(s, stamp_fn, &sleeper));
    CK(cu.memset_async(d, 0x5a, sizeof(out), s));
    /* a synchronous copy is a legacy-stream operation: it waits for the blocking stream s */
    CK(cu.dtoh(out, d, sizeof(out)));
    for (size_t i = 0; i < sizeof(out); i++) {
        EXPECT(out[i] == 0x5a, "the copy after the memset read %#x at byte %zu", out[i], i);
    }
    EXPECT(sleeper.end > 0, "the copy returned before the host function ran");
    CK(cu.mem_free(d));
}

static void streams_legacy_blocking(void)
{
    stream_t s, nb;
    stamp_t legacy = {.sleep_ms = 300}, after = {0}, exempt = {0};
    CK(cu.stream_create(&s, 0));
    CK(cu.stream_create(&nb, 1 /* CU_STREAM_NON_BLOCKING */));
    CK(cu.launch_host_func(NULL, stamp_fn, &legacy));
    CK(cu.launch_host_func(s, stamp_fn, &after));
    CK(cu.launch_host_func(nb, stamp_fn, &exempt));
    double t0 = now_s();
    CK(cu.stream_synchronize(nb));
    EXPECT(now_s() - t0 < 0.2, "the non-blocking stream waited for the legacy stream");
    EXPECT(cu.stream_query(s) == 600, "the blocking stream ran alongside the legacy stream");
    CK(cu.stream_synchronize(s));
    EXPECT(after.start >= legacy.end, "the blocking stream's work started before the legacy "
                                      "stream's earlier work ended");
    /* and the other way: legacy work waits for a blocking stream's earlier work */
    stamp_t first = {.sleep_ms = 200}, second = {0};
    CK(cu.launch_host_func(s, stamp_fn, &first));
    CK(cu.launch_host_func(LEGACY, stamp_fn, &second));
    CK(cu.stream_synchronize(LEGACY));
    EXPECT(second.start >= first.end, "legacy-stream work started before a blocking stream's "
                                      "earlier work ended");
}

typedef struct {
    ctx_t ctx;
    stamp_t stamp;
    double synced;
} pts_arg_t;

static void *pts_thread(void *arg)
{
    pts_arg_t *a = arg;
    CK(cu.ctx_set_current(a->ctx));
    CK(cu.launch_host_func(PER_THREAD, stamp_fn, &a->stamp));
    CK(cu.stream_synchronize(PER_THREAD));
    a->synced = now_s();
    return NULL;
}

static void streams_per_thread(ctx_t ctx)
{
    stamp_t mine = {.sleep_ms = 300};
    pts_arg_t other = {.ctx = ctx};
    pthread_t t;
    double t0 = now_s();
    CK(cu.launch_host_func(PER_THREAD, stamp_fn, &mine));
    pthread_create(&t, NULL, pts_thread, &other);
    pthread_join(t, NULL);
    EXPECT(other.synced - t0 < 0.2, "another thread's per-thread stream waited for this one's");
    CK(cu.stream_synchronize(PER_THREAD));
    /* the per-thread stream is blocking: it waits for the legacy stream */
    stamp_t legacy = {.sleep_ms = 200}, after = {0};
    CK(cu.launch_host_func(NULL, stamp_fn, &legacy));
    CK(cu.launch_host_func(PER_THREAD, stamp_fn, &after));
    CK(cu.stream_synchronize(PER_THREAD));
    EXPECT(after.start >= legacy.end, "the per-thread stream ran before earlier legacy work");
}

static void streams_pageable_source(void)
{
    stream_t s;
    dptr_t d;
    int src = 1234, out = 0;
    stamp_t sleeper = {.sleep_ms = 100};
    CK(cu.stream_create(&s, 0));
    CK(cu.mem_alloc(&d, sizeof(int)));
    CK(cu.launch_host_func(s, stamp_fn, &sleeper));
    CK(cu.htod_async(d, &src, sizeof(src), s));
    src = 99; /* CUDA has staged the pageable source when the call returns */
    CK(cu.stream_synchronize(s));
    CK(cu.dtoh(&out, d, sizeof(out)));
    EXPECT(out == 1234, "an asynchronous copy from pageable memory read %d, not 1234", out);
    CK(cu.mem_free(d));
}

/* Streams made and destroyed with work queued: the work still runs, each worker ends. */
static void streams_destroy(void)
{
    int (*destroy)(stream_t) = (int (*)(stream_t))dlsym(cu.lib, "cuStreamDestroy_v2");
    stamp_t st[50];
    EXPECT(destroy != NULL, "the driver lacks cuStreamDestroy_v2");
    for (int i = 0; i < 50; i++) {
        stream_t s;
        st[i] = (stamp_t){.sleep_ms = 1};
        CK(cu.stream_create(&s, 0));
        CK(cu.launch_host_func(s, stamp_fn, &st[i]));
        CK(destroy(s));
        EXPECT(cu.stream_synchronize(s) == 400, "a destroyed stream still answers");
    }
    CK(cu.stream_synchronize(NULL)); /* legacy work waits for the destroyed streams' work */
    for (int i = 0; i < 50; i++) {
        EXPECT(st[i].end > 0, "work queued before cuStreamDestroy_v2 did not run");
    }
}

static void mode_streams(void)
{
    ctx_t ctx = choose_device(0);
    streams_copy_after_memset();
    streams_legacy_blocking();
    streams_per_thread(ctx);
    streams_pageable_source();
    streams_destroy();
}

/* Rule hardware-queue (FAKECUDA_QUEUES): with one queue, a host function holds up the next
 * operation of another stream, a memset does not; with a queue per stream (unset), neither. */
static void mode_queues(void)
{
    const char *q = getenv("FAKECUDA_QUEUES");
    int shared = q != NULL && atoi(q) == 1;
    stream_t a, b;
    dptr_t d;
    stamp_t held = {.sleep_ms = 300}, next = {0};
    choose_device(0);
    CK(cu.stream_create(&a, 1 /* CU_STREAM_NON_BLOCKING */));
    CK(cu.stream_create(&b, 1));
    CK(cu.mem_alloc(&d, 64));
    CK(cu.launch_host_func(a, stamp_fn, &held));
    CK(cu.memset_async(d, 1, 64, b));
    CK(cu.launch_host_func(b, stamp_fn, &next));
    CK(cu.stream_synchronize(b));
    CK(cu.stream_synchronize(a));
    if (shared) {
        EXPECT(next.start >= held.end, "one hardware queue: the other stream's work ran while a "
                                       "host function held the queue");
    } else {
        EXPECT(next.end < held.end, "a queue per stream: the other stream waited for a host "
                                    "function");
    }
    /* kernels-like work does not hold: a memset then a host function on a, one on b */
    stamp_t first = {0}, other = {.sleep_ms = 0};
    CK(cu.memset_async(d, 2, 64, a));
    CK(cu.launch_host_func(b, stamp_fn, &other));
    CK(cu.launch_host_func(a, stamp_fn, &first));
    CK(cu.stream_synchronize(a));
    CK(cu.stream_synchronize(b));
    EXPECT(other.end > 0 && first.end > 0, "work after a memset in a shared queue never ran");
    CK(cu.mem_free(d));
}

/* ---- events ---- */

static void mode_events(void)
{
    stream_t s, t;
    event_t e;
    stamp_t sleeper = {.sleep_ms = 200}, waiter = {0};
    choose_device(0);
    CK(cu.stream_create(&s, 1));
    CK(cu.stream_create(&t, 1));
    CK(cu.event_create(&e, 2));
    EXPECT(cu.event_query(e) == 0, "an event never recorded is not complete");
    CK(cu.launch_host_func(s, stamp_fn, &sleeper));
    CK(cu.event_record(e, s));
    EXPECT(cu.event_query(e) == 600, "an event behind a sleeping host function is complete");
    CK(cu.stream_wait_event(t, e, 0));
    CK(cu.launch_host_func(t, stamp_fn, &waiter));
    CK(cu.event_synchronize(e));
    EXPECT(sleeper.end > 0, "cuEventSynchronize returned before the work before the record");
    EXPECT(cu.event_query(e) == 0, "a synchronised event is not complete");
    CK(cu.stream_synchronize(t));
    EXPECT(waiter.start >= sleeper.end, "cuStreamWaitEvent did not wait for the record");
}

/* ---- capture ---- */

typedef struct {
    ctx_t ctx;
    int relaxed;
    int rc;
} capture_arg_t;

static void *capture_other_thread(void *arg)
{
    capture_arg_t *a = arg;
    dptr_t d = 0;
    CK(cu.ctx_set_current(a->ctx));
    if (a->relaxed) {
        int mode = 2;
        CK(cu.exchange_mode(&mode));
    }
    a->rc = cu.mem_alloc(&d, 64);
    if (a->rc == 0) {
        CK(cu.mem_free(d));
    }
    return NULL;
}

static int capture_alloc_in_thread(ctx_t ctx, int relaxed)
{
    capture_arg_t a = {.ctx = ctx, .relaxed = relaxed};
    pthread_t t;
    pthread_create(&t, NULL, capture_other_thread, &a);
    pthread_join(t, NULL);
    return a.rc;
}

/* A global-mode capture that nothing breaks: unsafe calls pass in relaxed mode only, captured work
 * does not run, other streams' work does, and the capture ends with a graph. */
static void capture_intact(ctx_t ctx, stream_t s, dptr_t d)
{
    int status = -1;
    void *graph = NULL;
    unsigned char v = 0;
    CK(cu.begin_capture(s, 0 /* GLOBAL */));
    CK(cu.is_capturing(s, &status));
    EXPECT(status == 1, "cuStreamIsCapturing says %d on a capturing stream", status);
    CK(cu.is_capturing(PER_THREAD, &status));
    EXPECT(status == 0, "the per-thread stream reads as capturing");
    /* asking the legacy stream is how a library learns of a capture on a blocking stream of the
     * context; CUDA documents that it does not invalidate the capture */
    EXPECT(cu.is_capturing(NULL, &status) == 906, "the legacy stream, implicitly tied to a "
                                                  "capturing stream, answered cuStreamIsCapturing");
    EXPECT(capture_alloc_in_thread(ctx, 1) == 0, "cuMemAlloc in relaxed mode failed during a "
                                                 "capture");
    CK(cu.memset_async(d, 7, 1, s));          /* captured: never runs */
    CK(cu.memset_async(d, 0, 1, PER_THREAD)); /* another stream: runs */
    CK(cu.stream_synchronize(PER_THREAD));
    CK(cu.end_capture(s, &graph));
    EXPECT(graph != NULL, "an intact capture ended without a graph");
    CK(cu.stream_synchronize(s));
    CK(cu.dtoh(&v, d, 1));
    EXPECT(v == 0, "work captured into a graph ran (byte %d)", v);
}

/* Each way of breaking a global-mode capture: the call is refused and the capture's end fails. */
static void capture_broken(ctx_t ctx, stream_t s, dptr_t d, int how)
{
    int status = -1;
    void *graph = (void *)1;
    dptr_t x;
    CK(cu.begin_capture(s, 0));
    switch (how) {
    case 0:
        EXPECT(capture_alloc_in_thread(ctx, 0) == 900,
               "cuMemAlloc in another thread during a "
               "global capture did not fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
        break;
    case 1: EXPECT(cu.mem_alloc(&x, 64) == 900, "cuMemAlloc in the capturing thread passed"); break;
    case 2:
        EXPECT(cu.memset_async(d, 8, 1, NULL) == 906, "the legacy stream took work while a "
                                                      "blocking stream of its context captures");
        break;
    default: EXPECT(cu.stream_synchronize(s) == 900, "a capturing stream was synchronised"); break;
    }
    CK(cu.is_capturing(s, &status));
    EXPECT(status == 2, "capture broken (way %d) reads as status %d, not invalidated", how, status);
    EXPECT(cu.memset_async(d, 9, 1, s) == 901, "an invalidated capture took more work");
    EXPECT(cu.end_capture(s, &graph) == 901 && graph == NULL,
           "a capture broken (way %d) ended "
           "with a graph",
           how);
}

static void mode_capture(void)
{
    ctx_t ctx = choose_device(0);
    stream_t s;
    dptr_t d;
    unsigned char v = 0;
    CK(cu.stream_create(&s, 0));
    CK(cu.mem_alloc(&d, 1));
    CK(cu.htod(d, &v, 1));
    capture_intact(ctx, s, d);
    for (int how = 0; how < 4; how++) {
        capture_broken(ctx, s, d, how);
    }
    EXPECT(capture_alloc_in_thread(ctx, 0) == 0, "cuMemAlloc failed after the captures ended");
    capture_intact(ctx, s, d); /* nothing left over */
}

/* ---- IPC between two processes ---- */

static void ipc_child(int rd, int wr)
{
    ipc_t h;
    dptr_t p, again;
    unsigned int type = 0;
    ctx_t attr_ctx = NULL, ctx;
    unsigned char buf[8192];
    load_driver();
    ctx = choose_device(1);
    EXPECT(read(rd, &h, sizeof(h)) == (ssize_t)sizeof(h), "child: no handle from the owner");
    CK(cu.ipc_open(&p, h, 1));
    CK(cu.ipc_open(&again, h, 1));
    EXPECT(again == p, "the same handle opened twice gave two addresses");
    CK(cu.pointer_get_attribute(&type, 2, p));
    CK(cu.pointer_get_attribute(&attr_ctx, 1, p + 100));
    EXPECT(type == 2 && attr_ctx == ctx,
           "a mapping reads as memory type %u of context %p, not "
           "device memory of the opener's context %p",
           type, attr_ctx, ctx);
    CK(cu.dtoh(buf, p, sizeof(buf)));
    for (size_t i = 0; i < sizeof(buf); i++) {
        EXPECT(buf[i] == (unsigned char)(i * 7), "child: byte %zu through the mapping is %#x", i,
               buf[i]);
    }
    /* the CPU (a kernel) dereferences the mapping directly */
    EXPECT(((unsigned char *)(uintptr_t)p)[10] == 70, "the mapping's bytes are not the owner's");
    memset(buf, 0xab, sizeof(buf));
    CK(cu.htod(p, buf, sizeof(buf)));
    CK(cu.ipc_close(p));
    CK(cu.ipc_close(again));
    EXPECT(write(wr, "d", 1) == 1, "child: cannot tell the owner");
    exit(0);
}

/* Forks a process that runs child(its read end, its write end) and never returns; *to_child and
 * *from_child receive this side's ends of the two pipes. */
static pid_t spawn_child(void (*child)(int rd, int wr), int *to_child, int *from_child)
{
    int down[2], up[2];
    EXPECT(pipe(down) == 0 && pipe(up) == 0, "pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        child(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    *to_child = down[1];
    *from_child = up[0];
    return pid;
}

static void mode_ipc(void)
{
    int to_child, from_child;
    char c;
    pid_t pid = spawn_child(ipc_child, &to_child, &from_child);
    load_driver();
    choose_device(0);
    unsigned char buf[8192];
    dptr_t d, pad;
    ipc_t h;
    CK(cu.mem_alloc(&pad, 300)); /* the allocation starts mid-page */
    CK(cu.mem_alloc(&d, sizeof(buf)));
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (unsigned char)(i * 7);
    }
    CK(cu.htod(d, buf, sizeof(buf)));
    CK(cu.ipc_get(&h, d));
    EXPECT(write(to_child, &h, sizeof(h)) == (ssize_t)sizeof(h), "cannot send the handle");
    EXPECT(read(from_child, &c, 1) == 1, "the child died (see its message)");
    CK(cu.dtoh(buf, d, sizeof(buf)));
    for (size_t i = 0; i < sizeof(buf); i++) {
        EXPECT(buf[i] == 0xab, "owner: byte %zu written through the mapping reads %#x", i, buf[i]);
    }
    int st;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed");
    CK(cu.mem_free(d)); /* closed everywhere: no rule broken */
    CK(cu.mem_free(pad));
}

/* CUDA's rules for opening: the child (devices 1 and 2, FAKECUDA_NO_PEER=0-2) opens handles of
 * two allocations the owner made on device 0. */
static void ipc_rules_child(int rd, int wr)
{
    ipc_t h[2];
    dptr_t p, q;
    ctx_t primary, other;
    int can = -1;
    load_driver();
    primary = choose_device(1);
    EXPECT(read(rd, h, sizeof(h)) == (ssize_t)sizeof(h), "child: no handles from the owner");
    EXPECT(cu.ipc_open(&p, h[0], 0) == 1, "cuIpcOpenMemHandle with flags 0 did not fail with "
                                          "CUDA_ERROR_INVALID_VALUE");
    CK(cu.ipc_open(&p, h[0], 1));
    CK(cu.ctx_create(&other, 0, 1)); /* a second context on device 1, current */
    EXPECT(cu.ipc_open(&q, h[1], 1) == 201,
           "a second context of device 1 opened a handle of the "
           "owner's device 0 while the primary context maps one (CUDA allows one context)");
    EXPECT(cu.ipc_open(&q, h[0], 1) == 201, "a second context of device 1 opened the handle the "
                                            "primary context maps");
    CK(cu.ctx_set_current(primary));
    CK(cu.ipc_close(p));
    CK(cu.ctx_set_current(other));
    CK(cu.ipc_open(&q, h[1], 1)); /* the primary context closed its mapping: now allowed */
    CK(cu.ipc_close(q));
    CK(cu.can_access_peer(&can, 2, 0));
    EXPECT(can == 0, "cuDeviceCanAccessPeer(2, 0) is %d with FAKECUDA_NO_PEER=0-2", can);
    CK(cu.can_access_peer(&can, 1, 0));
    EXPECT(can == 1, "cuDeviceCanAccessPeer(1, 0) is %d", can);
    choose_device(2);
    EXPECT(cu.ipc_open(&q, h[0], 1) == 217, "device 2 opened a handle of device 0 without peer "
                                            "access");
    EXPECT(write(wr, "d", 1) == 1, "child: cannot tell the owner");
    exit(0);
}

static void mode_ipc_rules(void)
{
    int to_child, from_child;
    char c;
    setenv("FAKECUDA_DEVICES", "3", 1);
    setenv("FAKECUDA_NO_PEER", "0-2", 1);
    pid_t pid = spawn_child(ipc_rules_child, &to_child, &from_child);
    load_driver();
    choose_device(0);
    dptr_t d[2];
    ipc_t h[2];
    for (int i = 0; i < 2; i++) {
        CK(cu.mem_alloc(&d[i], 4096));
        CK(cu.ipc_get(&h[i], d[i]));
    }
    EXPECT(write(to_child, h, sizeof(h)) == (ssize_t)sizeof(h), "cannot send the handles");
    EXPECT(read(from_child, &c, 1) == 1, "the child died (see its message)");
    int st;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed");
    CK(cu.mem_free(d[0]));
    CK(cu.mem_free(d[1]));
}

/* ---- the kernel ---- */

typedef struct {
    void *fn;
    dptr_t ws[2]; /* workspaces: mine, and a phantom second rank's */
    picoll_cuda_status_t *status;
    picoll_cuda_status_t *status_dev;
    size_t slot;
} kernel_env_t;

static void kernel_env(kernel_env_t *k)
{
    static const uint32_t image[4] = {0xBA55ED50u, 0, 0, 0}; /* a fatbin's header, no code */
    void *mod, *other;
    dptr_t sd;
    k->slot = 65536;
    CK(cu.module_load(&mod, image));
    CK(cu.module_get_function(&k->fn, mod, PICOLL_CUDA_KERNEL_NAME));
    EXPECT(cu.module_get_function(&other, mod, "not_a_kernel") == 500,
           "an unknown kernel name was found");
    for (int r = 0; r < 2; r++) {
        CK(cu.mem_alloc(&k->ws[r], PICOLL_CUDA_FLAGS_BYTES + 2 * k->slot));
        CK(cu.memset_async(k->ws[r], 0, PICOLL_CUDA_FLAGS_BYTES, NULL));
    }
    CK(cu.mem_host_alloc((void **)&k->status, sizeof(*k->status), 3));
    memset(k->status, 0, sizeof(*k->status));
    CK(cu.mem_host_get_device_pointer(&sd, k->status, 0));
    k->status_dev = (picoll_cuda_status_t *)(uintptr_t)sd;
    CK(cu.stream_synchronize(NULL));
}

static void kernel_params(const kernel_env_t *k, int nranks, uint64_t epoch,
                          picoll_cuda_kparams_t *p)
{
    memset(p, 0, sizeof(*p));
    p->mode = PICOLL_CUDA_K_ONESHOT;
    p->type = PICOLL_CUDA_T_F32;
    p->op = PICOLL_OP_SUM;
    p->esize = 4;
    p->nranks = nranks;
    p->me = 0;
    p->max_blocks = 4;
    p->peers = nranks > 1 ? 2u : 0u;
    p->epoch = epoch;
    p->spin_ns = 10000000000ull;
    p->status = k->status_dev;
    for (int r = 0; r < nranks; r++) {
        char *base = (char *)(uintptr_t)k->ws[r];
        p->flags[r] = (uint64_t *)(void *)base;
        p->slot[0][r] = base + PICOLL_CUDA_FLAGS_BYTES;
        p->slot[1][r] = base + PICOLL_CUDA_FLAGS_BYTES + k->slot;
    }
}

static int kernel_launch(const kernel_env_t *k, picoll_cuda_kparams_t *p)
{
    void *params[] = {p};
    int blocks = picoll_cuda_kernel_blocks(p);
    CK(cu.launch(k->fn, (unsigned)blocks, 1, 1, 64, 1, 1, 0, PER_THREAD, params, NULL));
    return blocks;
}

/* One-shot sum of n floats (nranks 1: a copy; 2: plus the phantom rank's input, which arrived
 * before the launch), into an unaligned destination; compared with the host's sums. */
static void kernel_oneshot(const kernel_env_t *k, int nranks, uint64_t epoch, size_t n)
{
    picoll_cuda_kparams_t p;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    dptr_t src, dst;
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.37f - 5.0f;
        b[i] = 1.0f / (float)(i + 3);
        want[i] = nranks == 1 ? a[i] : a[i] + b[i];
    }
    kernel_params(k, nranks, epoch, &p);
    CK(cu.mem_alloc(&src, n * sizeof(float)));
    CK(cu.mem_alloc(&dst, n * sizeof(float) + 1));
    CK(cu.htod(src, a, n * sizeof(float)));
    p.bytes = n * sizeof(float);
    p.src = (const char *)(uintptr_t)src;
    p.dst = (char *)(uintptr_t)dst + 1;
    int blocks = picoll_cuda_kernel_blocks(&p);
    if (nranks == 2) { /* the phantom rank 1: its input in its slot, arrived */
        char *in1 = p.slot[epoch & 1][1];
        CK(cu.htod((dptr_t)(uintptr_t)in1, b, n * sizeof(float)));
        for (int g = 0; g < blocks; g++) {
            uint64_t *f = p.flags[1];
            CK(cu.htod((dptr_t)(uintptr_t)(f + (size_t)g * PICOLL_CUDA_FLAG_STRIDE), &epoch, 8));
        }
    }
    EXPECT(kernel_launch(k, &p) == blocks, "block count");
    CK(cu.stream_synchronize(PER_THREAD));
    CK(cu.dtoh(got, (dptr_t)(uintptr_t)p.dst, n * sizeof(float)));
    EXPECT(memcmp(got, want, n * sizeof(float)) == 0,
           "one-shot over %d rank(s) of %zu floats: "
           "wrong bytes",
           nranks, n);
    for (int g = 0; g < blocks; g++) {
        EXPECT(k->status->done[g] == epoch && k->status->started[g] == epoch,
               "block %d: status done %llu started %llu, not epoch %llu", g,
               (unsigned long long)k->status->done[g], (unsigned long long)k->status->started[g],
               (unsigned long long)epoch);
    }
    EXPECT(!k->status->halted, "the kernel gave up");
    CK(cu.mem_free(src));
    CK(cu.mem_free(dst));
    free(a);
    free(b);
    free(want);
    free(got);
}

static void mode_kernel(void)
{
    kernel_env_t k;
    choose_device(0);
    kernel_env(&k);
    kernel_oneshot(&k, 1, 1, 1000);
    unsigned long switches = cu.block_switches();
    {
        /* small messages in 2 KiB slices (PICOLL_CUDA_SLICE_MIN), up to max_blocks (4 here) */
        picoll_cuda_kparams_t q;
        kernel_params(&k, 2, 1, &q);
        static const size_t bytes[] = {0, 1, 2048, 2049, 6144, 8193, 1 << 20};
        static const int want[] = {1, 1, 1, 2, 3, 4, 4};
        for (int i = 0; i < 7; i++) {
            q.bytes = bytes[i];
            EXPECT(picoll_cuda_kernel_blocks(&q) == want[i], "%zu bytes: %d blocks, expected %d",
                   bytes[i], picoll_cuda_kernel_blocks(&q), want[i]);
        }
        q.mode = PICOLL_CUDA_K_ALLTOALL; /* a piece per rank: 2 x 2048 bytes */
        q.bytes = 2048;
        EXPECT(picoll_cuda_kernel_blocks(&q) == 2, "alltoall of 2 x 2048 bytes: %d blocks",
               picoll_cuda_kernel_blocks(&q));
    }
    kernel_oneshot(&k, 1, 2, 15001); /* four blocks, a ragged end */
    /* the four blocks ran together, their threads interleaved */
    EXPECT(cu.block_switches() > switches, "the blocks of a launch of four did not interleave");
    kernel_oneshot(&k, 2, 3, 15001);
    kernel_oneshot(&k, 2, 4, 7);
}

/* fixed: every kernel entry of PICOLL_CUDA_FIXED_LIST gives the generic kernel's bytes, and a
 * plain loop's (in rank order; float16 and bfloat16 summed in float, rounded once): a one-shot
 * over its NR ranks (rank 0 here, NR - 1 phantom ranks whose inputs lie in their slots, arrived),
 * at counts with ragged ends and several blocks, into an unaligned destination. */
#define FIXED_RANKS_MAX 8
/* float to the half format of type (float16 or bfloat16) and back, as picoll's host code does */
static uint16_t fixed_half(int type, float f)
{
    return type == PICOLL_CUDA_T_F16 ? picoll_float_to_f16(f) : picoll_float_to_bf16(f);
}

static float fixed_float(int type, uint16_t h)
{
    return type == PICOLL_CUDA_T_F16 ? picoll_f16_to_float(h) : picoll_bf16_to_float(h);
}

static void fixed_case(void *generic, void *fixed, const char *name, int type, int op, int nr,
                       size_t n, uint64_t *epoch, dptr_t *ws, picoll_cuda_status_t *status_dev)
{
    size_t es = type == PICOLL_CUDA_T_F64 ? 8 : type == PICOLL_CUDA_T_F32 ? 4 : 2;
    size_t bytes = n * es;
    unsigned char *in = malloc(bytes * (size_t)nr), *want = malloc(bytes);
    unsigned char *got[2] = {malloc(bytes), malloc(bytes)};
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)n * 131u ^ (uint64_t)nr;
    for (size_t i = 0; i < n * (size_t)nr; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        float f = (float)(int)((x >> 40) % 20001u - 10000) / 1024.0f; /* exact in every format */
        f = f * (1.0f + (float)((x >> 20) & 1023u) / 4096.0f);        /* rounded in halves */
        unsigned char *e = in + i * es;
        if (type == PICOLL_CUDA_T_F64) {
            double d = (double)f / 3.0;
            memcpy(e, &d, 8);
        } else if (type == PICOLL_CUDA_T_F32) {
            memcpy(e, &f, 4);
        } else {
            uint16_t h = fixed_half(type, f);
            memcpy(e, &h, 2);
        }
    }
    for (size_t i = 0; i < n; i++) { /* rank r's element i is in[(r * n + i) * es] */
        if (type == PICOLL_CUDA_T_F64) {
            double acc, v;
            memcpy(&acc, in + i * 8, 8);
            for (int r = 1; r < nr; r++) {
                memcpy(&v, in + ((size_t)r * n + i) * 8, 8);
                acc += v;
            }
            memcpy(want + i * 8, &acc, 8);
        } else if (type == PICOLL_CUDA_T_F32) {
            float acc, v;
            memcpy(&acc, in + i * 4, 4);
            for (int r = 1; r < nr; r++) {
                memcpy(&v, in + ((size_t)r * n + i) * 4, 4);
                acc += v;
            }
            memcpy(want + i * 4, &acc, 4);
        } else {
            float acc = 0.0f;
            for (int r = 0; r < nr; r++) {
                uint16_t h;
                memcpy(&h, in + ((size_t)r * n + i) * 2, 2);
                float v = fixed_float(type, h);
                acc = r == 0 ? v : acc + v;
            }
            uint16_t h = fixed_half(type, acc);
            memcpy(want + i * 2, &h, 2);
        }
    }
    dptr_t src, dst;
    CK(cu.mem_alloc(&src, bytes + 1));
    CK(cu.mem_alloc(&dst, bytes + 1));
    CK(cu.htod(src, in, bytes));
    for (int which = 0; which < 2; which++) {
        picoll_cuda_kparams_t p;
        memset(&p, 0, sizeof(p));
        p.mode = PICOLL_CUDA_K_ONESHOT;
        p.type = type;
        p.op = op;
        p.esize = (int)es;
        p.nranks = nr;
        p.max_blocks = 4;
        p.peers = ((1u << nr) - 1u) & ~1u;
        p.epoch = ++*epoch;
        p.spin_ns = 10000000000ull;
        p.status = status_dev;
        p.bytes = bytes;
        p.src = (const char *)(uintptr_t)src;
        p.dst = (char *)(uintptr_t)dst + 1;
        for (int r = 0; r < nr; r++) {
            char *base = (char *)(uintptr_t)ws[r];
            p.flags[r] = (uint64_t *)(void *)base;
            p.slot[0][r] = base + PICOLL_CUDA_FLAGS_BYTES;
            p.slot[1][r] = base + PICOLL_CUDA_FLAGS_BYTES + 65536;
        }
        int blocks = picoll_cuda_kernel_blocks(&p);
        for (int r = 1; r < nr; r++) { /* the phantom ranks: input in place, arrived */
            CK(cu.htod((dptr_t)(uintptr_t)p.slot[p.epoch & 1][r], in + (size_t)r * bytes, bytes));
            for (int g = 0; g < blocks; g++) {
                CK(cu.htod((dptr_t)(uintptr_t)(p.flags[r] + (size_t)g * PICOLL_CUDA_FLAG_STRIDE),
                           &p.epoch, 8));
            }
        }
        void *params[] = {&p};
        CK(cu.launch(which ? fixed : generic, (unsigned)blocks, 1, 1, 64, 1, 1, 0, PER_THREAD,
                     params, NULL));
        CK(cu.stream_synchronize(PER_THREAD));
        CK(cu.dtoh(got[which], (dptr_t)(uintptr_t)p.dst, bytes));
    }
    EXPECT(memcmp(got[0], want, bytes) == 0,
           "%s, %zu elements: the generic kernel differs from "
           "the plain loop",
           name, n);
    EXPECT(memcmp(got[1], want, bytes) == 0,
           "%s, %zu elements: the entry differs from the plain "
           "loop (and the generic kernel)",
           name, n);
    CK(cu.mem_free(src));
    CK(cu.mem_free(dst));
    free(in);
    free(want);
    free(got[0]);
    free(got[1]);
}

static void mode_fixed(void)
{
    static const struct {
        const char *name;
        int type, op, nranks;
    } entries[] = {
#define SELF_FIXED_ENTRY(tag, e, dtype, op, nr) {PICOLL_CUDA_FIXED_NAME(tag, nr), e, op, nr},
#define SELF_FIXED_RANKS(tag, e, dtype, op)                                                        \
    PICOLL_CUDA_FIXED_RANKS(SELF_FIXED_ENTRY, tag, e, dtype, op)
        PICOLL_CUDA_FIXED_LIST(SELF_FIXED_RANKS)
#undef SELF_FIXED_RANKS
#undef SELF_FIXED_ENTRY
    };
    static const uint32_t image[4] = {0xBA55ED50u, 0, 0, 0}; /* a fatbin's header, no code */
    static const size_t counts[] = {1, 7, 9, 1000, 6001};
    void *mod, *generic;
    dptr_t ws[FIXED_RANKS_MAX], sd;
    picoll_cuda_status_t *status;
    uint64_t epoch = 0;
    choose_device(0);
    CK(cu.module_load(&mod, image));
    CK(cu.module_get_function(&generic, mod, PICOLL_CUDA_KERNEL_NAME));
    for (int r = 0; r < FIXED_RANKS_MAX; r++) {
        CK(cu.mem_alloc(&ws[r], PICOLL_CUDA_FLAGS_BYTES + 2 * 65536));
        CK(cu.memset_async(ws[r], 0, PICOLL_CUDA_FLAGS_BYTES, NULL));
    }
    CK(cu.mem_host_alloc((void **)&status, sizeof(*status), 3));
    memset(status, 0, sizeof(*status));
    CK(cu.mem_host_get_device_pointer(&sd, status, 0));
    CK(cu.stream_synchronize(NULL));
    EXPECT(sizeof(entries) / sizeof(entries[0]) == PICOLL_CUDA_FIXED_COUNT, "entry count");
    for (size_t e = 0; e < sizeof(entries) / sizeof(entries[0]); e++) {
        void *fn;
        EXPECT(entries[e].nranks <= FIXED_RANKS_MAX, "%s: more ranks than the test has",
               entries[e].name);
        CK(cu.module_get_function(&fn, mod, entries[e].name));
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            fixed_case(generic, fn, entries[e].name, entries[e].type, entries[e].op,
                       entries[e].nranks, counts[c], &epoch, ws,
                       (picoll_cuda_status_t *)(uintptr_t)sd);
        }
        printf("%s: as the generic kernel and the plain loop\n", entries[e].name);
    }
    EXPECT(!status->halted, "a kernel gave up");
    for (int r = 0; r < FIXED_RANKS_MAX; r++) {
        CK(cu.mem_free(ws[r]));
    }
}

static void mode_freeze(void)
{
    kernel_env_t k;
    picoll_cuda_kparams_t p;
    dptr_t buf;
    choose_device(0);
    kernel_env(&k);
    kernel_params(&k, 2, 1, &p); /* rank 1 never arrives: a plain kernel would time out */
    CK(cu.mem_alloc(&buf, 40000));
    p.bytes = 40000;
    p.src = p.dst = (char *)(uintptr_t)buf;
    cu.freeze_next_kernel();
    int blocks = kernel_launch(&k, &p);
    EXPECT(blocks > 1, "the frozen launch should have several blocks");
    double t0 = now_s();
    for (int g = 0; g < blocks; g++) {
        while (k.status->started[g] != 1) {
            EXPECT(now_s() - t0 < 10, "block %d of a frozen kernel never started", g);
            usleep(1000);
        }
    }
    usleep(300000);
    for (int g = 0; g < blocks; g++) {
        EXPECT(k.status->done[g] == 0, "block %d of a frozen kernel finished", g);
    }
    EXPECT(!k.status->halted, "a frozen kernel gave up");
    EXPECT(((uint64_t *)(uintptr_t)k.ws[0])[0] == 0, "a frozen kernel arrived");
    printf("passed\n");
    fflush(stdout);
    _exit(0); /* its stream's worker never returns */
}

static void mode_counts(void)
{
    long before[256], after[256];
    int n = cu.call_counts(before, 256), alloc = -1;
    dptr_t d;
    EXPECT(n > 40 && n <= 256, "fakecuda_call_counts says %d entry points", n);
    for (int i = 0; i < n; i++) {
        EXPECT(cu.call_name(i) != NULL, "entry point %d has no name", i);
        alloc = strcmp(cu.call_name(i), "cuMemAlloc_v2") == 0 ? i : alloc;
    }
    EXPECT(alloc >= 0 && cu.call_name(n) == NULL, "names: cuMemAlloc_v2 missing or past the end");
    choose_device(0);
    cu.call_counts(before, n);
    CK(cu.mem_alloc(&d, 8));
    CK(cu.mem_free(d));
    cu.call_counts(after, n);
    EXPECT(after[alloc] - before[alloc] == 1, "one cuMemAlloc_v2 counted %ld times",
           after[alloc] - before[alloc]);
}

/* ---- buffer ids, and mappings of freed allocations ---- */

#define BUFFER_ID_ATTR 7 /* CU_POINTER_ATTRIBUTE_BUFFER_ID */

/* p's buffer id, asked both ways (they must agree, and never be 0). */
static unsigned long long buffer_id(dptr_t p)
{
    unsigned long long id = 0, id2 = 0;
    int attr = BUFFER_ID_ATTR;
    void *data = &id2;
    CK(cu.pointer_get_attribute(&id, BUFFER_ID_ATTR, p));
    CK(cu.pointer_get_attributes(1, &attr, &data, p));
    EXPECT(id != 0 && id == id2, "buffer id of %#llx: %llu (cuPointerGetAttribute), %llu (plural)",
           p, id, id2);
    return id;
}

static void mode_bufid(void)
{
    dptr_t a, b, c;
    choose_device(0);
    CK(cu.mem_alloc(&a, 4096));
    unsigned long long ida = buffer_id(a);
    EXPECT(buffer_id(a + 1000) == ida, "two addresses of one allocation have two buffer ids");
    CK(cu.mem_free(a));
    CK(cu.mem_alloc(&b, 4096));
    EXPECT(b == a, "the freed range was not handed out again (%#llx, then %#llx)", a, b);
    EXPECT(buffer_id(b) != ida, "an allocation at a freed one's address kept its buffer id %llu",
           ida);
    CK(cu.mem_alloc(&c, 4096));
    EXPECT(buffer_id(c) != buffer_id(b), "two live allocations share a buffer id");
    CK(cu.mem_free(b));
    CK(cu.mem_free(c));
}

/* What the owner sends of an allocation: its handle, address and buffer id. */
typedef struct {
    ipc_t h;
    dptr_t addr;
    unsigned long long id;
} freed_msg_t;

#define FREED_BYTES 8192

/* The owner: allocates FREED_BYTES of value 0x11 and sends them; at 'f' frees that allocation,
 * mapped or not, and makes another of value 0x22 (at the same address), sent too; frees it when
 * the other side closes its pipe. */
static void freed_owner(int rd, int wr)
{
    unsigned char buf[FREED_BYTES];
    char c = 'f';
    dptr_t d = 0;
    load_driver();
    choose_device(0);
    for (int round = 1; c == 'f'; round++) {
        freed_msg_t m;
        if (d != 0) {
            CK(cu.mem_free(d)); /* still mapped by the other: FAKECUDA_FREE_MAPPED lets it */
        }
        CK(cu.mem_alloc(&d, sizeof(buf)));
        memset(buf, 0x11 * round, sizeof(buf));
        CK(cu.htod(d, buf, sizeof(buf)));
        CK(cu.ipc_get(&m.h, d));
        m.addr = d;
        m.id = buffer_id(d);
        EXPECT(write(wr, &m, sizeof(m)) == (ssize_t)sizeof(m), "owner: cannot send");
        if (read(rd, &c, 1) != 1) {
            c = 0;
        }
    }
    CK(cu.mem_free(d));
    exit(0);
}

/* how 0 (ipc-freed): the owner frees the allocation mapped here and makes another at its address;
 * the stale mapping closes and the new one reads the new bytes. how 1 reads through the stale
 * mapping with a copy, how 2 with a kernel: rule "freed-mapping". */
static void freed_mapping(int how)
{
    int to_child, from_child, st;
    freed_msg_t m[2];
    dptr_t p, q;
    unsigned char buf[FREED_BYTES];
    setenv("FAKECUDA_FREE_MAPPED", "1", 1);
    pid_t pid = spawn_child(freed_owner, &to_child, &from_child);
    load_driver();
    choose_device(0);
    EXPECT(read(from_child, &m[0], sizeof(m[0])) == (ssize_t)sizeof(m[0]), "no first handle");
    CK(cu.ipc_open(&p, m[0].h, 1));
    CK(cu.dtoh(buf, p, sizeof(buf)));
    EXPECT(buf[0] == 0x11 && buf[FREED_BYTES - 1] == 0x11, "the first allocation reads %#x",
           buf[0]);
    EXPECT(write(to_child, "f", 1) == 1, "cannot tell the owner");
    EXPECT(read(from_child, &m[1], sizeof(m[1])) == (ssize_t)sizeof(m[1]), "no second handle");
    EXPECT(m[1].addr == m[0].addr && m[1].id != m[0].id,
           "the second allocation is at %#llx (buffer id %llu), the first was at %#llx (%llu)",
           m[1].addr, m[1].id, m[0].addr, m[0].id);
    if (how == 1) {
        cu.dtoh(buf, p, sizeof(buf));
    } else if (how == 2) {
        kernel_env_t k;
        picoll_cuda_kparams_t kp;
        kernel_env(&k);
        kernel_params(&k, 1, 1, &kp);
        kp.bytes = 4096;
        kp.src = (void *)(uintptr_t)p;
        kp.dst = (char *)(uintptr_t)k.ws[1] + PICOLL_CUDA_FLAGS_BYTES;
        kernel_launch(&k, &kp);
        cu.stream_synchronize(PER_THREAD);
    }
    CK(cu.ipc_close(p)); /* a mapping of a freed allocation closes */
    CK(cu.ipc_open(&q, m[1].h, 1));
    CK(cu.dtoh(buf, q, sizeof(buf)));
    EXPECT(buf[0] == 0x22 && buf[FREED_BYTES - 1] == 0x22, "the second allocation reads %#x",
           buf[0]);
    CK(cu.ipc_close(q));
    close(to_child);
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the owner failed");
}

/* ---- rules: each must end the process with "FAIL fakecuda: <rule>" ---- */

static void rule_free_while_mapped(void)
{
    int down[2], up[2];
    char c;
    EXPECT(pipe(down) == 0 && pipe(up) == 0, "pipe failed");
    pid_t pid = fork();
    if (pid == 0) { /* maps the handle and keeps it until the owner is gone */
        ipc_t h;
        dptr_t p;
        close(down[1]);
        close(up[0]);
        load_driver();
        choose_device(0);
        EXPECT(read(down[0], &h, sizeof(h)) == (ssize_t)sizeof(h), "child: no handle");
        CK(cu.ipc_open(&p, h, 1));
        EXPECT(write(up[1], "o", 1) == 1, "child: cannot tell the owner");
        while (read(down[0], &c, 1) > 0) {
        }
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    load_driver();
    choose_device(0);
    dptr_t d;
    ipc_t h;
    CK(cu.mem_alloc(&d, 4096));
    CK(cu.ipc_get(&h, d));
    EXPECT(write(down[1], &h, sizeof(h)) == (ssize_t)sizeof(h), "cannot send the handle");
    EXPECT(read(up[0], &c, 1) == 1, "the child died");
    cu.mem_free(d); /* still mapped by the child */
}

static void rule_stream_context(void)
{
    stream_t s;
    ctx_t other;
    choose_device(0);
    CK(cu.stream_create(&s, 0));
    CK(cu.ctx_create(&other, 0, 0)); /* another context on the same device, now current */
    cu.stream_synchronize(s);
}

static void rule_event_context(void)
{
    event_t e;
    ctx_t other;
    choose_device(0);
    CK(cu.event_create(&e, 0));
    CK(cu.ctx_create(&other, 0, 0));
    cu.event_record(e, NULL); /* the legacy stream of the other context */
}

static void rule_kernel_context(void)
{
    kernel_env_t k;
    picoll_cuda_kparams_t p;
    ctx_t primary = choose_device(0), other;
    dptr_t buf;
    kernel_env(&k);
    CK(cu.ctx_create(&other, 0, 0));
    CK(cu.mem_alloc(&buf, 4096)); /* memory of the other context */
    CK(cu.ctx_set_current(primary));
    kernel_params(&k, 1, 1, &p);
    p.bytes = 4096;
    p.src = (const char *)(uintptr_t)buf;
    p.dst = (char *)(uintptr_t)k.ws[1] + PICOLL_CUDA_FLAGS_BYTES;
    kernel_launch(&k, &p);
    cu.stream_synchronize(PER_THREAD);
}

static void rule_kernel_bounds(void)
{
    kernel_env_t k;
    picoll_cuda_kparams_t p;
    static char pageable[4096];
    choose_device(0);
    kernel_env(&k);
    kernel_params(&k, 1, 1, &p);
    p.bytes = sizeof(pageable);
    p.src = pageable; /* host memory the driver does not map for kernels */
    p.dst = (char *)(uintptr_t)k.ws[1] + PICOLL_CUDA_FLAGS_BYTES;
    kernel_launch(&k, &p);
    cu.stream_synchronize(PER_THREAD);
}

/* A one-shot sum of 2 ranks whose workspace slots start 4 bytes past their 16-byte lines (picoll
 * makes them 16-aligned): the kernel's 16-byte loads of the slots are misaligned (rule
 * "kernel-align"). */
static void rule_kernel_align(void)
{
    kernel_env_t k;
    picoll_cuda_kparams_t p;
    dptr_t src, dst;
    const size_t n = 4096;
    choose_device(0);
    kernel_env(&k);
    kernel_params(&k, 2, 1, &p);
    for (int r = 0; r < 2; r++) {
        p.slot[0][r] += 4;
        p.slot[1][r] += 4;
    }
    CK(cu.mem_alloc(&src, n));
    CK(cu.mem_alloc(&dst, n));
    CK(cu.memset_async(src, 0, n, NULL));
    p.bytes = n;
    p.src = (const char *)(uintptr_t)src;
    p.dst = (char *)(uintptr_t)dst;
    uint64_t epoch = 1;
    for (int g = 0; g < picoll_cuda_kernel_blocks(&p); g++) { /* the phantom rank 1 arrived */
        uint64_t *f = p.flags[1];
        CK(cu.htod((dptr_t)(uintptr_t)(f + (size_t)g * PICOLL_CUDA_FLAG_STRIDE), &epoch, 8));
    }
    kernel_launch(&k, &p);
    cu.stream_synchronize(PER_THREAD);
}

static void mode_reset(void)
{
    ctx_t c = choose_device(0), again = NULL;
    unsigned long long id0 = 0, id1 = 0, id2 = 0;
    dptr_t d, e;
    void *host;
    CK(cu.ctx_get_id(c, &id0));
    CK(cu.ctx_get_id(NULL, &id2));
    EXPECT(id0 != 0 && id2 == id0, "cuCtxGetId: %llu for the handle, %llu for the current one", id0,
           id2);
    CK(cu.mem_alloc(&d, 4096));
    CK(cu.mem_host_alloc(&host, 4096, 3));
    CK(cu.primary_reset(0));
    CK(cu.ctx_get_id(c, &id1));
    EXPECT(id1 != id0, "the primary context's id did not change with the reset (%llu)", id0);
    EXPECT(cu.mem_free(d) == 1, "device memory of the reset context could be freed again");
    EXPECT(cu.mem_host_get_device_pointer(&e, host, 0) == 1, "pinned memory of the reset context "
                                                             "is still known");
    CK(cu.primary_ctx_retain(&again, 0));
    EXPECT(again == c, "the primary context's handle changed with the reset: %p, was %p", again, c);
    CK(cu.mem_alloc(&e, 4096));
    EXPECT(e == d, "the reset context's memory was not handed out again (%#llx, was %#llx)", e, d);
    CK(cu.mem_free(e));
}

static void rule_stale_handle(void)
{
    static const uint32_t image[4] = {0xBA55ED50u, 0, 0, 0};
    void *mod, *fn;
    choose_device(0);
    CK(cu.module_load(&mod, image));
    CK(cu.primary_reset(0));
    cu.module_get_function(&fn, mod, PICOLL_CUDA_KERNEL_NAME);
}

/* The helper library named libpicoll_emu_caller.so, next to this program. */
static void *caller_lib(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    EXPECT(n > 0, "readlink /proc/self/exe failed");
    exe[n] = '\0';
    snprintf(path, sizeof(path), "%s/libpicoll_emu_caller.so", dirname(exe));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    EXPECT(h != NULL, "cannot load %s: %s", path, dlerror());
    return h;
}

static void rule_unchosen(int allowed)
{
    void *lib = caller_lib();
    int (*call1)(int (*)(void *), void *) =
        (int (*)(int (*)(void *), void *))dlsym(lib, "emu_caller_call1");
    int (*call2)(int (*)(void *, int), void *, int) =
        (int (*)(int (*)(void *, int), void *, int))dlsym(lib, "emu_caller_call2");
    EXPECT(call1 != NULL && call2 != NULL, "the caller library lacks its functions");
    ctx_t c = NULL;
    if (allowed) {
        /* the application chose device 0: picoll may make its context current */
        ctx_t mine = choose_device(0);
        CK(cu.ctx_set_current(NULL));
        CK(call1((int (*)(void *))cu.ctx_set_current, mine));
        CK(call2((int (*)(void *, int))cu.primary_ctx_retain, &c, 0));
        return;
    }
    /* nothing chosen, no memory: what picoll's defect 1 did on device 0 */
    call2((int (*)(void *, int))cu.primary_ctx_retain, &c, 1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "ipc") == 0) {
        mode_ipc();
    } else if (strcmp(mode, "ipc-rules") == 0) {
        mode_ipc_rules();
    } else if (strcmp(mode, "rule-free-while-mapped") == 0) {
        rule_free_while_mapped();
    } else if (strcmp(mode, "ipc-freed") == 0) {
        freed_mapping(0);
    } else if (strcmp(mode, "rule-freed-mapping") == 0) {
        freed_mapping(1);
    } else if (strcmp(mode, "rule-freed-mapping-kernel") == 0) {
        freed_mapping(2);
    } else {
        load_driver();
        if (strcmp(mode, "streams") == 0) {
            mode_streams();
        } else if (strcmp(mode, "queues") == 0) {
            mode_queues();
        } else if (strcmp(mode, "events") == 0) {
            mode_events();
        } else if (strcmp(mode, "capture") == 0) {
            mode_capture();
        } else if (strcmp(mode, "kernel") == 0) {
            mode_kernel();
        } else if (strcmp(mode, "fixed") == 0) {
            mode_fixed();
        } else if (strcmp(mode, "freeze") == 0) {
            mode_freeze();
        } else if (strcmp(mode, "counts") == 0) {
            mode_counts();
        } else if (strcmp(mode, "bufid") == 0) {
            mode_bufid();
        } else if (strcmp(mode, "rule-stream-context") == 0) {
            rule_stream_context();
        } else if (strcmp(mode, "rule-event-context") == 0) {
            rule_event_context();
        } else if (strcmp(mode, "rule-kernel-context") == 0) {
            rule_kernel_context();
        } else if (strcmp(mode, "rule-kernel-bounds") == 0) {
            rule_kernel_bounds();
        } else if (strcmp(mode, "rule-kernel-align") == 0) {
            rule_kernel_align();
        } else if (strcmp(mode, "reset") == 0) {
            mode_reset();
        } else if (strcmp(mode, "rule-stale-handle") == 0) {
            rule_stale_handle();
        } else if (strcmp(mode, "rule-unchosen-device") == 0) {
            rule_unchosen(0);
        } else if (strcmp(mode, "unchosen-ok") == 0) {
            rule_unchosen(1);
        } else {
            fail("unknown mode '%s'", mode);
        }
    }
    if (strncmp(mode, "rule-", 5) == 0) {
        fail("%s: the emulated GPU let the broken rule pass", mode);
    }
    printf("passed\n");
    return 0;
}
