"""Which 4 KiB pages of malloc's memory are resident, as mincore would report them (seed 001).

Seed 001: "For a large size, the free() will call madvise (pagetable teardown, page free and
TLB flush) every time followed immediately by a malloc (fault, kernel page alloc, zeroing
and charge accounting)." A page becomes resident when it is written, by the program (its
block) or by malloc itself (a chunk's header, a free chunk's links, heap_info, malloc_state,
tcache's struct), and stops being resident when the allocator gives it back:
madvise(MADV_DONTNEED) or the PROT_NONE remap of a heap's tail (shrink_heap), a brk that
lowers the break (systrim), a munmap of an mmapped chunk or of a whole heap. Thread stacks
are not malloc's memory and are not counted.

Each page has one state byte (ABSENT, RESIDENT, GIVEN_BACK), in one bytearray per 64 MiB of
address space (a thread heap's size and alignment): a one-page write, most of malloc's own,
is one index; a longer write or a drop counts and rewrites a slice in C, whatever its
length. Nothing here decides anything: it is the ghost state a rule's cost is read from.
"""

from __future__ import annotations

import re

from model.glibc.constants import HEAP_MAX_SIZE, PAGESIZE

REGION_PAGES = HEAP_MAX_SIZE // PAGESIZE  # pages per state array: one 64 MiB heap
# the same divisions as shifts and a mask, for the one-page write (the model's most frequent
# call): an address's page is addr >> PAGE_SHIFT, a page's region page >> REGION_SHIFT
PAGE_SHIFT = PAGESIZE.bit_length() - 1
REGION_SHIFT = REGION_PAGES.bit_length() - 1
REGION_MASK = REGION_PAGES - 1
assert 1 << PAGE_SHIFT == PAGESIZE and 1 << REGION_SHIFT == REGION_PAGES
# The most one write may make resident: 1 TiB, 16,384 arrays of 16 KiB. A recorded size past
# it (a calloc of 2^62 bytes from the heap, with mmap turned off) is refused, not written a
# region at a time for hours.
MAX_WRITE_BYTES = 1 << 40

# A page's state. GIVEN_BACK: discarded by the allocator while resident, at an address it
# keeps, and not written since: a write there is a refault.
ABSENT, RESIDENT, GIVEN_BACK = 0, 1, 2
_RESIDENT_RUN = re.compile(b"\x01+")
_GIVEN_BACK_RUN = re.compile(b"\x02+")
_ALL = {state: bytes([state]) * REGION_PAGES for state in (ABSENT, RESIDENT)}

# The system calls that give pages back (syscalls.CATEGORIES), and whether the same addresses
# can be written again without a new mapping (a heap regrowing into its old pages, the break
# moving back up): such a page written again is a refault.
DROPPING_CALLS: dict[str, bool] = {
    "heap_madvise": True,  # shrink_heap: madvise((char *) h + new_size, diff, MADV_DONTNEED)
    "heap_remap": True,  # shrink_heap, overcommit 2: mmap(PROT_NONE, MAP_FIXED) of the tail
    "brk_shrink": True,  # systrim: sbrk(-extra)
    "chunk_munmap": False,  # munmap_chunk: the model never maps those addresses again
    "heap_delete": False,  # heap_trim: munmap of a whole 64 MiB heap
    "main_madvise": True,  # mtrim: madvise of the whole pages inside a free chunk
}


def pages_touched(addr: int, length: int) -> tuple[int, int]:
    """The pages a write of `length` bytes at `addr` touches (any byte of a page counts)."""
    return addr // PAGESIZE, (addr + length + PAGESIZE - 1) // PAGESIZE


def pages_within(addr: int, length: int) -> tuple[int, int]:
    """The whole pages inside [addr, addr + length): what a madvise, munmap or brk drops."""
    return (addr + PAGESIZE - 1) // PAGESIZE, (addr + length) // PAGESIZE


def region_spans(lo: int, hi: int):
    """(region, first, end): the pages lo..hi-1 as index ranges of the regions they cross."""
    while lo < hi:
        region, first = divmod(lo, REGION_PAGES)
        end = min(REGION_PAGES, first + hi - lo)
        yield region, first, end
        lo += end - first


def spans_of_held(lo: int, hi: int, held: dict[int, bytearray]):
    """region_spans(lo, hi), but only of the regions `held` has: what a drop or a count
    looks at. A range of 2^50 pages (a recorded size of 2^62 bytes) costs the regions that
    hold pages, not the 2^36 regions it spans."""
    if hi <= lo:
        return
    first, last = lo // REGION_PAGES, (hi - 1) // REGION_PAGES
    if last - first < len(held) + 2:
        yield from ((r, f, e) for r, f, e in region_spans(lo, hi) if r in held)
        return
    for region in sorted(r for r in held if first <= r <= last):
        base = region * REGION_PAGES
        yield region, max(lo, base) - base, min(hi, base + REGION_PAGES) - base


