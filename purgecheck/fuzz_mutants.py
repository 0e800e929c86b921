"""Mutants that the fuzz machines catch and the scenarios cannot.

The page invariants judge the page's lists and bits; what the program reads from a block is
the byte shadow's to judge (stateful_tests.shadow), and the first mutants here break what the
program would see. The last two break the epoch advance where only an interleaving of
sweepers shows it, which the epoch machine's scheduler finds (stateful_tests.epoch_machine).
"""

from __future__ import annotations

from model import alloc, holes
from model.epoch import MOVING, PC_CAS, PC_DONE, PC_INCREMENT, PC_STORE
from purgecheck.mutants import Patch, mutant

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
        page.double_frees = before


mutant("runs-one-unit-long", "each discarded run of units goes one unit too far",
       ("FZ-SURVIVORS-NEVER-DISCARDED", "PG-SURVIVORS-KEEP-BYTES"),
       Patch("model.holes", "compute_runs", _runs_one_unit_long))
mutant("double-free-uncounted", "a double free is refused but not counted",
       ("FZ-DOUBLE-FREE-REPORTED",),
       Patch("model.alloc", "check_free", _double_free_uncounted))
mutant("zalloc-clears-link-only", "mi_zalloc clears only the link word of a reused block",
       ("FZ-ZALLOC-ZERO",),
       Patch("model.alloc", "mi_page_malloc", _zalloc_clears_link_only))


def _collect_keeps_xthread(page):
    """Broken: the frees of other threads are taken into `free` but left on xthread_free as
    well, so the next collect takes them again and a block can be handed out twice."""
    if page.xthread_free:
        page.used -= len(page.xthread_free)
    page.free.extend(page.xthread_free + page.local_free)
    page.local_free = []


mutant("collect-keeps-xthread", "collect leaves the other threads' frees on xthread_free",
       ("FZ-NO-BLOCK-TWICE", "PG-LIVE-NOT-FREE"),
       Patch("model.alloc", "mi_page_free_collect", _collect_keeps_xthread))


# -- the advance, broken where only an interleaving shows it (the epoch machine) ------------

def _cas_always_wins(st, f, now, interval):
    """Broken: the claim is a plain store of MOVING, not a compare-and-swap, so two sweepers
    that both read the old start both move the epoch."""
    st.start = MOVING
    f.pc = PC_INCREMENT


def _store_first_reading(st, f, now, interval):
    """Broken: the new epoch's beginning is the clock read BEFORE the claim, not the one read
    again after the increment; a sweeper preempted in between records it too early."""
    st.start = f.now
    st.history.recorded_begin[st.epoch] = f.now
    f.pc = PC_DONE


mutant("advance-cas-always-wins", "the advance claims the move with a store, not a CAS",
       ("EP-NO-SHORT-EPOCH",),
       Patch("model.epoch", "STEPS", _cas_always_wins, key=PC_CAS))
mutant("advance-start-first-read", "the new epoch's start is the clock read before the claim",
       ("EP-RECORDED-NOT-BEFORE-REAL",),
       Patch("model.epoch", "STEPS", _store_first_reading, key=PC_STORE))
