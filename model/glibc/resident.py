"""Which 4 KiB pages of malloc's memory are resident, as mincore would report them (seed 001).

Seed 001: "For a large size, the free() will call madvise (pagetable teardown, page free and
TLB flush) every time followed immediately by a malloc (fault, kernel page alloc, zeroing
and charge accounting)." A page becomes resident when it is written, by the program (its
block) or by malloc itself (a chunk's header, a free chunk's links, heap_info, malloc_state,
tcache's struct), and stops being resident when the allocator gives it back:
madvise(MADV_DONTNEED) or the PROT_NONE remap of a heap's tail (shrink_heap), a brk that
lowers the break (systrim), a munmap of an mmapped chunk or of a whole heap. Thread stacks
are not malloc's memory and are not counted.

Pages are bits of one integer per 64 MiB of address space (a thread heap's size and
alignment), so a write or a drop costs a few operations on machine words whatever its
length. Nothing here decides anything: it is the ghost state a rule's cost is read from.
"""

from __future__ import annotations

from model.glibc.constants import HEAP_MAX_SIZE, PAGESIZE

REGION_PAGES = HEAP_MAX_SIZE // PAGESIZE  # pages per bitmap: one 64 MiB heap
# The most one write may make resident: 1 TiB, 16,384 bitmaps of 2 KiB. A recorded size past
# it (a calloc of 2^62 bytes from the heap, with mmap turned off) is refused, not written a
# region at a time for hours.
MAX_WRITE_BYTES = 1 << 40
RECENT_PAGES = 4096  # ResidentPages.recent: the set is emptied when it reaches this size

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


def region_masks(lo: int, hi: int):
    """(region, bit mask) of the pages lo..hi-1, one per 64 MiB region they cross."""
    while lo < hi:
        region, first = divmod(lo, REGION_PAGES)
        n = min(hi - lo, REGION_PAGES - first)
        yield region, ((1 << n) - 1) << first
        lo += n


def region_mask(region: int, lo: int, hi: int) -> int:
    """The bit mask of the pages lo..hi-1 that lie in `region`."""
    base = region * REGION_PAGES
    first, end = max(lo, base) - base, min(hi, base + REGION_PAGES) - base
    return ((1 << (end - first)) - 1) << first if end > first else 0


def masks_of_held(lo: int, hi: int, *held: dict[int, int]):
    """region_masks(lo, hi), but only of the regions that are keys of a dict in `held`: what
    a drop or a count looks at. A range of 2^50 pages (a recorded size of 2^62 bytes) costs
    the regions that hold pages, not the 2^36 regions it spans."""
    first, last = lo // REGION_PAGES, (hi - 1) // REGION_PAGES
    if hi <= lo:
        return
    if last - first < sum(len(d) for d in held) + 2:
        yield from region_masks(lo, hi)
        return
    for region in sorted({r for d in held for r in d if first <= r <= last}):
        yield region, region_mask(region, lo, hi)


class ResidentLimit(ValueError):
    """A write larger than MAX_WRITE_BYTES: more than the model keeps resident."""


