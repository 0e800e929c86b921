"""The seed's concurrent tests on real threads and the real clock (reference_c/stress.c, a
file per scenario), and their linearized traces replayed by `purgecheck validate`.

Seed 000: "sweepers at the same time: four threads that allocate from a large page of their
own and sweep without a pause, next to the thread under test ... (a) no epoch is shorter than
the interval, to the millisecond, and (b) a page it allocated from before a sweep keeps its
blocks in that sweep. Both fail when the exclusion in _mi_page_purge_holes_epoch_advance is
removed and when the start of an epoch is recorded early."

The C checks are lower bounds only, so the clean runs pass on a loaded machine. The broken
variants run with a delay injected at the step where their race lies (every other epoch), so
the race is hit in every run: the C run stops at its first failed check (10 s at the most, in
practice tens of ms) and the validator rejects its trace at the first broken step.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from purgecheck.conformance import BUILD_DIR
from purgecheck.validate import validate_file
from purgecheck.engines.validate import BROKEN, DELAY_US, run_stress


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)


def accepted(run) -> None:
    v = validate_file(str(run.trace))
    assert v.accepted, f"{v.source}:{v.line}: {v.why}\n" + "\n".join(v.state)
    assert v.events > 0


@pytest.mark.parametrize("delay_at", [None, "cas", "increment"])
def test_sweepers_at_the_same_time_hold_and_validate(tmp_path, delay_at):
    """The clean advance: (a) and (b) hold, the epoch moves, the trace is one the model can
    reproduce; also with the delays that break the broken variants."""
    run = run_stress(tmp_path, ms=150, delay_us=DELAY_US if delay_at else 0,
                     delay_at=delay_at or "cas")
    assert run.returncode == 0, run.stderr
    s = run.summary
    assert {"a", "b", "c", "d", "liveness"} <= set(s["violations"])
    assert set(s["violations"].values()) == {0}, s["violations"]
    assert s["epochs"] >= 3 and s["observations"] > 0 and s["checked_b"] > 0
    assert "every check held" in run.stderr
    accepted(run)


@pytest.mark.parametrize("variant", list(BROKEN))
def test_broken_advance_fails_the_c_test_and_its_trace_is_rejected(tmp_path, variant):
    run = run_stress(tmp_path, ms=150, mutant=variant, delay_us=DELAY_US, delay_at=BROKEN[variant],
                     until_violation=True, max_ms=10_000)
    assert run.returncode == 1, run.stderr
    assert set(run.failed_checks) & {"a", "b"}, run.summary
    assert "FAILED" in run.stderr
    v = validate_file(str(run.trace))
    assert not v.accepted
    assert v.event["ev"] == "advance_step"
    want = {"no_cas_exclusion": "so the model's CAS fails",
            "start_before_increment": "its clock read after the increment was"}[variant]
    assert want in v.why, v.why


def test_broken_advance_without_a_trace_fails_the_c_test_alone(tmp_path):
    """The C checks do not need the trace's lock: untraced, the race is hit as well."""
    run = run_stress(tmp_path, ms=150, mutant="no_cas_exclusion", delay_us=DELAY_US,
                     delay_at="cas", until_violation=True, max_ms=10_000, traced=False)
    assert run.returncode == 1 and "a" in run.failed_checks, run.stderr


@pytest.mark.parametrize("scenario", ["sweepers", "park"])
def test_stress_under_tsan(tmp_path, scenario):
    run = run_stress(tmp_path, scenario=scenario, ms=150, build="tsan")
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    accepted(run)


def test_park_handoff_with_the_scavenger_thread(tmp_path):
    """Three threads park; the real scavenger sweeps them, each park gets done (c) and then the
    blocks they freed are gone (d); the trace is one the model can reproduce."""
    run = run_stress(tmp_path, scenario="park", ms=100)
    assert run.returncode == 0, run.stderr
    assert run.summary["parks"] == 6 and not run.failed_checks
    accepted(run)
    assert '"park_sweep"' in run.trace.read_text()


def test_park_done_at_once_fails_the_c_test_and_is_rejected(tmp_path):
    """park_done_first marks a park done at its first sweep, which holds the young page."""
    run = run_stress(tmp_path, scenario="park", ms=100, mutant="park_done_first")
    assert run.returncode == 1 and "d" in run.failed_checks, run.stderr
    v = validate_file(str(run.trace))
    assert not v.accepted and "the model's park is not done" in v.why


