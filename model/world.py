"""The whole modelled process: options, memory, pages, heaps and threads.

A scenario says what the program does ("thread 2 frees block 5 of page 1, then parks") and
the world applies the rules of the seed to it. Everything is deterministic: no real clock,
no real threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.clock import VirtualClock
from model.epoch import EpochState
from model.geometry import ARCH64, Arch, KiB, PageKind, compute_page_kind
from model.heap import Arena, Heap
from model.memory import Memory
from model.page import Page
from model.stats import SubprocCounters
from model.stamp import is_stamp_gated, mi_page_stamp, read_epoch_relaxed
from model.thread import ThreadState
from model.variants import VARIANTS, compute_stamp_value


@dataclass(frozen=True)
class Options:
    """The options of digest section 10 (environment MIMALLOC_<NAME>) and the target."""

    purge_holes: bool = True
    purge_holes_min_interval: int = 100  # ms; 0 turns the hold off
    purge_holes_full_every: int = 64
    purge_delay: int = 100
    os_page_size: int = 4 * KiB
    arch: Arch = ARCH64
    first_block_offset: int = 0  # where block 0 starts in a page (page meta data in front)
    variant: str = "epoch"  # the design: see model.variants.VARIANTS
    stale_epochs: int = 0  # how old an allocating thread's relaxed epoch read may be
    sweep_ms: int = 0  # virtual time one handoff sweep takes
    # later versions, not in the seed (digest 6.3, model.floor): bytes and epochs; 0 = off
    purge_holes_large_floor: int = 0
    purge_holes_large_floor_epochs: int = 256
    arena_reuse: bool = False  # the arena hands a freed page's address range out again
    # mimalloc's page queues (model.heap): a new page goes to the front of its size class's
    # queue, a full page that gets a block back to its end; off: pages in the order made
    page_queue_order: bool = False
    # a full page of blocks above the small maximum is abandoned, and comes back through the
    # arena's abandoned map (model.full_pages); off: full pages stay in their heap's queue
    abandon_full_pages: bool = False
    # an all-free small or medium page stays in its queue for a few collects before it goes
    # back to the arena (model.retire, mimalloc's retire_expire); off: it goes at once
    retire_cycles: bool = False
    # the arena's purge as mimalloc v3's arena.c does it (purgecheck/simulate/mimalloc.py): one
    # expiry for the arena, and each run of adjacent retired pages purged with one call; pages
    # are laid out slice after slice. Off: each retired page purged on its own, 4 MiB apart.
    arena_purge_runs: bool = False
    # mi_page_extend_free as the v3 fork Bun runs it (model.alloc): at least 1 block, 8 KiB
    # worth, and only the discarded tail it formats brought back; off: at least 4, 4 KiB worth,
    # and the whole tail brought back, as the checked model and the C reference do
    extend_v3: bool = False
    clock_monotone: bool = True
    clock_start_ms: int = 1_000


@dataclass
class World:
    options: Options = field(default_factory=Options)
    mem: Memory = field(init=False)
    arena: Arena = field(default_factory=Arena)
    pages: dict[int, Page] = field(default_factory=dict)
    heaps: dict[int, Heap] = field(default_factory=dict)
    abandoned: list[int] = field(default_factory=list)  # page ids in the abandoned map
    log: list = field(default_factory=list)
    clock: VirtualClock = field(init=False)
    epoch: EpochState = field(default_factory=EpochState)
    threads: dict[int, ThreadState] = field(default_factory=dict)
    variant_state: dict = field(default_factory=dict)  # what a rejected design keeps per page
    # (step, action(world)): what happens between the steps of the next epoch advance that
    # reaches that step, once (a fork, a clock reading: the ops fork_at, clock_at)
    interleavings: list = field(default_factory=list)
    # Ghost: what the child of each fork held after the forked-child rule (EpochState copies;
    # the script goes on in the parent), for EP-MOVING-HELD: no thread holds MOVING there.
    fork_children: list = field(default_factory=list)
    floor_kept: int = 0  # bytes kept under the floor, process-wide (model.floor)
    # Pages the allocation path's search found full: it passes over them with one set lookup
    # until a free gives one a block back (model.heap.heap_page_for; issue 29, 4)
    full_seen: set[int] = field(default_factory=set)
    # Ghost: (new size, block size, kept in place) of the last realloc, for AL-REALLOC-MOVES
    last_realloc: tuple | None = None
    floor_pending: list | None = None  # (age, page) up for the floor in the current pass
    # parked_count and pages_abandoned, kept where the park and the abandoned map change
    subproc: SubprocCounters = field(default_factory=SubprocCounters)

    def __post_init__(self) -> None:
        if self.options.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.options.variant!r}; expected one of "
                             f"{', '.join(VARIANTS)}")
        self.mem = Memory(self.options.os_page_size)
        self.arena = Arena(reuse=self.options.arena_reuse) if not self.options.arena_purge_runs \
            else Arena(reuse=self.options.arena_reuse, align=self.options.arch.arena_slice_size)
        self.clock = VirtualClock(self.options.clock_start_ms, self.options.clock_monotone)

    def thread(self, tid: int) -> ThreadState:
        if tid not in self.threads:
            self.threads[tid] = ThreadState(tid)
        return self.threads[tid]

    def heap_pages(self, tid: int) -> list[Page]:
        heap = self.heap(tid)
        return [self.pages[pid] for q in heap.queues.values() for pid in q]

    def heap(self, thread: int) -> Heap:
        """The default heap of `thread` (created on first use; heap id == thread id)."""
        if thread not in self.heaps:
            self.heaps[thread] = Heap(id=thread, thread=thread)
        return self.heaps[thread]

    def new_page(self, heap: Heap, block_size: int) -> Page:
        kind = compute_page_kind(block_size, self.options.arch)
        pid, geom = self.arena.new_page(kind, block_size, os_page_size=self.options.os_page_size,
                                        arch=self.options.arch,
                                        first_block_offset=self.options.first_block_offset)
        page = Page(id=pid, geom=geom, mem=self.mem, owner=heap.thread, heap=heap.id,
                    log=self.log, extend_v3=self.options.extend_v3)
        self.pages[pid] = page
        queue = heap.queues.setdefault(block_size, [])
        if self.options.page_queue_order:
            queue.insert(0, pid)  # mi_page_queue_push: a fresh page is allocated from first
        else:
            queue.append(pid)
        page.emit("page_new", page_kind=kind.value, block_size=block_size, addr=geom.slice_start,
                  reserved=geom.reserved, unit=page.unit)
        return page

    def after_malloc(self, heap: Heap, page: Page) -> None:
        """mi_malloc_generic_fallback after a block was taken: the stamp, behind its gate."""
        if not is_stamp_gated(page):
            return
        page.version += 1
        page.last_alloc_ms = self.clock.now  # ghost: not a read by the allocator
        thread = self.thread(heap.thread)
        seen = read_epoch_relaxed(self.epoch.epoch, thread.epoch_seen, self.options.stale_epochs)
        thread.epoch_seen = seen
        mi_page_stamp(page, compute_stamp_value(self.options.variant, seen, self.clock))

    def live_pages(self) -> list[Page]:
        return [p for p in self.pages.values() if not p.retired]

    def is_large(self, page: Page) -> bool:
        return page.geom.kind is PageKind.LARGE
