#!/usr/bin/env python3
"""CTest checker of the osu-bench programs: runs a command and checks its output format.

  check_output.py [checks] -- COMMAND ARGS...

Checks (all by default on a successful run):
  the first line is "# OSU MPI[-CUDA] <Title> Latency Test", a "# Datatype: MPI_X." line follows,
  the column header starts with "# Size" and names the columns the options ask for, there is one
  row per expected message size in order, every field of a row parses (size an integer, numbers
  floats, Iterations an integer), min <= avg <= max with -f, and the Validation column says Pass.

  --title T           Allreduce, Allgather, Alltoall
  --sizes MIN:MAX     the -m given to the program, with --factor F and --esize BYTES
  --full              -f columns;   --validate   -c column;   --ab   the A/B columns, and under
                      each row a "# rounds A/B (us): A/B ..." line, one pair per round, whose
                      medians are the row's two latencies
  --baseline B        mpi (default) or staged: how the A column of --ab (and the driver's
                      tables and CSV) must be named; staged also wants the line saying how it
                      stages
  --expect-fail       the run must exit non-zero, with a Fail row and a validation message
  --expect-stderr RE  a line of stderr must match RE (with --expect-fail: which column failed)
  --expect-error RE   the run must exit non-zero, with a line of stderr matching RE
  --cuda-or-error     -d cuda: either a GPU ran it (checked as above) or it failed with one
                      clear line saying why
  --driver DIR        the command is the driver writing to DIR: check results.csv and results.md
  --stability DIR     the command is the driver's --stability mode writing to DIR, with --jobs N
                      jobs: its tables, spreads and verdicts printed, stability.csv and stability.md
  --driver-calls-max N  the CUDA driver counted its calls: every row is followed by its
                      "# driver calls per call: X (...)" line, with X at most N (with --driver:
                      every row of results.csv, the printed tables and results.md have the count)
  --driver-calls-exempt LIST  entry points (comma-separated) left out of that count, each allowed
                      at most once per call (those that only read the calling thread's state)
  --expect-path RE    picoll ran the calls of every row on the path RE names: a "# picoll path: P"
                      line under each row (with --driver: the picoll_path of every CSV row)
  --nccl              --ab --nccl ran NCCL: one "# nccl: NCCL x.y.z (...)" line, the columns
                      NCCL(us), picoll/NCCL, NCCL BusBW(MB/s) after picoll's, and rounds lines
                      "# rounds A/B/C (us): A/B/C ..." whose medians are the rows' three latencies
                      (with --driver: the NCCL columns of the tables, results.csv and results.md)
  --nccl-skipped RE   --nccl skipped its column: one line "# nccl: skipped: " matching RE, no
                      NCCL column and two latencies per round (with --driver: the line printed
                      and in results.md, and the CSV's NCCL fields empty)
  --enqueue, --graph  the stream-ordered columns ran: one "# enqueue: MPIX_..." ("# graph: ...")
                      line, the columns Enqueue(us) (Graph(us)) before Validation, and under every
                      row "# stream calls ran: enqueue N of N, graph N of N" (every call issued
                      ran); with --ab, a "# rounds enqueue/graph (us): E/G ..." line whose medians
                      are the row's
  --stream-calls N    each of those columns issued N calls per size (warm-up, timed, validation)
  --stream-skipped RE the stream columns asked for were skipped: "# enqueue: skipped: RE" and/or
                      "# graph: skipped: RE" lines (at least one), no such column, no calls line
  --floor NP          --floor ran on NP ranks: one "# floor: ..." line with both launch floors,
                      and under every row a "# floor (us): ..." line whose bytes are what the
                      collective (--title) must move at that size on NP ranks, whose floors are
                      the larger of the launch's and the copy's, and whose ratios are the row's
                      latencies over them
  --host-floor NP     --floor ran on host buffers on NP ranks (issue 52): one "# host floor: ..."
                      line, and under every row a "# rounds floor (us):" line of one positive
                      time per --ab round and a "# host floor (us): F (B B read and written ...);
                      picoll/floor X, MPI/floor Y" line: F their median, B what the collective
                      moves at that size on NP ranks, X and Y the row's latencies over F
  --barrier-floor, --osu-timing, --osu-path RE: check_modes.py
"""

import argparse
import csv
import os
import re
import subprocess
import sys

from bench_rows import size_list
from statistics import median
from check_modes import check_barrier_floor, check_osu_timing


def fail(msg, out="", err=""):
    print("FAIL: " + msg)
    if out:
        print("---- stdout\n" + out)
    if err:
        print("---- stderr\n" + err)
    sys.exit(1)


def expected_sizes(spec, factor, esize):
    lo, _, hi = spec.partition(":")
    return size_list(int(lo), int(hi), factor, esize)


DRIVER_CALLS = re.compile(r"# driver calls per call: (\d+(?:\.\d+)?)(?: \((\w+ \d+(?:\.\d+)?"
                          r"(?:, \w+ \d+(?:\.\d+)?)*)\))?(?:; ranks differ, the least \S+)?$")


