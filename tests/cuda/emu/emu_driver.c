/* The emulated GPU (libcuda.so.1 for tests): initialisation, devices, errors, call counting and
 * the rule-check report.
 *
 * Environment (test driver variables start with FAKECUDA_):
 *   FAKECUDA_DEVICES   devices, 0 to 8 (default 2; 0: the driver loads but sees none)
 *   FAKECUDA_ARENA_MB  device memory per process, shared by its devices (default 256)
 *   FAKECUDA_MPS       the MPS attribute of every device (default 1: ranks sharing a device run
 *                      their kernels at once, as under MPS)
 *   FAKECUDA_SMS       multiprocessors per device (default 2)
 *   FAKECUDA_THREADS   threads per block at most (default 64, at most 512: one fiber each)
 *   FAKECUDA_BLOCKS_PER_SM  resident blocks of the kernel per multiprocessor, the occupancy
 *                      answer (default 2). An H100 SXM: FAKECUDA_SMS=132 FAKECUDA_THREADS=512
 *                      FAKECUDA_BLOCKS_PER_SM=2 (docs/testing.md says how the 2 is derived)
 *   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE  MPS's own variable, read as an MPS client does where
 *                      FAKECUDA_MPS is 1: the client's contexts use that share of the
 *                      multiprocessors (rounded down, at least 1), which cuCtxGetExecAffinity
 *                      reports and every launch is checked against (rule "launch-resident")
 *   FAKECUDA_CTX_REUSE 1: cuCtxCreate hands out the address of the context destroyed last (a new
 *                      context, with a new cuCtxGetId), as a driver may (default 0: never)
 *   FAKECUDA_NO_PEER   device pairs without peer access, "A-B,C-D" (default: none, every pair
 *                      of distinct devices has it): cuDeviceCanAccessPeer answers 0 for them and
 *                      cuIpcOpenMemHandle of a handle of one on the other fails
 * Devices are small by default so that the kernel is cheap on a CPU: 2 multiprocessors, 64
 * threads per block, compute capability 9.0; PCI bus ids 0000:NN:00.0 distinct per device; peer access
 * between every pair of devices but those FAKECUDA_NO_PEER names. */
#define _GNU_SOURCE
#include "emu.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t emu_cond = PTHREAD_COND_INITIALIZER;
int emu_ndevices;
int emu_initialised;
int emu_sms = EMU_SMS, emu_threads = EMU_THREADS, emu_blocks_per_sm = EMU_BLOCKS_PER_SM;
int emu_client_sms = EMU_SMS;

static long emu_calls[EMU_CALL_COUNT];
static const char *const emu_call_names[] = {
#define EMU_CALL_NAME(e, name) name,
    EMU_CALL_LIST(EMU_CALL_NAME)
#undef EMU_CALL_NAME
};

void emu_count(emu_call_t call)
{
    __atomic_add_fetch(&emu_calls[call], 1, __ATOMIC_RELAXED);
}

/* ---- test hooks ---- */

EMU_API int fakecuda_call_counts(long *counts, int n);
EMU_API int fakecuda_call_counts(long *counts, int n)
{
    for (int i = 0; i < n && i < EMU_CALL_COUNT; i++) {
        counts[i] = __atomic_load_n(&emu_calls[i], __ATOMIC_RELAXED);
    }
    return EMU_CALL_COUNT;
}

EMU_API const char *fakecuda_call_name(int i);
EMU_API const char *fakecuda_call_name(int i)
{
    return i >= 0 && i < EMU_CALL_COUNT ? emu_call_names[i] : NULL;
}

void emu_fail(const char *rule, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one write, so that lines of several ranks do not interleave */
    char line[640];
    int len =
        snprintf(line, sizeof(line), "FAIL fakecuda: %s: %s (pid %d)\n", rule, msg, (int)getpid());
    fwrite(line, 1, len > 0 && (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1, stderr);
    fflush(stderr);
    abort();
}

int emu_env_int(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    char *end;
    long x;
    if (v == NULL || *v == '\0') {
        return def;
    }
    x = strtol(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "fakecuda: %s=%s is not an integer in [%d, %d]\n", name, v, lo, hi);
        abort();
    }
    return (int)x;
}

static unsigned char emu_no_peer[EMU_MAX_DEVICES][EMU_MAX_DEVICES];

