/* A table of functions filled from a library opened at run time (dlopen): the one loader of the
 * CUDA driver (mem/cudrv.c), UCX (net/ucx_load.c) and the benchmarks' CUDA driver and NCCL
 * (osu-bench/, which link no part of picoll: this header needs only the C library and libdl).
 *
 *     static const picoll_dl_sym_t syms[] = {PICOLL_DL_SYM(my_table_t, init, "cuInit"), ...};
 *     const char *missing = picoll_dl_fill(lib, syms, PICOLL_DL_COUNT(syms), &table);
 *
 * Each entry names a function pointer field of the table by its offset and the symbol that fills
 * it. */
#ifndef PICOLL_UTIL_DLTABLE_H
#define PICOLL_UTIL_DLTABLE_H

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    size_t offset;      /* of the function pointer in the table */
    const char *symbol; /* the library's name for it */
} picoll_dl_sym_t;

#define PICOLL_DL_SYM(type, field, name)                                                           \
    {                                                                                              \
        .offset = offsetof(type, field), .symbol = (name)                                          \
    }
#define PICOLL_DL_COUNT(syms) (sizeof(syms) / sizeof((syms)[0]))

/* Fills table's fields from lib, every one of syms; returns NULL, or the first symbol lib lacks
 * (the table is then partly filled and not to be used). */
static inline const char *picoll_dl_fill(void *lib, const picoll_dl_sym_t *syms, size_t n,
                                         void *table)
{
    for (size_t i = 0; i < n; i++) {
        void *fn = dlsym(lib, syms[i].symbol);
        if (fn == NULL) {
            return syms[i].symbol;
        }
        memcpy((char *)table + syms[i].offset, &fn, sizeof(fn));
    }
    return NULL;
}

#endif
