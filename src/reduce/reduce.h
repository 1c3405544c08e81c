/* Element-wise reductions on host memory, for every (type, op) pair MPI allows. */
#ifndef PICOLL_REDUCE_H
#define PICOLL_REDUCE_H

#include <stddef.h>
#include "util/dtype.h"

/* dst = srcs[0] op srcs[1] op ... op srcs[nsrc-1], left to right, so that every rank reducing the
 * same inputs gets bit-identical results. float16 and bfloat16 sums and products are accumulated in
 * float and rounded to the format once (as the device kernel does); picoll_reduce_acc rounds at
 * every step. dst must not overlap any source. nsrc >= 1.
 * (dt, op) must satisfy picoll_op_valid. */
void picoll_reduce(picoll_dtype_t dt, picoll_op_t op, void *dst, const void *const *srcs, int nsrc,
                   size_t count);

/* dst = dst op src, element by element. dst must not overlap src. */
void picoll_reduce_acc(picoll_dtype_t dt, picoll_op_t op, void *dst, const void *src, size_t count);

#endif
