"""`Page.on_lists`, the set of the blocks on a page's three free lists kept beside them so
that a free's double-free check (model.alloc.check_free) is one lookup, not a search of each
list (issue 29, 4): after every op of every page scenario, and at every event of a simulated
workload, it holds exactly the blocks of the lists; a path that changes a list and not the
set is caught; a double free is still reported."""

from __future__ import annotations

import pytest

import model.alloc
import model.heap
import model.holes
from model.page import Page
from purgecheck.formats.ops import parse_script
from purgecheck.runner import run_ops
from purgecheck.scenarios import SCENARIOS
from purgecheck.simulate.mimalloc import simulate
from purgecheck.simulate.workloads import make_workload


def disagreement(page: Page) -> str | None:
    """Where `on_lists` and the lists differ (None: they agree)."""
    want = set(page.listed_blocks())
    if page.on_lists == want:
        return None
    return f"page {page.id}: on_lists lacks {sorted(want - page.on_lists)[:8]}, has " \
           f"{sorted(page.on_lists - want)[:8]} off every list"


def scenario_disagreements() -> list[str]:
    """Every page scenario, the index compared with the lists after every op."""
    out: list[str] = []

    def after(op, world):
        out.extend(f"{name} line {op.line} ({op.render()}): {why}"
                   for page in world.pages.values() if (why := disagreement(page)))

    for name, sc in SCENARIOS.items():
        run_ops(parse_script(sc.build()), sc.options, after_step=after)
    return out


def test_the_index_agrees_with_the_lists_after_every_op_of_every_scenario():
    assert scenario_disagreements() == []


def test_the_index_agrees_with_the_lists_at_every_event_of_a_simulated_load(monkeypatch):
    """typed-arrays under no-hold: walks drop blocks, unpurges push them back, pages retire."""
    seen: list[str] = []
    kinds: set[str] = set()
    emit = Page.emit

    def checked(page, kind, **fields):
        emit(page, kind, **fields)
        kinds.add(kind)
        if why := disagreement(page):
            seen.append(f"{kind}: {why}")

    monkeypatch.setattr(Page, "emit", checked)
    simulate(make_workload("typed-arrays", allocations=300, idle_ms=300), "no-hold")
    assert {"malloc", "free", "extend", "walk", "unpurge", "retire"} <= kinds
    assert seen == []


def _xthread_free_unindexed(page, i):
    """Broken: a free from another thread pushes on xthread_free but not on the index."""
    _ORIGINAL_XTHREAD(page, i)
    page.on_lists.discard(i)


def _rebuild_keeps_index(page, todo):
    """Broken: the walk's rebuild drops blocks from `free` but leaves them in the index."""
    dropped = _ORIGINAL_REBUILD(page, todo)
    page.on_lists.update(dropped)
    return dropped


_ORIGINAL_XTHREAD = model.alloc.mi_free_xthread
_ORIGINAL_REBUILD = model.holes.rebuild_free_list


@pytest.mark.parametrize("module, name, broken", [
    (model.heap, "mi_free_xthread", _xthread_free_unindexed),  # heap.py calls it
    (model.holes, "rebuild_free_list", _rebuild_keeps_index),
])
def test_a_path_that_changes_a_list_and_not_the_index_is_caught(monkeypatch, module, name,
                                                                 broken):
    monkeypatch.setattr(module, name, broken)
    assert scenario_disagreements()


def test_a_double_free_of_a_block_on_each_list_is_reported():
    """The check reads the index: a block on free, local_free or xthread_free is not live."""
    for free in (model.alloc.mi_free_local, model.alloc.mi_free_xthread):
        run = run_ops(parse_script("0 malloc a 64\n0 malloc b 64\n"))
        page = next(iter(run.world.pages.values()))
        assert 2 in page.free  # formed by the extend, never handed out
        with pytest.raises(model.alloc.DoubleFree):
            free(page, 2)
        free(page, 0)
        with pytest.raises(model.alloc.DoubleFree):
            free(page, 0)
        assert page.double_frees == 2 and disagreement(page) is None
