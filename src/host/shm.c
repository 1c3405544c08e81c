#include "build-config.h"
#include "host/shm.h"
#include "topo/cpu.h"
#include "util/fatal.h"
#include "util/config.h"
#include "util/export.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_NAME_LEN 48

static size_t shm_round(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

/* "/picoll-<pid>-<128 random bits>": unique per job and communicator, not guessable. */
static int shm_make_name(char *name, size_t len)
{
    unsigned char rnd[16];
    size_t got = 0;
    while (got < sizeof(rnd)) {
        ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            picoll_error("getrandom failed: %m");
            return -1;
        }
        got += (size_t)n;
    }
    int off = snprintf(name, len, "/picoll-%d-", (int)getpid());
    for (size_t i = 0; i < sizeof(rnd) && off + 2 < (int)len; i++) {
        off += snprintf(name + off, len - (size_t)off, "%02x", rnd[i]);
    }
    return 0;
}

size_t picoll_shm_cache_unit(picoll_topo_cpu_t *cpu)
{
    picoll_topo_cpu_t mine;
    if (cpu == NULL) {
        cpu = &mine;
    }
    picoll_topo_cpu_detect(cpu);
    return picoll_cfg.host_cache != 0 ? picoll_cfg.host_cache : cpu->l2;
}

picoll_status_t picoll_shm_create(MPI_Comm comm, MPI_Comm node_comm, size_t slot_size,
                                  double timeout, picoll_shm_t *shm)
{
    char name[SHM_NAME_LEN] = "";
    picoll_status_t status = PICOLL_OK;
    int fd = -1, my_rank;
    size_t flags_bytes;

    memset(shm, 0, sizeof(*shm));
    PMPI_Comm_rank(node_comm, &shm->me);
    PMPI_Comm_size(node_comm, &shm->nlocal);
    PMPI_Comm_rank(comm, &my_rank);
    PMPI_Comm_size(comm, &shm->comm_size);
    shm->timeout = timeout;
    shm->slot_size = shm_round(slot_size < 4096 ? 4096 : slot_size, 4096);
    flags_bytes = shm_round((size_t)shm->nlocal * sizeof(picoll_shm_flag_t), 4096);
    shm->map_size = flags_bytes + (size_t)shm->nlocal * 2 * shm->slot_size;

    shm->comm_ranks = malloc((size_t)shm->nlocal * sizeof(int));
    if (shm->comm_ranks == NULL) {
        /* the exchange below must stay matched on every rank: nothing sane is left to do */
        picoll_fatal("out of memory setting up the shared-memory workspace: aborting the job");
    }
    PMPI_Allgather(&my_rank, 1, MPI_INT, shm->comm_ranks, 1, MPI_INT, node_comm);

    if (shm->me == 0 && status == PICOLL_OK) {
        if (shm_make_name(name, sizeof(name)) != 0) {
            status = PICOLL_ERR_SYSTEM;
            name[0] = '\0';
        } else {
            fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd < 0) {
                picoll_error("shm_open(%s) failed: %m", name);
                status = PICOLL_ERR_SYSTEM;
                name[0] = '\0';
            } else {
                /* posix_fallocate rather than ftruncate alone: a /dev/shm too small for the
                 * workspace fails here, not with SIGBUS on first touch */
                int err = posix_fallocate(fd, 0, (off_t)shm->map_size);
                if (err != 0) {
                    picoll_warn_once(
                        "cannot reserve %zu bytes of shared memory in /dev/shm (%s): lower "
                        "PICOLL_WORKSPACE_SIZE or enlarge /dev/shm",
                        shm->map_size, strerror(err));
                    status = PICOLL_ERR_NO_MEMORY;
                    /* no name for the peers: they would map the empty file and die of SIGBUS at
                     * its first touch */
                    close(fd);
                    fd = -1;
                    shm_unlink(name);
                    name[0] = '\0';
                }
            }
        }
    }
    /* the name, or "" when the leader failed, and the leader's cache unit, which every rank's
     * chunks then share (ranks on cores with other caches would otherwise cut differently) */
    struct {
        char name[SHM_NAME_LEN];
        uint64_t cache_unit;
    } leader;
    memset(&leader, 0, sizeof(leader));
    if (shm->me == 0) {
        memcpy(leader.name, name, sizeof(name));
        leader.cache_unit = picoll_shm_cache_unit(NULL);
    }
    PMPI_Bcast(&leader, (int)sizeof(leader), MPI_BYTE, 0, node_comm);
    memcpy(name, leader.name, sizeof(name));
    shm->cache_unit = (size_t)leader.cache_unit;
    if (name[0] == '\0' && status == PICOLL_OK) {
        status = PICOLL_ERR_PEER_FAILED;
    }
    if (shm->me != 0 && status == PICOLL_OK) {
        fd = shm_open(name, O_RDWR, 0600);
        if (fd < 0) {
            picoll_error("shm_open(%s) failed: %m", name);
            status = PICOLL_ERR_SYSTEM;
        }
    }
    if (status == PICOLL_OK) {
        shm->base = mmap(NULL, shm->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (shm->base == MAP_FAILED) {
            picoll_error("mmap of %zu bytes of shared memory failed: %m", shm->map_size);
            shm->base = NULL;
            status = PICOLL_ERR_SYSTEM;
        }
    }
    if (fd >= 0) {
        close(fd);
    }
    if (status == PICOLL_OK) {
        /* who I am, for the peers that will wait for me: read after the barrier below */
        picoll_shm_flag_t *me = &((picoll_shm_flag_t *)shm->base)[shm->me];
        me->pid = (uint64_t)getpid();
        me->start = picoll_proc_start_time(getpid());
    }
    /* once every rank has mapped it (or given up), nothing needs the name: unlink it now, so that
     * even a crash later leaves nothing behind in /dev/shm */
    PMPI_Barrier(node_comm);
    if (shm->me == 0 && name[0] != '\0') {
        shm_unlink(name);
    }
    if (status != PICOLL_OK) {
        picoll_shm_destroy(shm);
        return status;
    }
    shm->flags = shm->base;
    shm->data = (char *)shm->base + flags_bytes;
    /* a peer in another pid namespace publishes a pid that names nobody, or somebody else, here:
     * only peers whose published start time matches what this rank sees are watched */
    shm->watch = calloc((size_t)shm->nlocal, 1);
    for (int r = 0; shm->watch != NULL && r < shm->nlocal; r++) {
        const picoll_shm_flag_t *f = &shm->flags[r];
        shm->watch[r] = r != shm->me && picoll_proc_watchable((pid_t)f->pid, f->start);
    }
    picoll_debug("workspace %s: %d local ranks, %zu bytes", name, shm->nlocal, shm->map_size);
    return PICOLL_OK;
}

