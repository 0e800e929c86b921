"""The model's page arithmetic, written once more over Z3 integers.

Z3 cannot run `model.geometry` (its loop and `range` need concrete values), so each function
here mirrors one function of the model, line for line, and names it. The suite checks the
mirror against the model on thousands of concrete geometries (tests/test_proofs_mirror.py),
so a proof about the mirror is a proof about the model's arithmetic. A `broken` name turns
one line into the broken twin the proofs must refute.

Integer division: for a positive divisor SMT-LIB `div` is floor division, as Python's `//`.

Each function also runs on plain Python ints (`div`, `if_`, `and_` pick Z3's operator for a
Z3 term and Python's for a number): so the proof's first step can compare the mirror with the
model on a whole grid of geometries in microseconds each (proofs/agreement.py, unit_z3.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from model.geometry import MI_PAGE_PURGE_BITS, Arch

UNIT_AT_OS_PAGE = "unit-os-page"  # compute_purge_unit never doubles
LAST_BLOCK_OFF_BY_ONE = "last-block-off-by-one"  # blocks_of_unit uses hi, not hi - 1


def div(x, d):
    """Floor division of Z3 integer terms, or of Python ints."""
    return x / d if z3.is_expr(x) or z3.is_expr(d) else x // d


def if_(c, a, b):
    return z3.If(c, a, b) if any(z3.is_expr(v) for v in (c, a, b)) else (a if c else b)


def and_(*xs):
    return z3.And(*xs) if any(z3.is_expr(v) for v in xs) else all(xs)


def align_down(x, a):
    """model.geometry.align_down."""
    return x - x % a


def ceil_div(x, d):
    """`-(-x // d)` as the model writes it."""
    return -div(-x, d)


@dataclass
class SymGeometry:
    """A page geometry with every size symbolic: the page's address `slice_start` and size
    `page_size`, the first-block offset, the block size and the capacity (formed blocks)."""

    arch: Arch
    os_page_size: int
    slice_start: z3.ArithRef
    page_size: z3.ArithRef
    offset: z3.ArithRef
    block_size: z3.ArithRef
    capacity: z3.ArithRef

    @classmethod
    def fresh(cls, arch: Arch, os_page_size: int, tag: str = "") -> "SymGeometry":
        n = lambda s: z3.Int(f"{s}{tag}")  # noqa: E731
        return cls(arch, os_page_size, n("slice_start"), n("page_size"), n("first_block_offset"),
                   n("block_size"), n("capacity"))

    @property
    def page_start(self):
        return self.slice_start + self.offset

    @property
    def reserved(self):
        return div(self.page_size - self.offset, self.block_size)

    @property
    def area_end(self):
        """PageGeometry.area_end: page_start + reserved * block_size."""
        return self.page_start + self.reserved * self.block_size

    def domain(self, max_page_size: int | None = None) -> list:
        """Every geometry an arena can form: the page at an arena slice, no bigger than a large
        page, inside the address space; any offset and block size that leave one block."""
        slice_ = self.arch.arena_slice_size
        top = max_page_size or self.arch.large_page_size
        return [
            self.page_size >= slice_, self.page_size <= top, self.page_size % slice_ == 0,
            self.slice_start >= 0, self.slice_start % slice_ == 0,
            self.slice_start + self.page_size <= 2 ** self.arch.bits,
            self.offset >= 0, self.block_size >= 1,
            self.block_size <= self.page_size - self.offset,
            self.capacity >= 1, self.capacity <= self.reserved,
        ]


def unit_candidates(os_page_size: int, arch: Arch) -> list[int]:
    """The values the doubling loop can stop at: os, 2 os, ... up to the first >= the slice."""
    out = [os_page_size]
    while out[-1] < arch.arena_slice_size:
        out.append(out[-1] * 2)
    return out


def purge_unit(g: SymGeometry, broken: str = ""):
    """model.geometry.compute_purge_unit, its loop unrolled: double while the block area
    needs more than 256 units and the unit is below the arena slice."""
    cands = unit_candidates(g.os_page_size, g.arch)
    if broken == UNIT_AT_OS_PAGE:
        return if_(g.page_size > 0, cands[0], cands[0])
    expr = cands[-1]
    for u in reversed(cands[:-1]):
        needs_more = g.area_end - align_down(g.page_start, u) > MI_PAGE_PURGE_BITS * u
        expr = if_(needs_more, expr, u)  # u < slice holds for every u here
    return expr


def unit_base(g: SymGeometry, unit):
    """model.geometry.compute_unit_base."""
    return align_down(g.page_start, unit)


def purge_bits(g: SymGeometry, unit):
    """model.geometry.compute_purge_bits: ceil((area_end - base) / unit)."""
    return ceil_div(g.area_end - unit_base(g, unit), unit)


def unit_range(base, unit, k):
    """UnitMap.unit_range."""
    lo = base + k * unit
    return lo, lo + unit


def units_of_block(page_start, block_size, base, unit, i):
    """UnitMap.units_of_block: (first unit, one past the last)."""
    lo = page_start + i * block_size
    hi = lo + block_size
    return div(lo - base, unit), div(hi - 1 - base, unit) + 1


def blocks_of_unit(page_start, block_size, base, unit, k, capacity, broken: str = ""):
    """UnitMap.blocks_of_unit: (nonempty, first, last) of the formed blocks over unit k."""
    lo, hi = unit_range(base, unit, k)
    first0 = div(lo - page_start, block_size)
    first = if_(first0 > 0, first0, 0)
    top = hi if broken == LAST_BLOCK_OFF_BY_ONE else hi - 1
    last0 = div(top - page_start, block_size)
    last = if_(last0 < capacity - 1, last0, capacity - 1)
    nonempty = and_(hi > page_start, first <= last)
    return nonempty, first, last


def overlaps(page_start, block_size, base, unit, i, k):
    """The seed's words, not the model's: block i's bytes meet unit k's bytes."""
    blo = page_start + i * block_size
    lo, hi = unit_range(base, unit, k)
    return and_(blo < hi, blo + block_size > lo)


def concrete(expr) -> int | bool:
    """Evaluate a mirror expression built from constants (used by the mirror's tests)."""
    if not z3.is_expr(expr):  # the mirror computed it on Python values already
        return expr
    v = z3.simplify(expr)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    return v.as_long()
