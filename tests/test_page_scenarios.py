"""The cases of the real tests (digest section 11) run on the page model.

Seed 000, change (1): "a unit is discarded only when it lies wholly inside the block area and
every block that overlaps it is free, a block is purged exactly when it overlaps a discarded
unit, a purged block is off every free list until _mi_page_unpurge_run brings its run back".
Each test runs an op script (a named scenario or one written here), checks every page
invariant after every op, and then asserts what the seed's test asserts about the outcome.
Residency is judged from `Memory.resident`, the model's mincore.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from model.geometry import KiB, MiB, PageKind
from model.heap import mi_heap_malloc
from model.holes import (
    compute_unformed_tail,
    mi_page_purge_unformed_tail,
    mi_page_unpurge_run,
)
from model.invariants import check_page, load_registry
from model.page import MI_PAGE_SWEPT_NONE
from model.world import Options
from purgecheck.formats.ops import parse_script
from purgecheck.runner import Run, run_ops
from purgecheck.scenarios import LARGE_CLASSES, SCENARIOS, keep_every_third
from test_geometry import brute_force


def run_checked(text: str, options: Options | None = None, on_step=None) -> Run:
    """Run an op script; every page invariant must hold on every page after every op.
    `on_step(op, world)` sees the state after each op (to capture it mid-script)."""
    load_registry()
    failures: list[str] = []

    def after(op, world):
        for page in world.pages.values():
            failures.extend(f"line {op.line} ({op.render()}): {inv}: {why}"
                            for inv, why in check_page(page))
        if on_step is not None:
            on_step(op, world)

    run = run_ops(parse_script(text), options, after_step=after)
    assert not failures, "\n".join(failures[:5])
    return run


def run_scenario(name: str, on_step=None) -> Run:
    sc = SCENARIOS[name]
    return run_checked(sc.build(), sc.options, on_step)


def os_pages_of_block(page, i: int) -> range:
    """The OS page numbers block i touches (computed here, not with Memory.os_pages)."""
    ps = page.geom.os_page_size
    lo = page.geom.page_start + i * page.geom.block_size
    return range(lo // ps, (lo + page.geom.block_size + ps - 1) // ps)


def is_fully_resident(page, i: int) -> bool:
    return all(p in page.mem.resident for p in os_pages_of_block(page, i))


def is_nowhere_resident(page, i: int) -> bool:
    return not any(p in page.mem.resident for p in os_pages_of_block(page, i))


def walked_state(capacity: int, used: int) -> int:
    """Digest 3, step 5: a complete walk leaves `(capacity << 32) | used`."""
    return (capacity << 32) | used


def events(run: Run, kind: str, page: int | None = None) -> list[dict]:
    return [e for e in run.world.log
            if e["ev"] == kind and (page is None or e.get("page") == page)]


def runs_of(indices) -> int:
    """How many maximal runs of consecutive indices there are."""
    s = set(indices)
    return sum(1 for i in s if i - 1 not in s)


# -- keep every third block of a large page, walk --------------------------------------------

def test_every_third_walk_purges_every_freed_block():
    run = run_scenario("every-third")
    for size in LARGE_CLASSES:
        prefix, count = f"b{size // KiB}_", 4 * MiB // size
        freed = [run.freed[f"{prefix}{n}"] for n in range(count) if n % 3]
        kept = [run.names[f"{prefix}{n}"] for n in range(0, count, 3)]
        page = run.world.pages[freed[0].page]
        assert page.geom.kind is PageKind.LARGE and page.unit == 16 * KiB
        assert {p.page for p in freed + kept} == {page.id}
        assert page.capacity == count
        for ptr in freed:
            assert page.is_block_purged(ptr.block)
            assert ptr.block not in page.listed_blocks()
            assert is_nowhere_resident(page, ptr.block), f"{size}: block {ptr.block} resident"
        for ptr in kept:
            assert not page.is_block_purged(ptr.block)
            assert is_fully_resident(page, ptr.block)
            assert ptr.block in page.handed_out
        assert page.free == [] and page.local_free == [] and page.xthread_free == []
        assert page.discarded_blocks == len(freed)
        # Every large class is a multiple of the unit: each freed block goes as a whole.
        assert page.discarded_bytes == len(freed) * size
        # One discard per maximal run of freed blocks.
        assert len(events(run, "discard", page.id)) == runs_of(p.block for p in freed)
        assert page.swept_state == walked_state(count, len(kept))


# -- reuse after purge ------------------------------------------------------------------------

def test_reuse_after_purge_lowest_run_first_and_zalloc_zeroes():
    size, count = 128 * KiB, 32
    lines = keep_every_third(1, size, count, "a") + ["1 walk"]
    lines += [f"1 {'zalloc' if n % 2 else 'malloc'} r{n} {size}" for n in range(21)]
    lines += [f"1 zalloc fresh {size}"]
    zalloc_resident = {}

    def after(op, world):
        # What a zalloc wrote, before anything else touches the block.
        if op.name == "zalloc":
            ev = [e for e in world.log if e["ev"] == "malloc"][-1]
            page = world.pages[ev["page"]]
            zalloc_resident[op.args[0]] = [p in page.mem.resident
                                           for p in os_pages_of_block(page, ev["block"])]

    run = run_checked("\n".join(lines), on_step=after)
    page = run.world.pages[run.names["a0"].page]
    freed_blocks = [n for n in range(count) if n % 3]
    # The purged blocks come back lowest run first, each run's lowest block at the head.
    assert [run.names[f"r{n}"] for n in range(21)] == \
        [(page.id, i) for i in freed_blocks]
    unpurges = events(run, "unpurge", page.id)
    assert [e["k0"] for e in unpurges] == sorted(e["k0"] for e in unpurges)
    assert len(unpurges) == runs_of(freed_blocks)
    # No block handed out twice across all names.
    assert len(set(run.names.values())) == len(run.names)
    # The page is whole again: nothing purged, nothing counted.
    assert page.purged == 0 and page.discarded_bytes == 0 and page.discarded_blocks == 0
    # zalloc of a reused purged block zeroes all of it (free_is_zero is false after a
    # purge), so every OS page of the block is written; a zalloc from a fresh page whose
    # blocks are known zero clears only the link word.
    for n in range(1, 21, 2):
        assert all(zalloc_resident[f"r{n}"]), f"r{n} was not zeroed in full"
    fresh = zalloc_resident["fresh"]
    assert run.names["fresh"].page != page.id
    assert fresh[0] and not any(fresh[1:])


def test_reuse_scenario_hands_out_no_block_twice():
    run = run_scenario("reuse-after-purge")
    assert len(set(run.names.values())) == len(run.names)
    live = {(p.page, p.block) for p in run.names.values()}
    for page in run.world.pages.values():
        for i in page.purged_blocks():
            assert (page.id, i) not in live
    # The second walk purged the blocks freed again.
    assert any(page.discarded_blocks for page in run.world.pages.values())


# -- frees from another thread ---------------------------------------------------------------

def test_xthread_frees_into_a_page_with_holes():
    states = []  # after each free by thread 2 and each walk: (op, bits, xthread_free, used)

    def on_step(op, world):
        if op.name == "walk" or (op.thread == 2 and op.name == "free"):
            page = world.pages[1]
            states.append((op.render(), page.purged, list(page.xthread_free), page.used))

    run = run_scenario("xthread-frees", on_step)
    page = run.world.pages[1]
    frees = [s for s in states if s[0].startswith("2 free")]
    walks = [s for s in states if s[0] == "1 walk"]
    first, second = frees[:16], frees[16:]
    # The other thread's frees sit on xthread_free, still counted in used, bitmap untouched.
    assert all(bits == 0 for _, bits, _, _ in first)
    assert len(first[-1][2]) == 16 and first[-1][3] == 25
    # The walk collects them and purges them.
    _, bits1, xfree1, used1 = walks[0]
    assert bits1 and xfree1 == [] and used1 == 9
    # Frees into the page that now has holes leave its bits alone until the next walk ...
    assert all(bits == bits1 for _, bits, _, _ in second)
    assert len(second[-1][2]) == 8
    # ... which purges the last blocks freed from there too.
    assert page.xthread_free == [] and page.used == 1
    live = run.names["x24"].block
    assert page.purged_blocks() == set(range(25)) - {live}
    assert page.discarded_blocks == 24
    assert is_fully_resident(page, live)


# -- realloc next to holes ---------------------------------------------------------------------

def test_realloc_in_place_and_moves_next_to_holes():
    lines = keep_every_third(1, 192 * KiB, 21, "m") + ["1 walk"]
    lines += ["1 realloc m0 m0s 100000",  # at least half of 192 KiB: in place
              "1 realloc m3 m3g 400000",  # grows: moves to the 448 KiB class
              "1 realloc m6 m6d 90000",  # below half: moves down to the 96 KiB class
              "1 walk"]
    run = run_checked("\n".join(lines))
    page = run.world.pages[1]
    assert run.names["m0s"] == (1, 0)
    assert [e["inplace"] for e in events(run, "realloc")] == [True, False, False]
    assert run.world.pages[run.names["m3g"].page].block_size == 448 * KiB
    assert run.world.pages[run.names["m6d"].page].block_size == 96 * KiB
    # The blocks the moves left behind (3 and 6, between holes) go at the next walk.
    for i in (3, 6):
        assert page.is_block_purged(i) and is_nowhere_resident(page, i)
    # The block shrunk in place next to a hole keeps every byte.
    assert page.is_block_purged(1) and not page.is_block_purged(0)
    assert is_fully_resident(page, 0)
    assert "m3" not in run.names and "m6" not in run.names


# -- heap destroy and delete ---------------------------------------------------------------

def total_discarded(world) -> int:
    return sum(p.discarded_bytes for p in world.pages.values())


def test_heap_destroy_returns_the_accounting_to_zero():
    before = {}

    def on_step(op, world):
        if op.name == "walk":
            before["bytes"] = total_discarded(world)

    run = run_scenario("heap-destroy", on_step)
    assert before["bytes"] > 0
    assert total_discarded(run.world) == 0
    for page in run.world.pages.values():
        assert page.retired and page.purged == 0 and page.discarded_blocks == 0
    assert run.world.heap(3).queues == {}
    assert not [n for n, p in run.names.items() if run.world.pages[p.page].heap == 3]
    assert events(run, "unpurge_all")


def test_heap_delete_moves_live_pages_and_retires_free_ones():
    lines = keep_every_third(3, 128 * KiB, 32, "a")  # page 1: live blocks and holes
    lines += [f"3 malloc b{n} {256 * KiB}" for n in range(16)]  # page 2
    lines += [f"4 free b{n}" for n in range(16)]  # all freed from another thread
    lines += ["3 walk"]
    snap = {}

    def on_step(op, world):
        if op.name == "walk":
            snap.update({p.id: (p.purged, p.discarded_bytes, p.discarded_blocks)
                         for p in world.pages.values()})

    run = run_checked("\n".join(lines + ["3 heap_delete"]), on_step=on_step)
    a, b = run.world.pages[1], run.world.pages[2]
    assert snap[2][0] and snap[1][0]  # both had holes before the delete
    # The page with live blocks moves to the backing heap, its purge state intact.
    assert not a.retired and a.heap == 0 and a.owner == 0
    assert 1 in run.world.heap(0).queues[128 * KiB]
    assert (a.purged, a.discarded_bytes, a.discarded_blocks) == snap[1]
    # The all-free page goes back to the arena through unpurge-all.
    assert b.retired and b.purged == 0 and b.discarded_bytes == 0 and b.discarded_blocks == 0
    assert run.world.heap(3).queues == {}
    assert total_discarded(run.world) == a.discarded_bytes

    # The backing heap's thread frees the rest: the page retires and nothing stays counted.
    more = [f"0 free a{n}" for n in range(0, 32, 3)]
    run = run_checked("\n".join(lines + ["3 heap_delete"] + more))
    assert run.world.pages[1].retired and total_discarded(run.world) == 0


def test_heap_delete_scenario_ends_with_nothing_discarded():
    run = run_scenario("heap-delete")
    assert events(run, "discard") and total_discarded(run.world) == 0
    assert all(p.retired for p in run.world.pages.values())


# -- double free of a purged block -----------------------------------------------------------

def test_double_free_of_a_purged_block_is_reported():
    snap = {}

    def on_step(op, world):
        if op.name == "walk":
            snap["page"] = world.pages[1].snapshot()

    run = run_scenario("double-free-purged", on_step)
    page = run.world.pages[1]
    assert page.double_frees == 2
    assert [(e["block"]) for e in events(run, "double_free", 1)] == [1, 2]
    # Reported, not absorbed: the page is exactly as the walk left it.
    assert page.snapshot() == snap["page"]


def test_double_free_of_a_listed_block_is_reported():
    run = run_checked("1 malloc a 131072\n1 malloc b 131072\n1 free a\n1 free a")
    page = run.world.pages[1]
    assert page.double_frees == 1 and page.local_free == [0]


def test_realloc_of_a_purged_block_is_reported():
    """A realloc of a freed block frees it again: reported, and nothing is allocated."""
    base = "1 malloc a 131072\n1 malloc k 131072\n1 free a\n1 walk\n"
    for size in (131072, 400000):  # would be in place / would move
        run = run_checked(base + f"1 realloc a b {size}\n")
        page = run.world.pages[1]
        assert page.double_frees == 1 and "b" not in run.names
        assert [e["block"] for e in events(run, "double_free")] == [0]
        assert not events(run, "realloc") and len(run.world.pages) == 1


# -- a failed discard -------------------------------------------------------------------------

def test_failed_discard_unpurges_its_run_and_the_next_walk_purges_it():
    walks = []

    def on_step(op, world):
        if op.name == "walk":
            p = world.pages[1]
            walks.append((p.purged_blocks(), list(p.free), p.swept_state,
                          [i for i in range(p.capacity) if is_nowhere_resident(p, i)]))

    run = run_scenario("failed-discard", on_step)
    page = run.world.pages[1]
    freed = {n for n in range(32) if n % 3}
    failed = {1, 2, 4, 5}  # the first two runs: "fail_discard 2"
    purged1, free1, state1, gone1 = walks[0]
    assert purged1 == freed - failed
    assert set(free1) == failed  # back on the free list, still resident
    assert set(gone1) == freed - failed
    assert state1 != walked_state(32, 11)
    assert [e["complete"] for e in events(run, "walk", 1)] == [False, True]
    purged2, free2, state2, gone2 = walks[1]
    assert purged2 == freed and free2 == [] and set(gone2) == freed
    assert state2 == walked_state(32, 11)
    assert page.discarded_blocks == len(freed)


# -- unpurge and the walk's rebuild ----------------------------------------------------------

def test_unpurge_run_pushes_lowest_index_first_and_clears_swept_state():
    lines = [f"1 malloc a{n} {128 * KiB}" for n in range(32)]
    lines += [f"1 free a{n}" for n in range(32) if n % 4] + ["1 walk"]
    run = run_checked("\n".join(lines))
    page = run.world.pages[1]
    assert page.free == [] and page.swept_state == walked_state(32, 8)
    bits, blocks, nbytes = page.purged, page.discarded_blocks, page.discarded_bytes
    resident = set(page.mem.resident)
    assert mi_page_unpurge_run(page) == 3
    assert page.free == [1, 2, 3]  # pushed 3, 2, 1: the lowest index is at the head
    assert page.swept_state == MI_PAGE_SWEPT_NONE
    assert page.free_is_zero is False
    assert page.purged == bits & ~((1 << 32) - 1 << 8)  # units 8..31 (blocks 1..3) cleared
    assert (page.discarded_blocks, page.discarded_bytes) == (blocks - 3, nbytes - 3 * 128 * KiB)
    # Writing each link touches the first OS page of each block, no more.
    assert page.mem.resident - resident == {os_pages_of_block(page, i)[0] for i in (1, 2, 3)}
    assert check_page(page) == []


def test_walk_rebuild_reverses_the_kept_blocks():
    """16 KiB units hold four 4 KiB blocks: the blocks that share a unit with a live one stay
    on the free list, in the reverse of their order before the walk."""
    lines = [f"1 malloc s{n} 4096" for n in range(16)]
    order = [5, 1, 12, 8, 3, 10, 6, 14, 9, 2, 11, 4, 13]  # keep 0, 7, 15
    lines += [f"1 free s{n}" for n in order] + ["1 collect", "1 walk"]
    before = {}

    def on_step(op, world):
        if op.name == "collect":
            before["free"] = list(world.pages[1].free)

    run = run_checked("\n".join(lines), Options(os_page_size=16 * KiB), on_step)
    page = run.world.pages[1]
    assert page.unit == 16 * KiB
    assert page.purged_blocks() == {8, 9, 10, 11}  # the only unit with no live block
    expect = [i for i in reversed(before["free"]) if i not in {8, 9, 10, 11}]
    assert len(expect) == 9 and expect != [i for i in before["free"] if i in expect]
    assert page.free == expect


# -- the unformed tail -----------------------------------------------------------------------

def test_unformed_tail_is_discarded_and_reused_before_extend():
    run = run_checked("1 malloc a 131072")  # a large page forms 4 blocks of 32
    page = run.world.pages[1]
    assert (page.capacity, page.reserved) == (4, 32)
    calls = page.mem.discard_calls
    page.mem.touch(page.geom.block_addr(4), 28 * 128 * KiB)  # make the tail resident
    assert mi_page_purge_unformed_tail(page)
    assert (page.unformed_purged_lo, page.unformed_purged_hi) == \
        (page.geom.block_addr(4), page.geom.area_end)
    assert not any(is_fully_resident(page, i) for i in range(4, 32))
    assert is_fully_resident(page, 0)
    assert not mi_page_purge_unformed_tail(page)  # nothing new to discard
    assert page.mem.discard_calls == calls + 1
    assert check_page(page) == []
    # Allocating past the formed blocks brings the tail back before the blocks are formed.
    for _ in range(4):
        mi_heap_malloc(run.world, run.world.heap(1), 128 * KiB)
    kinds = [e["ev"] for e in run.world.log if e["ev"] in ("reuse_tail", "extend")]
    assert kinds == ["extend", "reuse_tail", "extend"]
    assert (page.unformed_purged_lo, page.unformed_purged_hi) == (0, 0)
    assert page.capacity == 8 and check_page(page) == []


def test_unformed_tail_range_is_the_os_pages_wholly_inside():
    """With a 192 B offset the tail starts inside an OS page, which is left alone."""
    run = run_checked("1 malloc a 4096", Options(first_block_offset=192))
    page = run.world.pages[1]
    lo, hi = compute_unformed_tail(page)
    ps = page.geom.os_page_size
    tail_lo = page.geom.block_addr(page.capacity)
    assert lo % ps == 0 and hi % ps == 0
    assert tail_lo <= lo < tail_lo + ps and page.geom.area_end - ps < hi <= page.geom.area_end


# -- huge pages, small and medium pages, other OS pages, 32-bit ------------------------------

def test_huge_page_is_never_purged():
    run = run_scenario("huge-never")
    huge = [p for p in run.world.pages.values() if p.geom.kind is PageKind.HUGE]
    assert len(huge) == 2
    assert not events(run, "discard") and all(p.purged == 0 for p in huge)


def test_page_scenarios_purge_in_os_page_units():
    """Small and medium pages, a large page on 16 KiB OS pages and on 32-bit: the unit is the
    OS page, and the walk purged something in each."""
    for name, os_page in (("small-medium", 4 * KiB), ("os-page-16k", 16 * KiB),
                          ("arch32-large", 4 * KiB), ("os-page-64k", 64 * KiB)):
        run = run_scenario(name)
        pages = list(run.world.pages.values())
        assert all(p.unit == os_page for p in pages), name
        assert any(p.discarded_blocks for p in pages), name


def test_offset_192_never_discards_unit_zero():
    run = run_scenario("offset-192")
    for page in run.world.pages.values():
        assert not page.is_unit_purged(0)
        assert page.units.base == page.geom.slice_start


def test_every_page_scenario_holds_every_page_invariant():
    for name, sc in SCENARIOS.items():
        if "page" in sc.tags:
            run_scenario(name)


# -- the walk against its definition, over many geometries ---------------------------------

SIZES = [1024, 3000, 4096, 6000, 8192, 20000, 49152, 81920, 98304, 131072, 163840, 262144]


@st.composite
def walk_cases(draw):
    options = Options(os_page_size=draw(st.sampled_from([4 * KiB, 16 * KiB, 64 * KiB])),
                      first_block_offset=draw(st.sampled_from([0, 192, 4 * KiB])))
    size = draw(st.sampled_from(SIZES))
    n = draw(st.integers(2, 40))
    freed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    freed[draw(st.integers(0, n - 1))] = False  # one block stays live: no retire
    return options, size, n, freed


@settings(max_examples=40, derandomize=True, deadline=None, database=None)
@given(walk_cases())
def test_walk_discards_exactly_the_units_whose_blocks_are_all_free(case):
    options, size, n, freed = case
    lines = [f"1 malloc b{i} {size}" for i in range(n)]
    lines += [f"1 free b{i}" for i in range(n) if freed[i]] + ["1 walk"]
    run = run_checked("\n".join(lines), options)
    for page in run.world.pages.values():
        if page.retired:
            continue
        _, unit_blocks, inside, _ = brute_force(page.geom.page_start, page.block_size,
                                                page.unit, page.reserved, page.capacity)
        # Free: every formed block the script does not hold (freed, or formed and never
        # handed out), known from the script's names and not from the page's lists.
        live = {p.block for p in run.names.values() if p.page == page.id}
        free = set(range(page.capacity)) - live
        expect = {k for k in inside if unit_blocks[k] <= free}
        assert set(page.purged_units()) == expect
        purged = set().union(*(unit_blocks[k] for k in expect))
        assert page.purged_blocks() == purged
        assert sorted(page.free) == sorted(free - purged)