/* FAKECUDA_NO_PEER: "A-B,C-D", devices below FAKECUDA_DEVICES; anything else aborts, naming it. */
static void emu_no_peer_parse(void)
{
    const char *v = getenv("FAKECUDA_NO_PEER"), *p = v;
    if (v == NULL) {
        return;
    }
    while (*p != '\0') {
        char *end;
        long a = strtol(p, &end, 10), b = -1;
        if (end != p && *end == '-') {
            p = end + 1;
            b = strtol(p, &end, 10);
        }
        if (end == p || a < 0 || b < 0 || a >= emu_ndevices || b >= emu_ndevices || a == b ||
            (*end != ',' && *end != '\0')) {
            fprintf(stderr,
                    "fakecuda: FAKECUDA_NO_PEER=%s: expected pairs of distinct devices "
                    "below %d, as \"0-4,1-5\"\n",
                    v, emu_ndevices);
            abort();
        }
        emu_no_peer[a][b] = emu_no_peer[b][a] = 1;
        p = *end == ',' ? end + 1 : end;
    }
}

int emu_peer_access(int a, int b)
{
    return a != b && a >= 0 && b >= 0 && a < EMU_MAX_DEVICES && b < EMU_MAX_DEVICES &&
           !emu_no_peer[a][b];
}

int emu_called_from_picoll(void *ra)
{
    Dl_info info;
    return dladdr(ra, &info) != 0 && info.dli_fname != NULL &&
           strstr(info.dli_fname, "libpicoll") != NULL;
}

/* ---- initialisation and devices ---- */

int emu_mem_init_locked(void); /* emu_mem.c: the arena */

EMU_API CUresult cuInit(unsigned flags)
{
    CUresult rc = CUDA_SUCCESS;
    emu_count(EMU_CALL_cuInit);
    if (flags != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&emu_lock);
    if (!emu_initialised) {
        emu_ndevices = emu_env_int("FAKECUDA_DEVICES", 2, 0, EMU_MAX_DEVICES);
        emu_no_peer_parse();
        emu_sms = emu_env_int("FAKECUDA_SMS", EMU_SMS, 1, 1024);
        emu_threads = emu_env_int("FAKECUDA_THREADS", EMU_THREADS, 1, EMU_MAX_THREADS);
        emu_blocks_per_sm = emu_env_int("FAKECUDA_BLOCKS_PER_SM", EMU_BLOCKS_PER_SM, 1, 32);
        emu_client_sms = emu_sms;
        if (emu_env_int("FAKECUDA_MPS", 1, 0, 1)) {
            int pct = emu_env_int("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", 100, 1, 100);
            emu_client_sms = emu_sms * pct / 100 > 0 ? emu_sms * pct / 100 : 1;
        }
        if (emu_mem_init_locked() != 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            emu_initialised = 1;
        }
    }
    pthread_mutex_unlock(&emu_lock);
    return rc;
}

static const char *emu_error_string(CUresult rc)
{
    switch (rc) {
    case CUDA_SUCCESS: return "no error";
    case CUDA_ERROR_INVALID_VALUE: return "invalid argument (emulated GPU)";
    case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory (emulated GPU)";
    case CUDA_ERROR_NOT_INITIALIZED: return "initialization error (emulated GPU)";
    case CUDA_ERROR_NO_DEVICE: return "no CUDA-capable device is detected (emulated GPU)";
    case CUDA_ERROR_INVALID_DEVICE: return "invalid device ordinal (emulated GPU)";
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
        return "peer access is not supported between these two devices (emulated GPU)";
    case CUDA_ERROR_INVALID_IMAGE: return "device kernel image is invalid (emulated GPU)";
    case CUDA_ERROR_INVALID_CONTEXT: return "invalid device context (emulated GPU)";
    case CUDA_ERROR_INVALID_HANDLE: return "invalid resource handle (emulated GPU)";
    case CUDA_ERROR_NOT_FOUND: return "named symbol not found (emulated GPU)";
    case CUDA_ERROR_NOT_READY: return "device not ready (emulated GPU)";
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
        return "operation not permitted when stream is capturing (emulated GPU)";
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        return "operation failed due to a previous error during capture (emulated GPU)";
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return "operation would make the legacy stream depend on a capturing blocking stream "
               "(emulated GPU)";
    default: return NULL;
    }
}

