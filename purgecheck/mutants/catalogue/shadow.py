"""Mutants that only the fuzz machines' byte shadow sees (stateful_tests.shadow).

The page invariants judge the page's lists and bits; what the program reads from a block is
the shadow's to judge. Each mutant here breaks one thing the program would see.
"""

from __future__ import annotations

from model import alloc, holes
from purgecheck.mutants.patching import Patch, mutant

# Kept in a dict: `applied` rebinds every module attribute that IS the patched function.
_ORIGINAL = {"mi_page_malloc": alloc.mi_page_malloc, "check_free": alloc.check_free,
             "compute_runs": holes.compute_runs}


def _zalloc_clears_link_only(page, zero=False):
    """Broken: mi_zalloc clears only the link word, as if every free block were known zero,
    so a reused block comes back with the program's old bytes in it."""
    i = _ORIGINAL["mi_page_malloc"](page, False)
    if i is not None and zero:
        page.mem.touch(page.geom.block_addr(i), min(8, page.block_size))
    return i


def _runs_one_unit_long(units):
    """Broken: each run of units goes one unit past its end, so the walk's discard reaches
    the unit after the run, whose bit stays clear and whose block may be live."""
    return [(k0, k1 + 1) for k0, k1 in _ORIGINAL["compute_runs"](units)]


def _double_free_uncounted(page, i):
    """Broken: a double free is refused but not counted in page.double_frees."""
    before = page.double_frees
    try:
        _ORIGINAL["check_free"](page, i)
    finally:
        page.version += 1  # a mutant breaks the count, not the incremental check
        page.double_frees = before


mutant("runs-one-unit-long", "each discarded run of units goes one unit too far",
       ("FZ-SURVIVORS-NEVER-DISCARDED", "PG-SURVIVORS-KEEP-BYTES"),
       Patch("model.holes", "compute_runs", _runs_one_unit_long))
mutant("double-free-uncounted", "a double free is refused but not counted",
       ("FZ-DOUBLE-FREE-REPORTED",),
       Patch("model.alloc", "check_free", _double_free_uncounted),
       seen_by_one="the free is still refused and logged (the scenarios and the C trace see "
       "that, and agree); only the fuzz machines' shadow, which knows which blocks the "
       "program holds, checks the page's count of double frees")
mutant("zalloc-clears-link-only", "mi_zalloc clears only the link word of a reused block",
       ("FZ-ZALLOC-ZERO",),
       Patch("model.alloc", "mi_page_malloc", _zalloc_clears_link_only))


def _collect_keeps_xthread(page):
    """Broken: the frees of other threads are taken into `free` but left on xthread_free as
    well, so the next collect takes them again and a block can be handed out twice."""
    page.version += 1
    if page.xthread_free:
        page.used -= len(page.xthread_free)
    page.free.extend(page.xthread_free + page.local_free)
    page.local_free = []


mutant("collect-keeps-xthread", "collect leaves the other threads' frees on xthread_free",
       ("FZ-NO-BLOCK-TWICE", "PG-LIVE-NOT-FREE"),
       Patch("model.alloc", "mi_page_free_collect", _collect_keeps_xthread))
