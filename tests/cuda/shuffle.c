/* cuda_coll shuffle [--calls N] [--seed S] [--stream]: N calls drawn from one seed (S, else
 * FAKECUDA_SEED, else 1) that every rank shares, so that all make the same calls in the same
 * order: allreduce of any type, op and count up to three workspace buffers (the edges half the
 * time); allgather and alltoall of any block; reduce-scatter, reduce, bcast, allgatherv and
 * alltoallv (devcoll_drawn); in place or not, at offsets 0, 1 or 8, each on one of four
 * communicators: the world, a dup of it, the world in reversed rank order and its halves (a rank
 * whose half is alone sits the call out). The workspaces' paths (low-latency lines, one-shot,
 * two-shot, chunks) follow each other in no fixed order, and calls of communicators of different
 * sizes and rank orders interleave on the same GPU, where the matrix runs each communicator's
 * calls grouped and sorted. Each result bit for bit against the plain loops, each call's path
 * checked (with PICOLL_CUDA_ZERO_COPY and --zc or --register: the zero-copy path where it
 * applies).
 *
 * --stream: a third of the calls are enqueued instead (MPIX_*_enqueue: allreduce, allgather,
 * alltoall, reduce_scatter_block, bcast) on one of three stream communicators, the world's on one
 * CUDA stream, the reversed world's on another and the dup's on the legacy default stream (which
 * synchronises with the other two), their inputs written by copies on the stream
 * just before the call; up to 8 of them stay in flight, unsynchronised, while the blocking calls
 * of the other communicators go on, then the streams are synchronised and every result checked.
 * At the end every enqueued collective must have run on picoll's kernels on its stream (none
 * staged: picoll_stream_query).
 *
 * --churn N: after a call, one time in N (drawn), a communicator is freed and made again: the
 * dup, the reversed world or the halves (a stream communicator made from it keeps its own), or,
 * with --stream, one of the stream communicators with its stream (the calls in flight checked
 * first, and its collectives counted on the kernels), so that workspaces, stream workspaces and
 * their caches are made and destroyed among the calls, in no fixed order. */
#include "cases.h"
#include "modes.h"
#include "mpix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SH_WORLD, SH_DUP, SH_REV, SH_HALF, SH_COMMS };
static const char *const sh_names[SH_COMMS] = {"world", "dup", "reversed", "half"};

/* ---------------------------------------------------------------- the stream communicators */

static mpix_t mx;

#define NSTREAMS 3
#define IN_FLIGHT 8

typedef struct {
    MPI_Comm parent, comm;
    cu_stream_t cs;
    stream_t s;
    int rank, size;
    long enqueued; /* collectives enqueued */
} scomm_t;

/* An enqueued call not yet checked: its device allocations (guard bytes around the buffers), the
 * host inputs their asynchronous copies read (kept until then), the result expected. */
typedef struct {
    char name[128];
    cu_ptr_t salloc, ralloc;
    size_t off, ralloc_len, rbytes; /* rbytes: the result's bytes, at ralloc + GUARD + off */
    size_t soff, slen;              /* the send buffer's sin, at salloc + GUARD + soff */
    unsigned char *sin, *rin, *want;
} pend_t;

static pend_t pend[IN_FLIGHT];
static int npend;

/* A stream communicator of parent on a stream of its own, or (legacy) on the legacy default
 * stream, which the other streams of the test (blocking ones) synchronise with */
