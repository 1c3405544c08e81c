// The device executor's kernel, cuda/coll_kernel.cu, built for the CPU: the same source nvcc
// builds for the GPU, with CUDA's built-in names from emu_cuda.h.
#include "emu_cuda.h"

#include "cuda/coll_kernel.cu"

#include <string.h>

/* The entries of the CPU build by their names in the fatbin (PICOLL_CUDA_KERNEL_NAME, the fixed
 * ones of PICOLL_CUDA_FIXED_LIST and the floors' two): what cuModuleGetFunction finds. */
typedef void (*emu_entry_fn)(const picoll_cuda_kparams_t);
static const struct {
    const char *name;
    emu_entry_fn fn;
} emu_entries[] = {
    {PICOLL_CUDA_KERNEL_NAME, picoll_coll_kernel},
#define EMU_FIXED_ENTRY(tag, e, dtype, op, nr)                                                     \
    {PICOLL_CUDA_FIXED_NAME(tag, nr), picoll_coll_##tag##_r##nr},
#define EMU_FIXED_RANKS(tag, e, dtype, op)                                                         \
    PICOLL_CUDA_FIXED_RANKS(EMU_FIXED_ENTRY, tag, e, dtype, op)
    PICOLL_CUDA_FIXED_LIST(EMU_FIXED_RANKS)
#undef EMU_FIXED_RANKS
#undef EMU_FIXED_ENTRY
        {PICOLL_CUDA_FLOOR_NAME, picoll_floor_kernel},
    {PICOLL_CUDA_BARRIER_NAME, picoll_barrier_kernel},
};

/* Entry i's function and name (-1 beyond the last); by name: its index, or -1. */
extern "C" int emu_kernel_entry(const char *name, emu_entry_fn *fn, const char **canon)
{
    for (size_t i = 0; i < sizeof(emu_entries) / sizeof(emu_entries[0]); i++) {
        if (name != NULL && strcmp(name, emu_entries[i].name) == 0) {
            *fn = emu_entries[i].fn;
            *canon = emu_entries[i].name;
            return (int)i;
        }
    }
    return -1;
}