def check_driver_calls(a, lines, out, err):
    """Each row's next line is its driver-call count, within the limit, its entry points adding up."""
    for i, row in enumerate(lines):
        if not row.strip() or row.startswith("#"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        m = DRIVER_CALLS.match(nxt)
        if not m:
            fail("row %r is not followed by a '# driver calls per call: N (...)' line (got %r)"
                 % (row, nxt), out, err)
        total = float(m.group(1))
        parts = [float(p.rsplit(" ", 1)[1]) for p in m.group(2).split(", ")] if m.group(2) else []
        if "ranks differ" not in nxt and abs(sum(parts) - total) > 0.011 * max(1, len(parts)):
            fail("driver calls per entry point do not add up to %s in %r" % (m.group(1), nxt), out, err)
        exempt = 0.0
        for p in (m.group(2).split(", ") if m.group(2) else []):
            name, n = p.rsplit(" ", 1)
            if name in a.driver_calls_exempt:
                if float(n) > 1:
                    fail("%s called %s times per call at size %s, more than once: %r"
                         % (name, n, row.split()[0], nxt), out, err)
                exempt += float(n)
        if total - exempt > a.driver_calls_max:
            fail("%g driver calls per call at size %s (%s exempt), more than %g: %r"
                 % (total - exempt, row.split()[0], ", ".join(a.driver_calls_exempt) or "none",
                    a.driver_calls_max, nxt), out, err)
        print("size %s: %s" % (row.split()[0], nxt[2:]))


def check_paths(a, lines, out, err):
    """Each row has a "# picoll path:" line among the two after it, naming the expected path."""
    for i, row in enumerate(lines):
        if not row.strip() or row.startswith("#"):
            continue
        paths = [l[len("# picoll path: "):] for l in lines[i + 1:i + 3] if l.startswith("# picoll path: ")]
        if not paths:
            fail("row %r has no '# picoll path:' line under it" % row, out, err)
        if not re.fullmatch(a.expect_path, paths[0]):
            fail("size %s ran on %r, expected %r" % (row.split()[0], paths[0], a.expect_path), out, err)


ROUNDS = re.compile(r"# rounds (A/B|A/B/C) \(us\):((?: [0-9.]+(?:/[0-9.]+){1,2})+)$")


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def check_rounds(lines, nccl, out, err):
    """--ab: each row has its "# rounds" line among the three after it (after the driver-call and
    path lines), as many rounds under every row, their medians the row's A and B columns (and with
    the NCCL column, C and the row's NCCL latency)."""
    counts = set()
    tag = "A/B/C" if nccl else "A/B"
    for i, row in enumerate(lines):
        if not row.strip() or row.startswith("#"):
            continue
        found = [ROUNDS.match(l) for l in lines[i + 1:i + 4] if l.startswith("# rounds")]
        if not found or not found[0] or found[0].group(1) != tag:
            fail("row %r has no '# rounds %s (us): %s ...' line under it" % (row, tag, tag), out, err)
        pairs = [[float(x) for x in p.split("/")] for p in found[0].group(2).split()]
        if any(len(p) != len(tag.split("/")) for p in pairs):
            fail("row %r: a round without its %d latencies" % (row, len(tag.split("/"))), out, err)
        counts.add(len(pairs))
        f = row.split()
        want_cols = [(0, float(f[1])), (1, float(f[2]))] + ([(2, float(f[6]))] if nccl else [])
        for col, want in want_cols:
            got = median([p[col] for p in pairs])
            if abs(got - want) > 0.011 + 0.001 * want:
                fail("row %r: the median of its rounds' %s column is %.3f" % (row, "ABC"[col], got),
                     out, err)
    if len(counts) > 1:
        fail("rows with different numbers of rounds: %s" % sorted(counts), out, err)


def check_nccl_line(a, lines, header, out, err):
    """--nccl: the one "# nccl: NCCL ..." line and the NCCL columns; --nccl-skipped: the one skip
    line, and no column."""
    said = [l for l in lines if l.startswith("# nccl: ")]
    if a.nccl:
        if len(said) != 1 or not re.match(r"# nccl: NCCL \d+\.\d+\.\d+ \(", said[0]):
            fail("expected one '# nccl: NCCL x.y.z (...)' line, got %r" % said, out, err)
    elif a.nccl_skipped is not None:
        if len(said) != 1 or not re.match("# nccl: skipped: " + a.nccl_skipped, said[0]):
            fail("expected one '# nccl: skipped: %s' line, got %r" % (a.nccl_skipped, said), out, err)
        print(said[0])
    if not a.nccl and "NCCL(us)" in header:
        fail("an NCCL column although NCCL did not run: %r" % header, out, err)


STREAM_CALLS = re.compile(r"# stream calls ran: (\w+ \d+ of \d+(?:, \w+ \d+ of \d+)*)$")


def stream_columns(a):
    return [c for c, on in (("enqueue", a.enqueue), ("graph", a.graph)) if on]


def rows_below(lines):
    """Each row of the table with the '#' lines under it."""
    for i, row in enumerate(lines):
        if not row.strip() or row.startswith("#"):
            continue
        below = []
        for l in lines[i + 1:]:
            if not l.startswith("#"):
                break
            below.append(l)
        yield row, below


def check_stream(a, lines, header, columns, out, err):
    """--enqueue/--graph: the columns' lines, their calls all run under every row, and with --ab
    their rounds; --stream-skipped: only skip lines."""
    said = [l for l in lines if re.match(r"# (enqueue|graph): ", l)]
    if a.stream_skipped is not None:
        if not said or not all(re.match(r"# (enqueue|graph): skipped: " + a.stream_skipped, l)
                               for l in said):
            fail("expected '# enqueue|graph: skipped: %s' lines, got %r" % (a.stream_skipped, said),
                 out, err)
        if "Enqueue(us)" in header or "Graph(us)" in header or \
                any(l.startswith("# stream calls ran") for l in lines):
            fail("a stream column although it was skipped", out, err)
        for l in said:
            print(l)
        return
    cols = stream_columns(a)
    for c in cols:
        if len([l for l in said if l.startswith("# %s: MPIX_" % c)]) != 1:
            fail("expected one '# %s: MPIX_...' line, got %r" % (c, said), out, err)
    if not cols:
        if "Enqueue(us)" in header or "Graph(us)" in header:
            fail("a stream column although none was asked for: %r" % header, out, err)
        return
    for row, below in rows_below(lines):
        m = [STREAM_CALLS.match(l) for l in below if l.startswith("# stream calls ran")]
        if not m or not m[0]:
            fail("row %r has no '# stream calls ran: ...' line under it" % row, out, err)
        got = {}
        for part in m[0].group(1).split(", "):
            name, ran, _, issued = part.split()
            got[name] = (int(ran), int(issued))
        if sorted(got) != sorted(cols):
            fail("row %r: calls of %s, expected %s" % (row, sorted(got), cols), out, err)
        for name, (ran, issued) in got.items():
            if ran != issued or issued == 0 or (a.stream_calls and issued != a.stream_calls):
                fail("row %r: %s ran %d of %d calls (expected %s issued, all run)"
                     % (row, name, ran, issued, a.stream_calls or "some"), out, err)
        f = row.split()
        if a.ab:
            tag = "/".join(cols)
            r = [l for l in below if l.startswith("# rounds %s (us):" % tag)]
            if len(r) != 1:
                fail("row %r has no '# rounds %s (us):' line under it" % (row, tag), out, err)
            rounds = [[float(x) for x in p.split("/")] for p in r[0].split(":", 1)[1].split()]
            for k, c in enumerate(cols):
                want = float(f[1 + columns.index(c.capitalize() + "(us)")])
                if any(len(p) != len(cols) for p in rounds) or \
                        abs(median([p[k] for p in rounds]) - want) > 0.011 + 0.001 * want:
                    fail("row %r: the median of its %s rounds is not the row's" % (row, c), out, err)
    print("stream columns %s: every call issued ran, under each row" % "/".join(cols))


FLOOR_HEAD = re.compile(r"# floor: every rank at once, .* launched and waited for ([0-9.]+) us "
                        r"\(blocking floor\), queued on the stream ([0-9.]+) us per launch")
FLOOR_ROW = re.compile(r"# floor \(us\): blocking ([0-9.]+), stream ([0-9.]+) \(copy ([0-9.]+): "
                       r"(\d+) B read and written, [0-9.]+ GB/s\); picoll/floor ([0-9.]+)x"
                       r"(?:, enqueue/floor ([0-9.]+)x)?(?:, graph/floor ([0-9.]+)x)?$")


def check_floor(a, lines, columns, out, err):
    """--floor NP: the floor's header, and under each row its floors and the row's ratios."""
    head = [FLOOR_HEAD.match(l) for l in lines if l.startswith("# floor: ")]
    if len(head) != 1 or not head[0]:
        fail("expected one '# floor: every rank at once, ...' line, got %r"
             % [l for l in lines if l.startswith("# floor: ")], out, err)
    launch, queue = float(head[0].group(1)), float(head[0].group(2))
    if launch <= 0 or queue <= 0:
        fail("a launch floor is not positive: %r" % head[0].group(0), out, err)
    near = lambda x, y: abs(x - y) <= 0.006 + 0.002 * abs(y)
    for row, below in rows_below(lines):
        m = [FLOOR_ROW.match(l) for l in below if l.startswith("# floor (us): ")]
        if len(m) != 1 or not m[0]:
            fail("row %r has no '# floor (us): ...' line under it" % row, out, err)
        f, g = row.split(), m[0].groups()
        size, np_ = int(f[0]), a.floor
        moved = {"Allgather": (np_ + 1) * size, "Alltoall": 2 * np_ * size}.get(a.title, 2 * size)
        blocking, stream, copy = float(g[0]), float(g[1]), float(g[2])
        if int(g[3]) != moved or copy <= 0:
            fail("row %r: floor of %s B (copy %s us), expected %d B" % (row, g[3], g[2], moved),
                 out, err)
        if not near(blocking, max(launch, copy)) or not near(stream, max(queue, copy)):
            fail("row %r: floors %s/%s are not the larger of launch and copy" % (row, g[0], g[1]),
                 out, err)
        pic = float(f[1 + columns.index("picoll(us)")])
        if abs(float(g[4]) - pic / blocking) > 0.002 + 0.002 * pic / blocking:
            fail("row %r: picoll/floor %s is not %.3f" % (row, g[4], pic / blocking), out, err)
        for k, c in ((5, "Enqueue(us)"), (6, "Graph(us)")):
            if (g[k] is not None) != (c in columns):
                fail("row %r: a %s ratio without its column, or none with it" % (row, c), out, err)
            if g[k] is not None:
                want = float(f[1 + columns.index(c)]) / stream
                if abs(float(g[k]) - want) > 0.002 + 0.002 * want:
                    fail("row %r: %s/floor %s is not %.3f" % (row, c, g[k], want), out, err)
    print("floor: launch %.2f us, queue %.2f us; a floor line under each row" % (launch, queue))


HOST_FLOOR_ROW = re.compile(r"^# host floor \(us\): ([0-9.]+) \((\d+) B read and written, [0-9.]+ GB/s\); "
                            r"picoll/floor ([0-9.]+)x, MPI/floor ([0-9.]+)x$")
CROSS_FLOOR_ROW = re.compile(r"^# cross floor \(us\): ([0-9.]+) \((\d+) B read and written, out of the next "
                             r"rank's memory, [0-9.]+ GB/s\); picoll/cross ([0-9.]+)x, MPI/cross ([0-9.]+)x$")


def check_host_floor(a, lines, columns, out, err):
    """--host-floor NP: the header, and under each row its rounds' floors, their median and the
    row's ratios to it; then the same of the cross floor (the ranks of these tests share one
    node)."""
    if len([l for l in lines if l.startswith("# host floor: ")]) != 1:
        fail("expected one '# host floor: ...' line", out, err)
    for row, below in rows_below(lines):
        ab = [ROUNDS.match(l) for l in below if l.startswith("# rounds A/B")]
        nrounds = len(ab[0].group(2).split()) if ab and ab[0] else -1
        f = row.split()
        size, np_ = int(f[0]), a.host_floor
        moved = {"Allgather": (np_ + 1) * size, "Alltoall": 2 * np_ * size}.get(a.title, 2 * size)
        for what, pattern, prefix in (("floor", HOST_FLOOR_ROW, "# host floor (us): "),
                                      ("cross", CROSS_FLOOR_ROW, "# cross floor (us): ")):
            rounds = [l for l in below if l.startswith("# rounds %s (us):" % what)]
            m = [pattern.match(l) for l in below if l.startswith(prefix)]
            if len(rounds) != 1 or len(m) != 1 or not m[0]:
                fail("row %r has no '# rounds %s (us):' and '%s' lines under it"
                     % (row, what, prefix.strip()), out, err)
            floors = [float(x) for x in rounds[0][len("# rounds %s (us):" % what):].split()]
            g = m[0].groups()
            if len(floors) != nrounds or min(floors) <= 0 or int(g[1]) != moved:
                fail("row %r: %s floors %s of %s B, expected one positive a round (%d) of %d B"
                     % (row, what, floors, g[1], nrounds, moved), out, err)
            fl = float(g[0])
            if abs(fl - median(floors)) > 0.006 + 0.001 * fl:
                fail("row %r: %s floor %s is not its rounds' median" % (row, what, g[0]), out, err)
            for k, c in ((2, "picoll(us)"), (3, "MPI(us)")):
                lat = float(f[1 + columns.index(c)])
                want = lat / fl
                # both printed rounded: the row's latency to 0.01 us, the floor to 0.001
                if abs(float(g[k]) - want) > 0.002 + want * (0.006 / lat + 0.0006 / fl):
                    fail("row %r: %s/%s %s is not %.3f" % (row, c, what, g[k], want), out, err)
    print("host floor: a floor and a cross floor in every round under each row")


def check_format(a, out, err):
    lines = out.splitlines()
    if not lines:
        fail("no output", out, err)
    m = re.match(r"# OSU MPI(-CUDA)? (\w+) Latency Test", lines[0])
    if not m:
        fail("first line is not '# OSU MPI ... Latency Test'", out, err)
    if a.title and m.group(2) != a.title:
        fail("title %r, expected %r" % (m.group(2), a.title), out, err)
    if not re.match(r"# Datatype: MPI_[A-Z]+\.$", lines[1]):
        fail("second line is not '# Datatype: MPI_X.'", out, err)
    headers = [l for l in lines if l.startswith("# Size")]
    if len(headers) != 1:
        fail("expected one '# Size' column header, found %d" % len(headers), out, err)
    header = headers[0]
    if a.ab:
        base = "staged MPI" if a.baseline == "staged" else "MPI"
        columns = [base + "(us)", "picoll(us)", "Speed-up", base + " BusBW(MB/s)",
                   "picoll BusBW(MB/s)"]
        # "MPI(us)" is found inside "staged MPI(us)": a plain header must not say staged
        if (a.baseline == "staged") != ("staged MPI(us)" in header):
            fail("A column named %r, expected the %s baseline" % (header, a.baseline), out, err)
        staging = [l for l in lines if l.startswith("# staged MPI: each timed call copies in")]
        if a.baseline == "staged" and len(staging) != 1:
            fail("no '# staged MPI: ...' line saying how the A column stages", out, err)
        check_nccl_line(a, lines, header, out, err)
        if a.nccl:
            columns += ["NCCL(us)", "picoll/NCCL", "NCCL BusBW(MB/s)"]
    else:
        columns = ["Avg Latency(us)"]
        if a.full:
            columns += ["Min Latency(us)", "Max Latency(us)", "Iterations", "Bus BW(MB/s)"]
    if a.stream_skipped is None:
        columns += [c.capitalize() + "(us)" for c in stream_columns(a)]
    if a.validate:
        columns.append("Validation")
    if not header.startswith("# Size       Avg Latency(us)") and not a.ab:
        fail("column header does not start as OSU's '# Size       Avg Latency(us)'", out, err)
    pos = 0
    for c in columns:
        at = header.find(c, pos)
        if at < 0:
            fail("column %r missing or out of order in %r" % (c, header), out, err)
        pos = at + len(c)
    rows = [l for l in lines if l.strip() and not l.startswith("#")]
    sizes = []
    fails = 0
    for row in rows:
        f = row.split()
        if len(f) != 1 + len(columns):
            fail("row %r has %d fields, expected %d" % (row, len(f), 1 + len(columns)), out, err)
        try:
            sizes.append(int(f[0]))
            nums = [float(x) for x in f[1:len(f) - (1 if a.validate else 0)]]
        except ValueError:
            fail("a field of row %r does not parse" % row, out, err)
        if any(x < 0 or x != x for x in nums):
            fail("negative or NaN number in row %r" % row, out, err)
        if a.full and not a.ab:
            avg, lo, hi, iters = nums[0], nums[1], nums[2], f[4]
            if not (lo <= avg + 0.011 and avg <= hi + 0.011):
                fail("min <= avg <= max does not hold in row %r" % row, out, err)
            if not iters.isdigit():
                fail("Iterations is not an integer in row %r" % row, out, err)
        if a.validate:
            if f[-1] not in ("Pass", "Fail"):
                fail("Validation is %r in row %r" % (f[-1], row), out, err)
            fails += f[-1] == "Fail"
    if a.sizes:
        want = expected_sizes(a.sizes, a.factor, a.esize)
        if sizes != want:
            fail("sizes %s, expected %s" % (sizes, want), out, err)
    if a.ab and rows:
        check_rounds(lines, a.nccl, out, err)
    if rows:
        check_stream(a, lines, header, columns, out, err)
    if rows and a.floor:
        check_floor(a, lines, columns, out, err)
    if rows and a.host_floor:
        check_host_floor(a, lines, columns, out, err)
    if rows and a.barrier_floor:
        check_barrier_floor(lines, columns, out, err, fail, rows_below)
    if rows and a.osu_timing:
        check_osu_timing(a, lines, columns, out, err, fail, rows_below)
    # the path first: a count is only meaningful on the path it was expected on
    if a.expect_path:
        check_paths(a, lines, out, err)
    if a.driver_calls_max is not None:
        check_driver_calls(a, lines, out, err)
    return fails


def read_results(folder, stem, out, err):
    """FOLDER/STEM.csv's rows and FOLDER/STEM.md's text; the check fails where either is missing."""
    csv_path = os.path.join(folder, stem + ".csv")
    md_path = os.path.join(folder, stem + ".md")
    for p in (csv_path, md_path):
        if not os.path.exists(p):
            fail("the driver wrote no " + p, out, err)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    with open(md_path) as f:
        return rows, f.read()


def check_driver(a, out, err):
    rows, md = read_results(a.driver, "results", out, err)
    if not rows:
        fail("results.csv has no rows", out, err)
    name = "%s MPI" % ("staged" if a.baseline == "staged" else "plain")
    for r in rows:
        float(r["mpi_us"]), float(r["picoll_us"]), float(r["speedup"])
        if r["validation"] != "Pass":
            fail("results.csv row not validated: %s" % r, out, err)
        if r["baseline"] != a.baseline:
            fail("results.csv row with baseline %r, expected %r: %s" % (r["baseline"], a.baseline, r),
                 out, err)
        # the ratio's spread over rounds, and every round's latencies
        lo, med, hi = float(r["ratio_min"]), float(r["ratio_median"]), float(r["ratio_max"])
        if not lo <= med <= hi or float(r["speedup"]) != med:
            fail("results.csv row whose ratio min <= median <= max (= speedup) does not hold: %s" % r,
                 out, err)
        n = int(r["rounds"])
        if len(r["rounds_mpi_us"].split()) != n or len(r["rounds_picoll_us"].split()) != n:
            fail("results.csv row without its %d rounds' latencies: %s" % (n, r), out, err)
        if r.get("unstable") is None or r["unstable"] != unstable_sides(r):
            fail("results.csv row whose unstable column is not %r: %s" % (unstable_sides(r), r),
                 out, err)
    for what in ("load before: ", "load after: "):
        if what not in out or "- " + what not in md:
            fail("the driver printed (or wrote to results.md) no %r line" % what, out, err)
    for r in [r for r in rows if r["source"] != "osu"]:
        line = "%s %s %s np %s: lowest median " % (r["collective"], r["memory"], r["datatype"], r["np"])
        if line not in out or line not in md:
            fail("the driver printed (or wrote to results.md) no summary line %r..." % line, out, err)
    colls = sorted({r["collective"] for r in rows})
    if not re.search(r"^ +size \(B\) .* validation +unstable\b", out, re.M) or \
            md.count("| validation | unstable |") < len(colls):
        fail("the driver's printed tables or results.md lack the unstable column", out, err)
    if name + " (us)" not in out or "speed-up: min median max" not in out:
        fail("the driver printed no side-by-side table with a %r column" % name, out, err)
    if md.count("| size (B) | %s (us) | picoll (us) | speed-up min | speed-up median | speed-up max |"
                % name) < len(colls):
        fail("results.md lacks a table per collective with a %r column" % name, out, err)
    # allreduce also runs with OSU's default datatype, and a last table sets the speed-ups side by side
    types = {r["datatype"] for r in rows if r["collective"] == "allreduce"}
    if types and "MPI_CHAR" not in types:
        fail("no allreduce rows with MPI_CHAR, OSU's default datatype (rows have %s)" % sorted(types),
             out, err)
    if types and len(types) > 1:
        glance = "allreduce, %s buffers: speed-up over %s by datatype" % (rows[0]["memory"], name)
        if glance not in out or glance not in md:
            fail("the driver printed (or wrote to results.md) no %r table" % glance, out, err)
    check_driver_nccl(a, rows, colls, md, out, err)
    if a.expect_path:
        for r in rows:
            if not re.fullmatch(a.expect_path, r.get("picoll_path") or ""):
                fail("results.csv row on path %r, expected %r: %s"
                     % (r.get("picoll_path"), a.expect_path, r), out, err)
    if a.driver_calls_max is not None:
        for r in rows:
            if not r.get("driver_calls"):
                fail("results.csv row without its driver-call count: %s" % r, out, err)
            if float(r["driver_calls"]) > a.driver_calls_max:
                fail("%s driver calls per picoll call, more than %g: %s"
                     % (r["driver_calls"], a.driver_calls_max, r), out, err)
            print("%s %s B: %s driver calls per call %s"
                  % (r["collective"], r["size_bytes"], r["driver_calls"], r["driver_calls_detail"]))
        if out.count("driver calls per picoll call") < len(colls) or \
                md.count(" driver calls per picoll call |") < len(colls):
            fail("the driver's printed tables or results.md lack the driver-call column", out, err)


def unstable_sides(row):
    """What the driver's unstable column must say of a results.csv row: the sides whose slowest
    round took over 2x their fastest, joined by "+"."""
    sides = []
    for side in ("mpi", "picoll", "nccl"):
        v = [float(x) for x in (row.get("rounds_%s_us" % side) or "").split()]
        if v and min(v) > 0 and max(v) / min(v) > 2.0:
            sides.append(side)
    return "+".join(sides)


STABILITY_JOB = re.compile(r"^ +(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+)x +(\S+) +([0-9.]+|-) +([0-9.]+|-)"
                           r" +([0-9.]+|-)(?: +([0-9.]+) +([0-9.]+)x)?(?: +([0-9.]+) +([0-9.]+)x)?$")
STABILITY_FLOOR_LINE = re.compile(r"^the floor's medians across jobs: min ([0-9.]+), median ([0-9.]+), "
                                  r"max ([0-9.]+) us; max/min ([0-9.]+)x; picoll/floor across jobs "
                                  r"([0-9.]+)x to ([0-9.]+)x \(max/min ([0-9.]+)x\); correlation of "
                                  r"picoll's and the floor's medians (-|-?[0-9.]+), of their (\d+) "
                                  r"rounds (-|-?[0-9.]+)$")
STABILITY_CROSS_LINE = re.compile(r"^the cross floor's medians across jobs: min ([0-9.]+), median "
                                  r"([0-9.]+), max ([0-9.]+) us; max/min ([0-9.]+)x; picoll/cross "
                                  r"across jobs ([0-9.]+)x to ([0-9.]+)x \(max/min ([0-9.]+)x\); "
                                  r"correlation of picoll's and the cross floor's medians "
                                  r"(-|-?[0-9.]+), of the MPI's and the cross floor's (-|-?[0-9.]+)$")
STABILITY_SPREAD_LINE = re.compile(r"^(.+)'s medians across jobs: min ([0-9.]+), median ([0-9.]+), "
                                   r"max ([0-9.]+) us; max/min ([0-9.]+)x$")
STABILITY_VERDICT = re.compile(r"^stability: picoll's median within ([0-9.]+)x across jobs: "
                               r"(yes|NO) \(([0-9.]+)x\); never slower than (.+)'s in the same job: "
                               r"(yes|NO \(job [0-9, ]+\))")


def check_stability(a, out, err):
    """--stability DIR: per collective, np and size, the title, --jobs job lines (medians and their
    quotient, as stability.csv has them), both sides' spread across jobs and the verdict that
    follows from them, printed and in stability.md."""
    rows, md = read_results(a.stability, "stability", out, err)
    lines = out.splitlines()
    keys = sorted({(r["collective"], r["memory"], int(r["np"]), int(r["size_bytes"])) for r in rows})
    if not keys:
        fail("stability.csv has no rows", out, err)
    for coll, mem, np_, size in keys:
        mine = [r for r in rows if (r["collective"], r["memory"], int(r["np"]),
                                    int(r["size_bytes"])) == (coll, mem, np_, size)]
        if [int(r["job"]) for r in mine] != list(range(1, a.jobs + 1)):
            fail("stability.csv: jobs %s of %s %s np %d at %d B, expected 1..%d"
                 % ([r["job"] for r in mine], coll, mem, np_, size, a.jobs), out, err)
        for k in range(1, a.jobs + 1):
            if "[%s %s np %d, job %d of %d]" % (coll, mem, np_, k, a.jobs) not in out:
                fail("no progress line of job %d of %d" % (k, a.jobs), out, err)
        head = "%s, %s buffers, np %d, " % (coll, mem, np_)
        at = [i for i, l in enumerate(lines) if l.startswith(head) and " jobs of " in l]
        if not at:
            fail("no table titled %r..." % head, out, err)
        i = at[0]
        # host buffers: the machine's memory copy in the same rounds (osu-bench --floor, issue 52)
        floored = mem == "host"
        if not re.match(r"^ +job +(plain|staged) MPI median \(us\) +picoll median \(us\) +"
                        r"(plain|staged) MPI/picoll +unstable +steal % +max steal % +others %"
                        + (r" +floor median \(us\) +picoll/floor +cross median \(us\) +"
                           r"picoll/cross$" if floored else "$"),
                        lines[i + 1]):
            fail("no column header under %r: %r" % (lines[i], lines[i + 1]), out, err)
        pics, mpis, floors, crosses = [], [], [], []
        for k, r in enumerate(mine):
            m = STABILITY_JOB.match(lines[i + 2 + k])
            if not m or int(m.group(1)) != k + 1:
                fail("job line %d of %r is %r" % (k + 1, lines[i], lines[i + 2 + k]), out, err)
            mpi, pic = float(m.group(2)), float(m.group(3))
            if (mpi, pic) != (float(r["mpi_us"]), float(r["picoll_us"])) or \
                    abs(float(m.group(4)) - mpi / pic) > 0.006 + 0.003 * mpi / pic or \
                    (m.group(5) if m.group(5) != "-" else "") != r["unstable"] or \
                    [x if x != "-" else "" for x in m.groups()[5:8]] != \
                    [r["job_steal_pct"], r["job_steal_max_pct"], r["job_others_pct"]]:
                fail("job line %r is not stability.csv's %s" % (lines[i + 2 + k], r), out, err)
            # the machine's shares of the job: percentages, on Linux always there
            for f in ("job_steal_pct", "job_steal_max_pct", "job_others_pct"):
                if os.path.exists("/proc/stat") and not 0.0 <= float(r[f] or -1) <= 100.0:
                    fail("stability.csv: %s of job %s is %r, not a percentage" % (f, r["job"], r[f]),
                         out, err)
            if floored:
                # the floor: every round's, their median, picoll's median over it
                rf = [float(x) for x in r["rounds_floor_us"].split()]
                fl = float(m.group(9) or -1)
                if len(rf) != len(r["rounds_picoll_us"].split()) or min(rf) <= 0 or \
                        abs(median(rf) - fl) > 0.006 + 0.001 * fl or fl != float(r["floor_us"]) or \
                        abs(float(m.group(10)) - pic / fl) > 0.002 + 0.002 * pic / fl or \
                        m.group(10) != r["picoll_over_floor"]:
                    fail("job line %r: the floor is not stability.csv's %s" % (lines[i + 2 + k], r),
                         out, err)
                floors.append(fl)
                # and the cross floor (the driver's ranks share one node)
                rc = [float(x) for x in r["rounds_cross_us"].split()]
                cr = float(m.group(11) or -1)
                if len(rc) != len(rf) or min(rc) <= 0 or abs(median(rc) - cr) > 0.006 + 0.001 * cr or \
                        cr != float(r["cross_us"]) or \
                        abs(float(m.group(12)) - pic / cr) > 0.002 + 0.002 * pic / cr or \
                        m.group(12) != r["picoll_over_cross"]:
                    fail("job line %r: the cross floor is not stability.csv's %s"
                         % (lines[i + 2 + k], r), out, err)
                crosses.append(cr)
            elif m.group(9) is not None:
                fail("job line %r has a floor on %s buffers" % (lines[i + 2 + k], mem), out, err)
            mpis.append(mpi)
            pics.append(pic)
        j = i + 2 + len(mine)
        spreads = [STABILITY_SPREAD_LINE.match(l) for l in lines[j:j + 2]]
        for m, v in zip(spreads, (mpis, pics)):
            if not m:
                fail("no spread line under %r: %r" % (lines[i], lines[j:j + 2]), out, err)
            want = (min(v), median(v), max(v), max(v) / min(v))
            got = tuple(float(x) for x in m.groups()[1:])
            if any(abs(g - w) > 0.006 + 0.001 * w for g, w in zip(got, want)):
                fail("spread line %r, expected %s" % (m.group(0), want), out, err)
        if floored:
            f = STABILITY_FLOOR_LINE.match(lines[j + 2]) if len(lines) > j + 2 else None
            over = [p_ / f_ for p_, f_ in zip(pics, floors)]
            want = (min(floors), median(floors), max(floors), max(floors) / min(floors), min(over),
                    max(over), max(over) / min(over))
            if not f or any(abs(float(g) - w) > 0.006 + 0.002 * w
                            for g, w in zip(f.groups()[:7], want)):
                fail("no floor line under %r matching its jobs %s: %r"
                     % (lines[i], want, lines[j + 2:j + 3]), out, err)
            if int(f.group(9)) != sum(len(r["rounds_floor_us"].split()) for r in mine):
                fail("floor line %r: not every round counted" % f.group(0), out, err)
            j += 1
            c = STABILITY_CROSS_LINE.match(lines[j + 2]) if len(lines) > j + 2 else None
            over = [p_ / c_ for p_, c_ in zip(pics, crosses)]
            want = (min(crosses), median(crosses), max(crosses), max(crosses) / min(crosses),
                    min(over), max(over), max(over) / min(over))
            if not c or any(abs(float(g) - w) > 0.006 + 0.002 * w
                            for g, w in zip(c.groups()[:7], want)):
                fail("no cross floor line under %r matching its jobs %s: %r"
                     % (lines[i], want, lines[j + 2:j + 3]), out, err)
            j += 1
        v = STABILITY_VERDICT.match(lines[j + 2]) if len(lines) > j + 2 else None
        if not v:
            fail("no verdict line under %r: %r" % (lines[i], lines[j + 2:j + 3]), out, err)
        within = max(pics) / min(pics) <= float(v.group(1))
        slower = [k + 1 for k in range(len(pics)) if pics[k] > mpis[k]]
        if (v.group(2) == "yes") != within or (v.group(5) == "yes") != (not slower):
            fail("verdict %r does not follow from the jobs' medians" % v.group(0), out, err)
        if lines[i] not in md or "- " + lines[j + 2].split("  <- ")[0] not in md:
            fail("stability.md lacks the table or verdict of %r" % lines[i], out, err)
        print(lines[j + 2])


def check_driver_nccl(a, rows, colls, md, out, err):
    """--nccl: every row has its NCCL latency, picoll/NCCL (min <= median <= max, the median that
    of the rounds' NCCL / picoll) and every round's NCCL latency, and the printed tables and
    results.md the two columns; --nccl-skipped RE: the skip line printed and in results.md, no
    NCCL field or column."""
    if a.nccl:
        for r in rows:
            if not r["nccl_us"] or not r["rounds_nccl_us"]:
                fail("results.csv row without its NCCL latency: %s" % r, out, err)
            nccl = [float(x) for x in r["rounds_nccl_us"].split()]
            pic = [float(x) for x in r["rounds_picoll_us"].split()]
            float(r["nccl_us"])
            lo, med, hi = (float(r["ratio_nccl_" + k]) for k in ("min", "median", "max"))
            if len(nccl) != int(r["rounds"]) or not lo <= med <= hi:
                fail("results.csv row without its NCCL rounds or ratios: %s" % r, out, err)
            if abs(median([c / p for c, p in zip(nccl, pic)]) - med) > 0.0011 + 0.002 * med:
                fail("results.csv row whose ratio_nccl_median is not the median of its rounds' "
                     "NCCL / picoll: %s" % r, out, err)
            if abs(median(nccl) - float(r["nccl_us"])) > 0.011 + 0.001 * median(nccl):
                fail("results.csv row whose nccl_us is not the median of its rounds: %s" % r, out, err)
        head = re.compile(r"^ +size \(B\) .* NCCL \(us\) +picoll/NCCL ", re.M)
        if len(head.findall(out)) < len(colls) or \
                md.count("| validation | unstable | NCCL (us) | picoll/NCCL |") < len(colls):
            fail("the driver's printed tables or results.md lack the NCCL columns", out, err)
    elif a.nccl_skipped is not None:
        for r in rows:
            if r["nccl_us"] or r["rounds_nccl_us"] or r["ratio_nccl_median"]:
                fail("results.csv row with NCCL fields although NCCL was skipped: %s" % r, out, err)
        said = re.compile("^NCCL column skipped: .*" + a.nccl_skipped, re.M)
        if not said.search(out) or not re.search("^- .*skipped: .*" + a.nccl_skipped, md, re.M):
            fail("the driver printed (or wrote to results.md) no NCCL skip line matching %r"
                 % a.nccl_skipped, out, err)
        if "NCCL (us)" in out or "NCCL (us)" in md:
            fail("an NCCL column although NCCL was skipped", out, err)
        print(said.search(out).group(0))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--title")
    p.add_argument("--sizes")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--esize", type=int, default=1)
    p.add_argument("--full", action="store_true")
    p.add_argument("--validate", action="store_true")
    p.add_argument("--ab", action="store_true")
    p.add_argument("--baseline", choices=("mpi", "staged"), default="mpi")
    p.add_argument("--expect-fail", action="store_true")
    p.add_argument("--expect-stderr")
    p.add_argument("--expect-error")
    p.add_argument("--cuda-or-error", action="store_true")
    p.add_argument("--driver")
    p.add_argument("--stability")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--driver-calls-max", type=float)
    p.add_argument("--driver-calls-exempt", type=lambda v: [x for x in v.split(",") if x],
                   default=[])
    p.add_argument("--expect-path")
    p.add_argument("--nccl", action="store_true")
    p.add_argument("--nccl-skipped")
    p.add_argument("--enqueue", action="store_true")
    p.add_argument("--graph", action="store_true")
    p.add_argument("--stream-calls", type=int)
    p.add_argument("--stream-skipped")
    p.add_argument("--floor", type=int)
    p.add_argument("--host-floor", type=int)
    p.add_argument("--barrier-floor", action="store_true")
    p.add_argument("--osu-timing", action="store_true")
    p.add_argument("--osu-path")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no command")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       stdin=subprocess.DEVNULL)
    out, err = r.stdout, r.stderr

    if a.driver:
        if r.returncode != 0:
            fail("the driver exited %d" % r.returncode, out, err)
        check_driver(a, out, err)
    elif a.stability:
        if r.returncode != 0:
            fail("the driver exited %d" % r.returncode, out, err)
        check_stability(a, out, err)
    elif a.expect_error:
        if r.returncode == 0:
            fail("exit status 0, expected a failure", out, err)
        if not re.search(a.expect_error, err, re.M):
            fail("stderr does not match %r" % a.expect_error, out, err)
    elif a.cuda_or_error and r.returncode != 0:
        msgs = [l for l in err.splitlines() if re.match(r"osu_\w+: -d cuda: \S", l)]
        if len(msgs) != 1:
            fail("-d cuda failed without one clear '-d cuda:' line", out, err)
        print("no GPU: " + msgs[0])
    elif a.expect_fail:
        if r.returncode == 0:
            fail("exit status 0 although a result was corrupted", out, err)
        fails = check_format(a, out, err)
        if fails == 0:
            fail("no row says Fail although a result was corrupted", out, err)
        if "validation failed" not in err:
            fail("no 'validation failed' message on stderr", out, err)
        if a.expect_stderr and not re.search(a.expect_stderr, err, re.M):
            fail("stderr does not match %r" % a.expect_stderr, out, err)
    else:
        if r.returncode != 0:
            fail("exit status %d" % r.returncode, out, err)
        fails = check_format(a, out, err)
        if fails:
            fail("%d rows failed validation" % fails, out, err)
    print("ok: " + " ".join(cmd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