static void scomm_make(scomm_t *sc, MPI_Comm parent, int legacy)
{
    MPI_Info info;
    sc->parent = parent;
    sc->comm = MPI_COMM_NULL;
    sc->s = MPIX_STREAM_NULL;
    sc->cs = CU_STREAM_LEGACY;
    if (!legacy) {
        CK(drv.stream_create(&sc->cs, CU_STREAM_DEFAULT));
    }
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MT_CHECK(mx.info_set_hex(info, "value", &sc->cs, sizeof(sc->cs)) == MPI_SUCCESS,
             "MPIX_Info_set_hex");
    MT_CHECK(mx.create(info, &sc->s) == MPI_SUCCESS, "MPIX_Stream_create");
    MPI_Info_free(&info);
    MT_CHECK(mx.comm_create(parent, sc->s, &sc->comm) == MPI_SUCCESS, "MPIX_Stream_comm_create");
    MPI_Comm_rank(parent, &sc->rank);
    MPI_Comm_size(parent, &sc->size);
    sc->enqueued = 0;
}

/* Stream communicator sc's end: every collective enqueued on it ran on picoll's kernels (none
 * staged), then it and its stream are freed. */
static void scomm_drop(scomm_t *sc, int i)
{
    long staged = -1, host = -1, device = -1, kernels = -1;
    MT_CHECK(mx.query(sc->s, &staged, &host, &device, NULL, NULL, &kernels) == MPI_SUCCESS,
             "picoll_stream_query");
    MT_CHECK(staged == 0 && host == 0 && device == 0 && kernels == sc->enqueued,
             "stream %d: %ld collectives enqueued, %ld on picoll's kernels (staged %ld, host %ld, "
             "device %ld): every one should be on the kernels",
             i, sc->enqueued, kernels, staged, host, device);
    MPI_Comm_free(&sc->comm);
    MT_CHECK(mx.free_(&sc->s) == MPI_SUCCESS, "MPIX_Stream_free");
    if (sc->cs != CU_STREAM_LEGACY) {
        CK(drv.stream_destroy(sc->cs));
    }
}

/* Communicator w of the shuffle made (again): a dup of the world, the world reversed, its
 * halves. */
static void comm_make(MPI_Comm *c, int w, int world_rank, int world_size)
{
    if (w == SH_DUP) {
        MPI_Comm_dup(MPI_COMM_WORLD, c);
    } else if (w == SH_REV) {
        MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, c);
    } else {
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < world_size / 2, world_rank, c);
    }
}

/* A device allocation of GUARD + off + len + GUARD bytes on sc's stream: the guard bytes, then
 * in (len bytes, or the guard byte where NULL) at GUARD + off, written by copies on the stream. */
static cu_ptr_t sbuf(const scomm_t *sc, size_t off, size_t len, const unsigned char *in)
{
    cu_ptr_t p;
    CK(drv.mem_alloc(&p, GUARD + off + len + GUARD));
    CK(drv.memset_d8_async(p, GUARD_BYTE, GUARD + off + len + GUARD, sc->cs));
    if (in != NULL && len > 0) {
        CK(drv.memcpy_htod_async(p + GUARD + off, in, len, sc->cs));
    }
    return p;
}

/* p's send buffer: len bytes of p->sin at offset off (checked unchanged by stream_flush) */
static cu_ptr_t send_buf(pend_t *p, const scomm_t *sc, size_t off, size_t len)
{
    p->soff = off;
    p->slen = len;
    return sbuf(sc, off, len, p->sin);
}

/* Every call in flight: every stream synchronised, each result and its guard bytes checked. */
static void stream_flush(scomm_t *sc)
{
    for (int i = 0; i < NSTREAMS; i++) {
        CK(drv.stream_synchronize(sc[i].cs));
    }
    for (int i = 0; i < npend; i++) {
        pend_t *p = &pend[i];
        unsigned char *got = malloc(p->ralloc_len);
        CK(drv.memcpy_dtoh(got, p->ralloc, p->ralloc_len));
        /* the bytes around the receive buffer (in place, a reduce-scatter's bytes past its
         * result are the call's to leave as it likes) */
        int guards = 1;
        for (size_t b = 0; b < p->ralloc_len; b++) {
            if (b < GUARD + p->off || b >= p->ralloc_len - GUARD) {
                guards = guards && got[b] == GUARD_BYTE;
            }
        }
        MT_CHECK(guards, "%s: guard bytes overwritten", p->name);
        check_bytes(p->name, "", "", p->rbytes, 1, got + GUARD + p->off, p->want);
        ncases++;
        free(got);
        CK(drv.mem_free(p->ralloc));
        if (p->salloc != 0) {
            unsigned char *back = malloc(p->slen + 1);
            CK(drv.memcpy_dtoh(back, p->salloc + GUARD + p->soff, p->slen));
            MT_CHECK(memcmp(back, p->sin, p->slen) == 0, "%s: send buffer changed", p->name);
            free(back);
            CK(drv.mem_free(p->salloc));
        }
        free(p->sin);
        free(p->rin);
        free(p->want);
    }
    npend = 0;
}

