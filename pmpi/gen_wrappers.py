#!/usr/bin/env python3
"""Writes picoll's MPI wrappers for every function that carries a user buffer.

Inputs: the table pmpi/calls.def (what each buffer is) and the MPI's own mpi.h, preprocessed
(`mpicc -E`), for the functions this MPI has and their exact prototypes. Output: C source on
stdout (--c), the list of what is staged, accelerated, refused and passed (--list), or, with
--check, the functions of the header that carry a buffer and that the table does not describe
(exit status 1 if there is one).
"""
import argparse
import re
import sys


def read_header(text):
    """{name: [(type, name), ...]} of every `int MPI_xxx(...)` the preprocessed header declares."""
    text = re.sub(r'^\s*#.*$', '', text, flags=re.M)
    text = re.sub(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)', '', text)
    protos = {}
    for m in re.finditer(r'\bint\s+(MPI_\w+)\s*\(([^;{()]*)\)\s*[^;{()]*;', text):
        params = []
        args = ' '.join(m.group(2).split())
        if args in ('', 'void'):
            protos[m.group(1)] = params
            continue
        for i, p in enumerate(args.split(',')):
            p = p.strip()
            pm = re.match(r'^(.*?)(\w+)\s*((?:\[\s*\w*\s*\])*)$', p)
            if pm is None or pm.group(1).strip() == '':
                params.append((p, 'arg%d' % i))  # no name in the prototype
                continue
            ctype = pm.group(1).strip()
            if pm.group(3):
                ctype += ' *'
            params.append((re.sub(r'\s*\*', ' *', ctype).replace('* *', '**'), pm.group(2)))
        protos[m.group(1)] = params
    return protos


def carries_buffer(params):
    return any(re.search(r'\bvoid\s*\*', t) for t, _ in params)


class Entry:
    def __init__(self, name, flags, bufs):
        self.name, self.flags, self.bufs = name, flags, bufs


def read_table(path):
    table = {}
    for lineno, line in enumerate(open(path), 1):
        line = line.split('#', 1)[0].split()
        if not line:
            continue
        name, flags, bufs = line[0], {}, []
        for i, tok in enumerate(line[1:]):
            if tok.startswith('!pass='):
                flags['pass'] = ' '.join([tok[6:]] + line[i + 2:])
                break
            if tok.startswith('!'):
                k, _, v = tok[1:].partition('=')
                flags[k] = v
            else:
                arg, _, spec = tok.partition('=')
                roles, _, shape = spec.partition(':')
                shape, _, ip = shape.partition(';ip=')
                count, _, dtype = shape.rpartition(',')
                if not roles or not count or not dtype:
                    sys.exit('%s:%d: cannot read "%s"' % (path, lineno, tok))
                bufs.append((arg, roles, count, dtype, ip))
        table[name] = Entry(name, flags, bufs)
    return table


def base_of(name, table):
    """The table entry describing name, and the variant: '' (as is), 'req' or 'init'."""
    n = name[:-2] if name.endswith('_c') else name
    if n in table:
        return table[n], ''
    if n.endswith('_init') and n[:-5] in table:
        return table[n[:-5]], 'init'
    if n.startswith('MPI_File_i') and 'MPI_File_' + n[10:] in table:
        return table['MPI_File_' + n[10:]], 'req'
    if n.startswith('MPI_I') and 'MPI_' + n[5:].capitalize() in table:
        return table['MPI_' + n[5:].capitalize()], 'req'
    for k, e in table.items():
        if k.endswith('*') and n.startswith(k[:-1]):
            return e, ''
    return None, ''


def classify(name, params, table):
    """(kind, entry, variant): kind is staged, accel, refuse, pass, split, or None."""
    e, variant = base_of(name, table)
    if e is None:
        return None, None, ''
    if 'pass' in e.flags:
        return 'pass', e, variant
    if 'refuse' in e.flags:
        return 'refuse', e, variant
    if 'split' in e.flags:
        return 'split', e, variant
    if 'accel' in e.flags and variant == '':
        return 'accel', e, variant
    return 'staged', e, variant


