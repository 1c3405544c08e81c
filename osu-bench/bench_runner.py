"""picoll osu-bench: the runner. Launches the MPI jobs (the A/B programs, real OSU
micro-benchmarks, --stability's job after job), reads the programs' lines into rows
(bench_rows) as they come and logs each size's progress line.

Standard library only.
"""

import os
import re
import statistics
import shutil
import subprocess
import sys
import threading
import time

from bench_load import JobMachine, Load
from bench_rows import (BASELINE_NAMES, LARGE_ITERS, LARGE_SIZE, LARGE_WARMUP, OSU_DEFAULT_TYPE,
                        TYPE_SIZES, fmt_ratio, human, log, oversubscribed, set_rounds, size_list,
                        unstable_note)

# under a row of device buffers, where the CUDA driver counts its calls (the emulated GPU): the
# driver calls per picoll call, then per entry point, "(cuLaunchKernel 1, ...)"
DRIVER_CALLS = re.compile(r"# driver calls per call: (\d+(?:\.\d+)?)\s*(.*)$")
# under each A/B row (after those two lines): every round's baseline/picoll latencies, in order,
# and with the NCCL column (--nccl) baseline/picoll/NCCL
ROUNDS = re.compile(r"# rounds (?:A/B|A/B/C) \(us\):((?: [0-9.]+(?:/[0-9.]+){1,2})+)$")


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


class ABReader:
    """Reads the lines of one A/B run's jobs (one, or two where the largest sizes have a job of
    their own) into the runner's rows, and logs each size's progress line once its rounds came."""

    def __init__(self, runner, coll, mem, np, dtype, label, nsizes):
        self.runner = runner
        self.coll, self.mem, self.np, self.dtype = coll, mem, np, dtype
        self.base = runner.baseline(mem)
        self.label = label
        self.nsizes = nsizes
        self.t0 = time.time()
        self.done = 0
        self.pending = []  # the last row, not yet logged: its progress line waits for its rounds
        self.new_job()

    def new_job(self):
        self.row = None  # the job's last row: the driver-call count, path and rounds lines follow it
        self.nccl = False  # the program said NCCL runs: its rows have the NCCL columns

    def flush(self):
        if not self.pending:
            return
        r = self.pending.pop()
        label, base = self.label, self.base
        vs = ("   NCCL %10s us   picoll/NCCL %s" % (r["nccl_us"], fmt_ratio(r["ratio_nccl_median"]))
              if r.get("nccl_us") else "")
        log("   [%s] %2d/%d %8s B   %s %10s us   picoll %10s us   %s (min %s, max %s)%s %s  (%.0fs)%s"
            % (label, self.done, self.nsizes, human(r["size_bytes"]), BASELINE_NAMES[base], r["mpi_us"],
               r["picoll_us"], fmt_ratio(r["ratio_median"]), fmt_ratio(r["ratio_min"]),
               fmt_ratio(r["ratio_max"]), vs, r["validation"], time.time() - self.t0,
               "   " + unstable_note(r) if r["unstable"] else ""))
        if r["driver_calls"]:
            log("   [%s] %8s B   driver calls per picoll call: %s %s"
                % (label, human(r["size_bytes"]), r["driver_calls"], r["driver_calls_detail"]))

    def feed(self, line):
        """One line of the program's output."""
        if not self.comment(line) and line and not line.startswith("#"):
            self.size_row(line)

    def comment(self, line):
        """The lines under a row and the programs' notes; True where line was one of them."""
        row, label, notes = self.row, self.label, self.runner.notes
        calls = DRIVER_CALLS.match(line)
        if calls and row is not None:
            row["driver_calls"], row["driver_calls_detail"] = calls.group(1), calls.group(2)
            return True
        if line.startswith("# picoll path: ") and row is not None:
            row["picoll_path"] = line[len("# picoll path: "):].strip()
            return True
        rounds = ROUNDS.match(line)
        if rounds and row is not None:
            pairs = [tuple(float(x) for x in p.split("/")) for p in rounds.group(1).split()]
            if len(pairs[0]) != (3 if row.get("nccl_us") else 2):
                log("   unexpected line: " + line)
                return True
            set_rounds(row, pairs)
            self.flush()
            return True
        # --floor with host buffers: the machine's memory copy in each round (issue 52), and the
        # copy out of the next rank's memory (every rank on one node)
        for what in ("floor", "cross"):
            head = "# rounds %s (us):" % what
            if line.startswith(head) and row is not None:
                times = [float(x) for x in line[len(head):].split()]
                row["rounds_%s_us" % what] = " ".join("%.3f" % x for x in times)
                row["%s_us" % what] = ("%.3f" % statistics.median(times)
                                       if times and min(times) > 0 else "")
                return True
        if (line.startswith("# host floor") or line.startswith("# cross floor")) and row is not None:
            return True
        if line.startswith("# driver calls: "):
            notes.append("%s: %s" % (label, line[2:]))
            return True
        if line.startswith("# nccl: "):
            # "# nccl: NCCL x.y.z (...)": the C column runs; "# nccl: skipped: why"
            self.nccl = not line.startswith("# nccl: skipped: ")
            log("   " + line[2:])
            notes.append("%s: %s" % (label, line[2:]))
            if not self.nccl:
                self.runner.nccl_skipped.append("%s: %s" % (label, line[len("# nccl: skipped: "):]))
            return True
        if line.startswith("# picoll on ") or line.startswith("# staged MPI: ") \
                or re.match(r"# picoll \S+, active", line):
            log("   " + line[2:])
            if not re.match(r"# picoll \S+, active", line):
                notes.append("%s: %s" % (label, line[2:]))
            return True
        return False

    def size_row(self, line):
        """A size's row: size, A, B, speed-up, A and B bus bandwidths[, NCCL, picoll/NCCL, its
        bandwidth][, Pass]."""
        nccl = self.nccl
        f = line.split()
        try:
            size, mpi, pic = int(f[0]), float(f[1]), float(f[2])
        except (ValueError, IndexError):
            log("   unexpected line: " + line)
            return
        try:
            nccl_us = float(f[6]) if nccl else None
        except (ValueError, IndexError):
            log("   unexpected line: " + line)
            return
        valid = f[9 if nccl else 6] if len(f) > (9 if nccl else 6) else ""
        self.flush()
        self.done += 1
        dtype = self.dtype
        self.row = self.runner.add_row(self.coll, self.mem, self.np, "picoll-osu-bench", self.base,
                                       size, mpi, pic, valid,
                                       datatype=dtype.upper() if dtype else None, nccl=nccl_us)
        self.pending.append(self.row)


