#!/usr/bin/env python3
"""The test programs a selection of CTest tests runs, as make targets of their build tree.

  python3 tests/programs-for.py BUILD [CTEST SELECTION ARGS...]

BUILD is a configured build tree (its CTest files written); the arguments select tests as ctest
takes them (-R REGEX, -LE REGEX, ...). Prints the programs of BUILD's check_PROGRAMS (make
print-check-programs) that a selected test names: one whose path in BUILD is an argument of the
test's command or of its environment, or part of one (a --preload program after the launcher),
and a shared library (lib*.so*) whose folder is a whole entry of a path list there
(LD_LIBRARY_PATH=BUILD/tests/cuda/emu). tests/run.sh builds only those for an MPI that runs a
subset: the rest of the programs would be compiled for nothing.
"""
import json
import os
import re
import subprocess
import sys


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    build = os.path.abspath(argv[0])
    progs = subprocess.run(['make', '-s', '--no-print-directory', 'print-check-programs'],
                           cwd=build, capture_output=True, text=True, check=True).stdout.split()
    shown = subprocess.run(['ctest', '--show-only=json-v1'] + argv[1:], cwd=build,
                           capture_output=True, text=True, check=True).stdout
    words = []
    for test in json.loads(shown).get('tests', []):
        words += test.get('command') or []
        for prop in test.get('properties', []):
            if prop.get('name') == 'ENVIRONMENT':
                words += prop.get('value') or []
    # every path-like piece of every word: a whole word, the value after NAME=, each entry of a
    # colon-separated list
    pieces = set()
    for w in words:
        for part in re.split(r'[=:]', w):
            pieces.add(os.path.normpath(part))
    needed = []
    for p in progs:
        path = os.path.normpath(os.path.join(build, p))
        lib = re.match(r'lib.*\.so(\.\d+)*$', os.path.basename(p)) is not None
        if path in pieces or (lib and os.path.dirname(path) in pieces):
            needed.append(p)
    print(' '.join(needed))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
