#!/usr/bin/env python3
"""picoll's network step at 1k, 10k and 100k GPUs: a model, not a measurement (docs/network.md,
"At scale"). Prints Markdown tables:

1. what a rank holds and what set-up exchanges, for picoll's partner design (src/net/partners.h)
   and for the design before it (every rail member connected and watched at set-up);
2. per-call time of an allreduce and an allgather between nodes, picoll's methods (the cost
   model of src/coll/netmodel.h) next to NCCL's ring, tree and PAT as modelled below.

Usage: net_model.py [--gpus-per-node 8] [--alpha 3e-6] [--alpha-nvl 1e-6] [--link-gbps 400]
                    [--socket-per-partner 2] [--sockets-fixed 4] [--kib-per-endpoint K]
The slopes that the 16-host run measures (tests/net/scale.sh) enter through
--socket-per-partner, --sockets-fixed and --kib-per-endpoint.
"""
import argparse
import math


def partners(n):
    """|{(me +- 2^k) mod n : 2^k < n} minus me|, as src/net/partners.c computes it."""
    s = set()
    d = 1
    while d < n:
        s.add(d % n)
        s.add((-d) % n)
        d *= 2
    s.discard(0)
    return len(s)


def lg(n):
    return max(1, math.ceil(math.log2(n)))


def fmt_t(t):
    if t < 1e-3:
        return "%.0f us" % (t * 1e6)
    if t < 1:
        return "%.2f ms" % (t * 1e3)
    return "%.1f s" % t


