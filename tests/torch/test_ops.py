"""Every torch.distributed operation on CPU tensors, each dtype, against plain Python references.

    mpirun -np 4 python tests/torch/test_ops.py [--backend picoll|gloo] [--init env|tcp]
        [--only test_all_reduce,test_groups]

Each rank's data and the references are computed in plain Python (reference.py): rank-dependent
values with negatives, full-range integers (int8 sums wrap around), exact halves for the float
types. Sizes from 1 element to 100k. With picoll and PICOLL_HOST=on, a float32 all_reduce must
report a picoll algorithm (picoll_torch.last_algorithm), not the MPI's.
"""

import os
import time
import warnings

import torch
import torch.distributed as dist

import common
from reference import R, data, gathered, ops_for, reduced

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
ALL = FLOATS + INTS + (torch.bool, torch.complex64)
SIZES = (1, 13, 4099, 100_000)  # elements; the last crosses picoll's shared-memory thresholds
# torch hands the backend complex tensors as real views except in reduce, gather and
# reduce_scatter: there complex64 is the backend's choice (done right or refused: test_errors)
REAL = ALL[:-1]
# what gloo cannot do in any collective in torch 2.15 ("Invalid scalar type"; send and recv take
# it): skipped for gloo only, with a line
GLOO_LACKS = (torch.int16,)

args = common.parse_args(__doc__.splitlines()[0], lambda p: p.add_argument(
    "--only", metavar="TEST[,TEST]", help="these tests only (e.g. test_all_reduce: the tcp:// "
    "set-up's check, where the operations themselves are tested with env://)"))
