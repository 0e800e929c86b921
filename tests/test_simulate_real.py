"""The model beside a recorded measurement of the real Bun (tests/data/real_bun_*.json).

Deterministic: the real figures were recorded once (the file names the date, machine and
load); these tests run only the model. They check the band where the model now agrees with
the real system, and that a model with the seed's sweep schedule (a scavenger that is never
late, an arena that never hands a retired page's addresses out again) falls outside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from model.world import Options
from purgecheck.formats.calls import Call
from purgecheck.simulate import mimalloc
from purgecheck.simulate.real import (SEED_SCHEDULE, MachineModel, compare, load_real,
                                      real_medians)
from purgecheck.simulate.workloads import make_workload

REAL = load_real(Path(__file__).parent / "data" / "real_bun_2026-12-03.json")


def rows_by_key(rows):
    return {(r.workload, r.design, r.figure): r for r in rows}


@pytest.fixture(scope="module")
def improved():
    return rows_by_key(compare(REAL, MachineModel(), workloads=("bun-serve", "buffer-loop"),
                               designs=("no-hold",)))


@pytest.fixture(scope="module")
def seed_schedule():
    return rows_by_key(compare(REAL, SEED_SCHEDULE, workloads=("bun-serve", "buffer-loop"),
                               designs=("no-hold",)))


def test_recorded_measurement_names_date_machine_and_three_repeats():
    assert REAL["date"] and "cores" in REAL["machine"]
    med = real_medians(REAL)
    assert ("bun-serve", "before") in med and len(REAL["runs"]) == 36


@pytest.mark.parametrize("workload", ["bun-serve", "buffer-loop"])
def test_no_hold_faults_per_request_within_band(improved, workload):
    r = improved[(workload, "no-hold", "faults_per_request")]
    assert r.above_noise
    assert r.in_band, r


@pytest.mark.parametrize("workload", ["bun-serve", "buffer-loop"])
def test_seed_schedule_falls_outside_the_band(seed_schedule, workload):
    """A scavenger that is never late and an arena that never reuses: the no-hold design
    falls outside the band on at least one figure that is above the real noise (bun-serve:
    a sweep at every park, several times the real discards)."""
    out = [r for r in seed_schedule.values() if r.workload == workload and r.above_noise
           and not r.in_band]
    assert out, seed_schedule


def test_never_late_scavenger_alone_is_outside_the_band():
    """The scavenger sweeping at the instant of every park (the seed's schedule) over-sweeps
    under no-hold: more discards than the late one, and outside the band."""
    late = rows_by_key(compare(REAL, MachineModel(), workloads=("bun-serve",),
                               designs=("no-hold",)))
    never = rows_by_key(compare(REAL, MachineModel(scavenger_late_ms=0.0),
                                workloads=("bun-serve",), designs=("no-hold",)))
    key = ("bun-serve", "no-hold", "discards")
    assert never[key].model > late[key].model
    assert not never[key].in_band


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


def test_floor_design_keeps_more_at_idle_than_epoch():
    """Later versions, not in the seed: the floor keeps recently used large pages, up to
    4 MiB, where the epoch rule alone gives them back (the real default keeps 3 to 4 MB more
    anonymous memory at idle than epoch)."""
    w = make_workload("bun-serve", idle_ms=2000, requests=2000, think_ms=0.25, kept=2)
    epoch = mimalloc.simulate(w, "epoch", scavenger_late_ms=0.6)
    floor = mimalloc.simulate(w, "floor", scavenger_late_ms=0.6)
    extra = floor.counters["rss_end"] - epoch.counters["rss_end"]
    assert 0 < extra <= mimalloc.FLOOR_BYTES