void picoll_shm_destroy(picoll_shm_t *shm)
{
    if (shm->base != NULL) {
        munmap(shm->base, shm->map_size);
        shm->base = NULL;
    }
    free(shm->comm_ranks);
    shm->comm_ranks = NULL;
    free(shm->pids);
    shm->pids = NULL;
    free(shm->watch);
    shm->watch = NULL;
    shm->cma = 0;
}

/* Marks in missing the local ranks that have not reached epoch: 1, or 2 for a watched one whose
 * process is gone (util/proc.h); counts those gone and those that cannot be watched. Returns the
 * number missing. */
static int shm_missing(const picoll_shm_t *shm, uint64_t epoch, unsigned char *missing, int *ngone,
                       int *nunwatched)
{
    int n = 0;
    *ngone = *nunwatched = 0;
    for (int r = 0; r < shm->nlocal; r++) {
        missing[r] = atomic_load_explicit(&shm->flags[r].line[epoch & 1].arrived,
                                          memory_order_acquire) < epoch;
        if (!missing[r]) {
            continue;
        }
        n++;
        if (shm->watch == NULL || !shm->watch[r]) {
            (*nunwatched)++;
        } else if (picoll_proc_state((pid_t)shm->flags[r].pid, shm->flags[r].start) ==
                   PICOLL_PROC_GONE) {
            missing[r] = 2;
            (*ngone)++;
        }
    }
    return n;
}

