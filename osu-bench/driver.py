#!/usr/bin/env python3
"""picoll osu-bench driver: MPI (plain, or staged for CUDA buffers) against picoll, side by side.

For each number of ranks (--np, default 2 and 4), collective and memory kind, one MPI job runs the
benchmark program with --ab: per message size it times the baseline (picoll bypassed) then picoll,
--rounds times over (default 5: A B A B A B A B A B), so that the machine's noise cancels in the
ratio. Each round's pair gives a ratio (baseline / picoll, the speed-up); the tables show per size
the median latencies and the ratio's min, median and max over rounds, and a line per collective
and np the lowest median and lowest min over sizes. A row whose baseline's or picoll's slowest
round took over twice its fastest is flagged unstable (the unstable column names the side). The
machine's load (/proc/loadavg) is printed before and after the run, with a warning when it was
over half a runnable process per CPU before.
Host buffers run with PICOLL_HOST=auto, picoll's default (--host on: its own path at every size);
CUDA buffers run when a GPU answers. The baseline is plain MPI on the same buffers for host memory and, for CUDA
buffers, staged MPI: a copy to pinned host buffers, plain MPI, a copy back, as an application
does on an MPI that is not CUDA-aware (--baseline). Where the CUDA driver counts its calls (the
test driver's emulated GPU), the driver calls per picoll call on CUDA buffers are shown beside each
size. Real OSU micro-benchmarks found through OSU_DIR or PATH run too, once without and once with
the preload, with their own defaults (MPI_CHAR), and add their rows. OSU's programs reduce MPI_CHAR
unless told otherwise, so allreduce also runs A/B with MPI_CHAR when --type is another type, and a
last table sets the speed-ups side by side: --type, MPI_CHAR, and the real OSU's where present:
the figure an OSU user sees next to picoll's own. On CUDA buffers each round also times NCCL
(--nccl, on by default there: A B C per round, the programs' --nccl) on the same buffers, adding
an NCCL column and picoll's speed-up over NCCL (NCCL / picoll latency, median over rounds); where
NCCL cannot run (no libnccl.so.2, no real GPU) the programs' one skip line is printed instead.

Prints a table per collective and writes osu-bench/results/<date>-<host>/ with results.csv,
results.md and PNG plots (matplotlib, else gnuplot, else none).

--stability N runs the same A/B job N times in a row (separate MPI jobs) and sets each job's
medians side by side, with the spread of picoll's and the baseline's medians across jobs and
whether picoll's stayed within 1.3x and never slower than the baseline's in the same job
(issue 52); it writes stability.csv and stability.md.

Standard library only, plus matplotlib when it is installed. This file is the command line; the
work is done by bench_runner.py (the MPI jobs, their lines read into rows), bench_report.py (the
tables, results.csv and results.md, --stability's tables), bench_plots.py (the PNG plots),
bench_rows.py (the rows' columns and statistics, shared by all three) and bench_load.py (the
machine's load).
"""

import argparse
import os
import re
import sys
import time

from bench_plots import make_plots, replot
from bench_report import Report
from bench_rows import COLLECTIVES, STABILITY_SPREAD, TYPE_SIZES, log
from bench_runner import Runner

QUICK_SIZES, QUICK_FACTOR = "4:16M", 4
# the default's top on CUDA buffers: staged MPI and NCCL at 4 and 16 MiB would take most of a GPU
# machine's time, with nothing new to show on the emulated GPU
QUICK_CUDA_MAX = "1M"
FULL_SIZES, FULL_FACTOR = "1:1M", 2
DEFAULT_NP = "2,4"
# --stability's size unless --sizes says: the (52) 16 MiB
STABILITY_SIZE = "16M"
DEFAULT_ROUNDS = 5


