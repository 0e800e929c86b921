"""The event loop's turns in the idle: the real Bun's loop wakes and parks again several times
in the idle (its timers), and each park's collect counts a kept page down; the simulator's
loop turns as often as measured (Workload.idle_turns, Simulation.schedule_idle_turns), the
comparison takes the count from the measurement (compare.idle_turns), and a recording gains
the figure measured apart (purgecheck/measure/recording.py). Each check is shown to fail on a
broken variant: one park through the idle, as the model had it."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from model.retire import MI_RETIRE_CYCLES
from model.world import Options
from purgecheck.formats.calls import Call
from purgecheck.measure import compare
from purgecheck.measure.recording import RecordingMismatch, add_figures, apart_text
from purgecheck.simulate import mimalloc
from purgecheck.simulate.workloads import Workload

LARGE = 256 * 1024  # a request body of the servers: a large size class, 4 MiB pages
BODIES = 8


def _kept_at_idle_end(design: str, idle: str, turns: int) -> int:
    """A lone page of bodies, all freed at the load's end (it stays in its queue, kept, the
    only page of its class: model.retire), then 1 s of idle with `turns` turns of the loop:
    the bytes resident at the end."""
    calls = [Call(0.0, 1, "malloc", i, LARGE) for i in range(BODIES)]
    calls += [Call(1.0, 1, "free", i) for i in range(BODIES)] + [Call(1.0, 1, "loop")]
    w = Workload("lone", "one page of bodies", lambda: iter(calls), idle, 1000.0,
                 idle_turns=turns)
    opts = Options(retire_cycles=True, arena_purge_runs=True)
    return mimalloc.simulate(w, design, opts).counters["rss_end"]


@pytest.mark.parametrize("idle", ["park", "inline"])
def test_each_turn_at_idle_counts_the_kept_page_down_under_before(idle):
    """`before` (purging off): the idle work's collect is the normal one (`mi_theap_collect`,
    `_mi_theap_collect_retired`), which counts a kept large page down once per park (the
    scavenger's pass of the park handoff) or per inline sweep; at
    MI_RETIRE_CYCLES/4 = 4 collects it goes back to the arena, which purges it `purge_delay`
    later. The `loop` call at the load's end is the first collect, so 3 turns of the loop in
    the idle give the page back and 2 keep it. The broken variant, one park through the
    idle (0 turns, the model before the turns were counted), keeps it: the real before gave
    it back (docs/measure.md)."""
    collects = MI_RETIRE_CYCLES // 4
    assert _kept_at_idle_end("off", idle, 0) == BODIES * LARGE  # the broken variant
    assert _kept_at_idle_end("off", idle, collects - 2) == BODIES * LARGE
    assert _kept_at_idle_end("off", idle, collects - 1) == 0
    assert _kept_at_idle_end("off", idle, 11) == 0


def test_with_hole_purging_the_first_sweep_gives_the_kept_page_back_turns_or_not():
    """The epoch rule's idle sweep frees a kept page at once (the hole sweep's collect): the
    turns change nothing there, so at idle the designs differ by the page only without them."""
    assert _kept_at_idle_end("epoch", "park", 0) == _kept_at_idle_end("epoch", "park", 11) == 0


def _summary(turns: list[int] | None) -> dict:
    run = {"requests": {"median": 1000}, "load_s": {"median": 2.0}}
    if turns is not None:
        run["loop_turns_idle"] = {"min": min(turns), "median": sorted(turns)[1],
                                  "max": max(turns), "n": 3}
    return {"before": run, "epoch": copy.deepcopy(run)}


PARAMS = {"size": 262144, "batch": 8, "step_ms": 1, "seconds": 2.0, "kept": 1, "idle_s": 3.0}


def test_the_models_workload_turns_as_often_as_the_measured_median():
    """The median of the design's runs; none where not counted (an older recording), and
    none with the machine model's `idle_turns` off (the broken variant: one park)."""
    w = compare.model_workload("buffer-loop", PARAMS, _summary([9, 12, 11]))
    assert w.idle_turns == 11
    assert compare.model_workload("buffer-loop", PARAMS, _summary(None)).idle_turns == 0
    off = replace(compare.MachineModel(), idle_turns=False)
    assert compare.model_workload("buffer-loop", PARAMS, _summary([9, 12, 11]),
                                  off).idle_turns == 0
    shown = compare.model_params("buffer-loop", PARAMS, _summary([9, 12, 11]))
    assert shown["epoch"]["idle_turns"] == 11


def _doc(params: dict, figures: dict[str, dict]) -> dict:
    return {"workload": "buffer-loop", "params": params, "designs": list(figures),
            "summary": copy.deepcopy(figures), "runs": [{}] * 2 * len(figures),
            "machine": {"date": "2026-12-04 19:00 UTC", "load_1min": 2.5, "load_5min": 2.3}}


def test_a_recording_gains_only_the_figures_it_lacks_with_their_date_and_command():
    """The recorded figures stay (the new runs' `requests` does not replace the recorded
    one); the new figure goes into each design with a note of the runs that gave it."""
    old = {"requests": {"min": 1, "median": 2, "max": 3, "n": 3}}
    new = {"requests": {"min": 7, "median": 8, "max": 9, "n": 2},
           "loop_turns_idle": {"min": 4, "median": 5, "max": 6, "n": 2}}
    recorded = _doc(PARAMS, {"before": old, "epoch": old})
    added = add_figures(recorded, _doc(PARAMS, {"before": new, "epoch": new}), "the command")
    assert added == ["loop_turns_idle"]
    for design in ("before", "epoch"):
        assert recorded["summary"][design]["requests"] == old["requests"]
        assert recorded["summary"][design]["loop_turns_idle"]["median"] == 5
    assert recorded["apart"]["loop_turns_idle"]["command"] == "the command"
    assert "2026-12-04 19:00 UTC" in apart_text(recorded)


def test_a_recording_refuses_runs_of_other_parameters_or_designs():
    figs = {"loop_turns_idle": {"min": 4, "median": 5, "max": 6, "n": 2}}
    recorded = _doc(PARAMS, {"before": {}, "epoch": {}})
    with pytest.raises(RecordingMismatch, match="parameters"):
        add_figures(recorded, _doc({**PARAMS, "idle_s": 1.0}, {"before": figs, "epoch": figs}),
                    "c")
    with pytest.raises(RecordingMismatch, match="designs"):
        add_figures(recorded, _doc(PARAMS, {"before": figs}), "c")
    assert "apart" not in recorded and "loop_turns_idle" not in recorded["summary"]["before"]


def test_a_figure_another_recorded_workload_has_is_not_added():
    """`requests_per_late_collection` is absent where no collection freed a survivor (the
    recorded buffer-loop): a finding of those runs, which new runs must not fill in (they did
    on 2026-12-04 before the recording's format was asked; the broken variant, each workload
    on its own, adds it)."""
    from purgecheck.measure.recording import recorded_figures
    late = {"requests_per_late_collection": {"min": 700, "median": 705, "max": 723, "n": 2}}
    loop = _doc(PARAMS, {"before": {}, "epoch": {}})
    serve = {**_doc({}, {"before": late}), "workload": "bun-serve"}
    known = recorded_figures({"buffer-loop": loop, "bun-serve": serve})
    new = _doc(PARAMS, {"before": late, "epoch": {}})
    assert add_figures(copy.deepcopy(loop), new, "c") == ["requests_per_late_collection"]
    assert add_figures(loop, new, "c", known) == []
    assert "requests_per_late_collection" not in loop["summary"]["before"]
