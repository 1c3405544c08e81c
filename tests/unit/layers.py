#!/usr/bin/env python3
"""unit.layers: the library's folders are layers, each reaching only the layers below it.

The order is read from PICOLL_LAYERS in src/Makefile.inc (bottom first); layer L lives in src/L/
or, for the top-level ones, L/. Three checks, each of which fails the test:

  includes  every quoted #include of a library source names a file of its own layer or of a lower
            one ("build-config.h" and the generated pmpi/gen_wrappers.h aside), and the headers
            include each other without a circle;
  symbols   every object of a layer's convenience library (.libs/libpicoll_L.a, which holds L and
            the layers below) refers only to symbols of its own layer or of lower ones, and the
            objects of a layer call each other without a circle;
  link      each layer's library links on its own, as a shared object with --no-undefined, with
            only the external libraries: an upward call fails to link.

Then it plants an upward include and an upward call in copies, and checks that both are caught.

Usage: layers.py SRCDIR BUILDDIR CC "EXTERNAL LIBS" [--no-selftest]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IGNORED_INCLUDES = {'build-config.h'}


def layer_order(src):
    text = open(os.path.join(src, 'src', 'Makefile.inc')).read()
    m = re.search(r'^PICOLL_LAYERS\s*=\s*(.+)$', text, re.M)
    if not m:
        raise SystemExit('FAIL: no PICOLL_LAYERS line in src/Makefile.inc')
    return m.group(1).split()


def layer_dir(src, layer):
    """src/LAYER when it exists, else the top-level LAYER/ (topo, cuda, pmpi)."""
    inner = os.path.join('src', layer)
    return inner if os.path.isdir(os.path.join(src, inner)) else layer


def library_files(src, layers):
    """(path relative to src, layer) of every library source; tests and fixtures are not."""
    out = []
    for layer in layers:
        top = layer_dir(src, layer)
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs[:] = [d for d in dirs if d != 'fixtures']
            for f in sorted(files):
                if not re.search(r'\.(c|h|cu)$', f) or f.startswith('test_'):
                    continue
                out.append((os.path.relpath(os.path.join(root, f), src), layer))
    return out


def find_cycle(graph):
    """A list of nodes forming a circle in graph (node -> set of nodes), or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def check_includes(src, layers):
    rank = {layer: i for i, layer in enumerate(layers)}
    prefix = {layer_dir(src, l).split('/')[-1] + '/': l for l in layers}
    files = library_files(src, layers)
    errors = []
    graph = {}
    for path, layer in files:
        text = open(os.path.join(src, path), errors='replace').read()
        for inc in INCLUDE.findall(text):
            if inc in IGNORED_INCLUDES:
                continue
            target = next((l for p, l in prefix.items() if inc.startswith(p)), None)
            if target is None:
                errors.append('%s: #include "%s" names no layer (write it as "<layer>/file.h")'
                              % (path, inc))
                continue
            if rank[target] > rank[layer]:
                errors.append('%s: layer %s includes "%s" of the higher layer %s'
                              % (path, layer, inc, target))
            resolved = os.path.join(layer_dir(src, target), inc[len(inc.split('/')[0]) + 1:])
            if os.path.exists(os.path.join(src, resolved)):
                graph.setdefault(path, set()).add(resolved)
            elif inc != 'pmpi/gen_wrappers.h':
                errors.append('%s: #include "%s": no such file' % (path, inc))
    cycle = find_cycle(graph)
    if cycle:
        errors.append('include circle: ' + ' -> '.join(cycle))
    return errors, len(files)


def nm(archive):
    """{member: (defined symbols, undefined symbols)} of a static archive."""
    out = subprocess.run(['nm', '-A', '-P', archive], capture_output=True, text=True,
                         check=True).stdout
    members = {}
    for line in out.splitlines():
        # POSIX format: archive[member]: name type [value size]
        m = re.match(r'^.*\[([^\]]+)\]:\s+(\S+)\s+(\S)', line)
        if not m:
            continue
        member, name, kind = m.groups()
        d, u = members.setdefault(member, (set(), set()))
        if kind == 'U':
            u.add(name)
        elif kind.isupper() or kind in 'uvw':
            d.add(name)
    return members


def archive(build, layer):
    return os.path.join(build, '.libs', 'libpicoll_%s.a' % layer)


