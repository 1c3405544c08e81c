#!/usr/bin/env python3
"""unit.layers: the library's folders are layers, each reaching only the layers it declares.

The order is read from PICOLL_LAYERS in src/Makefile.inc (bottom first) and the graph from its
PICOLL_USES_<layer> lines: the layers whose headers a layer's sources include or whose functions
its objects call, each one lower in the order. Layer L lives in src/L/ or, for the top-level ones,
L/. Each layer's convenience library (.libs/libpicoll_L.a) holds its own objects only. Checks, each
of which fails the test:

  graph     every declared use names a lower layer, and picoll_<layer>_libs (what a program links)
            is the layer and everything it reaches through the graph, top first;
  includes  every quoted #include of a library source names a file of its own layer or of a
            layer it declares ("build-config.h" and the generated pmpi/gen_wrappers.h aside), and
            the headers include each other without a circle;
  symbols   every object of a layer refers only to symbols of its own layer or of the layers it
            declares, and the objects of a layer call each other without a circle;
  exact     every declared use is used (by an include or a call): the graph is what the code does;
  link      each layer's library links on its own, as a shared object with --no-undefined, with
            only the libraries of the layers it reaches and the external libraries: an upward or
            undeclared call fails to link.

Then it plants an upward include, an upward call and a call to a lower layer that is not declared
in copies, and checks that each is caught.

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


def makefile_text(src):
    return open(os.path.join(src, 'src', 'Makefile.inc')).read().replace('\\\n', ' ')


def layer_order(src):
    m = re.search(r'^PICOLL_LAYERS\s*=\s*(.+)$', makefile_text(src), re.M)
    if not m:
        raise SystemExit('FAIL: no PICOLL_LAYERS line in src/Makefile.inc')
    return m.group(1).split()


def declared_uses(src, layers):
    """{layer: set of layers it declares} from the PICOLL_USES_<layer> lines."""
    text = makefile_text(src)
    uses = {}
    for layer in layers:
        m = re.search(r'^PICOLL_USES_%s[ \t]*=[ \t]*(.*)$' % layer, text, re.M)
        if not m:
            raise SystemExit('FAIL: no PICOLL_USES_%s line in src/Makefile.inc' % layer)
        uses[layer] = set(m.group(1).split())
    return uses


def reach(uses, layer):
    """The layers layer reaches through the graph, itself included."""
    seen, todo = {layer}, [layer]
    while todo:
        for u in uses.get(todo.pop(), ()):
            if u not in seen:
                seen.add(u)
                todo.append(u)
    return seen


def check_graph(src, layers, uses):
    rank = {layer: i for i, layer in enumerate(layers)}
    text = makefile_text(src)
    errors = []
    for layer in layers:
        for u in sorted(uses[layer]):
            if u not in rank:
                errors.append('PICOLL_USES_%s names %s, which is no layer' % (layer, u))
            elif rank[u] >= rank[layer]:
                errors.append('PICOLL_USES_%s names %s, which is not below it' % (layer, u))
        m = re.search(r'^picoll_%s_libs[ \t]*=[ \t]*(.*)$' % layer, text, re.M)
        want = sorted(reach(uses, layer), key=lambda l: -rank.get(l, -1))
        want = ['libpicoll_%s.la' % l for l in want]
        if not m:
            errors.append('no picoll_%s_libs line in src/Makefile.inc' % layer)
        elif m.group(1).split() != want:
            errors.append('picoll_%s_libs is "%s", the graph says "%s"'
                          % (layer, ' '.join(m.group(1).split()), ' '.join(want)))
    return errors


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
                if not re.search(r'\.(c|h|cu|cuh)$', f) or f.startswith('test_'):
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


def check_includes(src, layers, uses, used=None):
    """Includes of a layer not declared (or higher); used[layer] gets the layers it includes."""
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
            elif target != layer and target not in uses[layer]:
                errors.append('%s: layer %s includes "%s" of %s, which PICOLL_USES_%s does not '
                              'name' % (path, layer, inc, target, layer))
            if used is not None and target != layer:
                used.setdefault(layer, set()).add(target)
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


def check_symbols(build, layers, uses, archives=None, used=None):
    """Calls of a layer's objects into a layer not declared (or higher); used[layer] gets the
    layers it calls."""
    archives = archives or {l: archive(build, l) for l in layers}
    owner = {}   # member -> layer
    syms = {}    # member -> (defined, undefined)
    for layer in layers:
        for m, du in nm(archives[layer]).items():
            owner[m] = layer
            syms[m] = du
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
            lm, lt = owner[m], owner[t]
            if rank[lt] > rank[lm]:
                errors.append('%s (layer %s) uses %s of %s (higher layer %s)' % (m, lm, s, t, lt))
            elif lt != lm and lt not in uses[lm]:
                errors.append('%s (layer %s) uses %s of %s (layer %s, which PICOLL_USES_%s does '
                              'not name)' % (m, lm, s, t, lt, lm))
            elif lt == lm:
                graph.setdefault(m, set()).add(t)
            if used is not None and lt != lm:
                used.setdefault(lm, set()).add(lt)
    cycle = find_cycle(graph)
    if cycle:
        errors.append('call circle between the objects of one layer: ' + ' -> '.join(cycle))
    return errors, len(syms)


def check_exact(layers, uses, used):
    errors = []
    for layer in layers:
        for u in sorted(uses[layer] - used.get(layer, set())):
            errors.append('PICOLL_USES_%s names %s, but no source of %s includes or calls it'
                          % (layer, u, layer))
    return errors


def check_link(build, layers, uses, cc, libs, archives=None, only=None):
    """Link each layer (or those of only) on its own with the layers it reaches."""
    archives = archives or {l: archive(build, l) for l in layers}
    rank = {layer: i for i, layer in enumerate(layers)}
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for layer in only or layers:
            below = sorted(reach(uses, layer) - {layer}, key=lambda l: -rank[l])
            cmd = [cc, '-shared', '-o', os.path.join(tmp, 'lib%s.so' % layer),
                   '-Wl,--whole-archive', archives[layer], '-Wl,--no-whole-archive'] + \
                [archives[l] for l in below] + ['-Wl,--no-undefined'] + libs.split()
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                undefined = sorted(set(re.findall(r"undefined reference to `([^']+)'", r.stderr)))
                errors.append('layer %s does not link on its own: %s' % (
                    layer, ', '.join(undefined[:8]) or r.stderr.strip().splitlines()[-1]))
    return errors


def plant_call(tmp, build, archives, layer, callee, cc):
    """archives with a copy of layer's library holding one more object, which calls callee."""
    planted = os.path.join(tmp, 'planted_%s.c' % layer)
    with open(planted, 'w') as f:
        f.write('void *%s(void *);\n'
                'void *picoll_planted_%s(void) { return (void *)%s; }\n' % (callee, layer, callee))
    obj = os.path.join(tmp, 'planted_%s.o' % layer)
    subprocess.run([cc, '-c', '-fPIC', planted, '-o', obj], check=True)
    out = dict(archives)
    copy = os.path.join(tmp, 'libpicoll_%s.a' % layer)
    shutil.copy(archives[layer], copy)
    subprocess.run(['ar', 'r', copy, obj], check=True, capture_output=True)
    out[layer] = copy
    return out, os.path.basename(obj)


