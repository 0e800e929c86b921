"""realloc: _int_realloc of one arena (glibc malloc/malloc.c, `_int_realloc`).

A chunk that must grow tries, in this order: to take the front of the top chunk when it
borders it and the two together leave MINSIZE ("Try to expand forward into top"); to absorb
the next chunk when that one is free in a bin (`!inuse (next)`: a chunk in a fastbin or a
tcache looks in use, so it is not absorbed) and the two are big enough ("Try to expand
forward into next chunk"); else `_int_malloc (av, nb - MALLOC_ALIGN_MASK)`, which may return
the very next chunk ("Avoid copy if newp is next chunk after oldp"), or a chunk elsewhere,
and then the old chunk goes to `_int_free` (tcache first). Whatever the chunk became, a
remainder of at least MINSIZE past `nb` is split off and freed with `_int_free`, so it
reaches the thread's tcache, a fastbin, or merges with its free neighbours or the top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from model.glibc.arena import Arena, cut_tail
from model.glibc.constants import MINSIZE, SIZE_SZ
from model.glibc.heap import FREE, INUSE, Chunk
from model.glibc.malloc import int_free, int_malloc

if TYPE_CHECKING:
    from model.glibc.process import Process, Thread


def int_realloc(p: "Process", av: Arena, t: "Thread", c: Chunk, nb: int) -> Chunk:
    """The chunk serving the block after `realloc` asked for chunk size `nb`."""
    seg = c.segment
    nxt = seg.after(c)
    if c.size < nb:
        if nxt is av.top and c.size + nxt.size >= nb + MINSIZE:
            # expand into top: av->top = chunk_at_offset (oldp, nb)
            seg.move(nxt, c.addr + nb)
            nxt.size = c.size + nxt.size - nb
            c.size = nb
            av.write(c.addr + SIZE_SZ, SIZE_SZ)
            av.write(nxt.addr + SIZE_SZ, SIZE_SZ)
            return c
        if nxt is not av.top and nxt is not None and nxt.state == FREE \
                and c.size + nxt.size >= nb:
            av.bins.remove(nxt)  # unlink_chunk (av, next)
            seg.remove(nxt)
            c.size += nxt.size
        else:
            new = int_malloc(p, av, nb, t)
            if new.segment is seg and new.addr == c.end:  # newp == next: no copy
                seg.remove(new)
                c.size += new.size
            else:
                copy_on_move(p, c, new)
                int_free(p, av, c, t)
                return new
    split_tail(p, av, t, c, nb)
    return c


def copy_on_move(p: "Process", old: Chunk, new: Chunk) -> None:
    """_int_realloc moved the block: `memcpy (newmem, chunk2mem (oldp), oldsize - SIZE_SZ)`
    writes the new chunk's first bytes, so its pages become resident (a ghost write, as
    model.glibc.resident counts them; the old chunk is read, not written)."""
    p.resident.write(new.addr + 2 * SIZE_SZ, old.size - SIZE_SZ)


def split_tail(p: "Process", av: Arena, t: "Thread | None", c: Chunk, nb: int,
               at_least: int = MINSIZE) -> None:
    """A chunk keeps `nb` bytes; a tail of at least `at_least` goes to _int_free (so to the
    tcache, a fastbin, or merged). realloc splits a remainder >= MINSIZE; _int_memalign one
    only when `size > nb + MINSIZE`."""
    tail = cut_tail(av, c, nb, at_least, INUSE)
    if tail is not None:
        int_free(p, av, tail, t)
