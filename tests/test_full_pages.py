"""model.full_pages: a full large page is abandoned outside the map, goes into the map once it is
no longer mostly used, is swept there, and comes back (lowest address first) only when its
heap's queue has no page with room; each check is shown to fail on a broken variant."""

from __future__ import annotations

import pytest

import model.full_pages as full_pages
from model.drivers import mi_on_thread_idle
from model.heap import mi_free, mi_heap_malloc
from model.invariants import check_world
from model.world import Options, World

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


CHECKS = [check_full_page_is_abandoned_outside_the_map, check_mostly_used_page_is_not_swept,
          check_reclaim_takes_the_lowest_page_of_the_map, check_last_free_gives_the_page_back]


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


@pytest.mark.parametrize("name, broken, check", [
    ("is_page_mostly_used", _never_mostly_used, check_mostly_used_page_is_not_swept),
    ("mi_arenas_page_try_find_abandoned", _highest_first,
     check_reclaim_takes_the_lowest_page_of_the_map),
    ("is_abandoned_when_full", _never_full, check_full_page_is_abandoned_outside_the_map),
    ("mi_free_try_collect_mt", _retire_without_count, check_last_free_gives_the_page_back),
])
def test_full_pages_broken_variants_are_caught(monkeypatch, name, broken, check):
    import model.heap
    monkeypatch.setattr(full_pages, name, broken)
    if hasattr(model.heap, name):
        monkeypatch.setattr(model.heap, name, broken)
    with pytest.raises(AssertionError):
        check(_world())