/* One enqueued call on sc drawn from seed (call k): its inputs copied on the stream, the call,
 * its result left to stream_flush. */
static void stream_drawn(scomm_t *sc, uint64_t seed, long k)
{
#define DRAW(d) mt_rand(seed, (uint64_t)k, 200 + (uint64_t)(d))
    pend_t *p = &pend[npend++];
    int n = sc->size, me = sc->rank, kind = (int)(DRAW(0) % 5), in_place = (int)(DRAW(1) & 1),
        rc = MPI_SUCCESS;
    size_t off = (size_t[]){0, 1, 8}[DRAW(2) % 3], ti = DRAW(3) % ntypes;
    const type_t *t = &types[ti];
    op_t op = draw_op(t, seed, k, 200, 4);
    size_t es = t->size, slot_elems = SLOT / es;
    size_t count = DRAW(20) & 1 ? (size_t[]){1, slot_elems - 1, slot_elems + 1,
                                             ONESHOT_MAX / es + 1}[DRAW(21) % 4]
                                : 1 + DRAW(22) % (2 * slot_elems + 8);
    size_t block =
        DRAW(23) & 1 ? (size_t[]){1, SLOT - 1, SLOT + 1}[DRAW(24) % 3] : 1 + DRAW(25) % (SLOT + 16);
    int root = (int)(DRAW(26) % (uint64_t)n);
    uint64_t dseed = mt_rand(seed, (uint64_t)k, 999);

    memset(p, 0, sizeof(*p));
    p->off = off;
    int save_rank = mt_rank, save_size = mt_size;
    mt_rank = me; /* gen and reference follow the communicator's ranks */
    mt_size = n;
    switch (kind) {
    case 0:
    case 1: { /* allreduce, twice as often */
        size_t bytes = count * es;
        p->sin = malloc(bytes + 1);
        p->want = malloc(bytes + 1);
        uint64_t s = seed_of((int)ti, (int)op, count, (int)(off * 2 + (size_t)in_place));
        for (size_t i = 0; i < count; i++) {
            gen(t, op, s, me, i, 0, p->sin + i * es);
            reference(t, op, s, i, 0, p->want + i * es);
        }
        p->rbytes = bytes;
        p->ralloc_len = GUARD + off + bytes + GUARD;
        p->ralloc = sbuf(sc, off, bytes, in_place ? p->sin : NULL);
        p->salloc = in_place ? 0 : send_buf(p, sc, (off + 3) % 16, bytes);
        snprintf(p->name, sizeof(p->name), "MPIX_Allreduce_enqueue %s %s count %zu%s", t->name,
                 op_names[op], count, in_place ? " in place" : "");
        rc = mx.allreduce(in_place ? MPI_IN_PLACE
                                   : (void *)(uintptr_t)(p->salloc + GUARD + (off + 3) % 16),
                          (void *)(uintptr_t)(p->ralloc + GUARD + off), (int)count, t->dt,
                          op_handle(op), sc->comm);
        break;
    }
    case 2:
    case 3: { /* allgather (in place or not), alltoall (not in place): MPI_BYTE blocks */
        int a2a = kind == 3;
        in_place = in_place && !a2a;
        size_t total = block * (size_t)n;
        p->sin = malloc((a2a ? total : block) + 1);
        p->want = malloc(total + 1);
        for (int r = 0; r < n; r++) {
            for (size_t i = 0; i < block; i++) {
                /* byte i from rank r to rank to: mt_rand(dseed, r * 64 + to (alltoall), i) */
                if (a2a) {
                    p->sin[(size_t)r * block + i] =
                        (unsigned char)mt_rand(dseed, (uint64_t)(me * 64 + r), i);
                    p->want[(size_t)r * block + i] =
                        (unsigned char)mt_rand(dseed, (uint64_t)(r * 64 + me), i);
                } else {
                    p->want[(size_t)r * block + i] = (unsigned char)mt_rand(dseed, (uint64_t)r, i);
                }
            }
        }
        if (!a2a) {
            memcpy(p->sin, p->want + (size_t)me * block, block);
        }
        p->rbytes = total;
        p->ralloc_len = GUARD + off + total + GUARD;
        if (in_place) {
            /* my block where it goes; the others' places hold garbage the call overwrites */
            p->rin = malloc(total + 1);
            memset(p->rin, 0x5A, total);
            memcpy(p->rin + (size_t)me * block, p->sin, block);
            p->ralloc = sbuf(sc, off, total, p->rin);
        } else {
            p->ralloc = sbuf(sc, off, total, NULL);
        }
        size_t soff = (off + 5) % 16;
        p->salloc = in_place ? 0 : send_buf(p, sc, soff, a2a ? total : block);
        snprintf(p->name, sizeof(p->name), "MPIX_%s_enqueue MPI_BYTE block %zu%s",
                 a2a ? "Alltoall" : "Allgather", block, in_place ? " in place" : "");
        const void *send =
            in_place ? MPI_IN_PLACE : (const void *)(uintptr_t)(p->salloc + GUARD + soff);
        void *recv = (void *)(uintptr_t)(p->ralloc + GUARD + off);
        rc = a2a ? mx.alltoall(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, sc->comm)
                 : mx.allgather(send, (int)block, MPI_BYTE, recv, (int)block, MPI_BYTE, sc->comm);
        break;
    }
    default: {
        if (DRAW(27) & 1) { /* reduce_scatter_block of count / n elements a rank (at least 1) */
            size_t piece = count / (size_t)n + 1, total = piece * (size_t)n, bytes = total * es;
            uint64_t s = seed_of((int)ti, (int)op, piece, 77 + (int)in_place);
            p->sin = malloc(bytes + 1);
            p->want = malloc(piece * es + 1);
            for (size_t i = 0; i < total; i++) {
                gen(t, op, s, me, i, 0, p->sin + i * es);
            }
            for (size_t i = 0; i < piece; i++) {
                reference(t, op, s, (size_t)me * piece + i, 0, p->want + i * es);
            }
            p->rbytes = piece * es;
            if (in_place) {
                p->rin = malloc(bytes + 1);
                memcpy(p->rin, p->sin, bytes);
                p->ralloc_len = GUARD + off + bytes + GUARD;
                p->ralloc = sbuf(sc, off, bytes, p->rin);
            } else {
                p->ralloc_len = GUARD + off + piece * es + GUARD;
                p->ralloc = sbuf(sc, off, piece * es, NULL);
                p->salloc = send_buf(p, sc, (off + 3) % 16, bytes);
            }
            snprintf(p->name, sizeof(p->name),
                     "MPIX_Reduce_scatter_block_enqueue %s %s piece %zu%s", t->name, op_names[op],
                     piece, in_place ? " in place" : "");
            rc = mx.rsb(in_place ? MPI_IN_PLACE
                                 : (const void *)(uintptr_t)(p->salloc + GUARD + (off + 3) % 16),
                        (void *)(uintptr_t)(p->ralloc + GUARD + off), (int)piece, t->dt,
                        op_handle(op), sc->comm);
        } else { /* bcast of block bytes from root */
            p->want = malloc(block + 1);
            for (size_t i = 0; i < block; i++) {
                p->want[i] = (unsigned char)mt_rand(dseed, 5, i);
            }
            p->rin = malloc(block + 1);
            if (me == root) {
                memcpy(p->rin, p->want, block);
            } else {
                memset(p->rin, 0x5A, block);
            }
            p->rbytes = block;
            p->ralloc_len = GUARD + off + block + GUARD;
            p->ralloc = sbuf(sc, off, block, p->rin);
            snprintf(p->name, sizeof(p->name), "MPIX_Bcast_enqueue %zu bytes root %d", block, root);
            rc = mx.bcast((void *)(uintptr_t)(p->ralloc + GUARD + off), (int)block, MPI_BYTE, root,
                          sc->comm);
        }
        break;
    }
    }
#undef DRAW
    size_t len = strlen(p->name);
    snprintf(p->name + len, sizeof(p->name) - len, " (shuffle call %ld)", k);
    mt_rank = save_rank;
    mt_size = save_size;
    MT_CHECK(rc == MPI_SUCCESS, "%s: MPI error %d", p->name, rc);
    sc->enqueued++;
}

