"""The state of one mimalloc page, as the purge rules see it (digest section 1).

Blocks are named by their index in the page. The free lists are Python lists whose element 0
is the head, so list order is the order in which blocks would be handed out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.geometry import PageGeometry, UnitMap
from model.memory import Memory

# swept_state encodings (digest section 1 and 5). A (capacity, used) value has top bits 00,
# MI_PAGE_SWEPT_NONE has 11 and an allocation stamp 01.
MI_PAGE_SWEPT_NONE = (1 << 64) - 1
MI_PAGE_SWEPT_STAMP_TAG = 1 << 62
MI_PAGE_SWEPT_TAG_MASK = 3 << 62
EPOCH_MASK = (1 << 32) - 1


def encode_walked(capacity: int, used: int) -> int:
    """swept_state after a complete walk: `(capacity << 32) | used`."""
    return (capacity << 32) | used


def encode_stamp(epoch: int) -> int:
    """Seed 000, change (2): the epoch stored "under the tag that no (capacity,used) state
    and not MI_PAGE_SWEPT_NONE can have"; 32 bits of the epoch are kept."""
    return MI_PAGE_SWEPT_STAMP_TAG | (epoch & EPOCH_MASK)


def is_stamp(state: int) -> bool:
    return (state & MI_PAGE_SWEPT_TAG_MASK) == MI_PAGE_SWEPT_STAMP_TAG


def stamp_epoch(state: int) -> int:
    return state & EPOCH_MASK


