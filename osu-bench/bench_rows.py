"""picoll osu-bench: the rows the driver collects, one per collective, memory, source, datatype,
np and message size (results.csv's columns), and what the runner, the report and the plots all
use: their constants, the round statistics, how sizes and ratios are written.

Standard library only.
"""

import os
import statistics

COLLECTIVES = ("allreduce", "allgather", "alltoall")
# what OSU's programs reduce unless -T says otherwise; the allgather and alltoall ones move bytes,
# whose type changes nothing
OSU_DEFAULT_TYPE = "mpi_char"
TYPE_SIZES = {"mpi_char": 1, "mpi_int": 4, "mpi_float": 4, "mpi_double": 8}

# the default run times the sizes above LARGE_SIZE (4 and 16 MiB) in a job of their own, with
# LARGE_ITERS timed calls after LARGE_WARMUP untimed ones a round: with OSU's 100 and 10 they took
# 277 of the benchmarks' 316 s on 2 cores (2026-11-28), the whole main job being due in 4 minutes
LARGE_SIZE = 1 << 20
LARGE_ITERS, LARGE_WARMUP = 10, 2
# the A column of the A/B rows (the programs' --baseline), as tables, CSV and plots name it
BASELINE_NAMES = {"mpi": "plain MPI", "staged": "staged MPI"}

# a side whose slowest round took over this many times its fastest marks the row unstable
UNSTABLE_SPREAD = 2.0
# --stability: picoll's median may move this much across jobs (the largest over the smallest)
STABILITY_SPREAD = 1.3


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


def oversubscribed(np):
    """"np N on C CPUs: oversubscribed" where the ranks outnumber the CPUs, else ""."""
    return "np %d on %d CPUs: oversubscribed" % (np, ncpus()) if np > ncpus() else ""


def ratio_stats(pairs):
    """(min, median, max) over rounds of baseline / picoll, from [(baseline_us, picoll_us)]."""
    r = [a / b for a, b in pairs if b > 0]
    return (min(r), statistics.median(r), max(r)) if r else (0.0, 0.0, 0.0)


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

# one row per job and size of --stability: the medians over the job's rounds (mpi_us the baseline's,
# as in results.csv), their quotient, the job's unstable sides and every round's latencies
STABILITY_FIELDS = ["collective", "memory", "np", "datatype", "size_bytes", "job", "baseline",
                    "mpi_us", "picoll_us", "mpi_over_picoll", "unstable", "rounds_mpi_us",
                    "rounds_picoll_us", "job_steal_pct", "job_steal_max_pct", "job_others_pct",
                    "floor_us", "picoll_over_floor", "rounds_floor_us", "cross_us",
                    "picoll_over_cross", "rounds_cross_us"]


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


# ---------------------------------------------------------------------- groups of rows

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
