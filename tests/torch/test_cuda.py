"""picoll_torch on CUDA tensors (needs a GPU: tests/cuda/run-gpu.sh runs it when one is lent).

Every operation on CUDA tensors against a reference computed in plain Python; the stream order
(the result of a call is seen by the next kernel on the caller's stream with no host wait, an
async call's Work.wait() orders the caller's stream); picoll's kernels ran the enqueued calls
(picoll_torch.stream_stats); and CUDA graph capture of all_reduce, all_gather_into_tensor,
reduce_scatter_tensor, all_to_all_single and broadcast, replayed with new inputs.
"""
import torch
import torch.distributed as dist

import common

args = common.parse_args(__doc__)
rank, size = common.init(args)
dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
c = common.Checker(rank, size)
N = 1000  # elements a rank


def val(r, i):
    return float((r * 7 + i * 3) % 11 - 5)


def ref_sum(i):
    return sum(val(r, i) for r in range(size))


def test_all_reduce():
    c.group("all_reduce")
    for dtype in (torch.float32, torch.float64, torch.int32, torch.float16, torch.bfloat16):
        t = torch.tensor([val(rank, i) for i in range(N)], dtype=dtype, device=dev)
        dist.all_reduce(t)
        got = t.cpu().double().tolist()
        c.check(got == [ref_sum(i) for i in range(N)], f"SUM {dtype}")
        t = torch.tensor([val(rank, i) for i in range(N)], dtype=dtype, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        c.check(t.cpu().double().tolist() == [max(val(r, i) for r in range(size))
                                              for i in range(N)], f"MAX {dtype}")
    t = torch.tensor([val(rank, i) for i in range(N)], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    c.check(t.cpu().tolist() == [ref_sum(i) / size for i in range(N)], "AVG float64")


def test_stream_order():
    c.group("stream order")
    # the producer kernel is still running when the call is made; the consumer sees the result
    x = torch.full((1 << 20,), float(rank + 1), device=dev)
    for _ in range(20):
        x = x * 1.0  # queued work before the call
    dist.all_reduce(x)
    y = x + 0  # queued after it on the same stream, no host wait
    c.check(y[-1].item() == size * (size + 1) / 2, "all_reduce after queued kernels")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        z = torch.full((4096,), float(rank), device=dev)
        w = dist.all_reduce(z, async_op=True)
        w.wait()  # the current stream (s) waits for the call
        c.check(z.sum().item() == 4096 * size * (size - 1) / 2, "async all_reduce, wait()")
    torch.cuda.synchronize()


def test_collectives():
    c.group("collectives")
    x = torch.tensor([val(rank, i) for i in range(N)], device=dev)
    out = torch.empty(N * size, device=dev)
    dist.all_gather_into_tensor(out, x)
    c.check(out.cpu().tolist() == [val(r, i) for r in range(size) for i in range(N)],
            "all_gather_into_tensor")
    lst = [torch.empty(N, device=dev) for _ in range(size)]
    dist.all_gather(lst, x)
    c.check([t.cpu().tolist() for t in lst] == [[val(r, i) for i in range(N)]
                                                for r in range(size)], "all_gather")
    big = torch.tensor([val(rank, i) for i in range(N * size)], device=dev)
    o = torch.empty(N, device=dev)
    dist.reduce_scatter_tensor(o, big)
    c.check(o.cpu().tolist() == [sum(val(r, rank * N + i) for r in range(size))
                                 for i in range(N)], "reduce_scatter_tensor")
    a = torch.tensor([float(rank * 1000 + i) for i in range(N * size)], device=dev)
    b = torch.empty_like(a)
    dist.all_to_all_single(b, a)
    c.check(b.cpu().tolist() == [float(r * 1000 + rank * N + i) for r in range(size)
                                 for i in range(N)], "all_to_all_single")
    for root in range(size):
        t = torch.full((N,), float(rank + 10), device=dev)
        dist.broadcast(t, root)
        c.check(t.cpu().tolist() == [float(root + 10)] * N, f"broadcast root {root}")
        t = torch.tensor([val(rank, i) for i in range(N)], device=dev)
        dist.reduce(t, root)
        if rank == root:
            c.check(t.cpu().tolist() == [ref_sum(i) for i in range(N)], f"reduce root {root}")
        g = [torch.empty(N, device=dev) for _ in range(size)] if rank == root else None
        dist.gather(x, g, dst=root)
        if rank == root:
            c.check([t.cpu().tolist() for t in g] == [[val(r, i) for i in range(N)]
                                                      for r in range(size)], "gather")
        s = torch.empty(N, device=dev)
        src = [torch.full((N,), float(r), device=dev) for r in range(size)] \
            if rank == root else None
        dist.scatter(s, src, src=root)
        c.check(s.cpu().tolist() == [float(rank)] * N, f"scatter root {root}")
    if size >= 2:
        t = torch.full((N,), float(rank), device=dev)
        if rank == 0:
            dist.send(t, 1)
        elif rank == 1:
            dist.recv(t, 0)
            c.check(t.cpu().tolist() == [0.0] * N, "send/recv")
    st = dist.group.WORLD._get_backend(dev).stream_stats()
    c.check(st[5] > 0, f"picoll's kernels ran the enqueued calls (stream_stats {st})")


def test_graphs():
    c.group("graph capture")
    x = torch.zeros(N, device=dev)
    ag = torch.zeros(N * size, device=dev)
    rs_in = torch.zeros(N * size, device=dev)
    rs = torch.zeros(N, device=dev)
    a2a_in = torch.zeros(N * size, device=dev)
    a2a = torch.zeros(N * size, device=dev)
    bc = torch.zeros(N, device=dev)
    # warm up on a side stream (the group's stream and communicator are made outside capture)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        dist.all_reduce(x)
        dist.all_gather_into_tensor(ag, x)
        dist.reduce_scatter_tensor(rs, rs_in)
        dist.all_to_all_single(a2a, a2a_in)
        dist.broadcast(bc, 0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    # captured on the warm-up's stream (with picoll_torch.cuda_stream = "caller" the calls run on
    # it, and its stream communicator exists by then)
    with torch.cuda.graph(g, stream=s):
        dist.all_reduce(x)
        dist.all_gather_into_tensor(ag, x)
        dist.reduce_scatter_tensor(rs, rs_in)
        dist.all_to_all_single(a2a, a2a_in)
        dist.broadcast(bc, 0)
    for step in range(3):
        x.copy_(torch.tensor([val(rank, i) + step for i in range(N)], device=dev))
        rs_in.copy_(torch.tensor([val(rank, i) * (step + 1) for i in range(N * size)],
                                 device=dev))
        a2a_in.copy_(torch.tensor([float(rank * 100 + i + step) for i in range(N * size)],
                                  device=dev))
        bc.fill_(float(rank + step))
        g.replay()
        torch.cuda.synchronize()
        want = [ref_sum(i) + size * step for i in range(N)]
        c.check(x.cpu().tolist() == want, f"replay {step}: all_reduce")
        c.check(ag.cpu().tolist() == want * size, f"replay {step}: all_gather_into_tensor")
        c.check(rs.cpu().tolist() == [sum(val(r, rank * N + i) * (step + 1) for r in range(size))
                                      for i in range(N)], f"replay {step}: reduce_scatter")
        c.check(a2a.cpu().tolist() == [float(r * 100 + rank * N + i + step) for r in range(size)
                                       for i in range(N)], f"replay {step}: all_to_all_single")
        c.check(bc.cpu().tolist() == [float(step)] * N, f"replay {step}: broadcast")


for t in (test_all_reduce, test_stream_order, test_collectives, test_graphs):
    c.run(t)
c.summary()
c.finish()
