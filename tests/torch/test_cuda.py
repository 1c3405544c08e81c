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

args = common.parse_args(__doc__, lambda p: p.add_argument(
    "--cpu", action="store_true", help="the same checks on CPU tensors, without the stream and "
    "graph ones: checks the test itself where no GPU is"))
rank, size = common.init(args)
if args.cpu:
    dev = torch.device("cpu")
else:
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
    if not args.cpu:
        st = dist.group.WORLD._get_backend(dev).stream_stats()
        c.check(st[5] > 0, f"picoll's kernels ran the enqueued calls (stream_stats {st})")


def test_other_forms():
    """The list forms, uneven splits and sizes, point-to-point variants, groups and coalesced
    calls on CUDA tensors (most take the blocking path after a host wait: docs/torch.md)."""
    c.group("other forms")
    ins = [torch.full((3,), float(rank * 10 + d), device=dev) for d in range(size)]
    outs = [torch.empty(3, device=dev) for _ in range(size)]
    dist.all_to_all(outs, ins)
    c.check([o.cpu().tolist() for o in outs] == [[float(r * 10 + rank)] * 3 for r in range(size)],
            "all_to_all (lists)")
    # uneven all_to_all_single: rank r sends d + 1 rows to rank d
    send = torch.cat([torch.full((d + 1, 2), float(rank * 100 + d), device=dev)
                      for d in range(size)])
    recv = torch.empty(size * (rank + 1), 2, device=dev)
    dist.all_to_all_single(recv, send, [rank + 1] * size, [d + 1 for d in range(size)])
    c.check(recv.cpu().tolist() == [[float(r * 100 + rank)] * 2 for r in range(size)
                                    for _ in range(rank + 1)], "all_to_all_single uneven")
    # all_gather of tensors of different sizes (rank r gives r + 1 elements)
    mine = torch.full((rank + 1,), float(rank), device=dev)
    lst = [torch.empty(r + 1, device=dev) for r in range(size)]
    dist.all_gather(lst, mine)
    c.check([t.cpu().tolist() for t in lst] == [[float(r)] * (r + 1) for r in range(size)],
            "all_gather uneven")
    out = torch.empty(5, device=dev)
    dist.reduce_scatter(out, [torch.full((5,), float(rank + d), device=dev)
                              for d in range(size)])
    c.check(out.cpu().tolist() == [float(sum(r + rank for r in range(size)))] * 5,
            "reduce_scatter (list)")
    for dtype in (torch.float16, torch.bfloat16):
        big = torch.tensor([val(rank, i) for i in range(4 * size)], dtype=dtype, device=dev)
        o = torch.empty(4, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(o, big, op=dist.ReduceOp.AVG)
        # the sum (exact) divided in float32, rounded once to the dtype
        want = torch.tensor([sum(val(r, rank * 4 + i) for r in range(size)) / size
                             for i in range(4)], dtype=torch.float32).to(dtype).double().tolist()
        c.check(o.cpu().double().tolist() == want, f"reduce_scatter_tensor AVG {dtype}")
    ts = [torch.full((7,), float(rank + k), device=dev) for k in range(3)]
    dist.all_reduce_coalesced(ts)
    c.check([t.cpu().tolist() for t in ts] == [[float(sum(range(size)) + size * k)] * 7
                                               for k in range(3)], "all_reduce_coalesced")
    dist.barrier()
    if size >= 2:
        peer = (rank + 1) % size, (rank - 1) % size
        a = torch.full((9,), float(rank), device=dev)
        b = torch.empty(9, device=dev)
        ops = [dist.P2POp(dist.isend, a, peer[0]), dist.P2POp(dist.irecv, b, peer[1])]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        c.check(b.cpu().tolist() == [float(peer[1])] * 9, "batch_isend_irecv ring")
        if rank == 1:
            dist.send(torch.full((4,), 7.0, device=dev), 0)
        elif rank == 0:
            r = torch.empty(4, device=dev)
            src = dist.recv(r)
            c.check(src == 1 and r.cpu().tolist() == [7.0] * 4, f"recv any source: from {src}")
    sub = dist.new_group([r for r in range(size) if r % 2 == 0])
    if rank % 2 == 0:
        t = torch.full((6,), float(rank), device=dev)
        dist.all_reduce(t, group=sub)
        c.check(t.cpu().tolist() == [float(sum(range(0, size, 2)))] * 6, "new_group all_reduce")
    w = dist.all_gather_into_tensor(torch.empty(2 * size, device=dev),
                                    torch.full((2,), float(rank), device=dev), async_op=True)
    w.wait()
    fut = dist.all_reduce(torch.ones(3, device=dev), async_op=True).get_future()
    c.check(fut.wait()[0].cpu().tolist() == [float(size)] * 3, "async all_reduce get_future")


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


tests = (test_all_reduce, test_stream_order, test_collectives, test_other_forms, test_graphs)
if args.cpu:
    tests = (test_all_reduce, test_collectives, test_other_forms)
for t in tests:
    c.run(t)
c.summary()
c.finish()
