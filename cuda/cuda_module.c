/* The kernels' module: the embedded fatbin loaded once per context, its generic kernel, its entries
 * of fixed type, op and rank count (PICOLL_CUDA_FIXED_LIST) and its floor kernels, and the choice
 * of the entry a launch runs. */
#include "build-config.h"
#include "cuda/cuda_ws_int.h"
#include "util/log.h"

#include <pthread.h>
#include <string.h>

/* Contexts whose module is kept: one per device and context the application uses its buffers in
 * (a context past these loads the module at every workspace it makes, uncached). */
#define MODULE_CACHE_CONTEXTS 16

/* The kernel entries of fixed type, op and rank count, in PICOLL_CUDA_FIXED_LIST's order. */
static const struct {
    int type, op, nranks;
    const char *name;
} ws_fixed[] = {
#define WS_FIXED_ENTRY(tag, e, dtype, op, nr) {e, op, nr, PICOLL_CUDA_FIXED_NAME(tag, nr)},
#define WS_FIXED_RANKS(tag, e, dtype, op) PICOLL_CUDA_FIXED_RANKS(WS_FIXED_ENTRY, tag, e, dtype, op)
    PICOLL_CUDA_FIXED_LIST(WS_FIXED_RANKS)
#undef WS_FIXED_RANKS
#undef WS_FIXED_ENTRY
};
_Static_assert(sizeof(ws_fixed) / sizeof(ws_fixed[0]) == PICOLL_CUDA_FIXED_COUNT,
               "PICOLL_CUDA_FIXED_COUNT: the entries of PICOLL_CUDA_FIXED_LIST x RANKS");

picoll_cu_function_t picoll_cuda_ws_function(const picoll_cuda_ws_t *ws,
                                             const picoll_cuda_kparams_t *p)
{
    if (picoll_cfg.cuda_fixed && picoll_cuda_fixed_mode(p->mode)) {
        for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
            if (ws_fixed[k].type == p->type && ws_fixed[k].op == p->op &&
                ws_fixed[k].nranks == p->nranks) {
                return ws->fixed[k] != NULL ? ws->fixed[k] : ws->kernel;
            }
        }
    }
    return ws->kernel;
}

/* The kernels in the current context ctx (id: its id): the fatbin is loaded once per context, for
 * the life of the context (a module cannot be unloaded while another communicator's workspace
 * uses it). A context reset since, at the same handle, has another id: its module went with the
 * reset, and is loaded again. */
