"""`World.full_seen`, the pages the allocation path's search found full and passes over with
one set lookup (model.heap.heap_page_for, issue 29, 4): after every op the page it picks for
every heap and size class is the page the plain scan of the queue picks
(model.heap.heap_page_scan), over every page scenario and over seeded random scripts of two
threads that fill pages, free from the owner and from the other thread, walk, collect,
abandon and reclaim, with and without mimalloc's page queue order. A free that does not take
its page out of the set is caught: the broken variants forget cross-thread frees (a page an
other thread gives a block back stays passed over) or the owner's frees."""

from __future__ import annotations

import pytest

import model.heap
import purgecheck.runner
from model.heap import heap_page_for, heap_page_scan
from model.world import Options, World
from purgecheck.formats.ops import parse_script
from purgecheck.runner import run_ops
from purgecheck.scenarios import SCENARIOS
from two_thread_scripts import two_thread_script


def disagreements(world: World) -> list[str]:
    """Every heap and size class where the indexed search and the plain scan differ."""
    out = []
    for heap in world.heaps.values():
        for bs in list(heap.queues):
            want = heap_page_scan(world.pages, heap, bs)
            got = heap_page_for(world, heap, bs)
            if got is not want:
                out.append(f"heap {heap.id} class {bs}: page {got and got.id}, the scan's "
                           f"{want and want.id} (queue {heap.queues[bs]})")
    return out


def random_script(seed: int, ops: int = 1500) -> str:
    """Two threads allocating 1000-byte blocks (65 to a small page, so pages fill), frees
    from either thread, walks, collects, and now and then thread 2 abandons its heap and
    thread 1 reclaims a page of it."""
    return two_thread_script(seed, ops, (1000, 1000, 3000),
                             ((0.55, "malloc"), (0.9, "free"), (0.94, "walk"),
                              (0.98, "collect"), (1.0, "abandon")))


def script_disagreements(seeds=range(3)) -> list[str]:
    out: list[str] = []

    def after(op, world):
        out.extend(f"seed {seed} line {op.line} ({op.render()}): {why}"
                   for why in disagreements(world))

    for seed in seeds:
        for order in (True, False):
            run_ops(parse_script(random_script(seed)), Options(page_queue_order=order),
                    after_step=after)
    return out


def scenario_disagreements() -> list[str]:
    out: list[str] = []

    def after(op, world):
        out.extend(f"{name} line {op.line} ({op.render()}): {why}"
                   for why in disagreements(world))

    for name, sc in SCENARIOS.items():
        run_ops(parse_script(sc.build()), sc.options, after_step=after)
    return out


def test_the_search_picks_the_scans_page_after_every_op_of_every_scenario():
    assert scenario_disagreements() == []


def test_the_search_picks_the_scans_page_after_every_op_of_random_two_thread_scripts():
    frees = {"own": 0, "other": 0}
    original = model.heap.mi_free

    def counting(world, ptr, thread):
        page = world.pages[ptr.page]
        if page.id in world.full_seen:  # a page the search passes over gets a block back
            frees["own" if thread == page.owner else "other"] += 1
        original(world, ptr, thread)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(purgecheck.runner, "mi_free", counting)
        assert script_disagreements() == []
    assert frees["own"] > 50 and frees["other"] > 50  # both kinds of free reach full pages


def _forgetting(kind: str):
    original = model.heap.mi_free

    def broken(world, ptr, thread):
        page = world.pages[ptr.page]
        was_seen = page.id in world.full_seen
        cross = thread != page.owner or page.abandoned
        original(world, ptr, thread)
        if was_seen and cross == (kind == "cross-thread"):
            world.full_seen.add(page.id)  # the free leaves the page passed over
    return broken


@pytest.mark.parametrize("kind", ["cross-thread", "owner"])
def test_a_free_that_leaves_its_page_passed_over_is_caught(monkeypatch, kind):
    monkeypatch.setattr(purgecheck.runner, "mi_free", _forgetting(kind))
    assert script_disagreements(seeds=(0,))
