/* The calling thread's CUDA context around picoll's driver calls: made current on entry, put back
 * on leaving (a thread that never chose a device must not be left with one), and for set-up and
 * release in relaxed stream-capture mode. */
#include "build-config.h"
#include "cuda/cuda_ws.h"

int picoll_cuda_device_present(const picoll_config_t *cfg)
{
    return cfg->cuda && picoll_cudrv_device_count() > 0;
}

int picoll_cuda_enter_from(picoll_cu_context_t ctx, picoll_cu_context_t cur,
                           picoll_cuda_saved_ctx_t *saved)
{
    int rc = 0;
    saved->prev = cur;
    saved->switched = 0;
    saved->mode_set = 0;
    if (cur != ctx) {
        rc = picoll_cu.ctx_set_current(ctx);
        saved->switched = rc == 0;
    }
    return rc;
}

picoll_status_t picoll_cuda_enter(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved)
{
    picoll_cu_context_t cur = NULL;
    saved->switched = 0;
    saved->mode_set = 0;
    PICOLL_CU_TRY(picoll_cu.ctx_get_current(&cur), "cuCtxGetCurrent");
    PICOLL_CU_TRY(picoll_cuda_enter_from(ctx, cur, saved), "cuCtxSetCurrent");
    return PICOLL_OK;
}

picoll_status_t picoll_cuda_enter_setup(picoll_cu_context_t ctx, picoll_cuda_saved_ctx_t *saved)
{
    picoll_status_t status = picoll_cuda_enter(ctx, saved);
    saved->mode = PICOLL_CU_STREAM_CAPTURE_MODE_RELAXED;
    /* a driver without the call: the thread's mode stays */
    if (status == PICOLL_OK && picoll_cu.thread_exchange_capture_mode(&saved->mode) == 0) {
        saved->mode_set = 1;
    }
    return status;
}

void picoll_cuda_leave(const picoll_cuda_saved_ctx_t *saved)
{
    if (saved->mode_set) {
        int mode = saved->mode;
        picoll_cu.thread_exchange_capture_mode(&mode);
    }
    if (saved->switched) {
        picoll_cu.ctx_set_current(saved->prev);
    }
}
