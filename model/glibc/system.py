"""What the allocator asks of the OS, and the trims (seed 001; digest "Rules", "Growth").

Thread heaps: `new_heap`, `grow_heap`, `shrink_heap` (the madvise of the seed, and the RFC's
throttle inside it), `heap_trim` (whole-heap deletion, then the version's rule). The main
arena: `brk_grow` and `systrim`. Chunks above the mmap threshold: `mmap_chunk` and
`munmap_chunk`. Every call appends a SysCall to the process's log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.glibc import trim
from model.glibc.arena import Arena, TrimRecord
from model.glibc.constants import (CHUNK_HDR_SZ, HEAP_MAX_SIZE, HEAP_MIN_SIZE,
                                   MALLOC_ALIGNMENT, MINSIZE, PAGESIZE, SIZE_SZ, align_up,
                                   mmapped_chunk_size)
from model.glibc.heap import MMAPPED, TOP, Chunk, Segment
from model.glibc.params import raise_dynamic_threshold
from model.glibc.syscalls import SysCall

if TYPE_CHECKING:
    from model.glibc.process import Process


def new_heap(p: "Process", av: Arena, size: int, top_pad: int) -> Segment | None:
    """new_heap: reserve an aligned 64 MiB, open `size` (+ top_pad when it fits) of it."""
    if size + top_pad < HEAP_MIN_SIZE:
        size = HEAP_MIN_SIZE
    elif size + top_pad <= HEAP_MAX_SIZE:
        size += top_pad
    elif size > HEAP_MAX_SIZE:
        return None
    size = align_up(size, PAGESIZE)
    base = p.reserve_heap_address()
    seg = Segment(base=base, first=base + p.version.sizeof_heap_info, size=size,
                  mprotect_size=size, arena=av)
    p.emit("mprotect", "heap_new", base, size)
    p.resident.write(base, p.version.sizeof_heap_info)  # h->ar_ptr, h->size, ...
    return seg


def new_arena(p: "Process", name: str, request: int) -> Arena | None:
    """_int_new_arena: a heap holding heap_info, malloc_state and then the top chunk."""
    v = p.version
    av = Arena(name, is_main=False, process=p)
    overhead = v.sizeof_heap_info + v.sizeof_malloc_state + MALLOC_ALIGNMENT
    seg = new_heap(p, av, request + overhead, p.mp.top_pad)
    if seg is None:  # too large for one heap: a minimal arena; malloc then mmaps the request
        seg = new_heap(p, av, overhead, p.mp.top_pad)
    if seg is None:
        return None
    first = seg.base + v.sizeof_heap_info + v.sizeof_malloc_state
    misalign = (first + 2 * 8) % MALLOC_ALIGNMENT  # chunk2mem(first) must be aligned
    if misalign:
        first += MALLOC_ALIGNMENT - misalign
    seg.first = first
    av.segments.append(seg)
    av.system_mem = seg.size
    av.top = Chunk(first, seg.end - first, TOP)
    seg.insert(av.top)
    p.resident.write(seg.base + v.sizeof_heap_info, v.sizeof_malloc_state)  # malloc_init_state
    p.resident.write(first + 8, 8)  # set_head (top (a), ...)
    return av


def grow_heap(p: "Process", seg: Segment, diff: int) -> bool:
    """grow_heap: the heap's size grows by whole pages; an mprotect only past mprotect_size
    (a heap regrowing into pages it once had makes no system call)."""
    diff = align_up(diff, PAGESIZE)
    new_size = seg.size + diff
    if new_size > HEAP_MAX_SIZE:
        return False
    if new_size > seg.mprotect_size:
        p.emit("mprotect", "heap_mprotect", seg.base + seg.mprotect_size,
               new_size - seg.mprotect_size)
        seg.mprotect_size = new_size
    seg.size = new_size
    return True


def shrink_heap(p: "Process", seg: Segment, diff: int, rec: TrimRecord) -> bool:
    """shrink_heap: give the heap's last `diff` bytes back. `size` shrinks, `mprotect_size`
    does not (unless the tail is remapped PROT_NONE when overcommit is 2). The RFC version
    counts the request and may refuse it (seed 001: "return -1")."""
    new_size = seg.size - diff
    if new_size < p.version.sizeof_heap_info:
        return False
    if p.may_shrink_heap:
        p.emit("mmap", "heap_remap", seg.base + new_size, diff)
        seg.mprotect_size = new_size
    else:
        if p.version.throttle:
            trim.rfc_count_shrink(seg.mt)
            rec.counters = (seg.mt.event_madvise, seg.mt.event_large_malloc)
            if not trim.rfc_should_madvise(diff, p.mp.mmap_threshold, seg.mt):
                return False
        p.emit("madvise", "heap_madvise", seg.base + new_size, diff)
        if p.version.throttle:
            trim.rfc_reset(seg.mt)
            rec.counters_after = (seg.mt.event_madvise, seg.mt.event_large_malloc)
    seg.size = new_size
    return True


def delete_empty_heaps(p: "Process", av: Arena, seg: Segment, pad: int) -> Segment:
    """heap_trim's first part: while the top chunk is all of a heap that is not the arena's
    first, munmap the heap and make the tail of the previous heap (its fenceposts and a free
    chunk before them) the top. Looks at top_pad, never at trim_threshold (digest)."""
    while seg.prev is not None and av.top.addr == seg.first:
        prev = seg.prev
        # the fenceposts start_new_heap left at the end of the previous heap: the last,
        # 0|PREV_INUSE, and the one before it, 16 bytes (or 32: an old top too small to free)
        final = prev.chunks[prev.end - CHUNK_HDR_SZ]
        fence = prev.chunks.get(final.addr - CHUNK_HDR_SZ) or \
            prev.chunks[final.addr - 2 * CHUNK_HDR_SZ]
        new_size = fence.size + final.size
        start = fence.addr
        lower = av.bins.ending_at(fence.addr)  # !prev_inuse (p): a free chunk before them
        if lower is not None:
            new_size += lower.size
            start = lower.addr
        if new_size + (HEAP_MAX_SIZE - prev.size) < pad + MINSIZE + PAGESIZE:
            break
        av.system_mem -= seg.size
        p.emit("munmap", "heap_delete", seg.base, HEAP_MAX_SIZE)
        av.segments.remove(seg)
        if lower is not None:
            av.bins.remove(lower)
            prev.remove(lower)
        prev.remove(fence)
        prev.remove(final)
        av.top = Chunk(start, new_size, TOP)
        prev.insert(av.top)
        p.resident.write(start + 8, 8)  # set_head (top (ar_ptr), new_size | PREV_INUSE)
        seg = prev
    return seg


def trim_record(p: "Process", av: Arena, where: str, trigger: int, extra: int) -> TrimRecord:
    """The ghost record of a decision, with the inputs the rule saw."""
    return TrimRecord(av.name, p.version.name, where, trigger, av.top.size, p.mp.top_pad,
                      p.mp.trim_threshold, p.mp.mmap_threshold, extra, False, av.top.size)


def heap_trim(p: "Process", av: Arena, trigger: int) -> None:
    """heap_trim(heap_for_ptr(top), top_pad): delete empty heaps, then shrink the top's heap
    by what the version's rule allows (seed 001, digest "History")."""
    pad = p.mp.top_pad
    seg = delete_empty_heaps(p, av, av.top.segment, pad)
    top = av.top
    rule = getattr(trim, p.version.heap_trim_rule)
    extra = rule(top.size, pad, p.mp.trim_threshold)
    rec = trim_record(p, av, "heap", trigger, extra)
    if extra and shrink_heap(p, seg, extra, rec):
        av.system_mem -= extra
        top.size -= extra
        rec.shrunk = True
    rec.top_after = top.size
    av.trims.append(rec)