class Gen:
    def __init__(self, name, params, entry, variant):
        self.name, self.params, self.e, self.variant = name, params, entry, variant
        self.names = [n for _, n in params]
        self.types = dict((n, t) for t, n in params)

    def arg(self, alts):
        for a in alts.split('|'):
            if a in self.names:
                return a
        sys.exit('gen_wrappers: %s has no argument %s (it has %s)' % (self.name, alts,
                                                                       ', '.join(self.names)))

    def of_type(self, ctype):
        for t, n in self.params:
            if t == ctype:
                return n
        return None

    def wide(self, n):
        return 0 if re.match(r'^(const )?int \*$', self.types[n]) else 1

    def count_expr(self, count):
        """C initialisers of the count fields for COUNT."""
        m = re.match(r'^(V|W)\((\w+),(\w+),(G|IN|OUT)\)$', count)
        if m:
            c, d = self.arg(m.group(2)), self.arg(m.group(3))
            return ('.shape = PICOLL_SHAPE_%s, .counts = %s, .displs = %s, .counts_wide = %d, '
                    '.displs_wide = %d, .mult = PICOLL_MULT_%s'
                    % (m.group(1), c, d, self.wide(c), self.wide(d), m.group(4)))
        m = re.match(r'^(SUM|AT)\((\w+)\)$', count)
        if m:
            c = self.arg(m.group(2))
            return ('.shape = PICOLL_SHAPE_%s, .counts = %s, .counts_wide = %d'
                    % (m.group(1), c, self.wide(c)))
        m = re.match(r'^(\w+(?:\|\w+)*|1)(?:\*(\w+))?$', count)
        if not m:
            sys.exit('gen_wrappers: %s: cannot read count %s' % (self.name, count))
        n = '1' if m.group(1) == '1' else self.arg(m.group(1))
        mult = m.group(2) or ''
        if mult in ('G', 'IN', 'OUT'):
            return '.shape = PICOLL_SHAPE_N, .count = (MPI_Count)(%s), .mult = PICOLL_MULT_%s' % (n, mult)
        if mult:
            return '.shape = PICOLL_SHAPE_N, .count = (MPI_Count)(%s) * (MPI_Count)(%s)' % (n, self.arg(mult))
        return '.shape = PICOLL_SHAPE_N, .count = (MPI_Count)(%s)' % n

    def roles(self, roles):
        out = []
        for alt in roles.split('/'):
            role, _, where = alt.partition('@')
            out.append('{PICOLL_ROLE_%s, PICOLL_AT_%s}' % (role.upper(), (where or 'all').upper()))
        return '{' + ', '.join(out) + '}'

    def buf(self, spec):
        arg, roles, count, dtype, ip = spec
        a = self.arg(arg)
        fields = ['.ptr = %s' % a, '.name = "%s"' % a, '.roles = %s' % self.roles(roles),
                  self.count_expr(count)]
        if count.startswith('W('):
            fields.append('.types = %s' % self.arg(dtype))
        elif dtype.startswith('MPI_'):
            fields.append('.type = %s' % dtype)
        else:
            fields.append('.type = %s' % self.arg(dtype))
        if ip:
            m = re.match(r'^(SUM)\((\w+)\)$', ip) or re.match(r'^(\w+)\*G$', ip)
            if m and m.group(1) == 'SUM':
                fields.append('.ip_sum = 1')
            elif m:
                fields.append('.ip_count = (MPI_Count)(%s), .ip_mult = PICOLL_MULT_G' % self.arg(m.group(1)))
            else:
                sys.exit('gen_wrappers: %s: cannot read in-place count %s' % (self.name, ip))
        return 'picoll_call_buf(&c, &(picoll_bufspec_t){%s});' % ', '.join(fields)

    def signature(self, cname, static=False):
        args = ', '.join('%s %s' % (t, n) if not t.endswith('*') else '%s%s' % (t, n)
                         for t, n in self.params)
        return '%sint %s(%s)' % ('' if static else 'PICOLL_EXPORT ', cname, args or 'void')

    def call(self, fn, subst=None):
        subst = subst or {}
        return '%s(%s)' % (fn, ', '.join(subst.get(n, n) for n in self.names))

    def obj(self):
        for ctype, kind in (('MPI_Comm', 'COMM'), ('MPI_Win', 'WIN'), ('MPI_File', 'FILE')):
            n = self.of_type(ctype)
            if n:
                return 'PICOLL_OBJ_%s, &%s' % (kind, n)
        return 'PICOLL_OBJ_NONE, NULL'

    def wrapper(self, kind):
        pname = 'P' + self.name
        e = self.e
        lines = []
        if kind == 'accel':
            lines.append(self.signature('picoll_stage_' + self.name[4:], static=True).replace(
                'int ', 'int ', 1))
        else:
            lines.append(self.signature(self.name))
        lines.append('{')
        lines.append('    picoll_call_t c;')
        lines.append('    int rc;')
        status = self.of_type('MPI_Status *')
        request = self.of_type('MPI_Request *')
        if kind == 'pass':
            lines.append('    return %s;' % self.call(pname))
            lines.append('}')
            return lines
        if self.of_type('MPI_Op') and self.of_type('MPI_Win') is None:
            dt = self.of_type('MPI_Datatype')
            if dt:
                lines.append('    picoll_half_ops_translate(&%s, &%s);' % (dt, self.of_type('MPI_Op')))
        lines.append('    if (PICOLL_STAGE_OFF()) {')
        lines.append('        return %s;' % self.call(pname))
        lines.append('    }')
        root = 'root' if 'root' in self.names else 'PICOLL_NO_ROOT'
        target = 'target_rank' if 'target_rank' in self.names else '-1'
        lines.append('    picoll_call_start(&c, "%s", %s, %s, %s);' % (self.name, self.obj(), root, target))
        if kind == 'refuse':
            for a in e.flags['refuse'].split(','):
                lines.append('    if (picoll_call_refuse(&c, %s, "%s", &rc) != 0) {' % (self.arg(a), self.arg(a)))
                lines.append('        return rc;')
                lines.append('    }')
            lines.append('    return %s;' % self.call(pname))
            lines.append('}')
            return lines
        if kind == 'split' and not e.bufs:
            buf = self.arg('buf')
            lines.append('    void *pass = (void *)%s;' % buf)
            lines.append('    picoll_record_t *r = picoll_split_take(%s);' % self.of_type('MPI_File'))
            lines.append('    if (r != NULL) {')
            lines.append('        pass = picoll_record_pass(r, 0);')
            lines.append('    }')
            lines.append('    MPI_Status st_local, *st = %s == MPI_STATUS_IGNORE ? &st_local : %s;' % (status, status))
            lines.append('    rc = %s;' % self.call(pname, {buf: 'pass', status: 'st'}))
            lines.append('    return picoll_split_end(r, rc, st);')
            lines.append('}')
            return lines
        if 'intra' in e.flags:
            lines.append('    c.intra_only = 1;')
        for spec in e.bufs:
            lines.append('    ' + self.buf(spec))
        mode = {'': 'PICOLL_MODE_BLOCKING', 'req': 'PICOLL_MODE_REQUEST',
                'init': 'PICOLL_MODE_PERSISTENT'}[self.variant]
        if mode == 'PICOLL_MODE_BLOCKING' and request:
            mode = 'PICOLL_MODE_REQUEST' # MPI_Rput and the like
        if 'rma' in e.flags and self.variant == '':
            mode = 'PICOLL_MODE_RMA'
        if kind == 'split':
            mode = 'PICOLL_MODE_SPLIT'
        lines.append('    if (picoll_call_begin(&c, %s, &rc) != 0) {' % mode)
        lines.append('        return rc;')
        lines.append('    }')
        subst = dict((self.arg(spec[0]), 'picoll_call_pass(&c, %d)' % i) for i, spec in enumerate(e.bufs))
        if status and mode == 'PICOLL_MODE_BLOCKING':
            lines.append('    MPI_Status st_local, *st = %s == MPI_STATUS_IGNORE ? &st_local : %s;' % (status, status))
            subst[status] = 'st'
            lines.append('    rc = %s;' % self.call(pname, subst))
            lines.append('    return picoll_call_end(&c, rc, st, NULL);')
        else:
            lines.append('    rc = %s;' % self.call(pname, subst))
            if mode == 'PICOLL_MODE_SPLIT':
                lines.append('    return picoll_call_end_split(&c, rc, %s);' % self.of_type('MPI_File'))
            else:
                lines.append('    return picoll_call_end(&c, rc, NULL, %s);' % (request or 'NULL'))
        lines.append('}')
        return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--table', required=True)
    ap.add_argument('--header', required=True, help='preprocessed mpi.h ("-": stdin)')
    ap.add_argument('--c', action='store_true', help='write the C wrappers')
    ap.add_argument('--h', action='store_true', help='write the declarations of the fallbacks')
    ap.add_argument('--list', action='store_true', help='list what is staged, refused, passed')
    ap.add_argument('--check', action='store_true', help='fail on a function the table misses')
    o = ap.parse_args()
    text = sys.stdin.read() if o.header == '-' else open(o.header).read()
    protos = read_header(text)
    table = read_table(o.table)
    missing, rows, code, decls = [], [], [], []
    for name in sorted(protos):
        params = protos[name]
        if not carries_buffer(params):
            continue
        kind, e, variant = classify(name, params, table)
        if kind is None:
            missing.append(name)
            continue
        rows.append((name, kind, e.flags.get('pass', '')))
        if kind == 'pass':
            continue
        g = Gen(name, params, e, variant)
        code.append(g.wrapper(kind))
        if kind == 'accel':
            decls.append('#define PICOLL_HAVE_%s 1' % name)
            decls.append(g.signature('picoll_stage_' + name[4:], static=True) + ';')
    if o.check:
        for name in missing:
            print('%s: carries a buffer and is not in pmpi/calls.def' % name)
        print('%d functions with a buffer: %d described, %d missing'
              % (len(rows) + len(missing), len(rows), len(missing)))
        return 1 if missing else 0
    if o.list:
        for name, kind, why in rows:
            print('%-34s %s%s' % (name, kind, ' (%s)' % why if why else ''))
        return 0
    if o.h:
        sys.stdout.write('\n'.join(['/* Generated by pmpi/gen_wrappers.py: do not edit. */',
                                     '#ifndef PICOLL_GEN_WRAPPERS_H', '#define PICOLL_GEN_WRAPPERS_H',
                                     '#include <mpi.h>', '/* the staging fallbacks of the accelerated '
                                     'collectives (pmpi/wrappers.c) */'] + decls + ['#endif']) + '\n')
        return 0
    out = ['/* Generated by pmpi/gen_wrappers.py from pmpi/calls.def and this MPI\'s mpi.h: do not edit. */',
           '#pragma GCC visibility push(default)', '#include <mpi.h>', '#pragma GCC visibility pop',
           '#include "pmpi/gen_wrappers.h"', '#include "pmpi/half_ops.h"', '#include "pmpi/records.h"',
           '#include "pmpi/stage.h"', '',
           '#include "util/export.h"', '']
    for lines in code:
        out.extend(lines)
        out.append('')
    kinds = {'staged': 'staged', 'split': 'staged', 'accel': 'accelerated', 'refuse': 'refused',
             'pass': 'no message data'}
    out.append('/* every function of this MPI with a buffer, for picoll_info --calls */')
    out.append('const picoll_gen_call_t picoll_gen_calls[] = {')
    for name, kind, why in rows:
        out.append('    {"%s", "%s", "%s"},' % (name, kinds[kind], why.replace('"', "'")))
    out.append('};')
    out.append('const int picoll_gen_ncalls = %d;' % len(rows))
    out.append('')
    out.append('/* %d staged, accelerated, refused or passed functions; %d missing from the table */'
               % (len(rows), len(missing)))
    sys.stdout.write('\n'.join(out) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
