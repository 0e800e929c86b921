"""mi_page_extend_free as the v3 fork Bun runs (Options.extend_v3, on in the comparison).

The fork's page.c (oven-sh/mimalloc, the version with hole purging) forms at least
MI_MIN_EXTEND = 1 block (MI_SECURE < 2) and at most MI_MAX_EXTEND_SIZE = 8 KiB worth; the
checked model and the C reference keep the older 4 blocks and 4 KiB. It brings back only the
part of a discarded unformed tail that it formats (`_mi_page_unpurge_unformed_upto`); the
checked model brings back the whole tail. On the real Bun the
buffer loop's commonest discard is 15 blocks of 256 KiB, the unformed tail of a large page
with one block formed; the older rule's tail is 12 blocks, which the real never makes
(docs/measure.md, "The unformed tail of a fresh large page").
"""

from __future__ import annotations

from model.geometry import KiB
from model.holes import compute_unformed_tail, mi_page_purge_unformed_tail
from model.world import Options
from test_page_scenarios import run_checked


def tail_blocks(page) -> int:
    lo, hi = compute_unformed_tail(page)
    return (hi - lo) // page.block_size


def test_v3_forms_a_large_pages_blocks_one_at_a_time():
    """A 256 KiB buffer: 1 block formed, a tail of 15 discarded in one call (the older rule:
    4 and 12). Fails on a compute_extend_count that ignores extend_v3 (4 blocks formed)."""
    for v3, formed in ((True, 1), (False, 4)):
        run = run_checked("1 malloc a 262144", Options(extend_v3=v3))
        page = run.world.pages[1]
        assert (page.capacity, page.reserved) == (formed, 16)
        calls = page.mem.discard_calls
        assert mi_page_purge_unformed_tail(page)
        assert page.mem.discard_calls == calls + 1
        assert tail_blocks(page) == 16 - formed


def test_v3_forms_8_kib_of_small_blocks():
    """Blocks under 8 KiB: 8 KiB worth (64 B: 128 blocks; 4 KiB: 2, not the older 4 for
    both). Fails on a rule that keeps 4 KiB worth or at least 4 blocks under extend_v3."""
    for size, v3, formed in ((64, True, 128), (64, False, 64), (4096, True, 2),
                             (4096, False, 4), (16 * KiB, True, 1)):
        run = run_checked(f"1 malloc a {size}", Options(extend_v3=v3))
        assert run.world.pages[1].capacity == formed, (size, v3)


def test_v3_extend_brings_back_only_the_blocks_it_forms():
    """After the tail of a fresh 256 KiB page is discarded, the next block formed brings back
    its own 256 KiB and the other 14 blocks stay discarded: the next sweep makes no call for
    the tail (the checked model brings the whole tail back and discards the 14 again). Fails on
    a mi_page_reuse_unformed_tail that ignores `upto`."""
    from model.heap import mi_heap_malloc
    for v3, second_call in ((True, False), (False, True)):
        run = run_checked("1 malloc a 262144", Options(extend_v3=v3))
        page = run.world.pages[1]
        page.mem.touch(page.geom.block_addr(page.capacity), 256 * KiB)
        assert mi_page_purge_unformed_tail(page)
        formed = page.capacity
        for _ in range(formed):
            mi_heap_malloc(run.world, run.world.heap(1), 256 * KiB)
        assert page.capacity > formed
        if v3:
            assert (page.unformed_purged_lo, page.unformed_purged_hi) == \
                (page.geom.block_addr(page.capacity), page.geom.area_end)
            assert page.mem.holes.unformed_bytes == (16 - page.capacity) * 256 * KiB
        calls = page.mem.discard_calls
        assert mi_page_purge_unformed_tail(page) == second_call
        assert page.mem.discard_calls == calls + second_call
