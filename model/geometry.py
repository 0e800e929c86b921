"""Page geometry and the purge unit (seed 000, change (1)).

The unit of `page->purged` is chosen per page so that the 256-bit bitmap covers the block
area; every other function here maps blocks to units and back for one page geometry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

KiB = 1024
MiB = 1024 * KiB

# Seed 000, change (1): "page->purged has 256 bits".
MI_PAGE_PURGE_BITS = 256
# Page meta data in front of a small/medium page's blocks costs this much of the page when
# the max object sizes are derived (digest section 2: "~84 KiB" medium maximum).
MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES = 4 * KiB
# Blocks formed at once by mi_page_extend_free (mimalloc: at least 4 blocks, else 4 KiB worth).
MI_MIN_EXTEND_BLOCKS = 4
MI_MAX_EXTEND_SIZE_BYTES = 4 * KiB
# The same in the v3 fork Bun runs (oven-sh/mimalloc page.c, the version with hole purging:
# MI_MIN_EXTEND 1 where MI_SECURE < 2, MI_MAX_EXTEND_SIZE 8 KiB): a large page's blocks are
# formed one at a time (model.world.Options.extend_v3).
MI_MIN_EXTEND_BLOCKS_V3 = 1
MI_MAX_EXTEND_SIZE_BYTES_V3 = 8 * KiB

OS_PAGE_SIZES = (4 * KiB, 16 * KiB, 64 * KiB)


class PageKind(str, Enum):
    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"
    HUGE = "huge"


@dataclass(frozen=True)
class Arch:
    """A target: 64-bit (8-byte words) or 32-bit (4-byte words). Its sizes are worked out
    once (cached): the allocation path reads them at every malloc."""

    bits: int

    @cached_property
    def arena_slice_size(self) -> int:
        # MI_ARENA_SLICE_SIZE = 1 << (13 + MI_SIZE_SHIFT): 64 KiB on 64-bit, 32 KiB on 32-bit.
        return 64 * KiB if self.bits == 64 else 32 * KiB

    @cached_property
    def small_page_size(self) -> int:
        return self.arena_slice_size

    @cached_property
    def medium_page_size(self) -> int:
        return 8 * self.arena_slice_size

    @cached_property
    def large_page_size(self) -> int:
        # "on 32-bit (a large page is 1 MiB there)": MI_SIZE_SIZE * medium page.
        return (self.bits // 8) * self.medium_page_size

    @cached_property
    def small_max_obj_size(self) -> int:
        return (self.small_page_size - MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES) // 6

    @cached_property
    def medium_max_obj_size(self) -> int:
        # MI_MEDIUM_MAX_OBJ_SIZE: the stamp's gate (digest section 5) compares against this.
        return (self.medium_page_size - MI_PAGE_OSPAGE_BLOCK_ALIGN2_BYTES) // 6

    @cached_property
    def large_max_obj_size(self) -> int:
        return self.large_page_size // 8

    def page_size(self, kind: PageKind) -> int:
        return {
            PageKind.SMALL: self.small_page_size,
            PageKind.MEDIUM: self.medium_page_size,
            PageKind.LARGE: self.large_page_size,
        }[kind]


ARCH64 = Arch(64)
ARCH32 = Arch(32)


def compute_block_size(size: int, arch: Arch = ARCH64) -> int:
    """The size class of a request: four classes per power of two above 8 words.

    Seed 000: "the size classes of a large page on 64-bit are 96, 112, 128, 160, 192, 224,
    256, 320, 384, 448 and 512 KiB".
    """
    word = arch.bits // 8
    wsize = max(1, -(-size // word))
    if wsize <= 8:
        return wsize * word
    w = wsize - 1
    b = w.bit_length() - 1
    step = 1 << (b - 2)
    return ((w >> (b - 2)) + 1) * step * word


def compute_page_kind(block_size: int, arch: Arch = ARCH64) -> PageKind:
    if block_size <= arch.small_max_obj_size:
        return PageKind.SMALL
    if block_size <= arch.medium_max_obj_size:
        return PageKind.MEDIUM
    if block_size <= arch.large_max_obj_size:
        return PageKind.LARGE
    return PageKind.HUGE


def large_size_classes(arch: Arch = ARCH64) -> list[int]:
    """Every block size that lands in a large page on `arch`."""
    out: list[int] = []
    size = arch.medium_max_obj_size + 1
    while size <= arch.large_max_obj_size:
        bs = compute_block_size(size, arch)
        if compute_page_kind(bs, arch) is PageKind.LARGE and bs not in out:
            out.append(bs)
        # past the class and past the request: a broken size class smaller than its request
        # (a mutant) must not send the walk back to a size it has seen (it looped for ever)
        size = max(bs, size) + 1
    return out


def align_down(x: int, a: int) -> int:
    return x - (x % a)


@dataclass(frozen=True)
class PageGeometry:
    """Where a page's blocks lie: fixed when the page is formed.

    `slice_start` is the page's address (aligned to its size, as arena pages are);
    `page_start` = slice_start + first_block_offset is where block 0 begins.
    """

    kind: PageKind
    block_size: int
    os_page_size: int = 4 * KiB
    arch: Arch = ARCH64
    first_block_offset: int = 0
    slice_start: int = 0
    page_size: int = 0  # 0: the kind's size (a huge page: one block)
    pinned: bool = False
    custom_commit: bool = False

    @cached_property
    def area_size(self) -> int:
        if self.page_size:
            return self.page_size
        if self.kind is PageKind.HUGE:
            return self.first_block_offset + self.block_size
        return self.arch.page_size(self.kind)

    @cached_property
    def page_start(self) -> int:
        return self.slice_start + self.first_block_offset

    @cached_property
    def reserved(self) -> int:
        return (self.area_size - self.first_block_offset) // self.block_size

    @cached_property
    def area_end(self) -> int:
        """End of the block area: `page_start + reserved * block_size`."""
        return self.page_start + self.reserved * self.block_size

    def block_addr(self, i: int) -> int:
        return self.page_start + i * self.block_size


def compute_purge_unit(geom: PageGeometry) -> int:
    """mi_page_purge_unit: the OS page where the block area then needs at most
    MI_PAGE_PURGE_BITS bits, else the smallest power-of-two multiple of it that does.

    Seed 000, change (1). The real code also stops doubling at the arena slice (digest
    section 2); no page kind reaches that cap, and a page that would is left ineligible by
    mi_page_can_purge_holes (bits > 256), so the seed and the code agree.
    """
    unit = geom.os_page_size
    while (geom.area_end - align_down(geom.page_start, unit) > MI_PAGE_PURGE_BITS * unit
           and unit < geom.arch.arena_slice_size):
        unit *= 2
    return unit


def compute_unit_base(geom: PageGeometry, unit: int) -> int:
    """Seed 000: "Bit k of page->purged names unit k, counted from align_down(page_start, unit)"."""
    return align_down(geom.page_start, unit)


def compute_purge_bits(geom: PageGeometry, unit: int) -> int:
    """How many units the block area spans: ceil((area_end - base) / unit)."""
    base = compute_unit_base(geom, unit)
    return -(-(geom.area_end - base) // unit)


def mi_page_can_purge_holes(geom: PageGeometry) -> bool:
    """Digest section 2: reserved > 1, not pinned, no custom commit, bits <= 256.

    Seed 000: "Huge pages are singletons and stay out" (reserved == 1).
    """
    if geom.reserved <= 1 or geom.pinned or geom.custom_commit:
        return False
    unit = compute_purge_unit(geom)
    return compute_purge_bits(geom, unit) <= MI_PAGE_PURGE_BITS


@dataclass(frozen=True)
class UnitMap:
    """Block <-> unit arithmetic for one page geometry (cached on the page)."""

    page_start: int
    block_size: int
    unit: int
    base: int
    bits: int

    @classmethod
    def of(cls, geom: PageGeometry, unit: int | None = None) -> "UnitMap":
        u = compute_purge_unit(geom) if unit is None else unit
        return cls(geom.page_start, geom.block_size, u, compute_unit_base(geom, u),
                   compute_purge_bits(geom, u))

    def unit_range(self, k: int) -> tuple[int, int]:
        lo = self.base + k * self.unit
        return lo, lo + self.unit

    def units_of_block(self, i: int) -> range:
        """The units that block i overlaps."""
        lo = self.page_start + i * self.block_size
        hi = lo + self.block_size
        return range((lo - self.base) // self.unit, (hi - 1 - self.base) // self.unit + 1)

    def blocks_of_unit(self, k: int, capacity: int) -> range:
        """The formed blocks (index < capacity) that overlap unit k."""
        return self.blocks_of_units(k, k + 1, capacity)

    def blocks_of_units(self, k0: int, k1: int, capacity: int) -> range:
        """The formed blocks that overlap one of the consecutive units k0..k1-1: those that
        overlap their span [start of k0, end of k1-1), which has no gap."""
        lo, hi = self.base + k0 * self.unit, self.base + k1 * self.unit
        first = max(0, (lo - self.page_start) // self.block_size)
        last = min(capacity - 1, (hi - 1 - self.page_start) // self.block_size)
        if hi <= self.page_start:
            return range(0)
        return range(first, last + 1)

    def is_unit_inside_blocks(self, k: int, capacity: int) -> bool:
        """Seed 000: a unit "lies wholly inside [page_start, page_start + capacity*block_size)"."""
        lo, hi = self.unit_range(k)
        return lo >= self.page_start and hi <= self.page_start + capacity * self.block_size