RANK, SIZE = common.init(args)
C = common.Checker(RANK, SIZE)
# per-rank blocks of the gathers and scatters: the whole buffer is SIZES[-1] at most
BLOCKS = SIZES[:3] + (SIZES[-1] // SIZE,)
PICOLL = args.backend == "picoll"
warnings.filterwarnings("ignore")  # torch warns on a collective called outside its group


def name(dtype):
    return str(dtype).replace("torch.", "")


def expect(got, expected, what, op=None):
    """got equal to the expected tensor; AVG to the dtype's rounding (np not 2^k)."""
    return C.equal(got, expected, what, torch.finfo(got.dtype).eps if op == R.AVG else 0.0)


def supported(collective, dtype):
    """False (and the skip counted, printed once) for a case gloo cannot do."""
    if PICOLL or dtype not in GLOO_LACKS:
        return True
    C.skip(f"{collective} {name(dtype)}", "gloo: Invalid scalar type")
    return False


def test_all_reduce():
    C.group("all_reduce")
    for dtype in filter(lambda d: supported("all_reduce", d), ALL):
        for op in ops_for(dtype):
            for n in SIZES:
                t = data(dtype, n, RANK, 1, op)
                dist.all_reduce(t, op=op)
                expect(t, reduced(dtype, n, op, range(SIZE), 1),
                       f"all_reduce {name(dtype)} {op} n={n}", op)
    C.group("all_reduce picoll path")
    if not PICOLL:
        return C.skip("last_algorithm", "picoll only")
    import picoll_torch
    host_on = os.environ.get("PICOLL_HOST") == "on"
    for n in SIZES:
        dist.all_reduce(torch.ones(n))
        algo = picoll_torch.last_algorithm()
        if RANK == 0:
            print(f"picoll all_reduce float32 n={n}: {algo}")
        if host_on:
            C.check(algo not in (None, "fallback"), f"n={n}: last_algorithm() {algo!r}")
    if not host_on:
        C.skip("last_algorithm not fallback", "PICOLL_HOST is not on")


def test_broadcast_reduce():
    C.group("broadcast")
    for dtype in filter(lambda d: supported("broadcast", d), ALL):
        for n in SIZES:
            for root in range(SIZE) if n < SIZES[-1] else (SIZE - 1,):
                t = data(dtype, n, RANK, 2)
                dist.broadcast(t, src=root)
                expect(t, data(dtype, n, root, 2), f"broadcast {name(dtype)} n={n} root {root}")
    C.group("reduce")
    for dtype in filter(lambda d: supported("reduce", d), REAL):
        for op in (R.SUM, R.MAX):
            for n in SIZES:
                for root in range(SIZE) if n < SIZES[-1] else (SIZE - 1,):
                    t = data(dtype, n, RANK, 3, op)
                    dist.reduce(t, dst=root, op=op)
                    if RANK == root:
                        expect(t, reduced(dtype, n, op, range(SIZE), 3),
                               f"reduce {name(dtype)} {op} n={n} root {root}")


def test_all_gather():
    C.group("all_gather")
    for dtype in filter(lambda d: supported("all_gather", d), ALL):
        for n in BLOCKS:
            what = f"{name(dtype)} n={n}"
            everyone = gathered(dtype, n, range(SIZE), 4)
            outs = [torch.zeros(n, dtype=dtype) for _ in range(SIZE)]
            dist.all_gather(outs, data(dtype, n, RANK, 4))
            expect(torch.cat(outs), everyone, f"all_gather {what}")
            out = torch.zeros(SIZE * n, dtype=dtype)
            dist.all_gather_into_tensor(out, data(dtype, n, RANK, 4))
            expect(out, everyone, f"all_gather_into_tensor {what}")
            out = torch.zeros(SIZE * n, dtype=dtype)
            mine = out[RANK * n:(RANK + 1) * n]
            mine.copy_(data(dtype, n, RANK, 4))
            dist.all_gather_into_tensor(out, mine)
            expect(out, everyone, f"all_gather_into_tensor in place {what}")
    everyone = gathered(torch.float32, 39, range(SIZE), 4)
    out = torch.zeros(SIZE * 3, 13)
    dist.all_gather_into_tensor(out, data(torch.float32, 39, RANK, 4).reshape(3, 13))
    expect(out.flatten(), everyone, "all_gather_into_tensor (3, 13) into (3 size, 13)")
    if not PICOLL:
        return C.skip("all_gather_into_tensor stacked output", "gloo: invalid tensor size")
    out = torch.zeros(SIZE, 39)
    dist.all_gather_into_tensor(out, data(torch.float32, 39, RANK, 4))
    expect(out.flatten(), everyone, "all_gather_into_tensor (39) into (size, 39)")


def test_reduce_scatter():
    C.group("reduce_scatter")
    for dtype in filter(lambda d: supported("reduce_scatter", d), REAL):
        ops = ops_for(dtype) if dtype in (torch.float32, torch.int32) else (R.SUM, R.MIN)
        for op in ops:
            for n in BLOCKS if op == R.SUM else BLOCKS[:3]:
                what = f"{name(dtype)} {op} n={n}"
                # chunk j of every rank is reduced onto rank j
                chunks = [data(dtype, n, RANK, 10 + j, op) for j in range(SIZE)]
                expected = reduced(dtype, n, op, range(SIZE), 10 + RANK)
                out = torch.zeros(n, dtype=dtype)
                dist.reduce_scatter(out, chunks, op=op)
                expect(out, expected, f"reduce_scatter {what}", op)
                out = torch.zeros(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, torch.cat(chunks), op=op)
                expect(out, expected, f"reduce_scatter_tensor {what}", op)
                whole = torch.cat(chunks)
                out = whole[RANK * n:(RANK + 1) * n]
                dist.reduce_scatter_tensor(out, whole, op=op)
                expect(out, expected, f"reduce_scatter_tensor in place {what}", op)


def test_all_to_all():
    C.group("all_to_all")

    def uneven(src, dst, scale):  # elements src sends dst; 0 for some pairs
        return (src * 3 + dst * 5 + 1) % 4 * scale

    for dtype in filter(lambda d: supported("all_to_all", d), ALL):
        for n in BLOCKS:
            for kind, count in (("even", lambda s, d: n), ("uneven", lambda s, d: uneven(s, d, n))):
                what = f"{name(dtype)} n={n} {kind}"
                ins = [data(dtype, count(RANK, j), RANK, 20 + j) for j in range(SIZE)]
                outs = [torch.zeros(count(j, RANK), dtype=dtype) for j in range(SIZE)]
                expected = torch.cat([data(dtype, count(j, RANK), j, 20 + RANK)
                                      for j in range(SIZE)])
                if PICOLL or kind == "even":
                    dist.all_to_all(outs, ins)
                    expect(torch.cat(outs), expected, f"all_to_all {what}")
                else:
                    C.skip("all_to_all uneven", "gloo: invalid tensor size (equal sizes only)")
                out = torch.zeros(expected.numel(), dtype=dtype)
                if kind == "even":
                    dist.all_to_all_single(out, torch.cat(ins))
                else:
                    dist.all_to_all_single(out, torch.cat(ins), [o.numel() for o in outs],
                                           [i.numel() for i in ins])
                expect(out, expected, f"all_to_all_single {what}")


def test_gather_scatter():
    C.group("gather/scatter")
    for dtype in filter(lambda d: supported("gather/scatter", d), REAL):
        for n in SIZES[:3]:
            for root in range(SIZE):
                what = f"{name(dtype)} n={n} root {root}"
                outs = [torch.zeros(n, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
                dist.gather(data(dtype, n, RANK, 30), outs, dst=root)
                if RANK == root:
                    expect(torch.cat(outs), gathered(dtype, n, range(SIZE), 30),
                           f"gather {what}")
                ins = [data(dtype, n, j, 31 + root) for j in range(SIZE)] if RANK == root else None
                out = torch.zeros(n, dtype=dtype)
                dist.scatter(out, ins, src=root)
                expect(out, data(dtype, n, RANK, 31 + root), f"scatter {what}")


def test_point_to_point():
    C.group("send/recv")
    nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
    for dtype in (torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.int8):
        for n in SIZES:
            what = f"{name(dtype)} n={n}"
            got = torch.zeros(n, dtype=dtype)
            mine = data(dtype, n, RANK, 40)
            steps = (lambda: dist.send(mine, dst=nxt, tag=1),
                     lambda: dist.recv(got, src=prv, tag=1))
            for step in steps if RANK % 2 == 0 else steps[::-1]:  # even ranks send first
                step()
            expect(got, data(dtype, n, prv, 40), f"send/recv ring {what}")
            if RANK == 0:
                senders = []
                for _ in range(SIZE - 1):
                    got = torch.zeros(n, dtype=dtype)
                    sender = dist.recv(got, tag=2)
                    senders.append(sender)
                    expect(got, data(dtype, n, sender, 41), f"recv any source {what} from {sender}")
                C.check(sorted(senders) == list(range(1, SIZE)), f"recv any senders {senders}")
            else:
                dist.send(data(dtype, n, RANK, 41), dst=0, tag=2)
            got = torch.zeros(n, dtype=dtype)
            works = [dist.isend(mine, dst=nxt, tag=3), dist.irecv(got, src=prv, tag=3)]
            for w in works:
                w.wait()
            C.check(all(w.is_completed() for w in works), f"isend/irecv {what} completed")
            expect(got, data(dtype, n, prv, 40), f"isend/irecv ring {what}")
            fwd, bwd = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
            works = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, mine, nxt, tag=4),
                dist.P2POp(dist.isend, data(dtype, n, RANK, 42), prv, tag=5),
                dist.P2POp(dist.irecv, fwd, prv, tag=4), dist.P2POp(dist.irecv, bwd, nxt, tag=5)])
            for w in works:
                w.wait()
            expect(fwd, data(dtype, n, prv, 40), f"batch_isend_irecv from previous {what}")
            expect(bwd, data(dtype, n, nxt, 42), f"batch_isend_irecv from next {what}")
    # an isend whose Work is dropped at once (gloo lets a program do so): every rank sends 4 MB
    # round the ring before anyone receives, so the send completes only after its receive is
    # posted; the message still arrives, and nothing waits for it in the Work's destructor
    big = torch.arange(1 << 20, dtype=torch.float32) + RANK
    dist.isend(big.clone(), dst=nxt, tag=6)
    got = torch.zeros(1 << 20, dtype=torch.float32)
    dist.recv(got, src=prv, tag=6)
    expect(got, torch.arange(1 << 20, dtype=torch.float32) + prv,
           "a dropped isend's message arrived")