@dataclass
class Page:
    """One page: its geometry, block lists, purge bitmap and accounting."""

    id: int
    geom: PageGeometry
    mem: Memory
    units: UnitMap = field(init=False)
    capacity: int = 0
    used: int = 0
    free: list[int] = field(default_factory=list)
    local_free: list[int] = field(default_factory=list)
    xthread_free: list[int] = field(default_factory=list)
    # The blocks on the three lists, as a set beside them, so that a free's double-free check
    # is one lookup (perl's pages list thousands of blocks). Every change to a list changes it
    # with it; `relist` rebuilds it after a list is assigned whole (issue 29, 4).
    on_lists: set[int] = field(default_factory=set, repr=False)
    purged: int = 0  # bit k set: unit k is discarded
    unformed_purged_lo: int = 0  # byte range of the discarded unformed tail
    unformed_purged_hi: int = 0
    swept_state: int = MI_PAGE_SWEPT_NONE
    free_is_zero: bool = True  # fresh memory from the OS is zero
    discarded_bytes: int = 0  # accounting of the bitmap's discards (units * unit size)
    discarded_blocks: int = 0  # blocks off every list because they overlap a discarded unit
    sweeping: bool = False  # a sweep has the page: the allocation path may not unpurge
    extend_v3: bool = False  # mi_page_extend_free as the v3 fork (model.alloc.compute_extend_count)
    owner: int = 0  # owning thread id
    heap: int = 0
    abandoned: bool = False
    retired: bool = False  # gone back to the arena
    retire_expire: int = 0  # all free, kept in its queue for so many collects (model.retire)
    double_frees: int = 0  # frees the page reported as double (never absorbed)
    log: list = field(default_factory=list, repr=False)  # events, shared with the world
    # Ghost state: what the program did, kept only so that invariants can judge the rules.
    handed_out: set[int] = field(default_factory=set)  # blocks the program holds
    written: set[int] = field(default_factory=set)  # held blocks the program wrote in full
    ever_purged: bool = False  # a walk or unpurge changed this page's blocks since formed
    last_alloc_ms: int | None = None  # clock when the program last took a block here
    last_walk: object | None = None  # model.sweep.WalkRecord of the last walk by a sweep
    holes_walk: object | None = None  # model.holes.HolesWalkGhost of the last holes walk
    # Bumped by every writer of the fields above, so that "has this page changed since the
    # invariants last held on it" is one read (model.invariants.HeldPages; issue 30, 6). A
    # writer that forgets it hides its change from the incremental check:
    # tests/test_incremental_check.py compares it with every field's value after every op.
    version: int = field(default=0, compare=False, repr=False)

    def emit(self, kind: str, **fields) -> None:
        """Record an observable event (the raw material of a trace)."""
        self.log.append({"ev": kind, "page": self.id, **fields})

    def __post_init__(self) -> None:
        self.units = UnitMap.of(self.geom)
        self.relist()

    def hand_out(self, i: int) -> None:
        """The program takes block `i` (`handed_out`, and the live OS pages where kept)."""
        if i in self.handed_out:
            return
        self.version += 1
        self.handed_out.add(i)
        live = self.mem.live
        if live is not None:
            g = self.geom
            live.block_live(g.page_start + i * g.block_size, g.block_size)  # block_addr, inline

    def take_back(self, i: int) -> None:
        """Block `i` is no longer the program's: freed, or gone with its page."""
        if i in self.handed_out:
            self.version += 1
            self.handed_out.remove(i)
            live = self.mem.live
            if live is not None:
                g = self.geom
                live.block_dead(g.page_start + i * g.block_size, g.block_size)

    def relist(self) -> None:
        """Rebuild `on_lists` from the three lists (after one of them was assigned whole)."""
        self.version += 1
        self.on_lists = {*self.free, *self.local_free, *self.xthread_free}

    # -- derived views -------------------------------------------------------------------

    @property
    def reserved(self) -> int:
        return self.geom.reserved

    @property
    def block_size(self) -> int:
        return self.geom.block_size

    @property
    def unit(self) -> int:
        return self.units.unit

    def purged_units(self) -> list[int]:
        """The set bits of `purged`, lowest first."""
        out, x = [], self.purged
        while x:
            low = x & -x
            out.append(low.bit_length() - 1)
            x ^= low
        return out

    def is_unit_purged(self, k: int) -> bool:
        return bool(self.purged >> k & 1)

    def is_block_purged(self, i: int) -> bool:
        """Seed 000: "a block is purged exactly when it overlaps a discarded unit"."""
        if not self.purged:
            return False
        units = self.units.units_of_block(i)  # consecutive: test them with one mask
        return bool(self.purged >> units.start & ((1 << len(units)) - 1))

    def purged_blocks(self) -> set[int]:
        out: set[int] = set()
        x = self.purged
        # One range per run of set bits (a run of units overlaps a run of blocks). Not
        # holes.compute_runs: the invariants judge the walk through this, and a mutant of the
        # walk's runs must not change what they see.
        while x:
            k0 = (x & -x).bit_length() - 1
            k1 = ((x >> k0) + 1 & ~(x >> k0)).bit_length() - 1 + k0  # first clear bit past k0
            out.update(self.units.blocks_of_units(k0, k1, self.capacity))
            x &= ~((1 << k1) - 1)
        return out

    def listed_blocks(self) -> list[int]:
        return self.free + self.local_free + self.xthread_free

    def live_blocks(self) -> set[int]:
        """Handed out and not freed."""
        return set(range(self.capacity)) - set(self.listed_blocks()) - self.purged_blocks()

    def is_all_free(self) -> bool:
        return self.used - len(self.xthread_free) == 0

    def has_free_blocks(self) -> bool:
        return bool(self.free or self.local_free or self.xthread_free or self.purged)

    def has_unformed_tail(self) -> bool:
        return self.capacity < self.reserved

    def run_of_units(self, k0: int, k1: int) -> tuple[int, int]:
        """Byte range [lo, hi) of units k0..k1-1."""
        return self.units.base + k0 * self.unit, self.units.base + k1 * self.unit

    def snapshot(self) -> dict:
        """A plain description of the state, for reports and traces."""
        return {
            "page": self.id, "capacity": self.capacity, "reserved": self.reserved,
            "used": self.used, "free": list(self.free), "local_free": list(self.local_free),
            "xthread_free": list(self.xthread_free), "purged_units": self.purged_units(),
            "unit": self.unit, "swept_state": self.swept_state,
            "free_is_zero": self.free_is_zero, "discarded_bytes": self.discarded_bytes,
            "discarded_blocks": self.discarded_blocks,
        }
