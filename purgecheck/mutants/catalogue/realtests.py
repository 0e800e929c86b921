"""Mutants that break what the fork's real tests assert (purgecheck/realtests/checks.py): the option
that turns purging off, the full sweep, the idle path's collect, the unformed tail and the reuse
call. Each has a C switch, so conformance against the clean model kills it too;
tests/test_realtests.py shows the case check that catches it on the model and on C.
"""

from __future__ import annotations

from model import alloc, geometry, holes
from model.geometry import UnitMap
from purgecheck.mutants.patching import TRACE_INVARIANT, Patch, mutant

_ORIGINAL = {"mi_page_free_collect": alloc.mi_page_free_collect,
             "compute_block_size": geometry.compute_block_size,
             "mi_page_can_purge_holes": geometry.mi_page_can_purge_holes}
# test-purge-holes.c at d445051 (the per-block bitmap): "256-byte blocks give 256 blocks per
# 64KB page: too many for the bitmap", while 64 blocks of 1 KiB fit; a cap between the two
OLD_PURGE_MAX_BLOCKS = 128


def _full_sweep_never(seq, full_every):
    """Broken: no sweep is a full one, so a hole the skip hides stays."""
    return False


def _option_off_ignored(opts):
    """Broken: purge_holes off is not looked at; only purge_delay < 0 stops a sweep."""
    return opts.purge_delay < 0


def _collect_unpurges(page):
    """Broken: the collect of the idle path takes a purged run back when the free list is
    empty (only the allocation path may)."""
    _ORIGINAL["mi_page_free_collect"](page)
    if not page.free and page.purged and not page.sweeping:
        holes.mi_page_unpurge_run(page)


def _tail_from_last_block(page):
    """Broken: the unformed tail is counted from the last formed block, so its discard
    reaches into a block that is formed."""
    lo = page.geom.block_addr(max(0, page.capacity - 1))
    hi = page.geom.area_end
    pages = page.mem.os_pages_inside(lo, hi - lo)
    if not pages:
        return 0, 0
    return pages.start * page.mem.os_page_size, pages.stop * page.mem.os_page_size


def _unpurge_without_reuse(page):
    """Broken: the allocation path brings a purged run back without the reuse call
    (_mi_os_reuse: a no-op on Linux, MEM_COMMIT / MADV_FREE_REUSE elsewhere)."""
    runs = holes.compute_runs(page.purged_units())
    return holes.mi_page_unpurge_range(page, *runs[0], reuse=False) if runs else 0


class _UnitMapLastBlockShort(UnitMap):
    """Broken: the blocks over a unit miss the last one whenever there are two or more (the
    real test's comment: "getting last one block short is a silent over-discard of a live
    block"): the walk then takes a unit whose last block is live."""

    def blocks_of_unit(self, k: int, capacity: int) -> range:
        blocks = super().blocks_of_unit(k, capacity)
        return range(blocks.start, blocks.stop - 1) if len(blocks) > 1 else blocks


def _purge_max_blocks_cap(geom):
    """Broken (the rule of the replaced per-block bitmap, MI_PAGE_PURGE_MAX_BLOCKS): a page of
    more blocks than the cap cannot purge holes. The unit bitmap of seed 000 has no such cap
    (internal.h, mi_page_can_purge_holes: reserved > 1, not pinned, no custom commit, at most
    256 bits; digest 2), and the later test-purge-holes.c asserts that pages of 16, 64 and
    256-byte blocks purge."""
    return geom.reserved <= OLD_PURGE_MAX_BLOCKS and _ORIGINAL["mi_page_can_purge_holes"](geom)


def _size_class_word_less(size, arch=geometry.ARCH64):
    """Broken: every size class above 8 words is one word short, so a request of a class's
    size gets less than it asked for, on an 8-byte boundary (breaks usable-size and aligned)."""
    bs = _ORIGINAL["compute_block_size"](size, arch)
    return bs - arch.bits // 8 if bs > 8 * (arch.bits // 8) else bs


def _aligned_at_block_start(page, block, a):
    """Broken: malloc_aligned hands out the start of the over-allocated block, not the first
    aligned address in it."""
    return 0


mutant("full-sweep-never", "no sweep is a full one (purge_holes_full_every is ignored)",
       (TRACE_INVARIANT,), Patch("model.drivers", "is_full_sweep", _full_sweep_never),
       c_switch="full_sweep_never")
mutant("option-off-ignored", "a sweep purges with purge_holes off",
       (TRACE_INVARIANT,), Patch("model.sweep", "is_purging_off", _option_off_ignored),
       c_switch="option_off_ignored")
mutant("collect-unpurges", "the idle path's collect unpurges a run when the free list is empty",
       (TRACE_INVARIANT,), Patch("model.alloc", "mi_page_free_collect", _collect_unpurges),
       c_switch="collect_unpurges")
mutant("tail-from-last-block", "the unformed tail starts at the last formed block",
       (TRACE_INVARIANT,), Patch("model.holes", "compute_unformed_tail", _tail_from_last_block),
       c_switch="tail_from_last_block")
mutant("unpurge-without-reuse", "the allocation path unpurges a run without the reuse call",
       (TRACE_INVARIANT,), Patch("model.holes", "mi_page_unpurge_run", _unpurge_without_reuse),
       c_switch="unpurge_without_reuse")
mutant("unit-last-block-short", "the blocks over a unit miss the last one (blocks_of_unit)",
       (TRACE_INVARIANT,), Patch("model.geometry", "UnitMap", _UnitMapLastBlockShort),
       c_switch="unit_last_block_short")
mutant("purge-max-blocks-cap", "a page of more than 128 blocks cannot purge holes (the cap of "
       "the replaced per-block bitmap)", (TRACE_INVARIANT,),
       Patch("model.geometry", "mi_page_can_purge_holes", _purge_max_blocks_cap),
       c_switch="purge_max_blocks_cap")
mutant("aligned-at-block-start", "malloc_aligned hands out the block it over-allocated, not "
       "the aligned address in it", (TRACE_INVARIANT,),
       Patch("purgecheck.runner", "aligned_offset", _aligned_at_block_start),
       c_switch="aligned_at_block_start")
mutant("size-class-word-less", "size classes above 8 words are one word short",
       (TRACE_INVARIANT,), Patch("model.geometry", "compute_block_size", _size_class_word_less),
       c_switch="size_class_word_less")