def test_barrier_coalesced_async():
    C.group("barrier")
    start = time.perf_counter()
    if RANK == 0:
        time.sleep(0.3)
    dist.barrier()
    C.check(time.perf_counter() - start > 0.25, "barrier waited for rank 0's 0.3 s sleep")
    C.group("coalesced")
    backend = dist.group.WORLD._get_backend(torch.device("cpu")) if PICOLL else None

    def calls():
        return backend.calls() if backend is not None else 0

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        ts = [data(dtype, n, RANK, 50 + n % 9) for n in (5, 4099, 1)]
        before = calls()
        dist.all_reduce_coalesced(ts, op=R.SUM)
        if PICOLL:  # packed: one MPI call for the three tensors, not one each
            C.check(calls() - before == 1, f"all_reduce_coalesced {name(dtype)} of 3 tensors "
                    f"made {calls() - before} calls (want 1)")
        for t, n in zip(ts, (5, 4099, 1)):
            expect(t, reduced(dtype, n, R.SUM, range(SIZE), 50 + n % 9),
                   f"all_reduce_coalesced {name(dtype)} n={n}")
        for async_ops in (False, True):
            what = f"_coalescing_manager {name(dtype)} async_ops={async_ops}"
            sums = [data(dtype, n, RANK, 51) for n in (7, 4099)]
            gathers = [torch.zeros(n * SIZE, dtype=dtype) for n in (7, 4099)]
            scattered = [torch.zeros(n, dtype=dtype) for n in (7, 4099)]
            before = calls()
            with dist._coalescing_manager(async_ops=async_ops) as cm:
                for t in sums:
                    dist.all_reduce(t)
            with dist._coalescing_manager(async_ops=async_ops) as cm2:
                for t, out in zip(sums, gathers):
                    dist.all_gather_into_tensor(out, data(dtype, t.numel(), RANK, 52))
            with dist._coalescing_manager(async_ops=async_ops) as cm3:
                for out in scattered:
                    dist.reduce_scatter_tensor(out, data(dtype, out.numel() * SIZE, RANK, 53))
            if PICOLL and not async_ops:  # each list packed into one call (async: one each)
                C.check(calls() - before == 3, f"{what}: {calls() - before} calls for three "
                        "coalesced lists of two tensors (want 3)")
            if async_ops:
                cm.wait(), cm2.wait(), cm3.wait()
            for t, g, s in zip(sums, gathers, scattered):
                n = t.numel()
                expect(t, reduced(dtype, n, R.SUM, range(SIZE), 51), f"{what} all_reduce n={n}")
                expect(g, gathered(dtype, n, range(SIZE), 52),
                       f"{what} all_gather_into_tensor n={n}")
                whole = reduced(dtype, n * SIZE, R.SUM, range(SIZE), 53)
                expect(s, whole[RANK * n:(RANK + 1) * n], f"{what} reduce_scatter_tensor n={n}")
    C.group("async_op")
    n = SIZES[-1]
    a, b = data(torch.float32, n, RANK, 60), data(torch.int32, n, RANK, 61)
    everyone, c = torch.zeros(n * SIZE), data(torch.float64, 13, RANK, 62)
    works = [dist.all_reduce(a, async_op=True),
             dist.broadcast(b, src=SIZE - 1, async_op=True),
             dist.all_gather_into_tensor(everyone, data(torch.float32, n, RANK, 63),
                                         async_op=True)]
    fut = dist.all_reduce(c, op=R.MAX, async_op=True).get_future()
    C.check(all(isinstance(w.is_completed(), bool) for w in works), "is_completed() a bool")
    for w in works:
        C.check(w.wait() is not False, "Work.wait()")
        C.check(w.is_completed(), "is_completed() after wait()")
    fut.wait()
    expect(a, reduced(torch.float32, n, R.SUM, range(SIZE), 60), "async all_reduce")
    expect(b, data(torch.int32, n, SIZE - 1, 61), "async broadcast")
    expect(everyone, gathered(torch.float32, n, range(SIZE), 63),
           "async all_gather_into_tensor")
    expect(c, reduced(torch.float64, 13, R.MAX, range(SIZE), 62), "async all_reduce future")


