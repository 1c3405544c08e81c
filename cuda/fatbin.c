/* The device kernels' fatbin (cuda/coll_kernel.fatbin, built by nvcc), embedded in the library's
 * read-only data: cuModuleLoadData takes it from memory, so no file travels with libpicoll.so. */
#include "cuda/cuda_ws.h"

__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl picoll_cuda_fatbin\n"
        ".hidden picoll_cuda_fatbin\n"
        ".type picoll_cuda_fatbin, @object\n"
        "picoll_cuda_fatbin:\n"
        ".incbin \"" PICOLL_FATBIN_PATH "\"\n"
        ".size picoll_cuda_fatbin, . - picoll_cuda_fatbin\n"
        ".byte 0\n"
        ".previous\n");
