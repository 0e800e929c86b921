"""One arena: its segments, its top chunk, its bins and fastbins (digest "Rules", "Growth").

The chunk-level rules are here, one function each: taking a chunk from the bins (the
unsorted scan with the last remainder, then best fit by bin), splitting, coalescing a freed
chunk with its free neighbours and with top, and malloc_consolidate. What talks to the OS is in `system`; malloc and free in `malloc`.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from model.glibc.constants import (MAX_TCACHE_CHUNK, MIN_LARGE_SIZE, MINSIZE, SIZE_SZ,
                                   csize2tidx)
from model.glibc.heap import FAST, FREE, INUSE, TOP, Chunk, Segment
from model.glibc.resident import PAGE_SHIFT


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


def bin_index(size: int) -> int:
    """smallbin_index / largebin_index_64 (malloc.c): bins 2..63 hold one size each (16
    apart, below MIN_LARGE_SIZE); bins 64..126 hold ranges that widen by powers of 8."""
    if size < MIN_LARGE_SIZE:
        return size >> 4
    if size >> 6 <= 48:
        return 48 + (size >> 6)
    if size >> 9 <= 20:
        return 91 + (size >> 9)
    if size >> 12 <= 10:
        return 110 + (size >> 12)
    if size >> 15 <= 4:
        return 119 + (size >> 15)
    if size >> 18 <= 2:
        return 124 + (size >> 18)
    return 126


class Bins:
    """The unsorted bin, the small bins and the large bins of one arena (malloc.c).

    Every chunk `_int_free`, `malloc_consolidate` or a split gives back enters the unsorted
    bin (at its head; `_int_malloc` takes from its tail: oldest first). Only `_int_malloc`'s
    scan of the unsorted bin sorts chunks into their bins ("the only place in any routine
    where chunks are placed in bins"). A small bin is FIFO. A large bin is kept sorted by size;
    a chunk of a size already there is inserted "in the second position", so each size is a
    group [first, newest, ..., oldest].

    Each group and the unsorted bin is an OrderedDict by address in that order (glibc's
    doubly linked lists: taking either end, inserting at a known place and unlinking any
    chunk cost O(1) however many chunks a bin holds; a list paid a copy of its tail, and a
    dict used as a queue a scan past its deleted entries). tests/test_replay_speed.py checks
    every operation against the list model these stand for.

    A binned chunk's footer (set_foot: the next chunk's prev_size, its PREV_INUSE bit clear)
    is `footers`, by the address where the chunk ends: how _int_free finds a free chunk
    below the one it frees (`if (!prev_inuse (p))`, `prev_size (p)`). A chunk's size and
    address never change while it is binned (every rule unlinks it first), so the footer
    written by `add` holds until `remove`."""

    def __init__(self) -> None:
        self.unsorted: OrderedDict[int, Chunk] = OrderedDict()  # by address, oldest first
        self.bins: dict[int, dict[int, OrderedDict[int, Chunk]]] = {}  # bin -> size -> group
        self.nonempty: list[int] = []  # bin indices that hold a chunk, ascending
        self.count = 0  # chunks held (each chunk knows its bin: Chunk.bin)
        self.seq = 0
        self.footers: dict[int, Chunk] = {}  # end address -> the binned chunk ending there

    def __len__(self) -> int:
        return self.count

    def chunks(self) -> list[Chunk]:
        return list(self.unsorted.values()) + [c for b in self.bins.values()
                                               for g in b.values() for c in g.values()]

    def add(self, c: Chunk) -> None:
        """A chunk given back to the arena: into the unsorted bin."""
        self.seq += 1
        c.seq = self.seq
        c.state = FREE
        self.unsorted[c.addr] = c
        self.footers[c.addr + c.size] = c
        c.bin = 0
        self.count += 1

    def ending_at(self, addr: int) -> Chunk | None:
        """The binned chunk that ends at `addr`: the free chunk below the chunk at `addr`,
        found by its footer (None: the chunk below is in use, PREV_INUSE set)."""
        return self.footers.get(addr)

    def pop_oldest_unsorted(self) -> Chunk:
        """The unsorted bin's tail, where _int_malloc's scan takes from (`victim =
        unsorted_chunks (av)->bk`), unlinked (`remove`, in one call of the OrderedDict: the
        scan unlinks every chunk it looks at); the bin must not be empty."""
        _, c = self.unsorted.popitem(last=False)
        c.bin = None
        self.count -= 1
        del self.footers[c.addr + c.size]
        return c

    def place(self, c: Chunk) -> None:
        """_int_malloc's "place chunk in bin" (from the unsorted bin, which `remove` left)."""
        size = c.size
        i = size >> 4 if size < MIN_LARGE_SIZE else bin_index(size)
        groups = self.bins.get(i)
        if groups is None:
            groups = self.bins[i] = {}
            bisect.insort(self.nonempty, i)
        group = groups.get(size)
        if group is None:  # a new size starts its group (empty, then set: half the time
            group = groups[size] = OrderedDict()  # of OrderedDict's constructor with an item)
            group[c.addr] = c
        elif size < MIN_LARGE_SIZE:
            group[c.addr] = c  # a small bin is FIFO
        else:  # "Always insert in the second position": after the group's first chunk
            first = next(iter(group))
            group[c.addr] = c
            group.move_to_end(c.addr, last=False)
            group.move_to_end(first, last=False)
        c.bin = i
        self.footers[c.addr + size] = c
        self.count += 1

    def remove(self, c: Chunk) -> None:
        """unlink_chunk, from whichever bin holds the chunk."""
        i = c.bin
        c.bin = None
        self.count -= 1
        del self.footers[c.addr + c.size]
        if i == 0:
            del self.unsorted[c.addr]
            return
        groups = self.bins[i]
        group = groups[c.size]
        del group[c.addr]
        if not group:
            del groups[c.size]
            if not groups:
                del self.bins[i]
                del self.nonempty[bisect.bisect_left(self.nonempty, i)]

    def oldest_small(self, size: int) -> Chunk | None:
        """last (bin) of the small bin of `size` (its oldest chunk)."""
        groups = self.bins.get(size >> 4)  # a small bin holds one size: its only group
        return None if groups is None else next(iter(groups[size].values()))

    def best_in_large_bin(self, nb: int) -> Chunk | None:
        """A large request's own bin: the smallest size >= nb, and of that size the second
        entry when there is one ("Avoid removing the first entry for a size")."""
        groups = self.bins.get(bin_index(nb))
        if not groups:
            return None
        fits = [size for size in groups if size >= nb]
        if not fits:
            return None
        chunks = iter(groups[min(fits)].values())
        first = next(chunks)
        return next(chunks, first)

    def next_nonempty_after(self, idx: int) -> Chunk | None:
        """The binmap search from bin idx + 1: `last (bin)` of the first bin holding a chunk,
        the oldest chunk of its smallest size."""
        k = bisect.bisect_right(self.nonempty, idx)
        if k == len(self.nonempty):
            return None
        i = self.nonempty[k]
        group = self.bins[i][min(self.bins[i])]
        # a small bin's oldest is its first; a large group's is its last
        return next(iter(group.values())) if i < 64 else next(reversed(group.values()))