/* ---------------------------------------------------------------- the blocking calls */

static void blocking_drawn(uint64_t seed, long k)
{
#define DRAW(d) mt_rand(seed, (uint64_t)k, (uint64_t)(d))
    int in_place = (int)(DRAW(1) & 1);
    size_t off = (size_t[]){0, 1, 8}[DRAW(2) % 3];
    /* allreduce twice as often as each of the others */
    int kind = (int)(DRAW(3) % 5);
    if (kind == 4) {
        devcoll_drawn(seed, k);
    } else if (kind < 2) {
        size_t ti = DRAW(4) % ntypes;
        const type_t *t = &types[ti];
        op_t op = draw_op(t, seed, k, 0, 5);
        size_t edges[16], ne = edge_counts(t->size, edges);
        size_t count =
            DRAW(40) & 1 ? edges[DRAW(41) % ne] : 1 + DRAW(42) % (3 * SLOT / t->size + 8);
        allreduce_case((int)ti, t, op, count, in_place, off);
    } else {
        size_t piece = SLOT / (size_t)mt_size / 16 * 16;
        size_t edges[] = {1, 4096, SLOT - 1, SLOT, SLOT + 1, piece - 1, piece, piece + 1};
        size_t block = DRAW(40) & 1 ? edges[DRAW(41) % (sizeof(edges) / sizeof(edges[0]))]
                                    : 1 + DRAW(42) % (2 * SLOT + 16);
        blocks_case(kind == 3, block, in_place, off);
    }
#undef DRAW
}

