"""The epoch machine: sweepers that advance the epoch one atomic step at a time, under a
scheduler that Hypothesis chooses, beside threads that allocate, free, fork and exit.

Seed 000, change (2): "No epoch is shorter than the interval, whoever looks and wherever a
sweeper is preempted; that is what the rule rests on. Any number of threads sweep at the same
time". Each rule moves one thread by one atomic access (model.epoch.advance_step), so the
program Hypothesis shrinks to is the shortest interleaving that breaks an invariant. The
epoch invariants see every advance in flight (each sweeper's frame is its thread's
`last_advance`), the hold invariants every walk.
"""

from __future__ import annotations

from hypothesis.stateful import initialize, precondition, rule

import model.epoch
from model.alloc import write_block
from model.drivers import mi_on_thread_idle
from model.epoch import AdvanceFrame, advance_step, begin_advance, compute_interval
from model.epoch import EpochState, mi_page_purge_holes_forked_child
from model.geometry import ARCH64, KiB, large_size_classes
from model.heap import Ptr, mi_free, mi_heap_abandon, mi_heap_malloc
from model.world import Options
from stateful_tests.program import choice
from stateful_tests.world_machine import INDEX, WorldMachine, nth

SWEEPERS = (1, 2, 3)
CLOCK_STEPS_MS = (1, 10, 50, 99, 100, 101)
# A sweeper that finds MOVING waits this many pauses (the real code: 1,000); a few are
# enough for every interleaving of the wait with the advance it waits for.
SPIN_MAX = 2


class EpochMachine(WorldMachine):
    @initialize(interval=choice((100, 1)), monotone=choice((True, True, False)))
    def init_world(self, interval, monotone):
        self.world = self.make_world(Options(purge_holes_min_interval=interval,
                                             clock_monotone=monotone))
        self.interval = compute_interval(interval)
        self.frames: dict[int, AdvanceFrame | None] = {t: None for t in SWEEPERS}
        self.held: list[Ptr] = []
        self.sizes = (*large_size_classes(ARCH64), 64 * KiB)  # large pages, and a medium one
        self.spin_max, model.epoch.spin_max = model.epoch.spin_max, SPIN_MAX

    def teardown(self):
        if self.world is not None:
            model.epoch.spin_max = self.spin_max
        super().teardown()

    def free_threads(self) -> list[int]:
        """Threads not inside a sweep: they may allocate, free, fork or exit."""
        return [t for t in SWEEPERS if self.frames[t] is None]

    # -- the scheduler -----------------------------------------------------------------------

    @rule(t=INDEX, n=choice(range(1, 9)))
    def step(self, t, n):
        """Thread t makes n atomic steps in a row (the others wait): each begins an idle sweep
        (its advance), makes the next access of the advance, or, the advance done, sweeps the
        thread's pages and the abandoned ones in the epoch it reads then."""
        tid = SWEEPERS[t % len(SWEEPERS)]
        world = self.world
        for _ in range(n):
            frame = self.frames[tid]
            if frame is None:
                frame = self.frames[tid] = begin_advance(self.interval)
                world.thread(tid).last_advance = frame  # the epoch invariants watch it
            elif not frame.done:
                advance_step(world.epoch, frame, world.clock.read(), self.interval)
            else:
                mi_on_thread_idle(world, tid, frame=frame)
                self.frames[tid] = None

    @precondition(lambda self: self.free_threads())
    @rule(t=INDEX)
    def sweep(self, t):
        """A whole idle sweep of a thread that is not in one, with no preemption: the common
        case, so that sweeps follow each other within the steps of one example."""
        mi_on_thread_idle(self.world, nth(self.free_threads(), t))

    @rule(ms=choice(CLOCK_STEPS_MS))
    def clock(self, ms):
        self.world.clock.advance(ms)

    @precondition(lambda self: not self.world.clock.monotone)
    @rule(ms=choice(CLOCK_STEPS_MS))
    def clock_back(self, ms):
        """The clock goes back, also between the steps of an advance in flight (digest 7:
        a reading behind the epoch's start makes the advance due)."""
        self.world.clock.advance(-ms)

    # -- the program ---------------------------------------------------------------------------

    @precondition(lambda self: self.free_threads())
    @rule(t=INDEX, size=INDEX, keep=choice(range(1, 5)))
    def allocate(self, t, size, keep):
        """Take four blocks of one class (the allocation stamps the page) and free all but
        every keep-th."""
        thread = nth(self.free_threads(), t)
        heap = self.world.heap(thread)
        for j in range(4):
            ptr = mi_heap_malloc(self.world, heap, nth(self.sizes, size), write=False)
            write_block(self.world.pages[ptr.page], ptr.block)
            if j % keep:
                mi_free(self.world, ptr, thread)
            else:
                self.held.append(ptr)

    @precondition(lambda self: self.held and self.free_threads())
    @rule(k=INDEX, t=INDEX)
    def free(self, k, t):
        ptr = nth(self.held, k)
        self.held.remove(ptr)
        if not self.world.pages[ptr.page].retired:
            mi_free(self.world, ptr, nth(self.free_threads(), t))

    @precondition(lambda self: self.free_threads())
    @rule(t=INDEX)
    def fork(self, t):
        """A thread forks and the machine goes on as the child: the other threads are gone
        there, with their advances in flight; if one held MOVING the child records a new
        beginning (_mi_page_purge_holes_forked_child)."""
        thread = nth(self.free_threads(), t)
        mi_page_purge_holes_forked_child(self.world.epoch, self.world.clock.read())
        for tid in SWEEPERS:
            if tid != thread:  # gone in the child, with the advance it was in
                self.frames[tid] = None
                self.world.thread(tid).last_advance = None
        # ghost for EP-MOVING-HELD: MOVING in the child now would be held by nobody
        st = self.world.epoch
        self.world.fork_children.append(EpochState(st.start, st.epoch))

    @precondition(lambda self: self.free_threads())
    @rule(t=INDEX)
    def abandon(self, t):
        """The thread exits: its pages go to the abandoned map, for the other sweepers."""
        mi_heap_abandon(self.world, self.world.heap(nth(self.free_threads(), t)))