def _no_pages(addr: int, length: int) -> int:
    """The writes of an arena without a process: no resident pages are kept."""
    return 0


@dataclass(eq=False)
class Arena:
    name: str
    is_main: bool
    segments: list[Segment] = field(default_factory=list)  # thread heaps, oldest first
    top: Chunk | None = None
    bins: Bins = field(default_factory=Bins)
    last_remainder: int | None = None  # av->last_remainder: an address, compared as such
    # LIFO per size; a size whose list empties is deleted, so have_fastchunks is a cheap test
    fastbins: dict[int, list[Chunk]] = field(default_factory=dict)
    system_mem: int = 0
    attached_threads: int = 0
    trims: list[TrimRecord] = field(default_factory=list)
    process: object = None
    # av.write(addr, length): malloc writes its own metadata at `addr` (a size field, a free
    # chunk's links, a footer), so the page becomes resident (model.glibc.resident; seed 001:
    # the malloc after a madvise refaults). Never read by a rule. The process's
    # ResidentPages.write, bound once: it is the model's most frequent call.
    write: Callable[[int, int], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.write = self.process.resident.write if self.process is not None else _no_pages

    @property
    def have_fastchunks(self) -> bool:
        return bool(self.fastbins)

    @property
    def top_size(self) -> int:
        return self.top.size if self.top else 0


def write_free_chunk(av: Arena, c: Chunk) -> None:
    """A chunk put in the bins: set_head (its size), fd/bk, and set_foot (the next chunk's
    prev_size) with the next chunk's PREV_INUSE bit cleared."""
    addr = c.addr
    av.write(addr + SIZE_SZ, 3 * SIZE_SZ)
    av.write(addr + c.size, 2 * SIZE_SZ)  # at c.end (the property read, not called: hot)


def take_from_bins(p, av: Arena, nb: int, t) -> Chunk | None:
    """_int_malloc after the fastbins and the small bin of nb: the unsorted scan (the last
    remainder for a small request when it is the only unsorted chunk; an exact fit, stashed
    in the tcache while it has room; every other chunk placed in its bin), then a large
    request's own bin, then the binmap search from the next bin, each split with the
    remainder back to the unsorted bin. None: nothing fits, use the top."""
    bins = av.bins
    small = nb < MIN_LARGE_SIZE
    cached = False
    while bins.unsorted:
        victim = bins.pop_oldest_unsorted()
        # the last remainder is used when it was the only unsorted chunk (none left now)
        if small and not bins.unsorted and victim.addr == av.last_remainder \
                and victim.size > nb + MINSIZE:
            victim.state = INUSE
            split_chunk(av, victim, nb)
            av.last_remainder = victim.end
            return victim
        if victim.size == nb:
            av.write(victim.addr + nb + SIZE_SZ, SIZE_SZ)  # set_inuse_bit_at_offset
            if nb <= MAX_TCACHE_CHUNK and malloc.tcache_has_room(t, nb):
                victim.state = INUSE
                malloc.tcache_put(t, victim)  # "Fill cache first, return to user only if cache fills"
                cached = True
                continue
            victim.state = INUSE
            return victim
        bins.place(victim)
    if cached:
        c = t.tcache[csize2tidx(nb)].pop()  # tcache_get
        c.state = INUSE
        return c
    victim = None if small else bins.best_in_large_bin(nb)
    if victim is None:
        victim = bins.next_nonempty_after(bin_index(nb))
        if victim is None:
            return None
    bins.remove(victim)
    victim.state = INUSE
    had_rest = victim.size - nb >= MINSIZE
    split_chunk(av, victim, nb)
    if small and had_rest:
        av.last_remainder = victim.end  # "advertise as last remainder"
    return victim


def cut_tail(av: Arena, c: Chunk, nb: int, at_least: int, state: str) -> Chunk | None:
    """A chunk keeps nb bytes and its tail becomes a chunk of its own (in `state`) when the
    tail has at least `at_least` bytes; else the chunk keeps it all (None)."""
    rest = c.size - nb
    if rest < at_least:
        av.write(c.end + SIZE_SZ, SIZE_SZ)  # set_inuse_bit_at_offset (victim, size)
        return None
    c.size = nb
    tail = Chunk(c.addr + nb, rest, state)
    c.segment.insert(tail)
    av.write(c.addr + SIZE_SZ, SIZE_SZ)  # set_head_size (victim, nb)
    return tail


def split_chunk(av: Arena, c: Chunk, nb: int) -> None:
    """_int_malloc's split: a chunk larger than the request keeps nb; a remainder of at least
    MINSIZE goes straight to the unsorted bin (a smaller one stays with the chunk)."""
    remainder = cut_tail(av, c, nb, MINSIZE, FREE)
    if remainder is not None:
        av.bins.add(remainder)
        write_free_chunk(av, remainder)


def split_top(av: Arena, nb: int) -> Chunk:
    """use_top: the request is cut from the low end of the top chunk."""
    top = av.top
    seg = top.segment
    addr = top.addr
    victim = Chunk(addr, nb, INUSE, seg)
    # Segment.insert twice, inline (most mallocs of a growing heap end here): the victim
    # takes the top's address, the top moves up
    chunks = seg.chunks
    chunks[addr] = victim
    top.addr = addr = addr + nb
    top.size -= nb
    chunks[addr] = top
    write = av.write
    write(victim.addr + SIZE_SZ, SIZE_SZ)  # set_head (victim)
    if (addr + SIZE_SZ) >> PAGE_SHIFT != (victim.addr + SIZE_SZ) >> PAGE_SHIFT:
        # (on the page just written the second head faults nothing: a small request's
        # usual case, where the write would be a call that changes no state)
        write(addr + SIZE_SZ, SIZE_SZ)  # set_head (remainder), the new top
    return victim


def coalesce_with_top(av: Arena, c: Chunk) -> Chunk:
    """A free chunk that borders the top chunk is absorbed by it ("consolidate into top")."""
    seg = c.segment
    top = av.top
    seg.remove(top)  # the top's old address goes; the top takes over the chunk's
    top.addr = c.addr
    seg.insert(top)
    top.size += c.size
    av.write(c.addr + SIZE_SZ, SIZE_SZ)  # set_head (p, size | PREV_INUSE); av->top = p
    return av.top


def coalesce(av: Arena, c: Chunk) -> Chunk:
    """_int_free's merge: with a FREE lower neighbour, then into top or with a FREE upper
    neighbour; the result goes to the bins unless it became the top. Returns the merged chunk."""
    seg = c.segment
    lower = av.bins.ending_at(c.addr)  # !prev_inuse (p): the chunk below is free
    if lower is not None:
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
        chunks = av.fastbins.pop(size)
        for c in reversed(chunks):  # from the head of the LIFO list, as glibc walks it
            c.state = INUSE
            coalesce(av, c)


def push_fastbin(av: Arena, c: Chunk) -> None:
    c.state = FAST
    fastbin = av.fastbins.get(c.size)
    if fastbin is None:
        av.fastbins[c.size] = [c]
    else:
        fastbin.append(c)
    av.write(c.addr + 2 * SIZE_SZ, SIZE_SZ)  # p->fd


def is_top(c: Chunk) -> bool:
    return c.state == TOP


# take_from_bins stashes in the tcache with malloc's functions; malloc imports this module,
# so this import comes last (either module may be imported first).
from model.glibc import malloc  # noqa: E402
