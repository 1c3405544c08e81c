/* The CUDA driver, loaded with dlopen("libcuda.so.1") once, behind a table of function pointers.
 * No CUDA header is needed: the few types and constants used are declared here (values from
 * cuda.h, stable across CUDA versions). On a machine without the driver the table stays empty,
 * picoll_cudrv_load() answers PICOLL_ERR_NOT_SUPPORTED with the reason, and every buffer is host
 * memory. */
#ifndef PICOLL_CUDRV_H
#define PICOLL_CUDRV_H

#include <stddef.h>
#include "status.h"

typedef int picoll_cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long picoll_cu_deviceptr_t;
typedef int picoll_cu_device_t;
typedef struct picoll_cu_ctx_st *picoll_cu_context_t;
typedef struct picoll_cu_stream_st *picoll_cu_stream_t;
typedef struct picoll_cu_event_st *picoll_cu_event_t;

#define PICOLL_CU_POINTER_ATTRIBUTE_CONTEXT 1
#define PICOLL_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define PICOLL_CU_POINTER_ATTRIBUTE_BUFFER_ID 7
#define PICOLL_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define PICOLL_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define PICOLL_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR 11
#define PICOLL_CU_POINTER_ATTRIBUTE_RANGE_SIZE 12
#define PICOLL_CU_MEMORYTYPE_HOST 1
#define PICOLL_CU_MEMORYTYPE_DEVICE 2
#define PICOLL_CU_MEMHOSTALLOC_PORTABLE 0x01
#define PICOLL_CU_EVENT_DISABLE_TIMING 0x02

typedef struct {
    picoll_cu_result_t (*init)(unsigned flags);
    picoll_cu_result_t (*get_error_string)(picoll_cu_result_t, const char **);
    picoll_cu_result_t (*device_get_count)(int *);
    picoll_cu_result_t (*device_get)(picoll_cu_device_t *, int ordinal);
    picoll_cu_result_t (*pointer_get_attribute)(void *data, int attr, picoll_cu_deviceptr_t);
    picoll_cu_result_t (*pointer_get_attributes)(unsigned n, int *attrs, void **data,
                                                 picoll_cu_deviceptr_t);
    picoll_cu_result_t (*ctx_get_current)(picoll_cu_context_t *);
    picoll_cu_result_t (*ctx_set_current)(picoll_cu_context_t);
    picoll_cu_result_t (*ctx_push_current)(picoll_cu_context_t);
    picoll_cu_result_t (*ctx_pop_current)(picoll_cu_context_t *);
    picoll_cu_result_t (*primary_ctx_retain)(picoll_cu_context_t *, picoll_cu_device_t);
    picoll_cu_result_t (*primary_ctx_release)(picoll_cu_device_t);
    /* legacy default stream (not the per-thread one): see picoll_cudrv_copy */
    picoll_cu_result_t (*memcpy)(picoll_cu_deviceptr_t dst, picoll_cu_deviceptr_t src, size_t);
    picoll_cu_result_t (*memcpy_async)(picoll_cu_deviceptr_t dst, picoll_cu_deviceptr_t src,
                                       size_t, picoll_cu_stream_t);
    picoll_cu_result_t (*memcpy_dtoh)(void *dst, picoll_cu_deviceptr_t src, size_t);
    picoll_cu_result_t (*memcpy_htod)(picoll_cu_deviceptr_t dst, const void *src, size_t);
    picoll_cu_result_t (*mem_host_alloc)(void **, size_t, unsigned flags);
    picoll_cu_result_t (*mem_free_host)(void *);
    picoll_cu_result_t (*stream_synchronize)(picoll_cu_stream_t);
    picoll_cu_result_t (*event_create)(picoll_cu_event_t *, unsigned flags);
    picoll_cu_result_t (*event_record)(picoll_cu_event_t, picoll_cu_stream_t);
    picoll_cu_result_t (*event_destroy)(picoll_cu_event_t);
    picoll_cu_result_t (*stream_wait_event)(picoll_cu_stream_t, picoll_cu_event_t, unsigned);
} picoll_cudrv_t;

/* The table; its entries are valid only after picoll_cudrv_load() returned PICOLL_OK. */
extern picoll_cudrv_t picoll_cu;

/* Loads and initialises the driver, once per process (thread safe). PICOLL_OK when it loaded,
 * cuInit succeeded and at least one device is visible; otherwise the reason stays available
 * from picoll_cudrv_why(). */
picoll_status_t picoll_cudrv_load(void);
/* Visible devices (0 without the driver), and a line saying what was found or why nothing. */
int picoll_cudrv_device_count(void);
const char *picoll_cudrv_why(void);

/* Translates a CUresult where it enters: PICOLL_OK, or PICOLL_ERR_CUDA after logging call and
 * cuGetErrorString once per call name. */
picoll_status_t picoll_cudrv_check(picoll_cu_result_t rc, const char *call);

/* Copies n bytes between any two of host, pinned, device or managed memory, with ctx (the
 * context of the device-side buffer) current for the copy. cuMemcpy runs on the legacy default
 * stream: it starts after all work already queued on that stream (and on every blocking stream
 * of the context) and returns when the bytes are at dst. */
picoll_status_t picoll_cudrv_copy(void *dst, const void *src, size_t n, picoll_cu_context_t ctx);

#endif
