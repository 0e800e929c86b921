"""model.full_pages: a full large page is abandoned outside the map, goes into the map once it is
no longer mostly used, is swept there, and comes back (lowest address first) only when its
heap's queue has no page with room; each check is shown to fail on a broken variant."""

from __future__ import annotations

import pytest

import model.full_pages as full_pages
import model.heap
from model.drivers import mi_on_thread_idle
from model.heap import mi_free, mi_heap_malloc
from model.invariants import check_world
from model.world import Options, World
from purgecheck.formats.ops import OpScriptError, parse_script
from purgecheck.runner import run_ops

BODY = 256 * 1024  # a large size class: 16 blocks to a 4 MiB page


def _world() -> World:
    # no hold (interval 0): what a sweep may take goes at once, so "not visited" shows
    return World(Options(abandon_full_pages=True, purge_holes_min_interval=0))


def _fill(world: World, n: int = 16) -> list:
    heap = world.heap(1)
    return [mi_heap_malloc(world, heap, BODY) for _ in range(n)]


def check_full_page_is_abandoned_outside_the_map(world: World) -> None:
    blocks = _fill(world)
    page = world.pages[blocks[0].page]
    assert page.abandoned and page.owner == -1
    assert page.id not in world.heap(1).queues[page.block_size]
    assert page.id not in world.abandoned  # not mapped: no sweep visits it
    assert world.subproc.pages_abandoned == 1
    assert check_world(world) == []


def check_mostly_used_page_is_not_swept(world: World) -> None:
    blocks = _fill(world)
    page = world.pages[blocks[0].page]
    for b in blocks[:2]:  # 14 of 16 in use: mostly used (at most reserved/8 free)
        mi_free(world, b, 1)
    mi_on_thread_idle(world, 1)
    assert page.id not in world.abandoned and not page.purged_units()
    mi_free(world, blocks[2], 1)  # 13 in use: into the map, where the sweep finds it
    assert page.id in world.abandoned
    mi_on_thread_idle(world, 1)
    assert page.purged_blocks() == {0, 1, 2}
    assert check_world(world) == []


def check_reclaim_takes_the_lowest_page_of_the_map(world: World) -> None:
    first, second = _fill(world), _fill(world)
    low, high = world.pages[first[0].page], world.pages[second[0].page]
    assert low.geom.slice_start < high.geom.slice_start
    for b in second[:4] + first[:4]:  # both into the map, the higher one first
        mi_free(world, b, 1)
    assert world.abandoned == [high.id, low.id]
    got = mi_heap_malloc(world, world.heap(1), BODY)  # no page of the queue has room
    assert got.page == low.id and not low.abandoned and low.owner == 1
    assert world.abandoned == [high.id] and world.subproc.pages_abandoned == 1
    assert low.id in world.heap(1).queues[low.block_size]
    assert check_world(world) == []


def check_last_free_gives_the_page_back(world: World) -> None:
    blocks = _fill(world)
    page = world.pages[blocks[0].page]
    for b in blocks:
        mi_free(world, b, 1)
    assert page.retired and page.id not in world.abandoned
    assert world.subproc.pages_abandoned == 0
    assert check_world(world) == []


SMALL = 3000  # a small size class: a full small page stays in its heap (is_abandoned_when_full)


def check_exit_abandons_a_full_page_outside_the_map(world: World) -> None:
    """A thread's exit maps only its pages with room (_mi_arenas_page_abandon): a full page
    in the map was reclaimed by the next malloc of its size class, which found no block in
    it (model.heap's "had room but gave no block")."""
    heap = world.heap(2)
    full = world.pages[mi_heap_malloc(world, heap, SMALL).page]
    while full.used < full.reserved:
        mi_heap_malloc(world, heap, SMALL)
    room = world.pages[mi_heap_malloc(world, heap, SMALL).page]
    assert room.id != full.id and full.geom.slice_start < room.geom.slice_start
    model.heap.mi_heap_abandon(world, heap)
    assert full.abandoned and room.abandoned and full.owner == room.owner == -1
    assert world.abandoned == [room.id] and world.subproc.pages_abandoned == 2
    got = mi_heap_malloc(world, heap, SMALL)  # the queue is empty: the map's page with room
    assert got.page == room.id and room.owner == 2 and full.abandoned
    assert check_world(world) == []


CHECKS = [check_full_page_is_abandoned_outside_the_map, check_mostly_used_page_is_not_swept,
          check_reclaim_takes_the_lowest_page_of_the_map, check_last_free_gives_the_page_back,
          check_exit_abandons_a_full_page_outside_the_map]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_full_pages(check):
    check(_world())


def test_off_keeps_full_pages_in_their_heap():
    world = World(Options(purge_holes_min_interval=0))
    blocks = _fill(world)
    page = world.pages[blocks[0].page]
    assert not page.abandoned and page.id in world.heap(1).queues[page.block_size]


# Broken variants, each caught by the check named beside it.
def _never_mostly_used(page):
    return False


def _highest_first(world, heap, block_size):
    found = [world.pages[pid] for pid in world.abandoned
             if world.pages[pid].block_size == block_size]
    return max(found, key=lambda p: p.geom.slice_start, default=None)


def _never_full(world, page):
    return False


def _retire_without_count(world, page):
    from model.alloc import mi_page_free_collect
    mi_page_free_collect(page)
    if page.used == 0:
        page.retired = True
        if page.id in world.abandoned:
            world.abandoned.remove(page.id)


def _abandon_mapping_every_page(world, heap):
    for q in heap.queues.values():  # the model before the exit's rule: every page mapped
        for pid in q:
            page = world.pages[pid]
            page.version += 1
            page.abandoned, page.owner = True, -1
            world.abandoned.append(pid)
            world.subproc.pages_abandoned += 1
    heap.queues.clear()


@pytest.mark.parametrize("name, broken, check", [
    ("mi_heap_abandon", _abandon_mapping_every_page,
     check_exit_abandons_a_full_page_outside_the_map),
    ("is_page_mostly_used", _never_mostly_used, check_mostly_used_page_is_not_swept),
    ("mi_arenas_page_try_find_abandoned", _highest_first,
     check_reclaim_takes_the_lowest_page_of_the_map),
    ("is_abandoned_when_full", _never_full, check_full_page_is_abandoned_outside_the_map),
    ("mi_free_try_collect_mt", _retire_without_count, check_last_free_gives_the_page_back),
])
def test_full_pages_broken_variants_are_caught(monkeypatch, name, broken, check):
    if hasattr(full_pages, name):
        monkeypatch.setattr(full_pages, name, broken)
    if hasattr(model.heap, name):
        monkeypatch.setattr(model.heap, name, broken)
    with pytest.raises(AssertionError):
        check(_world())


# The seeded two-thread scripts at 3,000 ops under these rules, where every seed 0 to 7 ended
# in "page N had room but gave no block": tests/test_incremental_check.py (seed 0 in the fast
# tier, the others in the slow one).
FULL_RULES = Options(abandon_full_pages=True, page_queue_order=True, arena_reuse=True)


def test_a_script_reclaiming_a_page_abandoned_full_is_refused_at_its_line():
    """A reclaim finds pages in the map only: the script's reclaim of a page abandoned full
    is its error, one line naming the op (was a ValueError from the map's list)."""
    script = "\n".join(["2 malloc a 262144"] + [f"2 malloc b{i} 262144" for i in range(15)]
                       + ["1 reclaim a"])
    with pytest.raises(OpScriptError, match=r":17: reclaim: the page of 'a' was abandoned full"):
        run_ops(parse_script(script), FULL_RULES)
