#include "build-config.h"
#include "mem/cudrv.h"
#include "util/dltable.h"
#include "util/fatal.h"
#include "util/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

picoll_cudrv_t picoll_cu;

static pthread_once_t cudrv_once = PTHREAD_ONCE_INIT;
static picoll_status_t cudrv_status = PICOLL_ERR_NOT_SUPPORTED;
static int cudrv_devices, cudrv_version;
static char cudrv_why[256] = "CUDA driver not loaded yet";

/* The exported names: versioned ones (_v2) where cuda.h maps the plain name to one, and the
 * legacy-default-stream variants (not _ptds/_ptsz) of the stream-ordered calls. */
#define CUDRV_SYM(field, name) PICOLL_DL_SYM(picoll_cudrv_t, field, name)
static const picoll_dl_sym_t cudrv_syms[] = {
    CUDRV_SYM(init, "cuInit"),
    CUDRV_SYM(get_error_string, "cuGetErrorString"),
    CUDRV_SYM(device_get_count, "cuDeviceGetCount"),
    CUDRV_SYM(device_get, "cuDeviceGet"),
    CUDRV_SYM(pointer_get_attribute, "cuPointerGetAttribute"),
    CUDRV_SYM(pointer_get_attributes, "cuPointerGetAttributes"),
    CUDRV_SYM(ctx_get_current, "cuCtxGetCurrent"),
    CUDRV_SYM(ctx_set_current, "cuCtxSetCurrent"),
    CUDRV_SYM(ctx_push_current, "cuCtxPushCurrent_v2"),
    CUDRV_SYM(ctx_pop_current, "cuCtxPopCurrent_v2"),
    CUDRV_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
    CUDRV_SYM(memcpy_async, "cuMemcpyAsync"),
    CUDRV_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2"),
    CUDRV_SYM(mem_host_alloc, "cuMemHostAlloc"),
    CUDRV_SYM(mem_free_host, "cuMemFreeHost"),
    CUDRV_SYM(stream_synchronize, "cuStreamSynchronize"),
    CUDRV_SYM(stream_create, "cuStreamCreate"),
    CUDRV_SYM(driver_get_version, "cuDriverGetVersion"),
    CUDRV_SYM(device_get_attribute, "cuDeviceGetAttribute"),
    CUDRV_SYM(device_get_pci_bus_id, "cuDeviceGetPCIBusId"),
    CUDRV_SYM(device_get_by_pci_bus_id, "cuDeviceGetByPCIBusId"),
    CUDRV_SYM(device_can_access_peer, "cuDeviceCanAccessPeer"),
    CUDRV_SYM(ctx_get_device, "cuCtxGetDevice"),
    CUDRV_SYM(mem_alloc, "cuMemAlloc_v2"),
    CUDRV_SYM(mem_free, "cuMemFree_v2"),
    CUDRV_SYM(memset_d8_async, "cuMemsetD8Async"),
    CUDRV_SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2"),
    CUDRV_SYM(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2"),
    CUDRV_SYM(mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2"),
    CUDRV_SYM(ipc_get_mem_handle, "cuIpcGetMemHandle"),
    CUDRV_SYM(ipc_open_mem_handle, "cuIpcOpenMemHandle_v2"),
    CUDRV_SYM(ipc_close_mem_handle, "cuIpcCloseMemHandle"),
    CUDRV_SYM(stream_is_capturing, "cuStreamIsCapturing"),
    CUDRV_SYM(thread_exchange_capture_mode, "cuThreadExchangeStreamCaptureMode"),
    CUDRV_SYM(module_load_data, "cuModuleLoadData"),
    CUDRV_SYM(module_get_function, "cuModuleGetFunction"),
    CUDRV_SYM(func_get_attribute, "cuFuncGetAttribute"),
    CUDRV_SYM(occupancy_max_blocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
    CUDRV_SYM(launch_kernel, "cuLaunchKernel"),
};

static void cudrv_load_once(void)
{
    picoll_cudrv_t table;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    picoll_cu_result_t rc;

    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(cudrv_why, sizeof(cudrv_why), "no CUDA driver: %s", e ? e : "dlopen failed");
        goto report;
    }
    const char *missing = picoll_dl_fill(lib, cudrv_syms, PICOLL_DL_COUNT(cudrv_syms), &table);
    if (missing != NULL) {
        snprintf(cudrv_why, sizeof(cudrv_why), "CUDA driver lacks %s", missing);
        goto close_lib;
    }
    rc = table.init(0);
    if (rc != 0) {
        const char *s = NULL;
        table.get_error_string(rc, &s);
        snprintf(cudrv_why, sizeof(cudrv_why), "cuInit failed: %s (%d)", s ? s : "?", rc);
        goto close_lib;
    }
    rc = table.device_get_count(&cudrv_devices);
    if (rc != 0 || cudrv_devices <= 0) {
        cudrv_devices = 0;
        snprintf(cudrv_why, sizeof(cudrv_why), "CUDA driver loaded but no device is visible");
        goto close_lib;
    }
    /* optional entry points: NULL where this driver lacks them */
    *(void **)&table.ctx_get_id = dlsym(lib, "cuCtxGetId");
    *(void **)&table.ctx_get_exec_affinity = dlsym(lib, "cuCtxGetExecAffinity");
    *(void **)&table.stream_get_ctx = dlsym(lib, "cuStreamGetCtx");
    *(void **)&table.stream_wait_value64 = dlsym(lib, "cuStreamWaitValue64_v2");
    *(void **)&table.event_create = dlsym(lib, "cuEventCreate");
    *(void **)&table.event_destroy = dlsym(lib, "cuEventDestroy_v2");
    *(void **)&table.event_record = dlsym(lib, "cuEventRecord");
    *(void **)&table.event_query = dlsym(lib, "cuEventQuery");
    *(void **)&table.event_synchronize = dlsym(lib, "cuEventSynchronize");
    *(void **)&table.launch_host_func = dlsym(lib, "cuLaunchHostFunc");
    *(void **)&table.ctx_synchronize = dlsym(lib, "cuCtxSynchronize");
    *(void **)&table.stream_begin_capture = dlsym(lib, "cuStreamBeginCapture_v2");
    *(void **)&table.stream_end_capture = dlsym(lib, "cuStreamEndCapture");
    *(void **)&table.graph_instantiate = dlsym(lib, "cuGraphInstantiateWithFlags");
    *(void **)&table.graph_launch = dlsym(lib, "cuGraphLaunch");
    *(void **)&table.graph_destroy = dlsym(lib, "cuGraphDestroy");
    *(void **)&table.graph_exec_destroy = dlsym(lib, "cuGraphExecDestroy");
    picoll_cu = table;
    if (table.driver_get_version(&cudrv_version) != 0) {
        cudrv_version = 0;
    }
    snprintf(cudrv_why, sizeof(cudrv_why), "CUDA driver %d.%d loaded, %d device(s)",
             cudrv_version / 1000, cudrv_version % 1000 / 10, cudrv_devices);
    cudrv_status = PICOLL_OK;
    goto report; /* keep the library loaded for the life of the process */
close_lib:
    dlclose(lib);
report:
    picoll_debug("%s", cudrv_why);
}

picoll_status_t picoll_cudrv_load(void)
{
    pthread_once(&cudrv_once, cudrv_load_once);
    return cudrv_status;
}

int picoll_cudrv_device_count(void)
{
    return picoll_cudrv_load() == PICOLL_OK ? cudrv_devices : 0;
}

const char *picoll_cudrv_why(void)
{
    picoll_cudrv_load();
    return cudrv_why;
}

unsigned long long picoll_cudrv_ctx_id(picoll_cu_context_t ctx)
{
    unsigned long long id = 0;
    if (ctx == NULL || picoll_cu.ctx_get_id == NULL || picoll_cu.ctx_get_id(ctx, &id) != 0) {
        return 0;
    }
    return id;
}

picoll_status_t picoll_cudrv_check(picoll_cu_result_t rc, const char *call)
{
    /* log once per call name: the names are string literals, so their addresses identify them */
    static const char *logged[16];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    const char *s = NULL;
    int first = 1;

    if (rc == 0) {
        return PICOLL_OK;
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < sizeof(logged) / sizeof(logged[0]); i++) {
        if (logged[i] == call) {
            first = 0;
            break;
        }
        if (logged[i] == NULL) {
            logged[i] = call;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (first) {
        picoll_cu.get_error_string(rc, &s);
        picoll_error("%s failed: %s (CUresult %d)", call, s ? s : "unknown error", rc);
    }
    return PICOLL_ERR_CUDA;
}

void picoll_cudrv_fatal(picoll_cu_result_t rc, const char *call, const char *coll)
{
    const char *s = NULL;
    picoll_cu.get_error_string(rc, &s);
    picoll_fatal("%s on the device: %s failed (%s, CUresult %d): aborting the job", coll, call,
                 s != NULL ? s : "unknown error", rc);
}

/* picoll's own non-blocking stream in ctx (current), made at first use and kept for the life of
 * the process; NULL if it cannot be made. */
static picoll_cu_stream_t cudrv_own_stream(picoll_cu_context_t ctx)
{
    static struct {
        picoll_cu_context_t ctx;
        unsigned long long id; /* the context's id: a reset since took the stream with it */
        picoll_cu_stream_t stream;
    } own[16];
    static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
    picoll_cu_stream_t s = NULL;
    unsigned long long id = picoll_cudrv_ctx_id(ctx);

    pthread_mutex_lock(&own_lock);
    for (int i = 0; i < 16; i++) {
        if (own[i].ctx == ctx && own[i].id == id) {
            s = own[i].stream;
            break;
        }
        if (own[i].ctx == NULL || own[i].ctx == ctx) {
            if (picoll_cudrv_check(picoll_cu.stream_create(&s, PICOLL_CU_STREAM_NON_BLOCKING),
                                   "cuStreamCreate") == PICOLL_OK) {
                own[i].ctx = ctx;
                own[i].id = id;
                own[i].stream = s;
            }
            break;
        }
    }
    pthread_mutex_unlock(&own_lock);
    return s;
}

picoll_status_t picoll_cudrv_copy(void *dst, const void *src, size_t n, picoll_cu_context_t ctx)
{
    picoll_cu_context_t popped;
    picoll_cu_stream_t stream = PICOLL_CU_STREAM_PER_THREAD;
    picoll_status_t status = PICOLL_OK;
    int mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED, exchanged, capture = 0;

    if (n == 0) {
        return PICOLL_OK;
    }
    PICOLL_CU_TRY(picoll_cu.ctx_push_current(ctx), "cuCtxPushCurrent");
    /* relaxed capture mode: a CUDA graph captured meanwhile (global mode, any thread) must not
     * make this synchronous copy fail */
    exchanged = picoll_cu.thread_exchange_capture_mode(&mode) == 0;
    /* on this thread's per-thread default stream, which synchronises with the legacy one (so the
     * copy follows the application's work queued there) but not with other threads' streams, nor
     * with a blocking stream being captured; unless that stream is itself being captured */
    if (picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &capture) != 0 ||
        capture != PICOLL_CU_STREAM_CAPTURE_STATUS_NONE) {
        stream = cudrv_own_stream(ctx);
        status = stream == NULL ? PICOLL_ERR_CUDA : PICOLL_OK;
    }
    if (status == PICOLL_OK) {
        status = picoll_cudrv_check(picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)dst,
                                                           (picoll_cu_deviceptr_t)(uintptr_t)src, n,
                                                           stream),
                                    "cuMemcpyAsync");
    }
    if (status == PICOLL_OK) {
        status = picoll_cudrv_check(picoll_cu.stream_synchronize(stream), "cuStreamSynchronize");
    }
    if (exchanged) {
        picoll_cu.thread_exchange_capture_mode(&mode);
    }
    (void)picoll_cudrv_check(picoll_cu.ctx_pop_current(&popped), "cuCtxPopCurrent");
    return status;
}

picoll_status_t picoll_cudrv_pipe_open(picoll_cudrv_pipe_t *p, picoll_cu_context_t ctx, int nev)
{
    picoll_cu_context_t popped;
    int capture = 0;
    p->nev = 0;
    p->exchanged = 0;
    if (picoll_cu.event_create == NULL || picoll_cu.event_record == NULL ||
        picoll_cu.event_synchronize == NULL || picoll_cu.event_destroy == NULL ||
        nev > PICOLL_CUDRV_PIPE_MAX) {
        return PICOLL_ERR_NOT_SUPPORTED;
    }
    picoll_status_t status = PICOLL_OK;
    PICOLL_CU_TRY(picoll_cu.ctx_push_current(ctx), "cuCtxPushCurrent");
    p->mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
    p->exchanged = picoll_cu.thread_exchange_capture_mode(&p->mode) == 0;
    /* the stream of picoll_cudrv_copy, for the same reasons */
    p->stream = PICOLL_CU_STREAM_PER_THREAD;
    if (picoll_cu.stream_is_capturing(PICOLL_CU_STREAM_PER_THREAD, &capture) != 0 ||
        capture != PICOLL_CU_STREAM_CAPTURE_STATUS_NONE) {
        p->stream = cudrv_own_stream(ctx);
        status = p->stream == NULL ? PICOLL_ERR_CUDA : PICOLL_OK;
    }
    while (status == PICOLL_OK && p->nev < nev) {
        status = picoll_cudrv_check(
            picoll_cu.event_create(&p->ev[p->nev], PICOLL_CU_EVENT_DISABLE_TIMING),
            "cuEventCreate");
        p->nev += status == PICOLL_OK;
    }
    if (status != PICOLL_OK) {
        for (int i = 0; i < p->nev; i++) {
            picoll_cu.event_destroy(p->ev[i]);
        }
        if (p->exchanged) {
            picoll_cu.thread_exchange_capture_mode(&p->mode);
        }
        picoll_cu.ctx_pop_current(&popped);
    }
    return status;
}

picoll_status_t picoll_cudrv_pipe_copy(picoll_cudrv_pipe_t *p, void *dst, const void *src, size_t n,
                                       int ev)
{
    picoll_status_t status = picoll_cudrv_check(
        picoll_cu.memcpy_async((picoll_cu_deviceptr_t)(uintptr_t)dst,
                               (picoll_cu_deviceptr_t)(uintptr_t)src, n, p->stream),
        "cuMemcpyAsync");
    if (status == PICOLL_OK && ev >= 0) {
        status = picoll_cudrv_check(picoll_cu.event_record(p->ev[ev], p->stream), "cuEventRecord");
    }
    return status;
}

picoll_status_t picoll_cudrv_pipe_wait(picoll_cudrv_pipe_t *p, int ev)
{
    return picoll_cudrv_check(picoll_cu.event_synchronize(p->ev[ev]), "cuEventSynchronize");
}

picoll_status_t picoll_cudrv_pipe_close(picoll_cudrv_pipe_t *p)
{
    picoll_cu_context_t popped;
    picoll_status_t status =
        picoll_cudrv_check(picoll_cu.stream_synchronize(p->stream), "cuStreamSynchronize");
    for (int i = 0; i < p->nev; i++) {
        picoll_cu.event_destroy(p->ev[i]);
    }
    p->nev = 0;
    if (p->exchanged) {
        picoll_cu.thread_exchange_capture_mode(&p->mode);
    }
    (void)picoll_cudrv_check(picoll_cu.ctx_pop_current(&popped), "cuCtxPopCurrent");
    return status;
}
