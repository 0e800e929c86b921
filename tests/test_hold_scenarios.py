"""The seed's tests of the hold, on a virtual clock (seed 000 change (2), "Tests").

Each test runs a named scenario from purgecheck.scenarios and asserts what the seed says the
real test checks; every invariant of the registry is checked after every op as well.
"""

import dataclasses

import pytest

from model.geometry import PageKind
from model.invariants import check_world
from model.thread import MI_PARK_SWEEPS_MAX, PARK_SWEPT_DONE
from purgecheck.runner import run_ops
from purgecheck.scenarios import SCENARIOS


def run_scenario(name, variant="epoch", check=True, **opts):
    sc = SCENARIOS[name]
    options = dataclasses.replace(sc.options, variant=variant, **opts)
    failures = []

    def after(op, world):
        failures.extend((op.line, inv, why) for inv, why in check_world(world))

    run = run_ops(sc.ops(), options, after_step=after if check else None)
    if check:
        assert failures == [], failures[:3]
    return run


def large_pages(world):
    return [p for p in world.pages.values() if p.geom.kind is PageKind.LARGE]


def free_blocks(page):
    return page.free + page.local_free + page.xthread_free


def discards(world, page_id=None):
    return [e for e in world.log if e["ev"] == "discard" and e["ok"]
            and (page_id is None or e["page"] == page_id)]


def test_park_first_sweep_takes_nothing_then_two_or_three_sweeps_then_done():
    run = run_scenario("park-handoff")
    w, t = run.world, run.world.threads[1]
    sweeps = t.park_sweeps
    assert 2 <= len(sweeps) <= 3
    first = sweeps[0]
    assert first.deferred and first.next_state != PARK_SWEPT_DONE
    # the first sweep took nothing of the large pages: the first discard comes after it
    first_discard = next(i for i, e in enumerate(w.log) if e["ev"] == "discard")
    first_park_sweep = next(i for i, e in enumerate(w.log) if e["ev"] == "park_sweep")
    assert first_discard > first_park_sweep
    for a, b in zip(sweeps, sweeps[1:]):
        assert b.start_ms - a.end_ms >= w.options.purge_holes_min_interval
    assert t.park_swept == PARK_SWEPT_DONE
    for p in large_pages(w):
        assert free_blocks(p) == [] and p.discarded_blocks > 0


def test_park_done_is_not_swept_again():
    sc = SCENARIOS["park-handoff"]
    ops = sc.ops()
    unpark = ops.pop()  # keep the thread parked and run the scavenger much longer
    assert unpark.name == "unpark"
    from purgecheck.formats.ops import parse_script
    run = run_ops(ops + parse_script("scavenger 5000"), sc.options)
    assert len(run.world.threads[1].park_sweeps) <= 3


def test_park_slow_sweeps_are_an_interval_after_the_end_of_the_one_before():
    run = run_scenario("park-slow-sweeps")
    sweeps = run.world.threads[1].park_sweeps
    assert len(sweeps) >= 2 and all(s.end_ms - s.start_ms == 30 for s in sweeps)
    assert all(b.start_ms - a.end_ms >= 100 for a, b in zip(sweeps, sweeps[1:]))


def pending_values(world):
    return [e["value"] for e in world.log if e["ev"] == "pending"]


def test_inline_nothing_at_first_nor_second_sweep_pending_says_so_then_untouched_go():
    run = run_scenario("inline-hold")
    w = run.world
    pages = large_pages(w)
    idles = [i for i, e in enumerate(w.log) if e["ev"] == "idle"]
    assert not any(e["ev"] == "discard" for e in w.log[:idles[1] + 1])
    assert pending_values(w)[:2] == [True, True]
    # the third idle (an interval later): the pages left alone go, the touched one stays
    third = [e for e in w.log[idles[1] + 1:idles[2] + 1] if e["ev"] == "discard"]
    touched = next(p for p in pages if p.block_size == 256 * 1024)
    assert {e["page"] for e in third} == {p.id for p in pages} - {touched.id}
    assert pending_values(w)[2] is True
    # and an interval after that it goes too; pending clears
    assert free_blocks(touched) == [] and pending_values(w)[-1] is False


def test_busy_page_keeps_blocks_over_four_more_epochs_then_goes_after_a_whole_epoch():
    run = run_scenario("inline-busy")
    w = run.world
    (page,) = large_pages(w)
    idles = [i for i, e in enumerate(w.log) if e["ev"] == "idle"]
    walks = [i for i, e in enumerate(w.log) if e["ev"] == "walk" and e["dropped"]]
    epochs = [w.log[i]["epoch"] for i in idles]
    assert epochs[-1] - epochs[0] >= 6
    # no discard during the first six idles (five of them right after an allocation): the
    # page keeps its blocks over five more epochs
    assert walks and walks[0] > idles[5]
    # it goes at the first sweep after a whole epoch without allocation: the 7th idle
    assert walks[0] < idles[6]
    assert len(walks) == 1  # a sweep after that has nothing to do
    assert free_blocks(page) == []


def test_abandoned_young_page_left_by_another_thread_then_taken_two_epochs_later():
    run = run_scenario("abandoned-young")
    w = run.world
    (page,) = large_pages(w)
    assert page.abandoned
    outcomes = [e["outcome"] for e in w.log if e["ev"] == "sweep_page"]
    assert outcomes[0] == "held" and outcomes[1] == "walked"
    stamp = next(e["epoch"] for e in w.log if e["ev"] == "stamp")
    walk_epoch = next(e["epoch"] for e in w.log if e["ev"] == "idle"
                      and e["deferred"] is False)
    assert walk_epoch - stamp == 2


def test_interval_zero_turns_the_hold_off():
    run = run_scenario("interval-zero")
    assert all(free_blocks(p) == [] for p in large_pages(run.world))
    outcomes = {e["outcome"] for e in run.world.log if e["ev"] == "sweep_page"}
    assert "held" not in outcomes


def test_a_page_left_for_a_multiple_of_2_32_epochs_reads_young_and_goes_two_later():
    run = run_scenario("wraparound")
    w = run.world
    outcomes = [e["outcome"] for e in w.log if e["ev"] == "sweep_page"]
    assert outcomes[:3] == ["held", "held", "walked"]
    assert w.epoch.epoch > 1 << 32


def test_sweep_once_then_block_keeps_until_pending_is_polled():
    run = run_scenario("sweep-once-then-block")
    w = run.world
    values = pending_values(w)
    assert values[0] is True and values[1] is True  # 5 s later nothing came back by itself
    assert values[-1] is False
    assert all(free_blocks(p) == [] for p in large_pages(w))
