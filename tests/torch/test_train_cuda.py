"""Training steps on CUDA tensors through picoll's kernels: DDP with its default 25 MiB buckets
and FSDP (fully_shard: all_gather_into_tensor and reduce_scatter_tensor of the shards).

    mpirun -np 4 python tests/torch/test_train_cuda.py [--backend picoll|gloo] [--cpu]
        [--width 2048] [--steps 3]

Each rank trains on its shard of a fixed batch; the same model trained in this process over the
whole batch is the reference (float32: to a relative 1e-4, the sums' order differs). With picoll
on CUDA tensors, the path of every call is checked: the process group's calls
(ProcessGroupPicoll.calls) each went to picoll's kernels on the stream (stream_stats: kernels grew
by as many, nothing staged). DDP's gradients (width^2 * 4 floats per layer pair: 2048 gives
64 MiB) span several 25 MiB buckets. --cpu runs the same steps on CPU tensors (CI's check of
this script; no path check there) with a small width.
"""

import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import common


def add_options(parser):
    parser.add_argument("--cpu", action="store_true", help="CPU tensors (the script's own check)")
    parser.add_argument("--width", type=int, default=0, help="hidden width (default 2048, "
                        "--cpu 64)")
    parser.add_argument("--steps", type=int, default=3)


args = common.parse_args(__doc__.splitlines()[0], add_options)
RANK, SIZE = common.init(args)
C = common.Checker(RANK, SIZE)
if args.cpu:
    DEV = torch.device("cpu")
else:
    torch.cuda.set_device(RANK % torch.cuda.device_count())
    DEV = torch.device("cuda", torch.cuda.current_device())
WIDTH = args.width or (64 if args.cpu else 2048)
BATCH = 96  # divisible by 1, 2, 3, 4
RTOL = 1e-4
PICOLL = args.backend == "picoll"


def model_():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(),
                               torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(),
                               torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(),
                               torch.nn.Linear(WIDTH, 8)).to(DEV)


def batches():
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, WIDTH, generator=gen).to(DEV),
             torch.randn(BATCH, 8, generator=gen).to(DEV)) for _ in range(args.steps)]


def train(model, data, shard, params=None):
    opt = torch.optim.SGD(params if params is not None else model.parameters(), lr=0.05,
                          momentum=0.9)
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x[shard]), y[shard]).backward()
        opt.step()


def close(got, ref, what):
    err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    C.check(err <= RTOL, lambda: f"{what}: relative difference {err:.3g} > {RTOL}")


class Path:
    """The process group's calls and picoll's stream counters around a step."""

    def __init__(self):
        self.on = PICOLL and not args.cpu
        if self.on:
            self.pg = dist.group.WORLD._get_backend(DEV)
            self.calls, self.st = self.pg.calls(), self.pg.stream_stats()

    def check(self, what):
        if not self.on:
            return
        calls, st = self.pg.calls() - self.calls, self.pg.stream_stats()
        staged, kernels = st[0] - self.st[0], st[5] - self.st[5]
        C.check(calls > 0 and kernels == calls and staged == 0,
                f"{what}: {calls} calls, {kernels} on picoll's kernels, {staged} staged "
                f"(want every call on the kernels, none staged)")
        return calls


def shard_rows():
    rows = BATCH // SIZE
    return slice(RANK * rows, (RANK + 1) * rows)


def steps_against(what, trained, params, ref, data):
    """Trains trained (whose parameters are params) on this rank's rows, checks the path of its
    calls and its parameters against ref's, and prints the time a step."""
    path = Path()
    start = time.perf_counter()
    train(trained, data, shard_rows())
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - start
    calls = path.check(what)
    for (name, p), q in zip(params, ref.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p  # FSDP's shards: the whole
        close(full.detach(), q.detach(), f"{what} parameter {name} after {args.steps} steps")
    if RANK == 0:
        print(f"test_train_cuda: {what} {args.steps} steps of width {WIDTH} on {SIZE} ranks "
              f"({args.backend}, {DEV.type}): {took * 1e3 / args.steps:.2f} ms a step"
              f"{'' if calls is None else f', {calls} calls'}", flush=True)


def test_ddp():
    C.group("DDP (25 MiB buckets)")
    data = batches()
    ref = model_()
    train(ref, data, slice(None))
    model = model_()
    with torch.no_grad():  # DDP broadcasts rank 0's parameters over these
        for p in model.parameters():
            p.add_(RANK * 0.01)
    ddp = DistributedDataParallel(model, device_ids=None if args.cpu else [DEV.index])
    steps_against("DDP", ddp, list(model.named_parameters()), ref, data)


def test_fsdp():
    C.group("FSDP (fully_shard)")
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        return C.skip("FSDP", "this torch has no torch.distributed.fsdp.fully_shard")
    data = batches()
    ref = model_()
    train(ref, data, slice(None))
    model = model_()
    try:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(DEV.type, (SIZE,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    except Exception as e:  # a torch whose FSDP refuses this device or backend
        return C.skip("FSDP", f"fully_shard refused: {e}")
    steps_against("FSDP", model, list(model.named_parameters()), ref, data)


C.run(test_ddp)
C.run(test_fsdp)
C.summary()
C.finish()
