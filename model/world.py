"""The whole modelled process: options, memory, pages, heaps and threads.

A scenario says what the program does ("thread 2 frees block 5 of page 1, then parks") and
the world applies the rules of the seed to it. Everything is deterministic: no real clock,
no real threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.geometry import ARCH64, Arch, KiB, PageKind, compute_page_kind
from model.heap import Arena, Heap
from model.memory import Memory
from model.page import Page


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


@dataclass
class World:
    options: Options = field(default_factory=Options)
    mem: Memory = field(init=False)
    arena: Arena = field(default_factory=Arena)
    pages: dict[int, Page] = field(default_factory=dict)
    heaps: dict[int, Heap] = field(default_factory=dict)
    abandoned: list[int] = field(default_factory=list)  # page ids in the abandoned map
    log: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mem = Memory(self.options.os_page_size)

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
                    log=self.log)
        self.pages[pid] = page
        heap.queues.setdefault(block_size, []).append(pid)
        page.emit("page_new", page_kind=kind.value, block_size=block_size, addr=geom.slice_start,
                  reserved=geom.reserved, unit=page.unit)
        return page

    def after_malloc(self, heap: Heap, page: Page) -> None:
        """Hook on the generic allocation path (the epoch stamp lives here)."""

    def live_pages(self) -> list[Page]:
        return [p for p in self.pages.values() if not p.retired]

    def is_large(self, page: Page) -> bool:
        return page.geom.kind is PageKind.LARGE
