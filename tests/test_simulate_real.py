"""The model beside recorded measurements of the real Bun: tests/data/real_bun_2026-12-03.json
(3 runs x 4 designs x 3 workloads, interleaved, on 2 shared cores, each run's load noted) and
tests/data/real_bun_2026-12-03_counted.json (4 workloads, recorded later that day with the
loop's turns, the scavenger's passes and the collector's collections counted).

Deterministic: the real figures were recorded once; these tests run only the model, through
the comparison of `purgecheck measure --compare` (purgecheck/measure/compare.py). They check
the figures where the model agrees with the real system, and that broken variants fall
outside the band: the seed's schedule (a scavenger that is never late and an arena that never
hands a retired page's addresses out again), and a model without the measured inputs (a park
after every request, a fitted collector).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from model.world import Options
from purgecheck.formats.calls import Call
from purgecheck.measure.compare import SEED_SCHEDULE, MachineModel, compare
from purgecheck.measure.report import summary_of
from purgecheck.simulate import mimalloc
from purgecheck.simulate.workloads import make_workload

SIMULATIONS_ONCE = True  # each full-size simulation once for the session (tests/conftest.py)
REAL = json.loads((Path(__file__).parent / "data" / "real_bun_2026-12-03.json").read_text())


def _compare(workload: str, machine: MachineModel, recorded: dict = REAL):
    """before and no-hold of `workload` in a recorded measurement, beside the model."""
    runs = [r for r in recorded["runs"] if r["workload"] == workload
            and r["design"] in ("before", "no-hold")]
    c = compare(workload, runs[0]["params"], summary_of(runs), machine=machine)
    return {(r.design, r.figure): r for r in c.rows}


@pytest.fixture(scope="module")
def calibrated():
    """The model without the servers' small objects (`small_pages`): with them, bun-serve's
    no-hold faults per request on this recording go from 64.3 to 78.6 against a real 35.6,
    out of the band (docs/measure.md: the medium pages' holes are refaulted without the
    hold). These tests are about the scavenger, the arena's reuse and the measured inputs."""
    machine = MachineModel(small_pages=False)
    return {w: _compare(w, machine) for w in ("bun-serve", "buffer-loop")}


@pytest.fixture(scope="module")
def seed_schedule():
    return {w: _compare(w, SEED_SCHEDULE) for w in ("bun-serve", "buffer-loop")}


def test_the_recorded_measurement_names_its_date_machine_and_three_repeats():
    assert REAL["date"] and "cores" in REAL["machine"]
    designs = {(r["workload"], r["design"]) for r in REAL["runs"]}
    assert ("bun-serve", "before") in designs and len(REAL["runs"]) == 36


@pytest.mark.parametrize("workload", ["bun-serve", "buffer-loop"])
def test_no_hold_faults_per_request_are_within_the_band(calibrated, workload):
    r = calibrated[workload][("no-hold", "faults_per_request")]
    assert r.verdict == "within band", r


@pytest.mark.parametrize("workload", ["bun-serve", "buffer-loop"])
def test_the_model_as_it_was_falls_outside_the_band_where_the_model_now_is_inside(
        seed_schedule, calibrated, workload):
    """The simulator before the real Bun was measured (a scavenger at the instant of every
    park, no arena reuse, no-hold at the default interval) predicts a tenth or less of the
    real faults per request without the hold: outside the band, where the model is now
    inside it."""
    key = ("no-hold", "faults_per_request")
    assert seed_schedule[workload][key].verdict == "outside band"
    assert seed_schedule[workload][key].model < seed_schedule[workload][key].real / 5
    assert calibrated[workload][key].verdict == "within band"


def test_a_scavenger_that_is_never_late_sweeps_more_under_no_hold(calibrated):
    """Direction only: the model is outside the band on discards either way (docs/real-bun.md
    says by how much), so this variant is not told apart by a band."""
    never = _compare("bun-serve", MachineModel(scavenger_late_ms=0.0, small_pages=False))
    key = ("no-hold", "discards_load")
    assert never[key].model > calibrated["bun-serve"][key].model
    assert never[key].verdict == "outside band"


