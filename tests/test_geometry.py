"""The purge unit and the block <-> unit arithmetic against the seed's facts.

Seed 000, change (1): the unit is the OS page unless the block area then needs more than 256
bits; the arithmetic must hold "for 8, 16 and 64 KiB units under block sizes that are and are
not multiples of them, with and without an offset of the first block". The expected values
here come from the seed's own numbers or from a brute-force walk over addresses, never from
the functions under test.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from model.geometry import (
    ARCH32,
    ARCH64,
    KiB,
    MiB,
    PageGeometry,
    PageKind,
    UnitMap,
    compute_block_size,
    compute_page_kind,
    compute_purge_bits,
    compute_purge_unit,
    compute_unit_base,
    large_size_classes,
    mi_page_can_purge_holes,
)

# Seed 000: "the size classes of a large page on 64-bit are 96, 112, 128, 160, 192, 224, 256,
# 320, 384, 448 and 512 KiB, all multiples of 16 KiB".
SEED_LARGE_CLASSES_KIB = [96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512]
ARENA_ADDR = 1 << 32  # a 4 MiB aligned page address, as the model's arena hands out


# -- the unit of each page kind -------------------------------------------------------------

def test_large_size_classes_are_the_seeds():
    assert large_size_classes() == [k * KiB for k in SEED_LARGE_CLASSES_KIB]
    for bs in large_size_classes():
        assert bs % (16 * KiB) == 0, f"{bs // KiB} KiB is not a multiple of 16 KiB"


def test_size_class_boundaries_around_large():
    """The first request above the medium maximum lands in 96 KiB; 512 KiB is the last large
    block; one byte more is huge."""
    assert compute_page_kind(ARCH64.medium_max_obj_size) is PageKind.MEDIUM
    first = compute_block_size(ARCH64.medium_max_obj_size + 1)
    assert first == 96 * KiB and compute_page_kind(first) is PageKind.LARGE
    assert compute_page_kind(compute_block_size(512 * KiB)) is PageKind.LARGE
    assert compute_page_kind(compute_block_size(512 * KiB + 1)) is PageKind.HUGE


@pytest.mark.parametrize("kib", SEED_LARGE_CLASSES_KIB)
def test_large_page_on_4k_os_page_gets_16k_unit(kib):
    g = PageGeometry(PageKind.LARGE, kib * KiB, os_page_size=4 * KiB, slice_start=ARENA_ADDR)
    assert g.area_size == 4 * MiB
    assert compute_purge_unit(g) == 16 * KiB
    # 4 MiB of 4 KiB OS pages would need 1024 bits; 16 KiB units need at most 256.
    assert compute_purge_bits(g, 16 * KiB) <= 256 < compute_purge_bits(g, 8 * KiB)
    assert mi_page_can_purge_holes(g)


@pytest.mark.parametrize("os_page", [4 * KiB, 16 * KiB, 64 * KiB])
@pytest.mark.parametrize("kind,block", [(PageKind.SMALL, 1 * KiB), (PageKind.SMALL, 8 * KiB),
                                        (PageKind.MEDIUM, 16 * KiB),
                                        (PageKind.MEDIUM, 80 * KiB)])
def test_small_and_medium_pages_use_the_os_page(kind, block, os_page):
    """Seed 000: "Nothing changes for small and medium pages on any OS page size"."""
    for offset in (0, 192, 4 * KiB):
        g = PageGeometry(kind, block, os_page_size=os_page, first_block_offset=offset,
                         slice_start=ARENA_ADDR)
        assert compute_purge_unit(g) == os_page
        assert mi_page_can_purge_holes(g)


@pytest.mark.parametrize("os_page", [16 * KiB, 64 * KiB])
@pytest.mark.parametrize("kib", SEED_LARGE_CLASSES_KIB)
def test_large_pages_on_16k_and_64k_os_pages_use_the_os_page(kib, os_page):
    """Seed 000: "for large pages where the OS page is 16 KiB or more ... the unit is the OS
    page". 4 MiB / 16 KiB = 256 bits, 4 MiB / 64 KiB = 64 bits."""
    g = PageGeometry(PageKind.LARGE, kib * KiB, os_page_size=os_page, slice_start=ARENA_ADDR)
    assert compute_purge_unit(g) == os_page
    assert compute_purge_bits(g, os_page) <= 4 * MiB // os_page
    assert mi_page_can_purge_holes(g)


