#!/usr/bin/env python3
"""Measure what each CTest test costs and write the slots it takes side by side (tests/slots.cmake).

tests/run.sh runs CTest with -j 4: four slots, a slot being half a core of the 2-core CI machine.
A test's slots (its PROCESSORS property) come from its CPU time over its wall time in a serial run:
under half a core 1 slot, else 2, so that at most two CPU-bound tests share the machine (one alone
each would leave the second core idle whenever its ranks wait: the suite took 457 s so against 323 s
with every test at 1 slot, on the same 2 cores). A test that is not listed takes 4 and runs alone
until it is measured. The top CTestTestfile reads the file (CTestTestfile.cmake.in).

  python3 tests/ctest-slots.py measure BUILD [CTEST ARGS...]   every test of BUILD alone, one after
        the other; wall and CPU seconds (the test's processes, through the children's rusage) into
        BUILD/test-cost.json
  python3 tests/ctest-slots.py write OUT BUILD...   OUT (tests/slots.cmake) from the measurements
        of one or more builds (each MPI's): a test takes the most slots any build gave it
"""
import json
import os
import re
import resource
import subprocess
import sys
import time

SLOTS = 4          # ctest -j SLOTS in tests/run.sh; an unmeasured test takes them all
HALF_CORE = 0.5    # CPU seconds per wall second below which a test takes 1 slot, else 2


def test_names(build, args):
    out = subprocess.run(['ctest', '-N'] + args, cwd=build, capture_output=True, text=True,
                         check=True).stdout
    return [m.group(1) for m in re.finditer(r'^\s*Test\s+#\d+: (\S+)$', out, re.M)]


def measure(build, args):
    cost = {}
    for name in test_names(build, args):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        p = subprocess.run(['ctest', '-R', '^%s$' % re.escape(name), '--timeout', '300'],
                           cwd=build, capture_output=True, text=True)
        wall = time.time() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        cost[name] = {'wall': round(wall, 2), 'cpu': round(cpu, 2), 'ok': p.returncode == 0}
        print('%-50s %7.1f s %7.1f CPU s %s' % (name, wall, cpu, '' if p.returncode == 0 else
                                                'FAILED'), flush=True)
    with open(os.path.join(build, 'test-cost.json'), 'w') as f:
        json.dump(cost, f, indent=0, sort_keys=True)
    return 0


def slots(wall, cpu):
    rate = cpu / wall if wall > 0 else 0.0
    return 1 if rate < HALF_CORE else 2


def write(out, builds):
    taken = {}
    for build in builds:
        with open(os.path.join(build, 'test-cost.json')) as f:
            for name, c in json.load(f).items():
                taken[name] = max(taken.get(name, 0), slots(c['wall'], c['cpu']))
    lines = ['# Written by tests/ctest-slots.py (do not edit by hand): the slots of the measured',
             '# tests under ctest -j %d (a test not listed takes all %d).' % (SLOTS, SLOTS)]
    for name in sorted(taken):
        if taken[name] < SLOTS:
            lines.append('set(PICOLL_SLOTS_%s %d)' % (name, taken[name]))
    with open(out, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    n = {k: sum(1 for v in taken.values() if v == k) for k in (1, 2)}
    print('%s: %d tests of 1 slot, %d of 2' % (out, n[1], n[2]))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == 'measure':
        return measure(argv[1], argv[2:])
    if len(argv) >= 3 and argv[0] == 'write':
        return write(argv[1], argv[2:])
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
