#!/usr/bin/env python3
"""bench.load_warning: the driver warns that its figures are unreliable only when other work kept
the CPUs busy just before the run, not because the 1-minute load average still counts the main
job's own build (which ended before the sample). Builds Load objects by hand (no 2-second sample)
and checks the warning each gives; prints PASS or a FAIL line per case."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_load import Load  # noqa: E402


def load(avg1, busy, cpus=2):
    obj = Load.__new__(Load)
    obj.cpus = cpus
    obj.before = (avg1, avg1, avg1)
    obj.busy_now = busy
    return obj


CASES = [
    # (1-minute load, share of the CPUs busy in the sample or None, warning expected)
    (1.86, 0.02, False),   # a fresh machine right after the main job's build: idle CPUs
    (0.10, 0.02, False),
    (0.10, 0.95, True),    # other work started in the last minute
    (3.50, 0.80, True),
    (1.86, None, True),    # no /proc/stat: the load average decides
    (0.40, None, False),
]


def main():
    failed = 0
    for avg1, busy, want in CASES:
        got = load(avg1, busy).warning() is not None
        if got != want:
            print("FAIL load %.2f, CPUs busy %s: warning %s, expected %s" % (avg1, busy, got, want))
            failed += 1
    print("PASS" if not failed else "%d case(s) failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