def test_groups():
    C.group("new_group")
    for members in (list(range(1, SIZE)), list(range(0, SIZE, 2))):
        g = dist.new_group(members)
        what = f"group {members}"
        t = data(torch.int64, 4099, RANK, 70)
        if RANK not in members:
            C.check(dist.get_rank(g) == -1, f"{what}: get_rank {dist.get_rank(g)} outside")
            dist.all_reduce(t, group=g)
            expect(t, data(torch.int64, 4099, RANK, 70), f"{what}: outside rank untouched")
            continue
        C.check(dist.get_rank(g) == members.index(RANK), f"{what}: get_rank {dist.get_rank(g)}")
        C.check(dist.get_world_size(g) == len(members), f"{what}: size {dist.get_world_size(g)}")
        dist.all_reduce(t, group=g)
        expect(t, reduced(torch.int64, 4099, R.SUM, members, 70), f"{what} all_reduce")
        t = data(torch.float32, 100, RANK, 71)
        dist.broadcast(t, src=members[-1], group=g)
        expect(t, data(torch.float32, 100, members[-1], 71), f"{what} broadcast")
        out = torch.zeros(13 * len(members), dtype=torch.int8)
        dist.all_gather_into_tensor(out, data(torch.int8, 13, RANK, 72), group=g)
        expect(out, gathered(torch.int8, 13, members, 72),
               f"{what} all_gather_into_tensor")
        dist.barrier(group=g)
    C.group("split_group")
    halves = [list(range(0, SIZE, 2)), list(range(1, SIZE, 2))]
    try:
        g = dist.split_group(split_ranks=halves)
    except RuntimeError as e:
        return C.skip("split_group", f"torch says: {str(e).splitlines()[0]}")
    mine = halves[RANK % 2]
    C.check(g is not None and dist.get_world_size(g) == len(mine), "split_group size")
    t = data(torch.float64, 4099, RANK, 73)
    dist.all_reduce(t, group=g)
    expect(t, reduced(torch.float64, 4099, R.SUM, mine, 73), f"split_group {mine} all_reduce")


