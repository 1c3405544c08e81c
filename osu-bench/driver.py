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

Standard library only, plus matplotlib when it is installed.
"""

import argparse
import csv
import datetime
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTIVES = ("allreduce", "allgather", "alltoall")
# what OSU's programs reduce unless -T says otherwise; the allgather and alltoall ones move bytes,
# whose type changes nothing
OSU_DEFAULT_TYPE = "mpi_char"
TYPE_SIZES = {"mpi_char": 1, "mpi_int": 4, "mpi_float": 4, "mpi_double": 8}
QUICK_SIZES, QUICK_FACTOR = "4:16M", 4
# the default's top on CUDA buffers: staged MPI and NCCL at 4 and 16 MiB would take most of a GPU
# machine's time, with nothing new to show on the emulated GPU
QUICK_CUDA_MAX = "1M"
# the default run times the sizes above LARGE_SIZE (4 and 16 MiB) in a job of their own, with
# LARGE_ITERS timed calls after LARGE_WARMUP untimed ones a round: with OSU's 100 and 10 they took
# 277 of the benchmarks' 316 s on 2 cores (2026-11-28), the whole main job being due in 4 minutes
LARGE_SIZE = 1 << 20
LARGE_ITERS, LARGE_WARMUP = 10, 2
FULL_SIZES, FULL_FACTOR = "1:1M", 2
# the A column of the A/B rows (the programs' --baseline), as tables, CSV and plots name it
BASELINE_NAMES = {"mpi": "plain MPI", "staged": "staged MPI"}
# under a row of device buffers, where the CUDA driver counts its calls (the emulated GPU): the
# driver calls per picoll call, then per entry point, "(cuLaunchKernel 1, ...)"
DRIVER_CALLS = re.compile(r"# driver calls per call: (\d+(?:\.\d+)?)\s*(.*)$")
# under each A/B row (after those two lines): every round's baseline/picoll latencies, in order,
# and with the NCCL column (--nccl) baseline/picoll/NCCL
ROUNDS = re.compile(r"# rounds (?:A/B|A/B/C) \(us\):((?: [0-9.]+(?:/[0-9.]+){1,2})+)$")
DEFAULT_NP = "2,4"
# a side whose slowest round took over this many times its fastest marks the row unstable
UNSTABLE_SPREAD = 2.0
# --stability: picoll's median may move this much across jobs (the largest over the smallest)
STABILITY_SPREAD = 1.3
# --stability's size unless --sizes says: the (52) 16 MiB
STABILITY_SIZE = "16M"
DEFAULT_ROUNDS = 5
# over this share of the CPUs busy just before the run (the 2-second sample of /proc/stat), its
# figures are not to be trusted; the 1-minute load average decides only where /proc/stat is missing,
# since it still counts a build that ended a minute ago (the main job's own)
BUSY_WARN = 0.5
LOAD_WARN_PER_CPU = 0.5


def parse_bytes(text):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", text)
    if not m:
        raise argparse.ArgumentTypeError("not a byte count: %r" % text)
    shift = {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    return int(m.group(1)) << shift


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def size_list(lo, hi, factor, esize):
    """The message sizes the benchmark programs run, as they compute them."""
    count = max(1, (lo + esize - 1) // esize)
    out = []
    while count * esize <= hi:
        out.append(count * esize)
        count *= factor
    return out


def log(msg=""):
    print(msg, flush=True)


def ncpus():
    return os.cpu_count() or 1


def loadavg():
    """The 1, 5 and 15-minute load averages, as /proc/loadavg has them (None where it is missing)."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def cpu_busy_ticks():
    """Clock ticks all CPUs spent busy (not idle, not waiting for I/O) since boot, or None."""
    try:
        with open("/proc/stat") as f:
            t = [int(x) for x in f.readline().split()[1:9]]
        return sum(t) - t[3] - t[4]
    except (OSError, ValueError, IndexError):
        return None


def own_cpu_seconds():
    """CPU seconds of this process and of its finished children (the MPI jobs, their ranks)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Load:
    """How loaded the machine was: the load averages before and after the run, the share of the
    CPUs busy just before it (a 2-second sample) and, during it, busy with work other than the
    benchmark's own (all busy time less the CPU time of this process and its MPI jobs)."""

    SAMPLE_S = 2.0

    def __init__(self):
        self.cpus = ncpus()
        self.before = loadavg()
        b0, t0 = cpu_busy_ticks(), time.time()
        time.sleep(self.SAMPLE_S)
        b1, t1 = cpu_busy_ticks(), time.time()
        tck = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.tck = tck
        self.busy_now = None if b0 is None or b1 is None else \
            max(0.0, (b1 - b0) / tck / ((t1 - t0) * self.cpus))
        self.start = (cpu_busy_ticks(), own_cpu_seconds(), time.time())
        self.after = None
        self.others = None
        self.own = 0.0

    def finish(self):
        self.after = loadavg()
        busy0, own0, t0 = self.start
        busy1, own1, t1 = cpu_busy_ticks(), own_cpu_seconds(), time.time()
        self.own = own1 - own0
        if busy0 is not None and busy1 is not None and t1 > t0:
            other = (busy1 - busy0) / self.tck - (own1 - own0)
            self.others = min(1.0, max(0.0, other / ((t1 - t0) * self.cpus)))

    @staticmethod
    def fmt(avg):
        return " ".join("%.2f" % x for x in avg) if avg else "unknown (no /proc/loadavg)"

    def per_cpu(self):
        return self.before[0] / self.cpus if self.before else 0.0

    def before_line(self):
        line = "load before: %s on %d CPUs (1, 5, 15-minute averages)" % (self.fmt(self.before), self.cpus)
        if self.busy_now is not None:
            line += "; CPUs %.0f%% busy over the %.0f s before the run" % (100 * self.busy_now, self.SAMPLE_S)
        return line

    def warning(self):
        """A line when other work kept the CPUs busy just before the run, else None. The CPUs' busy
        time over the sample decides; the load average only where /proc/stat cannot be read."""
        if self.busy_now is not None:
            if self.busy_now <= BUSY_WARN:
                return None
            return ("WARNING: other work kept the CPUs %.0f%% busy over the %.0f s before the run "
                    "(over %.0f%%): the latencies and ratios below are unreliable"
                    % (100 * self.busy_now, self.SAMPLE_S, 100 * BUSY_WARN))
        if self.per_cpu() <= LOAD_WARN_PER_CPU:
            return None
        return ("WARNING: the load before the run was %.2f per CPU (over %.1f): other work shares "
                "the CPUs, so the latencies and ratios below are unreliable"
                % (self.per_cpu(), LOAD_WARN_PER_CPU))

    def after_line(self):
        line = "load after: %s on %d CPUs" % (self.fmt(self.after), self.cpus)
        if self.others is not None:
            line += ("; during the run other processes kept the CPUs %.0f%% busy (all busy time "
                     "less the benchmark's own)" % (100 * self.others))
        return line


