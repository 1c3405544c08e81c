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
static unsigned long long emu_next_ctx_id = 1;
static emu_ctx_t *ctx_destroyed; /* the last context destroyed (FAKECUDA_CTX_REUSE) */

void emu_ctx_idle_locked(emu_ctx_t *c); /* emu_stream.c */
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
        c->id = emu_next_ctx_id++;
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
                 "whose context no thread of it made current itself",
                 call, d);
    }
    pthread_mutex_unlock(&emu_lock);
}

/* The checks every primary-context call starts with; on success emu_lock is held and *c is the
 * device's primary context. */
static CUresult primary_lock(CUdevice d, emu_ctx_t **c)
{
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d < 0 || d >= emu_ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&emu_lock);
    *c = emu_primary_ctx(d);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRetain(emu_ctx_t **out, CUdevice d)
{
    void *ra = __builtin_return_address(0);
    emu_count(EMU_CALL_cuDevicePrimaryCtxRetain);
    emu_ctx_t *c;
    CUresult rc = primary_lock(d, &c);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    c->retains++;
    pthread_mutex_unlock(&emu_lock);
    ctx_choose(c, ra, "cuDevicePrimaryCtxRetain");
    *out = c;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    emu_count(EMU_CALL_cuDevicePrimaryCtxRelease_v2);
    emu_ctx_t *c;
    CUresult rc = primary_lock(d, &c);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    /* CUDA resets the context when the count reaches 0; here it stays usable */
    if (c->retains <= 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        c->retains--;
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

/* cudaDeviceReset: the primary context's work is waited for, then everything it owns goes
 * (allocations, pinned memory, IPC mappings, streams, modules and their functions: a later use of
 * a module or function loaded before is rule "stale-handle"); the handle stays the same, as the
 * driver's does, with a new cuCtxGetId. */
EMU_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice d)
{
    emu_count(EMU_CALL_cuDevicePrimaryCtxReset_v2);
    emu_ctx_t *c;
    CUresult rc = primary_lock(d, &c);
    if (rc != CUDA_SUCCESS) {
        return rc;
    }
    emu_ctx_idle_locked(c);
    emu_mem_reset_ctx_locked(c);
    for (emu_stream_t *t = c->streams; t != NULL; t = t->next_in_ctx) {
        if (!t->legacy && !t->per_thread) {
            t->live = 0; /* drained above; its worker ends */
        }
    }
    pthread_cond_broadcast(&emu_cond);
    c->retains = 0;
    c->id = emu_next_ctx_id++;
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxGetId(emu_ctx_t *h, unsigned long long *id)
{
    emu_count(EMU_CALL_cuCtxGetId);
    emu_ctx_t *c = h == NULL ? emu_ctx_current() : emu_ctx_check(h);
    if (c == NULL || id == NULL) {
        return c == NULL ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    *id = c->id;
    pthread_mutex_unlock(&emu_lock);
    return CUDA_SUCCESS;
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
    /* FAKECUDA_CTX_REUSE=1: the address of the context destroyed last, as a driver's allocator
     * may hand it out again (a new context, a new id) */
    pthread_mutex_lock(&emu_lock);
    emu_ctx_t *c = emu_env_int("FAKECUDA_CTX_REUSE", 0, 0, 1) ? ctx_destroyed : NULL;
    ctx_destroyed = NULL;
    pthread_mutex_unlock(&emu_lock);
    if (c == NULL && (c = calloc(1, sizeof(*c))) == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&emu_lock);
    c->device = d;
    c->magic = EMU_CTX_MAGIC;
    c->id = emu_next_ctx_id++;
    c->live = 1;
    pthread_mutex_unlock(&emu_lock);
    ctx_choose(c, ra, "cuCtxCreate_v2");
    ctx_stack[ctx_depth++] = c; /* a new context is current in the calling thread */
    *out = c;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuCtxDestroy_v2(emu_ctx_t *h)
{
    emu_count(EMU_CALL_cuCtxDestroy_v2);
    emu_ctx_t *c = emu_ctx_check(h);
    if (c == NULL || c->primary) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&emu_lock);
    emu_ctx_idle_locked(c);
    /* as CUDA: what the context owns goes with it */
    emu_mem_reset_ctx_locked(c);
    for (emu_stream_t *t = c->streams; t != NULL; t = t->next_in_ctx) {
        if (!t->legacy && !t->per_thread) {
            t->live = 0; /* the implicit streams, drained, serve the address if it comes back */
        }
    }
    pthread_cond_broadcast(&emu_cond);
    c->live = 0; /* kept allocated: a later use of the handle is an error, not a crash */
    c->id = emu_next_ctx_id++; /* its modules are stale, should the address come back */
    ctx_destroyed = c;
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

/* CUexecAffinityParam: its type, then (CU_EXEC_AFFINITY_TYPE_SM_COUNT, 0) the SM count */
typedef struct {
    int type;
    unsigned sm_count;
} emu_affinity_t;

EMU_API CUresult cuCtxGetExecAffinity(emu_affinity_t *p, int type)
{
    emu_count(EMU_CALL_cuCtxGetExecAffinity);
    if (emu_ctx_current() == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (p == NULL || type != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    p->type = 0;
    p->sm_count = (unsigned)emu_client_sms;
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