def test_32bit_large_page_is_1mib_with_os_page_unit():
    """Seed 000: "on 32-bit (a large page is 1 MiB there): the unit is the OS page"."""
    assert ARCH32.large_page_size == 1 * MiB
    classes = large_size_classes(ARCH32)
    assert classes and all(compute_page_kind(bs, ARCH32) is PageKind.LARGE for bs in classes)
    for bs in classes:
        g = PageGeometry(PageKind.LARGE, bs, os_page_size=4 * KiB, arch=ARCH32,
                         slice_start=ARENA_ADDR)
        assert g.area_size == 1 * MiB
        assert compute_purge_unit(g) == 4 * KiB
        assert mi_page_can_purge_holes(g)


def test_64k_os_page_units():
    """On 64 KiB OS pages every kind has the OS page as its unit, 1 bit for a small page."""
    for kind, bits in ((PageKind.SMALL, 1), (PageKind.MEDIUM, 8), (PageKind.LARGE, 64)):
        block = {PageKind.SMALL: 4 * KiB, PageKind.MEDIUM: 32 * KiB,
                 PageKind.LARGE: 128 * KiB}[kind]
        g = PageGeometry(kind, block, os_page_size=64 * KiB, slice_start=ARENA_ADDR)
        assert compute_purge_unit(g) == 64 * KiB
        assert compute_purge_bits(g, 64 * KiB) == bits


@pytest.mark.parametrize("size", [512 * KiB + 1, 3_000_000, 64 * MiB])
def test_huge_pages_cannot_purge(size):
    """Seed 000: "Huge pages are singletons and stay out" (reserved == 1)."""
    bs = compute_block_size(size)
    assert compute_page_kind(bs) is PageKind.HUGE
    g = PageGeometry(PageKind.HUGE, bs, slice_start=ARENA_ADDR)
    assert g.reserved == 1
    assert not mi_page_can_purge_holes(g)


def test_pinned_and_custom_commit_pages_cannot_purge():
    base = dict(kind=PageKind.LARGE, block_size=128 * KiB, slice_start=ARENA_ADDR)
    assert mi_page_can_purge_holes(PageGeometry(**base))
    assert not mi_page_can_purge_holes(PageGeometry(**base, pinned=True))
    assert not mi_page_can_purge_holes(PageGeometry(**base, custom_commit=True))


def test_unit_base_is_aligned_down():
    """Seed 000: "Bit k of page->purged names unit k, counted from align_down(page_start,
    unit)": with a 192 B offset, unit 0 begins at the slice and holds the meta data."""
    g = PageGeometry(PageKind.SMALL, 4 * KiB, first_block_offset=192, slice_start=ARENA_ADDR)
    unit = compute_purge_unit(g)
    assert compute_unit_base(g, unit) == ARENA_ADDR
    m = UnitMap.of(g)
    assert m.unit_range(0) == (ARENA_ADDR, ARENA_ADDR + 4 * KiB)
    assert not m.is_unit_inside_blocks(0, g.reserved)  # the meta data shares unit 0


# -- the block <-> unit arithmetic against a brute-force walk over addresses -----------------