def check_symbols(build, layers, archives=None):
    archives = archives or {l: archive(build, l) for l in layers}
    owner = {}   # member -> layer
    syms = {}    # member -> (defined, undefined)
    below = set()
    for layer in layers:
        members = nm(archives[layer])
        for m, du in members.items():
            if m not in below:
                owner[m] = layer
                syms[m] = du
        below |= set(members)
    rank = {layer: i for i, layer in enumerate(layers)}
    defined_by = {}
    for m, (d, _) in syms.items():
        for s in d:
            defined_by.setdefault(s, m)
    errors = []
    graph = {}
    for m, (_, u) in sorted(syms.items()):
        for s in sorted(u):
            t = defined_by.get(s)
            if t is None or t == m:
                continue
            if rank[owner[t]] > rank[owner[m]]:
                errors.append('%s (layer %s) uses %s of %s (higher layer %s)'
                              % (m, owner[m], s, t, owner[t]))
            elif owner[t] == owner[m]:
                graph.setdefault(m, set()).add(t)
    cycle = find_cycle(graph)
    if cycle:
        errors.append('call circle between the objects of one layer: ' + ' -> '.join(cycle))
    return errors, len(syms)


def check_link(build, layers, cc, libs, archives=None):
    archives = archives or {l: archive(build, l) for l in layers}
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for layer in layers:
            cmd = [cc, '-shared', '-o', os.path.join(tmp, 'lib%s.so' % layer),
                   '-Wl,--whole-archive', archives[layer], '-Wl,--no-whole-archive',
                   '-Wl,--no-undefined'] + libs.split()
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                undefined = sorted(set(re.findall(r"undefined reference to `([^']+)'", r.stderr)))
                errors.append('layer %s does not link on its own: %s' % (
                    layer, ', '.join(undefined[:8]) or r.stderr.strip().splitlines()[-1]))
    return errors


def selftest(src, build, layers, cc, libs):
    """A planted upward include and a planted upward call must be caught."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, 'src'))
        shutil.copy(os.path.join(src, 'src', 'Makefile.inc'), os.path.join(tmp, 'src'))
        for layer in layers:
            d = layer_dir(src, layer)
            shutil.copytree(os.path.join(src, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns('fixtures'))
        victim = os.path.join(tmp, 'src', 'util', 'status.c')
        with open(victim, 'a') as f:
            f.write('\n#include "core/core.h"\n')
        errors, _ = check_includes(tmp, layers)
        if not any('status.c' in e and 'higher layer core' in e for e in errors):
            failures.append('a planted #include "core/core.h" in src/util/status.c was not caught')
        else:
            print('planted upward include caught: %s' % next(e for e in errors if 'status.c' in e))

        planted = os.path.join(tmp, 'planted.c')
        with open(planted, 'w') as f:
            f.write('void *picoll_comm_lookup(void *);\n'
                    'void *picoll_planted_up(void) { return picoll_comm_lookup(0); }\n')
        obj = os.path.join(tmp, 'planted.o')
        subprocess.run([cc, '-c', '-fPIC', planted, '-o', obj], check=True)
        archives = {l: archive(build, l) for l in layers}
        util_copy = os.path.join(tmp, 'libpicoll_util.a')
        shutil.copy(archives['util'], util_copy)
        subprocess.run(['ar', 'r', util_copy, obj], check=True, capture_output=True)
        archives['util'] = util_copy
        errors, _ = check_symbols(build, layers, archives)
        if not any('planted.o' in e and 'picoll_comm_lookup' in e for e in errors):
            failures.append('a planted call from util to picoll_comm_lookup (core) was not caught')
        else:
            print('planted upward call caught: %s' % next(e for e in errors if 'planted.o' in e))
        errors = check_link(build, ['util'], cc, libs, archives)
        if not errors or 'picoll_comm_lookup' not in errors[0]:
            failures.append('util with a planted upward call linked on its own')
        else:
            print('planted upward call fails to link: %s' % errors[0])
    return failures


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    src, build, cc, libs = sys.argv[1:5]
    layers = layer_order(src)
    print('layers, bottom first: %s' % ' <- '.join(layers))
    failed = False
    errors, n = check_includes(src, layers)
    print('includes: %d library files, %d problem(s)' % (n, len(errors)))
    errors2, n2 = check_symbols(build, layers)
    print('symbols: %d objects, %d problem(s)' % (n2, len(errors2)))
    errors3 = check_link(build, layers, cc, libs)
    print('link: %d layers linked on their own, %d problem(s)' % (len(layers), len(errors3)))
    for e in errors + errors2 + errors3:
        print('FAIL ' + e)
        failed = True
    if '--no-selftest' not in sys.argv:
        for e in selftest(src, build, layers, cc, libs):
            print('FAIL self-test: ' + e)
            failed = True
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
