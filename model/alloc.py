"""Taking and giving back blocks of one page: malloc, zalloc, free, collect, extend.

Seed 000, change (1): "Nothing in mi_malloc or mi_free" changes; these are the paths the purge
rules must live beside. A purged block is brought back only by _mi_page_unpurge_run, called
when the free list is empty (digest section 4).
"""

from __future__ import annotations

from model.geometry import (MI_MAX_EXTEND_SIZE_BYTES, MI_MAX_EXTEND_SIZE_BYTES_V3,
                            MI_MIN_EXTEND_BLOCKS, MI_MIN_EXTEND_BLOCKS_V3)
from model.holes import mi_page_reuse_unformed_tail, mi_page_unpurge_run
from model.page import Page


class DoubleFree(Exception):
    """A free of a block that is not live: reported, never absorbed."""


def compute_extend_count(page: Page) -> int:
    """How many blocks mi_page_extend_free forms at once: 4 KiB worth, at least 4; on a page
    of the v3 fork (`extend_v3`), 8 KiB worth, at least 1. Which blocks a fresh large page
    has free decides the runs of its holes and the length of its unformed tail's discard."""
    bs = page.block_size
    least, most = (MI_MIN_EXTEND_BLOCKS_V3, MI_MAX_EXTEND_SIZE_BYTES_V3) if page.extend_v3 \
        else (MI_MIN_EXTEND_BLOCKS, MI_MAX_EXTEND_SIZE_BYTES)
    max_extend = least if bs >= most else max(least, most // bs)
    return min(page.reserved - page.capacity, max_extend)


def mi_page_extend_free(page: Page) -> int:
    """Form blocks from the unformed tail, in ascending order at the end of `free`."""
    n = compute_extend_count(page)
    if n <= 0:
        return 0
    # the v3 fork brings back only what it formats; the checked model the whole tail
    if page.extend_v3:
        mi_page_reuse_unformed_tail(page, page.geom.block_addr(page.capacity + n))
    else:
        mi_page_reuse_unformed_tail(page)
    new = list(range(page.capacity, page.capacity + n))
    for i in new:
        page.mem.touch(page.geom.block_addr(i), 1)  # the link in the first word
    page.version += 1
    page.free.extend(new)
    page.on_lists.update(new)
    page.capacity += n
    page.emit("extend", first=new[0], count=n)
    return n


def mi_page_free_collect(page: Page) -> None:
    """_mi_page_free_collect without unpurge: xthread_free goes in front of local_free, and
    the result is appended to `free`. Frees from other threads leave `used` until now."""
    if page.xthread_free or page.local_free:  # the sweeps collect every page: most have none
        page.version += 1
    if page.xthread_free:
        page.used -= len(page.xthread_free)
    collected = page.xthread_free + page.local_free
    page.xthread_free = []
    page.local_free = []
    page.free.extend(collected)


def mi_page_malloc(page: Page, zero: bool = False) -> int | None:
    """Take a block: from `free`; when empty, collect; when still empty and units are
    purged (and no sweep has the page), unpurge the lowest run; else extend. None: full."""
    src = "free"  # the list the block comes from, for traces
    if not page.free:
        mi_page_free_collect(page)
        src = "collect"
    if not page.free and page.purged and not page.sweeping:
        mi_page_unpurge_run(page)
        src = "unpurge"
    if not page.free and page.has_unformed_tail():
        mi_page_extend_free(page)
        src = "extend"
    if not page.free:
        return None
    page.version += 1
    i = page.free.pop(0)
    page.on_lists.discard(i)
    page.used += 1
    addr = page.geom.block_addr(i)
    if i not in page.handed_out:  # Page.hand_out, inline: the path of every malloc
        page.handed_out.add(i)
        if page.mem.live is not None:
            page.mem.live.block_live(addr, page.geom.block_size)
    if zero:
        # mi_zalloc: a block from a page whose free blocks are known zero needs only its
        # link word cleared; any other block is zeroed in full, so it never shows stale bytes.
        page.mem.touch(addr, 8 if page.free_is_zero else page.block_size)
    page.emit("malloc", block=i, zero=zero, src=src)
    return i


def check_free(page: Page, i: int) -> None:
    """A free of a block that is not live is a double (or invalid) free."""
    # `on_lists` holds the blocks of the three lists: one lookup, not a search of each list
    if not 0 <= i < page.capacity or i in page.on_lists or page.is_block_purged(i):
        page.version += 1
        page.double_frees += 1
        page.emit("double_free", block=i)
        raise DoubleFree(f"page {page.id}: block {i} is not live (double free)")


def mi_free_local(page: Page, i: int) -> None:
    """mi_free by the owner: push on local_free, write the link."""
    check_free(page, i)
    g, mem = page.geom, page.mem
    addr = g.page_start + i * g.block_size  # block_addr, inline: the path of every free
    page.version += 1
    if i in page.handed_out:  # Page.take_back, inline
        page.handed_out.remove(i)
        if mem.live is not None:
            mem.live.block_dead(addr, g.block_size)
    page.written.discard(i)
    page.local_free.insert(0, i)
    page.on_lists.add(i)
    page.used -= 1
    page.free_is_zero = False
    mem.touch(addr, 1)
    page.emit("free", block=i, thread="owner")


def mi_free_xthread(page: Page, i: int) -> None:
    """mi_free from another thread: only an atomic push on xthread_free (seed 000: "A free
    from another thread only pushes on xthread_free")."""
    check_free(page, i)
    page.version += 1
    page.take_back(i)
    page.written.discard(i)
    page.xthread_free.insert(0, i)
    page.on_lists.add(i)
    page.free_is_zero = False
    page.mem.touch(page.geom.block_addr(i), 1)
    page.emit("free", block=i, thread="other")


def write_block(page: Page, i: int) -> None:
    """The program writes the whole block (as the seed's workloads do before freeing)."""
    page.mem.touch(page.geom.block_addr(i), page.block_size)
    page.version += 1
    page.written.add(i)
