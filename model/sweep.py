"""The sweep of one page, `_mi_page_purge_holes`, in the real order (digest section 6).

1. skip: option off, page all free, purge_delay < 0;
2. hold: a large page stamped in the current or previous epoch keeps its free blocks and its
   unformed tail, and tells the thread that something was left (`holes_sweep_deferred`);
3. purge the unformed tail; check eligibility; skip a page unchanged since its last complete
   walk unless this is a full sweep; else walk.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.floor import compute_floor_age, compute_floor_bytes, mi_holes_floor_take
from model.geometry import mi_page_can_purge_holes
from model.holes import mi_page_purge_holes_walk, mi_page_purge_unformed_tail
from model.page import Page, encode_walked
from model.thread import ThreadState
from model.variants import SweepContext, is_page_held

@dataclass(frozen=True)
class WalkRecord:
    """Ghost record of a page's last walk by a sweep."""

    state_before: int
    epoch: int
    now: int
    dropped: int
    complete: bool
    state_after: int
    capacity: int
    used: int
    last_alloc_ms: int | None = None  # page.last_alloc_ms when the walk ran


OFF = "off"
ALL_FREE = "all-free"
HELD = "held"
INELIGIBLE = "ineligible"
UNCHANGED = "unchanged"
WALKED = "walked"
FLOOR = "floor"  # kept under the floor of later versions (model.floor)
FLOOR_PENDING = "floor-pending"  # up for the floor, decided at the end of the pass
INCOMPLETE = "incomplete"


def has_pending_tail(page: Page) -> bool:
    """Unformed blocks whose OS pages are not discarded yet."""
    return page.has_unformed_tail() and page.unformed_purged_hi <= page.unformed_purged_lo


def has_held_memory(page: Page) -> bool:
    """Whether holding `page` back leaves something for a later sweep: free blocks on any of
    its lists, or an unformed tail not discarded yet. Such a hold sets the thread's
    holes_sweep_deferred (digest 6, step 2: "set the thread's holes_sweep_deferred if it has
    free blocks or a pending tail"), which keeps a park from being done and makes
    mi_on_thread_idle_pending true (seed 000 (2): "a park in which such blocks were left is
    therefore not marked as done"; "true when the last sweep of this thread's heaps left
    such blocks")."""
    return bool(page.free or page.local_free or page.xthread_free) or has_pending_tail(page)


def is_purging_off(opts) -> bool:
    """Digest 6, step 1: option purge_holes off, or purge_delay < 0: the sweep does nothing,
    the unformed tail included (the real test: "option off is a no-op")."""
    return not opts.purge_holes or opts.purge_delay < 0


def mi_page_purge_holes(world, page: Page, thread: ThreadState, ctx: SweepContext) -> str:
    """Sweep one page (already collected by the driver); returns the outcome."""
    opts = world.options
    if is_purging_off(opts):
        return _done(page, OFF)
    if page.is_all_free():
        return _done(page, ALL_FREE)
    if is_page_held(opts.variant, page, ctx, world.variant_state):
        if has_held_memory(page):
            thread.holes_sweep_deferred = True
        return _done(page, HELD)
    if is_kept_by_floor(world, page, thread, ctx):
        return _done(page, FLOOR_PENDING if world.floor_pending is not None else FLOOR)
    return mi_page_purge_holes_now(world, page, ctx)


def is_kept_by_floor(world, page: Page, thread: ThreadState, ctx: SweepContext) -> bool:
    """The floor of later versions, not in the seed (digest 6.3; model.floor): a page past
    the hold that was allocated from in the last floor_epochs epochs stays, decided at the end
    of the thread's pass (world.floor_pending) or, for an abandoned page, now."""
    age = compute_floor_age(page, ctx.epoch, world.options)
    if age is None or compute_floor_bytes(page) == 0:
        return False
    if world.floor_pending is not None and not page.abandoned:
        world.floor_pending.append((age, page))
        return True
    if mi_holes_floor_take(world, thread, compute_floor_bytes(page)):
        mi_page_purge_unformed_tail(page)
        return True
    return False


def mi_page_purge_holes_now(world, page: Page, ctx: SweepContext) -> str:
    """Digest 6, step 4: purge the unformed tail, check eligibility, skip a page unchanged
    since its last complete walk unless the sweep is full, else walk."""
    mi_page_purge_unformed_tail(page)
    if not mi_page_can_purge_holes(page.geom):
        page.mem.holes.ineligible_pages += 1
        return _done(page, INELIGIBLE)
    if not ctx.full and page.swept_state == encode_walked(page.capacity, page.used):
        page.mem.holes.pages_skipped += 1
        return _done(page, UNCHANGED)
    state_before = page.swept_state
    page.version += 1
    page.sweeping = True
    result = mi_page_purge_holes_walk(page)
    page.sweeping = False
    # Ghost: what the hold invariants need to judge this walk afterwards.
    page.last_walk = WalkRecord(state_before, ctx.epoch, ctx.now, result.dropped_blocks,
                                result.complete, page.swept_state, page.capacity, page.used,
                                page.last_alloc_ms)
    return _done(page, WALKED if result.complete else INCOMPLETE)


def _done(page: Page, outcome: str) -> str:
    page.emit("sweep_page", outcome=outcome)
    return outcome
