/* Test buffers of one memory kind (host, device or managed), filled and read back from the host
 * whatever their kind: the device ones through the driver's copies (tests/cuda/drv.h), since on
 * the strict fake driver the CPU cannot touch them. Shared by the programs that compare calls on
 * device buffers with the same calls on host buffers. */
#ifndef PICOLL_TESTS_CUDA_TBUF_H
#define PICOLL_TESTS_CUDA_TBUF_H

#include <stddef.h>

enum { TB_HOST, TB_DEVICE, TB_MANAGED, TB_KINDS };
extern const char *const tb_kind_name[TB_KINDS];

typedef struct {
    int kind;
    size_t bytes;
    void *ptr; /* what MPI gets */
} tbuf_t;

/* A failed allocation ends the job, naming the kind and size. bytes may be 0 (one byte then). */
void tb_alloc(tbuf_t *b, int kind, size_t bytes);
void tb_put(tbuf_t *b, const void *src); /* all b->bytes from src */
void tb_get(const tbuf_t *b, void *dst); /* all b->bytes into dst */
void tb_free(tbuf_t *b);

/* Loads the CUDA driver and makes device (rank % devices) current: the number of devices, or 0
 * after rank 0 printed "SKIP: no CUDA device (why)" (the caller then finalizes and exits 77). */
int tb_use_device(void);

#endif