def test_stress_bad_usage(tmp_path):
    from purgecheck.engines.validate import STRESS
    for args in (["--scenario", "nope"], ["--interval", "x"], ["--mutant", "nope"],
                 ["--delay-at", "later"]):
        proc = subprocess.run([str(STRESS["release"]), *args], capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.startswith("stress: ")


@pytest.mark.parametrize("build,seed", [("driver", 1), ("driver", 2), ("driver_tsan", 3)])
def test_concurrent_op_scripts_validate(tmp_path, build, seed):
    """The driver's concurrent mode (every script thread an OS thread, the real scavenger)
    with `linearize=1`: cross-thread frees, parks, walks, reallocs and abandoned pages at
    once, replayed on the model."""
    from purgecheck.conformance import stress_script
    text = ("%options clock=real concurrent=1 linearize=1 interval=2 full_every=3\n"
            + stress_script(seed, ops=1500))
    path = tmp_path / "run.jsonl"
    with open(path, "wb") as out:
        proc = subprocess.run([str(BUILD_DIR / build), "-"], input=text.encode(), stdout=out,
                              stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b'"linearized":true' in path.read_bytes()[:2000]
    v = validate_file(str(path))
    assert v.accepted, f"{v.source}:{v.line}: {v.why}\n" + "\n".join(v.state)
    assert v.events > 1500


def test_validate_engine_quick(engines_run_once):
    """`purgecheck check --engine validate --quick`: the four results hold, with figures. The
    run is the session's (engines_run_once: test_cluster_matrix's in-process table reads it)."""
    from purgecheck.engines import Budget, load_engines
    results = {r.invariant: r for r in load_engines()["validate"].run(Budget(quick=True))}
    assert set(results) == {"EP-NO-SHORT-EPOCH", "HD-YOUNG-KEPT", "PK-DONE-TWO-EPOCHS",
                            "PK-SPACING", "EP-MOVING-HELD", "EP-BACK-IS-DUE",
                            "PG-WALK-REVERSES", "PG-WALK-TAKES-EVERY-FREE-UNIT",
                            "CF-LINEARIZED-RUNS"}
    for r in results.values():
        assert r.status == "hold", (r.invariant, r.detail)
    assert "2/2 broken advances caught" in results["EP-NO-SHORT-EPOCH"].figure
    assert "6 parks" in results["PK-DONE-TWO-EPOCHS"].figure
    assert results["PK-SPACING"].figure.startswith("3 parks with park sweeps of 10 ms")
    assert re.match(r"\d+ scripts, [\d,]+ events, [\d,]+ sweeps of an abandoned page during "
                    r"the exit", results["CF-LINEARIZED-RUNS"].figure)
    assert results["EP-BACK-IS-DUE"].figure.startswith("3 steps of the clock back")


def test_validate_engine_kills_a_broken_advance_under_judgement():
    """In the kill matrix the engine runs the C side with the mutant's switch (and, for a
    broken advance, the delay that hits its race): the C checks fail."""
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.matrix import KILLED, judge
    cell = judge(MUTANTS["no-cas-exclusion"], "validate", quick=True)
    assert cell.verdict == KILLED, cell.note
    assert any("the C checks failed" in f["detail"] for f in cell.failures), cell.failures


def test_validate_engine_kills_sweep_last_before_work_on_real_threads():
    """The end of a park sweep taken before its work: on real threads only the slow park
    sweeps' run (SLOW_PARKS) shows it, where validate rejects the trace under PK-SPACING."""
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.matrix import KILLED, judge
    cell = judge(MUTANTS["sweep-last-before-work"], "validate", quick=True)
    assert cell.verdict == KILLED, cell.note
    failed = {f["invariant"]: f["detail"] for f in cell.failures}
    assert "its last park sweep ended at" in failed.get("PK-SPACING", ""), cell.failures


def test_a_hold_one_epoch_short_is_caught_by_its_chances_not_by_the_time_it_ran(tmp_path):
    """Regression (CI of 2026-12-03, `mutants --kills 2` on age-lt-1): the validate engine ran
    the sweepers 80 ms, and on a loaded machine no checked sweep saw the epoch move in them, so
    (b) had no chance to see a page one epoch old discarded and age_lt_1 survived. The run now
    lasts until (b) had MIN_CROSSINGS such sweeps: a run of 1 ms is stretched to them, and the
    mutant fails (b) at one of them, whatever the load."""
    from purgecheck.engines.validate import MIN_CROSSINGS
    need = MIN_CROSSINGS[True]
    run = run_stress(tmp_path, ms=1, mutant="age_lt_1", min_crossings=need)
    assert run.summary["crossed_b"] >= need, run.summary
    assert run.returncode == 1 and "b" in run.failed_checks, (run.stderr, run.summary)
    clean = run_stress(tmp_path, ms=1, min_crossings=need, name="clean")
    assert clean.returncode == 0 and clean.summary["crossed_b"] >= need, clean.stderr
    accepted(clean)


def test_the_foreign_sweep_found_on_2026_12_05_stays_rejected(tmp_path):
    """A regression case: in a fresh clone's `make test` (2026-12-05 09:17 UTC,
    test_concurrent_op_scripts_validate[driver_tsan-3], real threads) the C driver's
    concurrent mode traced thread 3's sweep reaching page 235 (`sweep_page ... held`, lin 6609)
    before thread 2's `abandon` of it (lin 6681). The cause was the C reference's
    linearization: mi_heap_abandon put the page in the abandoned map and wrote its event in
    two steps, so a sweep could take the page from the map in between (fixed: one lin step,
    and the sweep's snapshot of the map under lin_lock; the test below holds the window
    open). The validator must keep rejecting this trace at that event; fails if a change to
    the model or the validator let a sweep take a page of another heap."""
    import gzip
    path = tmp_path / "run.jsonl"
    from pathlib import Path
    stored = Path(__file__).parent / "data" / "regressions" / "concurrent-tsan-3-foreign-sweep.jsonl.gz"
    path.write_bytes(gzip.decompress(stored.read_bytes()))
    v = validate_file(str(path))
    assert not v.accepted and v.line == 6611
    assert "the sweep of thread 3 reaches page 235, owned by thread 2" in v.why


@pytest.mark.parametrize("build", ["release", "tsan"])
def test_a_sweep_of_an_abandoned_page_follows_its_abandon(tmp_path, build):
    """The cause of the regression case above, held open: with 2 ms between a page's entry
    in the abandoned map and its `abandon` event, the other threads' sweeps run into the
    window many times. The trace must validate: the entry and the event are one lin step and
    the sweepers snapshot the map under lin_lock. Fails with the entry published outside the
    step (6ff8baa's heap.c and sweep.c, checked by hand on 2026-12-05: rejected at "the sweep
    of thread 1 reaches page 1, owned by thread 2" in 2 of 2 runs, one per build)."""
    import json
    from purgecheck.conformance import abandon_window_script, run_linearized
    path = tmp_path / "run.jsonl"
    proc = run_linearized(abandon_window_script(2000), path, build=build)
    assert proc.returncode == 0, proc.stderr[-2000:]
    v = validate_file(str(path))
    assert v.accepted, f"{v.source}:{v.line}: {v.why}"
    events = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert sum(e["ev"] == "abandon" for e in events) == 7   # 6 pages and `go`'s small page


def test_the_driver_refuses_a_negative_abandon_delay():
    proc = subprocess.run([str(BUILD_DIR / "driver"), "-"],
                          input=b"%options abandon_delay_us=-1\n1 malloc a 64\n",
                          capture_output=True)
    assert proc.returncode == 2
    assert b'"ev":"error","line":0,"msg":"abandon_delay_us: expected 0 or more"' in proc.stdout


def test_the_op_script_part_kills_the_abandon_outside_lin_step_mutant(tmp_path):
    """CF-LINEARIZED-RUNS (the validate engine's op-script part) holds on the clean C
    reference and fails under the C switch abandon_outside_lin_step (the abandoned map's entry
    and its event in two lin steps): the abandon-window script's trace is rejected at a sweep
    of a page that, in lin order, is still another heap's."""
    from purgecheck.engines.validate import run_op_scripts
    clean = run_op_scripts(tmp_path, 1, None)
    assert clean.ok, clean.detail
    broken = run_op_scripts(tmp_path, 1, "abandon_outside_lin_step")
    assert not broken.ok
    assert broken.detail.startswith("script abandon-window: the trace was rejected")
    assert "owned by thread 2" in broken.detail
