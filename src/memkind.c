#include "build-config.h"
#include "memkind.h"
#include "log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

/* The few driver API declarations needed, written here so that no CUDA header is required. */
typedef int cu_result_t;
typedef unsigned long long cu_deviceptr_t;
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define CU_MEMORYTYPE_DEVICE 2

static struct {
    cu_result_t (*init)(unsigned);
    cu_result_t (*pointer_get_attribute)(void *, int, cu_deviceptr_t);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static int cu_present;

static void cu_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        picoll_debug("no CUDA driver (%s): every buffer is host memory", dlerror());
        return;
    }
    cu.init = (cu_result_t(*)(unsigned))dlsym(lib, "cuInit");
    cu.pointer_get_attribute =
        (cu_result_t(*)(void *, int, cu_deviceptr_t))dlsym(lib, "cuPointerGetAttribute");
    if (cu.init == NULL || cu.pointer_get_attribute == NULL || cu.init(0) != 0) {
        picoll_debug("CUDA driver present but not usable: every buffer is host memory");
        return;
    }
    cu_present = 1;
}

int picoll_cuda_driver_present(void)
{
    pthread_once(&cu_once, cu_load);
    return cu_present;
}

picoll_memkind_t picoll_memkind(const void *ptr)
{
    unsigned int type = 0, managed = 0;
    if (!picoll_cuda_driver_present()) {
        return PICOLL_MEM_HOST;
    }
    /* memory the driver does not know (plain malloc) answers an error: host */
    if (cu.pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 (cu_deviceptr_t)(uintptr_t)ptr) == 0 && managed) {
        return PICOLL_MEM_MANAGED;
    }
    if (cu.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 (cu_deviceptr_t)(uintptr_t)ptr) == 0 &&
        type == CU_MEMORYTYPE_DEVICE) {
        return PICOLL_MEM_DEVICE;
    }
    return PICOLL_MEM_HOST;
}
