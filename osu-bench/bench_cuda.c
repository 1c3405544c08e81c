/* osu-bench: the CUDA driver through dlopen, for -d cuda (see bench_cuda.h).
 *
 * The benchmark links no CUDA library: a program linked with the CUDA runtime would only run where
 * the toolkit's libcudart is, and would reach the driver through the runtime's own calls, which an
 * emulated driver would then have to answer as well. The types and constants below are cuda.h's
 * (stable across CUDA versions); the versioned names (_v2) are those cuda.h maps the plain ones to. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "bench_cuda.h"
#include "src/util/dltable.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long cu_deviceptr_t;
typedef int cu_device_t;
typedef struct cu_ctx_st *cu_context_t;

/* CU_MEMHOSTALLOC_PORTABLE: pinned for every context, as cudaMallocHost's memory is. */
#define CU_MEMHOSTALLOC_PORTABLE 0x01

typedef struct {
    cu_result_t (*init)(unsigned flags);
    cu_result_t (*get_error_string)(cu_result_t, const char **);
    cu_result_t (*device_get_count)(int *);
    cu_result_t (*device_get)(cu_device_t *, int ordinal);
    cu_result_t (*primary_ctx_retain)(cu_context_t *, cu_device_t);
    cu_result_t (*ctx_set_current)(cu_context_t);
    cu_result_t (*mem_alloc)(cu_deviceptr_t *, size_t);
    cu_result_t (*mem_free)(cu_deviceptr_t);
    cu_result_t (*mem_host_alloc)(void **, size_t, unsigned flags);
    cu_result_t (*mem_free_host)(void *);
    cu_result_t (*memcpy_htod)(cu_deviceptr_t dst, const void *src, size_t);
    cu_result_t (*memcpy_dtoh)(void *dst, cu_deviceptr_t src, size_t);
} cu_table_t;

#define CU_SYM(field, name) PICOLL_DL_SYM(cu_table_t, field, name)
static const picoll_dl_sym_t cu_syms[] = {
    CU_SYM(init, "cuInit"),
    CU_SYM(get_error_string, "cuGetErrorString"),
    CU_SYM(device_get_count, "cuDeviceGetCount"),
    CU_SYM(device_get, "cuDeviceGet"),
    CU_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain"),
    CU_SYM(ctx_set_current, "cuCtxSetCurrent"),
    CU_SYM(mem_alloc, "cuMemAlloc_v2"),
    CU_SYM(mem_free, "cuMemFree_v2"),
    CU_SYM(mem_host_alloc, "cuMemHostAlloc"),
    CU_SYM(mem_free_host, "cuMemFreeHost"),
    CU_SYM(memcpy_htod, "cuMemcpyHtoD_v2"),
    CU_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2"),
};

/* The emulated GPU's counters: not part of CUDA, NULL on a real driver. */
typedef struct {
    int (*counts)(long *counts, int n);
    const char *(*name)(int i);
} cu_hooks_t;

/* The stream calls of --nccl, looked up when first asked for: the other columns need none, and the
 * strict test driver need not have them. */
typedef struct {
    cu_result_t (*create)(void **stream, unsigned flags);
    cu_result_t (*synchronize)(void *stream);
    cu_result_t (*destroy)(void *stream);
} cu_streams_t;

/* The graph calls of --graph, looked up when first asked for, as the stream calls. */
typedef struct {
    cu_result_t (*begin_capture)(void *stream, int mode);
    cu_result_t (*end_capture)(void *stream, void **graph);
    cu_result_t (*instantiate)(void **exec, void *graph, unsigned long long flags);
    cu_result_t (*launch)(void *exec, void *stream);
    cu_result_t (*graph_destroy)(void *graph);
    cu_result_t (*exec_destroy)(void *exec);
} cu_graphs_t;

/* CU_STREAM_CAPTURE_MODE_RELAXED */
#define CU_CAPTURE_RELAXED 2

static cu_table_t cu;
static cu_graphs_t graphs;
static cu_hooks_t hooks;
static cu_streams_t streams;
static void *cu_lib;

static const char *error_string(cu_result_t rc)
{
    const char *s = NULL;
    if (cu.get_error_string == NULL || cu.get_error_string(rc, &s) != 0 || s == NULL) {
        return "unknown error";
    }
    return s;
}

/* "NAME: error" of a failed driver call into why; returns rc's verdict, 0 or -1. */
static int driver_result(cu_result_t rc, const char *name, char *why, size_t len)
{
    if (rc != 0) {
        snprintf(why, len, "%s: %s", name, error_string(rc));
        return -1;
    }
    return 0;
}

