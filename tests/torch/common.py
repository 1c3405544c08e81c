"""Shared part of picoll's torch tests: options, process group set-up, checks and the verdict.

Every test script runs under an MPI launcher (mpirun, or MPICH's hydra mpiexec), one process a
rank, and takes --backend picoll|gloo (gloo: PyTorch's own backend, to validate the tests
themselves) and --init env|tcp. Ranks and size come from the launcher's environment.

check(cond, what) records one result; a failure prints "FAIL rank R: what" at once. finish()
prints each rank's status line (and writes it to $TORCH_TEST_STATUS_DIR/<script>.rank<R> when
that is set), sums the failures of every rank with an int64 all_reduce whose other entries (the
number of ranks, the sum of the ranks) prove the sum itself right, prints "passed" on rank 0 when
all passed, and exits nonzero on every rank otherwise. A watchdog (--timeout) dumps every thread's
stack and exits when a rank hangs.
"""

import argparse
import datetime
import faulthandler
import gc
import os
import sys
import time
import traceback
import zlib

import torch
import torch.distributed as dist

SCRIPT = os.path.splitext(os.path.basename(sys.argv[0]))[0]
MAX_PRINTED_FAILURES = 20


def launcher_rank_size():
    """This process's rank and the number of ranks, from the MPI launcher's environment."""
    for rank_var, size_var in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("PMI_RANK", "PMI_SIZE"),
                               ("PMIX_RANK", "PMIX_SIZE"),
                               ("RANK", "WORLD_SIZE")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def test_port():
    """The TCP port of the rendezvous: $TORCH_TEST_PORT, else one derived from the script name
    (so that two test scripts running at the same time do not collide)."""
    if os.environ.get("TORCH_TEST_PORT"):
        return int(os.environ["TORCH_TEST_PORT"])
    return 29500 + zlib.crc32(SCRIPT.encode()) % 2000


def check_library():
    """With $TORCH_TEST_EXPECT_LIB (a libpicoll.so), exit unless that is the libpicoll this
    process loaded (picoll_torch built against another build would test the wrong library)."""
    expected = os.environ.get("TORCH_TEST_EXPECT_LIB")
    if not expected:
        return
    with open("/proc/self/maps") as maps:
        loaded = {os.path.realpath(line.split()[-1]) for line in maps
                  if "/libpicoll" in line and ".so" in line}
    if os.path.realpath(expected) not in loaded:
        sys.exit(f"picoll_torch loaded {sorted(loaded) or 'no libpicoll'}, not {expected} "
                 "(TORCH_TEST_EXPECT_LIB)")


