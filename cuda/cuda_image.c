/* Which of the embedded kernel images (cuda/Makefile.inc's architectures) a device would run. */
#include "build-config.h"
#include "cuda/cuda_dev.h"
#include "mem/cudrv.h"

#include <stdio.h>
#include <stdlib.h>

void picoll_cuda_kernel_image(int device, char *out, size_t len)
{
#ifdef PICOLL_HAVE_CUDA
    const char *archs = PICOLL_CUDA_ARCHS;
#else
    const char *archs = "";
#endif
#ifdef PICOLL_CUDA_PTX
    const int ptx = 1; /* a GPU newer than the highest runs its PTX */
#else
    const int ptx = 0; /* --disable-cuda-ptx */
#endif
    int major = 0, minor = 0, best = 0, found = 0;
    picoll_cu_device_t dev;

    if (archs[0] == '\0') {
        snprintf(out, len, "none (picoll was built without nvcc)");
        return;
    }
    if (picoll_cudrv_load() != PICOLL_OK || picoll_cu.device_get(&dev, device) != 0 ||
        picoll_cu.device_get_attribute(&major, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       dev) != 0 ||
        picoll_cu.device_get_attribute(&minor, PICOLL_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       dev) != 0) {
        snprintf(out, len, "unknown (the driver does not answer for device %d)", device);
        return;
    }
    int cc = major * 10 + minor, hi = 0;
    /* a cubin runs on its own major version at an equal or higher minor: the highest such */
    for (const char *p = archs; *p != '\0';) {
        char *end;
        long a = strtol(p, &end, 10);
        if (end == p) {
            break;
        }
        p = end;
        hi = (int)a > hi ? (int)a : hi;
        if (a / 10 == major && a <= cc && a > best) {
            best = (int)a;
            found = 1;
        }
    }
    if (cc < 70) {
        snprintf(out, len, "none for compute capability %d.%d (picoll's kernels need 7.0)", major,
                 minor);
    } else if (found) {
        snprintf(out, len, "sm_%d for compute capability %d.%d", best, major, minor);
    } else if (cc > hi && ptx) {
        snprintf(out, len,
                 "PTX of compute_%d, compiled by the driver for compute capability "
                 "%d.%d at the first device call",
                 hi, major, minor);
    } else {
        snprintf(out, len, "none for compute capability %d.%d (built for %s%s)", major, minor,
                 archs, ptx ? "" : ", no PTX");
    }
}
