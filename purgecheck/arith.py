"""The unit arithmetic of the fork's real tests, over their grids, on the model and on C.

test-purge-holes-large.c ("unit-arithmetic") and test-purge-holes.c ("os-page-arithmetic", the
later form of "run-arithmetic") check one function of the real code against a direct
enumeration: for a unit size, a block size, the offset of the first block, a capacity and a
unit index k, whether unit k lies wholly inside the formed blocks, and the first and last block
that overlaps it; a unit that does not lie inside gives first = last = 0. Here the same grids
(their facts: the sizes, offsets and capacities, not their code) run through the arithmetic the
holes walk uses on each side: the model's UnitMap (model/geometry.py: is_unit_inside_blocks,
blocks_of_unit) and the C reference's (reference_c/page.c, through `driver --arith GRID`). The
two outputs are compared line by line, and the checks `unit-blocks-grid` and
`os-page-blocks-grid` (purgecheck/realtests/checks.py) judge each against the definition.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from model.geometry import KiB, MiB, UnitMap, align_down


@dataclass(frozen=True)
class Grid:
    name: str
    source: str  # the real test and its check
    check: str  # the check of purgecheck.realtests.checks that states its assertion


GRIDS = {
    "large": Grid("large", "test-purge-holes-large.c: unit-arithmetic", "unit-blocks-grid"),
    "small": Grid("small", "test-purge-holes.c: os-page-arithmetic", "os-page-blocks-grid"),
}

# test-purge-holes-large.c: units above the OS page under block sizes that are and are not
# multiples of them, with and without an offset of the first block, a full 4 MiB capacity
LARGE_UNITS = (8 * KiB, 16 * KiB, 64 * KiB)
LARGE_BLOCKS = tuple(k * KiB for k in (80, 96, 112, 128, 160, 320, 512))
LARGE_OFFSETS = (0, 4 * KiB, 192)
# test-purge-holes.c: the OS page is the unit; a 64 KiB and a 512 KiB page worth of blocks
# and the degenerate capacities 0 and 1; two unit indices past the block area
SMALL_UNITS = (4 * KiB, 16 * KiB)
SMALL_BLOCKS = (16, 32, 64, 512, 1024, 4096, 8192, 10240, 10256, 16384, 21856, 65536)
SMALL_OFFSETS = (0, 8, 64, 128, 4096, 8192, 12288)


def geometries(grid: str):
    """(unit, block size, offset, capacity, unit indices) of every geometry of the grid, in
    the order the C reference writes them (reference_c/arith.c)."""
    if grid == "large":
        for unit in LARGE_UNITS:
            for bs in LARGE_BLOCKS:
                for off in LARGE_OFFSETS:
                    cap = (4 * MiB - off) // bs
                    span = off + cap * bs - align_down(off, unit)
                    yield unit, bs, off, cap, -(-span // unit)
    elif grid == "small":
        for unit in SMALL_UNITS:
            for bs in SMALL_BLOCKS:
                for off in SMALL_OFFSETS:
                    for cap in (0, 1, 64 * KiB // bs, 512 * KiB // bs):
                        yield unit, bs, off, cap, (cap * bs + off % unit) // unit + 2
    else:
        raise ValueError(f"unknown grid {grid!r}; expected one of {', '.join(GRIDS)}")


def unit_blocks(units: UnitMap, k: int, capacity: int) -> tuple[bool, int, int]:
    """The real code's _mi_page_purge_os_page_blocks on the model's arithmetic: (inside,
    first, last), and (False, 0, 0) for a unit that is not wholly inside the formed blocks."""
    if not units.is_unit_inside_blocks(k, capacity):
        return False, 0, 0
    blocks = units.blocks_of_unit(k, capacity)
    return True, blocks.start, blocks.stop - 1


def model_grid(grid: str) -> list[dict]:
    """The grid's lines, computed by the model."""
    out = []
    for unit, bs, off, cap, nk in geometries(grid):
        units = UnitMap(off, bs, unit, align_down(off, unit), nk)
        for k in range(nk):
            inside, first, last = unit_blocks(units, k, cap)
            out.append({"ev": "unit_blocks", "grid": grid, "unit": unit, "block_size": bs,
                        "offset": off, "capacity": cap, "k": k, "inside": inside,
                        "first": first, "last": last})
    return out


def c_grid(grid: str, mutant: str | None = None) -> list[dict]:
    """The grid's lines, computed by the C reference (`driver --arith GRID`)."""
    import orjson

    from purgecheck.conformance import DriverError, c_switch, ensure_driver

    path, _ = ensure_driver("release")
    args = [str(path), "--arith", grid] + (["--mutant", c_switch(mutant)] if mutant else [])
    done = subprocess.run(args, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise DriverError(f"{' '.join(args)}: exit {done.returncode}: "
                          f"{done.stderr.decode(errors='replace').strip()[:300]}")
    return [orjson.loads(line) for line in done.stdout.splitlines() if line]


def first_difference(model: list[dict], c: list[dict]) -> str | None:
    """Where the C reference's lines first differ from the model's, in words; None if never."""
    for i, (a, b) in enumerate(zip(model, c)):
        if a != b:
            return f"line {i + 1}: model {a}, C {b}"
    if len(model) != len(c):
        return f"the model wrote {len(model)} lines, C {len(c)}"
    return None


HEADER = {"format": "purgecheck-arith", "config": {"os_page_size": 4 * KiB,
                                                   "first_block_offset": 0}}


def run_grid(grid: str, driver: bool = True) -> dict:
    """{"model": {check: problems}, "C": {...}, "diff": first difference or None} for a grid;
    without the C reference (driver False) only the model's."""
    from purgecheck.realtests.checks import run_checks

    check = GRIDS[grid].check
    model = model_grid(grid)
    out: dict = {"model": run_checks((check,), HEADER, model)}
    if driver:
        c = c_grid(grid)
        out["C"] = run_checks((check,), HEADER, c)
        out["diff"] = first_difference(model, c)
    return out
