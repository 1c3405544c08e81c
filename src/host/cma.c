#include "build-config.h" /* _GNU_SOURCE: process_vm_readv */
#include "host/cma.h"
#include "util/config.h"
#include "util/fatal.h"
#include "util/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* What each rank publishes for the probe. */
typedef struct {
    int64_t pid;    /* 0: this rank does not take part (it counts as a failed read) */
    uint64_t addr;  /* of its probe word */
    uint64_t value; /* the word's value */
} cma_probe_t;

int picoll_cma_read(int pid, void *local, uint64_t remote, size_t len)
{
    char *dst = local;
    while (len > 0) {
        struct iovec l = {.iov_base = dst, .iov_len = len};
        struct iovec r = {.iov_base = (void *)(uintptr_t)remote, .iov_len = len};
        ssize_t n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (n == 0) {
            return EFAULT; /* nothing more can be read there */
        }
        dst += n;
        remote += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

static uint64_t cma_nonce(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t v = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec * 1000000007u ^
                 (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&ts;
    return v | 1; /* never 0, the value of a word nobody wrote */
}

/* 1 when every peer's probe word reads back as published; logs the first failure. */
static int cma_check_peers(const cma_probe_t *all, int n, int me)
{
    for (int r = 0; r < n; r++) {
        uint64_t got = 0;
        if (r == me) {
            continue;
        }
        if (all[r].pid == 0) {
            return 0; /* that rank said no itself; it says why */
        }
        int err = picoll_cma_read((int)all[r].pid, &got, all[r].addr, sizeof(got));
        if (err != 0) {
            picoll_info("single-copy transfers off on this node: process_vm_readv of local rank "
                        "%d (pid %lld) failed: %s",
                        r, (long long)all[r].pid, strerror(err));
            return 0;
        }
        if (got != all[r].value) {
            picoll_info("single-copy transfers off on this node: process_vm_readv of local rank "
                        "%d (pid %lld) read another value than it published (not the same pid "
                        "namespace?)",
                        r, (long long)all[r].pid);
            return 0;
        }
    }
    return 1;
}

int picoll_cma_probe(MPI_Comm node_comm, int want, int **pids)
{
    int n, me, ok, agreed = 0;
    cma_probe_t mine = {0};
    /* Read by the peers through the kernel before they join the allreduce below, which this rank
     * cannot leave before they do: the stack holds it long enough, and a probe on another thread
     * has its own. Its value is new each time: a read that reaches the wrong process (ranks in
     * different pid namespaces) cannot pass. */
    volatile uint64_t probe_word = 0;

    *pids = NULL;
    PMPI_Comm_size(node_comm, &n);
    PMPI_Comm_rank(node_comm, &me);
    cma_probe_t *all = calloc((size_t)n, sizeof(*all));
    int *list = malloc((size_t)n * sizeof(int));
    if (all == NULL || list == NULL) {
        /* the peers are entering the exchange below: leaving it would hang the job */
        picoll_fatal("out of memory probing single-copy transfers: aborting the job");
    }
    if (want) {
        probe_word = cma_nonce();
        mine.pid = getpid();
        mine.addr = (uint64_t)(uintptr_t)&probe_word;
        mine.value = probe_word;
    }
    ok = mine.pid != 0;
    if (PMPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, node_comm) !=
        MPI_SUCCESS) {
        ok = 0;
    }
    if (ok) {
        ok = cma_check_peers(all, n, me);
    }
    if (PMPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, node_comm) != MPI_SUCCESS) {
        agreed = 0;
    }
    if (agreed) {
        for (int r = 0; r < n; r++) {
            list[r] = (int)all[r].pid;
        }
        *pids = list;
        list = NULL;
    }
    picoll_debug("single copy (process_vm_readv) between the %d ranks of this node: %s", n,
                 agreed ? "on" : "off");
    free(list);
    free(all);
    return agreed;
}

/* The address a rank publishes; PICOLL_TEST_CMA_FAULT's rank publishes one in the never-mapped
 * first page, so that every peer's read fails. */
static uint64_t cma_published(const void *addr)
{
    return picoll_cfg.test_cma_fault == picoll_log_rank ? 16 : (uint64_t)(uintptr_t)addr;
}

void picoll_cma_publish(picoll_shm_t *shm, const void *addr)
{
    /* the barrier's release store on `arrived` publishes it */
    atomic_store_explicit(&shm->flags[shm->me].block, cma_published(addr), memory_order_relaxed);
}

void picoll_cma_publish_result(picoll_shm_t *shm, void *addr)
{
    atomic_store_explicit(&shm->flags[shm->me].result, cma_published(addr), memory_order_relaxed);
}

static void cma_read_at(const picoll_shm_t *shm, int r, uint64_t remote, void *local, size_t len,
                        const char *coll)
{
    int err = picoll_cma_read(shm->pids[r], local, remote, len);
    if (err != 0) {
        picoll_fatal("%s on a communicator of size %d: process_vm_readv of %zu bytes at 0x%llx "
                     "from rank %d (pid %d) failed: %s: aborting the job",
                     coll, shm->comm_size, len, (unsigned long long)remote, shm->comm_ranks[r],
                     shm->pids[r], strerror(err));
    }
}

void picoll_cma_read_peer(const picoll_shm_t *shm, int r, void *local, size_t off, size_t len,
                          const char *coll)
{
    cma_read_at(shm, r, atomic_load_explicit(&shm->flags[r].block, memory_order_relaxed) + off,
                local, len, coll);
}

void picoll_cma_read_peer_result(const picoll_shm_t *shm, int r, void *local, size_t off,
                                 size_t len, const char *coll)
{
    cma_read_at(shm, r, atomic_load_explicit(&shm->flags[r].result, memory_order_relaxed) + off,
                local, len, coll);
}
