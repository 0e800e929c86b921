"""memalign, aligned_alloc, posix_memalign, valloc, pvalloc (glibc malloc/malloc.c,
`_mid_memalign` and `_int_memalign`, as in 2.36).

`_mid_memalign`: an alignment of at most MALLOC_ALIGNMENT is a plain `__libc_malloc` (with
the tcache); a smaller one is raised to MINSIZE, one that is not a power of two to the next
power of two. `_int_memalign` then asks `_int_malloc` for `nb + alignment + MINSIZE` bytes
(the worst case), finds the first aligned spot that leaves a leader of at least MINSIZE,
gives the leader back with `_int_free` (an mmapped chunk only moves its offset), and frees
the tail when `size > nb + MINSIZE`. 2.36 has no tcache path for aligned requests (it came
in 2.38): the request goes to the arena.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.glibc.arena import Arena
from model.glibc.constants import (CHUNK_HDR_SZ, MALLOC_ALIGNMENT, MINSIZE, PAGESIZE, align_up,
                                   request2size)
from model.glibc.heap import INUSE, MMAPPED, Chunk
from model.glibc.malloc import int_free, int_malloc
from model.glibc.realloc import split_tail

if TYPE_CHECKING:
    from model.glibc.process import Process, Thread

SIZE_MAX = (1 << 64) - 1


def effective_alignment(alignment: int) -> int:
    """_mid_memalign's alignment once it reaches _int_memalign (callers handle <= 16)."""
    alignment = max(alignment, MINSIZE)
    if alignment & (alignment - 1):
        a = MALLOC_ALIGNMENT * 2
        while a < alignment:
            a <<= 1
        alignment = a
    return alignment


def pvalloc_request(size: int) -> int:
    """__libc_pvalloc: `rounded_bytes & -(pagesize - 1)` after adding pagesize - 1; the mask
    is -(4095), not -(4096), so bit 0 of the sum survives (pvalloc(2) asks 4097 bytes)."""
    return ((size + PAGESIZE - 1) & (-(PAGESIZE - 1) & SIZE_MAX)) & SIZE_MAX


def int_memalign(p: "Process", av: Arena, t: "Thread | None", alignment: int,
                 size: int) -> Chunk:
    nb = request2size(size)
    c = int_malloc(p, av, request2size(nb + alignment + MINSIZE), t)
    mem = c.addr + CHUNK_HDR_SZ
    if mem % alignment:
        brk = align_up(mem, alignment) - CHUNK_HDR_SZ
        if brk - c.addr < MINSIZE:
            brk += alignment
        lead = brk - c.addr
        if c.state == MMAPPED:  # "For mmapped chunks, just adjust offset"
            c.addr, c.offset, c.size = brk, c.offset + lead, c.size - lead
            av.write(brk, CHUNK_HDR_SZ)
            return c
        newp = Chunk(brk, c.size - lead, INUSE)
        c.segment.insert(newp)
        c.size = lead
        av.write(brk, CHUNK_HDR_SZ)  # set_prev_size, set_head (newp, ...)
        int_free(p, av, c, t)  # "give back leader, use the rest"
        c = newp
    if c.state != MMAPPED and c.size > nb + MINSIZE:
        split_tail(p, av, t, c, nb, at_least=MINSIZE + 1)
    return c