EMU_API CUresult cuGetErrorString(CUresult rc, const char **s)
{
    emu_count(EMU_CALL_cuGetErrorString);
    *s = emu_error_string(rc);
    return *s != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_API CUresult cuGetErrorName(CUresult rc, const char **s)
{
    emu_count(EMU_CALL_cuGetErrorName);
    *s = emu_error_string(rc) != NULL ? "CUDA_ERROR (emulated GPU)" : NULL;
    if (rc == CUDA_SUCCESS) {
        *s = "CUDA_SUCCESS";
    }
    return *s != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_API CUresult cuDriverGetVersion(int *v)
{
    emu_count(EMU_CALL_cuDriverGetVersion);
    *v = 13000;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceGetCount(int *n)
{
    emu_count(EMU_CALL_cuDeviceGetCount);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *n = emu_ndevices;
    return CUDA_SUCCESS;
}

static CUresult emu_device_ok(CUdevice d)
{
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    return d >= 0 && d < emu_ndevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EMU_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    emu_count(EMU_CALL_cuDeviceGet);
    CUresult rc = emu_device_ok(ordinal);
    if (rc == CUDA_SUCCESS) {
        *dev = ordinal;
    }
    return rc;
}

EMU_API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    emu_count(EMU_CALL_cuDeviceGetName);
    CUresult rc = emu_device_ok(d);
    if (rc == CUDA_SUCCESS && len > 0) {
        snprintf(name, (size_t)len, "picoll emulated GPU %d", d);
    }
    return rc;
}

size_t emu_arena_bytes(void); /* emu_mem.c */

EMU_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    emu_count(EMU_CALL_cuDeviceTotalMem_v2);
    CUresult rc = emu_device_ok(d);
    if (rc == CUDA_SUCCESS) {
        *bytes = emu_arena_bytes();
    }
    return rc;
}

/* CU_DEVICE_ATTRIBUTE_* values from cuda.h that a caller may reasonably ask; others read 0. */
static int emu_attribute(int attr)
{
    switch (attr) {
    case 1: return emu_threads; /* MAX_THREADS_PER_BLOCK */
    case 2: return emu_threads; /* MAX_BLOCK_DIM_X */
    case 3: return emu_threads; /* MAX_BLOCK_DIM_Y */
    case 4: return 1;           /* MAX_BLOCK_DIM_Z */
    case 5: return 0x7fffffff;  /* MAX_GRID_DIM_X */
    case 6: return 65535;       /* MAX_GRID_DIM_Y */
    case 7: return 65535;       /* MAX_GRID_DIM_Z */
    case 8: return 49152;       /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 10: return 32;         /* WARP_SIZE */
    case 13: return 1500000;    /* CLOCK_RATE (kHz) */
    case 16: return emu_sms;    /* MULTIPROCESSOR_COUNT: the whole GPU, as under MPS */
    case 31: return 1;          /* CONCURRENT_KERNELS */
    case 33: return 0;          /* PCI_BUS_ID: see cuDeviceGetPCIBusId */
    case 34: return 0;          /* PCI_DEVICE_ID */
    case 39: return emu_threads * emu_blocks_per_sm;       /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 41: return 1;                                     /* UNIFIED_ADDRESSING */
    case 75: return 9;                                     /* COMPUTE_CAPABILITY_MAJOR */
    case 76: return 0;                                     /* COMPUTE_CAPABILITY_MINOR */
    case 83: return 1;                                     /* MANAGED_MEMORY */
    case 133: return emu_env_int("FAKECUDA_MPS", 1, 0, 1); /* MPS_ENABLED */
    default: return 0;
    }
}

EMU_API CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d)
{
    emu_count(EMU_CALL_cuDeviceGetAttribute);
    CUresult rc = emu_device_ok(d);
    if (rc == CUDA_SUCCESS) {
        if (attr == 33) {
            *v = d + 1;
        } else {
            *v = emu_attribute(attr);
        }
    }
    return rc;
}

EMU_API CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d)
{
    emu_count(EMU_CALL_cuDeviceGetPCIBusId);
    CUresult rc = emu_device_ok(d);
    if (rc == CUDA_SUCCESS) {
        if (len < 13) {
            return CUDA_ERROR_INVALID_VALUE;
        }
        /* upper case hex, as the real driver prints it */
        snprintf(id, (size_t)len, "0000:%02X:00.0", d + 1);
    }
    return rc;
}

EMU_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *id)
{
    unsigned domain, bus, slot, fn;
    emu_count(EMU_CALL_cuDeviceGetByPCIBusId);
    if (!emu_initialised) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) != 4 || domain != 0 || slot != 0 ||
        fn != 0 || bus < 1 || (int)bus > emu_ndevices) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *dev = (int)bus - 1;
    return CUDA_SUCCESS;
}

EMU_API CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b)
{
    emu_count(EMU_CALL_cuDeviceCanAccessPeer);
    CUresult rc = emu_device_ok(a);
    if (rc == CUDA_SUCCESS) {
        rc = emu_device_ok(b);
    }
    if (rc == CUDA_SUCCESS) {
        *can = emu_peer_access(a, b);
    }
    return rc;
}