/* Fills the table from the driver library; the library stays loaded for the process's life. */
static int load_driver(char *why, size_t len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    cu_table_t table;
    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(why, len, "no CUDA driver (%s)", e != NULL ? e : "dlopen libcuda.so.1 failed");
        return -1;
    }
    const char *missing = picoll_dl_fill(lib, cu_syms, PICOLL_DL_COUNT(cu_syms), &table);
    if (missing != NULL) {
        snprintf(why, len, "the CUDA driver lacks %s", missing);
        dlclose(lib);
        return -1;
    }
    cu = table;
    cu_lib = lib;
    *(void **)&hooks.counts = dlsym(lib, "fakecuda_call_counts");
    *(void **)&hooks.name = dlsym(lib, "fakecuda_call_name");
    if (hooks.counts == NULL || hooks.name == NULL) {
        hooks = (cu_hooks_t){NULL, NULL};
    }
    return 0;
}

int bench_cuda_setup(int local_rank, char *why, size_t len)
{
    cu_context_t ctx;
    cu_device_t dev;
    cu_result_t rc;
    int ndev = 0;

    if (cu.init == NULL && load_driver(why, len) != 0) {
        return -1;
    }
    rc = cu.init(0);
    if (rc == 0) {
        rc = cu.device_get_count(&ndev);
    }
    if (rc != 0) {
        snprintf(why, len, "no usable CUDA device (cuInit: %s)", error_string(rc));
        return -1;
    }
    if (ndev == 0) {
        snprintf(why, len, "no CUDA device on this machine");
        return -1;
    }
    /* The primary context is never released, as the CUDA runtime never releases it: a preloaded
     * picoll may still use it in MPI_Finalize, after the benchmark has freed its buffers. */
    rc = cu.device_get(&dev, local_rank % ndev);
    if (rc == 0) {
        rc = cu.primary_ctx_retain(&ctx, dev);
    }
    if (rc == 0) {
        rc = cu.ctx_set_current(ctx);
    }
    if (rc != 0) {
        snprintf(why, len, "device %d of %d: primary context not made current: %s",
                 local_rank % ndev, ndev, error_string(rc));
        return -1;
    }
    return 0;
}

void *bench_cuda_alloc_device(size_t bytes)
{
    cu_deviceptr_t p = 0;
    size_t n = bytes == 0 ? 1 : bytes;
    void *zeros;
    if (cu.mem_alloc == NULL || cu.mem_alloc(&p, n) != 0) {
        return NULL;
    }
    /* zeroed by a copy rather than cuMemsetD8: the strict test driver implements copies only */
    zeros = calloc(1, n);
    if (zeros == NULL || cu.memcpy_htod(p, zeros, n) != 0) {
        free(zeros);
        cu.mem_free(p);
        return NULL;
    }
    free(zeros);
    return (void *)(uintptr_t)p;
}

void bench_cuda_free_device(void *p)
{
    if (p != NULL) {
        cu.mem_free((cu_deviceptr_t)(uintptr_t)p);
    }
}