class ResidentLimit(ValueError):
    """A write larger than MAX_WRITE_BYTES: more than the model keeps resident."""


class ResidentPages:
    """The resident pages of malloc's memory, and what writing and dropping them cost:
    `faults` counts pages written while not resident (a fault and a zeroed page each, seed
    001's "fault, kernel page alloc, zeroing"), `refaults` those of them that had been
    resident and were discarded by the allocator at addresses it kept (seed 001: "madvise()
    ... immediately followed by a malloc and a refault")."""

    __slots__ = ("regions", "pages", "faults", "refaults", "dropped")

    def __init__(self) -> None:
        # region -> the state of each of its pages; a region all ABSENT is deleted
        self.regions: dict[int, bytearray] = {}
        self.pages = 0  # resident pages
        self.faults = 0
        self.refaults = 0
        self.dropped = 0  # resident pages the allocator's calls dropped

    @property
    def resident_bytes(self) -> int:
        return self.pages * PAGESIZE

    def write(self, addr: int, length: int) -> int:
        """The program or malloc writes [addr, addr + length); returns the pages that fault."""
        if length <= 0:
            return 0
        lo = addr >> PAGE_SHIFT
        if (addr + length - 1) >> PAGE_SHIFT == lo:  # within one page: most of malloc's writes
            try:  # a subscript, not regions.get: no method call on the most frequent path
                if self.regions[lo >> REGION_SHIFT][lo & REGION_MASK] == RESIDENT:
                    return 0  # already resident: most writes (metadata on pages in use)
            except KeyError:  # a region not held yet
                pass
            return self.fault_page(lo)
        if length > MAX_WRITE_BYTES:
            raise ResidentLimit(f"a write of {length:,} bytes: more than the resident-page "
                                f"model takes at once ({MAX_WRITE_BYTES:,} bytes, 1 TiB)")
        faulted = 0
        regions = self.regions
        for region, first, end in region_spans(*pages_touched(addr, length)):
            states = regions.get(region)
            if states is None:
                states = regions[region] = bytearray(REGION_PAGES)
            span = states[first:end]
            new = end - first - span.count(RESIDENT)
            if new:
                self.refaults += span.count(GIVEN_BACK)
                states[first:end] = _ALL[RESIDENT][:end - first]
                faulted += new
        self.pages += faulted
        self.faults += faulted
        return faulted

    def fault_page(self, page: int) -> int:
        """A write within `page`, which is not resident: it faults (and refaults when the
        allocator had given it back)."""
        states = self.regions.get(page >> REGION_SHIFT)
        if states is None:
            states = self.regions[page >> REGION_SHIFT] = bytearray(REGION_PAGES)
        state = states[page & REGION_MASK]
        states[page & REGION_MASK] = RESIDENT
        self.pages += 1
        self.faults += 1
        self.refaults += state == GIVEN_BACK
        return 1

    def drop(self, category: str, addr: int, length: int) -> int:
        """A system call of `category` gave [addr, addr + length) back; returns the resident
        pages it dropped. Calls that give nothing back are ignored."""
        reusable = DROPPING_CALLS.get(category)
        if reusable is None:
            return 0
        regions = self.regions
        gone_total = 0
        for region, first, end in spans_of_held(*pages_within(addr, length), regions):
            states = regions[region]
            span = states[first:end]
            gone = span.count(RESIDENT)
            gone_total += gone
            if reusable:  # only what was resident is discarded: a page never written is not
                if gone:
                    states[first:end] = span.replace(b"\x01", b"\x02")
            else:  # unmapped: nothing of it is resident or given back any more
                states[first:end] = _ALL[ABSENT][:end - first]
                if states.count(ABSENT) == REGION_PAGES:
                    del regions[region]
        self.pages -= gone_total
        self.dropped += gone_total
        return gone_total

    def resident_in(self, addr: int, length: int) -> int:
        """Resident pages touching [addr, addr + length)."""
        return self.resident_in_pages(*pages_touched(addr, length))

    def resident_in_pages(self, lo: int, hi: int) -> int:
        """Resident pages among the pages lo..hi-1."""
        regions = self.regions
        return sum(regions[r][f:e].count(RESIDENT) for r, f, e in spans_of_held(lo, hi, regions))

    def given_back(self) -> set[int]:
        """The pages given back and not written since (GIVEN_BACK), by page number."""
        return {region * REGION_PAGES + i for region, states in self.regions.items()
                for m in _GIVEN_BACK_RUN.finditer(states) for i in range(m.start(), m.end())}

    def runs(self) -> list[tuple[int, int]]:
        """The resident pages as runs [first page, end page), in address order."""
        out: list[tuple[int, int]] = []
        for region in sorted(self.regions):
            base = region * REGION_PAGES
            for m in _RESIDENT_RUN.finditer(self.regions[region]):
                start, end = base + m.start(), base + m.end()
                if out and out[-1][1] == start:
                    out[-1] = (out[-1][0], end)
                else:
                    out.append((start, end))
        return out
