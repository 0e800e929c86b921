"""malloc_trim (glibc malloc/malloc.c, `__malloc_trim` and `mtrim`).

Every arena in the list's order (the main arena, then `main_arena.next`: the newest arena
first) is consolidated (`malloc_consolidate`), then each free chunk in the unsorted bin or a
bin at or above the page size's bin that holds a whole unused page past its
`struct malloc_chunk` (48 bytes) gets one `madvise(MADV_DONTNEED)` of those pages
("See whether the chunk contains at least one unused page"). Only the main arena's top is
then trimmed: `systrim (pad, av)` with the caller's pad, whatever trim_threshold says. The
trims of free() (GL-TRIM-RULE) are not these: no TrimRecord is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.glibc.arena import Arena, malloc_consolidate
from model.glibc.constants import PAGESIZE
from model.glibc.trim import trimmable_extra

if TYPE_CHECKING:
    from model.glibc.process import Process

SIZEOF_MALLOC_CHUNK = 48  # prev_size, size, fd, bk, fd_nextsize, bk_nextsize


def mtrim(p: "Process", av: Arena, pad: int) -> bool:
    malloc_consolidate(av)
    psm1 = PAGESIZE - 1
    result = False
    for c in sorted(av.bins.chunks(), key=lambda c: (c.size, c.seq)):
        if c.size <= psm1 + SIZEOF_MALLOC_CHUNK:
            continue
        aligned = (c.addr + SIZEOF_MALLOC_CHUNK + psm1) & ~psm1
        rest = c.size - (aligned - c.addr)
        if rest > psm1:
            category = "main_madvise" if av.is_main else "heap_madvise"
            p.emit("madvise", category, aligned, rest & ~psm1)
            result = True
    # before the first allocation glibc's main arena has its initial top, a chunk of size 0,
    # and the model none: a malloc_trim then has nothing to give back (a recorded program
    # may call it first)
    if av.is_main and av.top is not None:
        extra = trimmable_extra(av.top.size, pad)
        if extra:
            seg = av.top.segment
            p.emit("brk", "brk_shrink", seg.end - extra, extra)
            seg.size -= extra
            av.top.size -= extra
            av.system_mem -= extra
            result = True
    return result


def malloc_trim(p: "Process", pad: int) -> bool:
    """__malloc_trim: mtrim of the main arena, then of the others, newest first."""
    result = False
    for av in [p.main_arena] + list(reversed(p.arenas[1:])):
        result |= mtrim(p, av, pad)
    return result

