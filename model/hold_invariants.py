"""Invariants of the hold and the park handoff (seed 000, change (2); digest sections 5-8).

Their predicates take the whole World and judge what the sweeps did from ghost records
(`page.last_walk`, `page.last_alloc_ms`, `thread.park_sweeps`), never by calling the rule
they check.
"""

from __future__ import annotations

from model.epoch import EPOCH_MODULUS, compute_interval
from model.geometry import PageKind
from model.invariants import invariant
from model.page import MI_PAGE_SWEPT_TAG_MASK, MI_PAGE_SWEPT_STAMP_TAG, EPOCH_MASK
from model.thread import MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE


def _interval(world) -> int:
    return compute_interval(world.options.purge_holes_min_interval)


@invariant("HD-YOUNG-KEPT",
           "A large page stamped in the current or previous epoch keeps its free blocks: no "
           "walk drops a block of a page whose stamp was less than two epochs old.",
           "seed 000 (2): \"a large page whose epoch is the current one or the one before "
           "keeps its free blocks and the blocks it has not formed yet\"",
           "model.variants.is_held_by_epoch", scope="world")
def young_kept(world) -> str | None:
    if _interval(world) <= 0 or world.options.variant == "clock":
        return None  # the hold is off; the clock design stamps no epoch
    for page in world.pages.values():
        if page.last_walk is None or page.geom.kind is not PageKind.LARGE:
            continue
        w = page.last_walk
        state, epoch, dropped = w.state_before, w.epoch, w.dropped
        if (state & MI_PAGE_SWEPT_TAG_MASK) != MI_PAGE_SWEPT_STAMP_TAG or not dropped:
            continue
        age = (epoch - (state & EPOCH_MASK)) % EPOCH_MODULUS
        if age < 2:
            return f"page {page.id}: a walk in epoch {epoch} dropped {dropped} blocks of a " \
                   f"page stamped {age} epoch(s) before"
    return None


@invariant("HD-INTERVAL",
           "With fresh epoch reads, no free block of a large page is discarded less than an "
           "interval after the page was last allocated from.",
           "seed 000 (2): \"those blocks were left alone for the interval at least\"",
           "model.sweep.mi_page_purge_holes", scope="world")
def discard_after_interval(world) -> str | None:
    interval = _interval(world)
    if interval <= 0 or world.options.stale_epochs or not world.options.clock_monotone:
        return None  # the bound is claimed for fresh reads and a monotone clock only
    for page in world.pages.values():
        w = page.last_walk
        if w is None:
            continue
        # The last allocation BEFORE the walk, recorded with it: one after the walk (even in
        # the same ms) is judged by the next walk. Records made without it use the page's.
        last = w.last_alloc_ms if w.last_alloc_ms is not None else page.last_alloc_ms
        if last is None:
            continue
        if w.dropped and w.now - last < interval:
            return f"page {page.id}: blocks discarded {w.now - last} ms after " \
                   f"the last allocation (interval {interval} ms)"
    return None


@invariant("PK-MAX-SWEEPS",
           "A park is swept at most MI_PARK_SWEEPS_MAX (6) times.",
           "seed 000 (2): \"MI_PARK_SWEEPS_MAX = 6 whatever happens. park_swept counts them\"",
           "model.park.compute_park_next", scope="world")
def park_max_sweeps(world) -> str | None:
    for t in world.threads.values():
        if len(t.park_sweeps) > MI_PARK_SWEEPS_MAX:
            return f"thread {t.id}: park swept {len(t.park_sweeps)} times"
    return None


@invariant("PK-DONE-TWO-EPOCHS",
           "A park is done once a sweep began two epochs after the park's first sweep.",
           "seed 000 (2): \"until a sweep BEGAN two epochs on from the first sweep of the "
           "park ... such a sweep saw all of it as old and took it\"",
           "model.park.compute_park_next", scope="world")
def park_done_two_epochs(world) -> str | None:
    for t in world.threads.values():
        if not t.park_sweeps:
            continue
        first = t.park_sweeps[0].epoch
        for n, s in enumerate(t.park_sweeps):
            if (s.epoch - first) % EPOCH_MODULUS >= 2 and s.next_state != PARK_SWEPT_DONE:
                return f"thread {t.id}: sweep {n + 1} of the park began in epoch {s.epoch}, " \
                       f"two after the first ({first}), and did not mark the park done"
    return None


