/* Copies and memsets, queued on streams with CUDA's host synchronisation:
 *   - the synchronous copies (cuMemcpy, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuMemcpyDtoD_v2) are
 *     legacy-stream operations the caller waits for;
 *   - an asynchronous copy from pageable host memory takes the bytes at the call (CUDA stages them
 *     before returning), one to pageable host memory returns once the bytes are there;
 *   - memsets are asynchronous (cuMemsetD8_v2 on the legacy stream).
 * Device-side ranges must lie in one live allocation, mapping or pinned buffer (else
 * CUDA_ERROR_INVALID_VALUE); memory the driver does not know is pageable host memory. */
#define _GNU_SOURCE
#include "emu.h"

#include <stdlib.h>
#include <string.h>

int emu_in_arena(uintptr_t p); /* emu_mem.c */

/* 1: p is pageable host memory; 0: [p, p + n) is in one range the driver knows; -1: neither
 * (a device address outside every live allocation). Lock held. */
static int emu_side_locked(const void *p, size_t n)
{
    emu_range_t r;
    if (emu_mem_find((uintptr_t)p, n, &r)) {
        emu_mapping_check(&r, (uintptr_t)p, "a copy");
        return 0;
    }
    if (emu_in_arena((uintptr_t)p) || emu_mem_find((uintptr_t)p, 1, &r)) {
        return -1; /* in freed device memory, or running past the end of a range */
    }
    return 1;
}

static CUresult emu_copy(void *dst, const void *src, size_t n, void *stream, int sync,
                         const char *call)
{
    emu_stream_t *s;
    if (emu_ctx_current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (n == 0) {
        return CUDA_SUCCESS;
    }
    emu_op_t *op = emu_op_new(EMU_OP_COPY);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.n = n;
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(sync ? EMU_STREAM_LEGACY : stream, call, &s);
    if (rc == CUDA_SUCCESS && sync) {
        rc = emu_capture_check_locked();
    }
    int dst_pageable = emu_side_locked(dst, n), src_pageable = emu_side_locked(src, n);
    if (rc == CUDA_SUCCESS && (dst_pageable < 0 || src_pageable < 0)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&emu_lock);
        free(op);
        return rc;
    }
    if (!sync && src_pageable && (op->u.copy.snapshot = malloc(n)) != NULL) {
        memcpy(op->u.copy.snapshot, src, n);
    }
    int wait = sync || dst_pageable;
    rc = emu_stream_enqueue_locked(s, op, NULL);
    if (rc == CUDA_SUCCESS && wait) {
        emu_stream_wait_locked(s, s->enqueued);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    emu_count(EMU_CALL_cuMemcpy);
    return emu_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, NULL, 1, "cuMemcpy");
}

EMU_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream)
{
    emu_count(EMU_CALL_cuMemcpyAsync);
    return emu_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, stream, 0,
                    "cuMemcpyAsync");
}

EMU_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    emu_count(EMU_CALL_cuMemcpyHtoD_v2);
    return emu_copy((void *)(uintptr_t)dst, src, n, NULL, 1, "cuMemcpyHtoD_v2");
}

EMU_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    emu_count(EMU_CALL_cuMemcpyDtoH_v2);
    return emu_copy(dst, (const void *)(uintptr_t)src, n, NULL, 1, "cuMemcpyDtoH_v2");
}

EMU_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    emu_count(EMU_CALL_cuMemcpyDtoD_v2);
    return emu_copy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, NULL, 1,
                    "cuMemcpyDtoD_v2");
}

EMU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream)
{
    emu_count(EMU_CALL_cuMemcpyHtoDAsync_v2);
    return emu_copy((void *)(uintptr_t)dst, src, n, stream, 0, "cuMemcpyHtoDAsync_v2");
}

EMU_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream)
{
    emu_count(EMU_CALL_cuMemcpyDtoHAsync_v2);
    return emu_copy(dst, (const void *)(uintptr_t)src, n, stream, 0, "cuMemcpyDtoHAsync_v2");
}

static CUresult emu_memset(CUdeviceptr dst, unsigned char value, size_t n, void *stream,
                           const char *call)
{
    emu_stream_t *s;
    emu_range_t r;
    if (emu_ctx_current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (n == 0) {
        return CUDA_SUCCESS;
    }
    emu_op_t *op = emu_op_new(EMU_OP_MEMSET);
    if (op == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.memset.dst = (void *)(uintptr_t)dst;
    op->u.memset.value = value;
    op->u.memset.n = n;
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_stream_resolve_locked(stream, call, &s);
    if (rc == CUDA_SUCCESS && !emu_mem_find((uintptr_t)dst, n, &r)) {
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc == CUDA_SUCCESS) {
        rc = emu_stream_enqueue_locked(s, op, NULL);
    } else {
        free(op);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n)
{
    emu_count(EMU_CALL_cuMemsetD8_v2);
    return emu_memset(dst, value, n, NULL, "cuMemsetD8_v2");
}

EMU_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void *stream)
{
    emu_count(EMU_CALL_cuMemsetD8Async);
    return emu_memset(dst, value, n, stream, "cuMemsetD8Async");
}