def oversubscribed(np):
    """"np N on C CPUs: oversubscribed" where the ranks outnumber the CPUs, else ""."""
    return "np %d on %d CPUs: oversubscribed" % (np, ncpus()) if np > ncpus() else ""


def ratio_stats(pairs):
    """(min, median, max) over rounds of baseline / picoll, from [(baseline_us, picoll_us)]."""
    r = [a / b for a, b in pairs if b > 0]
    return (min(r), statistics.median(r), max(r)) if r else (0.0, 0.0, 0.0)


class Job:
    """One MPI job whose stdout is read line by line as it runs."""

    def __init__(self, cmd, env):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self.err = []
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def lines(self):
        for line in self.proc.stdout:
            yield line.rstrip("\n")

    def wait(self):
        rc = self.proc.wait()
        self.thread.join()
        return rc

    def first_error(self):
        """The job's own message, without the launcher's boxes of dashes."""
        for line in self.err:
            s = line.strip()
            if s and not s.startswith("---") and "mpiexec" not in s and "mpirun" not in s \
                    and not re.match(r"\[picoll \d+\] warn: ", s) \
                    and "Primary job" not in s and "non-zero" not in s and "Per user-direction" not in s:
                return s
        return "exit status %s" % self.proc.returncode


class Bench:
    def __init__(self, args):
        self.args = args
        b = os.path.abspath(args.build_dir)
        self.build = b
        self.mpirun = os.path.join(b, "tests", "mpirun.sh")
        self.libpicoll = os.path.join(b, ".libs", "libpicoll.so")
        self.esize = TYPE_SIZES[args.type]
        self.rows = []      # dicts, see CSV_FIELDS
        self.notes = []     # lines for the Markdown report
        self.failures = []
        self.nccl_skipped = []  # "label: why" of each job whose NCCL column was skipped

    # ------------------------------------------------------------------ environment
    def check_build(self):
        missing = [p for p in [self.mpirun, self.libpicoll] + [self.program(c) for c in self.args.colls]
                   if not os.path.exists(p)]
        if missing:
            sys.exit("driver: missing %s: build first (make all in %s), or pass --build-dir"
                     % (", ".join(missing), self.build))

    def program(self, coll):
        return os.path.join(self.build, "osu-bench", "osu_" + coll)

    def env(self, picoll_host=True):
        env = dict(os.environ)
        # tests/mpirun.sh turns Open MPI's AVX reductions off for the tests (wrong 8-bit sums on
        # overflow, whose results tests compare); a benchmark compares with the MPI users run
        env.setdefault("MPIRUN_KEEP_AVX", "1")
        # run.sh's own variable: picoll would warn about an unknown PICOLL_ variable in every rank
        env.pop("PICOLL_BENCH_BUILD", None)
        if picoll_host:
            env["PICOLL_HOST"] = self.args.host
        return env

    def launch(self, np, prog, args, preload, picoll_host=True):
        cmd = [self.mpirun, str(np)] + (["--preload"] if preload else []) + [prog] + args
        return Job(cmd, self.env(picoll_host))

    def baseline(self, mem):
        """The A column for buffers of kind mem: staged for CUDA unless --baseline says."""
        if self.args.baseline != "auto":
            return self.args.baseline
        return "staged" if mem == "cuda" else "mpi"

    def cuda_usable(self):
        """(True, "") when CUDA buffers can be compared: a GPU answers and, with the plain MPI
        baseline, plain MPI (picoll bypassed) takes device buffers, i.e. the MPI is CUDA-aware.
        The staged baseline needs no CUDA-aware MPI: only a GPU. Else (False, why)."""
        np = min(2, self.args.np[0])
        one = ["-d", "cuda", "-c", "-m", "%d:%d" % (self.esize, self.esize), "-i", "1", "-x", "0",
               "-T", self.args.type]
        staged = self.baseline("cuda") == "staged"
        if staged:
            job = self.launch(np, self.program(self.args.colls[0]),
                              one + ["--ab=1", "--baseline", "staged"], preload=True)
        else:
            job = self.launch(np, self.program(self.args.colls[0]), one, preload=False,
                              picoll_host=False)
        for _ in job.lines():
            pass
        if job.wait() == 0:
            return True, ""
        why = job.first_error()
        if "-d cuda:" in why:
            return False, why
        if staged:
            return True, ""  # a GPU answered: the A/B job will report what failed
        return False, ("plain MPI failed on CUDA buffers, so there is nothing to compare picoll "
                       "with (is this MPI CUDA-aware? --baseline staged needs no CUDA-aware MPI): "
                       + why)

    def max_size(self, mem):
        """The largest message size of buffers of kind mem (the default stops lower on CUDA)."""
        return self.args.cuda_max_size if mem == "cuda" else self.args.max_size

    def ab_parts(self, sizes):
        """[(sizes, options)]: the sizes each A/B job times and its -m, -i and -x. The default run
        times the sizes above LARGE_SIZE in a second job, of LARGE_ITERS timed and LARGE_WARMUP
        warm-up calls (OSU's 100 and 10 would make 4 and 16 MiB most of the main job's time)."""
        a = self.args

        def options(part, iters, warmup):
            out = ["-m", "%d:%d" % (part[0], part[-1])]
            if iters:
                out += ["-i", str(iters)]
            if warmup is not None:
                out += ["-x", str(warmup)]
            return out

        small = [n for n in sizes if not a.large_job or n <= LARGE_SIZE]
        large = sizes[len(small):]
        parts = [(small, options(small, a.iters, a.warmup))] if small else []
        if large:
            parts.append((large, options(large, LARGE_ITERS, LARGE_WARMUP)))
        return parts

    # ------------------------------------------------------------------ the A/B runs
    def run_ab(self, coll, mem, np, dtype=None, tag=""):
        """One A/B job at np ranks; dtype: another datatype than --type's (its rows are labelled
        with it); tag: words after the label in its lines ("job 3 of 10"). Returns the rows it
        added and whether the job succeeded."""
        a = self.args
        first = len(self.rows)
        sizes = size_list(a.min_size, self.max_size(mem), a.factor, TYPE_SIZES[dtype or a.type])
        base = self.baseline(mem)
        args = ["--ab=%d" % a.rounds, "-c", "--factor", str(a.factor), "-d", mem,
                "--baseline", base, "-T", dtype or a.type]
        if mem == "cuda" and a.nccl != "off":
            args.append("--nccl")
        parts = self.ab_parts(sizes)
        label = "%s %s%s np %d%s" % (coll, mem, " " + dtype.upper() if dtype else "", np,
                                     ", " + tag if tag else "")
        log("== %s: %d sizes, %s..%s bytes, %d rounds of %s / picoll%s%s"
            % (label, len(sizes), human(sizes[0]), human(sizes[-1]), a.rounds,
               BASELINE_NAMES[base], " (%s)" % oversubscribed(np) if oversubscribed(np) else "",
               "; %s..%s in a second job, %d calls timed after %d" % (
                   human(parts[1][0][0]), human(parts[1][0][-1]), LARGE_ITERS, LARGE_WARMUP)
               if len(parts) > 1 else ""))
        t0 = time.time()
        done = 0
        pending = []  # the last row, not yet logged: its progress line waits for its rounds
        ok = True

        def flush():
            if not pending:
                return
            r = pending.pop()
            vs = ("   NCCL %10s us   picoll/NCCL %s" % (r["nccl_us"], fmt_ratio(r["ratio_nccl_median"]))
                  if r.get("nccl_us") else "")
            log("   [%s] %2d/%d %8s B   %s %10s us   picoll %10s us   %s (min %s, max %s)%s %s  (%.0fs)%s"
                % (label, done, len(sizes), human(r["size_bytes"]), BASELINE_NAMES[base], r["mpi_us"],
                   r["picoll_us"], fmt_ratio(r["ratio_median"]), fmt_ratio(r["ratio_min"]),
                   fmt_ratio(r["ratio_max"]), vs, r["validation"], time.time() - t0,
                   "   " + unstable_note(r) if r["unstable"] else ""))
            if r["driver_calls"]:
                log("   [%s] %8s B   driver calls per picoll call: %s %s"
                    % (label, human(r["size_bytes"]), r["driver_calls"], r["driver_calls_detail"]))

        for _, options in parts:
            job = self.launch(np, self.program(coll), args + options, preload=True)
            row = None  # the job's last row: the driver-call count, path and rounds lines follow it
            nccl = False  # the program said NCCL runs: its rows have the NCCL columns
            for line in job.lines():
                calls = DRIVER_CALLS.match(line)
                if calls and row is not None:
                    row["driver_calls"], row["driver_calls_detail"] = calls.group(1), calls.group(2)
                    continue
                if line.startswith("# picoll path: ") and row is not None:
                    row["picoll_path"] = line[len("# picoll path: "):].strip()
                    continue
                rounds = ROUNDS.match(line)
                if rounds and row is not None:
                    pairs = [tuple(float(x) for x in p.split("/")) for p in rounds.group(1).split()]
                    if len(pairs[0]) != (3 if row.get("nccl_us") else 2):
                        log("   unexpected line: " + line)
                        continue
                    set_rounds(row, pairs)
                    flush()
                    continue
                if line.startswith("# driver calls: "):
                    self.notes.append("%s: %s" % (label, line[2:]))
                    continue
                if line.startswith("# nccl: "):
                    # "# nccl: NCCL x.y.z (...)": the C column runs; "# nccl: skipped: why"
                    nccl = not line.startswith("# nccl: skipped: ")
                    log("   " + line[2:])
                    self.notes.append("%s: %s" % (label, line[2:]))
                    if not nccl:
                        self.nccl_skipped.append("%s: %s" % (label, line[len("# nccl: skipped: "):]))
                    continue
                if line.startswith("# picoll on ") or line.startswith("# staged MPI: ") \
                        or re.match(r"# picoll \S+, active", line):
                    log("   " + line[2:])
                    if not re.match(r"# picoll \S+, active", line):
                        self.notes.append("%s: %s" % (label, line[2:]))
                    continue
                if not line or line.startswith("#"):
                    continue
                f = line.split()
                try:
                    size, mpi, pic = int(f[0]), float(f[1]), float(f[2])
                except (ValueError, IndexError):
                    log("   unexpected line: " + line)
                    continue
                # size, A, B, speed-up, A and B bus bandwidths[, NCCL, picoll/NCCL, its bandwidth][, Pass]
                try:
                    nccl_us = float(f[6]) if nccl else None
                except (ValueError, IndexError):
                    log("   unexpected line: " + line)
                    continue
                valid = f[9 if nccl else 6] if len(f) > (9 if nccl else 6) else ""
                flush()
                done += 1
                row = self.add_row(coll, mem, np, "picoll-osu-bench", base, size, mpi, pic, valid,
                                   datatype=dtype.upper() if dtype else None, nccl=nccl_us)
                pending.append(row)
            flush()
            rc = job.wait()
            if rc != 0:
                msg = "%s: the A/B job failed (%s)" % (label, job.first_error())
                for e in job.err:
                    if "validation failed" in e:
                        log("   " + e)
                self.failures.append(msg)
                log("   FAILED: " + msg)
                ok = False
        return self.rows[first:], ok

    def add_row(self, coll, mem, np, source, baseline, size, mpi, pic, valid, datatype=None,
                nccl=None):
        """mpi: the A column, plain or staged MPI as baseline says (mpi, staged); nccl: the C column
        (NCCL) where it ran, else None. Returns the row, whose driver-call count, path and rounds
        the lines after it in the program's output fill in; until its rounds come, its ratios are
        those of mpi, pic and nccl (one round)."""
        row = {
            "collective": coll, "memory": mem, "source": source, "np": np,
            "datatype": datatype or self.args.type.upper(), "size_bytes": size,
            "mpi_us": "%.2f" % mpi, "picoll_us": "%.2f" % pic, "speedup": "", "validation": valid,
            "baseline": baseline, "driver_calls": "", "driver_calls_detail": "", "picoll_path": "",
            "nccl_us": "",
        }
        if nccl is not None:
            row["nccl_us"] = "%.2f" % nccl
        set_rounds(row, [(mpi, pic, nccl) if nccl is not None else (mpi, pic)])
        self.rows.append(row)
        return row

    # ------------------------------------------------------------------ real OSU binaries
    def find_osu(self, coll):
        name = "osu_" + coll
        base = os.environ.get("OSU_DIR")
        if base:
            for root, dirs, files in os.walk(base):
                dirs.sort()
                if name in files and os.access(os.path.join(root, name), os.X_OK):
                    return os.path.join(root, name)
                if root[len(base):].count(os.sep) >= 6:
                    dirs[:] = []
            return None
        return shutil.which(name)

    def run_osu_once(self, prog, mem, np, preload):
        """Runs a real OSU binary; returns {size: (avg_us, validation)} and the flags it took."""
        a = self.args
        base = ["-m", "%d:%d" % (a.min_size, self.max_size(mem))]
        if a.iters:
            base += ["-i", str(a.iters)]
        if a.warmup is not None:
            base += ["-x", str(a.warmup)]
        if mem == "cuda":
            base += ["-d", "cuda"]
        # with OSU's own datatype (MPI_CHAR), as its users run it; older versions reject -c
        for extra in (["-c"], []):
            job = self.launch(np, prog, base + extra, preload=preload)
            out = {}
            for line in job.lines():
                if not line or line.startswith("#"):
                    continue
                f = line.split()
                try:
                    out[int(f[0])] = (float(f[1]), f[-1] if f[-1] in ("Pass", "Fail") else "")
                except (ValueError, IndexError):
                    pass
            rc = job.wait()
            if rc == 0 and out:
                return out, extra
            if any(v == "Fail" for _, v in out.values()):
                return out, extra
            last_error = job.first_error()
        raise RuntimeError(last_error)

    def run_osu(self, coll, mem, np):
        prog = self.find_osu(coll)
        if prog is None:
            return
        if mem == "cuda" and self.baseline(mem) == "staged":
            # OSU's own run without picoll hands device buffers to MPI: no staged baseline
            self.notes.append("%s %s: OSU micro-benchmarks not run (they need a CUDA-aware MPI "
                              "for the plain side; --baseline mpi runs them)" % (coll, mem))
            return
        label = "%s %s np %d (OSU %s)" % (coll, mem, np, prog)
        log("== %s: without, then with the preload" % label)
        try:
            plain, flags = self.run_osu_once(prog, mem, np, preload=False)
            pic, _ = self.run_osu_once(prog, mem, np, preload=True)
        except RuntimeError as e:
            msg = "%s: failed (%s)" % (label, e)
            self.failures.append(msg)
            log("   FAILED: " + msg)
            return
        self.notes.append("%s: flags %s" % (label, " ".join(flags) or "(none)"))
        for size in sorted(set(plain) & set(pic)):
            v = [plain[size][1], pic[size][1]]
            valid = "Fail" if "Fail" in v else "Pass" if v == ["Pass", "Pass"] else ""
            if valid == "Fail":
                self.failures.append("%s: validation failed at %d bytes" % (label, size))
            self.add_row(coll, mem, np, "osu", "mpi", size, plain[size][0], pic[size][0], valid,
                         datatype="OSU default")
            log("   [%s %s np %d OSU] %8s B   MPI %10.2f us   picoll %10.2f us   x%.2f %s"
                % (coll, mem, np, human(size), plain[size][0], pic[size][0],
                   plain[size][0] / pic[size][0] if pic[size][0] else 0.0, valid))

    # ------------------------------------------------------------------ reports
    def groups(self):
        return groups(self.rows)

    @staticmethod
    def title(coll, mem, source, baseline):
        what = "picoll osu-bench A/B" if source != "osu" else "OSU micro-benchmarks, separate runs"
        return "%s, %s buffers (%s, %s vs picoll)" % (coll, mem, what, BASELINE_NAMES[baseline])

    @staticmethod
    def np_title(np):
        over = oversubscribed(np)
        return "np %d%s" % (np, " (%s)" % over[over.index(":") + 2:] if over else "")

    def print_tables(self):
        for (coll, mem, source, dtype, np), rows in self.groups():
            base = rows[0]["baseline"]
            log()
            log(self.title(coll, mem, source, base) + ", %s, %s, %s rounds"
                % (self.np_title(np), dtype, rows_rounds(rows)))
            counted = any(r.get("driver_calls") for r in rows)
            paths = any(r.get("picoll_path") for r in rows)
            nccl = any(r.get("nccl_us") for r in rows)
            log(("%10s %16s %12s   %-24s%s %11s  %-11s%s%s" % (
                "size (B)", BASELINE_NAMES[base] + " (us)", "picoll (us)",
                "speed-up: min median max",
                " %12s %12s" % ("NCCL (us)", "picoll/NCCL") if nccl else "", "validation",
                "unstable", "  %-14s" % "picoll path" if paths else "",
                "  driver calls per picoll call" if counted else "")).rstrip())
            for r in rows:
                extra = "  %-14s" % (r.get("picoll_path") or "-") if paths else ""
                if counted:
                    extra += "  %s %s" % (r["driver_calls"] or "-", r["driver_calls_detail"])
                vs = " %12s %12s" % (r.get("nccl_us") or "-", fmt_ratio(r.get("ratio_nccl_median"))) \
                    if nccl else ""
                log(("%10d %16s %12s   %9s %7s %6s%s %11s  %-11s%s" % (
                    r["size_bytes"], r["mpi_us"], r["picoll_us"], fmt_ratio(r["ratio_min"]),
                    fmt_ratio(r["ratio_median"]), fmt_ratio(r["ratio_max"]), vs,
                    r["validation"] or "-", r.get("unstable") or "-", extra)).rstrip())

    def summary(self):
        """Per collective, memory, source, datatype and np: one line, the lowest median ratio over
        sizes and where, the lowest min and where, and how many sizes had a median below 1."""
        out = []
        for (coll, mem, source, dtype, np), rows in self.groups():
            rs = [r for r in rows if r["ratio_median"]]
            if not rs:
                continue
            med = min(rs, key=lambda r: float(r["ratio_median"]))
            low = min(rs, key=lambda r: float(r["ratio_min"]))
            below = sum(1 for r in rs if float(r["ratio_median"]) < 1.0)
            vs = ""
            rn = [r for r in rows if r.get("ratio_nccl_median")]
            if rn:
                nmed = min(rn, key=lambda r: float(r["ratio_nccl_median"]))
                vs = ("; picoll/NCCL: lowest median %s at %s B, median below 1x at %d of %d sizes"
                      % (fmt_ratio(nmed["ratio_nccl_median"]), human(nmed["size_bytes"]),
                         sum(1 for r in rn if float(r["ratio_nccl_median"]) < 1.0), len(rn)))
            shaky = [r for r in rows if r.get("unstable")]
            if shaky:
                vs += ("; unstable (a side's slowest round over %gx its fastest) at %s"
                       % (UNSTABLE_SPREAD, ", ".join("%s B (%s)" % (human(r["size_bytes"]), r["unstable"])
                                                     for r in shaky)))
            out.append("%s %s%s %s np %d: lowest median %s at %s B, lowest min %s at %s B; "
                       "median below 1x at %d of %d sizes%s%s"
                       % (coll, mem, " OSU" if source == "osu" else "", dtype, np,
                          fmt_ratio(med["ratio_median"]), human(med["size_bytes"]),
                          fmt_ratio(low["ratio_min"]), human(low["size_bytes"]), below, len(rs), vs,
                          " (%s)" % oversubscribed(np) if oversubscribed(np) else ""))
        return out

    def print_summary(self):
        lines = self.summary()
        if lines:
            log()
            log("At a glance (speed-up = baseline / picoll per round, picoll/NCCL = NCCL / picoll "
                "per round where NCCL ran; the lowest over sizes):")
            for line in lines:
                log("  " + line)
        for line in self.nccl_skipped:
            log("NCCL column skipped: " + line)

    def glance(self):
        """Per (collective, memory) that ran more than one datatype or source: [(title, header,
        [cells])], the median speed-up of each (and of each np) at each size, --type's first."""
        out = []
        keys = []
        for (coll, mem, source, dtype, np), _ in self.groups():
            if (coll, mem) not in keys:
                keys.append((coll, mem))
        for coll, mem in keys:
            series = [(source, dtype, np, rows) for (c, m, source, dtype, np), rows in self.groups()
                      if (c, m) == (coll, mem)]
            if len({(src, dt) for src, dt, _, _ in series}) < 2:
                continue
            nps = len({np for _, _, np, _ in series}) > 1
            head = ["size (B)"] + ["%s%s%s" % ("np %d, " % np if nps else "",
                                               "real OSU, " if src == "osu" else "picoll osu-bench, ",
                                               "its default type" if dt == "OSU default" else dt)
                                   for src, dt, np, _ in series]
            sizes = sorted({r["size_bytes"] for _, _, _, rows in series for r in rows})
            lines = []
            for size in sizes:
                cells = [human(size)]
                for _, _, _, rows in series:
                    r = [r for r in rows if r["size_bytes"] == size]
                    cells.append(fmt_ratio(r[0]["ratio_median"]) if r else "-")
                lines.append(cells)
            out.append(("%s, %s buffers: speed-up over %s by datatype (OSU's default is MPI_CHAR)"
                        % (coll, mem, BASELINE_NAMES[series[0][3][0]["baseline"]]), head, lines))
        return out

    def print_glance(self):
        for title, head, lines in self.glance():
            log()
            log(title)
            widths = [max(len(h), 9) for h in head]
            log("  ".join(h.rjust(w) for h, w in zip(head, widths)))
            for cells in lines:
                log("  ".join(c.rjust(w) for c, w in zip(cells, widths)))

    # mpi_us is the A column: plain MPI, or staged MPI where baseline says staged, the median over
    # rounds, as picoll_us is picoll's; speedup: the median over rounds of each round's mpi / picoll
    # (ratio_median; ratio_min and ratio_max the least and the most, rounds how many, rounds_mpi_us
    # and rounds_picoll_us every round's latencies in the order they ran; a real OSU row is one
    # run of each); driver_calls: CUDA driver calls per picoll call where the driver counted them
    # (the emulated GPU), and driver_calls_detail the calls per entry point; picoll_path: the path
    # of picoll's calls on CUDA buffers (cuda_oneshot, ..., fallback); nccl_us: the NCCL column's
    # median over rounds where it ran (--nccl, CUDA buffers; empty else), ratio_nccl_median (and
    # _min, _max) the median over rounds of NCCL / picoll (picoll's speed-up over NCCL),
    # rounds_nccl_us every round's NCCL latency; unstable: the sides (mpi, picoll, nccl, joined by
    # "+") whose slowest round took over UNSTABLE_SPREAD times their fastest, empty where none did
    CSV_FIELDS = ["collective", "memory", "source", "np", "datatype", "size_bytes", "mpi_us",
                  "picoll_us", "speedup", "validation", "baseline", "driver_calls",
                  "driver_calls_detail", "picoll_path", "rounds", "ratio_min", "ratio_median",
                  "ratio_max", "rounds_mpi_us", "rounds_picoll_us", "nccl_us", "ratio_nccl_min",
                  "ratio_nccl_median", "ratio_nccl_max", "rounds_nccl_us", "unstable"]

    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.CSV_FIELDS)
            w.writeheader()
            w.writerows(self.rows)

    def write_markdown(self, path, meta, plots):
        with open(path, "w") as f:
            f.write("# picoll osu-bench: MPI vs picoll\n\n")
            for k, v in meta:
                f.write("- %s: %s\n" % (k, v))
            for n in dict.fromkeys(self.notes):
                f.write("- %s\n" % n)
            lines = self.summary()
            if lines:
                f.write("\n## At a glance\n\nSpeed-up = baseline / picoll, per round (picoll/NCCL = "
                        "NCCL / picoll, per round, where NCCL ran); the lowest over sizes:\n\n")
                for line in lines:
                    f.write("- %s\n" % line)
            for (coll, mem, source, dtype, np), rows in self.groups():
                base = rows[0]["baseline"]
                counted = any(r.get("driver_calls") for r in rows)
                paths = any(r.get("picoll_path") for r in rows)
                nccl = any(r.get("nccl_us") for r in rows)
                f.write("\n## %s, %s, %s, %s rounds\n\n" % (self.title(coll, mem, source, base),
                                                           self.np_title(np), dtype, rows_rounds(rows)))
                f.write("| size (B) | %s (us) | picoll (us) | speed-up min | speed-up median | "
                        "speed-up max | validation | unstable |%s%s%s\n"
                        % (BASELINE_NAMES[base], " NCCL (us) | picoll/NCCL |" if nccl else "",
                           " picoll path |" if paths else "",
                           " driver calls per picoll call |" if counted else ""))
                f.write("|---:|---:|---:|---:|---:|---:|:---|:---|%s%s\n"
                        % ("---:|" * (2 * nccl), ":---|" * (paths + counted)))
                for r in rows:
                    extra = (" %s | %s |" % (r.get("nccl_us") or "-", fmt_ratio(r.get("ratio_nccl_median")))
                             if nccl else "")
                    extra += " %s |" % (r.get("picoll_path") or "-") if paths else ""
                    if counted:
                        extra += " %s |" % (("%s %s" % (r["driver_calls"], r["driver_calls_detail"])).strip()
                                           if r["driver_calls"] else "-")
                    f.write("| %s | %s | %s | %s | %s | %s | %s | %s |%s\n" % (
                        human(r["size_bytes"]), r["mpi_us"], r["picoll_us"], fmt_ratio(r["ratio_min"]),
                        fmt_ratio(r["ratio_median"]), fmt_ratio(r["ratio_max"]),
                        r["validation"] or "-", r.get("unstable") or "-", extra))
            for title, head, lines in self.glance():
                f.write("\n## %s\n\n| %s |\n|%s\n" % (title, " | ".join(head), "---:|" * len(head)))
                for cells in lines:
                    f.write("| %s |\n" % " | ".join(cells))
            if plots:
                f.write("\n## Plots\n\n")
                for p in plots:
                    f.write("![%s](%s)\n" % (os.path.splitext(p)[0], p))
            if self.failures:
                f.write("\n## Failures\n\n")
                for msg in self.failures:
                    f.write("- %s\n" % msg)

    # ------------------------------------------------------------------ main
    def start(self):
        """Checks the build and samples the load; returns (Load, warning line or None)."""
        self.check_build()
        load = Load()
        log("== " + load.before_line())
        warning = load.warning()
        if warning:
            log("== " + warning)
        for np in self.args.np:
            if oversubscribed(np):
                log("== %s: the ranks share the CPUs (Open MPI's --oversubscribe)" % oversubscribed(np))
        return load, warning

    def memories(self):
        """The memory kinds to run, as --mem and the machine allow (host, cuda)."""
        a = self.args
        mems = ["host"]
        if a.mem in ("auto", "cuda"):
            ok, why = self.cuda_usable()
            if ok:
                mems.append("cuda")
                if a.mem == "cuda":
                    mems = ["cuda"]
            elif a.mem == "cuda":
                sys.exit("driver: --mem cuda: " + why)
            else:
                log("== CUDA buffers skipped: " + why)
                self.notes.append("CUDA buffers skipped: " + why)
                if a.nccl != "off":
                    self.nccl_skipped.append("no GPU (CUDA buffers skipped)")
                    self.notes.append("NCCL column skipped: no GPU (CUDA buffers skipped)")
        elif a.nccl == "on":
            self.nccl_skipped.append("--nccl needs CUDA buffers (--mem cuda or auto)")
            self.notes.append("NCCL column skipped: --nccl needs CUDA buffers (--mem cuda or auto)")
        return mems

    def out_dir(self):
        host = socket.gethostname().split(".")[0] or "host"
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        outdir = self.args.out or os.path.join(HERE, "results", "%s-%s" % (stamp, host))
        os.makedirs(outdir, exist_ok=True)
        return outdir

    def meta(self, mems, load, warning, elapsed, method):
        """The lines atop results.md: [(key, value)]."""
        a = self.args
        over = [oversubscribed(np) for np in a.np if oversubscribed(np)]
        def size_range(mem):
            hi = self.max_size(mem)
            if a.min_size == hi:
                return "%s bytes" % human(hi)
            return "%s..%s bytes, x%d" % (human(a.min_size), human(hi), a.factor)
        sizes = "; ".join(("%s buffers: " % m if len(mems) > 1 else "") + size_range(m) for m in mems)
        meta = [
            ("date", datetime.datetime.now().isoformat(timespec="seconds")),
            ("host", "%s (%s, %d CPUs)" % (socket.gethostname(), platform.machine(), ncpus())),
            ("ranks", ", ".join(str(np) for np in a.np) + ("; " + "; ".join(over) if over else "")),
            ("datatype", a.type.upper() + ("" if a.no_osu_type or a.type == OSU_DEFAULT_TYPE
                                           or a.stability else "; allreduce also MPI_CHAR, OSU's default")),
            ("sizes", sizes),
            ("method", method),
            ("baseline", "; ".join("%s buffers: %s" % (m, BASELINE_NAMES[self.baseline(m)])
                                   for m in mems)),
            ("picoll", "LD_PRELOAD=%s, PICOLL_HOST=%s" % (self.libpicoll, self.args.host)),
            ("duration", "%.0f s; %.0f CPU seconds of the driver and its MPI jobs" % (elapsed, load.own)),
            ("load before", load.before_line()[len("load before: "):]),
        ]
        if warning:
            meta.append(("warning", warning[len("WARNING: "):]))
        meta.append(("load after", load.after_line()[len("load after: "):]))
        return meta

    def finish(self, load, warning):
        log()
        log(load.before_line())
        if warning:
            log(warning)
        log(load.after_line())

    def report_failures(self):
        if self.failures:
            log("FAILURES:")
            for msg in self.failures:
                log("  " + msg)
            return 1
        return 0

    def run(self):
        a = self.args
        if a.stability:
            return self.run_stability()
        load, warning = self.start()
        start = time.time()
        mems = self.memories()
        for np in a.np:
            for mem in mems:
                for coll in a.colls:
                    self.run_ab(coll, mem, np)
                    if coll == "allreduce" and a.type != OSU_DEFAULT_TYPE and not a.no_osu_type:
                        self.run_ab(coll, mem, np, OSU_DEFAULT_TYPE)
                    if not a.no_osu:
                        self.run_osu(coll, mem, np)
        if not a.no_osu and not any(self.find_osu(c) for c in a.colls):
            self.notes.append("no OSU micro-benchmarks found (set OSU_DIR or put osu_allreduce on PATH)")
        elapsed = time.time() - start
        load.finish()

        self.print_tables()
        self.print_glance()
        self.print_summary()
        self.finish(load, warning)
        outdir = self.out_dir()
        nccl = a.nccl != "off" and "cuda" in mems
        method = ("one job per collective and np; per size %d rounds of the baseline (picoll "
                  "bypassed) then picoll%s; latency = each rank's mean averaged over ranks (OSU), "
                  "median over rounds; speed-up = baseline / picoll of each round, its min, "
                  "median and max over rounds%s; unstable: a side whose slowest round took over "
                  "%gx its fastest%s"
                  % (a.rounds, " then, on CUDA buffers, NCCL (A B C)" if nccl else "",
                     "; picoll/NCCL = NCCL / picoll of each round, its median" if nccl else "",
                     UNSTABLE_SPREAD,
                     "; sizes above %s in a second job, %d timed calls after %d warm-up ones a round"
                     % (human(LARGE_SIZE), LARGE_ITERS, LARGE_WARMUP)
                     if a.large_job and any(self.max_size(m) > LARGE_SIZE for m in mems) else ""))
        meta = self.meta(mems, load, warning, elapsed, method)
        self.write_csv(os.path.join(outdir, "results.csv"))
        plots = [] if a.no_plots else make_plots(self.rows, outdir)
        self.write_markdown(os.path.join(outdir, "results.md"), meta, plots)
        log()
        log("results: %s (results.csv, results.md%s)" % (outdir, ", %d plots" % len(plots) if plots else ""))
        log("benchmarks took %.0f s (%.0f CPU seconds of the driver and its MPI jobs)"
            % (elapsed, load.own))
        return self.report_failures()

    # ------------------------------------------------------------------ --stability
    def run_stability(self):
        """--stability N: N A/B jobs in a row of each collective and np (host buffers, or CUDA
        with --mem cuda), then per size the medians of every job side by side, their spread
        across jobs, and whether picoll's stayed within STABILITY_SPREAD and never slower than
        the MPI's in the same job."""
        a = self.args
        load, warning = self.start()
        start = time.time()
        mem = "host"
        if a.mem == "cuda":
            mem = self.memories()[0]
        series = []  # (collective, np, size, [(job, row)]): a failed job has no row
        for np in a.np:
            for coll in a.colls:
                jobs = {}  # size -> [(job, row)]
                for job in range(1, a.stability + 1):
                    rows, _ = self.run_ab(coll, mem, np, tag="job %d of %d" % (job, a.stability))
                    for r in rows:
                        jobs.setdefault(r["size_bytes"], []).append((job, r))
                for size in sorted(jobs):
                    series.append((coll, np, size, jobs[size]))
        elapsed = time.time() - start
        load.finish()

        results = [self.stability_table(mem, *s) for s in series]
        for res in results:
            log()
            for line in res["lines"]:
                log(line)
        self.finish(load, warning)
        outdir = self.out_dir()
        method = ("%d separate jobs in a row per collective and np, each %d rounds per size of the "
                  "baseline (picoll bypassed) then picoll; a job's latency = the median over its "
                  "rounds; spread = the largest median over the smallest, across jobs; the verdict: "
                  "picoll's spread at most %gx, and picoll's median at most the baseline's in every job"
                  % (a.stability, a.rounds, STABILITY_SPREAD))
        meta = self.meta([mem], load, warning, elapsed, method)
        with open(os.path.join(outdir, "stability.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=STABILITY_FIELDS)
            w.writeheader()
            for res in results:
                w.writerows(res["csv"])
        with open(os.path.join(outdir, "stability.md"), "w") as f:
            f.write("# picoll osu-bench: the same size, job after job\n\n")
            for k, v in meta:
                f.write("- %s: %s\n" % (k, v))
            # each job says the same: once, without its number
            for n in dict.fromkeys(re.sub(r", job \d+ of \d+:", ":", n) for n in self.notes):
                f.write("- %s\n" % n)
            for res in results:
                f.write("\n" + "\n".join(res["md"]) + "\n")
            if self.failures:
                f.write("\n## Failures\n\n")
                for msg in self.failures:
                    f.write("- %s\n" % msg)
        log()
        log("results: %s (stability.csv, stability.md)" % outdir)
        log("benchmarks took %.0f s (%.0f CPU seconds of the driver and its MPI jobs)"
            % (elapsed, load.own))
        return self.report_failures()

    def stability_table(self, mem, coll, np, size, jobs):
        """One size of --stability: {"lines": the printed table and verdict, "md": the same in
        Markdown, "csv": rows of STABILITY_FIELDS}."""
        a = self.args
        base = BASELINE_NAMES[self.baseline(mem)]
        title = ("%s, %s buffers, np %d, %s B, %s, %d jobs of %d rounds (%s vs picoll)"
                 % (coll, mem, np, human(size), a.type.upper(), a.stability, a.rounds, base))
        head = ["job", "%s median (us)" % base, "picoll median (us)", "%s/picoll" % base, "unstable"]
        cells, csv_rows = [], []
        for job, r in jobs:
            mpi, pic = float(r["mpi_us"]), float(r["picoll_us"])
            cells.append([str(job), r["mpi_us"], r["picoll_us"], fmt_ratio(mpi / pic if pic else 0.0),
                          r["unstable"] or "-"])
            csv_rows.append({"collective": coll, "memory": mem, "np": np, "datatype": r["datatype"],
                             "size_bytes": size, "job": job, "baseline": r["baseline"],
                             "mpi_us": r["mpi_us"], "picoll_us": r["picoll_us"],
                             "mpi_over_picoll": "%.3f" % (mpi / pic) if pic else "",
                             "unstable": r["unstable"], "rounds_mpi_us": r["rounds_mpi_us"],
                             "rounds_picoll_us": r["rounds_picoll_us"]})
        mpis = [float(r["mpi_us"]) for _, r in jobs]
        pics = [float(r["picoll_us"]) for _, r in jobs]
        spreads = []
        for side, v in ((base, mpis), ("picoll", pics)):
            lo, med, hi, sp = spread_stats(v)
            spreads.append("%s's medians across jobs: min %.2f, median %.2f, max %.2f us; max/min %.2fx"
                           % (side, lo, med, hi, sp))
        missing = a.stability - len(jobs)
        pic_spread = spread_stats(pics)[3]
        slower = [job for job, r in jobs if float(r["picoll_us"]) > float(r["mpi_us"])]
        within = pic_spread <= STABILITY_SPREAD
        verdict = ("picoll's median within %gx across jobs: %s (%.2fx); never slower than %s's in the "
                   "same job: %s%s"
                   % (STABILITY_SPREAD, "yes" if within else "NO", pic_spread, base,
                      "yes" if not slower else "NO (job %s)" % ", ".join(str(j) for j in slower),
                      "; %d of %d jobs gave no row (failed)" % (missing, a.stability) if missing else ""))
        widths = [max(len(h), 5) for h in head]
        lines = [title, "  ".join(h.rjust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
        lines += spreads + ["stability: " + verdict + ("" if within and not slower and not missing
                                                         else "  <- NOT STABLE")]
        md = ["## " + title, "", "| %s |" % " | ".join(head), "|" + "---:|" * (len(head) - 1) + ":---|"]
        md += ["| %s |" % " | ".join(row) for row in cells]
        md += [""] + ["- " + x for x in spreads] + ["- stability: " + verdict]
        return {"lines": lines, "md": md, "csv": csv_rows}


# one row per job and size of --stability: the medians over the job's rounds (mpi_us the baseline's,
# as in results.csv), their quotient, the job's unstable sides and every round's latencies
STABILITY_FIELDS = ["collective", "memory", "np", "datatype", "size_bytes", "job", "baseline",
                    "mpi_us", "picoll_us", "mpi_over_picoll", "unstable", "rounds_mpi_us",
                    "rounds_picoll_us"]


def spread_stats(values):
    """(min, median, max, max / min) of values."""
    lo, hi = min(values), max(values)
    return lo, statistics.median(values), hi, hi / lo if lo > 0 else float("inf")


def set_rounds(row, rounds):
    """Fills row's rounds columns from [(baseline_us, picoll_us)] or, with the NCCL column,
    [(baseline_us, picoll_us, nccl_us)], one per round in order. picoll/NCCL is NCCL / picoll of
    each round (picoll's speed-up over NCCL), as speedup is baseline / picoll."""
    def fill(prefix, pairs):
        lo, med, hi = ratio_stats(pairs)
        row[prefix + "min"], row[prefix + "median"], row[prefix + "max"] = (
            ("%.3f" % lo, "%.3f" % med, "%.3f" % hi) if med > 0 else ("", "", ""))

    row["rounds"] = len(rounds)
    row["rounds_mpi_us"] = " ".join("%.3f" % r[0] for r in rounds)
    row["rounds_picoll_us"] = " ".join("%.3f" % r[1] for r in rounds)
    fill("ratio_", [(r[0], r[1]) for r in rounds])
    row["speedup"] = row["ratio_median"]
    nccl = all(len(r) == 3 for r in rounds)
    row["rounds_nccl_us"] = " ".join("%.3f" % r[2] for r in rounds) if nccl else ""
    if nccl:
        fill("ratio_nccl_", [(r[2], r[1]) for r in rounds])
    else:
        row["ratio_nccl_min"] = row["ratio_nccl_median"] = row["ratio_nccl_max"] = ""
    row["unstable"] = "+".join(side for side, _ in round_spreads(row)
                               if _ > UNSTABLE_SPREAD)


# the sides of a row whose every round's latency the CSV keeps, as the unstable column names them
ROUND_SIDES = (("mpi", "rounds_mpi_us"), ("picoll", "rounds_picoll_us"), ("nccl", "rounds_nccl_us"))


def round_spreads(row):
    """[(side, slowest round / fastest round)] of each side of row with rounds (mpi, picoll and,
    where it ran, nccl)."""
    out = []
    for side, key in ROUND_SIDES:
        v = [float(x) for x in (row.get(key) or "").split()]
        if v and min(v) > 0:
            out.append((side, max(v) / min(v)))
    return out


def unstable_note(row):
    """"unstable: picoll's rounds 2.31x apart" for a row whose unstable column names sides."""
    sides = row.get("unstable", "").split("+")
    return "unstable: " + ", ".join("%s's rounds %.2fx apart" % (side, spread)
                                    for side, spread in round_spreads(row) if side in sides)


def fmt_ratio(v):
    """A ratio column ("1.234" or "") as tables show it: "1.23x" or "-"."""
    if v in ("", None):
        return "-"
    return ("%.2fx" if float(v) >= 0.1 else "%.3fx") % float(v)


def rows_rounds(rows):
    """How many rounds rows have, "5", or their range, "1-5"."""
    n = sorted({int(r.get("rounds") or 1) for r in rows})
    return str(n[0]) if len(n) == 1 else "%d-%d" % (n[0], n[-1])


# ---------------------------------------------------------------------- plots

def group_key(r):
    return (r["collective"], r["memory"], r["source"], r["datatype"], int(r["np"]))


def groups(rows):
    """[((collective, memory, source, datatype, np), rows)] in the order they ran."""
    keys = []
    for r in rows:
        if group_key(r) not in keys:
            keys.append(group_key(r))
    return [(k, [r for r in rows if group_key(r) == k]) for k in keys]


def baseline_name(row):
    """The A column's name; CSV files from before the baseline column hold plain MPI."""
    return BASELINE_NAMES[row.get("baseline") or "mpi"]


def plot_series(rows):
    """Per (collective, memory): subtitle and a list of series, one per np, source and datatype
    (OSU rows beside ours), each a dict: tag, base (the baseline's name), osu, sizes, mpi and pic
    (median latencies), nccl (NCCL's, where every row has one; else None; gnuplot leaves it out), med, lo and hi (the ratio's median, min and max over rounds; CSV files
    from before the ratio columns give the one ratio for all three)."""
    out = {}
    for (coll, mem, source, dtype, np), grp in groups(rows):
        nps = sorted({int(r["np"]) for r in rows if (r["collective"], r["memory"]) == (coll, mem)})
        sub = "%s, %s buffers, np %s" % (coll, mem, ", ".join(str(n) for n in nps))
        tag = "np %d %s%s " % (np, "OSU " if source == "osu" else "", dtype)

        def ratio(r, key):
            for k in (key, "speedup"):
                if r.get(k):
                    return float(r[k])
            p = float(r["picoll_us"])
            return float(r["mpi_us"]) / p if p else 0.0

        out.setdefault((coll, mem), (sub, []))[1].append({
            "tag": tag, "base": baseline_name(grp[0]), "osu": source == "osu",
            "sizes": [int(r["size_bytes"]) for r in grp],
            "mpi": [float(r["mpi_us"]) for r in grp], "pic": [float(r["picoll_us"]) for r in grp],
            "nccl": ([float(r["nccl_us"]) for r in grp]
                     if all(r.get("nccl_us") for r in grp) else None),
            "med": [ratio(r, "ratio_median") for r in grp], "lo": [ratio(r, "ratio_min") for r in grp],
            "hi": [ratio(r, "ratio_max") for r in grp]})
    return out


def plot_names(coll, mem):
    return "%s-%s-latency.png" % (coll, mem), "%s-%s-speedup.png" % (coll, mem)


def plot_matplotlib(plt, rows, outdir):
    from matplotlib.ticker import FuncFormatter
    files = []
    for (coll, mem), (sub, series) in plot_series(rows).items():
        lat_name, spd_name = plot_names(coll, mem)
        fig, ax = plt.subplots(figsize=(8, 5))
        for s in series:
            line, = ax.plot(s["sizes"], s["mpi"], "-." if s["osu"] else ":", marker="o",
                            label=s["tag"] + s["base"])
            ax.plot(s["sizes"], s["pic"], "--" if s["osu"] else "-", marker="s",
                    color=line.get_color(), label=s["tag"] + "picoll")
            if s["nccl"]:
                ax.plot(s["sizes"], s["nccl"], "-.", marker="^", color=line.get_color(),
                        label=s["tag"] + "NCCL")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("latency (us), median over rounds")
        ax.set_title("Latency: " + sub)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, lat_name), dpi=110)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(8, 5))
        for s in series:
            line, = ax.plot(s["sizes"], s["med"], "--" if s["osu"] else "-", marker="o",
                            label=s["tag"] + "median (%s / picoll)" % s["base"])
            if s["lo"] != s["hi"]:
                ax.fill_between(s["sizes"], s["lo"], s["hi"], color=line.get_color(), alpha=0.18,
                                linewidth=0, label=s["tag"] + "min-max over rounds")
        ax.axhline(1.0, color="gray", linewidth=1)
        ax.set_xscale("log", base=2)
        # a ratio: 0.5x as far below 1x as 2x is above it, and one wild round does not flatten the rest
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%gx" % v))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("speed-up (baseline / picoll, per round)")
        ax.set_title("Speed-up: " + sub)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, spd_name), dpi=110)
        plt.close(fig)
        files += [lat_name, spd_name]
    return files


