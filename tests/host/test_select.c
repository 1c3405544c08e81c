/* Selection tables of the host executor: which algorithm for which size, by hand. */
#include "build-config.h"
#include "coll/algs.h"
#include "coll/coll.h"
#include "coll/netmodel.h"
#include "util/config.h"
#include "coll/select.h"
#include "pmpi/classify.h"

#include <stdio.h>
#include <string.h>

static int failures, checks;

/* The device selection on a workspace of n ranks and data buffers of slot bytes, with the limits
 * such a workspace hands up once (cuda/cuda_dev.h: picoll_cuda_limits). */
static int cuda_ar(const picoll_config_t *c, picoll_topo_reach_t reach, size_t slot, int n,
                   size_t bytes, int staged)
{
    picoll_cuda_limits_t lim = picoll_cuda_limits(reach, n, slot, c->cuda_ll_max);
    return picoll_select_cuda_allreduce(c, &lim, bytes, staged);
}

static int cuda_blocks(const picoll_config_t *c, picoll_topo_reach_t reach, int n, size_t block,
                       int alltoall)
{
    picoll_cuda_limits_t lim =
        picoll_cuda_limits(reach, n, picoll_cuda_slot_bytes(c->workspace_size), c->cuda_ll_max);
    return alltoall ? picoll_select_cuda_alltoall(c, &lim, block)
                    : picoll_select_cuda_allgather(c, &lim, block);
}

static void expect(const char *what, int got, int want)
{
    checks++;
    if (got != want) {
        fprintf(stderr, "%s: algorithm %d, expected %d\n", what, got, want);
        failures++;
    }
}

/* Between nodes, the network step's cost model (coll/netmodel.h) with the default parameters:
 * recursive doubling for small rail blocks; Rabenseifner's above, and on 12 nodes (not a power of
 * two) in the middle, the ring beyond; the ring for large blocks on few nodes that are not a
 * power of two; two nodes always recursive doubling. Allgather: Bruck's for small parts on many
 * nodes, the ring for large parts and on few nodes. Then the variables that force a method or
 * change the parameters. */