def test_arena_reuse_counts_refaults_of_the_before_design():
    """A retired page whose addresses the arena hands out again after its purge (purge_delay
    100 ms) faults in again, under every design: 256 KiB taken, freed (the page retires),
    and taken again 300 ms later."""
    w = make_workload("buffer-loop", idle_ms=100)
    calls = [Call(0, 1, "malloc", 1, 256 * 1024), Call(1, 1, "free", 1),
             Call(300, 1, "malloc", 2, 256 * 1024, request=True)]
    fresh = mimalloc.simulate(w, "off", Options(), calls=calls)
    reused = mimalloc.simulate(w, "off", Options(arena_reuse=True), calls=calls)
    assert fresh.counters["refaults"] == 0
    assert reused.counters["refaults"] >= 256 * 1024 // 4096  # the block, and more


def test_the_floor_design_keeps_more_at_idle_than_epoch():
    """Later versions, not in the seed: the floor keeps recently used large pages, up to
    4 MiB, where the epoch rule alone gives them back (the real default keeps 3 to 4 MB more
    anonymous memory at idle than epoch)."""
    w = make_workload("bun-serve", idle_ms=2000, requests=2000, think_ms=0.25, kept=2)
    epoch = mimalloc.simulate(w, "epoch", scavenger_late_ms=0.6)
    floor = mimalloc.simulate(w, "floor", scavenger_late_ms=0.6)
    extra = floor.counters["rss_end"] - epoch.counters["rss_end"]
    assert 0 < extra <= mimalloc.FLOOR_BYTES


# -- what the model takes from a measurement ---------------------------------------------------

def _spread(v: float) -> dict:
    return {"min": v, "median": v, "max": v, "n": 1}


def test_the_scavengers_reach_is_its_passes_per_turn_under_no_hold():
    """Under no-hold every park is due and wakes the scavenger: its passes per turn of the
    loop, less the passes of its own timers at before's rate, are the fraction of parks it
    reaches. Other designs take no-hold's; without a count (no perf, an older measurement)
    the model keeps its fitted lateness (None)."""
    from purgecheck.measure.compare import scavenger_reach
    summary = {"before": {"requests": _spread(5000), "load_s": _spread(5.0),
                          "loop_turns": _spread(800), "scavenger_passes": _spread(60)},
               "no-hold": {"requests": _spread(3800), "load_s": _spread(2.5),
                           "loop_turns": _spread(1700), "scavenger_passes": _spread(750)}}
    assert scavenger_reach(summary, "epoch") == pytest.approx((750 - 30) / 1700)
    assert scavenger_reach({"before": summary["before"]}, "before") == pytest.approx(60 / 800)
    assert scavenger_reach({"before": {"requests": _spread(1)}}, "before") is None
    assert scavenger_reach(summary, "epoch", SEED_SCHEDULE) is None  # the model as it was


def test_each_design_runs_at_its_own_measured_pace_turns_and_collections():
    from purgecheck.measure.compare import model_workload
    summary = {"before": {"requests": _spread(6000), "load_s": _spread(3.0),
                          "requests_per_turn": _spread(6.4),
                          "requests_per_collection": _spread(25.1)},
               "no-hold": {"requests": _spread(3000), "load_s": _spread(3.0),
                           "requests_per_turn": _spread(2.2),
                           "requests_per_collection": _spread(24.6)}}
    params = {"body": 262144, "kept": 40, "keep_every": 1000, "connections": 16, "idle_s": 1}
    w = model_workload("bun-serve", params, summary, MachineModel(), "no-hold").params
    assert (w["requests"], w["per_turn"], w["gc_every"]) == (3000, 2.2, 25)
    assert w["think_ms"] == pytest.approx(1.0)
    old = model_workload("bun-serve", params, summary, SEED_SCHEDULE, "no-hold").params
    assert (old["per_turn"], old["gc_every"]) == (1.0, 1)  # a park per request, frees at once


