#!/usr/bin/env python3
"""dist.all_reduce bandwidth and latency through torch.distributed: picoll against gloo (and nccl).

    mpirun -np 2 python osu-bench/torch_bench.py [--backend picoll|gloo] [--max 64M]
        [--factor 4] [--rounds 5] [--seconds 0.05] [--device cpu|cuda] [--mpi] [--json FILE]
        [--blocking] [--no-nccl1] [--sizes 8,64K,2M,16M]

The all_reduce (SUM) of float32 tensors from 8 B to --max (8 B times the powers of --factor, and
--max itself), on the default group (--backend) and, in the same run, on a second group made with
dist.new_group(backend="gloo") (CPU tensors), or "nccl" (--device cuda, where NCCL is available),
and with CUDA tensors (or --mpi) a third column, "mpi": the blocking staged MPI that a user of
ProcessGroupMPI over an MPI that is not CUDA-aware gets (picoll_torch.time_staged_allreduce: per
call a copy to host memory, the MPI's own MPI_Allreduce with picoll bypassed, a copy back; on CPU
tensors the MPI's call alone). With CUDA tensors, where torch has NCCL, a column "nccl(1)" is
NCCL's process group of each rank alone (dist.new_subgroups(1)): nothing to move, so its time is
the per-call cost of the process group people use on GPUs (NCCL refuses two ranks on one GPU, so
this is the figure it gives on a shared GPU); --blocking synchronises after every call.
Per size, --rounds A/B rounds time each group in turn (A B A B ...) so that the machine's noise
falls on both; each timing is warm-up calls then a timed loop of about --seconds (3 to --iters
calls, per group: the "calls" column), the slowest rank's time per call, with CUDA tensors
between two torch.cuda.synchronize(). The table shows per group the median latency over rounds, its
spread (min-max) and the algorithm bandwidth (bytes / median time); the last columns are each
other column's latency over the default group's (median and min-max of the per-round ratios:
above 1x the default group is faster). Each size's result is checked once before timing. With
picoll on CPU tensors, the 8 B row also times picoll_torch.time_c_allreduce (a plain C loop of
MPI_Allreduce on the same memory) in each round; the difference is the backend's own cost.
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "torch"))
import common  # noqa: E402


def parse_size(text):
    """"8", "64K", "1M", "64M" (binary units) -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def add_options(parser):
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--min", type=parse_size, default=8, help="smallest size (bytes)")
    parser.add_argument("--max", type=parse_size, default=64 << 20, help="largest size (bytes)")
    parser.add_argument("--factor", type=int, default=4, help="ratio of one size to the next")
    parser.add_argument("--rounds", type=int, default=5, help="A/B rounds per size")
    parser.add_argument("--seconds", type=float, default=0.05,
                        help="about how long one timing runs (calls per timing: this over the "
                             "time of a call, 3 to --iters)")
    parser.add_argument("--iters", type=int, default=1000, help="most calls per timing")
    parser.add_argument("--mpi", action="store_true",
                        help="CPU tensors: also the MPI's own all_reduce (picoll bypassed)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--blocking", action="store_true",
                        help="synchronise the device after every call (default: back to back, "
                             "one synchronisation per timing)")
    parser.add_argument("--no-nccl1", dest="nccl1", action="store_false",
                        help="CUDA tensors: leave out the nccl(1) column (NCCL's process group "
                             "of this rank alone: its per-call cost, with nothing to move)")
    parser.add_argument("--sizes", type=lambda t: [parse_size(x) for x in t.split(",")],
                        help="these sizes only, e.g. 8,64K,2M,16M (instead of --min to --max)")
    parser.set_defaults(timeout=3600.0)