def brute_force(page_start: int, block_size: int, unit: int, reserved: int, capacity: int):
    """Walk the addresses from the unit below page_start to the end of the last unit, in
    granules small enough that each lies in one block and one unit, and note for every
    granule which block and which unit it is in, by counting boundaries as they pass.

    Returns (units of each block, formed blocks of each unit, units wholly inside the formed
    blocks, number of units)."""
    base = (page_start // unit) * unit
    end = page_start + reserved * block_size
    g = math.gcd(block_size, unit, page_start - base)
    block_units: dict[int, set[int]] = {i: set() for i in range(reserved)}
    unit_blocks: dict[int, set[int]] = {}
    unit_all_formed: dict[int, bool] = {}
    k, unit_end = 0, base + unit
    i, block_end = -1, page_start  # block -1: the bytes in front of block 0
    a = base
    while a < end or a % unit != base % unit:  # to the end of the unit holding `end`
        if a == unit_end:
            k, unit_end = k + 1, unit_end + unit
        if a == block_end:
            i, block_end = i + 1, block_end + block_size
        formed = 0 <= i < capacity
        unit_blocks.setdefault(k, set())
        unit_all_formed[k] = unit_all_formed.get(k, True) and formed
        if 0 <= i < reserved:
            block_units[i].add(k)
            if formed:
                unit_blocks[k].add(i)
        a += g
    inside = {k for k, ok in unit_all_formed.items() if ok}
    return block_units, unit_blocks, inside, len(unit_blocks)


def check_against_brute_force(page_start, block_size, unit, reserved, capacity):
    geom = PageGeometry(PageKind.LARGE, block_size, first_block_offset=page_start % (4 * MiB),
                        slice_start=page_start - page_start % (4 * MiB),
                        page_size=page_start % (4 * MiB) + reserved * block_size)
    assert geom.page_start == page_start and geom.reserved == reserved
    m = UnitMap.of(geom, unit)
    block_units, unit_blocks, inside, n_units = brute_force(page_start, block_size, unit,
                                                            reserved, capacity)
    assert m.bits == n_units
    for i in range(reserved):
        assert set(m.units_of_block(i)) == block_units[i], f"units of block {i}"
    for k in range(m.bits):
        assert set(m.blocks_of_unit(k, capacity)) == unit_blocks[k], f"blocks of unit {k}"
        assert m.is_unit_inside_blocks(k, capacity) == (k in inside), f"unit {k} inside"


UNITS = [8 * KiB, 16 * KiB, 64 * KiB]
OFFSETS = [0, 4 * KiB, 192]


@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("multiple", [True, False])
def test_unit_arithmetic_table(unit, offset, multiple):
    """The seed's test_unit_arithmetic grid: each unit, each offset, block sizes that are
    and are not multiples of the unit."""
    block_size = 3 * unit if multiple else 3 * unit // 2 + 64
    reserved = 12
    for capacity in (reserved, reserved // 2 + 1):
        check_against_brute_force(ARENA_ADDR + offset, block_size, unit, reserved, capacity)


@st.composite
def geometries(draw):
    unit = draw(st.sampled_from(UNITS))
    offset = draw(st.sampled_from(OFFSETS))
    slice_start = ARENA_ADDR + draw(st.integers(0, 15)) * 4 * KiB  # not always unit-aligned
    if draw(st.booleans()):
        block_size = unit * draw(st.integers(1, 8))
    else:
        block_size = 16 * draw(st.integers(1, 8 * unit // 16))
    g = math.gcd(block_size, unit, (slice_start + offset) % unit)
    # Enough blocks to cross many units, few enough that the walk stays short.
    most = max(2, min(48, (1 << 16) * g // block_size))
    reserved = draw(st.integers(2, most))
    capacity = draw(st.integers(1, reserved))
    return slice_start + offset, block_size, unit, reserved, capacity


@settings(max_examples=80, derandomize=True, deadline=None, database=None)
@given(geometries())
@example((ARENA_ADDR, 96 * KiB, 16 * KiB, 42, 42))  # the first large class, 4 MiB page
@example((ARENA_ADDR + 192, 4 * KiB, 8 * KiB, 20, 13))  # straddling blocks, meta in unit 0
@example((ARENA_ADDR + 4 * KiB, 100 * KiB, 64 * KiB, 10, 7))
def test_unit_arithmetic_matches_brute_force(case):
    check_against_brute_force(*case)


def test_brute_force_sees_a_straddling_block():
    """The brute force itself: with a 192 B offset and 4 KiB blocks on 8 KiB units, block 1
    lies in units 0 and 1 and unit 0 is not inside the blocks (meta data)."""
    block_units, unit_blocks, inside, _ = brute_force(ARENA_ADDR + 192, 4 * KiB, 8 * KiB, 4, 4)
    assert block_units[1] == {0, 1}
    assert unit_blocks[0] == {0, 1}
    assert 0 not in inside and 1 in inside


def test_purged_blocks_of_runs_of_units_are_the_union_over_each_unit():
    """Page.purged_blocks takes each run of set bits at once (UnitMap.blocks_of_units): the
    same blocks as the union of blocks_of_unit over every set bit, on every page kind."""
    import random

    from model.heap import mi_heap_malloc
    from model.world import Options, World
    from stateful_tests.world_machine import request_sizes

    rng = random.Random(1)
    for os_page in (4 * KiB, 64 * KiB):
        world = World(Options(os_page_size=os_page))
        for size in request_sizes(world.options.arch)[:-1]:  # every kind that can purge
            page = world.pages[mi_heap_malloc(world, world.heap(0), size).page]
            for _ in range(100):
                page.purged = rng.getrandbits(page.units.bits) & rng.getrandbits(page.units.bits)
                want = set()
                for k in page.purged_units():
                    want.update(page.units.blocks_of_unit(k, page.capacity))
                assert page.purged_blocks() == want, (size, bin(page.purged))
            page.purged = 0


def test_the_large_classes_are_listed_under_a_size_class_smaller_than_its_request():
    """Regression (issue 21): under the mutant size-class-word-less a class is a word smaller
    than the request that gave it, and the walk over the large classes went back to a size it
    had seen, for ever; the differential fuzzer, which draws its sizes from it, hung (the
    conformance engine "ran for minutes" in the kill matrix). It ends now, with classes that
    are each a word short."""
    from purgecheck.mutants import MUTANTS, applied
    from stateful_tests.world_machine import request_sizes

    with applied(MUTANTS["size-class-word-less"]):
        short = large_size_classes()
        assert request_sizes(ARCH64)
    assert short == [bs - 8 for bs in large_size_classes()]