picoll_status_t picoll_cuda_module_load(picoll_cu_context_t ctx, unsigned long long id, int device,
                                        picoll_cu_function_t *out, picoll_cu_function_t *fixed,
                                        picoll_cu_function_t *floor)
{
    static struct {
        picoll_cu_context_t ctx;
        unsigned long long id;
        picoll_cu_function_t fn, floor[PICOLL_CUDA_FLOOR_FNS];
        picoll_cu_function_t fixed[PICOLL_CUDA_FIXED_COUNT];
    } cache[MODULE_CACHE_CONTEXTS];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    picoll_status_t status = PICOLL_OK;
    picoll_cu_module_t mod = NULL;
    int rc, slot = -1;

    pthread_mutex_lock(&lock);
    for (int i = 0; i < MODULE_CACHE_CONTEXTS && slot < 0; i++) {
        if (cache[i].ctx == ctx || cache[i].ctx == NULL) {
            slot = i;
        }
    }
    if (slot >= 0 && cache[slot].ctx == ctx && cache[slot].id == id) {
        *out = cache[slot].fn;
        memcpy(floor, cache[slot].floor, sizeof(cache[slot].floor));
        memcpy(fixed, cache[slot].fixed, sizeof(cache[slot].fixed));
        goto unlock;
    }
    rc = picoll_cu.module_load_data(&mod, picoll_cuda_fatbin);
    if (rc == PICOLL_CU_ERROR_NO_BINARY_FOR_GPU) {
        int major = 0, minor = 0;
        picoll_cu.device_get_attribute(&major, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       device);
        picoll_cu.device_get_attribute(&minor, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       device);
        picoll_info("no device collectives on device %d: no kernel image for compute capability "
                    "%d.%d (picoll's kernels need 7.0 or later; built for %s)",
                    device, major, minor, PICOLL_CUDA_ARCHS);
        status = PICOLL_ERR_NOT_SUPPORTED;
        goto unlock;
    }
    PICOLL_CU_TRY_GOTO(rc, "cuModuleLoadData", status, unlock);
    PICOLL_CU_TRY_GOTO(picoll_cu.module_get_function(out, mod, PICOLL_CUDA_KERNEL_NAME),
                       "cuModuleGetFunction", status, unlock);
    for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
        /* a module without the entry (not expected: built from the same source) runs the
         * generic kernel for it (an answer, not an error: said at debug level) */
        if (picoll_cu.module_get_function(&fixed[k], mod, ws_fixed[k].name) != 0) {
            picoll_debug("kernel entry %s not found in the module: its calls take %s",
                         ws_fixed[k].name, PICOLL_CUDA_KERNEL_NAME);
            fixed[k] = NULL;
        }
    }
    static const char *const floor_names[PICOLL_CUDA_FLOOR_FNS] = {
        [PICOLL_CUDA_FLOOR_FN_LAUNCH] = PICOLL_CUDA_FLOOR_NAME,
        [PICOLL_CUDA_FLOOR_FN_BARRIER] = PICOLL_CUDA_BARRIER_NAME,
    };
    for (int k = 0; k < PICOLL_CUDA_FLOOR_FNS; k++) {
        if (picoll_cu.module_get_function(&floor[k], mod, floor_names[k]) != 0) {
            floor[k] = NULL; /* picoll_device_floor says so */
        }
    }
    if (slot >= 0) {
        cache[slot].ctx = ctx;
        cache[slot].id = id;
        cache[slot].fn = *out;
        memcpy(cache[slot].floor, floor, sizeof(cache[slot].floor));
        memcpy(cache[slot].fixed, fixed, sizeof(cache[slot].fixed));
    }
unlock:
    pthread_mutex_unlock(&lock);
    return status;
}

picoll_status_t picoll_cuda_floor_function(picoll_cu_context_t ctx, int which,
                                           picoll_cu_function_t *fn)
{
    picoll_cu_function_t kernel, fixed[PICOLL_CUDA_FIXED_COUNT], floor[PICOLL_CUDA_FLOOR_FNS];
    picoll_cu_device_t device = 0;
    PICOLL_CU_TRY(picoll_cu.ctx_get_device(&device), "cuCtxGetDevice");
    picoll_status_t st =
        picoll_cuda_module_load(ctx, picoll_cudrv_ctx_id(ctx), (int)device, &kernel, fixed, floor);
    *fn = st == PICOLL_OK ? floor[which] : NULL;
    return st != PICOLL_OK ? st : *fn != NULL ? PICOLL_OK : PICOLL_ERR_NOT_SUPPORTED;
}

void picoll_cuda_fixed_fit(picoll_cu_function_t *fixed, int threads, int per_sm)
{
    for (int k = 0; k < PICOLL_CUDA_FIXED_COUNT; k++) {
        /* an entry runs only where it takes the generic kernel's threads and keeps as many
         * blocks resident (the blocks per launch follow the generic kernel): the same launch
         * bounds give that, unless a build said otherwise */
        int k_threads = 0, k_per_sm = 0;
        if (fixed[k] != NULL &&
            (picoll_cu.func_get_attribute(
                 &k_threads, PICOLL_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fixed[k]) != 0 ||
             picoll_cu.occupancy_max_blocks(&k_per_sm, fixed[k], threads, 0) != 0 ||
             k_threads < threads || k_per_sm < per_sm)) {
            picoll_debug("kernel entry %s: %d threads, %d blocks per multiprocessor, where %s has "
                         "%d and %d: its calls take %s",
                         ws_fixed[k].name, k_threads, k_per_sm, PICOLL_CUDA_KERNEL_NAME, threads,
                         per_sm, PICOLL_CUDA_KERNEL_NAME);
            fixed[k] = NULL;
        }
    }
}