def label(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def sizes(args):
    if args.sizes:
        return args.sizes
    out, size = [], args.min
    while size <= args.max:
        out.append(size)
        size *= args.factor
    return out + ([args.max] if out[-1] != args.max else [])


def slowest(seconds):
    """The largest of every rank's value (the default group, a CPU tensor)."""
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class Group:
    """A column: a process group's dist.all_reduce, timed in Python."""

    blocking = False  # --blocking: a synchronisation after every call

    def __init__(self, name, group):
        self.name, self.group = name, group

    def call(self, tensor):
        dist.all_reduce(tensor, group=self.group)

    def members(self):
        return dist.get_world_size(self.group)

    def seconds(self, tensor, iters):
        """Seconds per call, this rank's: iters calls between two synchronisations (or each
        followed by one, --blocking)."""
        sync(tensor.device)
        start = time.perf_counter()
        if self.blocking:
            for _ in range(iters):
                self.call(tensor)
                sync(tensor.device)
        else:
            for _ in range(iters):
                self.call(tensor)
        sync(tensor.device)
        return (time.perf_counter() - start) / iters


class Staged(Group):
    """The "mpi" column: the blocking staged MPI, timed by picoll_torch's C loop."""

    def __init__(self):
        super().__init__("mpi", None)

    def call(self, tensor):
        self.seconds(tensor, 1)

    def seconds(self, tensor, iters):
        import picoll_torch
        return picoll_torch.time_staged_allreduce(tensor, iters)


def time_allreduce(tensor, col, iters):
    """Seconds per all_reduce call of column col, the slowest rank's."""
    col.seconds(tensor, max(1, iters // 10))
    dist.barrier()
    return slowest(col.seconds(tensor, iters))


def calibrate(tensor, col, args):
    """Calls per timing of column col for this tensor: about --seconds of calls, 3 to --iters
    (from the time of 5 calls after 2)."""
    col.seconds(tensor, 2)
    per_call = slowest(col.seconds(tensor, 5))
    return max(3, min(args.iters, int(args.seconds / per_call)))


def check(tensor, col, size):
    """One all_reduce of rank + 1 everywhere: the sum of 1..np, else the run stops; the "mpi"
    column's calls must not have been picoll's."""
    n, r = col.members(), dist.get_rank()
    tensor.fill_(r + 1)
    col.call(tensor)
    want = n * (n + 1) / 2 if n > 1 else r + 1  # a group of one: this rank's own
    if not bool((tensor == want).all()):
        sys.exit(f"rank {dist.get_rank()}: {col.name} all_reduce of {label(size)} is wrong")
    if isinstance(col, Staged):
        import picoll_torch
        if picoll_torch.last_algorithm() != "fallback":
            sys.exit(f"rank {dist.get_rank()}: the mpi column's all_reduce of {label(size)} took "
                     f"picoll's {picoll_torch.last_algorithm()}, not the MPI's")
    tensor.zero_()


def groups(args, device):
    """The columns: the default group first, then the one it is compared with, then (CUDA
    tensors, or --mpi) the blocking staged MPI."""
    out = [Group(args.backend, None)]
    other = "nccl" if device.type == "cuda" else "gloo"
    say = print if dist.get_rank() == 0 else (lambda *a: None)
    if device.type == "cuda":
        # NCCL refuses ranks that share a GPU: then gloo, which stages CUDA tensors through the
        # host (what an MPI that is not CUDA-aware makes the application do)
        local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE",
                                   os.environ.get("MPI_LOCALNRANKS", dist.get_world_size())))
        if not dist.is_nccl_available():
            say("# nccl: not available in this torch: gloo (CUDA tensors staged) instead")
            other = "gloo"
        elif torch.cuda.device_count() < local:
            say(f"# nccl: {local} ranks share {torch.cuda.device_count()} GPU(s), which NCCL "
                "refuses: gloo (CUDA tensors staged through the host) instead")
            other = "gloo"
    name = other if other != args.backend else f"{other}(new_group)"
    out.append(Group(name, dist.new_group(backend=other)))
    if args.backend == "picoll" and (device.type == "cuda" or args.mpi):
        out.append(Staged())
    if device.type == "cuda" and args.nccl1 and dist.is_nccl_available():
        # NCCL's process group of each rank alone (new_subgroups: every rank makes them all): what
        # a call costs there with nothing to move, on the same GPU (NCCL refuses two ranks on one)
        mine, _ = dist.new_subgroups(group_size=1, backend="nccl")
        out.append(Group("nccl(1)", mine))
    Group.blocking = args.blocking
    return out


def c_loop(tensor, iters):
    """Seconds per call of picoll's plain C loop of MPI_Allreduce, the slowest rank's."""
    import picoll_torch
    picoll_torch.time_c_allreduce(tensor, max(1, iters // 10))
    return slowest(picoll_torch.time_c_allreduce(tensor, iters))


def layer_loops(tensor, iters):
    """Seconds per call, the slowest rank's, of the same all_reduce one layer down each:
    torch's ProcessGroup (its C++ dispatch, no Python wrapper) and picoll_torch's backend object
    itself (called from Python through pybind11, then Work.wait())."""
    from torch._C._distributed_c10d import AllreduceOptions
    opts = AllreduceOptions()
    opts.asyncOp = False
    pg = dist.group.WORLD
    be = pg._get_backend(tensor.device)
    out = []
    for obj in (pg, be):
        for _ in range(max(1, iters // 10)):
            obj.allreduce([tensor], opts).wait()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            obj.allreduce([tensor], opts).wait()
        out.append(slowest((time.perf_counter() - start) / iters))
    return out


def spread(values):
    return statistics.median(values), min(values), max(values)


def bench(args, device, pgs):
    """Per size: {"bytes", "iters", name: [seconds per round], "ratios": {name: [...]} (each other
    column over the default), "ratio" (the second column's), "c": [...]}"""
    rows = []
    with_c = args.backend == "picoll" and device.type == "cpu"
    for size in sizes(args):
        tensor = torch.zeros(max(1, size // 4), dtype=torch.float32, device=device)
        row = {"bytes": size, "iters": {}, "ratios": {col.name: [] for col in pgs[1:]}, "c": []}
        row["ratio"] = row["ratios"][pgs[1].name] if len(pgs) > 1 else []
        for col in pgs:
            check(tensor, col, size)
            row["iters"][col.name] = calibrate(tensor, col, args)
            row[col.name] = []
        for _ in range(args.rounds):
            for col in pgs:
                row[col.name].append(time_allreduce(tensor, col, row["iters"][col.name]))
            for col in pgs[1:]:
                row["ratios"][col.name].append(row[col.name][-1] / row[pgs[0].name][-1])
            if with_c and size == args.min:
                row["c"].append(c_loop(tensor, row["iters"][args.backend]))
                pg_s, be_s = layer_loops(tensor, row["iters"][args.backend])
                row.setdefault("pg", []).append(pg_s)
                row.setdefault("backend", []).append(be_s)
        rows.append(row)
        if dist.get_rank() == 0:
            print_row(row, pgs)
    return rows


def print_header(pgs):
    cols = "".join(f" | {col.name + ': us median (min-max)':>36} {'GB/s':>7}" for col in pgs)
    ratios = "".join(f" | {col.name + '/' + pgs[0].name + ' median (min-max)':>30}"
                     for col in pgs[1:])
    print(f"{'size':>9} {'calls':>9}{cols}{ratios}", flush=True)


def print_row(row, pgs):
    line = f"{label(row['bytes']):>9} {'/'.join(map(str, row['iters'].values())):>9}"
    for col in pgs:
        med, lo, hi = (s * 1e6 for s in spread(row[col.name]))
        line += f" | {f'{med:.2f} ({lo:.2f}-{hi:.2f})':>36} {row['bytes'] / med / 1e3:>7.3g}"
    for col in pgs[1:]:
        med, lo, hi = spread(row["ratios"][col.name])
        line += f" | {f'{med:.2f}x ({lo:.2f}-{hi:.2f})':>30}"
    print(line, flush=True)


def print_c_overhead(row, default):
    med = {k: statistics.median(row[k]) * 1e6 for k in (default, "pg", "backend", "c")}
    print(f"# {label(row['bytes'])}: dist.all_reduce {med[default]:.2f} us; one layer down each "
          f"(medians): torch's ProcessGroup.allreduce+wait {med['pg']:.2f} us, picoll_torch's "
          f"backend .allreduce+wait through pybind11 {med['backend']:.2f} us, picoll's C call "
          f"(time_c_allreduce) {med['c']:.2f} us")
    print(f"# the backend's own cost (backend call - C call): {med['backend'] - med['c']:.2f} us;"
          f" torch's own above it (Python wrapper, dispatch): {med[default] - med['backend']:.2f}"
          f" us, paid by every backend")


def main():
    args = common.parse_args(__doc__.splitlines()[0], add_options)
    rank, size = common.launcher_rank_size()
    device = torch.device("cpu")
    if args.device == "cuda":
        local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                   os.environ.get("MPI_LOCALRANKID", rank)))
        torch.cuda.set_device(local % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    common.init(args)
    pgs = groups(args, device)
    if rank == 0:
        cpus = os.cpu_count()
        print(f"# torch_bench: torch {torch.__version__}, np {size} on {cpus} CPUs"
              f"{' (oversubscribed)' if size > cpus else ''}, device {device}, "
              f"all_reduce SUM float32, {args.rounds} A/B rounds, groups "
              f"{' '.join(col.name for col in pgs)}; load {os.getloadavg()[0]:.2f}")
        print_header(pgs)
    rows = bench(args, device, pgs)
    if rank == 0 and rows[0]["c"]:
        print_c_overhead(rows[0], args.backend)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"unit": "seconds per call, the slowest rank's, per round",
                       "torch": torch.__version__, "np": size, "device": str(device),
                       "rounds": args.rounds, "groups": [col.name for col in pgs],
                       "rows": rows}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
