"""picoll osu-bench: how loaded the machine was before and during a run (/proc/loadavg and
/proc/stat), and the warning that the figures are unreliable when other work kept the CPUs busy.

Standard library only.
"""

import os
import time

from bench_rows import ncpus

# over this share of the CPUs busy just before the run (the 2-second sample of /proc/stat), its
# figures are not to be trusted; the 1-minute load average decides only where /proc/stat is missing,
# since it still counts a build that ended a minute ago (the main job's own)
BUSY_WARN = 0.5
LOAD_WARN_PER_CPU = 0.5


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


def cpu_ticks():
    """[(busy, steal)] clock ticks since boot of each CPU ("cpuN" lines of /proc/stat: busy is
    neither idle nor waiting for I/O nor stolen), or None."""
    try:
        out = []
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("cpu") and line[3:4].isdigit():
                    t = [int(x) for x in line.split()[1:9]]
                    out.append((sum(t) - t[3] - t[4] - t[7], t[7]))
        return out or None
    except (OSError, ValueError, IndexError):
        return None


class JobMachine:
    """What the machine did during one job (issue 52: a job's slow state, explained or not): the
    share of the job's CPU time the hypervisor stole (all CPUs), the largest any one CPU lost, and
    the CPUs' busy time other than the job's own (all busy time less the CPU seconds of this
    process and its children), each as a percentage of the job's wall time on all CPUs."""

    def __init__(self):
        self.t0, self.ticks0, self.own0 = time.time(), cpu_ticks(), own_cpu_seconds()
        self.steal = self.steal_max = self.others = None

    def finish(self):
        t1, ticks1, own1 = time.time(), cpu_ticks(), own_cpu_seconds()
        wall = t1 - self.t0
        if self.ticks0 is None or ticks1 is None or len(ticks1) != len(self.ticks0) or wall <= 0:
            return self
        tck = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        steal = [(b[1] - a[1]) / tck / wall for a, b in zip(self.ticks0, ticks1)]
        busy = sum(b[0] - a[0] for a, b in zip(self.ticks0, ticks1)) / tck
        n = len(ticks1)
        self.steal = 100.0 * min(1.0, sum(steal) / n)
        self.steal_max = 100.0 * min(1.0, max(steal))
        self.others = 100.0 * min(1.0, max(0.0, (busy - (own1 - self.own0)) / (wall * n)))
        return self


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