def plot_gnuplot(rows, outdir):
    files = []
    for (coll, mem), (sub, series) in plot_series(rows).items():
        lat_name, spd_name = plot_names(coll, mem)
        lat, spd = [], []
        for i, s in enumerate(series):
            data = os.path.join(outdir, "%s-%s-%d.dat" % (coll, mem, i))
            with open(data, "w") as f:
                for row in zip(s["sizes"], s["mpi"], s["pic"], s["med"], s["lo"], s["hi"]):
                    f.write("%d %s %s %s %s %s\n" % row)
            tag, base = s["tag"], s["base"]
            lat += ["'%s' using 1:2 with linespoints title '%s%s'" % (data, tag, base),
                    "'%s' using 1:3 with linespoints title '%spicoll'" % (data, tag)]
            spd += ["'%s' using 1:4:5:6 with yerrorlines title '%sspeed-up (%s / picoll), "
                    "median, min-max'" % (data, tag, base)]
        script = ("set terminal pngcairo size 880,550\nset grid\nset logscale x 2\n"
                  "set xlabel 'message size (bytes)'\nset key noenhanced\n"
                  "set output '%s'\nset logscale y\nset ylabel 'latency (us), median over rounds'\n"
                  "set title 'Latency: %s' noenhanced\nplot %s\n"
                  "set output '%s'\nset ylabel 'speed-up (baseline / picoll, per round)'\n"
                  "set title 'Speed-up: %s' noenhanced\nplot %s, 1 title '' lc rgb 'gray'\n"
                  % (os.path.join(outdir, lat_name), sub, ", ".join(lat),
                     os.path.join(outdir, spd_name), sub, ", ".join(spd)))
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode == 0:
            files += [lat_name, spd_name]
        else:
            log("gnuplot failed: %s" % r.stderr.strip())
    return files


DEBIAN_PYTHON = "/usr/bin/python3"


def make_plots(rows, outdir):
    """PNG plots of rows into outdir: matplotlib, else Debian's python3 with its matplotlib
    (python3-matplotlib), else gnuplot. Returns the file names."""
    if not rows:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plot_matplotlib(plt, rows, outdir)
    except ImportError:
        pass
    if os.path.exists(DEBIAN_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON):
        r = subprocess.run([DEBIAN_PYTHON, os.path.abspath(__file__), "--replot", outdir],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return [f for f in r.stdout.split() if f.endswith(".png")]
    if shutil.which("gnuplot"):
        return plot_gnuplot(rows, outdir)
    log("plots skipped: neither python3-matplotlib nor gnuplot is installed "
        "(apt-get install python3-matplotlib; osu-bench/run.sh installs it)")
    return []


def replot(outdir):
    """--replot DIR: the plots of DIR/results.csv, with this interpreter's matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(outdir, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    print("\n".join(plot_matplotlib(plt, rows, outdir)))
    return 0


def main(argv=None):
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
    a = p.parse_args(argv)
    if a.replot:
        return replot(a.replot)

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
    return Bench(a).run()


if __name__ == "__main__":
    sys.exit(main())
