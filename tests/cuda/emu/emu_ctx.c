/* Contexts: one primary context per device (retain, release), contexts made with cuCtxCreate, and
 * a stack of current contexts per thread.
 *
 * Rule "unchosen-device" (issue 12, defect 1): a library must not make a context current on a
 * device the application never chose. A context made current (cuCtxSetCurrent, cuCtxPushCurrent,
 * cuDevicePrimaryCtxRetain, cuCtxCreate) from inside libpicoll.so (the caller's return address is
 * in a file whose name contains "libpicoll") is a failure when this process has no live memory on
 * that device and no thread of it made a context of that device current from outside
 * libpicoll. */
#define _GNU_SOURCE
#include "emu.h"

#include <stdlib.h>

static emu_ctx_t emu_primary[EMU_MAX_DEVICES];
static __thread emu_ctx_t *ctx_stack[16];
static __thread int ctx_depth; /* ctx_stack[ctx_depth - 1] is current */
static int dev_chosen[EMU_MAX_DEVICES];
int emu_dev_live_mem[EMU_MAX_DEVICES];

emu_ctx_t *emu_ctx_check(void *h)
{
    emu_ctx_t *c = h;
    return c != NULL && c->magic == EMU_CTX_MAGIC && c->live ? c : NULL;
}

emu_ctx_t *emu_ctx_current(void)
{
    return ctx_depth > 0 ? emu_ctx_check(ctx_stack[ctx_depth - 1]) : NULL;
}

static emu_ctx_t *emu_primary_ctx(int device)
{
    emu_ctx_t *c = &emu_primary[device];
    if (c->magic != EMU_CTX_MAGIC) {
        c->device = device;
        c->primary = 1;
        c->live = 1;
        c->magic = EMU_CTX_MAGIC;
    }
    return c;
}

/* The caller (return address ra) makes a context of c's device current. */
static void ctx_choose(emu_ctx_t *c, void *ra, const char *call)
{
    int from_picoll = emu_called_from_picoll(ra);
    int d = c->device;
    pthread_mutex_lock(&emu_lock);
    if (!from_picoll) {
        dev_chosen[d] = 1;
    } else if (!dev_chosen[d] && emu_dev_live_mem[d] == 0) {
        pthread_mutex_unlock(&emu_lock);
        emu_fail("unchosen-device",
                 "%s called from libpicoll.so on device %d, where this process has no memory and "
                 "whose context no thread of it made current itself", call, d);
    }
    pthread_mutex_unlock(&emu_lock);
}

EMU_API CUresult cuDevicePrimaryCtxRetain(emu_ctx_t **out, CUdevice d)
{
    void *ra = __builtin_return_address(0);
    emu_count(EMU_CALL_cuDevicePrimaryCtxRetain);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d < 0 || d >= emu_ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&emu_lock);
    emu_ctx_t *c = emu_primary_ctx(d);
    c->retains++;
    pthread_mutex_unlock(&emu_lock);
    ctx_choose(c, ra, "cuDevicePrimaryCtxRetain");
    *out = c;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    CUresult rc = CUDA_SUCCESS;
    emu_count(EMU_CALL_cuDevicePrimaryCtxRelease_v2);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d < 0 || d >= emu_ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&emu_lock);
    emu_ctx_t *c = emu_primary_ctx(d);
    /* CUDA resets the context when the count reaches 0; here it stays usable */
    if (c->retains <= 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        c->retains--;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

EMU_API CUresult cuCtxCreate_v2(emu_ctx_t **out, unsigned flags, CUdevice d)
{
    void *ra = __builtin_return_address(0);
    emu_count(EMU_CALL_cuCtxCreate_v2);
    (void)flags;
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d < 0 || d >= emu_ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (ctx_depth == (int)(sizeof(ctx_stack) / sizeof(ctx_stack[0]))) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    emu_ctx_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->device = d;
    c->live = 1;
    c->magic = EMU_CTX_MAGIC;
    ctx_choose(c, ra, "cuCtxCreate_v2");
    ctx_stack[ctx_depth++] = c; /* a new context is current in the calling thread */
    *out = c;
    return CUDA_SUCCESS;
}

void emu_ctx_idle_locked(emu_ctx_t *c); /* emu_stream.c */

EMU_API CUresult cuCtxDestroy_v2(emu_ctx_t *h)
{
    emu_count(EMU_CALL_cuCtxDestroy_v2);
    emu_ctx_t *c = emu_ctx_check(h);
    if (c == NULL || c->primary) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&emu_lock);
    emu_ctx_idle_locked(c);
    c->live = 0; /* kept allocated: a later use of the handle is an error, not a crash */
    pthread_mutex_unlock(&emu_lock);
    for (int i = ctx_depth - 1; i >= 0; i--) {
        if (ctx_stack[i] == c) {
            for (int j = i; j + 1 < ctx_depth; j++) {
                ctx_stack[j] = ctx_stack[j + 1];
            }
            ctx_depth--;
        }
    }
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxGetCurrent(emu_ctx_t **out)
{
    emu_count(EMU_CALL_cuCtxGetCurrent);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *out = ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxSetCurrent(emu_ctx_t *h)
{
    void *ra = __builtin_return_address(0);
    emu_count(EMU_CALL_cuCtxSetCurrent);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (h == NULL) { /* as CUDA: pops the top, if any */
        if (ctx_depth > 0) {
            ctx_depth--;
        }
        return CUDA_SUCCESS;
    }
    emu_ctx_t *c = emu_ctx_check(h);
    if (c == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    ctx_choose(c, ra, "cuCtxSetCurrent");
    if (ctx_depth == 0) {
        ctx_depth = 1;
    }
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxPushCurrent_v2(emu_ctx_t *h)
{
    void *ra = __builtin_return_address(0);
    emu_count(EMU_CALL_cuCtxPushCurrent_v2);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    emu_ctx_t *c = emu_ctx_check(h);
    if (c == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (ctx_depth == (int)(sizeof(ctx_stack) / sizeof(ctx_stack[0]))) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    ctx_choose(c, ra, "cuCtxPushCurrent_v2");
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxPopCurrent_v2(emu_ctx_t **out)
{
    emu_count(EMU_CALL_cuCtxPopCurrent_v2);
    if (ctx_depth == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    emu_ctx_t *c = ctx_stack[--ctx_depth];
    if (out != NULL) {
        *out = c;
    }
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxGetDevice(CUdevice *d)
{
    emu_count(EMU_CALL_cuCtxGetDevice);
    emu_ctx_t *c = emu_ctx_current();
    if (c == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *d = c->device;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxSynchronize(void)
{
    emu_count(EMU_CALL_cuCtxSynchronize);
    emu_ctx_t *c = emu_ctx_current();
    if (c == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&emu_lock);
    CUresult rc = emu_capture_check_locked();
    if (rc == CUDA_SUCCESS) {
        emu_ctx_idle_locked(c);
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}
