// The device executor's kernel, cuda/coll_kernel.cu, built for the CPU: the same source nvcc
// builds for the GPU, with CUDA's built-in names from emu_cuda.h.
#include "emu_cuda.h"

#include "cuda/coll_kernel.cu"
