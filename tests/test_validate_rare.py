"""Issue 20's rare paths and the walk on real threads, run by the C reference and validated on
the model (reference_c/stress scenarios fork, clock-back and walks: stress_fork.c,
stress_clock_back.c, stress_walks.c; docs/validation.md).

Seed 000 (2): "A fork that lands while another thread holds the mark: the child records a new
beginning (_mi_page_purge_holes_forked_child)"; digest 7: "a clock that went backwards
advances"; digest 3, steps 2 and 3: a unit goes when every block over it is free or purged,
and the kept blocks are pushed on a new head (reversed).

Each scenario's C checks hold on the clean build and its trace is one the model reproduces;
each broken C variant (the C switches of the mutants fork-child-keeps-moving,
clock-back-not-due, rebuild-keeps-order, purged-straddler-live) fails its C check and its
trace is rejected by the clean model. No check here is a timing bound: the fork is placed by
an injected delay, the clock step by the advance's own hook, the walks by the thread itself.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from purgecheck.conformance import BUILD_DIR
from purgecheck.engines.validate import RARE, run_stress
from purgecheck.validate import validate_file


@pytest.fixture(scope="module", autouse=True)
def built():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)


def accepted(path) -> int:
    v = validate_file(str(path))
    assert v.accepted, f"{v.source}:{v.line}: {v.why}\n" + "\n".join(v.state)
    return v.events


# the figure each clean run must reach, and the C check and rejection each broken one gives
CLEAN = {"fork": lambda s: s["forks_before_increment"] >= 3 and s["forks_after_increment"] >= 3
         and s["forks_quiet"] >= 1,
         "clock-back": lambda s: s["clock_backs"] == 3,
         "walks": lambda s: s["walks"] > 0}
BROKEN = [("fork", "fork_child_keeps_moving", "m", "the child still holds MOVING"),
          ("clock-back", "clock_back_not_due", "i", "before its advance finished (at cas)"),
          ("walks", "rebuild_keeps_order", "j", "the model takes the head of its free list"),
          ("walks", "purged_straddler_live", "k", "the model's walk of its free blocks")]


@pytest.mark.parametrize("scenario", list(CLEAN))
def test_clean_runs_hold_and_validate(tmp_path, scenario):
    run = run_stress(tmp_path, scenario=scenario, ms=80)
    assert run.returncode == 0, run.stderr
    assert set(run.summary["violations"].values()) == {0}, run.summary["violations"]
    assert CLEAN[scenario](run.summary), run.summary
    assert accepted(run.trace) > 0
    if scenario == "walks":  # every malloc's block is checked against the model's lists
        v = validate_file(str(run.trace))
        assert v.stats["blocks_checked"] == run.trace.read_text().count('"ev":"malloc"') > 0


@pytest.mark.parametrize("scenario,switch,check,why", BROKEN,
                         ids=[b[1] for b in BROKEN])
def test_broken_c_variant_fails_its_check_and_is_rejected(tmp_path, scenario, switch, check, why):
    run = run_stress(tmp_path, scenario=scenario, ms=80, mutant=switch)
    assert run.returncode == 1, run.stderr
    assert run.failed_checks == [check], run.summary["violations"]
    assert f"({check})" in run.stderr
    v = validate_file(str(run.trace))
    assert not v.accepted and why in v.why, v.why


def test_forks_land_on_both_sides_of_the_increment(tmp_path):
    """The forks made while a sweeper slept in its advance land between its won CAS and its
    increment (the child holds the old epoch) and between the increment and its store of the
    new start (the new epoch), three of each: the trace's lin order says so, and the child
    holds the epoch of the increments before the fork."""
    run = run_stress(tmp_path, scenario="fork", ms=40)
    s = run.summary
    assert s["forks_before_increment"] >= 3 and s["forks_after_increment"] >= 3, s
    events = [json.loads(line) for line in run.trace.read_text().splitlines()[1:]]
    by_lin = sorted((e for e in events if "lin" in e), key=lambda e: e["lin"])
    landed = {"cas": 0, "increment": 0}
    last, increments = None, 0
    for e in by_lin:
        if e["ev"] == "advance_step" and (e["pc"] in ("increment", "store_start")
                                          or (e["pc"] == "cas" and e["value"] is True)):
            last = e["pc"]
            increments += e["pc"] == "increment"
        elif e["ev"] == "fork" and e["moving"]:
            assert last in landed and e["start"] >= 0 and e["epoch"] == increments, (last, e)
            landed[last] += 1
    assert landed["cas"] >= s["forks_before_increment"], landed
    assert landed["increment"] >= s["forks_after_increment"], landed


def test_a_fork_run_that_never_finds_moving_fails(tmp_path):
    """(n): a run too short to fork while MOVING is held fails rather than passing without
    having reached the path."""
    run = run_stress(tmp_path, scenario="fork", ms=0, max_ms=0, traced=False)
    assert run.returncode == 1 and "n" in run.failed_checks, run.summary
    assert "(n) in 0 ms, 0 of 3 forks found MOVING held before a sweeper's increment" in run.stderr


def edit_first(path, pred, **fields) -> None:
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines[1:], 1):
        ev = json.loads(line)
        if pred(ev):
            ev.update(fields)
            lines[i] = json.dumps(ev, separators=(",", ":"))
            break
    else:
        raise AssertionError("no such event")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("moving,edit,why", [
    (True, {"epoch": 99}, "the model's forked child holds epoch"),
    (True, {"moving": False}, "the child found MOVING not held, but start is MOVING"),
    (False, {"start": 1}, "the model's forked child holds epoch"),
    (False, {"moving": True, "start": 1}, "the child found MOVING held, but start is"),
])
def test_linearized_fork_checks_reject_an_edited_child(tmp_path, moving, edit, why):
    """validate replays a linearized fork on the model's forked-child rule at the fork's
    place: a child holding another epoch or start, or a fork that misreports MOVING, is
    rejected (the clean trace is accepted first)."""
    run = run_stress(tmp_path, scenario="fork", ms=40)
    accepted(run.trace)
    edit_first(run.trace, lambda e: e["ev"] == "fork" and e["moving"] is moving, **edit)
    v = validate_file(str(run.trace))
    assert not v.accepted and v.event["ev"] == "fork" and why in v.why, v.why


def test_concurrent_driver_forks_validate(tmp_path):
    """The driver's fork op in its concurrent linearized mode is made under lin_lock too, so
    its child is judged exactly like stress's."""
    script = ("%options clock=real concurrent=1 linearize=1 interval=1\n1 malloc a 262144\n"
              "1 free a\n" + "1 idle\n2 fork\n" * 4)
    path = tmp_path / "run.jsonl"
    with open(path, "wb") as out:
        proc = subprocess.run([str(BUILD_DIR / "driver"), "-"], input=script.encode(),
                              stdout=out, stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text().count('"ev":"fork"') == 4
    accepted(path)


@pytest.mark.parametrize("scenario", list(CLEAN))
def test_rare_scenarios_under_tsan(tmp_path, scenario):
    run = run_stress(tmp_path, scenario=scenario, ms=40, build="tsan")
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    accepted(run.trace)


@pytest.mark.parametrize("mutant,invariant", [
    ("fork-child-keeps-moving", "EP-MOVING-HELD"), ("clock-back-not-due", "EP-BACK-IS-DUE"),
    ("rebuild-keeps-order", "PG-WALK-REVERSES"),
    ("purged-straddler-live", "PG-WALK-TAKES-EVERY-FREE-UNIT")])
def test_validate_engine_kills_issue_20s_mutants(mutant, invariant):
    """In the kill matrix the model is patched too, so the trace of a broken C variant may
    replay on the broken model: the C checks of the scenarios are what kill it there."""
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.matrix import KILLED, judge
    assert invariant in {i for checks in RARE.values() for i in checks}
    cell = judge(MUTANTS[mutant], "validate", quick=True, stop_early=True)
    assert cell.verdict == KILLED, cell.note
    failed = {f["invariant"]: f["detail"] for f in cell.failures}
    assert "C check (" in failed.get(invariant, ""), cell.failures


def test_bad_usage_of_the_new_options():
    from purgecheck.engines.validate import STRESS
    for args in (["--scenario", "forks"], ["--steps", "x"], ["--back-ms", "-1"]):
        proc = subprocess.run([str(STRESS["release"]), *args], capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.startswith("stress: "), proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("build", ["release", "tsan"])
@pytest.mark.parametrize("scenario", list(CLEAN))
def test_longer_runs_hold_and_validate(tmp_path, scenario, build):
    """Twenty forks on each side of the increment, twenty steps back, 1.5 s of walks."""
    run = run_stress(tmp_path, scenario=scenario, ms=1500, build=build, more=("--steps", "20"))
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    s = run.summary
    assert {"fork": min(s["forks_before_increment"], s["forks_after_increment"]) >= 20,
            "clock-back": s["clock_backs"] == 20,
            "walks": s["walks"] > 0}[scenario], s
    accepted(run.trace)
