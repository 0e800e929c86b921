"""The park machine: threads that park and wake while the scavenger sweeps them when due,
with the liveness of the park handoff checked on the schedule the seed speaks of.

Seed 000, change (2): "it is swept again purge_holes_min_interval after the END of the sweep
before ... until a sweep BEGAN two epochs on from the first sweep of the park ...
MI_PARK_SWEEPS_MAX = 6 whatever happens", and "After the last allocation the free space goes
back between one and two intervals later, where something sweeps that often". The PK-*
invariants bound every park after every step; the `settle` rule builds the premise of the
liveness invariants (scope "final") and then checks them.
"""

from __future__ import annotations

from hypothesis.stateful import initialize, precondition, rule

from model.alloc import mi_page_malloc, write_block
from model.drivers import mi_on_thread_idle
from model.epoch import compute_interval
from model.geometry import ARCH32, ARCH64, KiB, PageGeometry, PageKind, compute_purge_unit
from model.geometry import large_size_classes
from model.heap import Ptr, mi_free, mi_heap_abandon, mi_heap_malloc, mi_page_reclaim
from model.invariants import load_registry
from model.page import Page
from model.park import (mi_on_thread_idle_end, mi_on_thread_idle_start, mi_theap_sweep_parked,
                        run_scavenger)
from model.thread import MI_PARK_SWEEPS_MAX, PARKED, RUNNING
from model.world import Options
from stateful_tests.program import choice
from stateful_tests.world_machine import INDEX, InvariantViolation, WorldMachine, nth

THREADS = (1, 2, 3)
CLOCK_STEPS_MS = (1, 10, 50, 99, 100, 101, 250)


def whole_unit_large_classes(options: Options) -> tuple[int, ...]:
    """The large classes whose blocks are whole units of their page: only there can every free
    block go (a block that shares a unit with a live neighbour keeps it, seed 000 (1)), which
    the liveness invariants take for granted."""
    out = []
    for bs in large_size_classes(options.arch):
        geom = PageGeometry(PageKind.LARGE, bs, options.os_page_size, options.arch)
        if bs % compute_purge_unit(geom) == 0:
            out.append(bs)
    return tuple(out)