def systrim(p: "Process", av: Arena, trigger: int) -> None:
    """Main arena: `if (top >= trim_threshold) systrim(top_pad)`, one sbrk(-extra)."""
    top = av.top
    pad = p.mp.top_pad
    extra = trim.systrim_extra(top.size, pad, p.mp.trim_threshold)
    rec = trim_record(p, av, "main", trigger, extra)
    if extra:
        seg = top.segment
        p.emit("brk", "brk_shrink", seg.end - extra, extra)
        seg.size -= extra
        top.size -= extra
        av.system_mem -= extra
        rec.shrunk = True
    rec.top_after = top.size
    av.trims.append(rec)


def brk_grow(p: "Process", av: Arena, nb: int) -> None:
    """Main arena sysmalloc: sbrk(round_up(nb + top_pad + MINSIZE - top)). The first call of
    the process asks for the break first (brk(NULL))."""
    size = align_up(nb + p.mp.top_pad + MINSIZE - av.top_size, PAGESIZE)
    if av.top is None:
        p.emit("brk", "brk_query", p.brk_base, 0)
        seg = Segment(base=p.brk_base, first=p.brk_base, size=0, arena=av)
        av.segments.append(seg)
        av.top = Chunk(p.brk_base, 0, TOP)
        seg.insert(av.top)
    seg = av.top.segment
    p.emit("brk", "brk_grow", seg.end, size)
    seg.size += size
    av.top.size += size
    av.system_mem += size
    p.resident.write(av.top.addr + 8, 8)  # set_head (av->top, size | PREV_INUSE)


def mmap_chunk(p: "Process", nb: int) -> Chunk:
    """sysmalloc_mmap: a chunk of its own pages."""
    size = mmapped_chunk_size(nb)
    addr = p.reserve_mmap_address(size)
    p.emit("mmap", "chunk_mmap", addr, size)
    p.mp.n_mmaps += 1
    p.resident.write(addr, 16)  # prev_size (the offset, 0) and the size with IS_MMAPPED
    return Chunk(addr, size, MMAPPED)


def munmap_chunk(p: "Process", c: Chunk) -> None:
    """free() of an mmapped chunk: the dynamic threshold first, then munmap."""
    raise_dynamic_threshold(p.mp, c.size)
    p.mp.n_mmaps -= 1
    p.emit("munmap", "chunk_munmap", c.addr - c.offset, c.offset + c.size)


def mremap_chunk(p: "Process", c: Chunk, nb: int) -> None:
    """mremap_chunk (realloc of an mmapped chunk, HAVE_MREMAP on Linux): the mapping becomes
    `ALIGN_UP (nb + offset + SIZE_SZ, pagesize)`; nothing happens when that is its size
    already ("if (total_size == new_size) return p"), else one mremap(MREMAP_MAYMOVE), which
    shrinks as well as grows. The dynamic threshold is not touched."""
    total = c.offset + c.size
    new_total = align_up(nb + c.offset + SIZE_SZ, PAGESIZE)
    if new_total == total:
        return
    p.emit("mremap", "chunk_mremap", c.addr - c.offset, new_total)
    c.size = new_total - c.offset
