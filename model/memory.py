"""The OS side of a purge: which OS pages are resident, and discards that may fail.

Seed 000: "_mi_os_discard never touches commit state" (Linux: madvise(MADV_DONTNEED)). The
model predicts residency exactly as mincore reports it for private anonymous memory: a page
becomes resident when it is written and stops being resident when it is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.stats import HoleStats

REGION_BITS = 12  # OS pages per region of a mask: 4,096 (16 MiB of 4 KiB pages)
REGION = 1 << REGION_BITS
_ONES = memoryview(b"\x01" * REGION)
_ZEROS = memoryview(bytes(REGION))


def region_spans(pages: range):
    """(region, start, stop) for each region of a mask that the run of pages crosses."""
    p, stop = pages.start, pages.stop
    while p < stop:
        r = p >> REGION_BITS
        hi = min(stop, (r + 1) << REGION_BITS)
        yield r, p & (REGION - 1), ((hi - 1) & (REGION - 1)) + 1
        p = hi


class PageMask:
    """A byte per OS page, 1 where set, in regions made on first use.

    Memory.mask is Memory.resident kept again, so that a write to pages all resident
    already is seen as such by one search of a bytearray (not by adding each page to the
    set again, which took most of a large block's write). The set stays the model's
    residency; the mask only mirrors it (tests/test_simulate.py checks the two agree after
    every op). model.live_pages keeps the OS pages of live blocks in another."""

    def __init__(self) -> None:
        self.regions: dict[int, bytearray] = {}

    def _spans(self, pages: range):
        """(region's bytes, start, stop) for each region the run of pages crosses (as
        region_spans, inline: a write's path)."""
        p, stop = pages.start, pages.stop
        while p < stop:
            r = p >> REGION_BITS
            hi = min(stop, (r + 1) << REGION_BITS)
            b = self.regions.get(r)
            if b is None:
                b = self.regions[r] = bytearray(REGION)
            yield b, p & (REGION - 1), ((hi - 1) & (REGION - 1)) + 1
            p = hi

    def is_all_set(self, pages: range) -> bool:
        lo, hi = pages.start, pages.stop
        r = lo >> REGION_BITS
        if lo < hi and (hi - 1) >> REGION_BITS == r:  # one region, the usual case
            b = self.regions.get(r)
            return b is not None and b.find(0, lo & (REGION - 1),
                                            ((hi - 1) & (REGION - 1)) + 1) < 0
        return all(b.find(0, lo, hi) < 0 for b, lo, hi in self._spans(pages))

    def _one_region(self, pages: range) -> tuple[bytearray | None, int, int] | None:
        """(the region's bytes or None, start, stop) when the run lies in one region (the
        usual case, taken without the generator of `_spans`), else None."""
        lo, hi = pages.start, pages.stop
        r = lo >> REGION_BITS
        if lo < hi and (hi - 1) >> REGION_BITS == r:
            return self.regions.get(r), lo & (REGION - 1), ((hi - 1) & (REGION - 1)) + 1
        return None

    def count(self, pages: range) -> int:
        """How many of `pages` are set."""
        one = self._one_region(pages)
        if one is not None:
            b, lo, hi = one
            return 0 if b is None else b.count(1, lo, hi)
        return sum(b.count(1, lo, hi) for b, lo, hi in self._spans(pages))

    def count_both(self, other: PageMask, pages: range) -> int:
        """How many of `pages` are set both here and in `other`: each span's bytes read as
        integers, ANDed, the set bits counted (a byte is 0 or 1), no loop over the pages."""
        n = 0
        for r, lo, hi in region_spans(pages):
            a, b = self.regions.get(r), other.regions.get(r)
            if a is not None and b is not None:
                n += (int.from_bytes(a[lo:hi], "little")
                      & int.from_bytes(b[lo:hi], "little")).bit_count()
        return n

    def is_set(self, p: int) -> bool:
        b = self.regions.get(p >> REGION_BITS)
        return b is not None and b[p & (REGION - 1)] == 1

    def put(self, p: int, value: int) -> None:
        """Set (1) or clear (0) one page."""
        r = p >> REGION_BITS
        b = self.regions.get(r)
        if b is None:
            b = self.regions[r] = bytearray(REGION)
        b[p & (REGION - 1)] = value

    def set(self, pages: range) -> None:
        one = self._one_region(pages)
        if one is not None and one[0] is not None:
            b, lo, hi = one
            b[lo:hi] = _ONES[:hi - lo]
            return
        for b, lo, hi in self._spans(pages):
            b[lo:hi] = _ONES[:hi - lo]

    def drop_empty(self, pages: range) -> None:
        """Forget the regions the run of pages crosses that have no page set: a region is
        made on first use, and the address space of a simulation's retired pages is never
        used again (model.heap.Arena hands out fresh ranges, 4 MiB apart), so kept, the
        regions grew with the trace: 4 KiB for every four pages ever made, most of the
        1.2 GB of a 10 M-call simulate (docs/simulate-guide.md, fourteenth round). A region
        missing reads as all clear, so nothing else changes."""
        regions = self.regions
        for r in range(pages.start >> REGION_BITS, ((pages.stop - 1) >> REGION_BITS) + 1):
            b = regions.get(r)
            if b is not None and b.find(1) < 0:
                del regions[r]

    def clear(self, pages: range) -> None:
        one = self._one_region(pages)
        if one is not None:
            b, lo, hi = one
            if b is not None:
                b[lo:hi] = _ZEROS[:hi - lo]
            return
        for b, lo, hi in self._spans(pages):
            b[lo:hi] = _ZEROS[:hi - lo]


LARGE_DISCARD = 64 * 1024  # purgecheck/measure/run.py's SMALL_DISCARD: below, a small page's hole


@dataclass
class Memory:
    os_page_size: int
    resident: set[int] = field(default_factory=set)  # OS page numbers (addr // os_page_size)
    fail_next_discards: int = 0  # injected failures: the next N discards fail
    discard_calls: int = 0
    # The cost of a discard (seed 000 (2): "discarded and refaulted 3 GB in 20 s"): the bytes
    # it dropped, and the OS pages dropped while resident that a write brings back (each a
    # page fault and a page of kernel zeroing).
    discarded_bytes: int = 0
    # the calls of at least LARGE_DISCARD bytes: what `purgecheck measure` counts apart from
    # the holes of small and medium pages (discards_load_large)
    discard_calls_large: int = 0
    refaults: int = 0
    dropped: set[int] = field(default_factory=set)  # discarded while resident, not written since
    holes: HoleStats = field(default_factory=HoleStats)  # the process-wide counters
    # `resident` again, a byte a page: Memory's methods are the only writers of both
    mask: PageMask = field(default_factory=PageMask, repr=False, compare=False)
    # model.live_pages.LiveOsPages when a caller counts the resident pages of live blocks
    # (the simulator's samples): told of every change of residency below
    live: object | None = field(default=None, repr=False, compare=False)

    def os_pages(self, addr: int, size: int) -> range:
        """OS pages touched by the byte range [addr, addr+size)."""
        if size <= 0:
            return range(0)
        return range(addr // self.os_page_size, (addr + size - 1) // self.os_page_size + 1)

    def os_pages_inside(self, addr: int, size: int) -> range:
        """OS pages wholly inside [addr, addr+size)."""
        lo = -(-addr // self.os_page_size)
        hi = (addr + size) // self.os_page_size
        return range(lo, max(lo, hi))

    def touch(self, addr: int, size: int) -> None:
        """A write: every OS page the range touches becomes resident; one that a discard
        dropped faults back in (a refault)."""
        pages = self.os_pages(addr, size)
        if pages.start in self.resident if len(pages) == 1 else self.mask.is_all_set(pages):
            return  # all resident already, so none of them dropped (the two never meet)
        if self.dropped:
            back = self.dropped.intersection(pages)
            if back:
                self.refaults += len(back)
                self.dropped.difference_update(back)
        if self.live is not None:
            self.live.gain_residency(pages)
        self.resident.update(pages)
        self.mask.set(pages)

    def discard(self, addr: int, size: int) -> bool:
        """_mi_os_discard: drop the pages' contents; False when the call fails."""
        self.discard_calls += 1
        self.discard_calls_large += size >= LARGE_DISCARD
        if self.fail_next_discards > 0:
            self.fail_next_discards -= 1
            return False
        pages = self.os_pages(addr, size)
        if self.live is not None:
            self.live.lose_residency(pages)
        self.dropped.update(self.resident.intersection(pages))
        self.resident.difference_update(pages)
        self.mask.clear(pages)
        self.discarded_bytes += size
        return True

    def release(self, addr: int, size: int) -> set[int]:
        """The OS pages of [addr, addr+size) stop being resident outside hole purging (the
        arena's purge of a page gone back to it, purgecheck/simulate); returns those that
        were resident."""
        pages = self.os_pages(addr, size)
        resident = self.resident.intersection(pages)
        if resident:
            if self.live is not None:
                self.live.lose_residency(pages)
            self.resident.difference_update(pages)
            self.mask.clear(pages)
        if pages:
            self.mask.drop_empty(pages)  # the range given back: its regions may go
        return resident

    def count_resident(self, pages: range) -> int:
        """How many of a run of OS pages are resident."""
        return self.mask.count(pages)

    def is_resident(self, addr: int, size: int) -> bool:
        return any(p in self.resident for p in self.os_pages(addr, size))