# -- a measurement that counted the loop's turns, the scavenger's passes, the collections -----

COUNTED = json.loads((Path(__file__).parent / "data" /
                      "real_bun_2026-12-03_counted.json").read_text())


@functools.cache
def counted(workload: str, kind: str) -> dict:
    """The comparison of `workload` on the counted measurement, with the measured inputs or
    without ("unmeasured"), made when a test first asks: bun-serve's unmeasured one (11 s of
    CPU at load 6, the module's costliest) is asked for in the slow tier only."""
    machine = MachineModel() if kind == "measured" else MachineModel(measured_inputs=False)
    return _compare(workload, machine, COUNTED)


def test_the_counted_measurement_has_the_turns_passes_and_collections_of_every_server_run():
    serve = [r["figures"] for r in COUNTED["runs"] if r["workload"].startswith("bun-serve")]
    assert len(serve) == 24
    for f in serve:
        assert f["loop_turns"] > 0 and f["scavenger_passes"] > 0
        assert 10 < f["requests_per_collection"] < 50  # 24 to 27 measured


# buffer-loop's no-hold MB discarded went out of the band (1,297 against 643: x2.02) when the
# comparison took the abandoned full pages on, and came back (1,207) with the v3 fork's
# mi_page_extend_free (model.world.Options.extend_v3: a large page's blocks formed one at a
# time, only the discarded tail it formats brought back; docs/measure.md, "The unformed tail
# of a fresh large page").
# bun-serve's no-hold MB given back at idle went out (18.0 against 10.8; 9.75 before) with the
# memory at the idle's end at each design's own pace and the servers' own part there, measured
# on 2026-12-05 (docs/measure.md, "Where the model is still outside: the audit"): on this
# recording (10,000 requests under before, 9 bodies kept) the model's `off` holds 16.5 MB at
# the idle's end in 2 seeds of 3 (4 pages for 13 bodies) where the real before, less the
# runtime's part of today, holds about 8 MB. Strict: when it comes back inside, this fails.
_FEW_BODIES_PAGES = pytest.mark.xfail(strict=True, reason="off's pages for few kept bodies")


@pytest.mark.parametrize("workload,fig", [
    *[("bun-serve", f) for f in ("discards_load", "faults_per_request")],
    pytest.param("bun-serve", "mb_given_back_idle", marks=_FEW_BODIES_PAGES),
    *[("buffer-loop", f) for f in ("discards_load", "faults_per_request", "mb_given_back_idle")],
    ("buffer-loop", "discarded_mb_load")])
def test_with_the_measured_turns_collections_and_reach_no_hold_is_within_the_band(
        workload, fig):
    r = counted(workload, "measured")[("no-hold", fig)]
    assert r.verdict == "within band", r


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["bun-serve"])
def test_a_model_that_parks_after_every_request_with_a_fitted_collector_falls_outside(
        workload):
    """The broken variant of the measured inputs: a park after every request, a collector
    that frees 3 bodies at once, a scavenger late by a fitted 0.6 ms: too many sweeps,
    discards outside the band (bun-serve: 7,008 against a real 1,710 and a measured model's
    2,061) where the measured model is inside. In the slow tier; the fast one keeps parks that
    last until the next request outside the band on bun-serve (test_scavenger_wake).
    buffer-loop's broken variant (a collector that frees every round) was outside by the
    older extend's formed free blocks and tails and is inside with the v3 fork's (689 calls
    against a real 416, the measured model's 524): it no longer tells the two apart."""
    key = ("no-hold", "discards_load")
    broken, measured = counted(workload, "unmeasured")[key], counted(workload, "measured")[key]
    assert broken.verdict == "outside band"
    assert broken.model > 2 * measured.real
    assert measured.verdict == "within band"


