"""Training through the process group: DistributedDataParallel, and a tensor-parallel MLP step.

    mpirun -np 4 python tests/torch/test_train.py [--backend picoll|gloo] [--init env|tcp]

DDP: 4 SGD steps (momentum) of a float64 2-layer model, each rank on its shard of a fixed batch,
against the same model trained in this process over the whole batch; the ranks start from
different parameters, so DDP's first broadcast is tested too. Tensor parallel: a column-parallel
Linear, tanh, a row-parallel Linear whose partial outputs are summed with all_reduce; forward and
backward against the same MLP computed whole. Both in float64, to 1e-12.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import common

args = common.parse_args(__doc__.splitlines()[0])
RANK, SIZE = common.init(args)
C = common.Checker(RANK, SIZE)
torch.set_default_dtype(torch.float64)
ATOL = 1e-12
BATCH, D_IN, HIDDEN, D_OUT, STEPS = 48, 8, 16, 4, 4  # BATCH divisible by 1, 2, 3, 4


def close(got, expected, what):
    err = (got - expected).abs().max().item()
    C.check(err <= ATOL, lambda: f"{what}: max difference {err:.3g} > {ATOL}")


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D_IN, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, D_OUT))


def batches():
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, D_IN, generator=gen), torch.randn(BATCH, D_OUT, generator=gen))
            for _ in range(STEPS)]


def train(model, data, shard):
    """STEPS steps of SGD on the mean squared error over rows shard of each batch; the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def test_ddp():
    C.group("DistributedDataParallel")
    if BATCH % SIZE:
        return C.skip("DDP", f"batch {BATCH} not divisible by {SIZE} ranks")
    data = batches()
    reference = make_model()
    ref_losses = train(reference, data, slice(None))
    model = make_model()
    with torch.no_grad():  # DDP must broadcast rank 0's parameters over these
        for p in model.parameters():
            p.add_(RANK * 0.25)
    # a small bucket, so that the gradients go in several all_reduce calls
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.0005)
    rows = BATCH // SIZE
    losses = train(ddp, data, slice(RANK * rows, (RANK + 1) * rows))
    for step, (loss, ref) in enumerate(zip(losses, ref_losses)):
        dist.all_reduce(loss)  # mean over equal shards: the whole batch's mean loss
        close(loss / SIZE, ref, f"step {step} loss")
    for (name, p), ref in zip(model.named_parameters(), reference.parameters()):
        close(p.detach(), ref.detach(), f"parameter {name} after {STEPS} steps")
    moved = max((p - q).abs().max().item()
                for p, q in zip(reference.parameters(), make_model().parameters()))
    C.check(moved > 1e-3, f"training moved the parameters (by {moved:.3g})")


class CopyToParallel(torch.autograd.Function):
    """Identity forward; backward sums the input's gradient over the ranks."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromParallel(torch.autograd.Function):
    """Forward sums the partial outputs over the ranks; backward is the identity."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_tensor_parallel():
    C.group("tensor-parallel MLP")
    if HIDDEN % SIZE:
        return C.skip("tensor parallel", f"hidden {HIDDEN} not divisible by {SIZE} ranks")
    gen = torch.Generator().manual_seed(2)
    w1, b1 = torch.randn(HIDDEN, D_IN, generator=gen), torch.randn(HIDDEN, generator=gen)
    w2, b2 = torch.randn(D_OUT, HIDDEN, generator=gen), torch.randn(D_OUT, generator=gen)
    x, target = torch.randn(6, D_IN, generator=gen), torch.randn(6, D_OUT, generator=gen)

    def leaves(*tensors):
        return [t.clone().requires_grad_() for t in tensors]

    # whole, in this process
    fw1, fb1, fw2, fb2, fx = leaves(w1, b1, w2, b2, x)
    full_out = torch.tanh(fx @ fw1.T + fb1) @ fw2.T + fb2
    ((full_out - target) ** 2).sum().backward()
    # this rank's slice: rows of w1 and b1 (column parallel), columns of w2 (row parallel)
    part = slice(RANK * HIDDEN // SIZE, (RANK + 1) * HIDDEN // SIZE)
    pw1, pb1, pw2, pb2, px = leaves(w1[part], b1[part], w2[:, part], b2, x)
    hidden = torch.tanh(CopyToParallel.apply(px) @ pw1.T + pb1)
    out = ReduceFromParallel.apply(hidden @ pw2.T) + pb2
    ((out - target) ** 2).sum().backward()
    close(out.detach(), full_out.detach(), "forward output")
    close(pw1.grad, fw1.grad[part], "grad of the column-parallel weight (rows)")
    close(pb1.grad, fb1.grad[part], "grad of the column-parallel bias")
    close(pw2.grad, fw2.grad[:, part], "grad of the row-parallel weight (columns)")
    close(pb2.grad, fb2.grad, "grad of the row-parallel bias")
    close(px.grad, fx.grad, "grad of the input (all_reduce in backward)")


C.run(test_ddp)
C.run(test_tensor_parallel)
C.summary()
C.finish()
