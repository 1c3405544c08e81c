"""check_output.py's checks of two of the programs' modes (issue 50): --floor's barrier floor and
--osu-timing. Each takes check_output's fail and rows_below, so that this module imports nothing
of it.

  --barrier-floor     --floor measured the barrier floor: one "# barrier floor: ..." line with
                      its blocking, enqueued and graph times (blocking positive), and under every
                      row a "# barrier floor (us): ..." line with the same times and the ratios of
                      the row's picoll (blocking), Enqueue and Graph latencies to them
  --osu-timing        --osu-timing ran: one "# osu-timing: ..." line, and under every row a
                      "# osu timing (us): T, back to back B, osu/back-to-back R" line: T positive,
                      B the row's picoll latency (without --ab, Avg Latency), R = T / B
  --osu-path RE       and its last timed call took picoll's path RE (", picoll path P")
"""

import re

WAY = r"(?:([0-9.]+) us|n/a)"
BARRIER_HEAD = re.compile(r"# barrier floor: every rank at once, .*\): blocking %s, enqueued %s, "
                          r"graph %s$" % (WAY, WAY, WAY))
ROW_WAY = r"(?:([0-9.]+)|n/a)"
BARRIER_ROW = re.compile(r"# barrier floor \(us\): blocking %s, enqueued %s, graph %s"
                         r"((?:[;,] (?:picoll|enqueue|graph)/barrier [0-9.]+x)*)$"
                         % (ROW_WAY, ROW_WAY, ROW_WAY))
OSU_ROW = re.compile(r"# osu timing \(us\): ([0-9.]+), back to back ([0-9.]+), "
                     r"osu/back-to-back ([0-9.]+)x(?:, picoll path (\S+))?$")


def near(x, y):
    return abs(x - y) <= 0.006 + 0.002 * abs(y)


def check_barrier_floor(lines, columns, out, err, fail, rows_below):
    """The barrier floor's header line and, under each row, its times and the row's ratios."""
    head = [BARRIER_HEAD.match(l) for l in lines if l.startswith("# barrier floor: ")]
    if len(head) != 1 or not head[0]:
        fail("expected one '# barrier floor: every rank at once, ...' line, got %r"
             % [l for l in lines if l.startswith("# barrier floor: ")], out, err)
    ways = [float(x) if x else None for x in head[0].groups()]
    if ways[0] is None or ways[0] <= 0 or any(w is not None and w <= 0 for w in ways):
        fail("a barrier floor is not positive: %r" % head[0].group(0), out, err)
    for row, below in rows_below(lines):
        m = [BARRIER_ROW.match(l) for l in below if l.startswith("# barrier floor (us): ")]
        if len(m) != 1 or not m[0]:
            fail("row %r has no '# barrier floor (us): ...' line under it" % row, out, err)
        got = [float(x) if x else None for x in m[0].groups()[:3]]
        if any((g is None) != (w is None) or (g is not None and not near(g, w))
               for g, w in zip(got, ways)):
            fail("row %r: barrier floors %s, the header's %s" % (row, got, ways), out, err)
        ratios = dict(re.findall(r"(\w+)/barrier ([0-9.]+)x", m[0].group(4)))
        f = row.split()
        for name, col, w in (("picoll", "picoll(us)", ways[0]), ("enqueue", "Enqueue(us)", ways[1]),
                             ("graph", "Graph(us)", ways[2])):
            runs = col in columns and w is not None
            if runs != (name in ratios):
                fail("row %r: a %s/barrier ratio without its column and floor, or none with them"
                     % (row, name), out, err)
            if runs:
                want = float(f[1 + columns.index(col)]) / w
                if abs(float(ratios[name]) - want) > 0.002 + 0.002 * want:
                    fail("row %r: %s/barrier %s is not %.3f" % (row, name, ratios[name], want),
                         out, err)
    print("barrier floor: blocking %.2f us, enqueued %s, graph %s; a line under each row"
          % (ways[0], ways[1], ways[2]))


def check_osu_timing(a, lines, columns, out, err, fail, rows_below):
    """--osu-timing's header line and, under each row, its latency beside the row's."""
    if len([l for l in lines if l.startswith("# osu-timing: ")]) != 1:
        fail("expected one '# osu-timing: ...' line", out, err)
    col = "picoll(us)" if a.ab else "Avg Latency(us)"
    for row, below in rows_below(lines):
        m = [OSU_ROW.match(l) for l in below if l.startswith("# osu timing (us): ")]
        if len(m) != 1 or not m[0]:
            fail("row %r has no '# osu timing (us): ...' line under it" % row, out, err)
        t, b, r, path = m[0].groups()
        t, b, r = float(t), float(b), float(r)
        if t <= 0 or not near(b, float(row.split()[1 + columns.index(col)])):
            fail("row %r: osu timing %.2f not positive, or back to back %.2f not its %s"
                 % (row, t, b, col), out, err)
        if b > 0 and abs(r - t / b) > 0.002 + 0.002 * t / b:
            fail("row %r: osu/back-to-back %.3f is not %.3f" % (row, r, t / b), out, err)
        if a.osu_path and not (path and re.fullmatch(a.osu_path, path)):
            fail("row %r: osu timing's calls took path %r, expected %r" % (row, path, a.osu_path),
                 out, err)
    print("osu timing: a line under each row%s"
          % (", path " + a.osu_path if a.osu_path else ""))