def test_mimalloc_page_queues_new_page_in_front_a_full_one_that_gets_a_block_back_at_the_end():
    """mi_page_queue_push puts a fresh page first; a full page that gets a block back goes to
    the end of its queue (model.heap.requeue_at_end), behind the pages that had room."""
    from model.heap import mi_free, mi_heap_malloc
    from model.world import World
    body = 256 * 1024  # 16 to a 4 MiB page
    world = World(Options(page_queue_order=True))
    heap = world.heap(1)
    blocks = [mi_heap_malloc(world, heap, body) for _ in range(33)]  # two full pages and one
    queue = heap.queues[world.pages[blocks[0].page].block_size]
    p1, p2, p3 = blocks[0].page, blocks[16].page, blocks[32].page
    assert queue == [p3, p2, p1]  # each fresh page in front
    mi_free(world, blocks[20], 1)  # the full second page gets a block back: to the end
    assert queue == [p3, p1, p2]
    assert mi_heap_malloc(world, heap, body).page == p3  # the page in front still serves
    plain = World(Options())
    ph = plain.heap(1)
    made = [mi_heap_malloc(plain, ph, body) for _ in range(33)]
    assert list(ph.queues.values())[0] == [made[0].page, made[16].page, made[32].page]


def test_without_mimallocs_page_queues_typed_arrays_keep_too_little_free_at_idle():
    """The page queues decide which page the next block comes from: with them, garbage of a
    collection fills the fresh page in front and leaves the older pages with their holes,
    and the model's before keeps 90 MB more than epoch at idle against a real 103 (within
    25 %); allocating from the oldest page with room keeps 77 (outside). With full pages
    kept in their queues (abandon_full_pages off): an abandoned full page leaves its queue,
    and the reclaim from the abandoned map (the lowest page first) then decides instead.
    Without the runtime's part (runtime_apart off): its 2 MB given back at idle would bring
    the broken variant's 77 inside the band, and it is not what the queues decide."""
    runs = [r for r in COUNTED["runs"] if r["workload"] == "typed-arrays"
            and r["design"] in ("before", "epoch")]
    summary = summary_of(runs)
    got = {}
    for order in (True, False):
        c = compare("typed-arrays", runs[0]["params"], summary,
                    machine=MachineModel(page_queue_order=order, abandon_full_pages=False,
                                         runtime_apart=False))
        got[order] = next(r for r in c.rows if r.figure == "mb_given_back_idle")
    assert got[True].verdict == "within band", got[True]
    assert got[False].verdict == "outside band" and got[False].model < got[True].model


# -- a measurement that told the discards apart by thread and grouped them into sweeps --------

THREADS = json.loads((Path(__file__).parent / "data" /
                      "real_bun_2026-12-03_threads.json").read_text())
WHO = ("discards_load_scavenger", "discards_load_loop", "discards_load_others")


def _summary(recorded: dict, workload: str) -> dict:
    return summary_of([r for r in recorded["runs"] if r["workload"] == workload])


def test_every_run_of_the_threads_measurement_says_who_made_each_large_discard():
    assert len(THREADS["runs"]) == 48
    for r in THREADS["runs"]:
        f = r["figures"]
        assert sum(f[k] for k in WHO) == f["discards_load_large"], r["workload"]
        assert f["discarding_sweeps_load"] <= f["discards_load_large"]


def test_typed_arrays_discards_without_the_hold_come_from_other_threads_not_the_scavenger():
    """Recorded: without the hold, typed-arrays' discards over before's are Bun's other threads'
    (their own idle sweeps), not the scavenger's, whose passes are as many as its timers make
    under before: so the scavenger reaches none of the loop's parks (reach 0), and the model,
    which has no such threads, predicts no excess (docs/measure.md)."""
    from purgecheck.measure.compare import scavenger_reach
    s = _summary(THREADS, "typed-arrays")
    excess = {k: s["no-hold"][k]["median"] - s["before"][k]["median"] for k in WHO}
    assert excess["discards_load_others"] > 2 * max(excess["discards_load_scavenger"], 1)
    assert scavenger_reach(s, "no-hold") == 0.0


