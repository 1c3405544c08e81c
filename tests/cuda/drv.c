#include "drv.h"
#include "mpitest.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

drv_t drv;

/* The exported names: the versioned ones that cuda.h maps the plain names to, and the
 * legacy-default-stream variants (not _ptds/_ptsz): the per-thread stream is asked for by its
 * handle, CU_STREAM_PER_THREAD. required: the test cannot run at all without it. */
#define DRV_SYM(f, name, req)                                                                      \
    {                                                                                              \
        .offset = offsetof(drv_t, f), .symbol = (name), .required = (req)                          \
    }
static const struct {
    size_t offset;
    const char *symbol;
    int required;
} drv_syms[] = {
    DRV_SYM(init, "cuInit", 1),
    DRV_SYM(get_error_string, "cuGetErrorString", 1),
    DRV_SYM(device_get_count, "cuDeviceGetCount", 1),
    DRV_SYM(device_get, "cuDeviceGet", 1),
    DRV_SYM(device_get_attribute, "cuDeviceGetAttribute", 0),
    DRV_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 1),
    DRV_SYM(ctx_set_current, "cuCtxSetCurrent", 1),
    DRV_SYM(ctx_get_current, "cuCtxGetCurrent", 1),
    DRV_SYM(ctx_push_current, "cuCtxPushCurrent_v2", 0),
    DRV_SYM(ctx_pop_current, "cuCtxPopCurrent_v2", 0),
    DRV_SYM(ctx_create, "cuCtxCreate_v2", 0),
    DRV_SYM(primary_ctx_reset, "cuDevicePrimaryCtxReset_v2", 0),
    DRV_SYM(ctx_destroy, "cuCtxDestroy_v2", 0),
    DRV_SYM(ctx_synchronize, "cuCtxSynchronize", 1),
    DRV_SYM(mem_alloc, "cuMemAlloc_v2", 1),
    DRV_SYM(mem_alloc_managed, "cuMemAllocManaged", 0),
    DRV_SYM(mem_free, "cuMemFree_v2", 1),
    DRV_SYM(memcpy_htod, "cuMemcpyHtoD_v2", 1),
    DRV_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2", 1),
    DRV_SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", 0),
    DRV_SYM(memset_d8, "cuMemsetD8_v2", 0),
    DRV_SYM(memset_d8_async, "cuMemsetD8Async", 0),
    DRV_SYM(mem_host_alloc, "cuMemHostAlloc", 0),
    DRV_SYM(mem_free_host, "cuMemFreeHost", 0),
    DRV_SYM(stream_create, "cuStreamCreate", 0),
    DRV_SYM(stream_destroy, "cuStreamDestroy_v2", 0),
    DRV_SYM(stream_synchronize, "cuStreamSynchronize", 0),
    DRV_SYM(launch_host_func, "cuLaunchHostFunc", 0),
    DRV_SYM(stream_begin_capture, "cuStreamBeginCapture_v2", 0),
    DRV_SYM(stream_end_capture, "cuStreamEndCapture", 0),
    DRV_SYM(graph_destroy, "cuGraphDestroy", 0),
    DRV_SYM(graph_instantiate, "cuGraphInstantiateWithFlags", 0),
    DRV_SYM(graph_launch, "cuGraphLaunch", 0),
    DRV_SYM(graph_exec_destroy, "cuGraphExecDestroy", 0),
    DRV_SYM(event_create, "cuEventCreate", 0),
    DRV_SYM(event_record, "cuEventRecord", 0),
    DRV_SYM(event_synchronize, "cuEventSynchronize", 0),
    DRV_SYM(event_destroy, "cuEventDestroy_v2", 0),
    DRV_SYM(event_query, "cuEventQuery", 0),
    DRV_SYM(stream_wait_event, "cuStreamWaitEvent", 0),
    DRV_SYM(stream_is_capturing, "cuStreamIsCapturing", 0),
    DRV_SYM(pointer_get_attribute, "cuPointerGetAttribute", 0),
    DRV_SYM(pointer_get_attributes, "cuPointerGetAttributes", 0),
    DRV_SYM(freeze_next_kernel, "fakecuda_freeze_next_kernel", 0),
    DRV_SYM(delay_launches, "fakecuda_delay_launches", 0),
    DRV_SYM(call_counts, "fakecuda_call_counts", 0),
    DRV_SYM(call_name, "fakecuda_call_name", 0),
    DRV_SYM(last_kernel, "fakecuda_last_kernel", 0),
    DRV_SYM(fake_attribute_queries, "fakecuda_attribute_queries", 0),
    DRV_SYM(fake_module_loads, "fakecuda_module_loads", 0),
};
#define DRV_NSYMS (sizeof(drv_syms) / sizeof(drv_syms[0]))

