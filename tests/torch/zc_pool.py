"""Issue 50 on a GPU (lease step torch50 of tests/cuda/gpu-lease.sh; not a CTest test: it needs a
GPU): a 25 MiB all_reduce (DDP's bucket), and FSDP's reduce_scatter_tensor and
all_gather_into_tensor of 25 MiB of float32 CUDA tensors through picoll_torch, from picoll's
allocator (picoll_torch.mem_pool(): registered, PICOLL_CUDA_ZERO_COPY=registered) and from
PyTorch's own, turn about. Each call's result against what the ranks' inputs make, the path
picoll took (picoll_torch.last_algorithm(): cuda_zc from the pool, the copy path otherwise) and the
time per call (N calls back to back, one synchronize), printed one line per operation and kind:

    zc_pool: round R all_reduce  pool     path cuda_zc       25 MiB  N calls  X us/call
    zc_pool: round R all_reduce  default  path cuda_twoshot  25 MiB  N calls  Y us/call

With PICOLL_CUDA_ZERO_COPY=reused PyTorch's own tensors take the path too, from the second call
that meets their allocation: the "default" rows' path is the copy path's in round 0 (each
operation's first call) and cuda_zc in round 1.

Run under mpirun with picoll_torch importable: mpirun -np 2 python3 tests/torch/zc_pool.py"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

import picoll_torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=25)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    dist.init_process_group("picoll")
    rank, size = dist.get_rank(), dist.get_world_size()
    ndev = torch.cuda.device_count()
    if ndev == 0:
        print("zc_pool: SKIP: no CUDA device")
        return 77
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", rank)))
    torch.cuda.set_device(local % ndev)
    n = a.mib * (1 << 20) // 4
    pool = picoll_torch.mem_pool()
    n = n // size * size
    part = n // size

    def tensors():
        """all_reduce's buffer, reduce-scatter's input and output, all-gather's input and output"""
        return [torch.empty(k, dtype=torch.float32, device="cuda") for k in (n, n, part, part, n)]

    with torch.cuda.use_mem_pool(pool):
        pooled = tensors()
    plain = tensors()
    total = float(sum(q + 1 for q in range(size)))
    gathered = torch.arange(1, size + 1, dtype=torch.float32, device="cuda").repeat_interleave(part)
    bad = 0
    for rnd in range(a.rounds):
        for op in ("all_reduce", "reduce_scatter", "all_gather"):
            for kind, (ar, rs_in, rs_out, ag_in, ag_out) in (("pool", pooled), ("default", plain)):
                if op == "all_reduce":
                    def call():
                        dist.all_reduce(ar)
                    ar.fill_(float(rank + 1))
                    out, want = ar, total
                elif op == "reduce_scatter":
                    def call():
                        dist.reduce_scatter_tensor(rs_out, rs_in)
                    rs_in.fill_(float(rank + 1))
                    out, want = rs_out, total
                else:
                    def call():
                        dist.all_gather_into_tensor(ag_out, ag_in)
                    ag_in.fill_(float(rank + 1))
                    out, want = ag_out, gathered
                call()
                path = picoll_torch.last_algorithm()
                torch.cuda.synchronize()
                if not torch.all(out == want):
                    print("zc_pool: FAIL: rank %d, %s %s: gave %s" % (rank, op, kind, out[:4].tolist()))
                    bad += 1
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    call()
                torch.cuda.synchronize()
                us = (time.perf_counter() - t0) / a.calls * 1e6
                if rank == 0:
                    print("zc_pool: round %d %-14s %-8s path %-14s %d MiB  %d calls  %.1f us/call"
                          % (rnd, op, kind, path, a.mib, a.calls, us))
                    sys.stdout.flush()
    dist.destroy_process_group()
    del pooled
    if rank == 0 and bad == 0:
        print("zc_pool: passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