void *bench_cuda_alloc_pinned(size_t bytes)
{
    void *p = NULL;
    if (cu.mem_host_alloc == NULL ||
        cu.mem_host_alloc(&p, bytes == 0 ? 1 : bytes, CU_MEMHOSTALLOC_PORTABLE) != 0) {
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

void bench_cuda_free_pinned(void *p)
{
    if (p != NULL) {
        cu.mem_free_host(p);
    }
}

int bench_cuda_copy(void *device, void *host, size_t bytes, int to_device, char *why, size_t len)
{
    cu_deviceptr_t d = (cu_deviceptr_t)(uintptr_t)device;
    cu_result_t rc = to_device ? cu.memcpy_htod(d, host, bytes) : cu.memcpy_dtoh(host, d, bytes);
    return driver_result(rc, to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", why, len);
}

/* ------------------------------------------------------------------ streams */

int bench_cuda_test_driver(void)
{
    return cu_lib != NULL && (dlsym(cu_lib, "fakecuda_call_counts") != NULL ||
                              dlsym(cu_lib, "fakecuda_attribute_queries") != NULL);
}

int bench_cuda_stream_create(void **stream, char *why, size_t len)
{
    if (cu_lib == NULL) {
        snprintf(why, len, "no CUDA driver loaded");
        return -1;
    }
    if (streams.create == NULL) {
        *(void **)&streams.create = dlsym(cu_lib, "cuStreamCreate");
        *(void **)&streams.synchronize = dlsym(cu_lib, "cuStreamSynchronize");
        *(void **)&streams.destroy = dlsym(cu_lib, "cuStreamDestroy_v2");
        if (streams.create == NULL || streams.synchronize == NULL || streams.destroy == NULL) {
            streams = (cu_streams_t){NULL, NULL, NULL};
            snprintf(why, len,
                     "the CUDA driver lacks cuStreamCreate, cuStreamSynchronize or "
                     "cuStreamDestroy_v2");
            return -1;
        }
    }
    /* CU_STREAM_DEFAULT, as cudaStreamCreate */
    return driver_result(streams.create(stream, 0), "cuStreamCreate", why, len);
}

int bench_cuda_stream_synchronize(void *stream, char *why, size_t len)
{
    return driver_result(streams.synchronize(stream), "cuStreamSynchronize", why, len);
}

void bench_cuda_stream_destroy(void *stream)
{
    if (stream != NULL && streams.destroy != NULL) {
        streams.destroy(stream);
    }
}

/* ------------------------------------------------------------------ graphs */

int bench_cuda_graph_check(char *why, size_t len)
{
    if (graphs.launch != NULL) {
        return 0;
    }
    if (cu_lib == NULL) {
        snprintf(why, len, "no CUDA driver loaded");
        return -1;
    }
    *(void **)&graphs.begin_capture = dlsym(cu_lib, "cuStreamBeginCapture_v2");
    *(void **)&graphs.end_capture = dlsym(cu_lib, "cuStreamEndCapture");
    *(void **)&graphs.instantiate = dlsym(cu_lib, "cuGraphInstantiateWithFlags");
    *(void **)&graphs.graph_destroy = dlsym(cu_lib, "cuGraphDestroy");
    *(void **)&graphs.exec_destroy = dlsym(cu_lib, "cuGraphExecDestroy");
    *(void **)&graphs.launch = dlsym(cu_lib, "cuGraphLaunch");
    if (graphs.begin_capture == NULL || graphs.end_capture == NULL || graphs.instantiate == NULL ||
        graphs.graph_destroy == NULL || graphs.exec_destroy == NULL || graphs.launch == NULL) {
        graphs = (cu_graphs_t){NULL, NULL, NULL, NULL, NULL, NULL};
        snprintf(why, len,
                 "the CUDA driver lacks the graph calls (cuStreamBeginCapture_v2, "
                 "cuStreamEndCapture, cuGraphInstantiateWithFlags, cuGraphLaunch, ...)");
        return -1;
    }
    return 0;
}

int bench_cuda_graph_begin(void *stream, char *why, size_t len)
{
    if (bench_cuda_graph_check(why, len) != 0) {
        return -1;
    }
    return driver_result(graphs.begin_capture(stream, CU_CAPTURE_RELAXED),
                         "cuStreamBeginCapture_v2", why, len);
}

int bench_cuda_graph_end(void *stream, void **exec, char *why, size_t len)
{
    void *graph = NULL;
    int rc = driver_result(graphs.end_capture(stream, &graph), "cuStreamEndCapture", why, len);
    if (rc == 0) {
        rc = driver_result(graphs.instantiate(exec, graph, 0), "cuGraphInstantiateWithFlags", why,
                           len);
        graphs.graph_destroy(graph);
    }
    return rc;
}

int bench_cuda_graph_launch(void *exec, void *stream, char *why, size_t len)
{
    return driver_result(graphs.launch(exec, stream), "cuGraphLaunch", why, len);
}

void bench_cuda_graph_destroy(void *exec)
{
    if (exec != NULL && graphs.exec_destroy != NULL) {
        graphs.exec_destroy(exec);
    }
}

/* ------------------------------------------------------------------ driver-call counts */

int bench_cuda_counted_calls(void)
{
    /* room for every entry point the driver could have, in case its hook fills them all */
    static long probe[4096];
    int n;
    if (hooks.counts == NULL) {
        return 0;
    }
    n = hooks.counts(probe, (int)(sizeof(probe) / sizeof(probe[0])));
    return n > 0 && (size_t)n <= sizeof(probe) / sizeof(probe[0]) ? n : 0;
}

void bench_cuda_call_counts(long *counts, int n)
{
    hooks.counts(counts, n);
}

const char *bench_cuda_call_name(int i)
{
    const char *s = hooks.name != NULL ? hooks.name(i) : NULL;
    return s != NULL ? s : "?";
}
