/* A small pool of pinned (page-locked, CUDA-registered) host buffers for staging. Thread safe.
 * Where pinning fails the pool hands out ordinary memory (slower copies, same results). */
#ifndef PICOLL_PINNED_H
#define PICOLL_PINNED_H

#include <stddef.h>
#include "util/status.h"

/* A buffer of at least bytes bytes, 64-byte aligned. ctx: a CUDA context to allocate under
 * (pinned memory is allocated portable: usable with every context). */
picoll_status_t picoll_pinned_get(size_t bytes, void *ctx, void **out);
/* Gives a buffer from picoll_pinned_get back to the pool. */
void picoll_pinned_put(void *buf);

#endif
