"""Full pages are abandoned, and come back through the arena's abandoned map (an option).

Seed 000 (2): "full pages are abandoned and are reached by the sweeps of the other threads of
the heap"; (1): "Abandoned large pages in the abandoned map are swept like the others; a page
that was abandoned while full is still not visited". Digest 8: the idle sweep passes "the
abandoned pages of up to 8 heaps". Read from the fork's page.c and free.c (oven-sh/mimalloc,
the version with hole purging; facts only):

- mi_malloc_generic_fallback: a page of blocks above MI_SMALL_MAX_OBJ_SIZE that the allocation
  made full (used == reserved) goes to mi_page_to_full, which abandons it (the theap may
  abandon: option page_full_retain >= 0, its default). A page abandoned while full is not in
  the abandoned map (not "mapped"): no sweep visits it and no allocation finds it.
- mi_free into an abandoned page is a free from another thread (the page has no thread id):
  a push on xthread_free, and the free that claims the page (mi_free_try_collect_mt) collects
  it; then (1) a page with no live block goes back to the arena, (2) a page of blocks up to
  MI_MEDIUM_MAX_OBJ_SIZE may be reclaimed by the freeing thread (so never a large page),
  (3) a page that is no longer mostly used (mi_page_is_mostly_used: more than 7/8 of reserved
  in use) and not yet mapped is abandoned again into the map; else it stays as it is.
- mi_page_fresh, when no page of the size class's queue has room: the arena looks for an
  abandoned page of that size class in the heap's map first (mi_arenas_page_try_find_abandoned,
  a bitmap search from a start given by the thread's sequence number: the main thread's is 0,
  so the lowest slice first), reclaims it (collect, push at the end of the queue) and only
  then takes a fresh page.

So under sustained load a page of a large size class is allocated from until full, waits for
the collector's frees in the map, and is taken again only when the pages at lower addresses
in the map are taken: it is allocated from at gaps, and the epoch rule lets the holes of a
page left for two epochs go (seed 000: "the pages of a size class that are not the first in
their queue survive a gap of 100 ms"). Off by default: the checked model, its op scripts and
the C reference keep full pages in their heap; the simulator's comparison with the real Bun
turns it on (purgecheck/measure/compare.py).
"""

from __future__ import annotations

from model.alloc import mi_page_free_collect
from model.page import Page


def is_page_full(page: Page) -> bool:
    """mi_page_is_full: every block of the page is in use (used == reserved)."""
    return page.used == page.reserved


def is_page_mostly_used(page: Page) -> bool:
    """mi_page_is_mostly_used: at most reserved/8 blocks are not in use."""
    return page.reserved - page.used <= page.reserved // 8


def is_abandoned_when_full(world, page: Page) -> bool:
    """mi_page_to_full abandons the pages of blocks above MI_SMALL_MAX_OBJ_SIZE that an
    allocation filled (small pages keep a few full pages in their heap: not modelled)."""
    return world.options.abandon_full_pages and \
        page.block_size > world.options.arch.small_max_obj_size and is_page_full(page)


def mi_page_to_full(world, heap, page: Page) -> None:
    """_mi_page_abandon of a full page: out of the heap's queue, no owner, not in the map."""
    queue = heap.queues.get(page.block_size, [])
    if page.id in queue:
        queue.remove(page.id)
    page.version += 1
    page.abandoned = True
    page.owner = -1
    world.subproc.pages_abandoned += 1  # mimalloc's pages_abandoned counts it, mapped or not
    page.emit("abandon", mapped=False)


def mi_free_try_collect_mt(world, page: Page) -> None:
    """The free that claims an abandoned page: collect; a page with no live block goes back to
    the arena; a page no longer mostly used goes into the abandoned map (a large page is
    never reclaimed on free)."""
    from model.heap import mi_page_retire
    mi_page_free_collect(page)
    if page.used == 0:
        mi_page_retire(world, page)
    elif page.id not in world.abandoned and not is_page_mostly_used(page):
        world.abandoned.append(page.id)  # mi_arenas_page_try_reabandon_to_mapped
        page.emit("abandon", mapped=True)


def mi_arenas_page_try_find_abandoned(world, heap, block_size: int) -> Page | None:
    """The page of this size class in the heap's abandoned map that the main thread's search
    finds first: the lowest address."""
    found = [world.pages[pid] for pid in world.abandoned
             if world.pages[pid].block_size == block_size and world.pages[pid].heap == heap.id]
    return min(found, key=lambda p: p.geom.slice_start, default=None)
