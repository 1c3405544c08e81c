"""picoll osu-bench: the report of a run. The tables per collective, memory, source, datatype and
np (printed and in results.md), the "at a glance" lines, the speed-ups by datatype side by side,
results.csv, the lines atop results.md and, for --stability, each size's jobs side by side with
their spread and verdict (stability.csv, stability.md).

Standard library only.
"""

import csv
import datetime
import os
import platform
import re
import statistics
import socket

from bench_rows import (BASELINE_NAMES, CSV_FIELDS, LARGE_ITERS, LARGE_SIZE, LARGE_WARMUP,
                        OSU_DEFAULT_TYPE, STABILITY_FIELDS, STABILITY_SPREAD, UNSTABLE_SPREAD,
                        fmt_ratio, groups, human, log, ncpus, oversubscribed, rows_rounds,
                        spread_stats)

HERE = os.path.dirname(os.path.abspath(__file__))


def correlation(xs, ys):
    """Pearson's r of two series, "%.2f"; "-" under 3 points or where either does not vary."""
    try:
        return "%.2f" % statistics.correlation(xs, ys) if len(xs) >= 3 else "-"
    except statistics.StatisticsError:
        return "-"


class Report:
    """What a runner (bench_runner.Runner) gathered, printed and written: its rows, notes,
    failures and skipped NCCL columns, with its options (args) and baselines."""

    def __init__(self, runner):
        self.args = runner.args
        self.rows = runner.rows
        self.notes = runner.notes
        self.failures = runner.failures
        self.nccl_skipped = runner.nccl_skipped
        self.baseline = runner.baseline
        self.max_size = runner.max_size
        self.libpicoll = runner.libpicoll

    # ------------------------------------------------------------------ tables
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

    # ------------------------------------------------------------------ files
    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
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
            self.write_failures(f)

    def write_failures(self, f):
        """The Markdown report's last section: the failures, where any."""
        if self.failures:
            f.write("\n## Failures\n\n")
            for msg in self.failures:
                f.write("- %s\n" % msg)


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

    def method(self, mems):
        """results.md's method line for a run on buffers of kinds mems."""
        a = self.args
        nccl = a.nccl != "off" and "cuda" in mems
        return ("one job per collective and np; per size %d rounds of the baseline (picoll "
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

    def print_load(self, load, warning):
        """The load lines again, under the tables."""
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

    def print_done(self, outdir, files, elapsed, load):
        """The last lines of a run: where its files are, how long it took."""
        log()
        log("results: %s (%s)" % (outdir, files))
        log("benchmarks took %.0f s (%.0f CPU seconds of the driver and its MPI jobs)"
            % (elapsed, load.own))

    # ------------------------------------------------------------------ --stability
    def stability_method(self):
        """stability.md's method line."""
        a = self.args
        return ("%d separate jobs in a row per collective and np, each %d rounds per size of the "
                "baseline (picoll bypassed) then picoll; a job's latency = the median over its "
                "rounds; spread = the largest median over the smallest, across jobs; the verdict: "
                "picoll's spread at most %gx, and picoll's median at most the baseline's in every job"
                % (a.stability, a.rounds, STABILITY_SPREAD))

    def write_stability(self, outdir, meta, results):
        """stability.csv and stability.md of results ([stability_table(...)])."""
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
            self.write_failures(f)

    def stability_table(self, mem, coll, np, size, jobs):
        """One size of --stability: {"lines": the printed table and verdict, "md": the same in
        Markdown, "csv": rows of STABILITY_FIELDS}."""
        a = self.args
        base = BASELINE_NAMES[self.baseline(mem)]
        title = ("%s, %s buffers, np %d, %s B, %s, %d jobs of %d rounds (%s vs picoll)"
                 % (coll, mem, np, human(size), a.type.upper(), a.stability, a.rounds, base))
        # the machine during the job (bench_load.JobMachine): stolen by the hypervisor (all CPUs,
        # and the most from one) and busy with other work, in % of the job's CPU time
        head = ["job", "%s median (us)" % base, "picoll median (us)", "%s/picoll" % base, "unstable",
                "steal %", "max steal %", "others %"]
        # host buffers: the machine's memory copy timed in the same rounds (osu-bench --floor), and
        # picoll's median over it: what is left of picoll's spread where the machine's is taken out
        floored = all(r.get("floor_us") for _, r in jobs)
        if floored:
            head += ["floor median (us)", "picoll/floor"]
        # and the copy out of the next rank's memory (every rank on one node): the price of moving
        # bytes between the ranks' CPUs in the same rounds
        crossed = floored and all(r.get("cross_us") for _, r in jobs)
        if crossed:
            head += ["cross median (us)", "picoll/cross"]
        cells, csv_rows = [], []
        for job, r in jobs:
            mpi, pic = float(r["mpi_us"]), float(r["picoll_us"])
            machine = [r.get("job_%s_pct" % k) or "-" for k in ("steal", "steal_max", "others")]
            over_floor = "%.3f" % (pic / float(r["floor_us"])) if r.get("floor_us") else ""
            over_cross = "%.3f" % (pic / float(r["cross_us"])) if r.get("cross_us") else ""
            cells.append([str(job), r["mpi_us"], r["picoll_us"], fmt_ratio(mpi / pic if pic else 0.0),
                          r["unstable"] or "-"] + machine
                         + ([r["floor_us"], over_floor + "x"] if floored else [])
                         + ([r["cross_us"], over_cross + "x"] if crossed else []))
            csv_rows.append({"collective": coll, "memory": mem, "np": np, "datatype": r["datatype"],
                             "size_bytes": size, "job": job, "baseline": r["baseline"],
                             "mpi_us": r["mpi_us"], "picoll_us": r["picoll_us"],
                             "mpi_over_picoll": "%.3f" % (mpi / pic) if pic else "",
                             "unstable": r["unstable"], "rounds_mpi_us": r["rounds_mpi_us"],
                             "rounds_picoll_us": r["rounds_picoll_us"],
                             "job_steal_pct": r.get("job_steal_pct", ""),
                             "job_steal_max_pct": r.get("job_steal_max_pct", ""),
                             "job_others_pct": r.get("job_others_pct", ""),
                             "floor_us": r.get("floor_us", ""), "picoll_over_floor": over_floor,
                             "rounds_floor_us": r.get("rounds_floor_us", ""),
                             "cross_us": r.get("cross_us", ""), "picoll_over_cross": over_cross,
                             "rounds_cross_us": r.get("rounds_cross_us", "")})
        mpis = [float(r["mpi_us"]) for _, r in jobs]
        pics = [float(r["picoll_us"]) for _, r in jobs]
        spreads = []
        for side, v in ((base, mpis), ("picoll", pics)):
            lo, med, hi, sp = spread_stats(v)
            spreads.append("%s's medians across jobs: min %.2f, median %.2f, max %.2f us; max/min %.2fx"
                           % (side, lo, med, hi, sp))
        if floored:
            floors = [float(r["floor_us"]) for _, r in jobs]
            lo, med, hi, sp = spread_stats(floors)
            over = [p / f for p, f in zip(pics, floors)]
            pr, fr = [], []  # every round of every job, picoll's and the floor's
            for _, r in jobs:
                p_r = [float(x) for x in r["rounds_picoll_us"].split()]
                f_r = [float(x) for x in r.get("rounds_floor_us", "").split()]
                if len(p_r) == len(f_r):
                    pr += p_r
                    fr += f_r
            spreads.append("the floor's medians across jobs: min %.2f, median %.2f, max %.2f us; "
                           "max/min %.2fx; picoll/floor across jobs %.3fx to %.3fx (max/min %.2fx); "
                           "correlation of picoll's and the floor's medians %s, of their %d "
                           "rounds %s"
                           % (lo, med, hi, sp, min(over), max(over), spread_stats(over)[3],
                              correlation(pics, floors), len(pr), correlation(pr, fr)))
        if crossed:
            cross = [float(r["cross_us"]) for _, r in jobs]
            lo, med, hi, sp = spread_stats(cross)
            over = [p / c for p, c in zip(pics, cross)]
            spreads.append("the cross floor's medians across jobs: min %.2f, median %.2f, max %.2f "
                           "us; max/min %.2fx; picoll/cross across jobs %.3fx to %.3fx (max/min "
                           "%.2fx); correlation of picoll's and the cross floor's medians %s, of "
                           "the MPI's and the cross floor's %s"
                           % (lo, med, hi, sp, min(over), max(over), spread_stats(over)[3],
                              correlation(pics, cross), correlation(mpis, cross)))
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
        md = ["## " + title, "", "| %s |" % " | ".join(head),
              "|" + "---:|" * 4 + ":---|" + "---:|" * (len(head) - 5)]
        md += ["| %s |" % " | ".join(row) for row in cells]
        md += [""] + ["- " + x for x in spreads] + ["- stability: " + verdict]
        return {"lines": lines, "md": md, "csv": csv_rows}
