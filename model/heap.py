"""Heaps: the pages of one thread by size class, and the heap-level malloc/free/realloc.

A heap hands out blocks of its pages; a page that becomes free goes back to the arena through
_mi_page_unpurge_all, as do the pages of a destroyed heap (seed 000: "mi_heap_destroy,
mi_heap_delete and a page that becomes free all go through _mi_page_unpurge_all").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from model.alloc import (check_free, mi_free_local, mi_free_xthread, mi_page_malloc,
                         write_block)
from model.geometry import ARCH64, PageGeometry, PageKind, compute_block_size
from model.floor import is_free_page_kept_at_free
from model.full_pages import (is_abandoned_when_full, mi_arenas_page_try_find_abandoned,
                              mi_free_try_collect_mt, mi_page_to_full)
from model.holes import mi_page_unpurge_all
from model.page import Page
from model.retire import mi_page_try_keep, mi_theap_collect_retired


class Ptr(NamedTuple):
    """A block handed out: page id and block index."""

    page: int
    block: int


@dataclass
class Heap:
    id: int
    thread: int
    queues: dict[int, list[int]] = field(default_factory=dict)  # block size -> page ids


class Arena:
    """Hands out page-aligned address space; page ids count up from 1.

    With `reuse` the address range of a retired page is handed out again, the most recently
    freed first, to a new page of the same size (mimalloc's arenas keep their slices and give
    them to the next page; the memory is resident still unless the arena purged it since,
    which the simulator does `purge_delay` ms after the retire). Without it every page gets
    fresh addresses, which the op scripts and the C reference's traces rely on."""

    def __init__(self, reuse: bool = False, align: int = 4 * 1024 * 1024) -> None:
        self.align = align  # fresh pages start on this boundary (the arena's slice: adjacent)
        self.next_id = 1
        self.next_addr = 1 << 32  # 4 MiB aligned, away from address 0
        self.reuse = reuse
        self.free_ranges: list[tuple[int, int]] = []  # (address, size) of retired pages
        self.in_use: set[int] = set()  # addresses of pages not retired (with reuse only)

    def release(self, addr: int, size: int) -> None:
        """A retired page's range goes back to the arena (with reuse only)."""
        if self.reuse:
            self.in_use.discard(addr)
            self.free_ranges.append((addr, size))

    def take_range(self, size: int) -> int:
        """The address of a new page: a freed range of that size (the last freed first) with
        reuse, else fresh address space."""
        align = self.align
        for i in range(len(self.free_ranges) - 1, -1, -1):
            if self.free_ranges[i][1] == size:
                return self.free_ranges.pop(i)[0]
        addr = self.next_addr
        self.next_addr += -(-size // align) * align
        return addr

    def new_page(self, kind: PageKind, block_size: int, **geom) -> tuple[int, PageGeometry]:
        arch = geom.get("arch", ARCH64)
        offset = geom.get("first_block_offset", 0)
        size = offset + block_size if kind is PageKind.HUGE else arch.page_size(kind)
        addr = self.take_range(size)
        if self.reuse:
            self.in_use.add(addr)
        pid = self.next_id
        self.next_id += 1
        return pid, PageGeometry(kind=kind, block_size=block_size, slice_start=addr, **geom)


def heap_page_for(world, heap: Heap, block_size: int) -> Page | None:
    """The first page of the size class's queue, in queue order, that can hand out a block
    without a new page: the page `heap_page_scan` finds, in every state.

    The full pages stay in the queue (their order is the queues' rule), so a scan of it
    passes all the full ones at each malloc: on a large heap most of its time (issue 29, 4).
    A page found full goes into `world.full_seen` and is passed over by a set lookup
    until mi_free gives it a block back. Only a free can: a full page has no block on a
    list, none purged (a purge discards free blocks only) and no unformed tail, and the
    retire that empties its lists also takes it out of the queue. mimalloc does the same
    with its full queue (mi_page_to_full, MI_BIN_FULL; _mi_page_unfull on a free)."""
    seen, pages = world.full_seen, world.pages
    for pid in heap.queues.get(block_size, ()):
        if pid in seen:
            continue
        p = pages[pid]
        # is_page_full's test, inline: it runs at every malloc
        if p.free or p.local_free or p.xthread_free or p.purged or p.has_unformed_tail():
            return p
        seen.add(pid)
    return None


def heap_page_scan(pages: dict[int, Page], heap: Heap, block_size: int) -> Page | None:
    """The plain definition of heap_page_for: the first page of the queue with room."""
    for pid in heap.queues.get(block_size, ()):
        if not is_page_full(pages[pid]):
            return pages[pid]
    return None


def mi_heap_malloc(world, heap: Heap, size: int, zero: bool = False,
                   write: bool = True) -> Ptr:
    """Allocate `size` bytes in `heap`; the program writes the block unless told not to."""
    bs = compute_block_size(size, world.options.arch)
    page = heap_page_for(world, heap, bs)
    if page is None and world.options.abandon_full_pages:
        page = mi_arenas_page_try_find_abandoned(world, heap, bs)
        if page is not None:
            mi_page_reclaim(world, page, heap)
    if page is None and world.options.retire_cycles:
        mi_theap_collect_retired(world, heap)  # before a fresh page: the kept ones count down
    if page is None:
        page = world.new_page(heap, bs)
    i = mi_page_malloc(page, zero=zero)
    if i is None:  # a page with a free block in a list always yields one
        raise AssertionError(f"page {page.id} had room but gave no block")
    world.after_malloc(heap, page)
    if write:
        write_block(page, i)
    if is_abandoned_when_full(world, page):
        mi_page_to_full(world, heap, page)
    return Ptr(page.id, i)


def is_page_full(page: Page) -> bool:
    """No block to hand out without a new page: no free list, nothing unformed or purged."""
    return not (page.free or page.local_free or page.xthread_free or page.purged
                or page.has_unformed_tail())


def requeue_at_end(heap: Heap, page: Page) -> None:
    """A full page that gets a block back goes to the end of its queue (mimalloc moves it
    from the full queue with mi_page_queue_enqueue_from): the pages in front of it, the ones
    with room all along, are allocated from first, and it may stay untouched for a while."""
    queue = heap.queues.get(page.block_size, [])
    if page.id in queue:
        queue.remove(page.id)
        queue.append(page.id)


def mi_free(world, ptr: Ptr, thread: int) -> None:
    """Free from `thread`: the owner pushes on local_free, any other thread on xthread_free.
    A page whose blocks are then all free goes back to the arena (page retire)."""
    page = world.pages[ptr.page]
    world.full_seen.discard(page.id)  # a block comes back: heap_page_for looks at it again
    if thread == page.owner and not page.abandoned:
        was_full = world.options.page_queue_order and is_page_full(page)
        mi_free_local(page, ptr.block)
        if was_full:
            requeue_at_end(world.heaps[page.heap], page)
        if page.used == 0 and not page.xthread_free and \
                not is_free_page_kept_at_free(world, page, world.threads.get(thread)) and \
                not mi_page_try_keep(world, page):
            mi_page_retire(world, page)
    else:
        mi_free_xthread(page, ptr.block)
        if page.abandoned and world.options.abandon_full_pages:
            mi_free_try_collect_mt(world, page)


def mi_realloc(world, heap: Heap, ptr: Ptr, size: int) -> Ptr:
    """Shrink in place while the new size is at least half of the block, else move. A block
    that is not live (freed, purged) is reported as check_free reports a double free."""
    page = world.pages[ptr.page]
    check_free(page, ptr.block)
    if is_realloc_in_place(size, page.block_size):
        page.emit("realloc", block=ptr.block, inplace=True)
        world.last_realloc = (size, page.block_size, True)
        return ptr
    new = mi_heap_malloc(world, heap, size)
    page.emit("realloc", block=ptr.block, inplace=False, to_page=new.page, to_block=new.block)
    mi_free(world, ptr, heap.thread)
    world.last_realloc = (size, page.block_size, False)
    return new


def is_realloc_in_place(size: int, block_size: int) -> bool:
    """_mi_heap_realloc_zero keeps the block when the new size fits it and is at least half
    of it (`newsize <= size && newsize >= size/2`); otherwise it moves."""
    return block_size // 2 <= size <= block_size


def mi_page_retire(world, page: Page) -> None:
    """A page with no live block goes back to the arena: unpurge all, drop its lists."""
    mi_page_unpurge_all(page)
    for i in list(page.handed_out):  # mi_heap_destroy's live blocks go with their page
        page.take_back(i)
    page.version += 1
    page.written.clear()
    page.free, page.local_free, page.xthread_free = [], [], []
    page.on_lists.clear()
    page.capacity = page.used = 0
    page.retired = True
    page.retire_expire = 0
    g = page.geom
    world.arena.release(g.slice_start, g.area_size)
    page.emit("retire")
    for q in world.heaps[page.heap].queues.values():
        if page.id in q:
            q.remove(page.id)
    if page.abandoned:  # in the abandoned map, or abandoned while full (model.full_pages)
        if page.id in world.abandoned:
            world.abandoned.remove(page.id)
        world.subproc.pages_abandoned -= 1  # out of the abandoned map, back to the arena


def mi_heap_destroy(world, heap: Heap) -> None:
    """mi_heap_destroy: every page goes back, live blocks included."""
    for pid in [pid for q in heap.queues.values() for pid in q]:
        mi_page_retire(world, world.pages[pid])
    heap.queues.clear()


def mi_heap_delete(world, heap: Heap, into: Heap) -> None:
    """mi_heap_delete: pages without live blocks go back to the arena (unpurge all); pages
    with live blocks move to the backing heap `into`, their purge state intact."""
    for bs, q in list(heap.queues.items()):
        for pid in list(q):
            page = world.pages[pid]
            if page.is_all_free():
                mi_page_retire(world, page)
            else:
                q.remove(pid)
                page.version += 1
                page.heap = into.id
                page.owner = into.thread
                into.queues.setdefault(bs, []).append(pid)
    heap.queues.clear()


def mi_heap_abandon(world, heap: Heap) -> None:
    """The thread exits: its pages go to the abandoned map, where any thread's sweep (and
    reclaim) finds them; frees into them from then on are cross-thread frees. Each counts in
    mimalloc's pages_abandoned statistic until it leaves the map.

    With the fork's full-page rules (Options.abandon_full_pages, model.full_pages), a full
    page is abandoned but not mapped, as _mi_arenas_page_abandon maps only a page that is not
    full (seed 000 (1): "a page that was abandoned while full is still not visited"): no sweep
    or reclaim finds it until a free that claims it maps it (mi_free_try_collect_mt). Without
    them every page is mapped, as the C reference does (a full page has nothing a sweep could
    purge)."""
    unmapped_if_full = world.options.abandon_full_pages
    for q in heap.queues.values():
        for pid in q:
            page = world.pages[pid]
            page.version += 1
            page.abandoned = True
            page.owner = -1
            world.subproc.pages_abandoned += 1
            if unmapped_if_full and is_page_full(page):
                page.emit("abandon", mapped=False)
            else:
                world.abandoned.append(pid)
                page.emit("abandon")
    heap.queues.clear()


def mi_page_reclaim(world, page: Page, heap: Heap) -> None:
    """A thread takes an abandoned page into its heap and becomes its owner."""
    world.abandoned.remove(page.id)
    world.subproc.pages_abandoned -= 1
    page.version += 1
    page.abandoned = False
    page.owner = heap.thread
    page.heap = heap.id
    heap.queues.setdefault(page.block_size, []).append(page.id)
    page.emit("reclaim", thread=heap.thread)
