"""One arena: its segments, its top chunk, its bins and fastbins (digest "Rules", "Growth").

The chunk-level rules are here, one function each: taking a chunk from the bins (exact fit,
then best fit), splitting, coalescing a freed chunk with its free neighbours and with top,
and malloc_consolidate. What talks to the OS is in `system`; malloc and free in `malloc`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from model.glibc.constants import MINSIZE, SIZE_SZ
from model.glibc.heap import FAST, FREE, INUSE, TOP, Chunk, Segment


@dataclass
class TrimRecord:
    """Ghost record of one trim decision, for the policy invariants (never read by a rule)."""

    arena: str
    version: str
    where: str  # "heap" (heap_trim of a thread heap) or "main" (systrim)
    trigger: int  # the merged chunk size whose free considered the trim
    top_size: int
    pad: int
    trim_threshold: int
    mmap_threshold: int
    extra: int  # what the version's rule asked to give back (0: nothing)
    shrunk: bool  # whether the heap or the break really shrank
    top_after: int
    counters: tuple[int, int] | None = None  # RFC: (event_madvise, event_large_malloc) judged
    counters_after: tuple[int, int] | None = None


class Bins:
    """The unsorted, small and large bins, as one set of FREE chunks by size.

    Within a size the oldest chunk is taken first; across sizes the smallest that fits."""

    def __init__(self) -> None:
        self.by_size: dict[int, dict[int, Chunk]] = {}
        self.sizes: list[int] = []
        self.seq = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_size.values())

    def chunks(self) -> list[Chunk]:
        return [c for v in self.by_size.values() for c in v.values()]

    def add(self, c: Chunk) -> None:
        self.seq += 1
        c.seq = self.seq
        c.state = FREE
        if c.size not in self.by_size:
            self.by_size[c.size] = {}
            bisect.insort(self.sizes, c.size)
        self.by_size[c.size][c.addr] = c

    def remove(self, c: Chunk) -> None:
        group = self.by_size[c.size]
        del group[c.addr]
        if not group:
            del self.by_size[c.size]
            del self.sizes[bisect.bisect_left(self.sizes, c.size)]

    def oldest(self, size: int) -> Chunk | None:
        group = self.by_size.get(size)
        return next(iter(group.values())) if group else None

    def smallest_at_least(self, size: int) -> Chunk | None:
        i = bisect.bisect_left(self.sizes, size)
        return self.oldest(self.sizes[i]) if i < len(self.sizes) else None


@dataclass(eq=False)
class Arena:
    name: str
    is_main: bool
    segments: list[Segment] = field(default_factory=list)  # thread heaps, oldest first
    top: Chunk | None = None
    bins: Bins = field(default_factory=Bins)
    fastbins: dict[int, list[Chunk]] = field(default_factory=dict)  # LIFO per size
    system_mem: int = 0
    attached_threads: int = 0
    trims: list[TrimRecord] = field(default_factory=list)
    process: object = None

    @property
    def have_fastchunks(self) -> bool:
        return any(self.fastbins.values())

    @property
    def top_size(self) -> int:
        return self.top.size if self.top else 0


def write(av: Arena, addr: int, length: int) -> None:
    """malloc writes its own metadata at `addr` (a size field, a free chunk's links, a
    footer): the page becomes resident (model.glibc.resident; seed 001: the malloc after a
    madvise refaults). Never read by a rule."""
    if av.process is not None:
        av.process.resident.write(addr, length)


def write_free_chunk(av: Arena, c: Chunk) -> None:
    """A chunk put in the bins: set_head (its size), fd/bk, and set_foot (the next chunk's
    prev_size) with the next chunk's PREV_INUSE bit cleared."""
    write(av, c.addr + SIZE_SZ, 3 * SIZE_SZ)
    write(av, c.end, 2 * SIZE_SZ)


def take_from_bins(av: Arena, nb: int) -> Chunk | None:
    """_int_malloc's bin search: an exact fit, else the best (smallest) fit, split."""
    c = av.bins.oldest(nb) or av.bins.smallest_at_least(nb)
    if c is None:
        return None
    av.bins.remove(c)
    c.state = INUSE
    split_chunk(av, c, nb)
    return c


def split_chunk(av: Arena, c: Chunk, nb: int) -> None:
    """A chunk larger than the request keeps nb; a remainder of at least MINSIZE goes back
    to the bins (a smaller one stays with the chunk)."""
    rest = c.size - nb
    if rest < MINSIZE:
        write(av, c.end + SIZE_SZ, SIZE_SZ)  # set_inuse_bit_at_offset(victim, size)
        return
    c.size = nb
    remainder = Chunk(c.addr + nb, rest, FREE)
    c.segment.insert(remainder)
    av.bins.add(remainder)
    write(av, c.addr + SIZE_SZ, SIZE_SZ)
    write_free_chunk(av, remainder)


def split_top(av: Arena, nb: int) -> Chunk:
    """use_top: the request is cut from the low end of the top chunk."""
    top = av.top
    seg = top.segment
    victim = Chunk(top.addr, nb, INUSE)
    seg.move(top, top.addr + nb)
    top.size -= nb
    seg.insert(victim)
    write(av, victim.addr + SIZE_SZ, SIZE_SZ)  # set_head (victim)
    write(av, top.addr + SIZE_SZ, SIZE_SZ)  # set_head (remainder), the new top
    return victim


def coalesce_with_top(av: Arena, c: Chunk) -> Chunk:
    """A free chunk that borders the top chunk is absorbed by it ("consolidate into top")."""
    seg = c.segment
    seg.remove(c)
    seg.move(av.top, c.addr)
    av.top.size += c.size
    write(av, c.addr + SIZE_SZ, SIZE_SZ)  # set_head (p, size | PREV_INUSE); av->top = p
    return av.top


def coalesce(av: Arena, c: Chunk) -> Chunk:
    """_int_free's merge: with a FREE lower neighbour, then into top or with a FREE upper
    neighbour; the result goes to the bins unless it became the top. Returns the merged chunk."""
    seg = c.segment
    lower = seg.before(c)
    if lower is not None and lower.state == FREE:
        av.bins.remove(lower)
        seg.remove(c)
        lower.size += c.size
        c = lower
    upper = seg.after(c)
    if upper is av.top:
        return coalesce_with_top(av, c)
    if upper is not None and upper.state == FREE:
        av.bins.remove(upper)
        seg.remove(upper)
        c.size += upper.size
    av.bins.add(c)
    write_free_chunk(av, c)
    return c


def malloc_consolidate(av: Arena) -> None:
    """Every fastbin chunk is merged with its free neighbours (or into top) and binned."""
    for size in sorted(av.fastbins):
        chunks, av.fastbins[size] = av.fastbins[size], []
        for c in reversed(chunks):  # from the head of the LIFO list, as glibc walks it
            c.state = INUSE
            coalesce(av, c)


def push_fastbin(av: Arena, c: Chunk) -> None:
    c.state = FAST
    av.fastbins.setdefault(c.size, []).append(c)
    write(av, c.addr + 2 * SIZE_SZ, SIZE_SZ)  # p->fd


def is_top(c: Chunk) -> bool:
    return c.state == TOP
