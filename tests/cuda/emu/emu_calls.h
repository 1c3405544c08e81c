/* Every entry point the emulated GPU exports, in one list: the call counters
 * (fakecuda_call_counts) and their names (fakecuda_call_name) come from it. X(enum, name). */
#ifndef EMU_CALLS_H
#define EMU_CALLS_H

#define EMU_CALL_LIST(X)                                                                           \
    X(EMU_CALL_cuInit, "cuInit")                                                                   \
    X(EMU_CALL_cuGetErrorString, "cuGetErrorString")                                               \
    X(EMU_CALL_cuGetErrorName, "cuGetErrorName")                                                   \
    X(EMU_CALL_cuDriverGetVersion, "cuDriverGetVersion")                                           \
    X(EMU_CALL_cuDeviceGetCount, "cuDeviceGetCount")                                               \
    X(EMU_CALL_cuDeviceGet, "cuDeviceGet")                                                         \
    X(EMU_CALL_cuDeviceGetName, "cuDeviceGetName")                                                 \
    X(EMU_CALL_cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2")                                         \
    X(EMU_CALL_cuDeviceGetAttribute, "cuDeviceGetAttribute")                                       \
    X(EMU_CALL_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")                                         \
    X(EMU_CALL_cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId")                                     \
    X(EMU_CALL_cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer")                                     \
    X(EMU_CALL_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                               \
    X(EMU_CALL_cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2")                       \
    X(EMU_CALL_cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset_v2")                           \
    X(EMU_CALL_cuCtxGetId, "cuCtxGetId")                                                           \
    X(EMU_CALL_cuCtxCreate_v2, "cuCtxCreate_v2")                                                   \
    X(EMU_CALL_cuCtxDestroy_v2, "cuCtxDestroy_v2")                                                 \
    X(EMU_CALL_cuCtxGetCurrent, "cuCtxGetCurrent")                                                 \
    X(EMU_CALL_cuCtxSetCurrent, "cuCtxSetCurrent")                                                 \
    X(EMU_CALL_cuCtxPushCurrent_v2, "cuCtxPushCurrent_v2")                                         \
    X(EMU_CALL_cuCtxPopCurrent_v2, "cuCtxPopCurrent_v2")                                           \
    X(EMU_CALL_cuCtxGetDevice, "cuCtxGetDevice")                                                   \
    X(EMU_CALL_cuCtxSynchronize, "cuCtxSynchronize")                                               \
    X(EMU_CALL_cuCtxGetExecAffinity, "cuCtxGetExecAffinity")                                       \
    X(EMU_CALL_cuMemAlloc_v2, "cuMemAlloc_v2")                                                     \
    X(EMU_CALL_cuMemAllocManaged, "cuMemAllocManaged")                                             \
    X(EMU_CALL_cuMemFree_v2, "cuMemFree_v2")                                                       \
    X(EMU_CALL_cuMemHostAlloc, "cuMemHostAlloc")                                                   \
    X(EMU_CALL_cuMemFreeHost, "cuMemFreeHost")                                                     \
    X(EMU_CALL_cuMemHostGetDevicePointer_v2, "cuMemHostGetDevicePointer_v2")                       \
    X(EMU_CALL_cuMemGetInfo_v2, "cuMemGetInfo_v2")                                                 \
    X(EMU_CALL_cuPointerGetAttribute, "cuPointerGetAttribute")                                     \
    X(EMU_CALL_cuPointerGetAttributes, "cuPointerGetAttributes")                                   \
    X(EMU_CALL_cuIpcGetMemHandle, "cuIpcGetMemHandle")                                             \
    X(EMU_CALL_cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle_v2")                                     \
    X(EMU_CALL_cuIpcCloseMemHandle, "cuIpcCloseMemHandle")                                         \
    X(EMU_CALL_cuMemcpy, "cuMemcpy")                                                               \
    X(EMU_CALL_cuMemcpyAsync, "cuMemcpyAsync")                                                     \
    X(EMU_CALL_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2")                                                 \
    X(EMU_CALL_cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2")                                                 \
    X(EMU_CALL_cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2")                                                 \
    X(EMU_CALL_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2")                                       \
    X(EMU_CALL_cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync_v2")                                       \
    X(EMU_CALL_cuMemsetD8_v2, "cuMemsetD8_v2")                                                     \
    X(EMU_CALL_cuMemsetD8Async, "cuMemsetD8Async")                                                 \
    X(EMU_CALL_cuStreamCreate, "cuStreamCreate")                                                   \
    X(EMU_CALL_cuStreamDestroy_v2, "cuStreamDestroy_v2")                                           \
    X(EMU_CALL_cuStreamSynchronize, "cuStreamSynchronize")                                         \
    X(EMU_CALL_cuStreamQuery, "cuStreamQuery")                                                     \
    X(EMU_CALL_cuStreamWaitEvent, "cuStreamWaitEvent")                                             \
    X(EMU_CALL_cuLaunchHostFunc, "cuLaunchHostFunc")                                               \
    X(EMU_CALL_cuStreamWaitValue64_v2, "cuStreamWaitValue64_v2")                                   \
    X(EMU_CALL_cuStreamGetCtx, "cuStreamGetCtx")                                                   \
    X(EMU_CALL_cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")                         \
    X(EMU_CALL_cuGraphLaunch, "cuGraphLaunch")                                                     \
    X(EMU_CALL_cuGraphExecDestroy, "cuGraphExecDestroy")                                           \
    X(EMU_CALL_cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2")                                 \
    X(EMU_CALL_cuStreamEndCapture, "cuStreamEndCapture")                                           \
    X(EMU_CALL_cuStreamIsCapturing, "cuStreamIsCapturing")                                         \
    X(EMU_CALL_cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode")             \
    X(EMU_CALL_cuGraphDestroy, "cuGraphDestroy")                                                   \
    X(EMU_CALL_cuEventCreate, "cuEventCreate")                                                     \
    X(EMU_CALL_cuEventDestroy_v2, "cuEventDestroy_v2")                                             \
    X(EMU_CALL_cuEventRecord, "cuEventRecord")                                                     \
    X(EMU_CALL_cuEventQuery, "cuEventQuery")                                                       \
    X(EMU_CALL_cuEventSynchronize, "cuEventSynchronize")                                           \
    X(EMU_CALL_cuModuleLoadData, "cuModuleLoadData")                                               \
    X(EMU_CALL_cuModuleUnload, "cuModuleUnload")                                                   \
    X(EMU_CALL_cuModuleGetFunction, "cuModuleGetFunction")                                         \
    X(EMU_CALL_cuFuncGetAttribute, "cuFuncGetAttribute")                                           \
    X(EMU_CALL_cuOccupancyMaxActiveBlocksPerMultiprocessor,                                        \
      "cuOccupancyMaxActiveBlocksPerMultiprocessor")                                               \
    X(EMU_CALL_cuLaunchKernel, "cuLaunchKernel")

typedef enum {
#define EMU_CALL_ENUM(e, name) e,
    EMU_CALL_LIST(EMU_CALL_ENUM)
#undef EMU_CALL_ENUM
        EMU_CALL_COUNT
} emu_call_t;

#endif
