/* A fake CUDA driver (libcuda.so.1) for testing picoll's CUDA staging on machines without a GPU.
 * Put its directory in LD_LIBRARY_PATH and picoll's dlopen("libcuda.so.1") loads it.
 *
 * "Device memory" lives in an arena that is mapped twice from one memfd: the addresses handed
 * out are PROT_NONE, so the CPU (the MPI library included) faults on any access; the driver
 * copies through a second, writable mapping of the same pages. So a device buffer that reaches
 * the MPI without staging crashes the test, and only copies through this driver move its bytes.
 * It is stricter than CUDA where that checks picoll: a copy needs a current context (as in CUDA),
 * and the context must be the one of the device buffer's own device (CUDA would copy across
 * devices). Freed ranges are handed out again lowest address first, with a new buffer id, so a
 * free and an allocation of the same size reuse the address. A copy with device memory that no
 * live allocation holds prints a line starting "FAIL fakecuda:" (the tests fail on "FAIL").
 *
 * FAKECUDA_DEVICES=N (default 2) devices; FAKECUDA_DEVICES=0: the driver loads but sees none.
 * fakecuda_attribute_queries() counts cuPointerGetAttributes calls (picoll's cache misses),
 * fakecuda_module_loads() cuModuleLoadData calls (picoll's attempts to load its kernels). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cu_abi.h"

typedef struct fake_ctx {
    int device;
} * CUcontext;
typedef void *CUstream;
typedef void *CUevent;

#define ARENA_SIZE ((size_t)256 << 20)
#define MAX_ALLOCS 1024
#define MAX_DEVICES 8
#define ALIGN 256

typedef struct {
    uintptr_t start;
    size_t size;
    int live;
    int kind; /* 1 host (pinned), 2 device, 3 managed */
    int device;
    unsigned long long id;
    uintptr_t alias; /* writable address of start (host: start itself) */
} fake_alloc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_alloc_t allocs[MAX_ALLOCS];
static unsigned long long next_id = 1;
static uintptr_t arena_dev, arena_alias;
static int initialised, ndevices;
static struct fake_ctx contexts[MAX_DEVICES];
static _Thread_local CUcontext ctx_stack[16];
static _Thread_local int ctx_depth; /* ctx_stack[ctx_depth - 1] is current */
static long attribute_queries;

long fakecuda_attribute_queries(void);
long fakecuda_attribute_queries(void)
{
    return __atomic_load_n(&attribute_queries, __ATOMIC_RELAXED);
}

static CUcontext current(void)
{
    return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult cuInit(unsigned flags)
{
    const char *env = getenv("FAKECUDA_DEVICES");
    (void)flags;
    pthread_mutex_lock(&lock);
    if (!initialised) {
        int fd = memfd_create("fakecuda", 0);
        void *dev, *alias;
        ndevices = env ? atoi(env) : 2;
        ndevices = ndevices < 0 ? 0 : ndevices > MAX_DEVICES ? MAX_DEVICES : ndevices;
        if (fd < 0 || ftruncate(fd, (off_t)ARENA_SIZE) != 0) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        dev = mmap(NULL, ARENA_SIZE, PROT_NONE, MAP_SHARED, fd, 0);
        alias = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (dev == MAP_FAILED || alias == MAP_FAILED) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        arena_dev = (uintptr_t)dev;
        arena_alias = (uintptr_t)alias;
        for (int i = 0; i < MAX_DEVICES; i++) {
            contexts[i].device = i;
        }
        initialised = 1;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult rc, const char **s)
{
    switch (rc) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument (fake driver)"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory (fake driver)"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context (fake driver)"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "no kernel image for the device (fake driver)"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported (fake driver)"; break;
    default: *s = "unknown error (fake driver)"; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
    if (!initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *n = ndevices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, int dev)
{
    if (dev < 0 || dev >= ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *ctx = &contexts[dev];
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    return dev < 0 || dev >= ndevices ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    *ctx = current();
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (ctx_depth == 0) {
        ctx_depth = 1;
    }
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (ctx == NULL || ctx_depth == 16) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
    if (ctx_depth == 0 || current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *ctx = ctx_stack[--ctx_depth];
    return CUDA_SUCCESS;
}

/* The live allocation holding [p, p + n), or NULL. Call with the lock held. */
static fake_alloc_t *find(uintptr_t p, size_t n)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].live && p >= allocs[i].start && p - allocs[i].start < allocs[i].size &&
            n <= allocs[i].size - (p - allocs[i].start)) {
            return &allocs[i];
        }
    }
    return NULL;
}

static fake_alloc_t *record(uintptr_t start, size_t size, int kind, int device, uintptr_t alias)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (!allocs[i].live) {
            allocs[i] = (fake_alloc_t){.start = start,
                                       .size = size,
                                       .live = 1,
                                       .kind = kind,
                                       .device = device,
                                       .id = next_id++,
                                       .alias = alias};
            return &allocs[i];
        }
    }
    return NULL;
}

