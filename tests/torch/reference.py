"""Reference data of picoll's torch tests: each rank's values for a case, and what a collective
over them gives, computed in plain Python (lists of Python numbers, made tensors only to compare).

A value depends on the dtype, the rank, its position and a salt per case: negatives, full-range
integers (so that int8 sums wrap around), half steps that every float type holds exactly, also
summed over 4 ranks (and, for PRODUCT, small factors whose products of 4 are exact). The values
repeat with a prime period, so that a reference over 100k elements costs a 1009-element
computation. Reductions follow picoll's definitions: bool SUM and MAX are or, PRODUCT and MIN
are and; integers wrap around; AVG divides the sum by the number of ranks.
"""

import functools
import math
import operator

import torch
import torch.distributed as dist

R = dist.ReduceOp
PERIOD = 1009
HALF_STEPS = [x / 2 for x in range(-8, 9)]  # sums over 4 ranks exact in every float type
PRODUCT_FLOATS = [-2.0, -1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0]  # products of 4 exact too
SMALL_INTS = [-3, -2, -1, 1, 2, 3]


def value(dtype, rank, i, salt, op):
    k = rank * 7919 + i * 104729 + salt * 31337
    if dtype == torch.bool:
        return k % 5 < 2
    if dtype.is_complex:
        return complex(HALF_STEPS[k % 17], HALF_STEPS[(k // 17) % 17])
    if dtype.is_floating_point:
        table = PRODUCT_FLOATS if op == R.PRODUCT else HALF_STEPS
        return table[k % len(table)]
    if op == R.PRODUCT:
        return 1 + k % 3 if dtype == torch.uint8 else SMALL_INTS[k % 6]
    info = torch.iinfo(dtype)
    return info.min + (k * 0x9E3779B97F4A7C15) % (info.max - info.min + 1)


@functools.lru_cache(maxsize=None)
def period(dtype, rank, salt, op=None):
    """One period of rank's values for a case (Python numbers)."""
    return [value(dtype, rank, i, salt, op) for i in range(PERIOD)]


def periodic(values, n, dtype):
    """A new tensor of n elements repeating values (one period)."""
    t = torch.tensor(values[:n], dtype=dtype)
    return t.repeat(-(-n // PERIOD))[:n] if n > PERIOD else t


def data(dtype, n, rank, salt, op=None):
    """Rank's n values for a case."""
    return periodic(period(dtype, rank, salt, op), n, dtype)


def gathered(dtype, n, ranks, salt):
    """The concatenation of the given ranks' data."""
    return torch.cat([data(dtype, n, r, salt) for r in ranks])


def wrap(v, dtype):
    """v as the integer dtype holds it (two's complement wrap-around)."""
    info = torch.iinfo(dtype)
    return (v - info.min) % (info.max - info.min + 1) + info.min


def combine(vals, op, dtype):
    """op over one element of each rank, as picoll defines it."""
    if dtype == torch.bool:
        if op in (R.SUM, R.MAX, R.BOR):
            return any(vals)
        return sum(vals) % 2 == 1 if op == R.BXOR else all(vals)
    bitwise = {R.BAND: operator.and_, R.BOR: operator.or_, R.BXOR: operator.xor}
    if op in bitwise:
        r = functools.reduce(bitwise[op], vals)
    else:
        r = {R.SUM: sum, R.AVG: sum, R.PRODUCT: math.prod, R.MIN: min, R.MAX: max}[op](vals)
    if op == R.AVG:
        return r / len(vals)
    return r if dtype.is_floating_point or dtype.is_complex else wrap(r, dtype)


@functools.lru_cache(maxsize=None)
def reduced_period(dtype, op, ranks, salt):
    return [combine(col, op, dtype) for col in zip(*(period(dtype, r, salt, op) for r in ranks))]


def reduced(dtype, n, op, ranks, salt):
    """The reference: op over the given ranks' data, element by element."""
    return periodic(reduced_period(dtype, op, tuple(ranks), salt), n, dtype)


def ops_for(dtype):
    if dtype.is_complex:
        return (R.SUM, R.AVG)
    if dtype.is_floating_point:
        return (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG)
    return (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR)