def test_errors():
    C.group("errors")
    cases = [(R.BAND, torch.float32, "BAND"), (R.AVG, torch.int32, "AVG"),
             (R.AVG, torch.bool, "AVG"),
             (dist._make_nccl_premul_sum(torch.tensor([2.0])), torch.float32, "PREMUL_SUM")]
    for op, dtype, opname in cases:
        what = f"all_reduce {opname} on {dtype}"
        if not PICOLL:
            C.skip(what, "error messages are picoll's (gloo fails some of these later)")
            continue
        t = data(dtype, 13, RANK, 80)
        try:
            dist.all_reduce(t, op=op)
            C.check(False, f"{what}: no error raised")
        except Exception as e:  # noqa: BLE001  (a RuntimeError naming the operation and dtype)
            msg = str(e)
            named = "all_reduce" in msg.lower().replace("allreduce", "all_reduce")
            C.check(isinstance(e, RuntimeError) and named and opname in msg and str(dtype) in msg,
                    f"{what}: {type(e).__name__} {msg!r}")
        expect(t, data(dtype, 13, RANK, 80), f"{what}: tensor untouched")
    t = data(torch.float32, 13, RANK, 81)
    dist.all_reduce(t)
    expect(t, reduced(torch.float32, 13, R.SUM, range(SIZE), 81), "all_reduce after the errors")
    if PICOLL:  # PREMUL_SUM with a scalar factor: the factor times the sum (exact for 2.0)
        t = data(torch.float32, 13, RANK, 83)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        expect(t, 2 * reduced(torch.float32, 13, R.SUM, range(SIZE), 83),
               "all_reduce PREMUL_SUM(2.0)")
    C.group("complex64 in the backend")  # right, or refused with a message naming complex64
    n, whole = 13 * SIZE, reduced(torch.complex64, 13 * SIZE, R.SUM, range(SIZE), 82)
    mine = whole[RANK * 13:(RANK + 1) * 13]
    for coll in ("reduce", "reduce_scatter_tensor"):
        t, out = data(torch.complex64, n, RANK, 82), torch.zeros(13, dtype=torch.complex64)
        try:
            if coll == "reduce":
                dist.reduce(t, dst=0)
            else:
                dist.reduce_scatter_tensor(out, t)
        except RuntimeError as e:
            C.check("complex64" in str(e), f"{coll} refused complex64 saying {str(e)!r}")
            continue
        if coll == "reduce" and RANK == 0:
            expect(t, whole, "reduce complex64 SUM")
        elif coll != "reduce":
            expect(out, mine, "reduce_scatter_tensor complex64 SUM")