def a_function_of(archive_path):
    """A function the archive defines (for a planted call into its layer)."""
    for m, (d, _) in sorted(nm(archive_path).items()):
        for s in sorted(d):
            if s.startswith('picoll_'):
                return s
    raise SystemExit('FAIL: %s defines no picoll_ function' % archive_path)


def selftest(src, build, layers, uses, cc, libs):
    """A planted upward include, a planted upward call and a planted call to a lower layer that is
    not declared must each be caught."""
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
        errors, _ = check_includes(tmp, layers, uses)
        if not any('status.c' in e and 'higher layer core' in e for e in errors):
            failures.append('a planted #include "core/core.h" in src/util/status.c was not caught')
        else:
            print('planted upward include caught: %s' % next(e for e in errors if 'status.c' in e))

        archives = {l: archive(build, l) for l in layers}
        up, obj = plant_call(tmp, build, archives, 'util', 'picoll_comm_lookup', cc)
        errors, _ = check_symbols(build, layers, uses, up)
        if not any(obj in e and 'picoll_comm_lookup' in e for e in errors):
            failures.append('a planted call from util to picoll_comm_lookup (core) was not caught')
        else:
            print('planted upward call caught: %s' % next(e for e in errors if obj in e))
        errors = check_link(build, layers, uses, cc, libs, up, only=['util'])
        if not errors or 'picoll_comm_lookup' not in errors[0]:
            failures.append('util with a planted upward call linked on its own')
        else:
            print('planted upward call fails to link: %s' % errors[0])

        # a lower layer that the graph does not name: net uses util only, cuda is below it
        if 'cuda' in uses['net'] or 'cuda' not in layers:
            failures.append('the self-test expects net not to use cuda; change its plant')
            return failures
        callee = a_function_of(archives['cuda'])
        side, obj = plant_call(tmp, build, archives, 'net', callee, cc)
        errors, _ = check_symbols(build, layers, uses, side)
        if not any(obj in e and 'PICOLL_USES_net does not name' in e for e in errors):
            failures.append('a planted call from net to %s (cuda, not declared) was not caught'
                            % callee)
        else:
            print('planted undeclared call caught: %s' % next(e for e in errors if obj in e))
        errors = check_link(build, layers, uses, cc, libs, side, only=['net'])
        if not errors or callee not in errors[0]:
            failures.append('net with a planted call to cuda linked on its own')
        else:
            print('planted undeclared call fails to link: %s' % errors[0])
    return failures


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    src, build, cc, libs = sys.argv[1:5]
    layers = layer_order(src)
    uses = declared_uses(src, layers)
    print('layers, bottom first: %s' % ' <- '.join(layers))
    for layer in layers:
        print('  %-6s uses %s' % (layer, ' '.join(sorted(uses[layer], key=layers.index)) or '-'))
    errors = check_graph(src, layers, uses)
    print('graph: %d problem(s)' % len(errors))
    used = {}
    errors1, n = check_includes(src, layers, uses, used)
    print('includes: %d library files, %d problem(s)' % (n, len(errors1)))
    errors2, n2 = check_symbols(build, layers, uses, used=used)
    print('symbols: %d objects, %d problem(s)' % (n2, len(errors2)))
    errors3 = check_exact(layers, uses, used)
    print('exact: %d problem(s)' % len(errors3))
    errors4 = check_link(build, layers, uses, cc, libs)
    print('link: %d layers linked on their own, %d problem(s)' % (len(layers), len(errors4)))
    failed = False
    for e in errors + errors1 + errors2 + errors3 + errors4:
        print('FAIL ' + e)
        failed = True
    if '--no-selftest' not in sys.argv:
        for e in selftest(src, build, layers, uses, cc, libs):
            print('FAIL self-test: ' + e)
            failed = True
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