def parse_bytes(text):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError("not a byte count: %r" % text)
    shift = {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    return int(m.group(1)) << shift


def run(runner):
    """The A/B runs (and the real OSU programs'), their tables, results.csv, plots and results.md;
    returns the exit status: 1 where anything failed."""
    a = runner.args
    load, warning = runner.start()
    start = time.time()
    mems = runner.memories()
    runner.run_all(mems)
    elapsed = time.time() - start
    load.finish()

    report = Report(runner)
    report.print_tables()
    report.print_glance()
    report.print_summary()
    report.print_load(load, warning)
    outdir = report.out_dir()
    meta = report.meta(mems, load, warning, elapsed, report.method(mems))
    report.write_csv(os.path.join(outdir, "results.csv"))
    plots = [] if a.no_plots else make_plots(runner.rows, outdir)
    report.write_markdown(os.path.join(outdir, "results.md"), meta, plots)
    report.print_done(outdir, "results.csv, results.md%s" % (", %d plots" % len(plots) if plots else ""),
                      elapsed, load)
    return report.report_failures()


def run_stability(runner):
    """--stability N: N A/B jobs in a row of each collective and np (host buffers, or CUDA with
    --mem cuda), then per size the medians of every job side by side, their spread across jobs,
    and whether picoll's stayed within STABILITY_SPREAD and never slower than the MPI's in the
    same job; returns the exit status."""
    load, warning = runner.start()
    start = time.time()
    mem = runner.stability_mem()
    series = runner.run_stability_jobs(mem)
    elapsed = time.time() - start
    load.finish()

    report = Report(runner)
    results = [report.stability_table(mem, *s) for s in series]
    for res in results:
        log()
        for line in res["lines"]:
            log(line)
    report.print_load(load, warning)
    outdir = report.out_dir()
    report.write_stability(outdir, report.meta([mem], load, warning, elapsed,
                                               report.stability_method()), results)
    report.print_done(outdir, "stability.csv, stability.md", elapsed, load)
    return report.report_failures()


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=".", help="the configured and built picoll build tree (default: .)")
    p.add_argument("--np", default=DEFAULT_NP,
                   help="MPI ranks, one number or a list run one after the other, e.g. 2,4 "
                        "(default %s; more ranks than CPUs run oversubscribed, and say so)" % DEFAULT_NP)
    p.add_argument("--full", action="store_true",
                   help="the whole OSU range: every power of two from 1 byte to 1 MiB "
                        "(default: %s, every other power of two)" % QUICK_SIZES)
    p.add_argument("--sizes", help="MIN:MAX message sizes in bytes (K, M suffixes)")
    p.add_argument("--factor", type=int, help="ratio of successive sizes")
    p.add_argument("--iters", type=int, help="timed iterations per size (default: OSU's, 1000 or 100)")
    p.add_argument("--warmup", type=int, help="warm-up iterations per size (default: OSU's, 200 or 10)")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                   help="A/B rounds per size (default %d: A B A B A B A B A B); the tables show the "
                        "ratio's min, median and max over them" % DEFAULT_ROUNDS)
    p.add_argument("--type", default="mpi_float", choices=sorted(TYPE_SIZES),
                   help="datatype (default mpi_float)")
    p.add_argument("--host", default="auto", choices=("auto", "on"),
                   help="PICOLL_HOST for host buffers: auto (default, picoll's default), its own "
                        "path only where it wins; on, its own path at every size")
    p.add_argument("--colls", default=",".join(COLLECTIVES), help="collectives (default: all)")
    p.add_argument("--mem", default="auto", choices=("auto", "host", "cuda"),
                   help="auto: host, and CUDA when a GPU answers (default)")
    p.add_argument("--baseline", default="auto", choices=("auto", "mpi", "staged"),
                   help="what picoll is compared with: mpi, plain MPI on the same buffers; staged, "
                        "each call copied to host buffers (pinned for CUDA), plain MPI, copied back, "
                        "as an application does on an MPI that is not CUDA-aware; auto (default): "
                        "staged for CUDA buffers, mpi for host buffers")
    p.add_argument("--nccl", nargs="?", const="on", default="auto", choices=("auto", "on", "off"),
                   help="on CUDA buffers, a third column per round: NCCL on the same buffers (the "
                        "programs' --nccl; A B C per round), with picoll/NCCL = NCCL / picoll; "
                        "auto (default) and --nccl: wherever CUDA buffers run, one skip line "
                        "where NCCL or a GPU is missing; off: none")
    p.add_argument("--out", help="results directory (default: osu-bench/results/<date>-<host>/)")
    p.add_argument("--no-plots", action="store_true", help="no PNG plots")
    p.add_argument("--no-osu", action="store_true", help="do not run real OSU binaries")
    p.add_argument("--no-osu-type", action="store_true",
                   help="allreduce with --type only, not also with MPI_CHAR (OSU's default)")
    p.add_argument("--stability", type=int, metavar="N",
                   help="N separate A/B jobs in a row per collective and np (default sizes: %s only), "
                        "then per size each job's medians, their spread across jobs and whether "
                        "picoll's stayed within %gx and never slower than the MPI's in the same job; "
                        "writes stability.csv and stability.md (host buffers; --mem cuda for CUDA)"
                        % (STABILITY_SIZE, STABILITY_SPREAD))
    p.add_argument("--replot", metavar="DIR", help="only redraw the plots of DIR/results.csv")
    return p


