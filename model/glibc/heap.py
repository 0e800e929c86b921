"""Chunks in address order: a thread heap, or the main arena's break (digest "Rules").

A `Segment` is a run of address space that chunks tile without gaps: a thread heap
(`heap_info` at `base`, at most HEAP_MAX_SIZE, with `size` and `mprotect_size`) or the main
arena's memory between the initial break and the current one. Each chunk has a state; only
FREE chunks (in the bins) coalesce, as only they have their neighbour's PREV_INUSE bit clear.

As in glibc, a chunk is found from a neighbour, never by a search: the next one starts where
it ends (`chunk_at_offset (p, size)`: `Segment.after`), and the one before is reached only
when it is free, through its footer (`prev_size`: `Bins.ending_at`). The chunks in address
order are sorted only for the invariants and reports (`in_order`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from operator import attrgetter

from model.glibc.trim import MadviseThrottle

INUSE = "inuse"  # handed out (to the program, or a tcache struct or a dtv)
FREE = "free"  # in the unsorted, small or large bins: coalesces with free neighbours
FAST = "fast"  # in a fastbin: looks in use to its neighbours until malloc_consolidate
TCACHE = "tcache"  # in a thread's tcache: looks in use to its neighbours
TOP = "top"  # the arena's top chunk, always the last chunk of the current segment
FENCE = "fence"  # the fenceposts closing a heap that is no longer the current one
MMAPPED = "mmapped"  # a chunk with its own mapping, in no segment
_ADDRESS = attrgetter("addr")
# `slots` is Python 3.10's; on 3.9 (Debian's pypy3, the simulator's engine for large
# traces: purgecheck/simulate/engine.py) the class is the same without __slots__
SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}


@dataclass(eq=False, **SLOTS)
class Chunk:
    """One chunk (slots: a replay makes and reads hundreds of thousands of them)."""

    addr: int
    size: int
    state: str
    segment: "Segment | None" = None
    seq: int = 0  # when it entered its bin: the oldest of a size is taken first
    offset: int = 0  # mmapped chunks: bytes of the mapping before the chunk (prev_size)
    bin: int | None = None  # the bin holding it (0: the unsorted bin), None: in no bin

    @property
    def end(self) -> int:
        return self.addr + self.size


@dataclass(eq=False)
class Segment:
    base: int  # the heap_info (thread heap) or the initial break (main arena)
    first: int  # address of the first chunk
    size: int  # heap->size, or brk - base
    mprotect_size: int = 0  # thread heaps: bytes made PROT_READ|PROT_WRITE
    prev: "Segment | None" = None  # thread heaps: heap->prev
    mt: MadviseThrottle = field(default_factory=MadviseThrottle)  # the RFC's counters
    arena: object = None  # the Arena the segment belongs to (heap->ar_ptr)
    chunks: dict[int, Chunk] = field(default_factory=dict)  # by address

    @property
    def end(self) -> int:
        return self.base + self.size

    def insert(self, c: Chunk) -> None:
        """A chunk starts at c.addr (a new one, or one that takes over the address of the
        chunk that started there: the chunk cut from the top's low end, the top absorbing
        the chunk below it)."""
        c.segment = self
        self.chunks[c.addr] = c

    def remove(self, c: Chunk) -> None:
        del self.chunks[c.addr]

    def move(self, c: Chunk, addr: int) -> None:
        """Re-key a chunk whose start changed (the top chunk absorbing its lower neighbour)."""
        self.remove(c)
        c.addr = addr
        self.insert(c)

    def after(self, c: Chunk) -> Chunk | None:
        """next_chunk (p): chunk_at_offset (p, chunksize (p)), the chunk that starts where
        `c` ends (the chunks tile the segment); None past the last chunk."""
        return self.chunks.get(c.addr + c.size)

    def in_order(self) -> list[Chunk]:
        """The chunks in address order (for the invariants and reports: a sort, all of it in
        C: `replay --invariants` sorts every segment twice an op)."""
        return sorted(self.chunks.values(), key=_ADDRESS)
