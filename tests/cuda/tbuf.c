#include "tbuf.h"

#include "drv.h"
#include "mpitest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tb_kind_name[TB_KINDS] = {"host", "device", "managed"};

void tb_alloc(tbuf_t *b, int kind, size_t bytes)
{
    cu_ptr_t p = 0;
    size_t n = bytes ? bytes : 1;
    cu_result_t rc;

    b->kind = kind;
    b->bytes = bytes;
    if (kind == TB_HOST) {
        b->ptr = calloc(1, n);
        return;
    }
    if (kind == TB_MANAGED && drv.mem_alloc_managed == NULL) {
        mt_fail("managed memory asked for, but the CUDA driver lacks cuMemAllocManaged");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    rc = kind == TB_DEVICE ? drv.mem_alloc(&p, n)
                           : drv.mem_alloc_managed(&p, n, 1 /* CU_MEM_ATTACH_GLOBAL */);
    if (rc != 0) {
        mt_fail("allocating %zu bytes of %s memory: CUresult %d", bytes, tb_kind_name[kind], rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    b->ptr = (void *)(uintptr_t)p;
}

void tb_put(tbuf_t *b, const void *src)
{
    if (b->bytes == 0) {
        return;
    }
    if (b->kind == TB_HOST) {
        memcpy(b->ptr, src, b->bytes);
    } else {
        CK(drv.memcpy_htod((cu_ptr_t)(uintptr_t)b->ptr, src, b->bytes));
    }
}

void tb_get(const tbuf_t *b, void *dst)
{
    if (b->bytes == 0) {
        return;
    }
    if (b->kind == TB_HOST) {
        memcpy(dst, b->ptr, b->bytes);
    } else {
        CK(drv.memcpy_dtoh(dst, (cu_ptr_t)(uintptr_t)b->ptr, b->bytes));
    }
}

void tb_free(tbuf_t *b)
{
    if (b->kind == TB_HOST) {
        free(b->ptr);
    } else {
        CK(drv.mem_free((cu_ptr_t)(uintptr_t)b->ptr));
    }
    b->ptr = NULL;
}

int tb_use_device(void)
{
    char why[256] = "";
    int ndev = drv_load(why, sizeof(why));
    if (ndev == 0) {
        if (mt_rank == 0) {
            printf("SKIP: no CUDA device (%s)\n", why);
            fflush(stdout);
        }
        return 0;
    }
    drv_choose_device(mt_rank % ndev);
    return ndev;
}