int mode_shuffle(int argc, char **argv)
{
    long calls = atol(mt_option(argc, argv, "--calls", "80"));
    const char *env_seed = getenv("FAKECUDA_SEED");
    uint64_t seed = strtoull(mt_option(argc, argv, "--seed", env_seed ? env_seed : "1"), NULL, 0);
    int streams = mt_flag(argc, argv, "--stream");
    int world_rank = mt_rank, world_size = mt_size;
    MPI_Comm comm[SH_COMMS];
    scomm_t sc[NSTREAMS];
    long made[SH_COMMS + NSTREAMS] = {0}, skipped = 0;

    if (groups > 0) {
        mt_fail("cuda_coll shuffle: --groups and --hier are not for this mode");
        return mt_finish("cuda_coll shuffle");
    }
    if (streams && !mpix_load(&mx)) {
        mt_fail("cuda_coll shuffle --stream: picoll's MPIX_Stream calls are not there (is "
                "libpicoll.so preloaded?)");
        return mt_finish("cuda_coll shuffle");
    }
    long churn = atol(mt_option(argc, argv, "--churn", "0")), remade = 0;
    comm[SH_WORLD] = MPI_COMM_WORLD;
    for (int w = SH_DUP; w < SH_COMMS; w++) {
        comm_make(&comm[w], w, world_rank, world_size);
    }
    /* no warm-up: a communicator's first call (which makes its workspace) is drawn as any other,
     * and takes the zero-copy path where a later one would (docs/cuda.md) */
    if (streams) {
        scomm_make(&sc[0], MPI_COMM_WORLD, 0);
        scomm_make(&sc[1], comm[SH_REV], 0);
        scomm_make(&sc[2], comm[SH_DUP], 1);
    }
    for (long k = 0; k < calls; k++) {
        uint64_t d = mt_rand(seed, (uint64_t)k, 0);
        if (churn > 0 && k > 0 && mt_rand(seed, (uint64_t)k, 7) % (uint64_t)churn == 0) {
            /* before call k: a communicator freed and made again, the same on every rank */
            int w =
                (int)(mt_rand(seed, (uint64_t)k, 8) % (SH_COMMS - 1 + (streams ? NSTREAMS : 0)));
            if (w < SH_COMMS - 1) {
                MPI_Comm_free(&comm[SH_DUP + w]);
                comm_make(&comm[SH_DUP + w], SH_DUP + w, world_rank, world_size);
            } else {
                int i = w - (SH_COMMS - 1);
                stream_flush(sc); /* its calls in flight done and checked */
                scomm_drop(&sc[i], i);
                scomm_make(&sc[i], i == 0 ? MPI_COMM_WORLD : comm[i == 1 ? SH_REV : SH_DUP],
                           i == 2);
            }
            remade++;
        }
        if (streams && d % 3 == 0) {
            int which = (int)(mt_rand(seed, (uint64_t)k, 1) % NSTREAMS);
            stream_drawn(&sc[which], seed, k);
            made[SH_COMMS + which]++;
            /* sometimes checked at once, else once 8 are in flight */
            if (npend == IN_FLIGHT || mt_rand(seed, (uint64_t)k, 2) % 4 == 0) {
                stream_flush(sc);
            }
            continue;
        }
        int which = (int)(d % SH_COMMS);
        MPI_Comm_rank(comm[which], &mt_rank);
        MPI_Comm_size(comm[which], &mt_size);
        if (mt_size < 2) {
            skipped++;
        } else {
            long failures = mt_failures;
            test_comm = comm[which];
            blocking_drawn(seed, k);
            made[which]++;
            if (mt_failures != failures) {
                printf("FAIL [rank %d] (above) shuffle call %ld of seed %llu, on the %s "
                       "communicator (rank %d of %d)\n",
                       world_rank, k, (unsigned long long)seed, sh_names[which], mt_rank, mt_size);
            }
            test_comm = MPI_COMM_WORLD;
        }
        mt_rank = world_rank;
        mt_size = world_size;
    }
    if (streams) {
        stream_flush(sc);
        for (int i = 0; i < NSTREAMS; i++) {
            scomm_drop(&sc[i], i);
        }
    }
    MPI_Comm_free(&comm[SH_DUP]);
    MPI_Comm_free(&comm[SH_REV]);
    MPI_Comm_free(&comm[SH_HALF]);
    /* the last rank: its half has more than one rank from 3 ranks on */
    if (mt_rank == mt_size - 1) {
        printf("cuda_coll shuffle: seed %llu, %ld calls on %d ranks (world %ld, dup %ld, reversed "
               "%ld, half %ld; sat out %ld; enqueued %ld, %ld and %ld), %llu cases checked, %ld "
               "communicators made again\n",
               (unsigned long long)seed, calls, mt_size, made[SH_WORLD], made[SH_DUP], made[SH_REV],
               made[SH_HALF], skipped, made[SH_COMMS], made[SH_COMMS + 1], made[SH_COMMS + 2],
               ncases, remade);
    }
    return mt_finish("cuda_coll shuffle");
}
