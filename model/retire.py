"""A page that becomes all free is kept a while before it goes back to the arena (mimalloc's
`_mi_page_retire`, with `retire_expire`; the option `retire_cycles`).

The facts, read from the fork's page.c (the version with `_mi_page_purge_holes_free_page_stays`,
that of Bun 1.4.4's floor) and microsoft/mimalloc v3's: when the last block of a page is freed by
its owner, a large page (blocks above the medium maximum) first asks the floor
(`_mi_page_purge_holes_free_page_stays`, `MI_HOLES_ASKED_AT_FREE`: model.floor, asked first in
model.heap.mi_free); then any page of a queue that is not special (not the full or the huge
queue: a huge page is never kept) is not freed if its size class's queue holds at most
`MI_RETIRE_MAX_PAGES` (3) pages and it is the only one, or its blocks are below
`MI_SMALL_SIZE_MAX` (1 KiB on 64-bit); it stays in the queue with `retire_expire` = 16
(`MI_RETIRE_CYCLES`) for blocks up to the small maximum, 4 for larger ones, a large page's
included. `_mi_theap_collect_retired(theap, force)`, called when an allocation finds no page
with room (before it takes a fresh one), counts each kept page's `retire_expire` down and
frees it at 0 (or at once when forced); a kept page that was allocated from again is no longer
retired. The idle sweep's collect frees every all-free page it walks
(model.drivers.sweep_pages), a kept one too: that is how a swept thread gives the arena the
pages that an unswept one would keep and allocate from again.
"""

from __future__ import annotations

from model.geometry import PageKind
from model.page import Page

MI_RETIRE_CYCLES = 16
MI_RETIRE_MAX_PAGES = 3
MI_SMALL_SIZE_MAX = 128 * 8  # 128 words: 1 KiB on 64-bit


def compute_retire_expire(world, page: Page, queue: list[int]) -> int:
    """How many collects a page that became all free stays for: 0 when it goes back to the
    arena at once (the option off, a huge page: the huge queue is special, a crowded queue).
    A large page is kept as any other (the fork's `_mi_page_retire`: `MI_RETIRE_CYCLES/4`)."""
    if not world.options.retire_cycles:
        return 0
    if page.geom.kind is PageKind.HUGE:
        return 0
    if len(queue) > MI_RETIRE_MAX_PAGES or (len(queue) > 1 and
                                            page.block_size >= MI_SMALL_SIZE_MAX):
        return 0
    small = page.block_size <= world.options.arch.small_max_obj_size
    return MI_RETIRE_CYCLES if small else MI_RETIRE_CYCLES // 4


def mi_theap_collect_retired(world, heap, force: bool = False) -> None:
    """Count the kept pages of `heap` down; free those at 0 (all of them when `force`). A kept
    page that holds a live block again is no longer retired."""
    from model.heap import mi_page_retire
    for queue in list(heap.queues.values()):
        for pid in list(queue[:MI_RETIRE_MAX_PAGES]):
            page = world.pages[pid]
            if not page.retire_expire:
                continue
            page.version += 1
            if not page.is_all_free():
                page.retire_expire = 0
                continue
            page.retire_expire -= 1
            if force or page.retire_expire == 0:
                page.retire_expire = 0
                mi_page_retire(world, page)


def mi_page_try_keep(world, page: Page) -> bool:
    """The owner freed the page's last block: keep it in its queue (True) or let it go back to
    the arena (False)."""
    if page.retire_expire:
        return True  # already kept: it stays kept
    expire = compute_retire_expire(world, page, world.heaps[page.heap].queues.get(
        page.block_size, []))
    page.version += 1
    page.retire_expire = expire
    return expire > 0


def mi_theap_collect_forced(world, heap) -> None:
    """`mi_collect(true)` on the heap's owner (theap.c `mi_theap_collect_ex(MI_FORCE)`): the
    kept pages go (`_mi_theap_collect_retired(theap, true)`), then every page of the heap whose
    blocks are all free after its collect goes back to the arena, kept or not
    (`mi_theap_page_collect`: `collect >= MI_FORCE || retire_expire == 0`). The abandoned
    pages are not the heap's and stay. The arena's forced purge that follows
    (`_mi_arenas_collect(force_purge)`) is the simulator's (Simulation.collect_forced)."""
    from model.alloc import mi_page_free_collect
    from model.heap import mi_page_retire
    mi_theap_collect_retired(world, heap, force=True)
    for pid in [pid for queue in heap.queues.values() for pid in queue]:
        page = world.pages[pid]
        mi_page_free_collect(page)
        if page.is_all_free() and page.capacity:
            mi_page_retire(world, page)
