#include "coll/netmodel.h"

/* gamma: seconds per byte to reduce two operands (or copy one) on one core, i.e. about 10 GB/s,
 * the order of a vectorised reduction loop streaming from memory. An order of magnitude, not a
 * measurement: it only weighs the methods' local work against their bytes on the link. */
#define NETMODEL_GAMMA 1e-10

/* A method replaces a simpler one only where predicted faster by more than a twentieth (a tie,
 * within the model's precision, goes to the simpler): the model is rough, and the simpler method
 * has less to go wrong. So the ring allgather keeps large parts, where Bruck's saved latency is a
 * sliver of the time (the two move the same bytes). */
#define NETMODEL_MARGIN 0.95

/* Whether a method predicted at t beats the simpler one predicted at simpler. */
static int netmodel_beats(double t, double simpler)
{
    return t < NETMODEL_MARGIN * simpler;
}

void picoll_netmodel_get(const picoll_config_t *cfg, picoll_netmodel_t *m)
{
    m->alpha = cfg->net_latency;
    m->beta = cfg->net_bandwidth != 0 ? 1.0 / (double)cfg->net_bandwidth : 0.0;
    m->gamma = NETMODEL_GAMMA;
}

double picoll_netmodel_allreduce_time(const picoll_netmodel_t *m, picoll_rail_method_t how, int n,
                                      double bytes)
{
    double a = m->alpha, b = m->beta, g = m->gamma, x = bytes;
    int p2 = 1, steps = 0;

    while (p2 * 2 <= n) {
        p2 *= 2;
        steps++;
    }
    double fold = n != p2 ? 2 * a + 2 * x * b + x * g : 0.0;
    double share = (double)(p2 - 1) / p2;
    switch (how) {
    case PICOLL_RAIL_RD: return steps * (a + x * b + x * g) + fold;
    case PICOLL_RAIL_RAB: return 2 * steps * a + 2 * share * x * b + share * x * g + fold;
    case PICOLL_RAIL_RING:
        return 2.0 * (n - 1) * a + (2.0 * (n - 1) / n) * x * b + ((double)(n - 1) / n) * x * g;
    case PICOLL_RAIL_BRUCK: break;
    }
    return 0.0;
}

double picoll_netmodel_allgather_time(const picoll_netmodel_t *m, picoll_rail_method_t how, int n,
                                      double part)
{
    double a = m->alpha, b = m->beta;

    if (how != PICOLL_RAIL_BRUCK) {
        return (n - 1) * (a + part * b);
    }
    /* step k moves min(2^k, n - 2^k) parts; a range of two or more wraps on some member */
    double t = (n - 1) * part * b;
    for (long dist = 1; dist < n; dist *= 2) {
        long cnt = dist < n - dist ? dist : n - dist;
        t += cnt >= 2 ? 2 * a : a;
    }
    return t;
}

picoll_rail_method_t picoll_netmodel_allreduce(const picoll_config_t *cfg, int n, size_t bytes)
{
    switch (cfg->net_allreduce) {
    case PICOLL_NET_AR_RD: return PICOLL_RAIL_RD;
    case PICOLL_NET_AR_RAB: return PICOLL_RAIL_RAB;
    case PICOLL_NET_AR_RING: return PICOLL_RAIL_RING;
    default: break;
    }
    /* on two members the others are recursive doubling in two halves: one more step each */
    if (n <= 2) {
        return PICOLL_RAIL_RD;
    }
    if (cfg->net_rd_max != 0) {
        return bytes <= cfg->net_rd_max ? PICOLL_RAIL_RD : PICOLL_RAIL_RING;
    }
    picoll_netmodel_t m;
    picoll_netmodel_get(cfg, &m);
    static const picoll_rail_method_t order[] = {PICOLL_RAIL_RD, PICOLL_RAIL_RING, PICOLL_RAIL_RAB};
    picoll_rail_method_t best = order[0];
    double t = picoll_netmodel_allreduce_time(&m, best, n, (double)bytes);
    for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); i++) {
        double ti = picoll_netmodel_allreduce_time(&m, order[i], n, (double)bytes);
        if (netmodel_beats(ti, t)) {
            best = order[i];
            t = ti;
        }
    }
    return best;
}

picoll_rail_method_t picoll_netmodel_allgather(const picoll_config_t *cfg, int n, size_t part)
{
    if (cfg->net_allgather != PICOLL_NET_AG_AUTO) {
        return cfg->net_allgather == PICOLL_NET_AG_BRUCK ? PICOLL_RAIL_BRUCK : PICOLL_RAIL_RING;
    }
    picoll_netmodel_t m;
    picoll_netmodel_get(cfg, &m);
    return netmodel_beats(picoll_netmodel_allgather_time(&m, PICOLL_RAIL_BRUCK, n, (double)part),
                          picoll_netmodel_allgather_time(&m, PICOLL_RAIL_RING, n, (double)part))
               ? PICOLL_RAIL_BRUCK
               : PICOLL_RAIL_RING;
}

const char *picoll_netmodel_name(picoll_rail_method_t how)
{
    switch (how) {
    case PICOLL_RAIL_RD: return "rd";
    case PICOLL_RAIL_RAB: return "rab";
    case PICOLL_RAIL_RING: return "ring";
    case PICOLL_RAIL_BRUCK: break;
    }
    return "bruck";
}