@invariant("PK-DONE-EXACT",
           "A sweep of a park marks it done exactly when it left nothing behind, or it began "
           "two or more epochs after the park's first sweep, or it is the MI_PARK_SWEEPS_MAX-th: "
           "a park that still holds young blocks is not done (the other side of "
           "PK-DONE-TWO-EPOCHS and PK-MAX-SWEEPS).",
           "seed 000 (2): \"a park in which such blocks were left is therefore not marked as "
           "done\" ... \"until a sweep BEGAN two epochs on from the first sweep of the park\" "
           "... \"MI_PARK_SWEEPS_MAX = 6 whatever happens\"; digest 8",
           "model.park.compute_park_next", scope="world")
def park_done_exact(world) -> str | None:
    for t in world.threads.values():
        if not t.park_sweeps:
            continue
        first = t.park_sweeps[0].epoch
        for n, s in enumerate(t.park_sweeps):
            old = (s.epoch - first) % EPOCH_MODULUS >= 2
            want = not s.deferred or old or n + 1 >= MI_PARK_SWEEPS_MAX
            if (s.next_state == PARK_SWEPT_DONE) != want:
                return f"thread {t.id}: sweep {n + 1} of the park (epoch {s.epoch}, first " \
                       f"{first}, {'left blocks' if s.deferred else 'left nothing'}) " \
                       f"{'marked' if s.next_state == PARK_SWEPT_DONE else 'did not mark'} " \
                       f"it done"
    return None


@invariant("PK-SPACING",
           "Each sweep of a park begins at least an interval after the end of the one before.",
           "seed 000 (2): \"it is swept again purge_holes_min_interval after the END of the "
           "sweep before (holes_sweep_last is written after the work now)\"",
           "model.park.record_sweep_last", scope="world")
def park_spacing(world) -> str | None:
    interval = _interval(world)
    for t in world.threads.values():
        for a, b in zip(t.park_sweeps, t.park_sweeps[1:]):
            if b.start_ms - a.end_ms < interval:
                return f"thread {t.id}: park sweeps {b.start_ms - a.end_ms} ms apart " \
                       f"(end {a.end_ms} to start {b.start_ms}), interval {interval} ms"
    return None


@invariant("SW-WALK-SETS-STATE",
           "A complete walk leaves swept_state = (capacity << 32) | used, replacing a stamp; "
           "so a page that nothing touched since is skipped by the next sweep that is not full.",
           "digest 3, step 5: \"A complete walk sets swept_state = (capacity, used): this "
           "overwrites an allocation stamp\"; seed 000 tests: \"a sweep skips unchanged pages\"",
           "model.holes.mi_page_purge_holes_walk", scope="world")
def walk_sets_state(world) -> str | None:
    for page in world.pages.values():
        w = page.last_walk
        if w is not None and w.complete and w.state_after != (w.capacity << 32) | w.used:
            return f"page {page.id}: a complete walk left swept_state {w.state_after:#x}, " \
                   f"not (capacity {w.capacity}, used {w.used})"
    return None


@invariant("HD-GOES-WITHIN-TWO",
           "After the last allocation, with a sweep at least every interval, the free blocks "
           "of a large page go within two intervals (checked at the end of the liveness "
           "scenarios, whose schedules meet that premise).",
           "seed 000 (2): \"After the last allocation the free space goes back between one "
           "and two intervals later, where something sweeps that often.\"",
           "model.park.mi_theap_sweep_parked", scope="final")
def free_blocks_gone(world) -> str | None:
    interval = _interval(world)
    for page in world.pages.values():
        if page.retired or page.geom.kind is not PageKind.LARGE:
            continue
        left = page.free + page.local_free + page.xthread_free
        if left:
            return f"page {page.id}: {len(left)} free blocks still resident after the " \
                   f"sweeps (e.g. block {left[0]})"
        w = page.last_walk
        if w is not None and w.dropped and page.last_alloc_ms is not None \
                and w.now - page.last_alloc_ms > 2 * interval + world.options.sweep_ms:
            return f"page {page.id}: its free blocks went {w.now - page.last_alloc_ms} ms " \
                   f"after the last allocation, more than two intervals ({2 * interval} ms)"
    return None