def check_args(p, a):
    """Turns a's --sizes, --np and --colls into numbers and lists (min_size, max_size,
    cuda_max_size, large_job, np, colls, factor), or ends with p's usage error."""
    lo, hi = (FULL_SIZES if a.full else QUICK_SIZES).split(":")
    if a.stability and not a.full:
        lo = hi = STABILITY_SIZE
    if a.sizes:
        lo, _, hi = a.sizes.partition(":") if ":" in a.sizes else ("1", "", a.sizes)
    try:
        a.min_size, a.max_size = parse_bytes(lo), parse_bytes(hi)
    except argparse.ArgumentTypeError as e:
        p.error("--sizes: %s" % e)
    if a.factor is None:
        a.factor = FULL_FACTOR if a.full else QUICK_FACTOR
    try:
        a.np = [int(x) for x in a.np.split(",") if x.strip()]
    except ValueError:
        p.error("--np: not a number or a comma-separated list of numbers: %r" % a.np)
    if not a.np:
        p.error("--np: no number of ranks")
    if a.factor < 2 or min(a.np) < 1 or a.rounds < 1 or a.min_size > a.max_size:
        p.error("need --factor >= 2, --np >= 1, --rounds >= 1 and MIN <= MAX")
    if a.stability is not None and a.stability < 1:
        p.error("--stability wants a number of jobs, 1 or more")
    # the default stops lower on CUDA buffers, and times its largest sizes in a second job of
    # fewer calls; --sizes, --full, --iters, --warmup and --stability keep the programs' counts
    default = not (a.sizes or a.full or a.stability)
    a.cuda_max_size = a.max_size
    if default:
        a.cuda_max_size = max(a.min_size, min(a.max_size, parse_bytes(QUICK_CUDA_MAX)))
    a.large_job = default and a.iters is None and a.warmup is None
    if a.max_size < TYPE_SIZES[a.type]:
        p.error("--sizes: MAX is smaller than one %s" % a.type)
    a.colls = [c.strip() for c in a.colls.split(",") if c.strip()]
    for c in a.colls:
        if c not in COLLECTIVES:
            p.error("--colls: unknown collective %r (%s)" % (c, ", ".join(COLLECTIVES)))


def main(argv=None):
    p = parser()
    a = p.parse_args(argv)
    if a.replot:
        return replot(a.replot)
    check_args(p, a)
    runner = Runner(a)
    return run_stability(runner) if a.stability else run(runner)


if __name__ == "__main__":
    sys.exit(main())