/* A wait in the barrier of epoch read the clock (expired: past PICOLL_TIMEOUT, 2x, 4x, ...). The
 * processes waited for are looked at when the wait expires and once a second from its first
 * second on, never on a wait that ends sooner: one that is gone ends the job now; late ones are
 * reported when the wait expires, and waited for unless PICOLL_TIMEOUT_ACTION=abort. */
static void shm_wait_tick(picoll_shm_t *shm, uint64_t epoch, const char *coll,
                          const picoll_wait_t *w, int expired, double *next_look)
{
    unsigned char missing[shm->nlocal];
    int ngone, nunwatched;

    if (*next_look == 0.0) {
        *next_look = w->start + 1.0;
    }
    if (!expired && w->now < *next_look) {
        return;
    }
    *next_look = w->now + 1.0;
    if (shm_missing(shm, epoch, missing, &ngone, &nunwatched) == 0) {
        return;
    }
    picoll_wait_verdict(coll, shm->comm_size, shm->comm_ranks, missing, shm->nlocal, ngone,
                        nunwatched, expired, w->now - w->start, shm->timeout);
}

static _Atomic unsigned long long shm_barriers;

PICOLL_EXPORT unsigned long long picoll_test_shm_barriers(void);
unsigned long long picoll_test_shm_barriers(void)
{
    return atomic_load_explicit(&shm_barriers, memory_order_relaxed);
}

uint64_t picoll_shm_arrive(picoll_shm_t *shm, uint32_t vote)
{
    uint64_t epoch = ++shm->epoch;
    picoll_shm_line_t *mine = &shm->flags[shm->me].line[epoch & 1];

    atomic_fetch_add_explicit(&shm_barriers, 1, memory_order_relaxed);
    atomic_store_explicit(&mine->vote, vote, memory_order_relaxed);
    atomic_store_explicit(&mine->arrived, epoch, memory_order_release);
    return epoch;
}

int picoll_shm_reached(const picoll_shm_t *shm, uint64_t epoch)
{
    for (int r = 0; r < shm->nlocal; r++) {
        if (atomic_load_explicit(&shm->flags[r].line[epoch & 1].arrived, memory_order_acquire) <
            epoch) {
            return 0;
        }
    }
    return 1;
}

uint32_t picoll_shm_barrier_mask(picoll_shm_t *shm, uint32_t vote, const char *coll)
{
    return picoll_shm_wait_all(shm, picoll_shm_arrive(shm, vote), vote, coll);
}

uint32_t picoll_shm_wait_all(picoll_shm_t *shm, uint64_t epoch, uint32_t vote, const char *coll)
{
    uint32_t all = vote;

    for (int r = 0; r < shm->nlocal; r++) {
        if (r == shm->me) {
            continue;
        }
        /* a peer reaches this parity's next epoch only after I arrived at the one between */
        picoll_shm_line_t *peer = &shm->flags[r].line[epoch & 1];
        if (atomic_load_explicit(&peer->arrived, memory_order_acquire) < epoch) {
            /* the wait's progress hook serves a peer that waits, between nodes, for bytes of
             * ours still in a rail's worker */
            picoll_wait_t w;
            double next_look = 0.0;
            picoll_wait_init(&w, shm->timeout, picoll_spin_max());
            while (atomic_load_explicit(&peer->arrived, memory_order_acquire) < epoch) {
                int step = picoll_wait(&w, 0);
                if (step != PICOLL_WAIT_POLL) {
                    shm_wait_tick(shm, epoch, coll, &w, step == PICOLL_WAIT_EXPIRED, &next_look);
                }
            }
        }
        all &= atomic_load_explicit(&peer->vote, memory_order_relaxed);
    }
    return all;
}

int picoll_shm_barrier(picoll_shm_t *shm, int vote, const char *coll)
{
    return picoll_shm_barrier_mask(shm, vote != 0, coll) != 0;
}