static void check_netmodel(size_t slot)
{
    picoll_config_t cfg;
    char *env_model[] = {"PICOLL_HOST=on", NULL};
    picoll_config_load(&cfg, env_model);
    expect("model: PICOLL_NET_RD_MAX defaults to 0", (int)cfg.net_rd_max, 0);
    picoll_hier_shape_t s16 = {.num_nodes = 16, .even = 0, .slot_size = slot, .rail_pieces = 1};
    picoll_hier_shape_t s12 = s16, s5 = s16, s2 = s16, s1024 = s16, s3 = s16;
    s12.num_nodes = 12;
    s5.num_nodes = 5;
    s2.num_nodes = 2;
    s1024.num_nodes = 1024;
    s3.num_nodes = 3;
    const struct {
        const picoll_hier_shape_t *shape;
        size_t block;
        int alg;
        const char *what;
    } ar[] = {
        {&s16, 8, PICOLL_ALLREDUCE_HIER_RD, "16 nodes, 8 B"},
        {&s16, 4096, PICOLL_ALLREDUCE_HIER_RD, "16 nodes, 4 KiB"},
        {&s16, 256 << 10, PICOLL_ALLREDUCE_HIER_RAB, "16 nodes, 256 KiB"},
        {&s1024, 1024, PICOLL_ALLREDUCE_HIER_RD, "1024 nodes, 1 KiB"},
        {&s1024, 1 << 20, PICOLL_ALLREDUCE_HIER_RAB, "1024 nodes, 1 MiB"},
        {&s12, 8, PICOLL_ALLREDUCE_HIER_RD, "12 nodes, 8 B"},
        {&s12, 128 << 10, PICOLL_ALLREDUCE_HIER_RAB, "12 nodes, 128 KiB"},
        {&s12, 1 << 20, PICOLL_ALLREDUCE_HIER_RING, "12 nodes, 1 MiB"},
        {&s5, 1 << 20, PICOLL_ALLREDUCE_HIER_RING, "5 nodes, 1 MiB"},
        {&s3, 1 << 20, PICOLL_ALLREDUCE_HIER_RING, "3 nodes, 1 MiB"},
        {&s3, 1024, PICOLL_ALLREDUCE_HIER_RD, "3 nodes, 1 KiB"},
        {&s2, 16 << 20, PICOLL_ALLREDUCE_HIER_RD, "2 nodes, 16 MiB"},
    };
    char what[96];
    for (size_t i = 0; i < sizeof(ar) / sizeof(ar[0]); i++) {
        snprintf(what, sizeof(what), "model: allreduce, %s", ar[i].what);
        expect(what, picoll_select_hier_allreduce(&cfg, ar[i].shape, 16 << 20, ar[i].block),
               ar[i].alg);
    }
    /* the device hierarchy's chooser is the same */
    expect("model: device, 12 nodes, 128 KiB", picoll_netmodel_allreduce(&cfg, 12, 128 << 10),
           PICOLL_RAIL_RAB);
    /* allgather parts: min(block, piece_max) x rail_pieces */
    expect("model: allgather, 16 nodes, 8 B", picoll_select_hier_allgather(&cfg, &s16, 8, 1 << 20),
           PICOLL_ALLGATHER_HIER_BRUCK);
    expect("model: allgather, 1024 nodes, 64 KiB",
           picoll_select_hier_allgather(&cfg, &s1024, 64 << 10, 1 << 20),
           PICOLL_ALLGATHER_HIER_BRUCK);
    expect("model: allgather, 16 nodes, 1 MiB",
           picoll_select_hier_allgather(&cfg, &s16, 1 << 20, 4 << 20), PICOLL_ALLGATHER_HIER);
    expect("model: allgather, 16 nodes, 1 MiB blocks in 8 KiB pieces",
           picoll_select_hier_allgather(&cfg, &s16, 1 << 20, 8192), PICOLL_ALLGATHER_HIER_BRUCK);
    s16.rail_pieces = 16;
    expect("model: allgather, 16 nodes, 64 KiB pieces, 16 a part",
           picoll_select_hier_allgather(&cfg, &s16, 64 << 10, 1 << 20), PICOLL_ALLGATHER_HIER);
    expect("model: allgather, 3 nodes, 8 B", picoll_select_hier_allgather(&cfg, &s3, 8, 1 << 20),
           PICOLL_ALLGATHER_HIER);
    expect("model: device allgather, 16 nodes, 8 B", picoll_netmodel_allgather(&cfg, 16, 8),
           PICOLL_RAIL_BRUCK);
    /* Bruck's messages: a step whose ranges wrap on some member sends two (5 nodes: steps of 1,
     * 2 and 1 parts, 4 messages as the ring's 4; 8 nodes: 1, 2 and 4 parts, 5 against 7) */
    picoll_netmodel_t unit = {.alpha = 1, .beta = 0, .gamma = 0};
    expect("model: Bruck's messages on 5 nodes",
           (int)picoll_netmodel_allgather_time(&unit, PICOLL_RAIL_BRUCK, 5, 1), 4);
    expect("model: Bruck's messages on 8 nodes",
           (int)picoll_netmodel_allgather_time(&unit, PICOLL_RAIL_BRUCK, 8, 1), 5);
    expect("model: the ring's messages on 8 nodes",
           (int)picoll_netmodel_allgather_time(&unit, PICOLL_RAIL_RING, 8, 1), 7);

    /* forced: over the model, PICOLL_NET_RD_MAX and two nodes; one-shot stays */
    char *env_rab[] = {"PICOLL_HOST=on", "PICOLL_NET_ALLREDUCE=rabenseifner",
                       "PICOLL_NET_RD_MAX=4k", "PICOLL_NET_ALLGATHER=bruck", NULL};
    picoll_config_load(&cfg, env_rab);
    expect("forced rab: 5 nodes, 8 B", picoll_select_hier_allreduce(&cfg, &s5, 1 << 20, 8),
           PICOLL_ALLREDUCE_HIER_RAB);
    expect("forced rab: 2 nodes", picoll_select_hier_allreduce(&cfg, &s2, 1 << 20, 1 << 20),
           PICOLL_ALLREDUCE_HIER_RAB);
    s2.even = 1;
    expect("forced rab: one-shot stays", picoll_select_hier_allreduce(&cfg, &s2, 8, 8),
           PICOLL_ALLREDUCE_HIER_ONESHOT);
    expect("forced bruck: 3 nodes, 1 MiB",
           picoll_select_hier_allgather(&cfg, &s3, 1 << 20, 4 << 20), PICOLL_ALLGATHER_HIER_BRUCK);
    char *env_ring[] = {"PICOLL_HOST=on", "PICOLL_NET_ALLREDUCE=ring", "PICOLL_NET_ALLGATHER=ring",
                        NULL};
    picoll_config_load(&cfg, env_ring);
    expect("forced ring: 16 nodes, 8 B", picoll_select_hier_allreduce(&cfg, &s16, 1 << 20, 8),
           PICOLL_ALLREDUCE_HIER_RING);
    expect("forced ring: allgather 1024 nodes, 8 B",
           picoll_select_hier_allgather(&cfg, &s1024, 8, 64), PICOLL_ALLGATHER_HIER);
    char *env_rd[] = {"PICOLL_HOST=on", "PICOLL_NET_ALLREDUCE=rd", NULL};
    picoll_config_load(&cfg, env_rd);
    expect("forced rd: 12 nodes, 1 MiB", picoll_select_hier_allreduce(&cfg, &s12, 1 << 20, 1 << 20),
           PICOLL_ALLREDUCE_HIER_RD);
    /* the parameters: with no latency the ring wins at 8 B (as few bytes as Rabenseifner's on a
     * power of two, and the simpler); a second a message keeps recursive doubling at 16 MiB */
    char *env_fast[] = {"PICOLL_HOST=on", "PICOLL_NET_LATENCY=0", NULL};
    picoll_config_load(&cfg, env_fast);
    expect("latency 0: 16 nodes, 8 B", picoll_select_hier_allreduce(&cfg, &s16, 1 << 20, 8),
           PICOLL_ALLREDUCE_HIER_RING);
    char *env_slow[] = {"PICOLL_HOST=on", "PICOLL_NET_LATENCY=1", "PICOLL_NET_BANDWIDTH=1G", NULL};
    picoll_config_load(&cfg, env_slow);
    expect("latency 1 s: 16 nodes, 16 MiB", picoll_netmodel_allreduce(&cfg, 16, 16 << 20),
           PICOLL_RAIL_RD);
}