def test_shuffle(calls=150, seed=1):
    """Operations drawn at random from one seed (the same draws on every rank): all_reduce,
    broadcast, reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single and
    barrier, any dtype and op, 1 to 16k elements, some async (waited for a few calls later), on
    four groups interleaved: the world, a group of every rank, every rank but 0 and the even
    ranks (a rank outside sits the call out), so that sizes, paths and groups follow each other in
    no fixed order. Each result against reference.py."""
    import random
    C.group("shuffle")
    rnd = random.Random(seed)
    groups = [(None, list(range(SIZE))), (dist.new_group(list(range(SIZE))), list(range(SIZE))),
              (dist.new_group(list(range(1, SIZE))), list(range(1, SIZE))),
              (dist.new_group(list(range(0, SIZE, 2))), list(range(0, SIZE, 2)))]
    pending = []  # (work, check) of async calls

    def settle():
        for work, check in pending:
            work.wait()
            check()
        pending.clear()

    for k in range(calls):
        g, members = groups[rnd.randrange(len(groups))]
        kind = rnd.choice(("all_reduce", "all_reduce", "broadcast", "reduce", "all_gather",
                           "reduce_scatter", "all_to_all", "barrier"))
        dtype = rnd.choice(REAL if kind in ("reduce", "reduce_scatter") else ALL)
        op = rnd.choice(ops_for(dtype))
        n = max(1, int(2 ** rnd.uniform(0, 14)))
        root = rnd.choice(members)
        is_async = rnd.random() < 0.3
        # every draw before a rank may sit the call out: the same sequence on every rank
        op_reduce, op_scatter = rnd.choice((R.SUM, R.MAX)), rnd.choice((R.SUM, R.MIN, R.MAX))
        flush = rnd.random() < 0.2
        salt = 1000 + k
        if not supported(kind, dtype) or RANK not in members or len(members) < 2:
            continue
        m, me = len(members), members.index(RANK)
        what = f"shuffle call {k}: {kind} {name(dtype)} n={n} on {members}"
        if kind == "all_reduce":
            t = data(dtype, n, RANK, salt, op)
            w = dist.all_reduce(t, op=op, group=g, async_op=is_async)
            want = reduced(dtype, n, op, members, salt)
            check = lambda t=t, want=want, what=what, op=op: expect(t, want, what, op)
        elif kind == "broadcast":
            t = data(dtype, n, RANK, salt)
            w = dist.broadcast(t, src=root, group=g, async_op=is_async)
            want = data(dtype, n, root, salt)
            check = lambda t=t, want=want, what=f"{what} root {root}": expect(t, want, what)
        elif kind == "reduce":
            op = op_reduce
            t = data(dtype, n, RANK, salt, op)
            w = dist.reduce(t, dst=root, op=op, group=g, async_op=is_async)
            want = reduced(dtype, n, op, members, salt) if RANK == root else data(
                dtype, n, RANK, salt, op)
            # (a leaf's tensor is the backend's to use: gloo leaves partial sums there)
            check = lambda t=t, want=want, what=what, root=root: (RANK != root or
                                                                  expect(t, want, what))
        elif kind == "all_gather":
            out = torch.zeros(m * n, dtype=dtype)
            w = dist.all_gather_into_tensor(out, data(dtype, n, RANK, salt), group=g,
                                            async_op=is_async)
            want = gathered(dtype, n, members, salt)
            check = lambda out=out, want=want, what=what: expect(out, want, what)
        elif kind == "reduce_scatter":
            op = op_scatter
            whole = torch.cat([data(dtype, n, RANK, salt + 7 * j, op) for j in range(m)])
            out = torch.zeros(n, dtype=dtype)
            w = dist.reduce_scatter_tensor(out, whole, op=op, group=g, async_op=is_async)
            want = reduced(dtype, n, op, members, salt + 7 * me)
            check = lambda out=out, want=want, what=what, op=op: expect(out, want, what, op)
        elif kind == "all_to_all":
            # block j of my input goes to member j: the data of (me, j)'s salt
            src = torch.cat([data(dtype, n, RANK, salt + 11 * j) for j in range(m)])
            out = torch.zeros(m * n, dtype=dtype)
            w = dist.all_to_all_single(out, src, group=g, async_op=is_async)
            want = torch.cat([data(dtype, n, r, salt + 11 * me) for r in members])
            check = lambda out=out, want=want, what=what: expect(out, want, what)
        else:
            w = dist.barrier(group=g, async_op=is_async)
            check = lambda: True
        if is_async:
            pending.append((w, check))
        else:
            check()
        if len(pending) > 3 or flush:
            settle()
    settle()


