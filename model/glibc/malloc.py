"""_int_malloc, _int_free and sysmalloc of one arena (digest "Rules", "Growth").

`int_free` is where a trim is considered: only for a chunk that did not go to a tcache or a
fastbin, once the merged chunk is at least 64 KiB (seed 001's loop frees a 192 KiB block, so
every iteration reaches heap_trim). `sysmalloc` grows the arena: an mmapped chunk at or above
the mmap threshold, else the break (main arena) or the heap, or a new heap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.glibc import system, trim
from model.glibc.arena import (Arena, coalesce, malloc_consolidate, push_fastbin,
                               split_top, take_from_bins)
from model.glibc.constants import (MALLOC_ALIGN_MASK, MALLOC_ALIGNMENT, MAX_FAST_CHUNK,
                                   MAX_TCACHE_CHUNK, MIN_LARGE_SIZE, MINSIZE, SIZE_SZ,
                                   TCACHE_FILL_COUNT, csize2tidx)
from model.glibc.heap import FENCE, INUSE, TCACHE, TOP, Chunk

if TYPE_CHECKING:
    from model.glibc.process import Process, Thread


class OutOfMemory(Exception):
    """The model's malloc could not serve a request (glibc returns NULL)."""


def tcache_has_room(t: "Thread | None", size: int) -> bool:
    """_int_free's `tcache != NULL && tc_idx < mp_.tcache_bins` and the bin's count below
    mp_.tcache_count. A caller on a hot path tests `size <= MAX_TCACHE_CHUNK` first: most
    chunks of a large size then cost no call."""
    if t is None or t.tcache is None or size > MAX_TCACHE_CHUNK:
        return False
    return len(t.tcache[csize2tidx(size)]) < TCACHE_FILL_COUNT


def tcache_put(t: "Thread", c: Chunk) -> None:
    c.state = TCACHE
    # csize2tidx, inline (tcache_put is called for a third of a program's frees)
    t.tcache[(c.size - MINSIZE + MALLOC_ALIGN_MASK) // MALLOC_ALIGNMENT].append(c)
    c.segment.arena.write(c.addr + 2 * SIZE_SZ, 2 * SIZE_SZ)  # e->next, e->key


def int_malloc(p: "Process", av: Arena, nb: int, t: "Thread | None") -> Chunk:
    """_int_malloc: fastbin, small bin, (consolidate for a large request), the unsorted scan
    and the bins (arena.take_from_bins), top, system."""
    if nb <= MAX_FAST_CHUNK and nb in av.fastbins:
        fastbin = av.fastbins[nb]
        c = fastbin.pop()
        c.state = INUSE
        while fastbin and tcache_has_room(t, nb):  # 2.26+: stash the rest
            tcache_put(t, fastbin.pop())
        if not fastbin:
            del av.fastbins[nb]
        return c
    bins = av.bins
    if nb < MIN_LARGE_SIZE:
        c = bins.oldest_small(nb) if bins.count else None
        if c is not None:
            bins.remove(c)
            c.state = INUSE
            av.write(c.addr + c.size + SIZE_SZ, SIZE_SZ)  # set_inuse_bit_at_offset
            while (s := bins.oldest_small(nb)) is not None and tcache_has_room(t, nb):
                bins.remove(s)
                tcache_put(t, s)
            return c
    elif av.have_fastchunks:
        malloc_consolidate(av)
    while True:
        # bins that hold no chunk have nothing to scan or search: glibc's unsorted loop does
        # not start and its binmap search finds no bit (a heap growing from its top, as a
        # program filling a table does, skips the calls)
        if bins.count:
            c = take_from_bins(p, av, nb, t)
            if c is not None:
                return c
        if av.top is not None and av.top.size >= nb + MINSIZE:
            return split_top(av, nb)
        if av.have_fastchunks:
            malloc_consolidate(av)
            continue
        return sysmalloc(p, av, nb, t)


def sysmalloc(p: "Process", av: Arena, nb: int, t: "Thread | None") -> Chunk:
    """sysmalloc: mmap at or above the threshold; else grow the break or the heap (the RFC
    counts a heap growth), else a new heap; then cut the request from the top."""
    mp = p.mp
    if nb >= mp.mmap_threshold and mp.n_mmaps < mp.n_mmaps_max:
        return system.mmap_chunk(p, nb)
    if av.is_main:
        system.brk_grow(p, av, nb)
    else:
        seg = av.top.segment
        if system.grow_heap(p, seg, MINSIZE + nb - av.top.size):
            av.system_mem += seg.end - av.top.end
            av.top.size = seg.end - av.top.addr
            av.write(av.top.addr + SIZE_SZ, SIZE_SZ)  # set_head (old_top, ...)
            if p.version.throttle:
                trim.rfc_count_growth(seg.mt)
        else:
            new = system.new_heap(p, av, nb + MINSIZE + p.version.sizeof_heap_info, mp.top_pad)
            if new is None:  # mmap was not tried above: try it now, whatever the limits
                return system.mmap_chunk(p, nb)
            start_new_heap(p, av, new, t)
    if av.top.size < nb + MINSIZE:
        raise OutOfMemory(f"the top chunk ({av.top.size}) cannot serve {nb} bytes")
    return split_top(av, nb)


def start_new_heap(p: "Process", av: Arena, new, t: "Thread | None") -> None:
    """The old top is closed with two fenceposts and freed; the new heap's top takes over."""
    new.prev = av.top.segment
    av.segments.append(new)
    av.system_mem += new.size
    old_top = av.top
    old_seg = old_top.segment
    av.top = Chunk(new.first, new.end - new.first, TOP)
    new.insert(av.top)
    av.write(av.top.addr + SIZE_SZ, SIZE_SZ)  # set_head (top, ...) in the new heap
    old_size = (old_top.size - MINSIZE) & ~MALLOC_ALIGN_MASK
    final = Chunk(old_top.addr + old_top.size - 16, 16, FENCE)
    av.write(old_top.addr + old_size, MINSIZE)  # the two fenceposts (or the one)
    if old_size >= MINSIZE:
        old_top.size = old_size
        old_top.state = INUSE
        old_seg.insert(Chunk(old_top.addr + old_size, 16, FENCE))
        old_seg.insert(final)
        int_free(p, av, old_top, t)
    else:
        old_top.size = old_size + 16
        old_top.state = FENCE
        old_seg.insert(final)


def int_free(p: "Process", av: Arena, c: Chunk, t: "Thread | None") -> None:
    """_int_free: to the thread's tcache if it has room, else a fastbin for a small chunk,
    else merge and, when the merged chunk reaches 64 KiB, consider a trim."""
    size = c.size
    # tcache_has_room and csize2tidx, inline: half of a program's calls are frees, most of
    # them small
    if size <= MAX_TCACHE_CHUNK and t is not None and (tcache := t.tcache) is not None \
            and len(tcache[(size - MINSIZE + MALLOC_ALIGN_MASK) // MALLOC_ALIGNMENT]) \
            < TCACHE_FILL_COUNT:
        tcache_put(t, c)
        return
    if size <= MAX_FAST_CHUNK:
        push_fastbin(av, c)
        return
    merged = coalesce(av, c)
    if trim.is_trim_considered(merged.size):
        if av.have_fastchunks:
            malloc_consolidate(av)
        if av.is_main:
            system.systrim(p, av, merged.size)
        else:
            system.heap_trim(p, av, merged.size)
