"""Bun's other threads sweep the loop's abandoned large pages (compare.other_sweep_ms).

Seed 000 (2): "full pages are abandoned and are reached by the sweeps of the other threads of
the heap". On typed-arrays without the hold the real Bun's discards over before's are mostly
other threads' (strace: its JIT workers' sweeps at the end of a compilation, in bursts of
calls of a large page's block sizes); the comparison takes how often those threads sweep
from the recording (no-hold's discarding sweeps that were not the scavenger's, less
before's) and the model sweeps the abandoned map that often from another thread
(simulate's `sweeper_every_ms`), with mimalloc's full pages abandoned (model.full_pages).

Deterministic: the recorded measurement of 21:38 (the page's, docs/data/real-bun.json) and
the model only.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from purgecheck.measure.compare import MachineModel, compare, other_sweep_ms

QUIET = json.loads((Path(__file__).parent / "data" /
                    "real_bun_2026-12-03_quiet.json").read_text())["workloads"]
FIGURES = ("discards_load", "discarded_mb_load", "faults_per_request")


def _no_hold(machine: MachineModel) -> dict:
    """typed-arrays' before and no-hold on the recording, beside the model of the loop's own
    pages (without the runtime's part measured apart, which the other threads do not make)."""
    w = QUIET["typed-arrays"]
    summary = {d: w["summary"][d] for d in ("before", "no-hold")}
    c = compare("typed-arrays", w["params"], summary, machine=replace(machine, runtime_apart=False))
    return {r.figure: r for r in c.rows if r.design == "no-hold"}


def test_the_other_threads_sweep_every_141_ms_on_typed_arrays_and_never_apart_on_the_rest():
    """typed-arrays under no-hold: 10 sweeps that discarded 64 KiB or more, 6 of them the
    scavenger's; under before 5 and 4 (the loop's own arena purges): 3 sweeps of other
    threads in 0.4225 s. On the servers and buffer-loop the scavenger made every sweep seen,
    so the model has no other sweeper there."""
    got = {name: other_sweep_ms(w["summary"]) for name, w in QUIET.items()}
    assert got["typed-arrays"] == pytest.approx(1000 * 0.42248 / 3, rel=1e-3)
    assert got["bun-serve"] is None and got["bun-serve-nothing-kept"] is None
    assert got["buffer-loop"] is None
    assert other_sweep_ms(QUIET["typed-arrays"]["summary"],
                          MachineModel(other_sweeps=False)) is None


@pytest.fixture(scope="module")
def with_them():
    return _no_hold(MachineModel())


def test_typed_arrays_without_the_hold_is_within_the_band_with_the_other_threads(with_them):
    for fig in FIGURES:
        assert with_them[fig].verdict == "within band", with_them[fig]


@pytest.mark.parametrize("broken", [
    {"other_sweeps": False},  # nothing but the loop's parks sweeps (reach 0 here)
    {"abandon_full_pages": False},  # the other threads' sweeps never reach the loop's pages
])
def test_a_model_whose_other_threads_do_not_reach_the_loops_pages_falls_outside(
        with_them, broken):
    rows = _no_hold(replace(MachineModel(), **broken))
    for fig in FIGURES:
        assert rows[fig].verdict == "outside band" and abs(rows[fig].model) < 1e-9, rows[fig]
        assert with_them[fig].model > 0
