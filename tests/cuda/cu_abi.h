/* What the two test drivers share of CUDA's driver ABI: the strict fake (fake_libcuda.c: device
 * memory the CPU cannot touch, no kernels, for the staging paths) and the emulated GPU (emu/:
 * kernels on the CPU, IPC, streams, the memory model). Result codes, and the answer to a pointer
 * attribute query from what a driver knows of the range holding the pointer. Plain C, no CUDA
 * header; the numbers are CUDA's (cuda.h). */
#ifndef PICOLL_TESTS_CU_ABI_H
#define PICOLL_TESTS_CU_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
};

/* CUpointer_attribute values both drivers answer */
enum {
    CU_ABI_PTR_CONTEXT = 1,
    CU_ABI_PTR_MEMORY_TYPE = 2,
    CU_ABI_PTR_BUFFER_ID = 7,
    CU_ABI_PTR_IS_MANAGED = 8,
    CU_ABI_PTR_DEVICE_ORDINAL = 9,
    CU_ABI_PTR_RANGE_START_ADDR = 11,
    CU_ABI_PTR_RANGE_SIZE = 12,
};

/* What a driver knows of the allocation holding a pointer. */
typedef struct {
    void *ctx; /* its context (CUcontext) */
    int host;  /* pinned host memory (else device or managed) */
    int managed;
    int device;
    unsigned long long id; /* buffer id: new for every allocation */
    uintptr_t start;
    size_t size;
} cu_abi_range_t;

/* One attribute of range r (NULL: memory the driver does not know, which reads as zeros, as
 * CUDA's cuPointerGetAttributes answers). 0, or -1 for an attribute not listed above. Managed
 * memory answers "device" as its memory type, as CUDA does. */
static inline int cu_abi_attribute(const cu_abi_range_t *r, int attr, void *data)
{
    switch (attr) {
    case CU_ABI_PTR_CONTEXT: *(void **)data = r != NULL ? r->ctx : NULL; return 0;
    case CU_ABI_PTR_MEMORY_TYPE: /* CU_MEMORYTYPE_HOST 1, _DEVICE 2 */
        *(unsigned *)data = r == NULL ? 0 : r->host ? 1 : 2;
        return 0;
    case CU_ABI_PTR_BUFFER_ID: *(unsigned long long *)data = r != NULL ? r->id : 0; return 0;
    case CU_ABI_PTR_IS_MANAGED: *(unsigned *)data = r != NULL && r->managed; return 0;
    case CU_ABI_PTR_DEVICE_ORDINAL: *(int *)data = r != NULL ? r->device : -2; return 0;
    case CU_ABI_PTR_RANGE_START_ADDR:
        *(CUdeviceptr *)data = r != NULL ? (CUdeviceptr)r->start : 0;
        return 0;
    case CU_ABI_PTR_RANGE_SIZE: *(size_t *)data = r != NULL ? r->size : 0; return 0;
    default: return -1;
    }
}

#endif
