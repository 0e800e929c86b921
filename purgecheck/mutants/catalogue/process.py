"""Mutants that break the process-wide counters while every page's and thread's own state
stays right: only the sums of model/process_invariants.py (PR-*) see them at once."""

from __future__ import annotations

from model import holes
from model.heap import mi_page_reclaim as _mi_page_reclaim
from model.page import MI_PAGE_SWEPT_NONE
from model.park import mi_on_thread_idle_end as _mi_on_thread_idle_end
from purgecheck.mutants.patching import Patch, mutant


def _unpurge_all_keeps_stats(page):
    """Broken: the page goes back to the arena with its bits and accounting reset, but the
    process-wide counters keep its discarded bytes, blocks and tail."""
    runs = holes.compute_runs(page.purged_units())
    tail = page.unformed_purged_hi - page.unformed_purged_lo
    page.mem.holes.reuse_calls += len(runs) + (tail > 0)
    page.version += 1  # a mutant breaks the counters, not the incremental check
    page.purged = 0
    page.discarded_bytes = page.discarded_blocks = 0
    page.unformed_purged_lo = page.unformed_purged_hi = 0
    page.swept_state = MI_PAGE_SWEPT_NONE
    page.free_is_zero = False
    page.emit("unpurge_all", runs=[list(r) for r in runs])


def _count_discarded_up_only(page, units, blocks):
    """Broken: a page's accounting goes up and down, the process-wide counters only up (an
    unpurge is not subtracted from them)."""
    page.version += 1
    page.discarded_bytes += units * page.unit
    page.discarded_blocks += blocks
    if units > 0:
        page.mem.holes.count_discarded(units * page.unit, blocks)


def _reuse_tail_keeps_stats(page):
    """Broken: the unformed tail is brought back but still counted as discarded."""
    if page.unformed_purged_hi > page.unformed_purged_lo:
        page.mem.holes.reuse_calls += 1
        page.emit("reuse_tail", addr=page.unformed_purged_lo,
                  size=page.unformed_purged_hi - page.unformed_purged_lo)
    page.version += 1
    page.unformed_purged_lo = page.unformed_purged_hi = 0


def _full_sweep_uncounted(world, thread):
    """Broken: a sweep is a full one (it walks every page) but full_sweeps is not counted."""


def _unpark_keeps_parked_count(world, tid):
    """Broken: the owner leaves its park (PARKED -> RUNNING) and parked_count stays up."""
    left = _mi_on_thread_idle_end(world, tid)
    if left:
        world.subproc.parked_count += 1
    return left


def _reclaim_keeps_abandoned_count(world, page, heap):
    """Broken: a reclaimed page leaves the abandoned map and pages_abandoned keeps it."""
    _mi_page_reclaim(world, page, heap)
    world.subproc.pages_abandoned += 1


mutant("unpurge-all-keeps-stats", "a page goes back to the arena (heap destroy, heap delete, "
       "a page that became free) and the process-wide counters keep its discards",
       ("PR-DISCARDED-BYTES-SUM", "PR-PURGED-BLOCKS-SUM"),
       Patch("model.holes", "mi_page_unpurge_all", _unpurge_all_keeps_stats))
mutant("unpurge-counted-up-only", "an unpurge lowers the page's accounting but not the "
       "process-wide counters", ("PR-DISCARDED-BYTES-SUM", "PR-PURGED-BLOCKS-SUM"),
       Patch("model.holes", "count_discarded", _count_discarded_up_only))
mutant("tail-reuse-keeps-stats", "the unformed tail is brought back and still counted as "
       "discarded process-wide", ("PR-UNFORMED-BYTES-SUM",),
       Patch("model.holes", "mi_page_reuse_unformed_tail", _reuse_tail_keeps_stats))
mutant("full-sweep-uncounted", "a full sweep walks every page and is not counted in "
       "holes_stats.full_sweeps", ("PR-FULL-SWEEPS-SUM",),
       Patch("model.drivers", "count_full_sweep", _full_sweep_uncounted),
       c_switch="full_sweeps_uncounted")
mutant("unpark-keeps-parked-count", "a thread leaves its park and parked_count still counts "
       "it", ("PR-PARKED-COUNT-SUM",),
       Patch("model.park", "mi_on_thread_idle_end", _unpark_keeps_parked_count))
mutant("reclaim-keeps-abandoned-count", "a reclaimed page leaves the abandoned map and "
       "pages_abandoned still counts it", ("PR-ABANDONED-PAGES-SUM",),
       Patch("model.heap", "mi_page_reclaim", _reclaim_keeps_abandoned_count))
