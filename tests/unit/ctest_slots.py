#!/usr/bin/env python3
"""unit.ctest_slots: the top CTestTestfile's add_test wrapper (CTestTestfile.cmake.in) gives each
test its slots and changes nothing else: the commands of tests with semicolons, backslashes and
regex escapes in their arguments are the same as plain add_test gives them, a test of
tests/slots.cmake takes its slots (at MPICH 2 at least), and one not listed takes 4.

Usage: ctest_slots.py BUILDDIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

TESTS = r'''
add_test(plain.semicolon sh -c "echo 'a; b'; exit 0")
add_test(plain.regex echo "rank\\(s\\) 1 exited" "chunks : unit 1024 KiB \\(X\\)" -- sh)
add_test(bench.driver echo --x "1;2")
'''


def commands(top, sub):
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, 'sub'))
        with open(os.path.join(tmp, 'CTestTestfile.cmake'), 'w') as f:
            f.write(top)
        with open(os.path.join(tmp, 'sub', 'CTestTestfile.cmake'), 'w') as f:
            f.write(sub)
        out = subprocess.run(['ctest', '--show-only=json-v1'], cwd=tmp, capture_output=True,
                             text=True, check=True).stdout
    tests = json.loads(out)['tests']
    return {t['name']: (t.get('command'), {p['name']: p['value'] for p in t.get('properties', [])})
            for t in tests}


def main():
    build = sys.argv[1]
    top = open(os.path.join(build, 'CTestTestfile.cmake')).read()
    top = re.sub(r'^subdirs\(.*\)$', 'subdirs(sub)', top, flags=re.M)
    if 'subdirs(sub)' not in top or not re.search(r'(function|macro)\(add_test', top):
        print('FAIL: the top CTestTestfile.cmake has no add_test wrapper and subdirs line')
        return 1
    try:
        wrapped = commands(top, TESTS)
    except subprocess.CalledProcessError as e:
        print('FAIL: ctest could not read the tests through the wrapper: %s' % e.stderr.strip()[:300])
        return 1
    plain = commands('subdirs(sub)\n', TESTS)
    failed = 0
    for name, (cmd, _) in plain.items():
        if wrapped.get(name, (None,))[0] != cmd:
            print('FAIL %s: command %s through the wrapper, %s plain'
                  % (name, wrapped.get(name, (None,))[0], cmd))
            failed += 1
    slots = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'slots.cmake')).read()
    m = re.search(r'^set\(PICOLL_SLOTS_bench\.driver (\d)\)$', slots, re.M)
    # at MPICH every test takes 2 slots at least
    least = 2 if re.search(r'^if\("mpich" STREQUAL "mpich"\)$', top, re.M) else 1
    want = {'plain.semicolon': ('PROCESSORS', 4), 'plain.regex': ('PROCESSORS', 4),
            'bench.driver': ('PROCESSORS', max(int(m.group(1)), least) if m else 4)}
    for name, (prop, value) in want.items():
        got = wrapped[name][1].get(prop, 1 if prop == 'PROCESSORS' else None)
        if got != value:
            print('FAIL %s: %s is %s, expected %s' % (name, prop, got, value))
            failed += 1
    print('PASS' if not failed else '%d check(s) failed' % failed)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
