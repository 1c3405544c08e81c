"""picoll osu-bench: the plots of a run's rows, per collective and memory kind: the latencies
(median over rounds) and the speed-up over the baseline (median, and min-max over rounds) against
the message size. matplotlib, else Debian's python3 with its matplotlib, else gnuplot, else none.

Standard library only, plus matplotlib when it is installed.
"""

import csv
import math
import os
import shutil
import subprocess
import sys

from bench_rows import baseline_name, groups, log

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"
SIZE_LABEL = "message size (bytes)"
LATENCY_LABEL = "latency (us), median over rounds"


def plot_series(rows):
    """Per (collective, memory): subtitle and a list of series, one per np, source and datatype
    (OSU rows beside ours), each a dict: tag, base (the baseline's name), osu, sizes, mpi and pic
    (median latencies), nccl (NCCL's, where every row has one; else None; gnuplot leaves it
    out), med, lo and hi (the ratio's median, min and max over rounds; CSV files from before the
    ratio columns give the one ratio for all three)."""
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




def speedup_label(series):
    """The speed-up plots' y axis: over what (the baselines of series), in what unit."""
    return "speed-up over %s (x), per round" % " or ".join(dict.fromkeys(s["base"] for s in series))


def log_ticks(ax, values, fmt):
    """Labelled ticks on ax's log y axis over values, each written fmt ("%gx"): 1, 2 and 5 a
    decade, finer where values span less (1x to 3x: 1x, 1.5x, 2x, 3x; the default labels 1x
    alone there), the decades alone where they span more than four."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    v = [x for x in values if x > 0] or [1.0]
    decades = math.log10(max(v) / min(v))
    subs = ((1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0) if decades <= 1 else (1.0, 2.0, 3.0, 5.0)
            if decades <= 2 else (1.0, 2.0, 5.0) if decades <= 4 else (1.0,))
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: fmt % y))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))


def finish_figure(plt, fig, ax, ylabel, title, path):
    """The axes' labels, grid and legend of a figure on message sizes; saves it to path."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel(SIZE_LABEL)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_figure(plt, sub, series, path):
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in series:
        line, = ax.plot(s["sizes"], s["mpi"], "-." if s["osu"] else ":", marker="o",
                        label=s["tag"] + s["base"])
        ax.plot(s["sizes"], s["pic"], "--" if s["osu"] else "-", marker="s",
                color=line.get_color(), label=s["tag"] + "picoll")
        if s["nccl"]:
            ax.plot(s["sizes"], s["nccl"], "-.", marker="^", color=line.get_color(),
                    label=s["tag"] + "NCCL")
    log_ticks(ax, [x for s in series for x in s["mpi"] + s["pic"] + (s["nccl"] or [])], "%g")
    finish_figure(plt, fig, ax, LATENCY_LABEL, "Latency: " + sub, path)


def speedup_figure(plt, sub, series, path):
    fig, ax = plt.subplots(figsize=(8, 5))
    for s in series:
        line, = ax.plot(s["sizes"], s["med"], "--" if s["osu"] else "-", marker="o",
                        label=s["tag"] + "median (%s / picoll)" % s["base"])
        if s["lo"] != s["hi"]:
            ax.fill_between(s["sizes"], s["lo"], s["hi"], color=line.get_color(), alpha=0.18,
                            linewidth=0, label=s["tag"] + "min-max over rounds")
    ax.axhline(1.0, color="gray", linewidth=1)
    # a ratio: 0.5x as far below 1x as 2x is above it, and one wild round does not flatten the rest
    log_ticks(ax, [1.0] + [x for s in series for x in s["lo"] + s["hi"]], "%gx")
    finish_figure(plt, fig, ax, speedup_label(series), "Speed-up: " + sub, path)


def plot_matplotlib(plt, rows, outdir):
    files = []
    for (coll, mem), (sub, series) in plot_series(rows).items():
        lat_name, spd_name = plot_names(coll, mem)
        latency_figure(plt, sub, series, os.path.join(outdir, lat_name))
        speedup_figure(plt, sub, series, os.path.join(outdir, spd_name))
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
                  "set xlabel '%s'\nset key noenhanced\n"
                  "set output '%s'\nset logscale y\nset ylabel '%s'\n"
                  "set title 'Latency: %s' noenhanced\nplot %s\n"
                  "set output '%s'\nset ylabel '%s'\n"
                  "set title 'Speed-up: %s' noenhanced\nplot %s, 1 title '' lc rgb 'gray'\n"
                  % (SIZE_LABEL, os.path.join(outdir, lat_name), LATENCY_LABEL, sub, ", ".join(lat),
                     os.path.join(outdir, spd_name), speedup_label(series), sub, ", ".join(spd)))
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode == 0:
            files += [lat_name, spd_name]
        else:
            log("gnuplot failed: %s" % r.stderr.strip())
    return files


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
        r = subprocess.run([DEBIAN_PYTHON, os.path.join(HERE, "driver.py"), "--replot", outdir],
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

