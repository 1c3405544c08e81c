/* What kind of memory a pointer is. The CUDA driver is loaded with dlopen on first use, so
 * picoll works on machines without CUDA: there every pointer is host memory. */
#ifndef PICOLL_MEMKIND_H
#define PICOLL_MEMKIND_H

typedef enum {
    PICOLL_MEM_HOST,     /* ordinary or pinned host memory: the host executor may touch it */
    PICOLL_MEM_DEVICE,   /* CUDA device memory */
    PICOLL_MEM_MANAGED   /* CUDA managed memory */
} picoll_memkind_t;

picoll_memkind_t picoll_memkind(const void *ptr);
/* 1 when the CUDA driver loaded and initialised in this process. */
int picoll_cuda_driver_present(void);

#endif