class Runner:
    """One run of the driver: its options (args), the rows its jobs gave, its notes for the report,
    its failures and the NCCL columns it skipped."""

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
        if mem == "host" and a.stability:
            args.append("--floor")  # the machine's memory in every round, beside the calls
        parts = self.ab_parts(sizes)
        label = "%s %s%s np %d%s" % (coll, mem, " " + dtype.upper() if dtype else "", np,
                                     ", " + tag if tag else "")
        log("== %s: %d sizes, %s..%s bytes, %d rounds of %s / picoll%s%s"
            % (label, len(sizes), human(sizes[0]), human(sizes[-1]), a.rounds,
               BASELINE_NAMES[base], " (%s)" % oversubscribed(np) if oversubscribed(np) else "",
               "; %s..%s in a second job, %d calls timed after %d" % (
                   human(parts[1][0][0]), human(parts[1][0][-1]), LARGE_ITERS, LARGE_WARMUP)
               if len(parts) > 1 else ""))
        reader = ABReader(self, coll, mem, np, dtype, label, len(sizes))
        ok = True
        for _, options in parts:
            job = self.launch(np, self.program(coll), args + options, preload=True)
            reader.new_job()
            for line in job.lines():
                reader.feed(line)
            reader.flush()
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

    # ------------------------------------------------------------------ the whole run
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

    def run_all(self, mems):
        """Every A/B job of the run (and the real OSU programs'), per np, memory kind and
        collective; allreduce also with OSU's MPI_CHAR unless --type is it or --no-osu-type."""
        a = self.args
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

    # ------------------------------------------------------------------ --stability
    def stability_mem(self):
        """--stability's memory kind: host, or CUDA with --mem cuda (when a GPU answers)."""
        return self.memories()[0] if self.args.mem == "cuda" else "host"

    def run_stability_jobs(self, mem):
        """--stability N: N A/B jobs in a row of each collective and np on buffers of kind mem.
        Returns [(collective, np, size, [(job, row)])]: a failed job has no row."""
        a = self.args
        series = []
        for np in a.np:
            for coll in a.colls:
                jobs = {}  # size -> [(job, row)]
                for job in range(1, a.stability + 1):
                    machine = JobMachine()
                    rows, _ = self.run_ab(coll, mem, np, tag="job %d of %d" % (job, a.stability))
                    machine.finish()
                    for r in rows:
                        for k in ("steal", "steal_max", "others"):
                            v = getattr(machine, k)
                            r["job_" + k + "_pct"] = "" if v is None else "%.1f" % v
                        jobs.setdefault(r["size_bytes"], []).append((job, r))
                for size in sorted(jobs):
                    series.append((coll, np, size, jobs[size]))
        return series