int main(void)
{
    picoll_config_t cfg;
    char *env_on[] = {"PICOLL_HOST=on", "PICOLL_ALLREDUCE_ONESHOT_MAX=64k",
                      "PICOLL_ALLREDUCE_TWOSHOT_MAX=16M", NULL};
    char *env_off[] = {"PICOLL_HOST=off", NULL};
    char *env_default[] = {NULL};
    size_t slot = 4u << 20;

    picoll_config_load(&cfg, env_default);
    expect("default is auto", cfg.host, PICOLL_HOST_AUTO);
    picoll_config_load(&cfg, env_off);
    expect("off: allreduce 8 B", picoll_select_allreduce(&cfg, slot, 2, 8, 0), PICOLL_ALG_FALLBACK);
    expect("off: allgather 8 B", picoll_select_allgather(&cfg, 2, 8, 0), PICOLL_ALG_FALLBACK);
    expect("off: alltoall 8 B", picoll_select_alltoall(&cfg, 2, 8, 0), PICOLL_ALG_FALLBACK);

    picoll_config_load(&cfg, env_on);
    expect("on: allreduce 8 B", picoll_select_allreduce(&cfg, slot, 2, 8, 0),
           PICOLL_ALLREDUCE_ONESHOT);
    expect("on: allreduce 64 KiB", picoll_select_allreduce(&cfg, slot, 2, 65536, 0),
           PICOLL_ALLREDUCE_ONESHOT);
    expect("on: allreduce 64 KiB + 1", picoll_select_allreduce(&cfg, slot, 2, 65537, 0),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("on: allreduce 16 MiB", picoll_select_allreduce(&cfg, slot, 2, 16u << 20, 0),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("on: allreduce 16 MiB + 1", picoll_select_allreduce(&cfg, slot, 2, (16u << 20) + 1, 0),
           PICOLL_ALG_FALLBACK);
    /* a one-shot threshold above the slot: one-shot only while the input fits one slot */
    expect("on: allreduce 64 KiB, 32 KiB slot", picoll_select_allreduce(&cfg, 32768, 2, 65536, 0),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("on: allgather 1 B", picoll_select_allgather(&cfg, 4, 1, 0), PICOLL_ALLGATHER_SHM);
    expect("on: alltoall 1 MiB", picoll_select_alltoall(&cfg, 4, 1u << 20, 0), PICOLL_ALLTOALL_SHM);
    expect("on: allgather 16 MiB", picoll_select_allgather(&cfg, 4, 16u << 20, 0),
           PICOLL_ALLGATHER_SHM);

    /* auto: allreduce through the workspace at every size; single copy never by default, even
     * where the node can */
    char *env_auto[] = {"PICOLL_HOST=auto", NULL};
    picoll_config_load(&cfg, env_auto);
    expect("auto: allreduce 8 B", picoll_select_allreduce(&cfg, slot, 2, 8, 1),
           PICOLL_ALLREDUCE_ONESHOT);
    expect("auto: allreduce 1 MiB", picoll_select_allreduce(&cfg, slot, 2, 1u << 20, 1),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("auto: allreduce 16 MiB, capable", picoll_select_allreduce(&cfg, slot, 2, 16u << 20, 1),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("auto: allgather 8 KiB", picoll_select_allgather(&cfg, 2, 8192, 1),
           PICOLL_ALLGATHER_SHM);
    /* allgather while ranks x block <= PICOLL_HOST_AUTO_MAX (16k), alltoall while ranks^2 x block
     * <= it; the MPI beyond (and "on" keeps its own path at every size) */
    expect("auto: allgather 2 x 8 KiB", picoll_select_allgather(&cfg, 2, 8192, 0),
           PICOLL_ALLGATHER_SHM);
    expect("auto: allgather 2 x (8 KiB + 1)", picoll_select_allgather(&cfg, 2, 8193, 0),
           PICOLL_ALG_FALLBACK);
    expect("auto: allgather 3 x 5461 B", picoll_select_allgather(&cfg, 3, 5461, 0),
           PICOLL_ALLGATHER_SHM);
    expect("auto: allgather 3 x 5462 B", picoll_select_allgather(&cfg, 3, 5462, 0),
           PICOLL_ALG_FALLBACK);
    expect("auto: allgather 16 MiB, capable", picoll_select_allgather(&cfg, 4, 16u << 20, 1),
           PICOLL_ALG_FALLBACK);
    expect("auto: alltoall 2 x 2 x 4 KiB", picoll_select_alltoall(&cfg, 2, 4096, 0),
           PICOLL_ALLTOALL_SHM);
    expect("auto: alltoall 2 x 2 x (4 KiB + 1)", picoll_select_alltoall(&cfg, 2, 4097, 0),
           PICOLL_ALG_FALLBACK);
    expect("auto: alltoall 4 x 4 x 1 KiB", picoll_select_alltoall(&cfg, 4, 1024, 0),
           PICOLL_ALLTOALL_SHM);
    expect("auto: alltoall 4 x 4 x (1 KiB + 1)", picoll_select_alltoall(&cfg, 4, 1025, 0),
           PICOLL_ALG_FALLBACK);
    expect("auto: alltoall 16 MiB, capable", picoll_select_alltoall(&cfg, 2, 16u << 20, 1),
           PICOLL_ALG_FALLBACK);
    char *env_auto_max[] = {"PICOLL_HOST=auto", "PICOLL_HOST_AUTO_MAX=1M", NULL};
    picoll_config_load(&cfg, env_auto_max);
    expect("auto 1M: allgather 2 x 512 KiB", picoll_select_allgather(&cfg, 2, 512u << 10, 0),
           PICOLL_ALLGATHER_SHM);
    expect("auto 1M: alltoall 2 x 2 x (256 KiB + 1)",
           picoll_select_alltoall(&cfg, 2, (256u << 10) + 1, 0), PICOLL_ALG_FALLBACK);
    picoll_config_load(&cfg, env_auto);
    expect("auto: alltoall 0 B", picoll_select_alltoall(&cfg, 2, 0, 1), PICOLL_ALG_FALLBACK);

    /* single copy where the node can (cma = 1), from PICOLL_CMA_MIN, in either mode; the
     * workspace below it or without the capability; never with PICOLL_HOST=off */
    char *env_cma_on[] = {"PICOLL_HOST=on", "PICOLL_CMA_MIN=64k", NULL};
    picoll_config_load(&cfg, env_cma_on);
    expect("cma on: allgather 64 KiB", picoll_select_allgather(&cfg, 2, 65536, 1),
           PICOLL_ALLGATHER_CMA);
    expect("cma on: allgather 64 KiB - 1", picoll_select_allgather(&cfg, 2, 65535, 1),
           PICOLL_ALLGATHER_SHM);
    expect("cma on: allgather 64 KiB, not capable", picoll_select_allgather(&cfg, 2, 65536, 0),
           PICOLL_ALLGATHER_SHM);
    expect("cma on: alltoall 16 MiB", picoll_select_alltoall(&cfg, 5, 16u << 20, 1),
           PICOLL_ALLTOALL_CMA);
    expect("cma on: alltoall 64 KiB - 1", picoll_select_alltoall(&cfg, 5, 65535, 1),
           PICOLL_ALLTOALL_SHM);
    expect("cma on: alltoall 0 B", picoll_select_alltoall(&cfg, 2, 0, 1), PICOLL_ALG_FALLBACK);
    /* PICOLL_CMA_MIN is for allgather and alltoall only */
    expect("cma on: allreduce 16 MiB", picoll_select_allreduce(&cfg, slot, 2, 16u << 20, 1),
           PICOLL_ALLREDUCE_TWOSHOT);
    char *env_cma_auto[] = {"PICOLL_HOST=auto", "PICOLL_HOST_AUTO_MAX=1G", "PICOLL_CMA_MIN=64k",
                            NULL};
    picoll_config_load(&cfg, env_cma_auto);
    expect("cma auto: allgather 32 KiB", picoll_select_allgather(&cfg, 2, 32768, 1),
           PICOLL_ALLGATHER_SHM);
    expect("cma auto: allgather 64 KiB", picoll_select_allgather(&cfg, 2, 65536, 1),
           PICOLL_ALLGATHER_CMA);
    expect("cma auto: allgather 64 KiB, not capable", picoll_select_allgather(&cfg, 2, 65536, 0),
           PICOLL_ALLGATHER_SHM);
    expect("cma auto: alltoall 64 KiB", picoll_select_alltoall(&cfg, 2, 65536, 1),
           PICOLL_ALLTOALL_CMA);
    expect("cma auto: alltoall 1 KiB", picoll_select_alltoall(&cfg, 2, 1024, 1),
           PICOLL_ALLTOALL_SHM);
    /* allreduce single copy from PICOLL_ALLREDUCE_CMA_MIN, where the node can and each rank's two
     * workspace buffers hold PICOLL_CMA_SCRATCH_MIN bytes a rank; one-shot first */
    char *env_ar_cma[] = {"PICOLL_HOST=on", "PICOLL_ALLREDUCE_CMA_MIN=1M", NULL};
    picoll_config_load(&cfg, env_ar_cma);
    expect("allreduce cma: 1 MiB", picoll_select_allreduce(&cfg, slot, 2, 1u << 20, 1),
           PICOLL_ALLREDUCE_CMA);
    expect("allreduce cma: 1 MiB - 1", picoll_select_allreduce(&cfg, slot, 2, (1u << 20) - 1, 1),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("allreduce cma: 1 MiB, not capable", picoll_select_allreduce(&cfg, slot, 2, 1u << 20, 0),
           PICOLL_ALLREDUCE_TWOSHOT);
    expect("allreduce cma: 1 MiB, 8 KiB slots, 4 ranks",
           picoll_select_allreduce(&cfg, 8192, 4, 1u << 20, 1), PICOLL_ALLREDUCE_CMA);
    expect("allreduce cma: 1 MiB, 8 KiB slots, 5 ranks",
           picoll_select_allreduce(&cfg, 8192, 5, 1u << 20, 1), PICOLL_ALLREDUCE_TWOSHOT);
    expect("allreduce cma: allgather 16 MiB", picoll_select_allgather(&cfg, 2, 16u << 20, 1),
           PICOLL_ALLGATHER_SHM);
    char *env_ar_cma1[] = {"PICOLL_HOST=auto", "PICOLL_ALLREDUCE_CMA_MIN=1", NULL};
    picoll_config_load(&cfg, env_ar_cma1);
    expect("allreduce cma from 1 B: 8 B", picoll_select_allreduce(&cfg, slot, 2, 8, 1),
           PICOLL_ALLREDUCE_ONESHOT);
    expect("allreduce cma from 1 B: 64 KiB", picoll_select_allreduce(&cfg, slot, 2, 65536, 1),
           PICOLL_ALLREDUCE_CMA);
    char *env_cma_off[] = {"PICOLL_HOST=off", "PICOLL_CMA_MIN=1", "PICOLL_ALLREDUCE_CMA_MIN=1",
                           NULL};
    picoll_config_load(&cfg, env_cma_off);
    expect("host off: allgather 64 KiB, capable", picoll_select_allgather(&cfg, 2, 65536, 1),
           PICOLL_ALG_FALLBACK);
    expect("host off: allreduce 64 KiB, capable", picoll_select_allreduce(&cfg, slot, 2, 65536, 1),
           PICOLL_ALG_FALLBACK);

    /* blocks of allgather/alltoall: character types are copied as bytes, pair types never */
    expect("copy size of MPI_CHAR", (int)picoll_classify_copy_size(MPI_CHAR), 1);
    expect("copy size of MPI_DOUBLE", (int)picoll_classify_copy_size(MPI_DOUBLE), 8);
    expect("copy size of MPI_2INT", (int)picoll_classify_copy_size(MPI_2INT), 0);
    expect("copy size of MPI_DOUBLE_INT", (int)picoll_classify_copy_size(MPI_DOUBLE_INT), 0);
    expect("MPI_C_COMPLEX", (int)picoll_classify_dtype(MPI_C_COMPLEX), PICOLL_DT_FLOAT_COMPLEX);

    /* between nodes: recursive doubling up to PICOLL_NET_RD_MAX bytes of rail block, then ring;
     * allgather and alltoall only with PICOLL_HOST=on and a workspace that holds a piece */
    char *env_net[] = {"PICOLL_HOST=on", "PICOLL_NET_RD_MAX=4k", NULL};
    picoll_config_load(&cfg, env_net);
    picoll_hier_shape_t three = {.num_nodes = 3, .even = 1, .slot_size = slot};
    picoll_hier_shape_t two = {.num_nodes = 2, .even = 1, .slot_size = slot};
    picoll_hier_shape_t uneven = {.num_nodes = 3, .even = 0, .slot_size = slot};
    expect("net: allreduce 16 KiB", picoll_select_hier_allreduce(&cfg, &three, 16384, 8192),
           PICOLL_ALLREDUCE_HIER_ONESHOT);
    expect("net: allreduce 16 KiB, uneven nodes",
           picoll_select_hier_allreduce(&cfg, &uneven, 16384, 4096), PICOLL_ALLREDUCE_HIER_RD);
    expect("net: allreduce rail block 4 KiB",
           picoll_select_hier_allreduce(&cfg, &three, 1 << 20, 4096), PICOLL_ALLREDUCE_HIER_RD);
    expect("net: allreduce rail block 4 KiB + 1",
           picoll_select_hier_allreduce(&cfg, &three, 1 << 20, 4097), PICOLL_ALLREDUCE_HIER_RING);
    expect("net: allreduce rail block 4 KiB + 1, two nodes",
           picoll_select_hier_allreduce(&cfg, &two, 1 << 20, 4097), PICOLL_ALLREDUCE_HIER_RD);
    expect("net: allreduce 0 B", picoll_select_hier_allreduce(&cfg, &three, 0, 0),
           PICOLL_ALG_FALLBACK);
    expect("net: allgather", picoll_select_hier_allgather(&cfg, &three, 100, 64),
           PICOLL_ALLGATHER_HIER);
    expect("net: allgather, no piece fits", picoll_select_hier_allgather(&cfg, &three, 100, 0),
           PICOLL_ALG_FALLBACK);
    /* PICOLL_NET_RD_MAX set keeps its rule where the model would take Rabenseifner's */
    picoll_hier_shape_t sixteen = {.num_nodes = 16, .even = 0, .slot_size = slot};
    expect("net: PICOLL_NET_RD_MAX, 16 nodes, 4 KiB",
           picoll_select_hier_allreduce(&cfg, &sixteen, 1 << 20, 4096), PICOLL_ALLREDUCE_HIER_RD);
    expect("net: PICOLL_NET_RD_MAX, 16 nodes, 256 KiB",
           picoll_select_hier_allreduce(&cfg, &sixteen, 1 << 20, 256 << 10),
           PICOLL_ALLREDUCE_HIER_RING);
    expect("net: alltoall", picoll_select_hier_alltoall(&cfg, 1, 64), PICOLL_ALLTOALL_HIER);
    char *env_net_off[] = {"PICOLL_HOST=on", "PICOLL_NET=0", NULL};
    picoll_config_load(&cfg, env_net_off);
    expect("PICOLL_NET=0: allreduce", picoll_select_hier_allreduce(&cfg, &three, 8, 8),
           PICOLL_ALG_FALLBACK);
    expect("PICOLL_NET=0: alltoall", picoll_select_hier_alltoall(&cfg, 8, 64), PICOLL_ALG_FALLBACK);
    char *env_net_auto[] = {"PICOLL_HOST=auto", NULL};
    picoll_config_load(&cfg, env_net_auto);
    expect("auto: net allreduce", picoll_select_hier_allreduce(&cfg, &three, 8, 8),
           PICOLL_ALLREDUCE_HIER_ONESHOT);
    expect("auto: net allgather", picoll_select_hier_allgather(&cfg, &three, 8, 64),
           PICOLL_ALG_FALLBACK);
    check_netmodel(slot);

    /* the device executor: the topology tables by reach (defaults: nvlink one-shot 256k, two-shot
     * 10M; hcm 256k; pcie one-shot 64k; ipc 1G nvlink, 1M pcie), a one-shot larger than a
     * workspace buffer runs two-shot */
    picoll_config_load(&cfg, env_off);
    size_t dslot = 128u << 10;
    expect("cuda nvlink 8 B", cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 8, 0),
           PICOLL_ALLREDUCE_CUDA_ONESHOT);
    expect("cuda nvlink 200 KiB > buffer",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 200u << 10, 0),
           PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    expect("cuda nvlink 1 MiB", cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 1u << 20, 0),
           PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    expect("cuda nvlink 11 MiB", cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 11u << 20, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda hcm 64 KiB", cuda_ar(&cfg, PICOLL_TOPO_REACH_HCM, dslot, 2, 65536, 0),
           PICOLL_ALLREDUCE_CUDA_HCM);
    expect("cuda hcm 256 KiB > buffer",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_HCM, dslot, 2, 256u << 10, 0),
           PICOLL_ALLREDUCE_CUDA_HCM);
    expect("cuda hcm 256 KiB + 1",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_HCM, dslot, 2, (256u << 10) + 1, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda pcie 64 KiB", cuda_ar(&cfg, PICOLL_TOPO_REACH_PCIE, dslot, 2, 65536, 0),
           PICOLL_ALLREDUCE_CUDA_ONESHOT);
    expect("cuda pcie 64 KiB + 1", cuda_ar(&cfg, PICOLL_TOPO_REACH_PCIE, dslot, 2, 65537, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda none 8 B", cuda_ar(&cfg, PICOLL_TOPO_REACH_NONE, dslot, 2, 8, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda allgather pcie 4 x 256 KiB",
           cuda_blocks(&cfg, PICOLL_TOPO_REACH_PCIE, 4, 256u << 10, 0), PICOLL_ALLGATHER_CUDA_IPC);
    expect("cuda allgather pcie 4 x 256 KiB + 1",
           cuda_blocks(&cfg, PICOLL_TOPO_REACH_PCIE, 4, (256u << 10) + 1, 0), PICOLL_ALG_FALLBACK);
    expect("cuda alltoall nvlink 8 x 1 MiB",
           cuda_blocks(&cfg, PICOLL_TOPO_REACH_NVLINK, 8, 1u << 20, 1), PICOLL_ALLTOALL_CUDA_IPC);
    expect("cuda alltoall hcm 8 B", cuda_blocks(&cfg, PICOLL_TOPO_REACH_HCM, 8, 8, 1),
           PICOLL_ALG_FALLBACK);
    /* reduce-scatter and reduce: where an allreduce of the input would run on the device, never
     * on the hybrid cube mesh; bcast: up to the IPC limit */
    expect("cuda reduce nvlink 10 MiB",
           picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_NVLINK, 10u << 20, 0),
           PICOLL_DEVICE_ONLY_CUDA);
    expect("cuda reduce nvlink 10 MiB + 1",
           picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_NVLINK, (10u << 20) + 1, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda reduce pcie 64 KiB + 1",
           picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_PCIE, 65537, 0), PICOLL_ALG_FALLBACK);
    expect("cuda reduce hcm 8 B", picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_HCM, 8, 0),
           PICOLL_ALG_FALLBACK);
    expect("cuda reduce 0 B", picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_NVLINK, 0, 0),
           PICOLL_ALG_FALLBACK);
    /* where picoll stages what it hands over (an MPI that is not CUDA-aware), two-shot over
     * NVLink has no upper limit (reduce follows); HCM and PCIe hand over as before */
    expect("cuda nvlink 11 MiB staged",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 11u << 20, 1),
           PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    expect("cuda nvlink 1 GiB staged",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 1u << 30, 1),
           PICOLL_ALLREDUCE_CUDA_TWOSHOT);
    expect("cuda nvlink 8 B staged", cuda_ar(&cfg, PICOLL_TOPO_REACH_NVLINK, dslot, 2, 8, 1),
           PICOLL_ALLREDUCE_CUDA_ONESHOT);
    expect("cuda hcm 256 KiB + 1 staged",
           cuda_ar(&cfg, PICOLL_TOPO_REACH_HCM, dslot, 2, (256u << 10) + 1, 1),
           PICOLL_ALG_FALLBACK);
    expect("cuda pcie 64 KiB + 1 staged", cuda_ar(&cfg, PICOLL_TOPO_REACH_PCIE, dslot, 2, 65537, 1),
           PICOLL_ALG_FALLBACK);
    expect("cuda reduce nvlink 10 MiB + 1 staged",
           picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_NVLINK, (10u << 20) + 1, 1),
           PICOLL_DEVICE_ONLY_CUDA);
    expect("cuda reduce hcm 8 B staged",
           picoll_select_cuda_reduce(&cfg, PICOLL_TOPO_REACH_HCM, 8, 1), PICOLL_ALG_FALLBACK);
    expect("cuda bcast pcie 1 MiB",
           picoll_select_cuda_bcast(&cfg, PICOLL_TOPO_REACH_PCIE, 1u << 20),
           PICOLL_DEVICE_ONLY_CUDA);
    expect("cuda bcast pcie 1 MiB + 1",
           picoll_select_cuda_bcast(&cfg, PICOLL_TOPO_REACH_PCIE, (1u << 20) + 1),
           PICOLL_ALG_FALLBACK);
    expect("cuda bcast hcm 8 B", picoll_select_cuda_bcast(&cfg, PICOLL_TOPO_REACH_HCM, 8),
           PICOLL_ALG_FALLBACK);

    /* the table names the algorithms selection returns */
    const picoll_coll_desc_t *ar = picoll_coll_desc(PICOLL_COLL_ALLREDUCE);
    checks++;
    if (ar->count != 14 || strcmp(ar->algs[PICOLL_ALLREDUCE_ONESHOT].name, "oneshot") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CUDA_ZC].name, "cuda_zc") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CUDA_LL].name, "cuda_ll") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_TWOSHOT].name, "twoshot") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CUDA_ONESHOT].name, "cuda_oneshot") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CUDA_TWOSHOT].name, "cuda_twoshot") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_HIER_RD].name, "hier_rd") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_HIER_RING].name, "hier_ring") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_HIER_RAB].name, "hier_rab") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_HIER_ONESHOT].name, "hier_oneshot") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CUDA_HCM].name, "cuda_hcm") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_CMA].name, "cma") != 0 ||
        strcmp(ar->algs[PICOLL_ALLREDUCE_HIER_CUDA].name, "hier_cuda") != 0) {
        fprintf(stderr, "the allreduce table does not name every algorithm selection returns\n");
        failures++;
    }
    /* and the blocks collectives' device hierarchy */
    const picoll_coll_desc_t *ag = picoll_coll_desc(PICOLL_COLL_ALLGATHER);
    const picoll_coll_desc_t *aa = picoll_coll_desc(PICOLL_COLL_ALLTOALL);
    checks++;
    if (ag->count != 9 || aa->count != 7 ||
        strcmp(ag->algs[PICOLL_ALLGATHER_CUDA_LL].name, "cuda_ll") != 0 ||
        strcmp(ag->algs[PICOLL_ALLGATHER_CUDA_ZC].name, "cuda_zc") != 0 ||
        strcmp(aa->algs[PICOLL_ALLTOALL_CUDA_ZC].name, "cuda_zc") != 0 ||
        strcmp(ag->algs[PICOLL_ALLGATHER_HIER].name, "hier") != 0 ||
        strcmp(ag->algs[PICOLL_ALLGATHER_HIER_BRUCK].name, "hier_bruck") != 0 ||
        strcmp(ag->algs[PICOLL_ALLGATHER_HIER_CUDA].name, "hier_cuda") != 0 ||
        strcmp(aa->algs[PICOLL_ALLTOALL_HIER_CUDA].name, "hier_cuda") != 0) {
        fprintf(stderr, "the allgather and alltoall tables do not name their device hierarchy "
                        "and zero-copy path\n");
        failures++;
    }
    /* reduce-scatter's zero-copy form: even pieces of 16-byte multiples from
     * PICOLL_CUDA_ZERO_COPY_MIN bytes read (every rank's piece), the table names it */
    const picoll_coll_desc_t *rsb = picoll_coll_desc(PICOLL_COLL_REDUCE_SCATTER_BLOCK);
    const picoll_coll_desc_t *rs = picoll_coll_desc(PICOLL_COLL_REDUCE_SCATTER);
    checks++;
    if (rsb->count != 3 || rs->count != 3 ||
        strcmp(rsb->algs[PICOLL_DEVICE_ONLY_CUDA_ZC].name, "cuda_zc") != 0 ||
        strcmp(rs->algs[PICOLL_DEVICE_ONLY_CUDA_ZC].name, "cuda_zc") != 0) {
        fprintf(stderr, "the reduce-scatter tables do not name their zero-copy path\n");
        failures++;
    }
    char *env_zc[] = {"PICOLL_CUDA_ZERO_COPY_MIN=1M", NULL};
    picoll_config_load(&picoll_cfg, env_zc);
    size_t sb = 0, rb = 0;
    expect("zero-copy reduce-scatter 4 x 256 KiB",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_DEVICE_ONLY_CUDA,
                                 256u << 10, 4, 0, &sb, &rb),
           PICOLL_DEVICE_ONLY_CUDA_ZC);
    expect("zero-copy reduce-scatter reads every piece, writes its own",
           sb == (1u << 20) && rb == (256u << 10), 1);
    expect("zero-copy reduce-scatter 4 x (256 KiB + 4): pieces not 16-aligned",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_DEVICE_ONLY_CUDA,
                                 (256u << 10) + 4, 4, 0, &sb, &rb),
           0);
    expect("zero-copy reduce-scatter 2 x 256 KiB: under the minimum",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_DEVICE_ONLY_CUDA,
                                 256u << 10, 2, 0, &sb, &rb),
           0);
    expect("zero-copy reduce-scatter 4 x 256 KiB in place",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_DEVICE_ONLY_CUDA,
                                 256u << 10, 4, 1, &sb, &rb),
           0);
    expect("zero-copy reduce-scatter, fallback",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_ALG_FALLBACK, 1u << 20, 4,
                                 0, &sb, &rb),
           0);
    expect(
        "zero-copy bcast of 1 MiB (in place, as every bcast)",
        picoll_zero_copy_form(PICOLL_COLL_BCAST, PICOLL_DEVICE_ONLY_CUDA, 1u << 20, 4, 1, &sb, &rb),
        PICOLL_DEVICE_ONLY_CUDA_ZC);
    expect("zero-copy bcast reads and writes its message", sb == (1u << 20) && rb == (1u << 20), 1);
    expect("zero-copy bcast of 1 MiB - 16: under the minimum",
           picoll_zero_copy_form(PICOLL_COLL_BCAST, PICOLL_DEVICE_ONLY_CUDA, (1u << 20) - 16, 4, 1,
                                 &sb, &rb),
           0);
    const picoll_coll_desc_t *bc = picoll_coll_desc(PICOLL_COLL_BCAST);
    checks++;
    if (bc->count != 3 || strcmp(bc->algs[PICOLL_DEVICE_ONLY_CUDA_ZC].name, "cuda_zc") != 0) {
        fprintf(stderr, "the bcast table does not name its zero-copy path\n");
        failures++;
    }
    char *env_zc_off[] = {"PICOLL_CUDA_ZERO_COPY=off", NULL};
    picoll_config_load(&picoll_cfg, env_zc_off);
    expect("zero-copy reduce-scatter, PICOLL_CUDA_ZERO_COPY=off",
           picoll_zero_copy_form(PICOLL_COLL_REDUCE_SCATTER_BLOCK, PICOLL_DEVICE_ONLY_CUDA,
                                 1u << 20, 4, 0, &sb, &rb),
           0);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