def test_stream_mode():
    """picoll_torch.cuda_stream "auto": the caller's stream where ranks of the node share a GPU,
    else the group's (decided in Python, checked here with the GPU count faked); "group" and
    "caller" kept as set."""
    C.group("cuda_stream auto")
    if not PICOLL:
        return C.skip("cuda_stream", "picoll only")
    import picoll_torch
    saved = (picoll_torch.cuda_stream, torch.cuda.is_available, torch.cuda.device_count,
             os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE"))
    try:
        for mode, gpus, local, want in (("auto", 0, 4, "group"), ("auto", 1, 2, "caller"),
                                        ("auto", 1, 4, "caller"), ("auto", 4, 4, "group"),
                                        ("auto", 2, 3, "caller"), ("auto", 8, 16, "caller"),
                                        ("auto", 2, 1, "group"), ("group", 1, 4, "group"),
                                        ("caller", 4, 4, "caller")):
            torch.cuda.is_available = lambda g=gpus: g > 0
            torch.cuda.device_count = lambda g=gpus: g
            os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(local)
            picoll_torch.cuda_stream = mode
            got = picoll_torch._stream_mode()
            C.check(got == want, f"{mode!r}, {gpus} GPUs, {local} local ranks: {got!r}, not "
                    f"{want!r}")
        picoll_torch.cuda_stream = "mine"
        try:
            picoll_torch._stream_mode()
            C.check(False, "cuda_stream 'mine' accepted")
        except ValueError as e:
            C.check("cuda_stream" in str(e), f"cuda_stream 'mine' refused saying {e}")
    finally:
        picoll_torch.cuda_stream, torch.cuda.is_available, torch.cuda.device_count = saved[:3]
        if saved[3] is None:
            os.environ.pop("OMPI_COMM_WORLD_LOCAL_SIZE", None)
        else:
            os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] = saved[3]


def test_allocator():
    """picoll_torch.allocator(): PyTorch's pluggable allocator over libpicoll's picoll_cuda_alloc
    and picoll_cuda_free (PyTorch resolves both names in the library when it is made; a wrong name
    raises). The allocations themselves are cuda.emu.zc.np2's (C) and, on a GPU, cuda.zc.np2's."""
    C.group("allocator")
    if not PICOLL:
        return C.skip("allocator", "picoll only")
    import picoll_torch
    try:
        a = picoll_torch.allocator()
        C.check(a.allocator() is not None, "picoll_torch.allocator() has no allocator")
    except (AttributeError, RuntimeError) as e:
        C.check(False, f"picoll_torch.allocator() failed: {e}")


for test in (test_all_reduce, test_broadcast_reduce, test_all_gather, test_reduce_scatter,
             test_all_to_all, test_gather_scatter, test_point_to_point,
             test_barrier_coalesced_async, test_groups, test_shuffle, test_errors,
             test_stream_mode, test_allocator):
    if not args.only or test.__name__ in args.only.split(","):
        C.run(test)
C.summary()
C.finish()
