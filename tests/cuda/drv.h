/* The CUDA driver API for the device tests, reached through dlopen("libcuda.so.1") with the few
 * types and constants they use declared here (values from cuda.h, stable across versions): no
 * CUDA header and no CUDA library at link time. So the same program builds everywhere and runs on
 * whichever libcuda.so.1 the loader finds first: a GPU's driver, the emulated GPU
 * (tests/cuda/emu) or the strict fake (tests/cuda/fake), picked through LD_LIBRARY_PATH.
 *
 * The emulated GPU also exports test hooks (fakecuda_*): the table holds NULL for them on a real
 * driver, and the tests that need them skip there. */
#ifndef PICOLL_TESTS_CUDA_DRV_H
#define PICOLL_TESTS_CUDA_DRV_H

#include <stddef.h>

typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef unsigned long long cu_ptr_t;
typedef int cu_device_t;
typedef struct cu_ctx_st *cu_ctx_t;
typedef struct cu_stream_st *cu_stream_t;
typedef struct cu_event_st *cu_event_t;
typedef struct cu_graph_st *cu_graph_t;
typedef struct cu_graph_exec_st *cu_graph_exec_t;
typedef void (*cu_host_fn_t)(void *user_data);

#define CU_STREAM_LEGACY ((cu_stream_t)0x1)
#define CU_STREAM_PER_THREAD ((cu_stream_t)0x2)
#define CU_STREAM_DEFAULT 0x0 /* cuStreamCreate flags: a blocking stream */
#define CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define CU_STREAM_CAPTURE_MODE_RELAXED 2
#define CU_DEVICE_ATTRIBUTE_MPS_ENABLED 133
#define CU_MEMHOSTALLOC_PORTABLE 0x01

typedef struct {
    cu_result_t (*init)(unsigned flags);
    cu_result_t (*get_error_string)(cu_result_t, const char **);
    cu_result_t (*device_get_count)(int *);
    cu_result_t (*device_get)(cu_device_t *, int ordinal);
    cu_result_t (*device_get_attribute)(int *, int attr, cu_device_t);
    cu_result_t (*primary_ctx_retain)(cu_ctx_t *, cu_device_t);
    cu_result_t (*ctx_set_current)(cu_ctx_t);
    cu_result_t (*ctx_get_current)(cu_ctx_t *);
    cu_result_t (*ctx_push_current)(cu_ctx_t);
    cu_result_t (*ctx_pop_current)(cu_ctx_t *);
    cu_result_t (*ctx_create)(cu_ctx_t *, unsigned flags, cu_device_t);
    cu_result_t (*ctx_destroy)(cu_ctx_t);
    cu_result_t (*primary_ctx_reset)(cu_device_t);
    cu_result_t (*ctx_synchronize)(void);
    cu_result_t (*mem_alloc)(cu_ptr_t *, size_t);
    cu_result_t (*mem_alloc_managed)(cu_ptr_t *, size_t, unsigned flags);
    cu_result_t (*mem_free)(cu_ptr_t);
    cu_result_t (*memcpy_htod)(cu_ptr_t dst, const void *src, size_t);
    cu_result_t (*memcpy_dtoh)(void *dst, cu_ptr_t src, size_t);
    cu_result_t (*memcpy_htod_async)(cu_ptr_t dst, const void *src, size_t, cu_stream_t);
    cu_result_t (*memset_d8)(cu_ptr_t, unsigned char, size_t);
    cu_result_t (*memset_d8_async)(cu_ptr_t, unsigned char, size_t, cu_stream_t);
    cu_result_t (*mem_host_alloc)(void **, size_t, unsigned flags);
    cu_result_t (*mem_free_host)(void *);
    cu_result_t (*stream_create)(cu_stream_t *, unsigned flags);
    cu_result_t (*stream_destroy)(cu_stream_t);
    cu_result_t (*stream_synchronize)(cu_stream_t);
    cu_result_t (*launch_host_func)(cu_stream_t, cu_host_fn_t, void *user_data);
    cu_result_t (*stream_begin_capture)(cu_stream_t, int mode);
    cu_result_t (*stream_end_capture)(cu_stream_t, cu_graph_t *);
    cu_result_t (*graph_destroy)(cu_graph_t);
    cu_result_t (*graph_instantiate)(cu_graph_exec_t *, cu_graph_t, unsigned long long flags);
    cu_result_t (*graph_launch)(cu_graph_exec_t, cu_stream_t);
    cu_result_t (*graph_exec_destroy)(cu_graph_exec_t);
    cu_result_t (*event_create)(cu_event_t *, unsigned flags);
    cu_result_t (*event_record)(cu_event_t, cu_stream_t);
    cu_result_t (*event_synchronize)(cu_event_t);
    cu_result_t (*event_destroy)(cu_event_t);
    cu_result_t (*event_query)(cu_event_t);
    cu_result_t (*stream_wait_event)(cu_stream_t, cu_event_t, unsigned flags);
    cu_result_t (*stream_is_capturing)(cu_stream_t, int *status);
    cu_result_t (*pointer_get_attribute)(void *data, int attr, cu_ptr_t);
    cu_result_t (*pointer_get_attributes)(unsigned n, int *attrs, void **data, cu_ptr_t);
    /* the emulated GPU's hooks (NULL elsewhere): the next kernel this process launches starts
     * and never arrives; per-entry-point call counts of this process and their names */
    void (*freeze_next_kernel)(void);
    void (*delay_launches)(unsigned ms); /* this thread's later launches, each ms late */
    int (*call_counts)(long *counts, int n);
    const char *(*call_name)(int i);
    const char *(*last_kernel)(void); /* the kernel entry this thread launched last */
    /* the strict fake's hooks (NULL elsewhere): full pointer-attribute queries and module loads
     * of this process so far */
    long (*fake_attribute_queries)(void);
    long (*fake_module_loads)(void);
} drv_t;

extern drv_t drv;

/* Loads the driver (once), calls cuInit and counts the devices: their number, or 0 with the
 * reason in why. The entry points every test needs must be there; the others may be NULL (see
 * drv_lacks). */
int drv_load(char *why, size_t len);

/* The name of the first entry point among fields (offsets into drv_t, DRV_FIELD) that the loaded
 * driver lacks, or NULL when it has them all: for a test to skip saying what is missing. */
#define DRV_FIELD(f) offsetof(drv_t, f)
const char *drv_lacks(const size_t *fields, int n);

/* What cudaSetDevice does: retains device d's primary context (once) and makes it current in the
 * calling thread. Returns the context. */
cu_ctx_t drv_choose_device(int d);

/* The calling thread's current context (NULL: none). */
cu_ctx_t drv_current(void);

/* How many times this process called the driver's entry point name (emulated GPU only; -1 where
 * the driver does not count). */
long drv_calls(const char *name);
/* Every entry point's count so far into counts[0..n) (emulated GPU only): how many were written,
 * -1 where the driver does not count. */
int drv_counts(long *counts, int n);
/* The calls made since drv_counts wrote counts (n entries): their total, and "name xN, ..." of
 * each entry point called into names. */
long drv_calls_since(const long *counts, int n, char *names, size_t len);

/* A failed driver call ends the job (MPI_Abort once MPI is initialised, else exit 2), naming the
 * call, where it was made and the driver's error string. */
void drv_check(cu_result_t rc, const char *call, const char *file, int line);
#define CK(call) drv_check((call), #call, __FILE__, __LINE__)

#endif