class ResidentPages:
    """The resident pages of malloc's memory, and what writing and dropping them cost:
    `faults` counts pages written while not resident (a fault and a zeroed page each, seed
    001's "fault, kernel page alloc, zeroing"), `refaults` those of them that had been
    resident and were discarded by the allocator at addresses it kept (seed 001: "madvise()
    ... immediately followed by a malloc and a refault")."""

    __slots__ = ("bits", "given_back", "pages", "faults", "refaults", "dropped", "hot",
                 "recent")

    def __init__(self) -> None:
        self.bits: dict[int, int] = {}  # region -> resident pages
        self.given_back: dict[int, int] = {}  # region -> discarded pages not written since
        self.pages = 0  # resident pages
        self.faults = 0
        self.refaults = 0
        self.dropped = 0  # resident pages the allocator's calls dropped
        self.hot = (0, 0)  # pages lo..hi-1 last written: resident until the next drop
        # pages one- or two-page writes made resident since the last drop (at most
        # RECENT_PAGES): malloc's metadata writes alternate between a few pages, and a test
        # of a page number is cheaper than one of a 64 MiB region's 16,384-bit integer
        self.recent: set[int] = set()

    @property
    def resident_bytes(self) -> int:
        return self.pages * PAGESIZE

    def write(self, addr: int, length: int) -> int:
        """The program or malloc writes [addr, addr + length); returns the pages that fault."""
        lo, last = addr // PAGESIZE, (addr + length - 1) // PAGESIZE
        recent = self.recent
        if last - lo <= 1 and lo in recent and last in recent:  # most of malloc's writes:
            return 0  # tested first (a length <= 0 that passes writes nothing either)
        if length <= 0:
            return 0
        if length > MAX_WRITE_BYTES:
            raise ResidentLimit(f"a write of {length:,} bytes: more than the resident-page "
                                f"model takes at once ({MAX_WRITE_BYTES:,} bytes, 1 TiB)")
        hi = last + 1
        few = hi - lo <= 2
        hot = self.hot
        if hot[0] <= lo and hi <= hot[1]:  # the pages just written (a large write)
            return 0
        bits = self.bits
        region, first = divmod(lo, REGION_PAGES)
        if hi - lo <= REGION_PAGES - first:  # within one region: the usual case
            self.hot = (lo, hi)
            if few:
                if len(recent) >= RECENT_PAGES:
                    recent.clear()
                recent.update((lo, hi - 1))
            mask = ((1 << (hi - lo)) - 1) << first
            old = bits.get(region, 0)
            new = mask & ~old
            if not new:
                return 0
            bits[region] = old | mask
            return self._faulted(region, new)
        faulted = 0
        for region, mask in region_masks(lo, hi):
            old = bits.get(region, 0)
            new = mask & ~old
            if new:
                bits[region] = old | mask
                faulted += self._faulted(region, new)
        return faulted

    def _faulted(self, region: int, new: int) -> int:
        n = new.bit_count()
        self.pages += n
        self.faults += n
        back = self.given_back.get(region)
        if back and back & new:
            self.refaults += (back & new).bit_count()
            self.given_back[region] = back & ~new
        return n

    def drop(self, category: str, addr: int, length: int) -> int:
        """A system call of `category` gave [addr, addr + length) back; returns the resident
        pages it dropped. Calls that give nothing back are ignored."""
        reusable = DROPPING_CALLS.get(category)
        if reusable is None:
            return 0
        bits, back = self.bits, self.given_back
        self.hot = (0, 0)
        self.recent.clear()
        gone_total = 0
        for region, mask in masks_of_held(*pages_within(addr, length), bits, back):
            old = bits.get(region, 0)
            gone = old & mask
            if gone:
                rest = old & ~mask
                if rest:
                    bits[region] = rest
                else:
                    del bits[region]
                gone_total += gone.bit_count()
            if reusable:  # only what was resident is discarded: a page never written is not
                if gone:
                    back[region] = back.get(region, 0) | gone
            elif region in back:
                rest = back[region] & ~mask
                if rest:
                    back[region] = rest
                else:
                    del back[region]
        self.pages -= gone_total
        self.dropped += gone_total
        return gone_total

    def resident_in(self, addr: int, length: int) -> int:
        """Resident pages touching [addr, addr + length)."""
        return self.resident_in_pages(*pages_touched(addr, length))

    def resident_in_pages(self, lo: int, hi: int) -> int:
        """Resident pages among the pages lo..hi-1."""
        bits = self.bits
        return sum((bits.get(region, 0) & mask).bit_count()
                   for region, mask in masks_of_held(lo, hi, bits))

    def runs(self) -> list[tuple[int, int]]:
        """The resident pages as runs [first page, end page), in address order."""
        out: list[tuple[int, int]] = []
        for region in sorted(self.bits):
            b, base = self.bits[region], region * REGION_PAGES
            while b:
                low = (b & -b).bit_length() - 1  # the lowest set bit
                run = (~(b >> low) & ((b >> low) + 1)).bit_length() - 1  # ones from there
                start = base + low
                if out and out[-1][1] == start:
                    out[-1] = (out[-1][0], start + run)
                else:
                    out.append((start, start + run))
                b &= ~(((1 << run) - 1) << low)
        return out
