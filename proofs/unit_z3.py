"""Z3: the purge unit and the block <-> unit map, for every page geometry (seed 000, (1)).

For each target (64-bit, 32-bit) and OS page (4, 16, 64 KiB), with the page's address, its
size (any multiple of the arena slice up to a large page), the first-block offset, the block
size and the capacity all symbolic, Z3 proves: the unit is a power-of-two multiple of the OS
page, the smallest for which the block area needs at most 256 units, and the units counted
from align_down(page_start, unit) (PG-UNIT); and the first and last block over unit k, and the
units of block i, are exactly the overlapping ones (PF-UNIT-MAP). Also the seed's cases: the
unit is the OS page for small and medium pages, for large pages on 16 KiB OS pages and up and
on 32-bit, and 16 KiB for a 64-bit large page on 4 KiB OS pages.
"""

from __future__ import annotations

import z3

from model.geometry import ARCH32, ARCH64, KiB, MI_PAGE_PURGE_BITS, OS_PAGE_SIZES, Arch
from proofs import agreement, mirror
from proofs.core import Claim, Outcome, Proof, Twin, run_claims, val
from proofs.steptable import render_facts

TARGETS = (ARCH64, ARCH32)


def unit_claims(arch: Arch, os_page: int, broken: str = "") -> list[Claim]:
    g = mirror.SymGeometry.fresh(arch, os_page)
    dom = g.domain()
    u = mirror.purge_unit(g, broken)
    base = mirror.unit_base(g, u)
    bits = mirror.purge_bits(g, u)
    where = f"{arch.bits}-bit, OS page {os_page // KiB} KiB"
    cands = mirror.unit_candidates(os_page, arch)
    half_bits = mirror.purge_bits(g, mirror.div(u, 2))
    i, k = z3.Ints("i k")
    ps, bs, cap = g.page_start, g.block_size, g.capacity
    nonempty, first, last = mirror.blocks_of_unit(ps, bs, base, u, k, cap, broken)
    k_lo, k_hi = mirror.units_of_block(ps, bs, base, u, i)
    ov = mirror.overlaps(ps, bs, base, u, i, k)
    block_ok = z3.And(i >= 0, i < cap)
    return [
        Claim(f"PG-UNIT ({where}): the unit is a power-of-two multiple of the OS page", dom,
              z3.Or([u == c for c in cands])),
        Claim(f"PG-UNIT ({where}): the block area needs at most {MI_PAGE_PURGE_BITS} units",
              dom, z3.And(bits >= 1, bits <= MI_PAGE_PURGE_BITS)),
        Claim(f"PG-UNIT ({where}): no smaller unit would do", dom,
              z3.Implies(u > os_page, half_bits > MI_PAGE_PURGE_BITS)),
        Claim(f"PG-UNIT ({where}): bit k counts from align_down(page_start, unit)", dom,
              z3.And(base % u == 0, base <= ps, ps < base + u, g.area_end <= 2 ** arch.bits)),
        Claim(f"PF-UNIT-MAP ({where}): blocks_of_unit(k) is exactly the blocks over unit k",
              dom + [block_ok, k >= 0, k < bits],
              ov == z3.And(nonempty, first <= i, i <= last)),
        Claim(f"PF-UNIT-MAP ({where}): units_of_block(i) is exactly the units block i meets, "
              f"all of them bits of the bitmap",
              dom + [block_ok, k >= 0],
              z3.And(ov == z3.And(k_lo <= k, k < k_hi), k_lo >= 0, k_hi <= bits)),
    ]


def seed_case_claims(broken: str = "") -> list[Claim]:
    """The seed's words about which pages keep the OS page as their unit."""
    out = []
    for arch in TARGETS:
        for os_page in OS_PAGE_SIZES:
            g = mirror.SymGeometry.fresh(arch, os_page)
            u = mirror.purge_unit(g, broken)
            if arch.bits == 32 or os_page >= 16 * KiB:
                out.append(Claim(f"PG-UNIT ({arch.bits}-bit, OS page {os_page // KiB} KiB): "
                                 f"every page's unit is the OS page", g.domain(), u == os_page))
                continue
            out.append(Claim(f"PG-UNIT ({arch.bits}-bit, OS page 4 KiB): small and medium "
                             f"pages keep the OS page", g.domain(arch.medium_page_size),
                             u == os_page))
            large = g.domain() + [g.page_size == arch.large_page_size, g.offset <= 64 * KiB,
                                  g.block_size <= arch.large_max_obj_size]
            out.append(Claim(f"PG-UNIT ({arch.bits}-bit, OS page 4 KiB): a large page (block "
                             f"<= {arch.large_max_obj_size // KiB} KiB, offset <= 64 KiB) has "
                             f"16 KiB units", large, u == 16 * KiB))
    return out