def parse_args(description, add_options=None):
    """The common options, plus those add_options(parser) adds."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--backend", choices=("picoll", "gloo"), default="picoll",
                        help="process group backend (gloo: PyTorch's own, to check the tests)")
    parser.add_argument("--init", choices=("env", "tcp"), default="env",
                        help="env: the backend's default set-up; tcp: init_method=tcp://, "
                             "rank and world_size given")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds before a hung rank dumps its stacks and exits")
    if add_options:
        add_options(parser)
    return parser.parse_args()


def init(args):
    """Initialise the default process group as the options say; returns (rank, size)."""
    faulthandler.dump_traceback_later(args.timeout, exit=True)
    rank, size = launcher_rank_size()
    kwargs = {}
    if args.init == "tcp":
        kwargs = dict(init_method=f"tcp://127.0.0.1:{test_port()}", rank=rank, world_size=size)
    if args.backend == "picoll":
        import picoll_torch  # noqa: F401  (registers the "picoll" backend)
        # the stream CUDA calls run on (docs/torch.md): TORCH_TEST_CUDA_STREAM=group or caller
        # chooses (default auto)
        picoll_torch.cuda_stream = os.environ.get("TORCH_TEST_CUDA_STREAM", "auto")
        check_library()
        dist.init_process_group("picoll", **kwargs)
    else:
        if args.init == "env":
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(test_port()),
                              RANK=str(rank), WORLD_SIZE=str(size))
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout),
                                **kwargs)
    if (dist.get_rank(), dist.get_world_size()) != (rank, size):
        sys.exit(f"rank {rank}: process group says rank {dist.get_rank()} of "
                 f"{dist.get_world_size()}, the launcher {rank} of {size}")
    return rank, size


class Checker:
    """Counts checks, failures and skips per group of tests (set with group())."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self.current = "main"
        self.counts = {}  # group -> [checks, failed, skipped]
        self.skips_printed = set()
        self.seconds, self.started = {}, time.perf_counter()  # time spent per group

    def group(self, name):
        now = time.perf_counter()
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.started
        self.current, self.started = name, now
        self.counts.setdefault(name, [0, 0, 0])

    def _count(self, index):
        self.counts.setdefault(self.current, [0, 0, 0])[index] += 1

    def failures(self):
        return sum(c[1] for c in self.counts.values())

    def check(self, cond, what):
        """Record one result; what (a string, or a function giving one) names the case and, on a
        failure, what was got against what was expected."""
        self._count(0)
        if cond:
            return True
        self._count(1)
        if self.failures() <= MAX_PRINTED_FAILURES:
            text = what() if callable(what) else what
            print(f"FAIL rank {self.rank}: [{self.current}] {text}", flush=True)
        return False

    def equal(self, got, expected, what, rtol=0.0):
        """check() that tensor got equals expected (same number of elements), or is within rtol
        of it; a failure names the first difference."""
        exp = expected.reshape(got.shape).to(got.device)
        close = torch.isclose(got, exp, rtol=rtol, atol=0) if rtol else got == exp
        if bool(close.all()):
            return self.check(True, what)
        i = int((~close).flatten().nonzero()[0])
        return self.check(False, f"{what}: first of {int((~close).sum())} differences at [{i}] "
                                 f"of {got.numel()}: got {got.flatten()[i].item()}, "
                                 f"expected {exp.flatten()[i].item()}")

    def skip(self, what, reason):
        """A case not run, printed (rank 0, once per what and reason) with its reason, counted:
        never silently."""
        self._count(2)
        if self.rank == 0 and (self.current, what, reason) not in self.skips_printed:
            self.skips_printed.add((self.current, what, reason))
            print(f"SKIP [{self.current}] {what}: {reason}", flush=True)

    def summary(self):
        """Rank 0 prints its counts and seconds per group."""
        self.group("end")
        if self.rank != 0:
            return
        print(f"{'group (rank 0)':<28} {'checks':>7} {'failed':>7} {'skipped':>8} {'seconds':>8}")
        for name, (checks, failed, skipped) in self.counts.items():
            if name != "end":
                print(f"{name:<28} {checks:>7} {failed:>7} {skipped:>8} "
                      f"{self.seconds.get(name, 0):>8.2f}")

    def run(self, test):
        """test(); an exception it raises counts as a failure (with its traceback) and the next
        test runs (when every rank raised alike, as for a refused operation)."""
        try:
            test()
        except Exception:  # noqa: BLE001
            self.check(False, f"{test.__name__} raised:\n{traceback.format_exc()}")

    def finish(self):
        """The verdict over every rank; exits the process."""
        checks = sum(c[0] for c in self.counts.values())
        skipped = sum(c[2] for c in self.counts.values())
        failed = self.failures()
        status = (f"rank {self.rank}/{self.size}: {checks} checks, {failed} failed, "
                  f"{skipped} skipped")
        print(status, flush=True)
        status_dir = os.environ.get("TORCH_TEST_STATUS_DIR")
        if status_dir:
            os.makedirs(status_dir, exist_ok=True)
            with open(os.path.join(status_dir, f"{SCRIPT}.rank{self.rank}"), "w") as f:
                f.write(status + "\n")
        # [failures, ranks, sum of ranks]: the last two prove the reduction itself right
        totals = torch.tensor([failed, 1, self.rank], dtype=torch.int64)
        dist.all_reduce(totals)
        total_failed, ranks, rank_sum = totals.tolist()
        trusted = ranks == self.size and rank_sum == self.size * (self.size - 1) // 2
        if not trusted:
            print(f"rank {self.rank}: the final all_reduce gave {totals.tolist()}, expected "
                  f"[?, {self.size}, {self.size * (self.size - 1) // 2}]: verdict untrusted",
                  flush=True)
        gc.collect()  # objects in reference cycles (DDP's) still holding the group go first
        dist.destroy_process_group()
        faulthandler.cancel_dump_traceback_later()
        if trusted and failed == 0 and total_failed == 0:
            if self.rank == 0:
                print(f"{SCRIPT}: passed ({self.size} ranks)", flush=True)
            sys.exit(0)
        if self.rank == 0 and trusted:
            print(f"{SCRIPT}: FAILED, {total_failed} failures over {self.size} ranks", flush=True)
        sys.exit(1)