/* Lowest arena offset where size bytes fit between live device allocations. */
static CUresult arena_alloc(CUdeviceptr *out, size_t size, int kind)
{
    uintptr_t cand = arena_dev;
    CUcontext ctx = current();
    size = size == 0 ? 1 : size;
    if (kind == 2 && ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&lock);
    for (int moved = 1; moved;) {
        moved = 0;
        for (int i = 0; i < MAX_ALLOCS; i++) {
            fake_alloc_t *a = &allocs[i];
            if (a->live && a->kind != 1 && cand < a->start + a->size && a->start < cand + size) {
                cand = (a->start + a->size + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
                moved = 1;
            }
        }
    }
    if (cand + size > arena_dev + ARENA_SIZE ||
        record(cand, size, kind, ctx ? ctx->device : 0, arena_alias + (cand - arena_dev)) == NULL) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&lock);
    *out = cand;
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
    return arena_alloc(p, size, 2);
}

CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned flags)
{
    (void)flags;
    return arena_alloc(p, size, 3);
}

static CUresult release(uintptr_t p, int host)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    fake_alloc_t *a = find(p, 0);
    if (a != NULL && a->start == p && (a->kind == 1) == host) {
        a->live = 0;
        rc = CUDA_SUCCESS;
        if (host) {
            munmap((void *)a->start, a->size);
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
    return release((uintptr_t)p, 0);
}

CUresult cuMemHostAlloc(void **p, size_t size, unsigned flags)
{
    CUcontext ctx = current();
    void *m;
    (void)flags;
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    m = mmap(NULL, size == 0 ? 1 : size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
             0);
    if (m == MAP_FAILED) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    fake_alloc_t *a = record((uintptr_t)m, size == 0 ? 1 : size, 1, ctx->device, (uintptr_t)m);
    pthread_mutex_unlock(&lock);
    if (a == NULL) {
        munmap(m, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = m;
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    return release((uintptr_t)p, 1);
}

static int attribute(const fake_alloc_t *a, int attr, void *data)
{
    cu_abi_range_t r;
    if (a != NULL) {
        r = (cu_abi_range_t){.ctx = &contexts[a->device],
                             .host = a->kind == 1,
                             .managed = a->kind == 3,
                             .device = a->device,
                             .id = a->id,
                             .start = a->start,
                             .size = a->size};
    }
    return cu_abi_attribute(a != NULL ? &r : NULL, attr, data);
}

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p)
{
    int rc;
    pthread_mutex_lock(&lock);
    fake_alloc_t *a = find((uintptr_t)p, 0);
    rc = a == NULL ? -1 : attribute(a, attr, data);
    pthread_mutex_unlock(&lock);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* As CUDA: unknown memory is not an error, every attribute reads as zero/none. */
CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p)
{
    CUresult rc = CUDA_SUCCESS;
    __atomic_add_fetch(&attribute_queries, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    fake_alloc_t *a = find((uintptr_t)p, 0);
    for (unsigned i = 0; i < n; i++) {
        if (attribute(a, attrs[i], data[i]) != 0) {
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The writable address of [p, p + n): device memory needs the context of its own device
 * (managed memory any context); host memory is itself. */
static CUresult translate(uintptr_t p, size_t n, uintptr_t *out)
{
    CUresult rc = CUDA_SUCCESS;
    CUcontext ctx = current();
    if (p < arena_dev || p >= arena_dev + ARENA_SIZE) {
        *out = p;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&lock);
    fake_alloc_t *a = find(p, n);
    if (a == NULL) {
        /* CUDA answers an error here, or crashes (a copy back into a freed buffer took an H100's
         * driver down with SIGSEGV, 2026-11-26): a test fails on it, whatever picoll does next */
        fprintf(stderr,
                "FAIL fakecuda: a copy with device memory that is not allocated (freed?): "
                "[%#lx, +%zu)\n",
                (unsigned long)p, n);
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (a->kind == 2 && ctx != &contexts[a->device]) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        *out = a->alias + (p - a->start);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    uintptr_t d, s;
    CUresult rc;
    if (current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((rc = translate((uintptr_t)dst, n, &d)) != CUDA_SUCCESS ||
        (rc = translate((uintptr_t)src, n, &s)) != CUDA_SUCCESS) {
        return rc;
    }
    memmove((void *)d, (const void *)s, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    return cuMemcpy(dst, src, n);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return cuMemcpy((CUdeviceptr)(uintptr_t)dst, src, n);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return cuMemcpy(dst, (CUdeviceptr)(uintptr_t)src, n);
}

CUresult cuStreamSynchronize(CUstream stream)
{
    (void)stream;
    return current() == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    return cuStreamSynchronize(NULL);
}

/* Streams run nothing here (every copy is done at once): a stream is a token. */
CUresult cuStreamCreate(CUstream *stream, unsigned flags)
{
    static int token;
    (void)flags;
    if (current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *stream = &token;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *ev, unsigned flags)
{
    static int dummy;
    (void)flags;
    *ev = &dummy;
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent ev, CUstream stream)
{
    (void)ev;
    (void)stream;
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent ev)
{
    (void)ev;
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent ev, unsigned flags)
{
    (void)stream;
    (void)ev;
    (void)flags;
    return CUDA_SUCCESS;
}

/* The rest of the driver table picoll loads (src/cudrv.c). This driver has no kernel image for
 * its devices (cuModuleLoadData fails as on a GPU the fatbin was not built for), so picoll's
 * device workspace is never made and device buffers are staged; what the staging path calls
 * works, the device executor's calls answer "not supported". The emulated GPU in tests/cuda/emu
 * runs the kernels. */
CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
    if (dev < 0 || dev >= ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (attr) {
    case 1: *v = 64; break; /* MAX_THREADS_PER_BLOCK */
    case 16: *v = 2; break; /* MULTIPROCESSOR_COUNT */
    case 75: *v = 9; break; /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = 0; break; /* COMPUTE_CAPABILITY_MINOR */
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *s, int len, int dev)
{
    if (dev < 0 || dev >= ndevices || len < 13) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    snprintf(s, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(int *dev, const char *s)
{
    unsigned dom, bus, slot, fn;
    if (sscanf(s, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 || bus < 0x10 ||
        (int)(bus - 0x10) >= ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *dev = (int)(bus - 0x10);
    return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer)
{
    *can = dev != peer;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(int *dev)
{
    CUcontext ctx = current();
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *dev = ctx->device;
    return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream stream)
{
    uintptr_t d;
    CUresult rc;
    (void)stream;
    if (current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((rc = translate((uintptr_t)p, n, &d)) != CUDA_SUCCESS) {
        return rc;
    }
    memset((void *)d, v, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
    (void)stream;
    return cuMemcpyHtoD_v2(dst, src, n);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
    (void)stream;
    return cuMemcpyDtoH_v2(dst, src, n);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags)
{
    (void)flags;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult cuIpcGetMemHandle(void *handle, CUdeviceptr p)
{
    (void)handle;
    (void)p;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, const void *handle, unsigned flags)
{
    (void)p;
    (void)handle;
    (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p)
{
    (void)p;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* No graph is ever captured here. */
CUresult cuStreamIsCapturing(CUstream stream, int *status)
{
    (void)stream;
    *status = 0;
    return CUDA_SUCCESS;
}

CUresult cuThreadExchangeStreamCaptureMode(int *mode)
{
    static _Thread_local int thread_mode;
    int old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static long module_loads;

long fakecuda_module_loads(void);
long fakecuda_module_loads(void)
{
    return __atomic_load_n(&module_loads, __ATOMIC_RELAXED);
}

CUresult cuModuleLoadData(void **module, const void *image)
{
    __atomic_add_fetch(&module_loads, 1, __ATOMIC_RELAXED);
    (void)module;
    (void)image;
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}

CUresult cuModuleGetFunction(void **f, void *module, const char *name)
{
    (void)f;
    (void)module;
    (void)name;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuFuncGetAttribute(int *v, int attr, void *f)
{
    (void)v;
    (void)attr;
    (void)f;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int threads, size_t shmem)
{
    (void)n;
    (void)f;
    (void)threads;
    (void)shmem;
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem, CUstream stream, void **params, void **extra)
{
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
    (void)stream, (void)params, (void)extra;
    return CUDA_ERROR_NOT_SUPPORTED;
}