def render_geometry(claim: Claim, model: z3.ModelRef) -> str:
    names = ["slice_start", "page_size", "first_block_offset", "block_size", "capacity"]
    facts = [(n, val(model, z3.Int(n))) for n in names]
    facts += [("block i", val(model, z3.Int("i"))), ("unit k", val(model, z3.Int("k")))]
    return render_facts(facts, "counterexample geometry (block i, unit k of the bitmap):")


# The grid on which the mirror is compared with the model before Z3 proves the mirror: pages
# of 1, 2, 8, 17 and 64 arena slices (those up to a large page, and the large page itself) of
# both targets and every OS page, with these offsets and block sizes (those that leave one
# block), at full capacity and at one block; for each, the unit, its base and the bits, and blocks_of_unit /
# units_of_block at the first two, the middle and the last unit and block.
GRID_OFFSETS = (0, 192, 4096)
GRID_BLOCK_SIZES = (16, 1000, 4096, 5120, 65536, 98304, 327680, 524288)
GRID_SLICES = (1, 2, 8, 17, 64)


def grid() -> list[tuple]:
    out = []
    for arch in TARGETS:
        step = arch.arena_slice_size
        for os_page in OS_PAGE_SIZES:
            sizes = {n * step for n in GRID_SLICES if n * step <= arch.large_page_size}
            for size in sorted(sizes | {arch.large_page_size}):
                for off in GRID_OFFSETS:
                    for bs in GRID_BLOCK_SIZES:
                        if bs <= size - off:
                            out.append((arch, os_page, size, off, bs))
    return out


def _mirror_of(point) -> tuple:
    arch, os_page, size, off, bs = point
    g = mirror.SymGeometry(arch, os_page, arch.arena_slice_size, size, off, bs, 0)
    u = mirror.purge_unit(g)
    base, bits, cap = mirror.unit_base(g, u), mirror.purge_bits(g, u), g.reserved
    out = [u, base, bits]
    for c in {1, cap}:
        for k in {0, 1, bits // 2, bits - 1}:
            ne, first, last = mirror.blocks_of_unit(g.page_start, bs, base, u, k, c)
            out.append(range(first, last + 1) if ne else range(0))
        for i in {0, 1, c // 2, c - 1} & set(range(c)):
            out.append(range(*mirror.units_of_block(g.page_start, bs, base, u, i)))
    return tuple(out)


def _model_of(point) -> tuple:
    from model.geometry import PageGeometry, PageKind, UnitMap

    arch, os_page, size, off, bs = point
    geom = PageGeometry(PageKind.LARGE, bs, os_page, arch, off, arch.arena_slice_size, size)
    um, cap = UnitMap.of(geom), geom.reserved
    out = [um.unit, um.base, um.bits]
    for c in {1, cap}:
        for k in {0, 1, um.bits // 2, um.bits - 1}:
            r = um.blocks_of_unit(k, c)
            out.append(r if len(r) else range(0))
        for i in {0, 1, c // 2, c - 1} & set(range(c)):
            out.append(um.units_of_block(i))
    return tuple(out)


def mirror_agrees() -> Outcome | None:
    """The mirror against model.geometry (compute_purge_unit and UnitMap, looked up now)."""
    return agreement.compare("the unit, base, bits and block <-> unit map", grid(),
                             _mirror_of, _model_of)


def run_unit_proof(quick: bool, broken: str = "") -> Outcome:
    def prove() -> Outcome:
        claims = [c for a in TARGETS for o in OS_PAGE_SIZES for c in unit_claims(a, o, broken)]
        claims += seed_case_claims(broken)
        return run_claims(claims, render_geometry,
                          "64-bit and 32-bit, OS page 4/16/64 KiB, every address, size, "
                          "offset, block size and capacity")
    if broken:  # a broken mirror is not the model's rule: Z3 must refute it by itself
        return prove()
    return agreement.then_prove(mirror_agrees, f"{len(grid()):,} geometries", prove)


PROOF = Proof("unit", ("PG-UNIT", "PF-UNIT-MAP"), "z3", run_unit_proof,
              "the purge unit and the block <-> unit map for every page geometry")
TWINS = [
    # the model's own functions broken: the mirror no longer equals them, the proof fails
    Twin("unit-model-os-page", "unit", ("PG-UNIT",), "z3", run_unit_proof,
         "mutant unit-os-page: the model's unit never doubles", mutant="unit-os-page"),
    Twin("unit-model-last-block-short", "unit", ("PF-UNIT-MAP",), "z3", run_unit_proof,
         "mutant unit-last-block-short: the model's blocks over a unit miss the last one",
         mutant="unit-last-block-short"),
    Twin("unit-os-page", "unit", ("PG-UNIT",), "z3",
         lambda quick: run_unit_proof(quick, mirror.UNIT_AT_OS_PAGE),
         "the unit is left at the OS page (no doubling)"),
    Twin("last-block-off-by-one", "unit", ("PF-UNIT-MAP",), "z3",
         lambda quick: run_unit_proof(quick, mirror.LAST_BLOCK_OFF_BY_ONE),
         "blocks_of_unit takes the block at the unit's end byte hi, not hi - 1"),
]
