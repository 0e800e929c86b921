"""Who sweeps, and when: the inline idle sweep and its `_pending` (digest section 8).

Seed 000, change (2): "The inline mi_on_thread_idle() follows the same rule ... Nothing comes
back for what an inline sweep leaves, so there is mi_on_thread_idle_pending(): true when the
last sweep of this thread's heaps left such blocks".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.alloc import mi_page_free_collect
from model.floor import mi_holes_floor_release, resolve_floor
from model.epoch import (AdvanceFrame, compute_interval, mi_holes_epoch_advance,
                         mi_holes_epoch_advance_interleaved)
from model.page import Page
from model.retire import mi_theap_collect_retired
from model.sweep import mi_page_purge_holes, mi_page_purge_holes_now
from model.thread import ThreadState
from model.variants import SweepContext


@dataclass
class IdleSummary:
    outcomes: dict[int, str] = field(default_factory=dict)  # page id -> sweep outcome
    deferred: bool = False
    epoch: int = 0


def is_full_sweep(seq: int, full_every: int) -> bool:
    """Digest 6, step 4: every purge_holes_full_every-th sweep walks every page, unchanged or
    not (a change that leaves (capacity, used) as it was is seen then)."""
    return seq % full_every == 0


def mi_holes_sweep_begin(world, thread: ThreadState,
                         frame: AdvanceFrame | None = None) -> SweepContext:
    """_mi_page_purge_holes_sweep_begin: advance the epoch FIRST, count the sweep (a full
    one every purge_holes_full_every), and note the epoch the sweep runs in. `frame` is an
    advance that an interleaving engine already ran, one atomic step at a time."""
    opts = world.options
    interval = compute_interval(opts.purge_holes_min_interval)
    if opts.purge_holes:
        if frame is None and world.interleavings:
            frame = mi_holes_epoch_advance_interleaved(world.epoch, world.clock, interval,
                                                       lambda pc: run_interleavings(world, pc))
        elif frame is None:
            frame = mi_holes_epoch_advance(world.epoch, world.clock.read(), interval)
        thread.last_advance = frame
        if frame.advanced:
            world.log.append({"ev": "epoch_advance", "thread": thread.id,
                              "epoch": world.epoch.epoch, "start": world.epoch.start})
    thread.holes_sweep_seq += 1
    thread.holes_sweep_full = is_full_sweep(thread.holes_sweep_seq, opts.purge_holes_full_every)
    count_full_sweep(world, thread)
    thread.holes_sweep_epoch = world.epoch.epoch
    thread.epoch_seen = max(thread.epoch_seen, world.epoch.epoch)
    world.log.append({"ev": "sweep_begin", "thread": thread.id, "seq": thread.holes_sweep_seq,
                      "full": thread.holes_sweep_full, "epoch": thread.holes_sweep_epoch})
    return SweepContext(now=world.clock.read(), epoch=world.epoch.epoch, interval=interval,
                        in_handoff=False, full=thread.holes_sweep_full)


def count_full_sweep(world, thread: ThreadState) -> None:
    """mi_purge_holes_stats_t.full_sweeps: one more for a sweep that walks every page anyway,
    counted where the sweep begins (_mi_page_purge_holes_sweep_begin)."""
    if thread.holes_sweep_full:
        world.mem.holes.full_sweeps += 1


def run_interleavings(world, pc: str) -> None:
    """Before step `pc` of an advance: the armed interleavings of that step, each once, in
    the order they were armed."""
    due = [x for x in world.interleavings if x[0] == pc]
    if due:
        world.interleavings = [x for x in world.interleavings if x[0] != pc]
        for _, action in due:
            action(world)


def sweep_pages(world, thread: ThreadState, pages: list[Page], ctx: SweepContext,
                summary: IdleSummary) -> None:
    """Collect (never unpurge) and sweep each page; a page left with no live block goes back
    to the arena (unless the floor of later versions keeps it: is_free_page_kept)."""
    from model.heap import mi_page_retire

    for page in pages:
        if page.retired:
            continue
        mi_page_free_collect(page)
        if page.is_all_free() and page.capacity:
            if page.retire_expire and not world.options.purge_holes:
                continue  # the normal collect leaves a kept page (model.retire)
            if is_free_page_kept(world, page, thread, ctx):
                summary.outcomes[page.id] = "kept-free"
                continue
            mi_page_retire(world, page)
            summary.outcomes[page.id] = "retired"
            continue
        summary.outcomes[page.id] = mi_page_purge_holes(world, page, thread, ctx)


def is_free_page_kept(world, page: Page, thread: ThreadState, ctx: SweepContext) -> bool:
    """Later versions, not in the seed (digest 6.3, model.floor): with a floor, a large page
    all of whose blocks are free stays by the rule of the free blocks of a page in use: the
    epoch hold, then the floor. Without one it goes back to the arena, as it always did."""
    from model.floor import compute_floor_age
    from model.variants import is_page_held
    if world.options.purge_holes_large_floor <= 0 or not world.is_large(page):
        return False
    if is_page_held(world.options.variant, page, ctx, world.variant_state):
        thread.holes_sweep_deferred = True
        return True
    age = compute_floor_age(page, ctx.epoch, world.options)
    if age is not None and world.floor_pending is not None and not page.abandoned:
        world.floor_pending.append((age, page))
        return True
    return False


def resolve_floor_pass(world, thread: ThreadState, ctx: SweepContext,
                       summary: IdleSummary) -> None:
    """The end of the pass over the thread's own pages: what fits the floor stays, the most
    recently used first; the rest goes now (retired when all free, else walked)."""
    from model.heap import mi_page_retire
    pending, world.floor_pending = world.floor_pending or [], None
    for page in resolve_floor(world, thread, pending):
        if page.is_all_free():
            mi_page_retire(world, page)
            summary.outcomes[page.id] = "retired"
        else:
            summary.outcomes[page.id] = mi_page_purge_holes_now(world, page, ctx)


def mi_on_thread_idle(world, tid: int, in_handoff: bool = False,
                      frame: AdvanceFrame | None = None) -> IdleSummary:
    """The idle work of thread `tid`'s heaps: clear deferred; advance the epoch first; sweep
    every page of the thread's heaps (full ones too), then the abandoned pages. `frame`: the
    advance already run step by step (see mi_holes_sweep_begin)."""
    thread = world.thread(tid)
    thread.holes_sweep_deferred = False
    ctx = mi_holes_sweep_begin(world, thread, frame)
    if in_handoff:
        ctx = SweepContext(ctx.now, ctx.epoch, ctx.interval, True, ctx.full)
    summary = IdleSummary(epoch=ctx.epoch)
    floor = world.options.purge_holes_large_floor > 0
    if floor:
        mi_holes_floor_release(world, thread)
        world.floor_pending = []
    if world.options.retire_cycles and tid in world.heaps:
        mi_theap_collect_retired(world, world.heaps[tid])  # mi_theap_collect's, not forced
    sweep_pages(world, thread, world.heap_pages(tid), ctx, summary)
    if floor:
        resolve_floor_pass(world, thread, ctx, summary)
    abandoned = [world.pages[pid] for pid in list(world.abandoned)]
    sweep_pages(world, thread, abandoned, ctx, summary)
    summary.deferred = thread.holes_sweep_deferred
    world.log.append({"ev": "idle", "thread": tid, "epoch": ctx.epoch, "handoff": in_handoff,
                      "deferred": summary.deferred, "full": ctx.full})
    return summary


def mi_on_thread_idle_pending(world, tid: int) -> bool:
    """True when the last sweep of this thread's heaps left blocks it held back."""
    return world.thread(tid).holes_sweep_deferred