static void *field(size_t offset)
{
    void *fn;
    memcpy(&fn, (char *)&drv + offset, sizeof(fn));
    return fn;
}

int drv_load(char *why, size_t len)
{
    static int devices = -1;
    static char reason[256];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    void *lib;
    cu_result_t rc;

    pthread_mutex_lock(&lock);
    if (devices >= 0) {
        goto out;
    }
    devices = 0;
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(reason, sizeof(reason), "no CUDA driver: %s", e ? e : "dlopen failed");
        goto out;
    }
    for (size_t i = 0; i < DRV_NSYMS; i++) {
        void *fn = dlsym(lib, drv_syms[i].symbol);
        if (fn == NULL && drv_syms[i].required) {
            snprintf(reason, sizeof(reason), "the CUDA driver lacks %s", drv_syms[i].symbol);
            goto out;
        }
        memcpy((char *)&drv + drv_syms[i].offset, &fn, sizeof(fn));
    }
    rc = drv.init(0);
    if (rc != 0) {
        const char *s = NULL;
        drv.get_error_string(rc, &s);
        snprintf(reason, sizeof(reason), "cuInit: %s (CUresult %d)", s ? s : "?", rc);
        goto out;
    }
    rc = drv.device_get_count(&devices);
    if (rc != 0 || devices <= 0) {
        snprintf(reason, sizeof(reason), "cuDeviceGetCount found 0 devices (CUresult %d)", rc);
        devices = 0;
    }
out:
    pthread_mutex_unlock(&lock);
    if (devices == 0 && why != NULL) {
        snprintf(why, len, "%s", reason);
    }
    return devices;
}

const char *drv_lacks(const size_t *fields, int n)
{
    for (int i = 0; i < n; i++) {
        if (field(fields[i]) != NULL) {
            continue;
        }
        for (size_t k = 0; k < DRV_NSYMS; k++) {
            if (drv_syms[k].offset == fields[i]) {
                return drv_syms[k].symbol;
            }
        }
        return "an entry point";
    }
    return NULL;
}

cu_ctx_t drv_choose_device(int d)
{
    static cu_ctx_t primary[64];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    cu_device_t dev;
    cu_ctx_t ctx;

    pthread_mutex_lock(&lock);
    if (d < 0 || d >= 64) {
        fprintf(stderr, "rank %d: drv_choose_device(%d): no such device\n", mt_rank, d);
        abort();
    }
    if (primary[d] == NULL) {
        CK(drv.device_get(&dev, d));
        CK(drv.primary_ctx_retain(&primary[d], dev));
    }
    ctx = primary[d];
    pthread_mutex_unlock(&lock);
    CK(drv.ctx_set_current(ctx));
    return ctx;
}

cu_ctx_t drv_current(void)
{
    cu_ctx_t ctx = NULL;
    CK(drv.ctx_get_current(&ctx));
    return ctx;
}

int drv_counts(long *counts, int n)
{
    if (drv.call_counts == NULL || drv.call_name == NULL) {
        return -1;
    }
    return drv.call_counts(counts, n);
}

long drv_calls_since(const long *counts, int n, char *names, size_t len)
{
    long now[1024], total = 0;
    size_t at = 0;
    int m = drv_counts(now, 1024);

    names[0] = '\0';
    for (int i = 0; i < m && i < n && i < 1024; i++) {
        long d = now[i] - counts[i];
        if (d == 0) {
            continue;
        }
        total += d;
        int w = snprintf(names + at, len - at, "%s%s x%ld", at > 0 ? ", " : "",
                         drv.call_name(i) ? drv.call_name(i) : "?", d);
        at = w > 0 && (size_t)w < len - at ? at + (size_t)w : at;
    }
    return total;
}

long drv_calls(const char *name)
{
    long counts[1024];
    int n;

    if (drv.call_counts == NULL || drv.call_name == NULL) {
        return -1;
    }
    n = drv.call_counts(counts, 1024);
    for (int i = 0; i < n && i < 1024; i++) {
        const char *s = drv.call_name(i);
        if (s != NULL && strcmp(s, name) == 0) {
            return counts[i];
        }
    }
    return 0; /* an entry point the driver does not have is never called */
}

void drv_check(cu_result_t rc, const char *call, const char *file, int line)
{
    const char *s = NULL;
    int initialized = 0, finalized = 0;

    if (rc == 0) {
        return;
    }
    if (drv.get_error_string != NULL) {
        drv.get_error_string(rc, &s);
    }
    fprintf(stderr, "FAIL [rank %d] %s:%d: %s failed: %s (CUresult %d)\n", mt_rank, file, line,
            call, s ? s : "unknown error", rc);
    fflush(stderr);
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    exit(2);
}