def test_the_timers_of_the_scavenger_are_taken_off_where_one_run_of_before_lacks_its_count():
    """The counted measurement of 10:05 lacks one typed-arrays before run's perf count: its
    other two runs give the scavenger's timer passes (22 and 13 in 1.0 and 0.54 s), so no-hold's
    11 passes are its timers' and the reach is 0. A summary that drops a count one run lacks
    (the comparison before) took no-hold's passes whole: 11 of 241 turns."""
    from purgecheck.measure.compare import scavenger_reach
    s = _summary(COUNTED, "typed-arrays")
    assert s["before"]["scavenger_passes"]["n"] == 2
    assert scavenger_reach(s, "no-hold") == 0.0
    dropped = {d: {k: v for k, v in f.items() if k != "scavenger_passes" or d != "before"}
               for d, f in s.items()}
    assert scavenger_reach(dropped, "no-hold") == pytest.approx(11 / 241, abs=0.005)


def test_without_the_hold_bun_serve_is_within_the_band_on_the_threads_measurement():
    # before and no-hold alone: no-hold's rows read no other design's runs (its lateness and
    # reach are no-hold's and before's), and these runs are test_scavenger_wake's, made once
    summary = _summary(THREADS, "bun-serve")
    summary = {d: summary[d] for d in ("before", "no-hold")}
    c = compare("bun-serve", THREADS["runs"][0]["params"], summary)
    rows = {(r.design, r.figure): r for r in c.rows}
    for fig in ("discards_load", "discarded_mb_load", "faults_per_request"):
        assert rows[("no-hold", fig)].verdict == "within band", rows[("no-hold", fig)]


def test_the_load_claims_take_the_measured_inputs_of_the_recorded_server():
    """`simulate --seeds` runs its load claims' server on what the recorded measurement gives
    (purgecheck/measure/seedtables.py claim_inputs): the collector's batch, the requests per
    turn, the scavenger's reach, no-hold's interval 0, the arena's reuse and the page queues;
    a claim that states its own machine (a late scavenger) keeps it."""
    from purgecheck.measure.seedtables import claim_inputs
    from purgecheck.simulate.claims import Runs
    record = {"workloads": {"bun-serve": {"params": THREADS["runs"][0]["params"],
                                          "summary": _summary(THREADS, "bun-serve")}}}
    inputs = claim_inputs(record)
    assert inputs["no-hold"]["params"] == {"gc_every": 25, "per_turn": 8.15}
    assert dict(inputs["no-hold"]["machine"])["scavenger_reach"] == pytest.approx(0.496, abs=1e-3)
    assert inputs["no-hold"]["options"] == {"arena_reuse": True, "page_queue_order": True,
                                            "purge_holes_min_interval": 0}
    assert "purge_holes_min_interval" not in inputs["epoch"]["options"]
    assert claim_inputs({}) == {}
    runs = Runs(0.02, inputs)
    measured = runs.serve("no-hold")
    clock = runs.serve("clock", machine=(("scavenger_late_ms", 60.0),))
    defaults = Runs(0.02).serve("no-hold")
    keys = list(runs.cache)
    assert ("purge_holes_min_interval", 0) in keys[0][4] and ("gc_every", 25) in keys[0][5]
    assert keys[1][3] == (("scavenger_late_ms", 60.0),)  # the claim's own machine
    assert ("per_turn", 5.63) in keys[1][5]  # the clock rule takes the epoch rule's inputs
    # no-hold's interval 0 lifts the handoff's rate limit too: the defaults (interval 100)
    # discard a few times, the measured inputs as often as a park is swept
    assert measured.counters["discards_load"] > 5 * defaults.counters["discards_load"]
    assert clock.counters["requests"] == measured.counters["requests"]