def fmt_b(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return "%.1f %s" % (b / div, unit)
    return "%d B" % b


def resources(a, nodes):
    """(picoll's partners, before) for what a rank holds and receives at set-up."""
    p = partners(nodes)
    rec = 64 + 300 + 104  # a member's host name, UCX address (about 300 B over tcp), liveness card
    # set-up rounds of picoll's rail: Bcast, 3 Allreduce, 2 barriers (log-depth each), two
    # exchanges with the partners, a TCP dial and handshake, UCX's wire-up
    rounds = 6 * lg(nodes) + 2 + 2 + 1
    return {
        "partners": p,
        "endpoints": (p, nodes - 1),
        "liveness": (p, nodes - 1),
        "sockets": (a.socket_per_partner * p + a.sockets_fixed,
                    a.socket_per_partner * (nodes - 1) + a.sockets_fixed),
        "memory": (p * a.kib_per_endpoint * 1024, (nodes - 1) * a.kib_per_endpoint * 1024),
        "received": (p * rec, nodes * rec),
        "setup": rounds * a.alpha_setup,
    }


def allreduce_times(a, nodes, size):
    """Seconds of the network step of an allreduce of `size` bytes on nodes x gpn GPUs."""
    g = a.gpus_per_node
    m = size / g            # each rail carries a block of size / gpn (picoll's node step)
    al, be, ga = a.alpha, 1.0 / a.bw, 1e-10
    p2 = 1 << int(math.floor(math.log2(nodes)))
    k = int(math.log2(p2))
    fold = (2 * al + 2 * m * be + m * ga) if nodes != p2 else 0.0
    share = (p2 - 1) / p2
    rd = k * (al + m * be + m * ga) + fold
    rab = 2 * k * al + 2 * share * m * be + share * m * ga + fold
    ring = 2 * (nodes - 1) * al + 2 * (nodes - 1) / nodes * m * be + (nodes - 1) / nodes * m * ga
    # NCCL (modelled): a ring over every GPU, one channel a NIC: 2 (G - 1) hops, 2 (n - 1) of them
    # between nodes, and each NIC carries 2 (n-1)/n of a size/gpn slice; a double binary tree
    # between nodes (chains inside them): 2 (log2 n) hops between nodes and 2 (gpn - 1) inside,
    # about the ring's bytes a NIC.
    total = nodes * g
    nccl_ring = 2 * (nodes - 1) * al + 2 * (total - nodes) * a.alpha_nvl + \
        2 * (nodes - 1) / nodes * m * be
    nccl_tree = 2 * lg(nodes) * al + 2 * (g - 1) * a.alpha_nvl + 2 * m * be
    return {"rd": rd, "rab": rab, "ring": ring, "nccl ring": nccl_ring, "nccl tree": nccl_tree}


def allgather_times(a, nodes, block):
    """Seconds of the network step of an allgather of `block` bytes a GPU."""
    g = a.gpus_per_node
    part = block  # each rail carries one GPU's block a node (gpn rails)
    al, be = a.alpha, 1.0 / a.bw
    ring = (nodes - 1) * (al + part * be)
    steps = 0
    d = 1
    while d < nodes:
        steps += 2 if min(d, nodes - d) >= 2 else 1
        d *= 2
    bruck = steps * al + (nodes - 1) * part * be
    total = nodes * g
    nccl_ring = (nodes - 1) * al + (total - nodes) * a.alpha_nvl + (nodes - 1) * part * be
    # PAT (NCCL 2.23+): log2 n steps between nodes, for one GPU a node; with several, NCCL runs
    # the ring: shown as the one-GPU-a-node figure at this node count
    pat = lg(nodes) * al + (nodes - 1) * part * be
    return {"ring": ring, "bruck": bruck, "nccl ring": nccl_ring, "nccl pat (1 gpu/node)": pat}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=3e-6, help="seconds a message between nodes")
    ap.add_argument("--alpha-nvl", type=float, default=1e-6, help="seconds a hop inside a node")
    ap.add_argument("--alpha-setup", type=float, default=10e-6,
                    help="seconds a round of the set-up's MPI exchanges")
    ap.add_argument("--link-gbps", type=float, default=400.0, help="Gb/s a NIC (one a GPU)")
    ap.add_argument("--socket-per-partner", type=float, default=2.0)
    ap.add_argument("--sockets-fixed", type=float, default=4.0)
    ap.add_argument("--kib-per-endpoint", type=float, default=64.0)
    a = ap.parse_args()
    a.bw = a.link_gbps * 1e9 / 8
    gpn = a.gpus_per_node
    scales = [1000, 10000, 100000]
    print("Parameters: %d GPUs a node, a NIC of %g Gb/s a GPU (one rail each), %g us a message "
          "between nodes, %g us a hop inside a node, %g us a set-up round; %g sockets a partner "
          "plus %g, %g KiB an endpoint.\n" % (gpn, a.link_gbps, a.alpha * 1e6, a.alpha_nvl * 1e6,
                                             a.alpha_setup * 1e6, a.socket_per_partner,
                                             a.sockets_fixed, a.kib_per_endpoint))
    print("| GPUs | nodes | partners | endpoints (before) | liveness connections (before) | "
          "sockets (before) | endpoint memory (before) | set-up bytes received (before) | "
          "set-up time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for gpus in scales:
        n = gpus // gpn
        r = resources(a, n)
        print("| %d | %d | %d | %d (%d) | %d (%d) | %d (%d) | %s (%s) | %s (%s) | %s |" % (
            gpus, n, r["partners"], r["endpoints"][0], r["endpoints"][1], r["liveness"][0],
            r["liveness"][1], r["sockets"][0], r["sockets"][1], fmt_b(r["memory"][0]),
            fmt_b(r["memory"][1]), fmt_b(r["received"][0]), fmt_b(r["received"][1]),
            fmt_t(r["setup"])))
    print()
    for title, fn, sizes in (("allreduce", allreduce_times, [8, 64 << 10, 1 << 20, 64 << 20]),
                             ("allgather (bytes a GPU)", allgather_times, [8, 64 << 10, 1 << 20])):
        cols = list(fn(a, 125, 8).keys())
        print("| %s | GPUs | %s |" % (title, " | ".join(cols)))
        print("|---|---|%s" % ("---|" * len(cols)))
        for gpus in scales:
            n = gpus // gpn
            for s in sizes:
                t = fn(a, n, s)
                best = min(v for k, v in t.items() if not k.startswith("nccl"))
                print("| %s | %d | %s |" % (fmt_b(s), gpus, " | ".join(
                    ("**%s**" % fmt_t(v)) if v == best and not k.startswith("nccl") else fmt_t(v)
                    for k, v in t.items())))
        print()


if __name__ == "__main__":
    main()