class ParkMachine(WorldMachine):
    # Virtual time one park sweep takes. With slow sweeps and several parked threads the
    # scavenger sleeps the due time of a pass from the END of the pass, so a park is swept
    # late by the other sweeps of that pass, and the liveness bound fails (docs/fuzzing.md,
    # "Findings"); the machine runs with sweeps that take no time, where the bound is claimed.
    SWEEP_MS = 0

    @initialize(os_page_size=choice((4 * KiB, 16 * KiB, 64 * KiB)),
                arch=choice((ARCH64, ARCH32)))
    def init_world(self, os_page_size, arch):
        options = Options(os_page_size=os_page_size, arch=arch, sweep_ms=self.SWEEP_MS)
        self.world = self.make_world(options)
        self.interval = compute_interval(options.purge_holes_min_interval)
        # Large pages (the hold), and a small and a medium page that are swept beside them.
        self.sizes = (*whole_unit_large_classes(options), 3000, arch.medium_max_obj_size // 2)
        self.held: list[Ptr] = []
        self.due: int | None = None

    def threads(self, state: str) -> list[int]:
        return [t for t in THREADS if self.world.thread(t).park_state == state]

    # -- the program ---------------------------------------------------------------------------

    @precondition(lambda self: self.threads(RUNNING))
    @rule(t=INDEX, size=INDEX, n=choice(range(1, 9)), keep=choice(range(1, 5)))
    def allocate(self, t, size, n, keep):
        """n blocks of one class; all but every keep-th are freed at once."""
        thread = nth(self.threads(RUNNING), t)
        for j in range(n):
            ptr = mi_heap_malloc(self.world, self.world.heap(thread), nth(self.sizes, size))
            if j % keep:
                mi_free(self.world, ptr, thread)
            else:
                self.held.append(ptr)

    @precondition(lambda self: self.held and self.threads(RUNNING))
    @rule(k=INDEX, t=INDEX)
    def free(self, k, t):
        """A running thread frees a block: its owner's, or another thread's (xthread_free)."""
        ptr = nth(self.held, k)
        self.held.remove(ptr)
        if not self.world.pages[ptr.page].retired:
            mi_free(self.world, ptr, nth(self.threads(RUNNING), t))

    @precondition(lambda self: self.threads(RUNNING))
    @rule(t=INDEX)
    def idle(self, t):
        mi_on_thread_idle(self.world, nth(self.threads(RUNNING), t))

    @precondition(lambda self: self.threads(RUNNING))
    @rule(t=INDEX)
    def abandon(self, t):
        mi_heap_abandon(self.world, self.world.heap(nth(self.threads(RUNNING), t)))

    # -- parks and the scavenger ---------------------------------------------------------------

    @precondition(lambda self: self.threads(RUNNING))
    @rule(t=INDEX)
    def park(self, t):
        mi_on_thread_idle_start(self.world, nth(self.threads(RUNNING), t))

    @precondition(lambda self: self.threads(PARKED))
    @rule(t=INDEX)
    def unpark(self, t):
        mi_on_thread_idle_end(self.world, nth(self.threads(PARKED), t))

    @rule()
    def scavenge(self):
        """One pass of the scavenger over the parked threads; it notes when the next is due."""
        self.due = mi_theap_sweep_parked(self.world)

    @precondition(lambda self: self.due is not None)
    @rule()
    def sleep_until_due(self):
        """The scavenger sleeps for the due time its last pass returned."""
        self.world.clock.advance(self.due)
        self.due = None

    @rule(ms=choice(CLOCK_STEPS_MS))
    def clock(self, ms):
        self.world.clock.advance(ms)

    @rule(ms=choice((100, 250)))
    def scavenger(self, ms):
        """The scavenger loop (model.park.run_scavenger) for ms of virtual time."""
        run_scavenger(self.world, ms)

    # -- liveness ------------------------------------------------------------------------------

    @rule()
    def settle(self):
        """The program stops: an interval with no sweep (so every thread is due), then each
        thread wakes, takes one last block from each of its large pages that has free blocks
        and gives it back (abandoned ones are reclaimed first), and parks; the scavenger runs
        for MI_PARK_SWEEPS_MAX + 1 intervals, in which every park gets all the sweeps it may
        have. That is the premise of the invariants of scope "final": the last allocation is
        now, at the park, and nothing allocates or frees after it. Then they must hold."""
        world = self.world
        world.clock.advance(self.interval)
        for t in self.threads(PARKED):
            mi_on_thread_idle_end(world, t)
        for pid in list(world.abandoned):
            if self.has_free_blocks(world.pages[pid]):
                mi_page_reclaim(world, world.pages[pid], world.heap(THREADS[0]))
        for page in world.live_pages():
            if self.has_free_blocks(page):
                self.last_allocation(page)
        owners = sorted({p.owner for p in world.live_pages() if not p.abandoned})
        for t in owners:
            mi_on_thread_idle_start(world, t)
        run_scavenger(world, (MI_PARK_SWEEPS_MAX + 1) * self.interval)
        self.due = None
        for inv in load_registry().values():
            if inv.scope == "final" and inv.predicate is not None:
                reason = inv.predicate(world)
                if reason:
                    raise InvariantViolation(inv.id, reason)

    def has_free_blocks(self, page: Page) -> bool:
        """A large page with blocks on a free list or purged ones: what the hold is about."""
        return self.world.is_large(page) and bool(
            page.free or page.local_free or page.xthread_free or page.purged)

    def last_allocation(self, page: Page) -> None:
        """The owner allocates from this page (mi_malloc's path for a block of this page: take
        it, stamp the page) and frees the block again."""
        heap = self.world.heaps[page.heap]
        i = mi_page_malloc(page)
        self.world.after_malloc(heap, page)
        write_block(page, i)
        mi_free(self.world, Ptr(page.id, i), heap.thread)
