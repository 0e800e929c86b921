"""The page lifecycle machine: pages of every kind and OS page size under a program that
allocates, frees from any thread, reallocs, sweeps, parks, destroys heaps and exits.

Seed 000, change (1): "Nothing in mi_malloc or mi_free" changes, and every path the purge must
live beside is here: malloc and zalloc (which unpurge), frees by the owner and from other
threads, collect, realloc next to holes, the inline sweep and the park handoff, heap destroy and
delete, abandon and reclaim, a page going back to the arena, a failed discard. A byte-level
shadow (stateful_tests.shadow) checks what the program sees of its blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis.stateful import initialize, precondition, rule

from model.alloc import DoubleFree, mi_page_free_collect, write_block
from model.drivers import mi_on_thread_idle
from model.geometry import ARCH32, ARCH64, KiB
from model.heap import (Ptr, mi_free, mi_heap_abandon, mi_heap_delete, mi_heap_destroy,
                        mi_heap_malloc, mi_page_reclaim, mi_realloc)
from model.page import Page
from model.park import mi_on_thread_idle_end, mi_on_thread_idle_start, mi_theap_sweep_parked
from model.thread import PARKED, RUNNING
from model.world import Options
from stateful_tests.failures import InvariantViolation
from stateful_tests.program import BOOL, choice, choice_list
from stateful_tests.shadow import DOUBLE_FREE, Shadow
from stateful_tests.world_machine import INDEX, WorldMachine, nth, request_sizes

THREADS = (0, 1, 2)  # thread 0 is the main thread, the heap mi_heap_delete hands pages to
CLOCK_STEPS_MS = (1, 10, 50, 99, 100, 101, 250)  # around the interval (100 ms)
# Time before an idle sweep: mostly less than the interval, as in a loop that goes idle
# between requests (0 twice: sweeps that follow each other at once are what some designs get
# wrong); the interval and more now and then, so that epochs move.
IDLE_AFTER_MS = (0, 0, 1, 10, 50, 100, 250)


@dataclass
class Handle:
    """A block the program holds: where it is and which thread allocated it."""

    ptr: Ptr
    thread: int


class PageMachine(WorldMachine):
    @initialize(os_page_size=choice((4 * KiB, 16 * KiB, 64 * KiB)),
                arch=choice((ARCH64, ARCH32)), offset=choice((0, 192)),
                classes=choice_list(range(64), 1, 4))
    def init_world(self, os_page_size, arch, offset, classes):
        """The target, and the few request sizes this program uses (of every kind over the
        runs): a program that keeps to a few classes reuses its pages, and their holes."""
        world = self.make_world(Options(os_page_size=os_page_size, arch=arch,
                                        first_block_offset=offset))
        every = request_sizes(arch)
        self.huge = every[-1]
        self.sizes = tuple(dict.fromkeys(nth(every, k) for k in classes))
        self.shadow = Shadow()
        self.shadow.attach(world.mem)
        self.held: list[Handle] = []

    # -- helpers ---------------------------------------------------------------------------

    def running(self) -> list[int]:
        """The threads that are not parked (a parked thread neither allocates nor frees)."""
        threads = self.world.threads
        return [t for t in THREADS if t not in threads or threads[t].park_state == RUNNING]

    def sweepers(self) -> list[int]:
        """Running threads that own pages, else any running one: an idle sweep or a collect
        is about a thread's own pages (though any sweep also moves the epoch)."""
        running = self.running()
        return [t for t in running if self.world.heap_pages(t)] or running

    def page(self, ptr: Ptr) -> Page:
        return self.world.pages[ptr.page]

    def allocate(self, thread: int, size: int, zero: bool) -> Ptr:
        """mi_malloc / mi_zalloc, then the program writes its pattern in the block."""
        mem = self.world.mem
        mem.writes = [] if zero else None
        try:
            ptr = mi_heap_malloc(self.world, self.world.heap(thread), size, zero=zero,
                                 write=False)
        finally:
            writes, mem.writes = mem.writes, None
        page = self.page(ptr)
        if zero:
            self.shadow.check_zeroed(page, ptr.block, writes)
        self.shadow.handed_out(page, ptr.block)
        write_block(page, ptr.block)
        self.held.append(Handle(ptr, thread))
        return ptr

    def release(self, h: Handle, thread: int) -> None:
        try:
            mi_free(self.world, h.ptr, thread)
        except DoubleFree as e:
            self.shadow.refused(h.ptr, e)
        self.held.remove(h)
        self.shadow.freed(h.ptr)

    def drop_retired(self) -> None:
        """mi_heap_destroy: the blocks of the pages that went back to the arena with it are
        the program's no more. (Nothing else may retire a page the program holds a block of:
        its free would then be refused, which the shadow reports.)"""
        for h in [h for h in self.held if self.page(h.ptr).retired]:
            self.held.remove(h)
            self.shadow.dropped_page(h.ptr.page)

    # -- the program -----------------------------------------------------------------------

    @precondition(lambda self: self.running())
    @rule(t=INDEX, size=INDEX, zero=BOOL)
    def malloc(self, t, size, zero):
        self.allocate(nth(self.running(), t), nth(self.sizes, size), zero)

    @precondition(lambda self: self.running())
    @rule(t=INDEX, size=INDEX, n=choice(range(1, 17)), keep=choice((1, 2, 3, 8)))
    def malloc_run(self, t, size, n, keep):
        """Allocate n blocks of one class and free all but every keep-th: the seed's "every
        third block kept", which leaves holes between survivors (keep 8: holes of 7 blocks,
        whole units of small blocks)."""
        thread = nth(self.running(), t)
        size = nth(self.sizes, size)
        run = []
        for _ in range(1 if size == self.huge else n):  # a huge page per huge block
            self.allocate(thread, size, False)
            run.append(self.held[-1])
        for j, h in enumerate(run):
            if j % keep:
                self.release(h, thread)

    @precondition(lambda self: self.held and self.running())
    @rule(k=INDEX, other=BOOL)
    def free(self, k, other):
        """The owner frees (local_free), or another thread does (xthread_free)."""
        h = nth(self.held, k)
        owner = self.page(h.ptr).owner
        running = self.running()
        others = [t for t in running if t != owner]
        if other and others:
            thread = others[0]
        elif owner in running:
            thread = owner
        else:
            thread = running[0]
        self.release(h, thread)

    @precondition(lambda self: self.shadow.dead and self.running())
    @rule(k=INDEX, t=INDEX)
    def double_free(self, k, t):
        """Free a block the program let go of (maybe purged since, maybe on a retired page)."""
        ptr = nth(list(self.shadow.dead.values()), k)
        page = self.page(ptr)
        before = page.double_frees
        try:
            mi_free(self.world, ptr, nth(self.running(), t))
        except DoubleFree:
            if page.double_frees != before + 1:
                raise InvariantViolation(DOUBLE_FREE, f"page {page.id}: DoubleFree raised but "
                                                   f"double_frees went {before} -> "
                                                   f"{page.double_frees}")
            return
        raise InvariantViolation(DOUBLE_FREE, f"page {page.id}: the free of block {ptr.block}, "
                                           f"which the program does not hold, was absorbed")

    def beside_holes(self) -> list[Handle]:
        """Held blocks that share a unit with a purged block (one that straddles into a
        discarded unit): freeing one leaves that unit with free and purged blocks only,
        which the next walk must take (digest 3, step 2: "free-listed or purged"). Random
        frees rarely land there."""
        out = []
        for h in self.held:
            page = self.page(h.ptr)
            if page.purged and any(page.is_block_purged(j)
                                   for k in page.units.units_of_block(h.ptr.block)
                                   if not page.is_unit_purged(k)
                                   for j in page.units.blocks_of_unit(k, page.capacity)):
                out.append(h)
        return out

    @precondition(lambda self: self.held and self.running())
    @rule(k=INDEX, ms=choice(IDLE_AFTER_MS))
    def free_beside_hole(self, k, ms):
        """Free a held block next to a purged straddler (else any held block), then the
        owner's idle sweep after ms."""
        h = nth(self.beside_holes() or self.held, k)
        owner = self.page(h.ptr).owner
        thread = owner if owner in self.running() else self.running()[0]
        self.release(h, thread)
        self.world.clock.advance(ms)
        mi_on_thread_idle(self.world, thread)

    @precondition(lambda self: self.held and self.running())
    @rule(k=INDEX, size=INDEX)
    def realloc(self, k, size):
        """Shrink in place, or move (grow, or into another class: maybe into a hole)."""
        h = nth(self.held, k)
        thread = h.thread if h.thread in self.running() else self.running()[0]
        try:
            new = mi_realloc(self.world, self.world.heap(thread), h.ptr, nth(self.sizes, size))
        except DoubleFree as e:  # realloc checks, as free does, that the block is live
            self.shadow.refused(h.ptr, e)
        if new != h.ptr:
            self.shadow.moved(h.ptr, new, self.page(new))
            self.held.remove(h)
            self.held.append(Handle(new, thread))

    @precondition(lambda self: self.held and self.running())
    @rule(k=INDEX)
    def retire_page(self, k):
        """Every block the program holds in one page is freed, by the owner when it runs (the
        page goes back to the arena at the last free), else from another thread (it goes back
        at the sweep that collects them)."""
        page = self.page(nth(self.held, k).ptr)
        running = self.running()
        thread = page.owner if page.owner in running else running[0]
        for h in [h for h in self.held if h.ptr.page == page.id]:
            self.release(h, thread)

    # -- the allocator's own work ------------------------------------------------------------

    @precondition(lambda self: self.running())
    @rule(t=INDEX)
    def collect(self, t):
        for page in self.world.heap_pages(nth(self.sweepers(), t)):
            mi_page_free_collect(page)

    @precondition(lambda self: self.running())
    @rule(t=INDEX, ms=choice(IDLE_AFTER_MS), times=choice(range(1, 4)))
    def idle(self, t, ms, times):
        """The thread's inline idle sweep (mi_on_thread_idle), `times` times, each after ms:
        a loop that goes idle between requests, or polls _pending."""
        tid = nth(self.sweepers(), t)
        for _ in range(times):
            self.world.clock.advance(ms)
            mi_on_thread_idle(self.world, tid)

    @precondition(lambda self: self.running())
    @rule(t=INDEX)
    def park(self, t):
        mi_on_thread_idle_start(self.world, nth(self.running(), t))

    @precondition(lambda self: len(self.running()) < len(THREADS))
    @rule(t=INDEX)
    def unpark(self, t):
        parked = [x for x in THREADS if self.world.thread(x).park_state == PARKED]
        mi_on_thread_idle_end(self.world, nth(parked, t))

    @rule()
    def scavenge(self):
        mi_theap_sweep_parked(self.world)

    @rule(ms=choice(CLOCK_STEPS_MS))
    def clock(self, ms):
        self.world.clock.advance(ms)

    @rule(n=choice(range(1, 4)))
    def fail_discards(self, n):
        self.world.mem.fail_next_discards += n

    # -- heaps and threads -----------------------------------------------------------------

    @precondition(lambda self: self.running())
    @rule(t=INDEX)
    def heap_destroy(self, t):
        mi_heap_destroy(self.world, self.world.heap(nth(self.running(), t)))
        self.drop_retired()

    @precondition(lambda self: [t for t in self.running() if t])
    @rule(t=INDEX)
    def heap_delete(self, t):
        """mi_heap_delete: the live pages go to the main thread's heap."""
        tid = nth([x for x in self.running() if x], t)
        mi_heap_delete(self.world, self.world.heap(tid), self.world.heap(0))

    @precondition(lambda self: self.running())
    @rule(t=INDEX)
    def abandon(self, t):
        """The thread exits: its pages go to the abandoned map."""
        mi_heap_abandon(self.world, self.world.heap(nth(self.running(), t)))

    @precondition(lambda self: self.world.abandoned and self.running())
    @rule(t=INDEX, k=INDEX)
    def reclaim(self, t, k):
        page = self.world.pages[nth(self.world.abandoned, k)]
        mi_page_reclaim(self.world, page, self.world.heap(nth(self.running(), t)))
